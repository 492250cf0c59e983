"""Embeddings throughput (bench/results/embed.md): POST /v1/embeddings at
batch 1 (one input per request, one request at a time) and batch 64 (64
inputs per request), inputs/s and prompt tokens/s, for tram and, beside it,
llama.cpp's `llama-server --embedding` on the same GGUF with the same
pooling and threads (when bench/peers/ has it: `ln -s /work/peers bench/peers`,
or sh bench/compare_peers.sh), and the compute floor: the prefill GEMMs'
FLOPs a token (`tram bench roofline`'s prefill table) at the GEMM peaks that
run measures.

    python3 bench/embed.py            # prints the table in its markdown form

Environment: MODEL (the default model), THREADS (2), POOLING (last),
WORDS_PER_INPUT (48), ROW_SECONDS (8: each row sends requests for this long,
one at least), LLAMA_SERVER (the peer binary), LLAMA_EXTRA (more of its
flags).  Starts and stops its own servers; a few minutes in all.

llama-server is tried in the configurations of LLAMA_CONFIGS, in order,
until one serves: the 0.3.36 build exited with SIGSEGV right after init on
SmolLM2 with `-np 64 -ub 2048` (and with `-np 8`), so the table names the
configuration whose rows it shows, and stderr each failure's log."""
import http.client
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

from health import wait_healthy  # bench/health.py

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
THREADS = os.environ.get("THREADS", "2")
POOLING = os.environ.get("POOLING", "last")
WORDS_PER_INPUT = int(os.environ.get("WORDS_PER_INPUT", "48"))
ROW_SECONDS = float(os.environ.get("ROW_SECONDS", "8"))
LLAMA_SERVER = os.environ.get("LLAMA_SERVER", "bench/peers/llama-build-0.3.36/bin/llama-server")
LLAMA_EXTRA = os.environ.get("LLAMA_EXTRA", "").split()   # more llama-server flags
# one slot per input of a batch, so that llama.cpp batches them as tram does;
# then without the warm-up decode, then one slot with a physical batch as large
LLAMA_CONFIGS = [
    ["-c", "8192", "-np", "64", "-b", "2048", "-ub", "2048"],
    ["-c", "8192", "-np", "64", "-b", "2048", "-ub", "2048", "--no-warmup"],
    ["-c", "4096", "-np", "1", "-b", "4096", "-ub", "4096", "--no-warmup"],
]
PORT = int(os.environ.get("PORT", "18761"))
WORDS = ("river mountain lamp quiet orange seven garden window paper cloud stone music "
         "winter yellow market silver forest bridge candle ocean").split()


def post(body, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        conn.request("POST", "/v1/embeddings", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{r.status}: {data[:300]!r}")
        return json.loads(data)
    finally:
        conn.close()


def inputs(n, rng):
    return [" ".join(rng.choice(WORDS) for _ in range(WORDS_PER_INPUT)) + f" #{i}" for i in range(n)]


def measure(batch):
    """(inputs/s, tokens/s) over ROW_SECONDS of requests of `batch` distinct inputs."""
    rng = random.Random(batch)
    post({"input": inputs(1, rng), "encoding_format": "float"})   # warm
    n_inputs = n_tokens = 0
    t0 = time.time()
    while time.time() - t0 < ROW_SECONDS or n_inputs == 0:
        reply = post({"input": inputs(batch, rng), "encoding_format": "float"})
        assert len(reply["data"]) == batch
        n_inputs += batch
        n_tokens += reply["usage"]["prompt_tokens"]
    dt = time.time() - t0
    return n_inputs / dt, n_tokens / dt


def run(name, cmd):
    """The rows of one server; a server that fails says why on stderr and in its rows."""
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(proc, PORT, limit=300)
            return [(name, b, *measure(b)) for b in (1, 64)]
        except (RuntimeError, OSError, http.client.HTTPException) as e:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-3000:]
            print(f"{name}: {e}; its log ends:\n{tail}", file=sys.stderr)
            status = proc.poll()
            return [(f"{name}: failed ({e if status is None else f'exit status {status}'})", b, None, None)
                    for b in (1, 64)]
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)


def floors():
    """(GEMM GFLOP a token, {peak name: GFLOP/s}) from one `tram bench roofline` run of an input's length."""
    out = subprocess.run([BIN, "bench", "roofline", "-m", MODEL, "-t", THREADS, "--context", str(WORDS_PER_INPUT),
                          "--steps", "1"], capture_output=True, text=True, check=True).stdout
    peaks = {"OpenBLAS sgemm": float(re.search(r"OpenBLAS sgemm peak ([\d.]+) GFLOP/s", out).group(1)),
             "tram's block GEMM": float(re.search(r"block GEMM in cache ([\d.]+) GFLOP/s", out).group(1))}
    prefill = out.split("### Prefill, ", 1)[1].split("###", 1)[0]
    tokens = int(prefill.split(" ", 1)[0])
    gflop = 0.0
    for line in prefill.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        # embeddings compute no logits: lm_head is not theirs
        if cells[0].startswith("GEMM") and "lm_head" not in cells[0]:
            gflop += float(cells[6])
    return gflop / tokens, peaks


def main():
    rows = run("tram (--weight-format native)",
               [BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS, "--pooling", POOLING,
                "--weight-format", "native"])
    rows += run("tram (f32)", [BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS,
                               "--pooling", POOLING])
    if os.path.exists(LLAMA_SERVER):
        for flags in LLAMA_CONFIGS:
            peer = run("llama.cpp llama-server --embedding " + " ".join(flags),
                       [LLAMA_SERVER, "-m", MODEL, "--port", str(PORT), "--embedding", "--pooling", POOLING,
                        "-t", THREADS] + flags + LLAMA_EXTRA)
            rows += peer
            if peer[0][2] is not None:
                break
    else:
        print(f"(no {LLAMA_SERVER}: llama.cpp's rows left out)", file=sys.stderr)
    per_token, peaks = floors()
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if l.startswith("Model name")), "?")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# Embeddings throughput\n\n`python3 bench/embed.py`: {os.path.basename(MODEL)}, pooling {POOLING}, "
          f"{THREADS} threads, inputs of {WORDS_PER_INPUT} words, {ROW_SECONDS:g} s a row; CPU {cpu}; "
          f"commit {commit}; {time.strftime('%Y-%m-%d')}.\n")
    print("| server | batch | inputs/s | tokens/s |\n|---|---|---|---|")
    for name, batch, ips, tps in rows:
        print(f"| {name} | {batch} | {ips:.1f} | {tps:.0f} |" if ips else f"| {name} | {batch} | — | — |")
    rows_of = {"OpenBLAS sgemm": "the f32 rows", "tram's block GEMM": "the native rows"}
    limits = "; ".join(f"{name}'s {peak:.1f} GFLOP/s gives {peak / per_token:.0f} tokens/s ({rows_of[name]})"
                       for name, peak in peaks.items())
    print(f"\nThe compute floor: the prefill GEMMs cost {per_token:.3f} GFLOP a token; at the peaks measured "
          f"in this run (`tram bench roofline`), {limits}.")


if __name__ == "__main__":
    main()
