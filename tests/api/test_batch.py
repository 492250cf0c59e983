"""`tram generate --input`: OpenAI Batch files run through the server's own
request path (docs/batch.md).  Every body it writes must be the body `tram
serve` answers to the same request, up to what differs between any two
answers: the ids (the response's and its tool calls'), created, and the
prefix-cache hits in usage (they depend on what ran before).  Bad lines get
their own error line and the rest run; duplicate custom_ids stop the run
before anything runs; a run killed with SIGKILL finishes when run again, with
every id exactly once.  All greedy and short, so that it stays cheap."""
import concurrent.futures
import copy
import json
import os
import signal
import subprocess
import tempfile
import time

from batch_files import CHAT, COMPLETIONS, batch_line, fact_lines, thousand_lines
from conftest import BIN, MODEL, THREADS, Server

def write_jsonl(path, lines):
    with open(path, "w") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(x) for x in f]


def generate(*args, stdin=None, check_rc=None, timeout=600):
    cmd = [BIN, "generate", "-m", MODEL, *args] + (["--threads", THREADS] if THREADS else [])
    r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    if check_rc is not None:
        assert r.returncode == check_rc, r.stderr.decode()[-3000:]
    return r


def run_file(lines, *args, check_rc=0):
    """Runs lines through one `tram generate --input`; {custom_id: output line}."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        write_jsonl(src, lines)
        r = generate("--input", src, "--output", dst, *args, check_rc=check_rc)
        outs = read_jsonl(dst)
    by_id = {o["custom_id"]: o for o in outs}
    assert len(by_id) == len(outs), "a custom_id written twice"
    return by_id, r.stderr.decode()


def comparable(body):
    """A body without what differs between two answers to one request."""
    body = copy.deepcopy(body)
    body.pop("id", None)
    body.pop("created", None)
    body.get("usage", {}).pop("prompt_tokens_details", None)
    for choice in body.get("choices", []):
        for call in (choice.get("message") or {}).get("tool_calls") or []:
            call.pop("id", None)
    return body


def ask_server(server, lines, workers=32):
    """The server's (status, body) for each Batch line, sent a few at a time."""
    def one(line):
        status, _, body = server.post(line["url"], line["body"])
        return status, body
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, lines))


def assert_same_as_server(server, lines, outs):
    for line, (status, body) in zip(lines, ask_server(server, lines)):
        out = outs[line["custom_id"]]
        assert out["response"]["status_code"] == status, (line, out)
        assert comparable(out["response"]["body"]) == comparable(body), line["custom_id"]


def test_mixed_good_and_bad_lines_each_get_their_answer(server):
    good_chat = batch_line("chat", CHAT, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3,
                                          "temperature": 0})
    good_text = batch_line("text", COMPLETIONS, {"prompt": "The capital of France is", "max_tokens": 3,
                                                 "temperature": 0, "n": 2, "stop": ["\n"]})
    # refused by the server's parser: the server's own status and message
    by_server = [batch_line("unknown", COMPLETIONS, {"prompt": "x", "frobnicate": 1}),
                 batch_line("bad-type", CHAT, {"messages": "hi"}),
                 batch_line("range", COMPLETIONS, {"prompt": "x", "temperature": -3}),
                 batch_line("model", COMPLETIONS, {"prompt": "x", "model": "no-such-model"}),
                 batch_line("logit-bias", COMPLETIONS, {"prompt": "x", "logit_bias": {"x": 1}})]
    lines = [good_chat, by_server[0], "not json", good_text, *by_server[1:],
             batch_line("stream", CHAT, {"messages": [{"role": "user", "content": "Hi"}], "stream": True}),
             {"custom_id": "url", "url": "/v1/embeddings", "body": {}},
             {"custom_id": "key", "url": COMPLETIONS, "body": {"prompt": "x"}, "extra": 1},
             {"prompt": "A plain line", "max_tokens": 2, "temperature": 0}]
    outs, err = run_file(lines, check_rc=1)
    assert sorted(outs) == sorted(["chat", "text", "line-3", "line-12", "stream", "url", "key",
                                   *(x["custom_id"] for x in by_server)])
    assert_same_as_server(server, [good_chat, good_text, *by_server], outs)
    for custom_id, param in [("line-3", None), ("stream", "stream"), ("url", "url"), ("key", "extra")]:
        out = outs[custom_id]
        assert out["response"]["status_code"] == 400, out
        error = out["response"]["body"]["error"]
        assert error["param"] == param and error["type"] == "invalid_request_error", out
        assert out["error"]["message"] == error["message"]
    assert outs["line-12"]["response"]["status_code"] == 200 and outs["line-12"]["error"] is None
    assert outs["chat"]["id"].startswith("batch_req_") and outs["chat"]["error"] is None
    assert outs["chat"]["response"]["request_id"] == outs["chat"]["response"]["body"]["id"]
    summary = err.strip().splitlines()[-1]
    assert "12 requests: 3 answered, 9 failed" in summary, summary


def test_duplicate_custom_ids_stop_the_run_before_it_starts():
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        lines = fact_lines(3)
        write_jsonl(src, [lines[0], lines[1], "", lines[0], lines[2], lines[1]])
        r = generate("--input", src, "--output", dst, check_rc=2)
        err = r.stderr.decode()
        assert f"{src}:4: custom_id 'r0' is already the id of line 1" in err, err
        assert f"{src}:6: custom_id 'r1' is already the id of line 2" in err, err
        assert "usage:" not in err and not os.path.exists(dst)


def test_sampling_flags_are_for_one_prompt_only():
    r = generate("--input", "in.jsonl", "--output", "out.jsonl", "--temperature", "0.5", check_rc=2)
    assert "--temperature applies to -p" in r.stderr.decode()


def test_stdin_to_stdout():
    lines = fact_lines(4)
    r = generate("--input", "-", "--output", "-", check_rc=0,
                 stdin="".join(json.dumps(x) + "\n" for x in lines).encode())
    outs = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert sorted(o["custom_id"] for o in outs) == [x["custom_id"] for x in lines]
    assert all(o["response"]["status_code"] == 200 for o in outs)


def wait_for_lines(path, count, proc, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "the run ended before it could be killed"
        if os.path.exists(path):
            with open(path, "rb") as f:
                if f.read().count(b"\n") >= count:
                    return
        time.sleep(0.05)
    raise AssertionError("no output")


def test_killed_run_finishes_when_run_again():
    lines = fact_lines(40, max_tokens=6, prefix="k")
    whole, _ = run_file(lines)
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        write_jsonl(src, lines)
        # four at a time, so that answers come out one step after another
        cmd = [BIN, "generate", "-m", MODEL, "--input", src, "--output", dst, "--max-num-seqs", "2",
               "--threads", THREADS or "1"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_lines(dst, 6, proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        with open(dst) as f:
            kept = [json.loads(x)["custom_id"] for x in f if x.endswith("\n")]
        assert 6 <= len(kept) < len(lines)
        # what a kill in the middle of a write leaves: a line without its end
        torn = next(x["custom_id"] for x in lines if x["custom_id"] not in kept)
        with open(dst, "a") as f:
            f.write(json.dumps({"id": "batch_req_0", "custom_id": torn, "response": {"status_code": 200}})[:40])
        r = generate("--input", src, "--output", dst, check_rc=0)
        assert f"{len(kept)} in {dst} already" in r.stderr.decode()
        outs = read_jsonl(dst)
    assert sorted(o["custom_id"] for o in outs) == sorted(x["custom_id"] for x in lines)
    for o in outs:
        assert comparable(o["response"]["body"]) == comparable(whole[o["custom_id"]]["response"]["body"])


def test_a_thousand_lines_are_what_the_server_answers(server):
    lines = thousand_lines()
    assert len(lines) == 1000
    outs, err = run_file(lines)
    assert len(outs) == 1000 and "1000 answered, 0 failed" in err.splitlines()[-1], err[-2000:]
    assert_same_as_server(server, lines, outs)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
                   "required": ["city"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
PERSON = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["age"], "additionalProperties": False}


def feature_lines():
    """One line for each thing the server does beyond plain text."""
    bodies = [
        (CHAT, {"messages": ASK, "tools": [WEATHER], "tool_choice": NAMED, "max_tokens": 30}),
        (CHAT, {"messages": ASK, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 30}),
        (CHAT, {"messages": ASK, "response_format": {"type": "json_schema",
                                                      "json_schema": {"name": "p", "schema": PERSON}},
                "max_tokens": 12}),
        (COMPLETIONS, {"prompt": "Is Lyon in France? Answer:", "guided_choice": ["yes", "no"], "max_tokens": 4}),
        (COMPLETIONS, {"prompt": "Phone:", "structured_outputs": {"regex": r"\d{3}-\d{2}"}, "max_tokens": 8}),
        (CHAT, {"messages": ASK, "n": 2, "logprobs": True, "top_logprobs": 2, "max_tokens": 3}),
        (COMPLETIONS, {"prompt": "The capital of France is", "logprobs": 2, "echo": True, "max_tokens": 2}),
        (COMPLETIONS, {"prompt": ["One, two,", "Red, green,"], "max_tokens": 2, "stop": [","]}),
    ]
    return [batch_line(f"f{i}", url, {**body, "temperature": 0}) for i, (url, body) in enumerate(bodies)]


def assert_close(a, b, where="body"):
    """Equal, floats within 1e-3 (a logprob from another batch's matmul)."""
    if isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) <= 1e-3, (where, a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), (where, a, b)
        for k in a:
            assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def test_tools_structured_outputs_n_and_logprobs_are_the_servers(server):
    lines = feature_lines()
    outs, _ = run_file(lines)
    for line, (status, body) in zip(lines, ask_server(server, lines)):
        out = outs[line["custom_id"]]["response"]
        assert out["status_code"] == status == 200, (line, out)
        assert_close(comparable(out["body"]), comparable(body), line["custom_id"])
    calls = outs["f0"]["response"]["body"]["choices"][0]["message"]["tool_calls"]
    assert calls and calls[0]["function"]["name"] == "get_weather"
    assert len(outs["f5"]["response"]["body"]["choices"]) == 2


def test_a_batch_file_preloads_the_response_cache():
    """The preload reads the same lines: the file preloads a server, whose
    hits are the bodies the batch wrote."""
    lines = feature_lines()[2:5] + fact_lines(2)
    outs, _ = run_file(lines)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    try:
        s = Server("--response-cache", "deterministic", "--response-cache-preload", f.name)
        try:
            for line in lines:
                status, headers, body = s.post(line["url"], line["body"])
                assert status == 200 and headers.get("x-tram-cache") == "hit", (line, headers)
                assert comparable(body) == comparable(outs[line["custom_id"]]["response"]["body"])
        finally:
            assert s.stop() == 0, s.final_log
    finally:
        os.unlink(f.name)
