"""Validation at the end: an output that matches its grammar but not its JSON
Schema is not returned as a normal reply.  The server here runs with the
test hook TRAM_TEST_SCHEMA_GBNF, which replaces every schema's grammar with
one that writes `[1, 1]`: a schema with uniqueItems must then end with
finish_reason "error" and an error object naming the keyword, streamed and
not, on both endpoints; a schema that `[1, 1]` meets must end with "stop";
and a reply cut by max_tokens is "length", never checked as complete."""
import json

import pytest

from conftest import Server, stream_raw

UNIQUE = {"type": "array", "uniqueItems": True}
INTEGERS = {"type": "array", "items": {"type": "integer"}}


@pytest.fixture(scope="module")
def loose(monkeypatch_module):
    monkeypatch_module.setenv("TRAM_TEST_SCHEMA_GBNF", 'root ::= "[1, 1]"')
    s = Server()
    yield s
    assert s.stop() == 0, s.final_log


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def chat(schema, **extra):
    return {"messages": [{"role": "user", "content": "Two numbers."}], "max_tokens": 16, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}, **extra}


def test_an_output_that_fails_its_schema_ends_with_error(loose):
    before = loose.metric("structured_output_invalid_total")
    status, _, body = loose.post("/v1/chat/completions", chat(UNIQUE))
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["message"]["content"] == "[1, 1]"
    assert choice["finish_reason"] == "error"
    assert choice["error"]["code"] == "uniqueItems" and choice["error"]["param"] == ""
    assert choice["error"]["type"] == "invalid_output" and "uniqueItems" in choice["error"]["message"]
    # the same through vLLM's field on the completions endpoint
    status, _, body = loose.post("/v1/completions", {"prompt": "Two numbers:", "max_tokens": 16,
                                                     "structured_outputs": {"json": UNIQUE}})
    assert status == 200 and body["choices"][0]["finish_reason"] == "error", body
    assert loose.metric("structured_output_invalid_total") == before + 2


def test_the_stream_ends_the_same_way(loose):
    events = stream_raw(loose.port, "/v1/chat/completions", chat(UNIQUE, stream=True))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "[1, 1]"
    last = chunks[-1]["choices"][0]
    assert last["finish_reason"] == "error" and last["error"]["code"] == "uniqueItems"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_an_output_that_meets_its_schema_stops(loose):
    status, _, body = loose.post("/v1/chat/completions", chat(INTEGERS))
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop", body
    assert "error" not in body["choices"][0]
    events = stream_raw(loose.port, "/v1/chat/completions", chat(INTEGERS, stream=True))
    last = json.loads(events[-2])["choices"][0]
    assert last["finish_reason"] == "stop" and "error" not in last


def test_a_cut_reply_is_not_checked_as_complete(loose):
    status, _, body = loose.post("/v1/chat/completions", chat(UNIQUE, max_tokens=2))
    assert status == 200 and body["choices"][0]["finish_reason"] == "length", body
    assert "error" not in body["choices"][0]


def test_a_schema_the_validator_cannot_read_is_a_400(loose):
    status, _, body = loose.post("/v1/chat/completions", chat({"$ref": "http://elsewhere.test/s.json"}))
    assert status == 400, body
    assert body["error"]["param"] == "response_format.json_schema.schema"
