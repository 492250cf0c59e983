"""The peers' side of bench/structured.sh: XGrammar and llguidance (PyPI)
compute the per-token mask on the same vocabulary (dumped by
bench_grammar --vocab) for the same schemas and the same token sequences
as tram, through their Python APIs, one matcher at a time on one thread;
each step's mask is the fastest of REPEATS computations, as for tram.

    python bench_structured_peers.py VOCAB.json WORKLOAD.jsonl xgrammar|llguidance

Prints one JSON line per schema: {"name", "compile_ms", "mask_us": [...]}.

    python bench_structured_peers.py VOCAB.json --coverage DIR xgrammar|llguidance

compiles every .json schema of DIR (bench/schema_coverage.py) and prints
{"name", "ok", "compile_ms", "error"} per schema, in name order.  Each
compile runs in a child forked from the ready compiler and is killed past
COMPILE_TIMEOUT_S seconds: a refusal, its error "timeout" (XGrammar takes
minutes on a few schemas); a child that crashes is a refusal too.
"""
import os
import json
import select
import signal
import sys
import time

REPEATS = 3  # each step's mask is computed this often and the fastest kept, as in bench_grammar.c
COMPILE_TIMEOUT_S = 30  # a coverage compile past it counts as a refusal


def fastest(fill):
    best = float("inf")
    for _ in range(REPEATS):
        a = time.perf_counter()
        fill()
        best = min(best, time.perf_counter() - a)
    return best * 1e6


def load_vocab(path):
    v = json.load(open(path))
    special = set(v["special"])
    tokens = [bytes.fromhex(h) for h in v["tokens"]]
    return tokens, special, v["eog"]


def run_xgrammar(tokens, special, eog, workload):
    import xgrammar as xgr
    encoded = [b"" if i in special else t for i, t in enumerate(tokens)]
    info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=eog)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    bitmask = xgr.allocate_token_bitmask(1, len(tokens))
    for line in workload:
        t0 = time.perf_counter()
        grammar = compiler.compile_json_schema(json.dumps(line["schema"]), any_whitespace=True)
        compile_ms = (time.perf_counter() - t0) * 1e3
        matcher = xgr.GrammarMatcher(grammar)
        times = []
        for tok in line["token_ids"]:
            times.append(fastest(lambda: matcher.fill_next_token_bitmask(bitmask)))
            if not matcher.accept_token(tok):
                raise SystemExit(f"xgrammar rejects token {tok} of {line['name']}")
        yield {"name": line["name"], "compile_ms": compile_ms, "mask_us": times}


class Wrapper:
    """What llguidance.TokenizerWrapper reads from a tokenizer."""

    def __init__(self, tokens, special, eog):
        self.tokens = [b"\xff" + t if i in special else t for i, t in enumerate(tokens)]
        self.eos_token_id = eog[0]
        self.bos_token_id = None
        self.special_token_ids = sorted(special)
        self.byte_ids = {t[0]: i for i, t in enumerate(tokens) if len(t) == 1 and i not in special}

    def __call__(self, data):
        return [self.byte_ids[b] for b in data]


def run_llguidance(tokens, special, eog, workload):
    import llguidance
    import llguidance.numpy
    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(Wrapper(tokens, special, eog)), eos_token=eog)
    bitmask = llguidance.numpy.allocate_token_bitmask(1, tok.vocab_size)
    for line in workload:
        schema = dict(line["schema"], **{"x-guidance": {"whitespace_flexible": True}})
        t0 = time.perf_counter()
        matcher = llguidance.LLMatcher(tok, llguidance.grammar_from("json_schema", json.dumps(schema)))
        err = matcher.get_error()
        if err:
            raise SystemExit(f"llguidance: {line['name']}: {err}")
        compile_ms = (time.perf_counter() - t0) * 1e3
        times = []
        for t in line["token_ids"]:
            times.append(fastest(lambda: llguidance.numpy.fill_next_token_bitmask(matcher, bitmask)))
            if not matcher.consume_token(t):
                raise SystemExit(f"llguidance rejects token {t} of {line['name']}: {matcher.get_error()}")
        yield {"name": line["name"], "compile_ms": compile_ms, "mask_us": times}


def compile_xgrammar(tokens, special, eog):
    import xgrammar as xgr
    encoded = [b"" if i in special else t for i, t in enumerate(tokens)]
    info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=eog)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    return lambda text: compiler.compile_json_schema(text, any_whitespace=True)


def compile_llguidance(tokens, special, eog):
    import llguidance
    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(Wrapper(tokens, special, eog)), eos_token=eog)

    def compile_one(text):
        schema = json.loads(text)
        if isinstance(schema, dict):
            schema = dict(schema, **{"x-guidance": {"whitespace_flexible": True}})
        matcher = llguidance.LLMatcher(tok, llguidance.grammar_from("json_schema", json.dumps(schema)))
        if matcher.get_error():
            raise ValueError(matcher.get_error())
    return compile_one


def compile_in_child(compile_one, text):
    """The child's side: compiles, writes {"ok", "compile_ms", "error"} to the pipe, exits."""
    t0 = time.perf_counter()
    try:
        compile_one(text)
        ok, error = True, ""
    except Exception as ex:  # any refusal, whatever the peer raises
        ok, error = False, str(ex)[:200]
    return json.dumps({"ok": ok, "compile_ms": (time.perf_counter() - t0) * 1e3, "error": error})


def bounded_compile(compile_one, text):
    """compile_one(text) in a forked child, killed past COMPILE_TIMEOUT_S."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, compile_in_child(compile_one, text).encode())
        os._exit(0)
    os.close(w)
    data = b""
    deadline = time.monotonic() + COMPILE_TIMEOUT_S
    while time.monotonic() < deadline and select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
        piece = os.read(r, 65536)
        if not piece:
            break
        data += piece
    timed_out = time.monotonic() >= deadline and not data
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(r)
    if data:
        return json.loads(data)
    error = "timeout" if timed_out else f"the compile crashed (wait status {status})"
    return {"ok": False, "compile_ms": COMPILE_TIMEOUT_S * 1e3 if timed_out else float("nan"), "error": error}


def coverage(tokens, special, eog, d, peer):
    compile_one = {"xgrammar": compile_xgrammar, "llguidance": compile_llguidance}[peer](tokens, special, eog)
    for name in sorted(n for n in os.listdir(d) if n.endswith(".json")):
        text = open(os.path.join(d, name)).read()
        yield dict(bounded_compile(compile_one, text), name=name)


def main():
    tokens, special, eog = load_vocab(sys.argv[1])
    if sys.argv[2] == "--coverage":
        for result in coverage(tokens, special, eog, sys.argv[3], sys.argv[4]):
            print(json.dumps(result), flush=True)
        return
    workload = [json.loads(x) for x in open(sys.argv[2])]
    run = {"xgrammar": run_xgrammar, "llguidance": run_llguidance}[sys.argv[3]]
    for result in run(tokens, special, eog, workload):
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
