"""bench/structured.sh's driver: the mask-time comparison and the throughput
cost of constrained decoding; writes bench/results/structured.md.

Mask time: a set of schemas (12 from the test corpus, 4 written here) is
run once through `tram generate` at temperature 0 to get one token
sequence per schema; tram (bench_grammar), XGrammar and llguidance then
replay the same sequences on the same 49,152-token vocabulary, timing the
mask of every step.  Throughput: 32 requests at once through `tram
generate --input`, free against constrained, the same prompt and
max_tokens, timed from the wall clock less a one-token run's start-up.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_PY = os.path.join(ROOT, "bench", "peers", "venv", "bin", "python")
TRAM = os.path.join(ROOT, "bin", "tram")
TOOL = os.path.join(ROOT, "build", "bench_grammar")
PROMPT = [{"role": "user", "content": "Reply with one JSON value and nothing else."}]

HANDWRITTEN = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5}},
        "required": ["name", "age", "email", "tags"]},
    "free-text": {"type": "object", "properties": {"summary": {"type": "string"}, "keywords": {
        "type": "array", "items": {"type": "string"}}}, "required": ["summary", "keywords"]},
    "order": {"$defs": {"item": {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                                                                  "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                                                                  "price": {"type": "number", "minimum": 0}},
                                 "required": ["sku", "qty", "price"]}},
              "type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                               "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 4},
                                               "status": {"enum": ["new", "paid", "shipped"]}},
              "required": ["id", "items", "status"]},
    "event": {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                               "where": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]},
                                               "attendees": {"type": "integer", "minimum": 0}},
              "required": ["when", "where", "attendees"]},
}


def generate(lines, threads):
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(src, "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in lines)
        t0 = time.perf_counter()
        subprocess.run([TRAM, "generate", "--input", src, "--output", dst, "--threads", str(threads)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        return [json.loads(x) for x in open(dst)], wall


def workload():
    corpus = json.load(open(os.path.join(ROOT, "tests", "fixtures", "schemas", "corpus.json")))
    schemas = [(e["name"], e["schema"]) for e in corpus[::18]][:12] + list(HANDWRITTEN.items())
    lines = [{"messages": PROMPT, "max_tokens": 200, "temperature": 0,
              "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": s}}}
             for _, s in schemas]
    outs, _ = generate(lines, os.cpu_count())
    return [{"name": n, "schema": s, "token_ids": o["token_ids"]} for (n, s), o in zip(schemas, outs)
            if o.get("finish_reason") == "stop"]


def run_lines(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def throughput(threads, rounds=2):
    """Free and constrained runs alternate, `rounds` of each; the fastest of each counts."""
    long_schema = {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 24, "maxItems": 24}
    base = {"messages": PROMPT, "max_tokens": 64, "temperature": 1.0, "ignore_eos": True}
    runs = {"free": [dict(base, seed=i) for i in range(32)],
            "constrained": [dict(base, seed=i, response_format={"type": "json_schema", "json_schema": {
                "name": "l", "schema": long_schema}}) for i in range(32)]}
    _, startup = generate([dict(base, max_tokens=1)], threads)
    result = {}
    for _ in range(rounds):
        for name, lines in runs.items():
            outs, wall = generate(lines, threads)
            tokens = sum(o["usage"]["completion_tokens"] for o in outs)
            if name not in result or wall - startup < result[name][1]:
                result[name] = (tokens, wall - startup)
    return result


def opening(flag, cpu, commit):
    """How a `bench_grammar --FLAG` section opens: how to rerun it alone, when, on what."""
    return (f"`bench_grammar --{flag}` (`sh bench/structured.sh --{flag}` rewrites this section alone) on "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}, commit {commit}, {os.cpu_count()} cores: {cpu}.  ")


BOUNDS_HEADING = "## Large bounds"


def bounds_lines(cpu, commit):
    """`bench_grammar --bounds`: compile time, memory and per-step mask time of counts far past 128."""
    runs = run_lines([TOOL, "--bounds"])
    lines = [BOUNDS_HEADING, "",
             opening("bounds", cpu, commit) + "Each "
             "bound is honoured exactly (a counted loop on the matcher's stack, its last iterations, as many as the "
             "longest token has bytes, expanded; see grammar/gbnf.c).  Each case is compiled against the default "
             "model's vocabulary (its trie built beforehand), then walked to its bound, each step taking the first "
             "allowed token of a fixed list (e.g. \" summary\", \" of\", \"a\", the closing quote); memory is the "
             "process's resident growth over the compile.  The first row is a count small enough to be expanded "
             "whole, for comparison.", "",
             "| case | compile ms | memory MiB | steps | mask median µs | p99 µs | max µs |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        us = r["mask_us"]
        lines.append(f"| {r['name']} | {r['compile_ms']:.1f} | {r['rss_mb']:.1f} | {len(us)} | "
                     f"{statistics.median(us):.1f} | {pct(us, 99):.1f} | {max(us):.1f} |")
    return lines


BIG_HEADING = "## Large grammars"


def big_lines(cpu, commit):
    """`bench_grammar --big`: issue 21's shapes, rule chains and long enums."""
    runs = run_lines([TOOL, "--big"])
    lines = [BIG_HEADING, "",
             opening("big", cpu, commit) + "Chains "
             "are `r_i ::= \"x\" r_(i+1)` rules, the root first (forward) or last (backward), walked over 64 x's; "
             "enums and choices are lists of product codes (every first letter used), merged into a trie when "
             "parsed (grammar/gbnf_factor.c), each walked through 16 of its values.  Compile time is given as wall "
             "and CPU time: the machine is shared, so wall time is mostly other jobs' (CPU time is this process's); "
             "memory is the resident growth the grammar keeps, and the peak's growth over the compile (0 when "
             "under an earlier case's peak).  Before (issue 21) a forward 32k chain took 29 s to compile, a "
             "backward 60k chain of bare references crashed the server, and a choice of 100,000 strings took "
             "3.4–5 s and 1.4 GB before it was refused as too ambiguous.", "",
             "| case | compile ms | CPU ms | kept MiB | peak MiB | steps | mask median µs | p99 µs | max µs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        us = r["mask_us"]
        lines.append(f"| {r['name']} | {r['compile_ms']:.0f} | {r['cpu_ms']:.0f} | {r['rss_mb']:.1f} | "
                     f"{r['peak_mb']:.1f} | {len(us)} | {statistics.median(us):.2f} | {pct(us, 99):.2f} | "
                     f"{max(us):.2f} |")
    return lines


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return cpu, commit


def rewrite_section(out_md, heading, lines):
    """Replaces the section under `heading` (to the next "## " or the end), or appends it."""
    with open(out_md) as f:
        text = f.read()
    head, _, tail = text.partition(heading + "\n")
    rest = tail.split("\n## ", 1)
    after = "\n## " + rest[1] if len(rest) > 1 and tail else ""
    with open(out_md, "w") as f:
        f.write(head.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n" + after)
    print("\n".join(lines))


def main():
    out_md = os.path.join(ROOT, "bench", "results", "structured.md")
    if sys.argv[1:] == ["--bounds"]:
        return rewrite_section(out_md, BOUNDS_HEADING, bounds_lines(*machine()))
    if sys.argv[1:] == ["--big"]:
        return rewrite_section(out_md, BIG_HEADING, big_lines(*machine()))
    work = workload()
    with tempfile.TemporaryDirectory() as d:
        wpath, vpath = os.path.join(d, "work.jsonl"), os.path.join(d, "vocab.json")
        with open(wpath, "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in work)
        subprocess.run([TOOL, "--vocab", vpath], check=True)
        runs = {"tram": run_lines([TOOL, wpath]),
                "XGrammar": run_lines([PEERS_PY, os.path.join(ROOT, "bench", "bench_structured_peers.py"), vpath, wpath, "xgrammar"]),
                "llguidance": run_lines([PEERS_PY, os.path.join(ROOT, "bench", "bench_structured_peers.py"), vpath, wpath, "llguidance"])}
    versions = subprocess.run([PEERS_PY, "-c", "import importlib.metadata as m; print(m.version('xgrammar'), m.version('llguidance'))"],
                              capture_output=True, text=True).stdout.split()
    tp = throughput(os.cpu_count())
    cpu, commit = machine()
    lines = ["# Structured outputs: mask time and throughput", "",
             f"Made by `sh bench/structured.sh` on {time.strftime('%Y-%m-%d', time.gmtime())}, commit {commit}, "
             f"{os.cpu_count()} cores: {cpu}.  XGrammar {versions[0]}, llguidance {versions[1]} (PyPI, through "
             "their Python APIs; one matcher, one thread; XGrammar's compile cache off; each step's mask the fastest of 3 computations, for all three).  The machine is shared "
             "with other jobs, so absolute times are noisy; the three ran one after another in the same run.", "",
             f"Mask time per token on the default model's vocabulary ({len(json.load(open(os.path.join(ROOT, 'tests', 'fixtures', 'schemas', 'corpus.json'))))}-schema "
             f"corpus sample + 4 hand-written schemas, {len(work)} token sequences from tram at temperature 0, "
             f"{sum(len(w['token_ids']) for w in work)} steps), every step of every sequence:", "",
             "| engine | median µs | p99 µs | mean µs | compile ms (median) |", "|---|---:|---:|---:|---:|"]
    for name, res in runs.items():
        all_us = [t for r in res for t in r["mask_us"]]
        lines.append(f"| {name} | {statistics.median(all_us):.1f} | {pct(all_us, 99):.1f} | {statistics.mean(all_us):.1f} | "
                     f"{statistics.median(r['compile_ms'] for r in res):.1f} |")
    lines += ["", "Per schema (median / p99 µs):", "", "| schema | steps | " + " | ".join(runs) + " |",
              "|---|---:|" + "---:|" * len(runs)]
    for i, w in enumerate(work):
        cells = [f"{statistics.median(runs[n][i]['mask_us']):.1f} / {pct(runs[n][i]['mask_us'], 99):.1f}" for n in runs]
        lines.append(f"| {w['name']} | {len(w['token_ids'])} | " + " | ".join(cells) + " |")
    (ft, fw), (ct, cw) = tp["free"], tp["constrained"]
    lines += ["", "Throughput at 32 concurrent requests (`tram generate --input`, 64 tokens each at temperature 1, "
              "ignore_eos; constrained: a JSON array of 24 strings, so no request ends early; free and constrained "
              "alternate, two runs each, the faster of each shown; start-up, timed by a one-token run, subtracted):", "",
              "| decoding | tokens | seconds | tokens/s |", "|---|---:|---:|---:|",
              f"| free | {ft} | {fw:.2f} | {ft / fw:.1f} |", f"| constrained | {ct} | {cw:.2f} | {ct / cw:.1f} |", "",
              f"Constrained throughput is {100 * (ct / cw) / (ft / fw):.1f} % of free.", ""]
    lines += bounds_lines(cpu, commit) + [""] + big_lines(cpu, commit)
    with open(out_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
