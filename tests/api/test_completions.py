"""Chat and text completions through the official openai SDK."""
import math
import subprocess
import time

import pytest

from conftest import BIN, MODEL, THREADS

CHAT = [{"role": "user", "content": "Name three colors."}]


def test_chat_completion_shape_and_usage(server, client):
    r = client.chat.completions.create(model=server.model, messages=CHAT, max_tokens=6, temperature=0)
    assert r.id.startswith("chatcmpl-")
    assert r.object == "chat.completion"
    assert abs(r.created - time.time()) < 600
    assert r.model == server.model
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0 and c.message.role == "assistant"
    assert c.finish_reason in ("stop", "length")
    assert isinstance(c.message.content, str) and c.message.content
    u = r.usage
    count = server.post("/tokenize", {"messages": CHAT})[2]["count"]
    assert u.prompt_tokens == count
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    if c.finish_reason == "length":
        assert u.completion_tokens == 6
    assert 1 <= u.completion_tokens <= 6
    assert u.prompt_tokens_details.cached_tokens >= 0


def test_text_completion_shape_and_usage(server, client):
    ids = server.post("/tokenize", {"prompt": "Once upon a time"})[2]["tokens"]
    r = client.completions.create(model=server.model, prompt=ids, max_tokens=5, temperature=0)
    assert r.id.startswith("cmpl-")
    assert r.object == "text_completion"
    c = r.choices[0]
    assert c.index == 0 and isinstance(c.text, str)
    assert r.usage.prompt_tokens == len(ids)
    assert c.finish_reason == "length" and r.usage.completion_tokens == 5
    # the same prompt as text gives the same greedy text
    r2 = client.completions.create(model=server.model, prompt="Once upon a time", max_tokens=5, temperature=0)
    assert r2.choices[0].text == c.text


def test_stream_equals_non_stream_for_same_seed(server, client):
    kw = dict(model=server.model, max_tokens=10, temperature=0.9, top_p=0.95, seed=1234)
    plain = client.chat.completions.create(messages=CHAT, **kw)
    chunks = list(client.chat.completions.create(messages=CHAT, stream=True,
                                                 stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.id == chunks[0].id for ch in chunks)
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
    assert finishes[-1] == plain.choices[0].finish_reason
    assert all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == plain.usage.prompt_tokens

    plain = client.completions.create(prompt="The weather today", **kw)
    chunks = list(client.completions.create(prompt="The weather today", stream=True, **kw))
    assert "".join(ch.choices[0].text for ch in chunks) == plain.choices[0].text
    assert chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason


def test_n_choices(server, client):
    r = client.chat.completions.create(model=server.model, messages=CHAT, n=3, max_tokens=4,
                                       temperature=1.0, seed=5)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert r.usage.completion_tokens == 12 or all(c.finish_reason for c in r.choices)
    r = client.completions.create(model=server.model, prompt=["A", "B"], n=2, max_tokens=3, temperature=0)
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    # greedy samples of one prompt agree; choices 2k and 2k+1 share prompt k
    assert r.choices[0].text == r.choices[1].text and r.choices[2].text == r.choices[3].text


def test_stop_strings_cut_the_text(server, client):
    kw = dict(model=server.model, prompt="Write a list of fruits:", max_tokens=24, temperature=0)
    full = client.completions.create(**kw).choices[0].text
    words = full.split()
    assert len(words) >= 3, full
    stop = words[2]
    expected = full[: full.index(stop)]
    r = client.completions.create(stop=[stop, "never-appears"], **kw)
    assert r.choices[0].text == expected
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(ch.choices[0].text for ch in client.completions.create(stop=stop, stream=True, **kw))
    assert streamed == expected


def test_chat_logprobs(server, client):
    r = client.chat.completions.create(model=server.model, messages=CHAT, max_tokens=5, temperature=0,
                                       logprobs=True, top_logprobs=20)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for item in content:
        top = item.top_logprobs
        assert len(top) == 20
        lps = [t.logprob for t in top]
        assert lps == sorted(lps, reverse=True)
        assert all(lp <= 0 for lp in lps)
        assert item.token == top[0].token and math.isclose(item.logprob, top[0].logprob, abs_tol=1e-5)
        mass = sum(math.exp(lp) for lp in lps)
        assert 0.5 < mass <= 1.0 + 1e-4, mass
        assert bytes(item.bytes).decode("utf-8", "replace") == item.token or "\ufffd" in item.token
    text = "".join(item.token for item in content)
    assert text.startswith(r.choices[0].message.content[:3])


def test_completion_logprobs_with_echo(server, client):
    prompt = "One, two, three,"
    r = client.completions.create(model=server.model, prompt=prompt, max_tokens=3, temperature=0,
                                  logprobs=2, echo=True)
    c = r.choices[0]
    assert c.text.startswith(prompt)
    lp = c.logprobs
    n = r.usage.prompt_tokens + r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x <= 0 for x in lp.token_logprobs[1:])
    assert lp.text_offset == sorted(lp.text_offset)
    assert "".join(lp.tokens) == c.text
    for tok, top in zip(lp.tokens[1:], lp.top_logprobs[1:]):
        assert tok in top and 2 <= len(top) <= 3


def test_prefix_cache_shows_in_usage(server, client):
    prompt = " ".join(f"item{i}" for i in range(60))
    first = client.completions.create(model=server.model, prompt=prompt, max_tokens=1, temperature=0)
    again = client.completions.create(model=server.model, prompt=prompt, max_tokens=1, temperature=0)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens > 32
    assert 16 <= cached < again.usage.prompt_tokens


def test_models_version_tokenize(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [server.model]
    status, _, body = server.post("/tokenize", {"prompt": "Hello world"})
    assert status == 200 and body["count"] == len(body["tokens"]) and body["max_model_len"] > 0
    status, _, back = server.post("/detokenize", {"tokens": body["tokens"]})
    assert status == 200 and back["prompt"] == "Hello world"
    status, _, data = server.request("GET", "/version")
    assert status == 200 and b"version" in data


def test_metrics_count_requests(server, client):
    before = server.metric("request_success_total", finished_reason="length")
    queued_before = server.metric("request_queue_time_seconds_count")
    client.completions.create(model=server.model, prompt="Hi", max_tokens=2, temperature=0,
                              extra_body={"ignore_eos": True})
    m = server.metrics()
    label = f'{{model_name="{server.model}",finished_reason="length"}}'
    assert m["tram:request_success_total" + label] == before + 1
    assert m[f'tram:e2e_request_latency_seconds_count{{model_name="{server.model}"}}'] >= 1
    assert m[f'tram:time_to_first_token_seconds_count{{model_name="{server.model}"}}'] >= 1
    assert m[f'tram:request_queue_time_seconds_count{{model_name="{server.model}"}}'] == queued_before + 1
    assert m[f'tram:request_queue_time_seconds_sum{{model_name="{server.model}"}}'] >= 0
    assert m[f'tram:generation_tokens_total{{model_name="{server.model}"}}'] >= 2
    assert m[f'tram:num_requests_running{{model_name="{server.model}"}}'] == 0
    assert "process_start_time_seconds" in m


@pytest.mark.parametrize("chat", [False, True], ids=["completion", "chat"])
def test_greedy_equals_tram_generate(server, client, chat):
    prompt = "Give me a fun fact about octopuses."
    cmd = [BIN, "generate", "-m", MODEL, "-p", prompt, "-n", "12", "--temperature", "0"]
    cmd += (["--chat"] if chat else []) + (["--threads", THREADS] if THREADS else [])
    out = subprocess.run(cmd, capture_output=True, timeout=300, check=True).stdout.decode()
    if chat:
        r = client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": prompt}],
                                           max_tokens=12, temperature=0)
        text = r.choices[0].message.content
    else:
        text = client.completions.create(model=server.model, prompt=prompt, max_tokens=12,
                                         temperature=0).choices[0].text
    assert out == text + "\n"  # generate ends its output with a newline
