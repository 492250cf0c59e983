#!/usr/bin/env python3
"""tram side by side with llama.cpp and transformers on this machine.

Runs the workloads of issue 8 on the same GGUF file for every engine, prints
one table (absolute numbers and tram ÷ peer ratios) and writes a markdown
report.  Peers come from bench/compare_peers.sh; `make compare` runs both.
Every knob is an environment variable (see CONFIG); COMPARE_QUICK=1 shrinks
every workload to a smoke run of a few minutes.
"""
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

import contention  # bench/contention.py: the busy competitors and the decode measurements
from health import free_port, wait_healthy  # bench/health.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = os.environ.get("COMPARE_QUICK") == "1"

# name: (default, quick default)
CONFIG = {
    "COMPARE_ENGINES": ("tram llama.cpp transformers", None),
    "COMPARE_MODEL": ("models/SmolLM2-135M-Instruct.Q4_1.gguf", None),
    "COMPARE_RUNS": ("3", "1"),                  # timed runs per figure; the median is reported
    "COMPARE_THREADS": (str(os.cpu_count()), None),
    "COMPARE_OFFLINE_PROMPTS": ("64 256", "8"),  # offline throughput: requests per run
    "COMPARE_INPUT_LEN": ("128", "32"),
    "COMPARE_OUTPUT_LEN": ("128", "16"),
    "COMPARE_PREFILL_LEN": ("512", "64"),        # single stream: prompt tokens for prefill tok/s
    "COMPARE_DECODE_LEN": ("128", "16"),         # single stream: tokens for decode tok/s
    "COMPARE_COMPETITORS": (str(os.cpu_count()), None),  # contention row: busy processes beside decode
    "COMPARE_SERVE_RATES": ("0.5 1 2", "1"),     # requests/s (Poisson)
    "COMPARE_SERVE_PROMPTS": ("24", "4"),
    "COMPARE_SERVE_INPUT_LEN": ("128", "32"),
    "COMPARE_SERVE_OUTPUT_LEN": ("64", "8"),
    "COMPARE_LLAMA_SLOTS": ("32", "4"),          # llama-server -np
    # closed-loop serving: this many clients, each sending its next request when its last one ends
    "COMPARE_CLOSED_CLIENTS": ("32", "4"),
    "COMPARE_CLOSED_PROMPTS": ("64", "8"),       # requests per run (2 per client)
    "COMPARE_CLOSED_INPUT_LEN": ("96", "32"),    # words
    "COMPARE_CLOSED_OUTPUT_LEN": ("128", "8"),
    # tram runs the GGUF's blocks as stored, with int8 activations: the scheme llama.cpp runs.
    # Engine flags, given to `tram bench throughput` and `tram serve` alike.
    "COMPARE_TRAM_FLAGS": ("--weight-format native", None),
    # transformers: offline sizes above this are left out (float32 eager PyTorch on 2 cores:
    # 3 runs of 256 requests would take about a third of the run's time budget)
    "COMPARE_HF_MAX_PROMPTS": ("64", None),
    # prompts per generate() call, 0: all N in one (its time is mostly GEMMs, which
    # favour more rows; the KV cache's per-step copies cost the same split or not)
    "COMPARE_HF_BATCH": ("0", None),
    "COMPARE_LLAMA_VERSION": ("0.3.36", None),   # llama-cpp-python sdist whose llama.cpp is built
    "COMPARE_NOTE": ("", None),                  # a sentence for the report (why settings differ, ...)
    "COMPARE_OUT": ("bench/results/compare-cpu.md", "build/compare/compare-quick.md"),
}


def conf(name):
    default, quick = CONFIG[name]
    return os.environ.get(name, quick if QUICK and quick is not None else default)


def ints(name):
    return [int(x) for x in conf(name).split()]


class Harness:
    def __init__(self):
        self.engines = conf("COMPARE_ENGINES").split()
        self.model = conf("COMPARE_MODEL")
        self.runs = int(conf("COMPARE_RUNS"))
        self.threads = int(conf("COMPARE_THREADS"))
        self.tram_flags = shlex.split(conf("COMPARE_TRAM_FLAGS"))
        version = conf("COMPARE_LLAMA_VERSION")
        self.llama_bin = os.path.join(ROOT, f"bench/peers/llama-build-{version}/bin")
        self.hf_python = os.path.join(ROOT, "bench/peers/venv/bin/python")
        self.commands = {}   # what -> the first exact command line run for it
        self.rows = []       # (group, metric, lower_is_better, {engine: value})
        self.missing = []    # (engine, what, why)
        self.versions = {}
        for e in ("tram",) + PEERS:
            if e not in self.engines:
                self.missing.append((e, "every row", "not in COMPARE_ENGINES for this run"))
        if "transformers" in self.engines:
            self.missing.append(("transformers", "serving", "transformers has no HTTP server of its own; "
                                 "a wrapper written for this harness would measure the wrapper"))
        os.makedirs(os.path.join(ROOT, "build/compare"), exist_ok=True)

    # ------------------------------------------------------------ running

    def run(self, what, argv, timeout=7200, merge=False):
        """stdout of argv (with stderr after it when merge: llama.cpp logs its tables there)."""
        self.commands.setdefault(what, " ".join(shlex.quote(a) for a in argv))
        print(f"compare: {what}: {' '.join(argv)}", file=sys.stderr, flush=True)
        p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if p.returncode:
            raise RuntimeError(f"{argv[0]} exited {p.returncode}: {(p.stderr or p.stdout)[-800:]}")
        return p.stdout + "\n" + p.stderr if merge else p.stdout

    def median_of_runs(self, what, fn):
        """fn() -> one figure; the median of self.runs calls (each engine warmed up before)."""
        vals = [fn() for _ in range(self.runs)]
        print(f"compare: {what}: runs {['%.2f' % v for v in vals]}", file=sys.stderr, flush=True)
        return statistics.median(vals)

    def add(self, group, metric, lower, engine, value):
        for g, m, lo, vals in self.rows:
            if g == group and m == metric:
                vals[engine] = value
                return
        self.rows.append((group, metric, lower, {engine: value}))

    def attempt(self, engine, what, fn):
        """Runs one engine's part; a failure becomes a missing row with its reason."""
        if engine not in self.engines:
            return
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- any failure is reported, the rest still runs
            why = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            print(f"compare: {engine} {what} FAILED: {e}", file=sys.stderr, flush=True)
            self.missing.append((engine, what, why[:300]))

    def offline_rows(self, engine, seconds):
        """One offline row per COMPARE_OFFLINE_PROMPTS size, from seconds(what, n, in_len, out_len)
        of one run (the median of self.runs)."""
        in_len, out_len = int(conf("COMPARE_INPUT_LEN")), int(conf("COMPARE_OUTPUT_LEN"))
        for n in ints("COMPARE_OFFLINE_PROMPTS"):
            def one(n=n):
                what = f"{engine} offline {n}"
                t = self.median_of_runs(what, lambda: seconds(what, n, in_len, out_len))
                self.add("offline", offline_metric(n, in_len, out_len), False, engine, n * out_len / t)
            self.attempt(engine, f"offline {n} requests", one)

    # ------------------------------------------------------------ tram

    def tram_bench(self, what, n, in_len, out_len):
        """Seconds of one `tram bench throughput` run (from its total tok/s, the column with
        the most digits).  --no-peak: build/bench/stream measures the floors once per run."""
        out = self.run(what, ["bin/tram", "bench", "throughput", "-m", self.model, "-t", str(self.threads),
                              "--num-prompts", str(n), "--input-len", str(in_len),
                              "--output-len", str(out_len), "--no-peak"] + self.tram_flags)
        row = next(line for line in out.splitlines() if line.startswith("| batched"))
        total_tok_s = float(row.split("|")[3])
        return n * (in_len + out_len) / total_tok_s

    def tram_warmup(self):
        """One small untimed run: the model file in the page cache, the CPU clocked up."""
        self.attempt("tram", "warm-up", lambda: self.tram_bench("tram warm-up", 4, 32, 8))

    def tram_offline(self):
        self.offline_rows("tram", self.tram_bench)

    def tram_single(self):
        pp, tg = int(conf("COMPARE_PREFILL_LEN")), int(conf("COMPARE_DECODE_LEN"))

        def prefill():
            t = self.median_of_runs("tram prefill", lambda: self.tram_bench("tram prefill", 1, pp, 1))
            self.add("single stream", f"prefill tok/s ({pp}-token prompt)", False, "tram", pp / t)

        def decode():
            # decode alone: a 1-token prompt with tg+1 tokens out, less the same with 1 out
            t_long = self.median_of_runs("tram decode", lambda: self.tram_bench("tram decode", 1, 1, tg + 1))
            t_short = self.median_of_runs("tram decode base", lambda: self.tram_bench("tram decode base", 1, 1, 1))
            self.add("single stream", f"decode tok/s ({tg} tokens)", False, "tram", tg / (t_long - t_short))

        self.attempt("tram", "single-stream prefill", prefill)
        self.attempt("tram", "single-stream decode", decode)

    # ------------------------------------------------------------ llama.cpp

    def llama_warmup(self):
        """llama-bench and llama-batched-bench warm up themselves; this warms the page cache."""
        self.attempt("llama.cpp", "warm-up", lambda: self.run("llama.cpp warm-up", [
            f"{self.llama_bin}/llama-batched-bench", "-m", self.model, "-t", str(self.threads),
            "-c", "512", "-npp", "32", "-ntg", "8", "-npl", "4"]))

    def llama_batched(self, what, n, in_len, out_len):
        """Seconds of one llama-batched-bench run: every sequence its own prompt (not shared), all n
        decoding together."""
        out = self.run(what, [f"{self.llama_bin}/llama-batched-bench", "-m", self.model,
                              "-t", str(self.threads), "-c", str(n * (in_len + out_len)),
                              "-b", "2048", "-ub", "512", "-npp", str(in_len),
                              "-ntg", str(out_len), "-npl", str(n)], merge=True)
        return batched_bench_seconds(out, in_len, out_len, n)

    def llama_offline(self):
        self.offline_rows("llama.cpp", self.llama_batched)

    def llama_single(self):
        pp, tg = int(conf("COMPARE_PREFILL_LEN")), int(conf("COMPARE_DECODE_LEN"))

        def one():
            # llama-bench warms up itself and reports each of its -r runs
            out = self.run("llama.cpp single stream", [f"{self.llama_bin}/llama-bench", "-m", self.model,
                                                       "-t", str(self.threads), "-p", str(pp), "-n", str(tg),
                                                       "-r", str(self.runs), "-o", "json"])
            for test in json.loads(out):
                ts = statistics.median(test["samples_ts"])
                if test["n_prompt"] and not test["n_gen"]:
                    self.add("single stream", f"prefill tok/s ({pp}-token prompt)", False, "llama.cpp", ts)
                elif test["n_gen"] and not test["n_prompt"]:
                    self.add("single stream", f"decode tok/s ({tg} tokens)", False, "llama.cpp", ts)
            self.versions["llama.cpp"] = f"build {test.get('build_number')} ({test.get('build_commit')})"
        self.attempt("llama.cpp", "single stream", one)

    # ------------------------------------------------------------ contention

    def contention(self, engine):
        """Single-stream decode beside one busy process per CPU (bench/contention.py), and its share of
        the same engine's quiet decode measured just before."""
        tg, busy = int(conf("COMPARE_DECODE_LEN")), int(conf("COMPARE_COMPETITORS"))
        version = conf("COMPARE_LLAMA_VERSION")
        fns = {"tram": lambda: contention.tram_decode_tok_s(self.model, self.threads, tg, self.tram_flags),
               "llama.cpp": lambda: contention.llama_decode_tok_s(self.model, self.threads, tg, version)}

        def one():
            self.commands.setdefault(f"{engine} contention", f"python3 bench/contention.py's measure() of {engine} "
                                     f"decode, {busy} busy processes ({tg} tokens, {self.threads} threads)")
            quiet = contention.measure(fns[engine], self.runs, 0)
            contended = contention.measure(fns[engine], self.runs, busy)
            print(f"compare: {engine} contention: quiet {quiet:.1f}, contended {contended:.1f} tok/s",
                  file=sys.stderr, flush=True)
            self.add("contention", f"decode tok/s beside {busy} busy processes", False, engine, contended)
            self.add("contention", "contended ÷ quiet decode", False, engine, contended / quiet)
        self.attempt(engine, "contention", one)

    # ------------------------------------------------------------ transformers

    def hf_all(self):
        in_len, out_len = int(conf("COMPARE_INPUT_LEN")), int(conf("COMPARE_OUTPUT_LEN"))
        pp, tg = int(conf("COMPARE_PREFILL_LEN")), int(conf("COMPARE_DECODE_LEN"))
        most = int(conf("COMPARE_HF_MAX_PROMPTS"))
        offline = {f"offline:{n}:{in_len}:{out_len}": n for n in ints("COMPARE_OFFLINE_PROMPTS") if n <= most}
        for n in ints("COMPARE_OFFLINE_PROMPTS"):
            if n > most and "transformers" in self.engines:
                self.missing.append(("transformers", f"offline {n} requests",
                                     f"left out (COMPARE_HF_MAX_PROMPTS={most}) to keep `make compare` within "
                                     f"its time budget: float32 eager PyTorch, {n / most:g}x the work of the "
                                     f"{most}-request row per run"))
        single = [f"single:{pp}:1", f"single:1:{tg + 1}", "single:1:1"]

        def one():
            out = self.run("transformers", [self.hf_python, "bench/compare_hf.py", "--gguf", self.model,
                                            "--runs", str(self.runs), "--threads", str(self.threads),
                                            "--batch", conf("COMPARE_HF_BATCH")]
                           + list(offline) + single, timeout=6 * 3600)
            res = json.loads(out.strip().splitlines()[-1])
            med = {k: statistics.median(v) for k, v in res.items() if k != "versions"}
            for w, n in offline.items():
                self.add("offline", offline_metric(n, in_len, out_len), False, "transformers",
                         n * out_len / med[w])
            self.add("single stream", f"prefill tok/s ({pp}-token prompt)", False, "transformers",
                     pp / med[single[0]])
            self.add("single stream", f"decode tok/s ({tg} tokens)", False, "transformers",
                     tg / (med[single[1]] - med[single[2]]))
            self.versions.update(res["versions"])
        self.attempt("transformers", "offline and single stream", one)

    # ------------------------------------------------------------ serving

    def serve(self, engine, argv, port):
        """Starts a server, measures every rate against it, stops it."""
        log = open(os.path.join(ROOT, f"build/compare/{engine}-server.log"), "w")
        self.commands.setdefault(f"{engine} server", " ".join(shlex.quote(a) for a in argv))
        srv = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(srv, port)
            self.serve_rates(engine, port)
        finally:
            os.killpg(srv.pid, signal.SIGTERM)
            try:
                srv.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(srv.pid, signal.SIGKILL)
                srv.wait()
            log.close()

    def bench_serve(self, engine, port, rate, n, seed, out_len, in_len=None, clients=None):
        path = os.path.join(ROOT, f"build/compare/{engine}-serve.json")
        closed = ["--max-concurrency", str(clients)] if clients else []
        self.run(f"{engine} bench serve" + (" closed loop" if clients else ""),
                 ["bin/tram", "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
                  "--request-rate", rate, "--num-prompts", str(n),
                  "--random-input-len", in_len or conf("COMPARE_SERVE_INPUT_LEN"),
                  "--random-output-len", str(out_len), "--seed", str(seed), "--result-json", path] + closed)
        with open(path) as f:
            s = json.load(f)
        if s["failed"]:
            raise RuntimeError(f"{s['failed']} of {n} requests failed: {s['errors']}")
        return s

    def serve_rates(self, engine, port):
        n, out_len = int(conf("COMPARE_SERVE_PROMPTS")), int(conf("COMPARE_SERVE_OUTPUT_LEN"))
        self.bench_serve(engine, port, "inf", 4, 999, 8)  # warm-up
        seed = 0
        for rate in conf("COMPARE_SERVE_RATES").split():
            runs = []
            for _ in range(self.runs):  # a new seed each run: no prefix-cache hits on a rerun's prompts
                seed += 1
                runs.append(self.bench_serve(engine, port, rate, n, seed, out_len))
            group = f"serving {rate} req/s"
            for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL")):
                for stat, label in (("median", "p50"), ("p99", "p99")):
                    self.add(group, f"{name} {label} (ms)", True, engine,
                             statistics.median(r[key][stat] for r in runs))
            self.add(group, "output tok/s", False, engine, statistics.median(r["output_throughput"] for r in runs))
        self.serve_closed_loop(engine, port, seed)

    def serve_closed_loop(self, engine, port, seed):
        """The closed loop: every client streams a completion and sends the next as soon as it ends, so the
        figure is the server's sustained output rate with that many requests always in flight."""
        clients, n = int(conf("COMPARE_CLOSED_CLIENTS")), int(conf("COMPARE_CLOSED_PROMPTS"))
        in_len, out_len = conf("COMPARE_CLOSED_INPUT_LEN"), int(conf("COMPARE_CLOSED_OUTPUT_LEN"))
        runs = [self.bench_serve(engine, port, "inf", n, seed + 1 + i, out_len, in_len, clients)
                for i in range(self.runs)]
        group = f"serving, closed loop of {clients} clients ({in_len} words in / {out_len} out)"
        self.add(group, "output tok/s", False, engine, statistics.median(r["output_throughput"] for r in runs))
        self.add(group, "TPOT p50 (ms)", True, engine, statistics.median(r["tpot_ms"]["median"] for r in runs))

    def tram_serve(self):
        port = free_port()
        self.attempt("tram", "serving", lambda: self.serve("tram", [
            "bin/tram", "serve", "-m", self.model, "--port", str(port), "-t", str(self.threads),
            "--log-level", "warning"] + self.tram_flags, port))

    def llama_serve(self):
        port = free_port()
        slots = int(conf("COMPARE_LLAMA_SLOTS"))
        per_slot = max(2 * int(conf(f"COMPARE_{w}_INPUT_LEN")) + int(conf(f"COMPARE_{w}_OUTPUT_LEN"))
                       for w in ("SERVE", "CLOSED"))  # 2 tokens a word at most
        ctx = slots * per_slot
        self.attempt("llama.cpp", "serving", lambda: self.serve("llama.cpp", [
            f"{self.llama_bin}/llama-server", "-m", self.model, "--host", "127.0.0.1", "--port", str(port),
            "-t", str(self.threads), "-np", str(slots), "-c", str(ctx), "--cont-batching"], port))


# ---------------------------------------------------------------- helpers

def offline_metric(n, in_len, out_len):
    return f"{n} requests {in_len} in / {out_len} out: output tok/s"


def batched_bench_seconds(out, in_len, out_len, n):
    """T s of llama-batched-bench's table row for (PP, TG, B)."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and cells[:3] == [str(in_len), str(out_len), str(n)]:
            return float(cells[8])
    raise RuntimeError(f"llama-batched-bench printed no row for {in_len}/{out_len}/{n}: {out[-400:]}")


def sh(cmd):
    return subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True).stdout.strip()


def machine():
    floors = json.loads(sh("build/bench/stream") or "{}")
    mem_kb = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1))
    return {"cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
            "cores": os.cpu_count(), "mem_gib": mem_kb / 2**20, "floors": floors,
            "flags": " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16")
                              if f in open("/proc/cpuinfo").read().split())}


# ---------------------------------------------------------------- report

PEERS = ("llama.cpp", "transformers")


def fmt(v):
    if v is None:
        return "—"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def table(h):
    head = "| workload | metric | tram | llama.cpp | transformers | tram ÷ llama.cpp | tram ÷ transformers |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|"]
    for group, metric, lower, vals in h.rows:
        t = vals.get("tram")
        ratios = [f"{t / vals[p]:.2f}" if t and vals.get(p) else "—" for p in PEERS]
        arrow = "↓" if lower else "↑"
        lines.append(f"| {group} | {metric} {arrow} | {fmt(t)} | {fmt(vals.get('llama.cpp'))} | "
                     f"{fmt(vals.get('transformers'))} | {' | '.join(ratios)} |")
    return "\n".join(lines)


def report(h, m, load_before, load_after, started, seconds):
    f = m["floors"]
    hf_batch = "all N" if conf("COMPARE_HF_BATCH") == "0" else f"at most {conf('COMPARE_HF_BATCH')} of the N"
    commit = sh("git rev-parse --short HEAD") + (" (uncommitted changes in the tree)" if sh("git status --porcelain -uno") else "")
    cfg = " ".join(f"{k}={shlex.quote(conf(k))}" for k in CONFIG if k not in ("COMPARE_OUT", "COMPARE_NOTE"))
    out = [
        "# tram beside llama.cpp and transformers (CPU)",
        "",
        f"Made by `make compare` ({'COMPARE_QUICK=1, ' if QUICK else ''}{seconds / 60:.0f} min) on "
        f"{started:%Y-%m-%d %H:%M} UTC, tram commit {commit}.",
        "",
    ] + ([conf("COMPARE_NOTE"), ""] if conf("COMPARE_NOTE") else []) + [
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores ({m['flags']}), {m['mem_gib']:.1f} GiB memory",
        f"- Measured in this run by `build/bench/stream` ({f.get('threads')} threads): memory bandwidth "
        f"copy {f.get('copy_gbs')} GB/s, triad {f.get('triad_gbs')} GB/s; OpenBLAS sgemm peak "
        f"{f.get('sgemm_gflops')} GFLOP/s",
        f"- Load average (1/5/15 min) before: {load_before}; after: {load_after}. The machine is shared "
        "with other jobs (builds, tests): every engine saw the same noisy neighbours, but absolute numbers "
        "are lower and noisier than on an idle machine.",
        "",
        "## Versions",
        "",
        f"- tram: {commit}, flags: {conf('COMPARE_TRAM_FLAGS') or '(defaults: f32 weights dequantized at load)'}",
        f"- llama.cpp: {h.versions.get('llama.cpp', '?')}, vendored by llama-cpp-python "
        f"{conf('COMPARE_LLAMA_VERSION')} (PyPI sdist), built CPU-only, Release, GGML_NATIVE=ON",
        f"- transformers {h.versions.get('transformers', '?')}, torch {h.versions.get('torch', '?')} "
        "(float32, weights dequantized from the same GGUF)",
        "",
        "## Results",
        "",
        f"Model: `{h.model}` for every engine. Each figure is the median of {h.runs} timed run(s) after a "
        f"warm-up; {h.threads} threads everywhere. ↑ higher is better, ↓ lower is better; ratios are "
        "tram ÷ peer (for ↓ rows a ratio below 1 means tram is ahead).",
        "",
        table(h),
        "",
    ]
    if h.missing:
        out += ["Missing rows:", ""] + [f"- {e}, {w}: {why}" for e, w, why in h.missing] + [""]
    out += [
        "Batch settings: tram defaults (`--max-num-seqs 256 --max-num-batched-tokens 2048`, every request "
        "admitted at once, chunked prefill); llama.cpp `llama-batched-bench -b 2048 -ub 512` with all N "
        "sequences decoding together and `-c` sized to hold them; transformers `generate()` (greedy, dynamic "
        "KV cache, SDPA attention, float32, `torch.inference_mode`, `torch.set_num_threads` as above, "
        f"`GOMP_SPINCOUNT=10000` as bin/tram sets for itself) over {hf_batch} prompts per call (equal "
        f"lengths, no padding), offline up to {conf('COMPARE_HF_MAX_PROMPTS')} requests. "
        "Single-stream decode: llama-bench's tg (empty context); tram "
        "and transformers: a 1-token prompt with N+1 tokens out less the same with 1 token out. Contention: "
        f"single-stream decode ({conf('COMPARE_DECODE_LEN')} tokens) quiet, then beside "
        f"{conf('COMPARE_COMPETITORS')} CPU-bound processes started by the harness (bench/contention.py); "
        "tram's figure is its output tok/s for a 1-token prompt. Serving: "
        "`tram bench serve` (Poisson arrivals, streaming /v1/completions, greedy, ignore_eos, "
        f"{conf('COMPARE_SERVE_PROMPTS')} prompts of {conf('COMPARE_SERVE_INPUT_LEN')} random words, "
        f"{conf('COMPARE_SERVE_OUTPUT_LEN')} tokens out) against each server; the closed loop: "
        f"`--max-concurrency {conf('COMPARE_CLOSED_CLIENTS')}` clients sending "
        f"{conf('COMPARE_CLOSED_PROMPTS')} requests of {conf('COMPARE_CLOSED_INPUT_LEN')} words, "
        f"{conf('COMPARE_CLOSED_OUTPUT_LEN')} tokens out, each as soon as its last ended; llama-server with "
        f"`-np {conf('COMPARE_LLAMA_SLOTS')} --cont-batching`.",
        "",
        "## Commands",
        "",
        f"Settings: `{cfg}`",
        "",
        "```",
    ] + [f"# {what}\n{cmd}" for what, cmd in h.commands.items()] + ["```", ""]
    return "\n".join(out)


def main():
    started = datetime.now(timezone.utc)
    t0 = time.time()
    load_before = sh("cut -d' ' -f1-3 /proc/loadavg")
    m = machine()
    print(f"compare: machine {json.dumps(m)}; load {load_before}", file=sys.stderr, flush=True)
    h = Harness()
    h.tram_warmup()
    h.llama_warmup()
    h.tram_single()
    h.llama_single()
    h.contention("tram")
    h.contention("llama.cpp")
    h.tram_offline()
    h.llama_offline()
    h.tram_serve()
    h.llama_serve()
    h.hf_all()
    load_after = sh("cut -d' ' -f1-3 /proc/loadavg")
    text = report(h, m, load_before, load_after, started, time.time() - t0)
    path = os.path.join(ROOT, conf("COMPARE_OUT"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print("\n" + table(h))
    for e, w, why in h.missing:
        print(f"missing: {e}, {w}: {why}")
    print(f"\nwrote {conf('COMPARE_OUT')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
