"""The response cache and its single-flight (--response-cache), and the
metrics and endpoints a gateway and an autoscaler read."""
import http.client
import json
import math
import os
import signal
import socket
import subprocess
import tempfile
import threading

import pytest

from conftest import BIN, MODEL, Server, stream_raw
from test_connections import wait_for

PRELOADED = {"model": "tram-a", "prompt": "The capital of France is", "max_tokens": 8,
             "temperature": 0}


def preload_file(*lines):
    f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    for line in lines:
        f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    f.close()
    return f.name


@pytest.fixture(scope="module")
def cached():
    path = preload_file({"custom_id": "hot", "method": "POST", "url": "/v1/completions",
                         "body": PRELOADED}, "")
    s = Server("--response-cache", "deterministic", "--response-cache-preload", path,
               "--served-model-name", "tram-a,tram-b", "--cost-per-hour", "3.6",
               "--metrics-prefix", "vllm")
    s.model = "tram-a"
    yield s
    assert s.stop() == 0, s.final_log
    os.unlink(path)


def engine_work(s):
    """The engine's own counters: what it computed, whoever asked."""
    return (s.metric("generation_tokens_total", prefix="vllm"),
            s.metric("prompt_tokens_total", prefix="vllm"))


def text_of(body):
    return body["choices"][0]["text"]


def post(s, body, headers=None):
    status, hdrs, data = s.post("/v1/completions", body, headers)
    assert status == 200, data
    return hdrs.get("x-tram-cache"), data


def test_a_preloaded_request_is_a_hit_from_the_start(cached):
    before = engine_work(cached)
    state, body = post(cached, {**PRELOADED, "model": "tram-b"})  # another name of the model
    assert state == "hit"
    assert body["model"] == "tram-a" and body["usage"]["completion_tokens"] == 8
    assert engine_work(cached) == before


def test_a_repeated_request_is_computed_once(cached):
    req = {"model": "tram-a", "prompt": "Count: one, two,", "max_tokens": 6, "temperature": 0}
    state1, first = post(cached, req)
    before = engine_work(cached)
    state2, second = post(cached, {**req, "user": "someone else", "stream": False})
    assert (state1, state2) == ("miss", "hit")
    assert text_of(second) == text_of(first) and second["id"] != first["id"]
    assert engine_work(cached) == before


def test_fields_that_change_the_output_change_the_key(cached):
    req = {"model": "tram-a", "prompt": "Colors: red, green,", "max_tokens": 4, "temperature": 0}
    post(cached, req)
    # the constraint is a field the cache code never names: it is in the key all the same
    for changed in ({"max_tokens": 5}, {"stop": ["xyz"]}, {"seed": 3}, {"logprobs": 1},
                    {"structured_outputs": {"choice": [" blue", " yellow"]}}):
        assert post(cached, {**req, **changed})[0] == "miss", changed


def test_a_hit_replays_every_choice_with_its_logprobs(cached):
    req = {"model": "tram-a", "prompt": ["Red, green,", "One, two,"], "n": 2, "seed": 5,
           "temperature": 0.8, "max_tokens": 5, "logprobs": 2, "echo": True}
    state1, first = post(cached, req)
    state2, second = post(cached, req)
    assert (state1, state2) == ("miss", "hit")
    assert len(second["choices"]) == 4
    assert second["choices"] == first["choices"]
    assert second["usage"] == first["usage"]


def test_a_chat_answer_is_replayed_as_a_stream(cached):
    req = {"model": "tram-a", "messages": [{"role": "user", "content": "Name a colour."}],
           "max_tokens": 8, "temperature": 0}
    status, hdrs, first = cached.post("/v1/chat/completions", req)
    assert status == 200 and hdrs["x-tram-cache"] == "miss"
    hits = cached.metric("response_cache_hits_total", prefix="vllm")
    events = stream_raw(cached.port, "/v1/chat/completions", {**req, "stream": True})
    assert cached.metric("response_cache_hits_total", prefix="vllm") == hits + 1
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == first["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == first["choices"][0]["finish_reason"]


def test_sampled_requests_are_not_cached_but_seeded_ones_are(cached):
    sampled = {"model": "tram-a", "prompt": "Once upon a time", "max_tokens": 4,
               "temperature": 0.9}
    assert post(cached, sampled)[0] is None
    assert post(cached, sampled)[0] is None
    seeded = {**sampled, "seed": 11}
    assert [post(cached, seeded)[0] for _ in range(2)] == ["miss", "hit"]


def test_opting_out_by_header_or_body_field(cached):
    req = {"model": "tram-a", "prompt": "A list of fruits:", "max_tokens": 4, "temperature": 0}
    post(cached, req)
    before = engine_work(cached)
    assert post(cached, req, {"Cache-Control": "no-cache"})[0] is None
    assert post(cached, {**req, "response_cache": False})[0] is None
    assert engine_work(cached)[0] == before[0] + 8  # both computed again
    status, _, data = cached.post("/v1/completions", {**req, "response_cache": "no"})
    assert status == 400 and data["error"]["param"] == "response_cache"


def concurrently(fns):
    out = [None] * len(fns)
    errors = []

    def run(i):
        try:
            out[i] = fns[i]()
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def streamed_text(s, body, on_chunk=None):
    events = stream_raw(s.port, "/v1/completions", {**body, "stream": True}, on_chunk)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    return "".join(c["choices"][0]["text"] for c in chunks), chunks[-1]["choices"][0]["finish_reason"]


def test_identical_concurrent_requests_share_one_computation(cached):
    req = {"model": "tram-a", "prompt": "Write a poem about the sea.", "max_tokens": 24,
           "temperature": 0, "ignore_eos": True}
    served_before = (cached.metric("response_cache_coalesced_total", prefix="vllm")
                     + cached.metric("response_cache_hits_total", prefix="vllm"))
    before = engine_work(cached)
    plain = [lambda: post(cached, req)[1] for _ in range(4)]
    streams = [lambda: streamed_text(cached, req) for _ in range(4)]
    results = concurrently(plain + streams)
    texts = {text_of(r) for r in results[:4]} | {t for t, _ in results[4:]}
    assert len(texts) == 1, texts
    assert all(reason == "length" for _, reason in results[4:])
    gen, prompt = engine_work(cached)
    served = (cached.metric("response_cache_coalesced_total", prefix="vllm")
              + cached.metric("response_cache_hits_total", prefix="vllm"))
    assert gen - before[0] == 24, "the engine computed the request more than once"
    assert prompt - before[1] == results[0]["usage"]["prompt_tokens"]
    assert served - served_before == 7  # one computed, seven coalesced (or hits, if late)


def test_a_late_streaming_follower_gets_the_chunks_already_sent(cached):
    req = {"model": "tram-a", "prompt": "Tell me a long story about a fox.", "max_tokens": 40,
           "temperature": 0, "ignore_eos": True}
    follower = {}

    def on_chunk(i, payload, conn):
        if i == 10:  # the leader is well under way: join now
            t = threading.Thread(target=lambda: follower.update(r=streamed_text(cached, req)))
            t.start()
            follower["thread"] = t

    coalesced = cached.metric("response_cache_coalesced_total", prefix="vllm")
    leader = streamed_text(cached, req, on_chunk)
    follower["thread"].join()
    assert follower["r"] == leader and leader[1] == "length"
    assert cached.metric("response_cache_coalesced_total", prefix="vllm") == coalesced + 1


def test_a_follower_that_leaves_does_not_abort_the_leader(cached):
    req = {"model": "tram-a", "prompt": "Describe a long journey by train.", "max_tokens": 40,
           "temperature": 0, "ignore_eos": True}
    aborts = cached.metric("request_success_total", prefix="vllm", finished_reason="abort")

    def leave_early(i, payload, conn):
        if i == 2:
            conn.sock.shutdown(socket.SHUT_RDWR)
            return False

    def on_chunk(i, payload, conn):
        if i == 5:
            stream_raw(cached.port, "/v1/completions", {**req, "stream": True}, leave_early)

    text, reason = streamed_text(cached, req, on_chunk)
    assert reason == "length" and text
    assert cached.metric("request_success_total", prefix="vllm", finished_reason="abort") == aborts
    assert post(cached, req)[0] == "hit"


def test_gateway_metrics_and_probes(cached):
    m = cached.metrics()
    info = [k for k in m if k.startswith("vllm:cache_config_info{")]
    assert len(info) == 1 and m[info[0]] == 1
    assert 'block_size="16"' in info[0] and 'num_gpu_blocks="' in info[0]
    for name in ("num_requests_waiting", "num_requests_running", "kv_cache_usage_perc"):
        assert f'vllm:{name}{{model_name="tram-a"}}' in m
    assert cached.metric("request_refused_total", prefix="vllm", reason="queue_full") == 0
    assert cached.request("GET", "/livez")[0] == 200
    assert cached.request("GET", "/readyz")[0] == 200
    models = json.loads(cached.request("GET", "/v1/models")[2])
    assert [d["id"] for d in models["data"]] == ["tram-a", "tram-b"]
    status, _, data = cached.post("/v1/completions", {**PRELOADED, "model": "tram-c"})
    assert status == 404


def test_cost_metrics(cached):
    post(cached, {**PRELOADED, "max_tokens": 3})
    total = cached.metric("cost_dollars_total", prefix="vllm")
    per_tok = cached.metric("cost_per_1k_tokens_dollars", prefix="vllm")
    per_req = cached.metric("cost_per_1k_requests_dollars", prefix="vllm")
    assert cached.metric("cost_per_hour_dollars", prefix="vllm") == 3.6
    assert total > 0 and math.isfinite(per_tok) and math.isfinite(per_req)
    assert per_req > 0 and per_tok > 0


def test_the_memory_bound_evicts_the_least_recently_used():
    s = Server("--response-cache", "deterministic", "--response-cache-size", "3KiB")
    try:
        req = {"prompt": "Numbers:", "max_tokens": 4, "temperature": 0, "ignore_eos": True}
        for i in range(4):  # each entry holds about 1 kB of records
            post(s, {**req, "max_tokens": 4 + i})
        assert s.metric("response_cache_evictions_total", reason="size") > 0
        assert 0 < s.metric("response_cache_bytes") <= 3 * 1024
        assert post(s, {**req, "max_tokens": 7})[0] == "hit"  # the most recent stays
        assert post(s, req)[0] == "miss"  # the least recent went first
    finally:
        assert s.stop() == 0, s.final_log


def test_entries_expire_after_the_ttl():
    s = Server("--response-cache", "deterministic", "--response-cache-ttl", "2")
    try:
        req = {"prompt": "Numbers:", "max_tokens": 4, "temperature": 0}
        assert [post(s, req)[0] for _ in range(2)] == ["miss", "hit"]
        import time
        time.sleep(2.3)
        assert post(s, req)[0] == "miss"
        assert s.metric("response_cache_evictions_total", reason="ttl") == 1
    finally:
        assert s.stop() == 0, s.final_log


def test_the_leaders_abort_reaches_its_followers():
    s = Server("--response-cache", "deterministic", "--drain-timeout", "0.5")
    req = {"prompt": "Hello", "max_tokens": 3000, "temperature": 0, "ignore_eos": True}
    follower = {}

    def on_chunk(i, payload, conn):
        if i == 2:
            t = threading.Thread(target=lambda: follower.update(r=s.post("/v1/completions", req)))
            t.start()
            follower["thread"] = t
        if i == 30:
            s.proc.send_signal(signal.SIGTERM)

    try:
        _, reason = streamed_text(s, req, on_chunk)
        follower["thread"].join()
        status, hdrs, body = follower["r"]
        assert reason == "abort"
        assert status == 200 and hdrs["x-tram-cache"] == "coalesced"
        assert body["choices"][0]["finish_reason"] == "abort"
        assert s.proc.wait(timeout=60) == 0
    finally:
        s.stop()


def test_a_rejection_is_passed_on_and_never_cached():
    s = Server("--response-cache", "deterministic", "--max-num-seqs", "1", "--max-queue", "1")
    long = {"prompt": "Go on and on", "max_tokens": 3000, "temperature": 0.5, "ignore_eos": True,
            "stream": True}
    conns = []

    def hold(body):  # a request that runs or waits while its connection stays open
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        conns.append(conn)
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})

    try:
        hold(long)
        wait_until(lambda: s.metric("num_requests_running") == 1)
        hold(long)  # waits: the queue is now full
        wait_until(lambda: s.metric("num_requests_waiting") == 1)
        req = {"prompt": "Hi", "max_tokens": 2, "temperature": 0}
        results = concurrently([lambda: s.post("/v1/completions", req) for _ in range(6)])
        assert [r[0] for r in results] == [503] * 6
        assert s.metric("response_cache_entries") == 0
        assert s.metric("request_refused_total", reason="queue_full") == 6
    finally:
        for c in conns:
            c.close()
        assert s.stop() == 0, s.final_log


def wait_until(pred, timeout=60):
    import time
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, "condition not reached"
        time.sleep(0.02)


@pytest.mark.parametrize("line, message", [
    ('{"url": "/v1/completions", "body": {"prompt": "x", "temperature": 0.7}}', "not cacheable"),
    ('{"url": "/v1/embeddings", "body": {}}', "'url' must be"),
    ("not json", "not a JSON object"),
])
def test_a_bad_preload_line_stops_the_server(line, message):
    path = preload_file({"url": "/v1/completions",
                         "body": {"prompt": "ok", "temperature": 0, "max_tokens": 2}}, line)
    try:
        r = subprocess.run([BIN, "serve", "-m", MODEL, "--port", "0", "--threads", "1",
                            "--response-cache", "deterministic", "--response-cache-preload",
                            path], capture_output=True, text=True, timeout=120)
        assert r.returncode == 1
        assert f"{path}:2: " in r.stderr + r.stdout and message in r.stderr + r.stdout
    finally:
        os.unlink(path)


def test_preload_needs_the_cache():
    r = subprocess.run([BIN, "serve", "--response-cache-preload", "x.jsonl"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--response-cache" in r.stderr


def open_stream(s, body):
    """A streamed completion read up to its first event: (connection, X-Tram-Cache)."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    buf = b""
    while b"\n\n" not in buf:
        piece = r.read1(65536)
        assert piece, "the stream ended before its first event"
        buf += piece
    return conn, r.getheader("X-Tram-Cache")


def test_a_flight_whose_clients_all_left_is_aborted():
    s = Server("--response-cache", "deterministic", "--max-num-seqs", "2", "--drain-timeout", "600")
    max_tokens = 3000
    try:
        aborts = s.metric("request_success_total", finished_reason="abort")
        generated = s.metric("generation_tokens_total")
        for pair, leader_first in enumerate((True, False)):
            req = {"prompt": f"Tell story {pair}:", "max_tokens": max_tokens, "temperature": 0,
                   "ignore_eos": True}
            leader, how = open_stream(s, req)
            follower, joined = open_stream(s, req)
            assert (how, joined) == ("miss", "coalesced")
            for conn in (leader, follower) if leader_first else (follower, leader):
                conn.sock.shutdown(socket.SHUT_RDWR)
                conn.close()
        # both slots free again, long before 2 x 3000 tokens could be generated
        wait_for(lambda: s.metric("num_requests_running") == 0)
        status, _, body = s.post("/v1/completions", {"prompt": "Hi", "max_tokens": 4, "temperature": 0})
        assert status == 200 and body["choices"][0]["finish_reason"] == "length"
        assert s.metric("generation_tokens_total") - generated < max_tokens
        assert s.metric("request_success_total", finished_reason="abort") - aborts == 2
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=60) == 0
        assert "draining: 0 request(s) in flight" in s.log_text()
    finally:
        s.stop()
