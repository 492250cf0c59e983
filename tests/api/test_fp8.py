"""An FP8 (W8A8, E4M3) file from `tram quantize --format fp8`, served.

The default model quantized to FP8 is served on its own port and answers
greedily what the f32 session server answers (the first words of a factual
completion); quantize refuses what FP8 does not take (--calib).
"""
import os
import subprocess
import tempfile

import pytest

from conftest import BIN, MODEL, Server

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def fp8_server():
    with tempfile.TemporaryDirectory(prefix="tram-fp8-") as d:
        path = os.path.join(d, "model-fp8.gguf")
        run = subprocess.run([BIN, "quantize", "-m", MODEL, "-o", path, "--format", "fp8"], capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert "FP8 W8A8" in run.stderr
        s = Server(model=path)
        yield s
        assert s.stop() == 0, s.final_log


def greedy(server, n=8):
    status, _, body = server.post("/v1/completions", {"model": server.model, "prompt": PROMPT, "max_tokens": n,
                                                      "temperature": 0})
    assert status == 200, body
    return body["choices"][0]["text"]


def test_fp8_file_answers_as_the_f32_model_does(fp8_server, server):
    fp8, f32 = greedy(fp8_server), greedy(server)
    assert fp8.strip(), "the FP8 model produced no text"
    assert fp8.split()[0] == f32.split()[0], (fp8, f32)


def test_quantize_fp8_refuses_calibration(tmp_path):
    run = subprocess.run([BIN, "quantize", "-m", MODEL, "-o", str(tmp_path / "x.gguf"), "--format", "fp8",
                          "--calib", "tests/fixtures/int8/calib.txt"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "--calib" in run.stderr and "fp8" in run.stderr, run.stderr
    assert not (tmp_path / "x.gguf").exists()
