"""The response cache's figures (bench/results/fleet.md):

1. latency of a hit against a miss: N distinct greedy requests (misses, each
   computed), then the same N again (hits), non-streamed, one at a time;
2. a workload with 10% repeated prompts through `tram bench serve`, with the
   cache on and off: throughput and TTFT.

Starts its own servers (bin/tram, the default model, --threads THREADS)."""
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

from health import wait_healthy  # bench/health.py

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
THREADS = os.environ.get("THREADS", "2")
PORT = int(os.environ.get("PORT", "18741"))
REQUESTS = int(os.environ.get("REQUESTS", "60"))
OUTPUT = 16
WORDS = ("river mountain lamp quiet orange seven garden window paper cloud stone music "
         "winter yellow market silver forest bridge candle ocean").split()


def serve(*flags):
    proc = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS,
                             *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_healthy(proc, PORT, interval=0.05)
    return proc


def get(path):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read()


def post(body):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    start = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    return time.perf_counter() - start, r.getheader("X-Tram-Cache")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def prompt(rng, n=24):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def hit_vs_miss(n=40, max_tokens=16):
    proc = serve("--response-cache", "deterministic")
    rng = random.Random(1)
    bodies = [{"prompt": prompt(rng), "max_tokens": max_tokens, "temperature": 0,
               "ignore_eos": True} for _ in range(n)]
    miss = [post(b) for b in bodies]
    hit = [post(b) for b in bodies]
    proc.terminate()
    proc.wait()
    assert all(s == "miss" for _, s in miss) and all(s == "hit" for _, s in hit)
    m, h = [t * 1000 for t, _ in miss], [t * 1000 for t, _ in hit]
    print(f"| miss (computed, {max_tokens} tokens) | {n} | {pct(m, 50):.2f} | {pct(m, 99):.2f} |")
    print(f"| hit (replayed) | {n} | {pct(h, 50):.3f} | {pct(h, 99):.3f} |")


def workload(path, n, repeats, seed=2):
    """n requests in a shuffled order; `repeats` of them ask a prompt asked
    earlier (once each, so none is asked three times)."""
    rng = random.Random(seed)
    unique = [prompt(rng, 48) for _ in range(n - repeats)]
    order = unique[:]
    for p in rng.sample(unique[: len(unique) // 2], repeats):  # asked again later
        order.insert(rng.randrange(order.index(p) + 1, len(order) + 1), p)
    with open(path, "w") as f:
        for p in order:
            f.write(json.dumps({"prompt": p, "max_tokens": OUTPUT}) + "\n")


def bench_serve(dataset, label, *flags):
    proc = serve(*flags)
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    subprocess.run([BIN, "bench", "serve", "--base-url", f"http://127.0.0.1:{PORT}",
                    "--dataset", dataset, "--num-prompts", str(REQUESTS), "--request-rate", "inf",
                    "--max-concurrency", "8", "--seed", "3", "--result-json", out,
                    "--label", label], check=True, stdout=subprocess.DEVNULL)
    status, metrics = get("/metrics")
    proc.terminate()
    proc.wait()
    with open(out) as f:
        r = json.load(f)
    os.unlink(out)
    hits = sum(float(l.rsplit(" ", 1)[1]) for l in metrics.decode().splitlines()
               if l.startswith(("tram:response_cache_hits_total", "tram:response_cache_coalesced_total")))
    return r, hits


def main():
    print("| requests | n | p50 (ms) | p99 (ms) |\n|---|---|---|---|")
    hit_vs_miss()
    dataset = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False).name
    workload(dataset, REQUESTS, REQUESTS // 10)
    print(f"\n{REQUESTS} requests, {REQUESTS // 10} of them repeating an earlier prompt; 48-word "
          f"prompts, {OUTPUT} output tokens, all sent at once, at most 8 in flight\n")
    print("| response cache | throughput (req/s) | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) "
          "| served from the cache |\n|---|---|---|---|---|---|")
    for label, flags in (("off", ()), ("deterministic", ("--response-cache", "deterministic"))):
        r, hits = bench_serve(dataset, label, *flags)
        print(f"| {label} | {r['request_throughput']:.2f} | {r['output_throughput']:.1f} | "
              f"{r['ttft_ms']['median']:.1f} | {r['ttft_ms']['p99']:.1f} | {hits:.0f} |")
    os.unlink(dataset)


if __name__ == "__main__":
    sys.exit(main())
