#!/usr/bin/env python3
"""tram bench serve: a serving benchmark for any OpenAI-compatible server.

Like vLLM's benchmark_serving: requests arrive as a Poisson process (or gamma,
with --burstiness) at --request-rate, at most --max-concurrency in flight;
every request streams, so TTFT, TPOT, ITL and end-to-end latency are measured
on the client.  Standard library only (asyncio streams speak HTTP/1.1), so it
runs wherever python3 does.

  python3 bench/bench_serve.py --base-url http://127.0.0.1:8000 --request-rate 2 \
      --num-prompts 64 --random-input-len 128 --random-output-len 64 --goodput ttft:500 tpot:100
"""
import argparse
import asyncio
import json
import math
import random
import ssl
import statistics
import sys
import time
import urllib.parse
import urllib.request

WORDS = ("the of and to in is was for on that with as by at from his her they this have which one "
         "you were all we when there can an your more said time about many then them these some so "
         "would other into has two like him see could no make than first been its who now people my "
         "made over did down only way find use may water long little very after words called just "
         "where most know get through back much before go good new write our used me man too any day "
         "same right look think also around another came come work three word must because does part").split()


def parse_args(argv):
    p = argparse.ArgumentParser(prog="tram bench serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default="http://127.0.0.1:8000", help="server root (without /v1)")
    p.add_argument("--endpoint", default="/v1/completions", choices=["/v1/completions", "/v1/chat/completions"])
    p.add_argument("--model", help="model name (default: the first of /v1/models)")
    p.add_argument("--api-key", help="sent as a Bearer token")
    p.add_argument("--dataset", default="random", help="'random' or a JSONL file of {prompt|messages[, max_tokens]}")
    p.add_argument("--num-prompts", type=int, default=64)
    p.add_argument("--random-input-len", type=int, default=128, help="prompt length in words (about one token each)")
    p.add_argument("--random-output-len", type=int, default=64)
    p.add_argument("--random-range-ratio", type=float, default=0.0, help="lengths vary by +-this fraction")
    p.add_argument("--request-rate", type=float, default=math.inf, help="requests/s (inf: all at once)")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of the gaps: 1 = Poisson")
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--goodput", nargs="*", default=[], metavar="SLO:MS",
                   help="service-level objectives, e.g. ttft:500 tpot:100 e2el:5000")
    p.add_argument("--no-ignore-eos", action="store_true", help="let requests stop at EOS")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600, help="seconds per request")
    p.add_argument("--result-json", help="also write the summary here")
    p.add_argument("--label", default="", help="a name for this run in the summary")
    args = p.parse_args(argv)
    args.slos = {}
    for item in args.goodput:
        key, _, ms = item.partition(":")
        if key not in ("ttft", "tpot", "e2el") or not ms:
            p.error(f"bad --goodput item '{item}' (expected ttft:MS, tpot:MS or e2el:MS)")
        args.slos[key] = float(ms) / 1000.0
    return args


# ------------------------------------------------------------------ dataset

def vary(n, ratio, rng):
    return max(1, round(n * rng.uniform(1 - ratio, 1 + ratio)))


def load_requests(args, rng):
    """[(prompt or messages, max_tokens)]"""
    if args.dataset == "random":
        out = []
        for _ in range(args.num_prompts):
            n_in = vary(args.random_input_len, args.random_range_ratio, rng)
            text = " ".join(rng.choice(WORDS) for _ in range(n_in))
            out.append((text, vary(args.random_output_len, args.random_range_ratio, rng)))
        return out
    rows = []
    with open(args.dataset) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows.append((row.get("messages") or row["prompt"], row.get("max_tokens", args.random_output_len)))
    if not rows:
        sys.exit(f"tram bench serve: {args.dataset} holds no requests")
    return [rows[i % len(rows)] for i in range(args.num_prompts)]


def request_body(args, prompt, max_tokens):
    body = {"model": args.model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if not args.no_ignore_eos:
        body["ignore_eos"] = True  # vLLM's extension: fixed output lengths
    if args.endpoint == "/v1/chat/completions":
        body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else prompt[-1]["content"]
    return body


# ------------------------------------------------------------------ HTTP

class Result:
    def __init__(self):
        self.ok, self.error = False, ""
        self.ttft, self.e2e = 0.0, 0.0
        self.itl = []
        self.prompt_tokens = self.output_tokens = 0


async def read_chunked(reader):
    """Yields the body of a chunked or length-delimited response, piece by piece."""
    while True:
        size_line = await reader.readline()
        if not size_line:
            return
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def post_stream(url, headers, body, timeout):
    """Sends one streaming request; returns a Result with client-side timings."""
    res = Result()
    u = urllib.parse.urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    start = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            u.hostname, port, ssl=ssl.create_default_context() if u.scheme == "https" else None), timeout)
    except (OSError, asyncio.TimeoutError) as e:
        res.error = f"connect: {e}"
        return res
    try:
        await asyncio.wait_for(exchange(reader, writer, u, headers, body, start, res), timeout)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
        res.ok, res.error = False, f"{type(e).__name__}: {e}"
    finally:
        writer.close()
    return res


async def exchange(reader, writer, u, headers, body, start, res):
    data = json.dumps(body).encode()
    head = [f"POST {u.path} HTTP/1.1", f"Host: {u.netloc}", "Content-Type: application/json",
            f"Content-Length: {len(data)}", "Accept: text/event-stream", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    await writer.drain()
    status = (await reader.readline()).decode(errors="replace")
    hdrs = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        k, _, v = line.decode(errors="replace").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if " 200 " not in status:
        res.error = status.strip()
        return
    pieces = read_chunked(reader) if "chunked" in hdrs.get("transfer-encoding", "") else read_all(reader)
    buf, last, chunks = b"", None, 0
    async for piece in pieces:
        buf += piece
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            msg = json.loads(event[6:])
            if msg.get("usage"):
                res.prompt_tokens = msg["usage"].get("prompt_tokens", 0)
                res.output_tokens = msg["usage"].get("completion_tokens", 0)
            if not msg.get("choices"):
                continue
            c = msg["choices"][0]
            if not (c.get("text") or (c.get("delta") or {}).get("content")):
                continue
            now = time.perf_counter()
            if last is None:
                res.ttft = now - start
            else:
                res.itl.append(now - last)
            last, chunks = now, chunks + 1
    res.e2e = time.perf_counter() - start
    res.output_tokens = res.output_tokens or chunks
    res.ok = last is not None


async def read_all(reader):
    while piece := await reader.read(65536):
        yield piece


# ------------------------------------------------------------------ driver

def arrival_gaps(n, rate, burstiness, rng):
    if math.isinf(rate):
        return [0.0] * n
    theta = 1.0 / (rate * burstiness)  # gamma with mean 1/rate
    return [rng.gammavariate(burstiness, theta) for _ in range(n)]


async def run(args, requests):
    url = args.base_url.rstrip("/") + args.endpoint
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    rng = random.Random(args.seed + 1)
    gate = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None

    async def one(prompt, max_tokens):
        if gate:
            async with gate:
                return await post_stream(url, headers, request_body(args, prompt, max_tokens), args.timeout)
        return await post_stream(url, headers, request_body(args, prompt, max_tokens), args.timeout)

    tasks = []
    start = time.perf_counter()
    for (prompt, max_tokens), gap in zip(requests, arrival_gaps(len(requests), args.request_rate,
                                                                 args.burstiness, rng)):
        await asyncio.sleep(gap)
        tasks.append(asyncio.create_task(one(prompt, max_tokens)))
    results = await asyncio.gather(*tasks)
    return results, time.perf_counter() - start


def percentiles(xs):
    if not xs:
        return {"mean": 0.0, "median": 0.0, "p90": 0.0, "p99": 0.0}
    s = sorted(xs)

    def pct(q):
        k = (len(s) - 1) * q
        lo, hi = math.floor(k), math.ceil(k)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)

    return {"mean": statistics.fmean(s), "median": pct(0.5), "p90": pct(0.9), "p99": pct(0.99)}


def summarize(args, results, duration):
    ok = [r for r in results if r.ok]
    tpots = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]

    def good(r):
        tpot = (r.e2e - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        return all(v >= {"ttft": r.ttft, "tpot": tpot, "e2el": r.e2e}[k] for k, v in args.slos.items())

    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    summary = {
        "label": args.label, "request_rate": args.request_rate, "burstiness": args.burstiness,
        "max_concurrency": args.max_concurrency, "num_prompts": len(results), "completed": len(ok),
        "failed": len(results) - len(ok), "duration_s": duration,
        "request_throughput": len(ok) / duration, "output_throughput": out_tokens / duration,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
        "total_input_tokens": in_tokens, "total_output_tokens": out_tokens,
        "ttft_ms": {k: v * 1000 for k, v in percentiles([r.ttft for r in ok]).items()},
        "tpot_ms": {k: v * 1000 for k, v in percentiles(tpots).items()},
        "itl_ms": {k: v * 1000 for k, v in percentiles([x for r in ok for x in r.itl]).items()},
        "e2el_ms": {k: v * 1000 for k, v in percentiles([r.e2e for r in ok]).items()},
        "errors": sorted({r.error for r in results if not r.ok})[:5],
    }
    if args.slos:
        summary["goodput"] = sum(1 for r in ok if good(r)) / duration
        summary["slos_ms"] = {k: v * 1000 for k, v in args.slos.items()}
    return summary


def print_summary(s):
    line = "=" * 56
    print(f"{line}\n{' Serving Benchmark Result ' + s['label']:^56}\n{line}")
    rows = [("Successful requests:", s["completed"]), ("Failed requests:", s["failed"]),
            ("Benchmark duration (s):", f"{s['duration_s']:.2f}"),
            ("Total input tokens:", s["total_input_tokens"]), ("Total generated tokens:", s["total_output_tokens"]),
            ("Request throughput (req/s):", f"{s['request_throughput']:.2f}"),
            ("Output token throughput (tok/s):", f"{s['output_throughput']:.2f}"),
            ("Total token throughput (tok/s):", f"{s['total_token_throughput']:.2f}")]
    if "goodput" in s:
        rows.append(("Request goodput (req/s):", f"{s['goodput']:.2f}"))
    for k, v in rows:
        print(f"{k:<40}{v:>16}")
    for key, title in (("ttft_ms", "Time to First Token"), ("tpot_ms", "Time per Output Token (excl. 1st token)"),
                       ("itl_ms", "Inter-token Latency"), ("e2el_ms", "End-to-end Latency")):
        print(f"{title:-^56}")
        for stat in ("mean", "median", "p90", "p99"):
            print(f"{stat.capitalize() + ' ' + key.split('_')[0].upper() + ' (ms):':<40}{s[key][stat]:>16.2f}")
    print(line)
    for e in s["errors"]:
        print(f"error: {e}")


def first_model(args):
    req = urllib.request.Request(args.base_url.rstrip("/") + "/v1/models")
    if args.api_key:
        req.add_header("Authorization", f"Bearer {args.api_key}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["data"][0]["id"]


def main(argv):
    args = parse_args(argv)
    rng = random.Random(args.seed)
    args.model = args.model or first_model(args)
    requests = load_requests(args, rng)
    results, duration = asyncio.run(run(args, requests))
    summary = summarize(args, results, duration)
    print_summary(summary)
    if args.result_json:
        with open(args.result_json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0 if summary["completed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
