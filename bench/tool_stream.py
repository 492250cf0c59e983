"""When streamed tool calls reach the client (bench/results/tool_stream.md):
REQUESTS streamed chat requests with tool_choice "required" (one call of a
function with four fields), read as raw SSE; per request, the times from
sending it to its first chunk, to the call's name chunk, to its first and
last arguments pieces, and to the end, and the number of pieces.  Before
tram streamed calls as they are written, the name and the whole arguments
came at the end.

Starts its own server (bin/tram, the default model, --threads THREADS),
as bench/response_cache.py does."""
import http.client
import json
import os
import statistics
import time

from response_cache import PORT, THREADS, serve  # one server, started the same way

REQUESTS = int(os.environ.get("REQUESTS", "20"))
TOOL = {"type": "function", "function": {"name": "book_trip", "parameters": {
    "type": "object", "additionalProperties": False, "required": ["city", "days", "notes", "budget"],
    "properties": {"city": {"type": "string", "maxLength": 16}, "days": {"type": "integer", "minimum": 1},
                   "notes": {"type": "string", "maxLength": 80}, "budget": {"type": "number"}}}}}


def one(seed):
    """{first, name, args_first, args_last, end} seconds, and the pieces."""
    body = {"messages": [{"role": "user", "content": "Plan a trip to Rome."}], "tools": [TOOL],
            "tool_choice": "required", "parallel_tool_calls": False, "stream": True, "temperature": 1.0,
            "seed": seed, "max_tokens": 160}
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    start = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    t, pieces = {}, 0
    for line in r:
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        now = time.perf_counter() - start
        t.setdefault("first", now)
        for choice in json.loads(line[6:]).get("choices", []):
            for call in choice["delta"].get("tool_calls") or []:
                if call["function"].get("name"):
                    t["name"] = now
                elif call["function"].get("arguments"):
                    t.setdefault("args_first", now)
                    t["args_last"] = now
                    pieces += 1
    t["end"] = time.perf_counter() - start
    return t, pieces


def main():
    proc = serve()
    try:
        one(0)  # warm-up: the prompt's blocks are cached from here on
        runs = [one(seed) for seed in range(1, REQUESTS + 1)]
    finally:
        proc.terminate()
        proc.wait()
    print(f"{REQUESTS} requests, --threads {THREADS}; median over requests (ms, and share of the reply's time):\n")
    print("| event | median ms | share of the reply |")
    print("|---|---|---|")
    for key, label in [("first", "first chunk (role)"), ("name", "call's name chunk"),
                       ("args_first", "first arguments piece"), ("args_last", "last arguments piece"),
                       ("end", "end of the reply")]:
        ms = statistics.median(t[key] for t, _ in runs) * 1000
        share = statistics.median(t[key] / t["end"] for t, _ in runs)
        print(f"| {label} | {ms:.0f} | {share:.0%} |")
    print(f"\narguments pieces per call: median {statistics.median(p for _, p in runs):.0f}, "
          f"min {min(p for _, p in runs)}")


if __name__ == "__main__":
    main()
