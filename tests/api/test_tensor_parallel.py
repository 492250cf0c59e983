"""--tensor-parallel-size on the command line: refused sizes get one sentence
and exit code 2 on generate, serve and bench; an accepted size serves the same
greedy text as one rank, through the CLI and through the HTTP API."""
import os
import subprocess

import pytest

from conftest import BIN, MODEL, Server

# The default model has 9 attention heads and 3 KV heads: only 1 and 3 split it.
COMMANDS = {
    "generate": ["generate", "-p", "hi"],
    "serve": ["serve", "--port", "0"],
    "bench": ["bench", "throughput", "--num-prompts", "1"],
}


def tram(*args, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, timeout=timeout)


@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
def test_a_size_that_does_not_split_the_heads_exits_2(command):
    r = tram(*COMMANDS[command], "-m", MODEL, "--tensor-parallel-size", "2")
    assert r.returncode == 2, r.stderr
    first = r.stderr.decode().splitlines()[0]
    assert first.startswith("tram: --tensor-parallel-size: 2 ranks do not split this model's 9 attention heads")
    assert "sizes that do: 1, 3" in first


@pytest.mark.parametrize("value", ["0", "65", "two"])
def test_a_size_out_of_range_exits_2(value):
    r = tram(*COMMANDS["generate"], "-m", MODEL, "-tp", value)
    assert r.returncode == 2
    assert r.stderr.decode().startswith(f"tram: invalid value for -tp: '{value}'")


CUDA_BIN = os.path.join(os.path.dirname(BIN), "tram-cuda")


@pytest.mark.skipif(not os.path.exists(CUDA_BIN), reason="bin/tram-cuda is built by `make cuda`")
def test_more_ranks_than_gpus_exits_2():
    r = subprocess.run([CUDA_BIN, *COMMANDS["generate"], "-m", MODEL, "--device", "cuda", "-tp", "3"],
                       capture_output=True, timeout=120)
    first = r.stderr.decode().splitlines()[0] if r.stderr else ""
    if r.returncode == 0:
        pytest.skip("this machine has 3 usable GPUs")
    assert r.returncode == 2, r.stderr
    # with no usable GPU at all, bin/tram-cuda says so before parsing the flags
    assert first.startswith(("tram: --tensor-parallel-size: 3 ranks need 3 GPUs, one each",
                             "tram: no usable NVIDIA GPU")), first


def greedy(*flags):
    r = tram("generate", "-m", MODEL, "-p", "The capital of France is", "-n", "12", "--temperature", "0",
             "--threads", "2", *flags)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def test_three_ranks_generate_and_serve_the_text_of_one():
    expected = greedy()
    assert greedy("-tp", "3") == expected
    server = Server("--tensor-parallel-size", "3")
    try:
        status, _, body = server.post("/v1/completions", {
            "model": server.model, "prompt": "The capital of France is", "max_tokens": 12, "temperature": 0})
        assert status == 200, body
        assert body["choices"][0]["text"] + "\n" == expected  # generate ends its text with a newline
    finally:
        server.stop()
