"""Schema coverage: any directories of JSON Schema files through tram (and,
with --peers, through llguidance and XGrammar: bench/peers/venv, as
bench/structured.sh installs it), reporting per directory how many schemas
each compiles and the compile time (p50 / p99 / max, ms); and, for a sample
of the schemas tram compiles, generation compliance through a real `tram
serve`: each sampled schema asked greedily, the reply validated with the
Python `jsonschema` package under the schema's own draft (formats checked).
Prints a markdown section for bench/results/structured.md.

    python3 bench/schema_coverage.py [--peers | --peer NAME] [--peer-results DIR] [--sample N] DIR...

--peer llguidance (or xgrammar) runs that peer alone (XGrammar's compile of
a large schema can take minutes: each peer compile is killed past
bench_structured_peers.py's COMPILE_TIMEOUT_S, a refusal).  --peer-results
keeps each peer's lines per corpus in DIR (PEER-CORPUS.jsonl) and reuses
them when there: the peers do not change with tram's commits.  --sample
asks at temperature 0 and 1.  "only PEER": schemas the peer compiles and
tram refuses.

tram's compile is bench_grammar --coverage's: the schema to GBNF, the GBNF
against the default model's vocabulary, and the validator's compile, as the
server does them for a request.  Run it with a Python that has `jsonschema`
(the test venv, .venv/bin/python) for the compliance column.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request

from health import free_port, wait_healthy  # bench/health.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "build", "bench_grammar")
PEERS_PY = os.path.join(ROOT, "bench", "peers", "venv", "bin", "python")
PEERS = os.path.join(ROOT, "bench", "bench_structured_peers.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_structured_peers import COMPILE_TIMEOUT_S  # noqa: E402 (the peers' script, by path)
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def lines_of(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def tram_coverage(d):
    return lines_of([TOOL, "--coverage", d])


def peer_coverage(d, peer, vocab, keep):
    """The peer's lines for the schemas of d, from keep (a directory) when it has them."""
    kept = os.path.join(keep, f"{peer}-{os.path.basename(d.rstrip('/'))}.jsonl") if keep else None
    if kept and os.path.exists(kept):
        lines = [json.loads(x) for x in open(kept)]
    else:
        lines = lines_of([PEERS_PY, PEERS, vocab, "--coverage", d, peer])
        if kept:
            with open(kept, "w") as f:
                f.writelines(json.dumps(x) + "\n" for x in lines)
    names = set(n for n in os.listdir(d) if n.endswith(".json"))
    return [x for x in lines if x["name"] in names]


def summary(results):
    ok = [r["compile_ms"] for r in results if r["ok"]]
    n = len(results)
    return {"n": n, "ok": len(ok), "p50": pct(ok, 0.5), "p99": pct(ok, 0.99), "max": max(ok) if ok else float("nan")}


class Server:
    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([os.path.join(ROOT, "bin", "tram"), "serve", "-m", MODEL, "--port",
                                      str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_healthy(self.proc, self.port)

    def ask(self, schema, temperature):
        body = {"messages": [{"role": "user", "content": "Reply with one JSON value that fits the schema."}],
                "max_tokens": 128, "temperature": temperature, "seed": 1,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            return json.load(urllib.request.urlopen(req, timeout=600))["choices"][0]
        except urllib.error.HTTPError as e:
            return {"finish_reason": "http %d" % e.code}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


TEMPERATURES = (0, 1)


def compliance(server, d, accepted, n, temperature):
    import jsonschema
    tally = {"asked": 0, "stop": 0, "valid": 0, "error": 0, "length": 0}
    for name in accepted[:n]:
        schema = json.load(open(os.path.join(d, name)))
        choice = server.ask(schema, temperature)
        tally["asked"] += 1
        reason = choice["finish_reason"]
        if reason in ("error", "length"):
            tally[reason] += 1
        if reason != "stop":
            continue
        tally["stop"] += 1
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(json.loads(choice["message"]["content"]))
            tally["valid"] += 1
        except Exception as ex:  # a failure to report, whatever jsonschema raised
            print(f"NOT VALID {d}/{name} at temperature {temperature}: {str(ex)[:200]}", file=sys.stderr)
    return tally


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    args = sys.argv[1:]
    peers = ["llguidance", "XGrammar"] if "--peers" in args else []
    if "--peer" in args:
        peers = [{"llguidance": "llguidance", "xgrammar": "XGrammar"}[args[args.index("--peer") + 1].lower()]]
    sample = int(args[args.index("--sample") + 1]) if "--sample" in args else 0
    keep = args[args.index("--peer-results") + 1] if "--peer-results" in args else None
    dirs = [a for i, a in enumerate(args)
            if not a.startswith("--") and (i == 0 or args[i - 1] not in ("--sample", "--peer", "--peer-results"))]
    subprocess.run(["make", "--no-print-directory", "-C", ROOT, "bin/tram", "build/libtram.a"], check=True,
                   stdout=subprocess.DEVNULL)
    vocab = os.path.join(ROOT, "build", "vocab.json")
    if peers:
        subprocess.run([TOOL, "--vocab", vocab], check=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"Made by `python3 bench/schema_coverage.py` on {time.strftime('%Y-%m-%d')}, commit {commit}, "
          f"{os.cpu_count()} cores: {cpu_name()}.  Compile: the schema to a grammar ready to mask "
          f"(tram: GBNF, the vocabulary, the validator); ms over the schemas each engine compiles; a peer's "
          f"compile past {COMPILE_TIMEOUT_S} s is killed and counted as a refusal.\n")
    engines = ["tram"] + peers
    head = "| corpus | schemas | " + " | ".join(f"{e} compiles | {e} p50 / p99 / max ms" for e in engines)
    head += "".join(f" | only {p}" for p in peers)
    rows = []
    server = Server() if sample else None
    comply, timeouts = {}, {}
    for d in dirs:
        results = {"tram": tram_coverage(d)}
        for peer in peers:
            results[peer] = peer_coverage(d, peer.lower(), vocab, keep)
        cells = []
        for e in engines:
            s = summary(results[e])
            cells.append(f"{s['ok']} ({100.0 * s['ok'] / max(1, s['n']):.0f}%) | "
                         f"{s['p50']:.1f} / {s['p99']:.1f} / {s['max']:.1f}")
        tram_ok = set(r["name"] for r in results["tram"] if r["ok"])
        for peer in peers:
            timeouts[d, peer] = [r for r in results[peer] if r["error"] == "timeout"]
        for peer in peers:
            cells.append(str(sum(1 for r in results[peer] if r["ok"] and r["name"] not in tram_ok)))
        rows.append(f"| {os.path.basename(d.rstrip('/'))} | {len(results['tram'])} | " + " | ".join(cells) + " |")
        if server:
            accepted = [r["name"] for r in results["tram"] if r["ok"]]
            for temperature in TEMPERATURES:
                comply[d, temperature] = compliance(server, d, accepted, sample, temperature)
    if server:
        server.stop()
    print(head + " |")
    print("|---|---:|" + "---:|---:|" * len(engines) + "---:|" * len(peers))
    print("\n".join(rows))
    for peer in peers:
        slow = [f"{os.path.basename(d.rstrip('/'))}/{r['name']}" for d in dirs for r in timeouts.get((d, peer), [])]
        if slow:
            print(f"\n{peer} passed the {COMPILE_TIMEOUT_S} s timeout on {len(slow)} schemas (refusals): "
                  + ", ".join(slow))
    if comply:
        print(f"\nGeneration compliance (tram serve, max_tokens 128, seed 1, at temperature 0 and 1, the first "
              f"{sample} schemas tram compiles per corpus; `stop` replies validated with `jsonschema` under the "
              "schema's own draft, formats checked; `error` is the server's own validator catching an output, "
              "`length` a reply cut short):\n")
        print("| corpus | temperature | asked | stop | valid | error | length |\n|---|---:|---:|---:|---:|---:|---:|")
        for (d, temperature), t in comply.items():
            print(f"| {os.path.basename(d.rstrip('/'))} | {temperature} | {t['asked']} | {t['stop']} | {t['valid']} "
                  f"| {t['error']} | {t['length']} |")


if __name__ == "__main__":
    main()
