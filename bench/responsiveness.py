"""Responsiveness under request bombs (bench/results/responsiveness.md).

For each bomb of tests/api/bombs.py (a 32,000-rule forward GBNF chain, a
choice of 100,000 strings, 100,000 tiny messages, a 3.9 MB /tokenize body,
each times SCALE), one client sends the bomb while another sends the plain
8-token chat request one after another and a third polls /health every
20 ms.  Reported: the small request's median latency while the bomb is
being handled against its idle median (goal: at most 2x), and /health's p99
(goal: at most 50 ms).

Starts its own server (bin/tram, the default model, --threads THREADS).
Environment: SCALE (1.0), THREADS (1), PREP_THREADS (2), PORT, IDLE_RUNS (10)."""
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "api"))
from bombs import bombs, small_chat  # noqa: E402
from health import wait_healthy  # noqa: E402

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
NAME = os.path.splitext(os.path.basename(MODEL))[0]
THREADS = os.environ.get("THREADS", "1")
PREP_THREADS = os.environ.get("PREP_THREADS", "2")
PORT = int(os.environ.get("PORT", "18761"))
SCALE = float(os.environ.get("SCALE", "1.0"))
IDLE_RUNS = int(os.environ.get("IDLE_RUNS", "10"))


def request(method, path, body=None):
    """(status, seconds)."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
    start = time.perf_counter()
    c.request(method, path, body, {"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.perf_counter() - start


def serve():
    proc = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS,
                             "--prep-threads", PREP_THREADS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_healthy(proc, PORT, interval=0.05)
    return proc


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


SMALL = json.dumps(small_chat(NAME))


def under(path, body):
    """Sends one bomb; while it runs, small chats one at a time and /health
    every 20 ms.  Returns (bomb status, bomb seconds, small latencies, health
    latencies)."""
    done = threading.Event()
    bomb = {}
    health, small = [], []

    def run_bomb():
        bomb["status"], bomb["seconds"] = request("POST", path, body)
        done.set()

    def poll_health():
        while not done.is_set():
            health.append(request("GET", "/health")[1])
            time.sleep(0.02)

    threads = [threading.Thread(target=run_bomb), threading.Thread(target=poll_health)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # the bomb is being prepared
    while not done.is_set():
        status, seconds = request("POST", "/v1/chat/completions", SMALL)
        if not done.is_set():  # only those that ended while the bomb was still handled
            assert status == 200
            small.append(seconds)
    for t in threads:
        t.join()
    return bomb["status"], bomb["seconds"], small, health


def main():
    proc = serve()
    try:
        idle = statistics.median(request("POST", "/v1/chat/completions", SMALL)[1] for _ in range(IDLE_RUNS))
        print(f"idle small chat median: {idle * 1000:.0f} ms ({IDLE_RUNS} runs)")
        print("| bomb | body | bomb status | bomb s | small chats during it | small median ms | x idle | /health p99 ms | /health max ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, (path, body) in bombs(NAME, SCALE).items():
            data = json.dumps(body)
            status, seconds, small, health = under(path, data)
            med = statistics.median(small) if small else float("nan")
            print(f"| {name} | {len(data) / 1e6:.2f} MB | {status} | {seconds:.1f} | {len(small)} | "
                  f"{med * 1000:.0f} | {med / idle:.2f} | {pct(health, 99) * 1000:.1f} | "
                  f"{max(health) * 1000:.1f} |", flush=True)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
