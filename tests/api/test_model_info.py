"""`tram info` names the row of models/arch.c each fixture GGUF loads as: a
Mistral is llama.cpp's llama, a llama file with experts a Mixtral."""
import subprocess

import pytest

from conftest import BIN

ROWS = [("arch/llama.gguf", "llama (LlamaForCausalLM"), ("arch/mistral.gguf", "llama (LlamaForCausalLM"),
        ("arch/qwen2.gguf", "qwen2 (Qwen2ForCausalLM"), ("arch/qwen3.gguf", "qwen3 (Qwen3ForCausalLM"),
        ("moe/mixtral.gguf", "mixtral (MixtralForCausalLM"), ("moe/qwen2moe.gguf", "qwen2moe (Qwen2MoeForCausalLM")]


@pytest.mark.parametrize("path,family", ROWS)
def test_info_names_the_family(path, family):
    out = subprocess.run([BIN, "info", "tests/fixtures/" + path], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("family"))
    assert line.split(None, 1)[1].startswith(family), line
