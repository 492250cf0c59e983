"""Embeddings throughput (bench/results/embed.md): POST /v1/embeddings at
batch 1 (one input per request, one request at a time) and batch 64 (64
inputs per request), inputs/s and prompt tokens/s, for tram and, beside it,
llama.cpp's `llama-server --embedding` on the same GGUF with the same
pooling and threads (when bench/peers/ has it: `ln -s /work/peers bench/peers`,
or sh bench/compare_peers.sh).

    python3 bench/embed.py            # prints the table in its markdown form

Environment: MODEL (the default model), THREADS (2), POOLING (last),
WORDS_PER_INPUT (48), ROW_SECONDS (8: each row sends requests for this long,
one at least), LLAMA_SERVER (the peer binary).  Starts and stops its own
servers; a few minutes in all."""
import http.client
import json
import os
import random
import subprocess
import sys
import time

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
THREADS = os.environ.get("THREADS", "2")
POOLING = os.environ.get("POOLING", "last")
WORDS_PER_INPUT = int(os.environ.get("WORDS_PER_INPUT", "48"))
ROW_SECONDS = float(os.environ.get("ROW_SECONDS", "8"))
LLAMA_SERVER = os.environ.get("LLAMA_SERVER", "bench/peers/llama-build-0.3.36/bin/llama-server")
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


def wait_ready(proc):
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready")


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
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(proc)
        return [(name, b, *measure(b)) for b in (1, 64)]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    rows = run("tram (--weight-format native)",
               [BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS, "--pooling", POOLING,
                "--weight-format", "native"])
    rows += run("tram (f32)", [BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS,
                               "--pooling", POOLING])
    if os.path.exists(LLAMA_SERVER):
        # one slot per input of a batch, so that llama.cpp batches them as tram does
        rows += run("llama.cpp llama-server --embedding",
                    [LLAMA_SERVER, "-m", MODEL, "--port", str(PORT), "--embedding", "--pooling", POOLING,
                     "-t", THREADS, "-c", "8192", "-np", "64", "-b", "2048", "-ub", "2048"])
    else:
        print(f"(no {LLAMA_SERVER}: llama.cpp's rows left out)", file=sys.stderr)
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if l.startswith("Model name")), "?")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# Embeddings throughput\n\n`python3 bench/embed.py`: {os.path.basename(MODEL)}, pooling {POOLING}, "
          f"{THREADS} threads, inputs of {WORDS_PER_INPUT} words, {ROW_SECONDS:g} s a row; CPU {cpu}; "
          f"commit {commit}; {time.strftime('%Y-%m-%d')}.\n")
    print("| server | batch | inputs/s | tokens/s |\n|---|---|---|---|")
    for name, batch, ips, tps in rows:
        print(f"| {name} | {batch} | {ips:.1f} | {tps:.0f} |")


if __name__ == "__main__":
    main()
