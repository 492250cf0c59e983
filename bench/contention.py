#!/usr/bin/env python3
"""Decode speed when the cores are shared: quiet, then beside one CPU-bound
competitor per core, for tram and for llama.cpp on the same GGUF and threads.

The competitors are started here (busy loops, one process per CPU), so the
contended figure does not depend on what else runs on the machine; what
matters is the ratio contended / quiet of each engine.  Prints the markdown
report and writes it to CONTENTION_OUT.  Every knob is an environment
variable (see CONFIG).  Run: python3 bench/contention.py
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = {
    "CONTENTION_MODEL": "models/SmolLM2-135M-Instruct.Q4_1.gguf",
    "CONTENTION_THREADS": str(len(os.sched_getaffinity(0))),
    "CONTENTION_COMPETITORS": str(len(os.sched_getaffinity(0))),  # busy processes, one per CPU
    "CONTENTION_TOKENS": "128",       # decoded tokens per run
    "CONTENTION_RUNS": "3",           # runs per figure; the median is reported
    "CONTENTION_TRAM_FLAGS": "--weight-format native",
    "CONTENTION_LLAMA_VERSION": "0.3.36",
    "CONTENTION_NOTE": "",            # a sentence for the report (e.g. "measured under load")
    "CONTENTION_OUT": "bench/results/contention.md",
}


def conf(name):
    return os.environ.get(name, CONFIG[name])


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


class Competitors:
    """n CPU-bound processes for the duration of a with-block."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def __enter__(self):
        code = "while True:\n    pass\n"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.n)]
        time.sleep(0.5)  # let the scheduler spread them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        return False


def tram_decode_tok_s(model, threads, tokens, flags):
    """Decode tok/s of one `tram bench throughput` run: one request of a 1-token prompt, `tokens`
    tokens out; its output tok/s counts generation time only (not the model load)."""
    argv = [os.path.join(ROOT, "bin/tram"), "bench", "throughput", "-m", model, "-t", str(threads),
            "--num-prompts", "1", "--input-len", "1", "--output-len", str(tokens), "--no-peak"] + flags
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True, timeout=1800).stdout
    row = next(line for line in out.splitlines() if line.startswith("| batched"))
    return float(row.split("|")[4])


def llama_bench_path(version):
    return os.path.join(ROOT, f"bench/peers/llama-build-{version}/bin/llama-bench")


def llama_decode_tok_s(model, threads, tokens, version):
    """llama-bench's tg (decode from an empty context), one repetition."""
    argv = [llama_bench_path(version), "-m", model, "-t", str(threads), "-p", "0", "-n", str(tokens),
            "-r", "1", "-o", "json"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True, timeout=1800).stdout
    return statistics.median(json.loads(out)[0]["samples_ts"])


def engines(model, threads, tokens, flags, version):
    """name -> (function of nothing giving one decode tok/s figure), for the engines present."""
    found = {"tram": lambda: tram_decode_tok_s(model, threads, tokens, flags)}
    if os.path.exists(llama_bench_path(version)):
        found["llama.cpp"] = lambda: llama_decode_tok_s(model, threads, tokens, version)
    return found


def measure(fn, runs, competitors):
    """Median decode tok/s of `runs` runs, quiet (competitors 0) or beside that many busy processes."""
    fn()  # warm-up: the model in the page cache, the clocks up
    if not competitors:
        return statistics.median(fn() for _ in range(runs))
    with Competitors(competitors):
        return statistics.median(fn() for _ in range(runs))


def contention_rows(model, threads, competitors, tokens, runs, flags, version):
    """{engine: (quiet tok/s, contended tok/s)} for every engine found."""
    rows = {}
    for name, fn in engines(model, threads, tokens, flags, version).items():
        quiet = measure(fn, runs, 0)
        contended = measure(fn, runs, competitors)
        print(f"contention: {name}: quiet {quiet:.1f} tok/s, contended {contended:.1f} tok/s",
              file=sys.stderr, flush=True)
        rows[name] = (quiet, contended)
    return rows


def commit():
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def report(rows, model, threads, competitors, tokens, runs, flags, load_before, load_after):
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Decode with the cores shared",
        "",
        f"Made by `python3 bench/contention.py` on {now}, tram commit {commit()}.",
        "",
        f"- CPU: {cpu_name()}, {os.cpu_count()} CPUs, {threads} threads for each engine",
        f"- Model: `{model}`; tram flags `{' '.join(flags)}`; {tokens} tokens decoded per run, "
        f"median of {runs} runs after a warm-up",
        f"- Contended: {competitors} CPU-bound competitor processes (one per CPU) started by the script",
        f"- Load average (1/5/15 min) before: {load_before}; after: {load_after}",
    ]
    if conf("CONTENTION_NOTE"):
        lines.append(f"- {conf('CONTENTION_NOTE')}")
    lines += ["", "| engine | quiet decode tok/s | contended decode tok/s | contended ÷ quiet |",
              "|---|---:|---:|---:|"]
    for name, (quiet, contended) in rows.items():
        lines.append(f"| {name} | {quiet:.1f} | {contended:.1f} | {contended / quiet:.0%} |")
    if "llama.cpp" in rows:
        (tq, tc), (lq, lc) = rows["tram"], rows["llama.cpp"]
        lines.append(f"| tram ÷ llama.cpp | {tq / lq:.2f} | {tc / lc:.2f} | |")
    else:
        lines += ["", "llama.cpp: not measured (no llama-bench under bench/peers/; "
                  "`sh bench/compare_peers.sh` builds it)."]
    return "\n".join(lines) + "\n"


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    model, flags = conf("CONTENTION_MODEL"), conf("CONTENTION_TRAM_FLAGS").split()
    threads, competitors = int(conf("CONTENTION_THREADS")), int(conf("CONTENTION_COMPETITORS"))
    tokens, runs = int(conf("CONTENTION_TOKENS")), int(conf("CONTENTION_RUNS"))
    before = loadavg()
    rows = contention_rows(model, threads, competitors, tokens, runs, flags, conf("CONTENTION_LLAMA_VERSION"))
    text = report(rows, model, threads, competitors, tokens, runs, flags, before, loadavg())
    out = os.path.join(ROOT, conf("CONTENTION_OUT"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
