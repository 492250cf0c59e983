"""The soak with bombs mixed in, for minutes (bench/results/responsiveness.md;
tests/api/test_concurrency.py runs the same load for 20 s).

CLIENTS normal clients (completions and chats, streamed or not, 2-6
tokens) and BOMB_CLIENTS clients sending the bombs of tests/api/bombs.py at
SCALE, for SECONDS, /health polled every 50 ms.  Reported: replies, bad
replies, /health p50/p99/max, and the server's RSS before and after.

Starts its own server (bin/tram, the default model, --threads THREADS).
Environment: SECONDS (120), CLIENTS (48), BOMB_CLIENTS (3), SCALE (0.25),
THREADS (1), PORT."""
import http.client
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "api"))
from soak import pct, rss_bytes, run  # noqa: E402

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
NAME = os.path.splitext(os.path.basename(MODEL))[0]
THREADS = os.environ.get("THREADS", "1")
PORT = int(os.environ.get("PORT", "18762"))
SECONDS = float(os.environ.get("SECONDS", "120"))
CLIENTS = int(os.environ.get("CLIENTS", "48"))
BOMB_CLIENTS = int(os.environ.get("BOMB_CLIENTS", "3"))
SCALE = float(os.environ.get("SCALE", "0.25"))


def healthy():
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
        c.request("GET", "/health")
        return c.getresponse().status == 200
    except OSError:
        return False


def main():
    proc = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", str(PORT), "--threads", THREADS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not healthy():
            time.sleep(0.05)
        run(PORT, NAME, 5, clients=4, bomb_clients=1, scale=SCALE)  # warm
        time.sleep(2)
        start = rss_bytes(proc.pid)
        tally = run(PORT, NAME, SECONDS, clients=CLIENTS, bomb_clients=BOMB_CLIENTS, scale=SCALE)
        time.sleep(2)
        end = rss_bytes(proc.pid)
        h = tally.health
        print(f"{SECONDS:.0f} s, {CLIENTS} normal clients, {BOMB_CLIENTS} bomb clients at scale {SCALE}")
        print(f"replies: {tally.normal} normal, {tally.bombs} bombs {sorted(tally.bomb_status.items())}")
        print(f"bad replies: {len(tally.bad)} {tally.bad[:5]}")
        print(f"/health: {len(h)} polls, p50 {pct(h, 50) * 1000:.1f} ms, p99 {pct(h, 99) * 1000:.1f} ms, "
              f"max {max(h) * 1000:.1f} ms")
        print(f"RSS: {start / 2**20:.0f} MiB before, {end / 2**20:.0f} MiB after ({(end / start - 1) * 100:+.1f}%)")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
