"""Anthropic's Messages API through the real anthropic SDK: messages.create
and messages.stream (text, stop sequences, a tool round trip), count_tokens,
X-Api-Key, errors in Anthropic's shape, and every field tram cannot honour
refused with a 400 naming it.  The SDK no longer has temperature among its
arguments: it goes in extra_body, as any field the SDK does not know."""
import json
import subprocess

import anthropic
import jsonschema
import pytest

from conftest import BIN, Server

GREEDY = {"temperature": 0}
KEY = "sk-anthropic"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOLS = [{"name": "get_weather", "description": "The weather of a city.", "input_schema": WEATHER}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
ONE_CALL = {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=f"http://127.0.0.1:{server.port}", api_key="unused", max_retries=0,
                               timeout=300)


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def test_create_is_chat_with_anthropic_shapes(claude, client, server):
    m = claude.messages.create(model=server.model, max_tokens=8, system="Answer briefly.", messages=[
        {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}], extra_body=GREEDY)
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == server.model
    assert m.stop_reason in ("end_turn", "max_tokens") and m.stop_sequence is None
    assert [b.type for b in m.content] == ["text"]
    chat = client.chat.completions.create(model=server.model, max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a colour."}])
    assert text_of(m) == chat.choices[0].message.content
    assert m.usage.output_tokens == chat.usage.completion_tokens
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == chat.usage.prompt_tokens
    assert {"max_tokens": "length", "end_turn": "stop"}[m.stop_reason] == chat.choices[0].finish_reason


@pytest.fixture(scope="module")
def keyed():
    """A server with an API key and the response cache."""
    s = Server("--api-key", KEY, "--response-cache", "deterministic")
    yield s
    assert s.stop() == 0, s.final_log


def test_stop_sequence_is_named_also_from_the_cache(keyed):
    claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{keyed.port}", api_key=KEY, max_retries=0)
    ask = [{"role": "user", "content": "Tell me about the sea."}]
    for expected_cache in ("miss", "hit"):
        raw = claude.messages.with_raw_response.create(model=keyed.model, max_tokens=10, messages=ask,
                                                       stop_sequences=["\u2603", " "], extra_body=GREEDY)
        assert raw.headers.get("x-tram-cache") == expected_cache
        m = raw.parse()
        assert m.stop_reason == "stop_sequence" and m.stop_sequence == " ", m
        assert text_of(m) and " " not in text_of(m)


def test_prefill_is_continued(claude, server):
    ask = [{"role": "user", "content": "Count from one to five."}]
    whole = text_of(claude.messages.create(model=server.model, max_tokens=10, messages=ask, extra_body=GREEDY))
    start = whole[:8]
    rest = claude.messages.create(model=server.model, max_tokens=6, extra_body=GREEDY,
                                  messages=ask + [{"role": "assistant", "content": start}])
    assert (start + text_of(rest)).startswith(whole[:len(start) + 4])


def tool_round_trip(claude, server, stream):
    """A call forced by tool_choice, its result sent back, and the answer."""
    def call(**kw):
        if not stream:
            return claude.messages.create(model=server.model, extra_body=GREEDY, tools=TOOLS, **kw)
        with claude.messages.stream(model=server.model, extra_body=GREEDY, tools=TOOLS, **kw) as s:
            events = [e.type for e in s]
            final = s.get_final_message()
        assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
        assert events.count("content_block_start") == events.count("content_block_stop") == len(final.content)
        return final

    first = call(max_tokens=40, tool_choice=ONE_CALL, messages=ASK)
    assert first.stop_reason == "tool_use"
    uses = [b for b in first.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather"
    jsonschema.validate(uses[0].input, WEATHER)
    history = ASK + [{"role": "assistant", "content": first.content},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                   "content": [{"type": "text", "text": "18 C, sunny"}]}]}]
    second = call(max_tokens=12, tool_choice={"type": "none"}, messages=history)
    assert second.stop_reason in ("end_turn", "max_tokens") and text_of(second)
    assert all(b.type == "text" for b in second.content)
    return first, second, history


@pytest.fixture(scope="module")
def created(claude, server):
    return tool_round_trip(claude, server, stream=False)


def test_tool_round_trip_created(created):
    assert created[1].usage.input_tokens + created[1].usage.cache_read_input_tokens > 0


def test_tool_round_trip_streamed_equals_created(claude, server, created):
    streamed = tool_round_trip(claude, server, stream=True)
    assert created[0].content[0].input == streamed[0].content[0].input
    assert text_of(created[1]) == text_of(streamed[1])
    assert created[1].usage.output_tokens == streamed[1].usage.output_tokens


def test_stream_text_events(claude, server):
    with claude.messages.stream(model=server.model, max_tokens=6, messages=ASK, extra_body=GREEDY) as s:
        pieces = list(s.text_stream)
        final = s.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == text_of(final)
    assert final.stop_reason in ("end_turn", "max_tokens") and final.usage.output_tokens > 0


def test_count_tokens_is_the_prompt_that_runs(claude, server, created):
    _, second, history = created
    counted = claude.messages.count_tokens(model=server.model, tools=TOOLS, tool_choice={"type": "none"},
                                           messages=history)
    assert counted.input_tokens == second.usage.input_tokens + second.usage.cache_read_input_tokens
    bare = claude.messages.count_tokens(model=server.model, messages=ASK)
    assert 0 < bare.input_tokens < claude.messages.count_tokens(model=server.model, messages=ASK,
                                                                 tools=TOOLS).input_tokens


def test_x_api_key_and_bearer_are_keys(keyed):
    url = f"http://127.0.0.1:{keyed.port}"
    for kw in ({"api_key": KEY}, {"auth_token": KEY}):
        c = anthropic.Anthropic(base_url=url, max_retries=0, **kw)
        assert c.messages.count_tokens(model=keyed.model, messages=ASK).input_tokens > 0
    with pytest.raises(anthropic.AuthenticationError) as e:
        anthropic.Anthropic(base_url=url, api_key="sk-wrong", max_retries=0).messages.create(
            model=keyed.model, max_tokens=4, messages=ASK)
    assert e.value.status_code == 401 and e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "authentication_error"
    status, _, body = keyed.post("/v1/messages", {"model": keyed.model, "max_tokens": 4, "messages": ASK},
                                 {"X-Api-Key": KEY, "anthropic-version": "2023-06-01"})
    assert status == 200 and body["type"] == "message"
    status, _, body = keyed.post("/v1/chat/completions", {"messages": ASK, "max_tokens": 2}, {"X-Api-Key": KEY})
    assert status == 200, body


def anthropic_error(status, body, code):
    assert status == code, body
    assert body["type"] == "error" and set(body["error"]) >= {"type", "message"}, body
    return body["error"]


def test_errors_have_anthropics_shape(claude, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=server.model, max_tokens=0, messages=ASK)
    assert e.value.body["error"]["type"] == "invalid_request_error" and "max_tokens" in e.value.message
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="claude-nonexistent", max_tokens=4, messages=ASK)
    cases = [
        ({"model": server.model, "messages": ASK}, "max_tokens"),
        ({"model": server.model, "max_tokens": 4, "messages": ASK, "stop_sequences": [""]}, "stop_sequences"),
        ({"model": server.model, "max_tokens": 4, "messages": ASK, "temperature": 9}, "temperature"),
        ({"model": server.model, "max_tokens": 4, "messages": [{"role": "tool", "content": "x"}]},
         "messages[0].role"),
        ({"model": server.model, "max_tokens": 4, "messages": ASK, "tools": [dict(TOOLS[0], name="bad name")]},
         "tools[0].name"),
        ({"model": server.model, "max_tokens": 4, "messages": ASK, "frobnicate": 1}, "frobnicate"),
    ]
    for body, param in cases:
        error = anthropic_error(*server.post("/v1/messages", body)[::2], 400)
        assert error["type"] == "invalid_request_error" and error["param"] == param, (param, error)
        assert param in error["message"], error
    status, _, data = server.request("POST", "/v1/messages", b"{not json", {"Content-Type": "application/json"})
    anthropic_error(status, json.loads(data), 400)
    status, _, data = server.request("GET", "/v1/messages/count_tokens")
    anthropic_error(status, json.loads(data), 405)


TEXT = {"type": "text", "text": "hi"}
USE = {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "cold"}


def called(use=USE, result=RESULT):
    return [ASK[0], {"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


# Every field the field table refuses, with a value that would change the
# reply; test_every_refused_row_is_walked checks this list against the table.
REFUSED = {
    ("", "thinking"): {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    ("", "container"): {"container": "c1"},
    ("", "mcp_servers"): {"mcp_servers": [{"type": "url", "url": "x", "name": "m"}]},
    ("", "context_management"): {"context_management": {"edits": []}},
    ("", "diagnostics"): {"diagnostics": {"previous_message_id": "msg_1"}},
    ("output_config", "effort"): {"output_config": {"effort": "low"}},
    ("messages[].content[]", "citations"): {"messages": [{"role": "user", "content": [dict(TEXT, citations=[{}])]}]},
    ("messages[].content[] (tool_use)", "caller"): {"messages": called(dict(USE, caller={"type": "code_execution_20250825", "tool_id": "x"}))},
    ("messages[].content[] (tool_use)", "toolset_name"): {"messages": called(dict(USE, toolset_name="t"))},
    ("messages[].content[] (tool_result)", "toolset_name"): {"messages": called(result=dict(RESULT, toolset_name="t"))},
    ("tools[]", "input_examples"): {"tools": [dict(TOOLS[0], input_examples=[{"city": "Oslo"}])]},
    ("tools[]", "defer_loading"): {"tools": [dict(TOOLS[0], defer_loading=True)]},
    ("tools[]", "allowed_callers"): {"tools": [dict(TOOLS[0], allowed_callers=["code_execution_20250825"])]},
}
PATHS = {("", "thinking"): "thinking", ("messages[].content[]", "citations"): "messages[0].content[0].citations",
         ("messages[].content[] (tool_use)", "caller"): "messages[1].content[0].caller",
         ("messages[].content[] (tool_use)", "toolset_name"): "messages[1].content[0].toolset_name",
         ("messages[].content[] (tool_result)", "toolset_name"): "messages[2].content[0].toolset_name",
         ("tools[]", "input_examples"): "tools[0].input_examples", ("tools[]", "defer_loading"): "tools[0].defer_loading",
         ("tools[]", "allowed_callers"): "tools[0].allowed_callers"}
# Not fields but what they hold: block and tool types tram cannot take.
REFUSED_VALUES = [
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]},
     "messages[0].content[0].type"),
    ({"messages": ASK + [{"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}]}]},
     "messages[1].content[0].type"),
    ({"messages": ASK + [{"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}]},
     "messages[1].content[0].type"),
    ({"messages": ASK + [{"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]}]},
     "messages[1].content[0].type"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools[0].type"),
]


def refused_rows():
    """(object, field) of every row the field table refuses on /v1/messages."""
    page = subprocess.run([BIN, "fields", "--markdown"], check=True, capture_output=True, text=True).stdout
    section = page.split("\n## /v1/messages\n", 1)[1].split("\n## ", 1)[0]
    rows, where = set(), ""
    for line in section.splitlines():
        if line.startswith("### "):
            where = line[4:].strip("`")
        elif line.startswith("| `") and "| a 400" in line:
            rows.add((where, line.split("`")[1]))
    return rows


def test_every_refused_row_is_walked():
    assert refused_rows() == set(REFUSED)


@pytest.mark.parametrize("row", sorted(REFUSED))
def test_every_unsupported_field_is_400_naming_it(server, row):
    body = {"model": server.model, "max_tokens": 4, "messages": ASK, "tools": TOOLS, **REFUSED[row]}
    error = anthropic_error(*server.post("/v1/messages", body)[::2], 400)
    param = PATHS.get(row, f"{row[0]}.{row[1]}" if row[0] else row[1])
    assert error["param"] == param and param in error["message"], error


@pytest.mark.parametrize("extra, param", REFUSED_VALUES)
def test_every_unsupported_block_and_tool_is_400_naming_it(server, extra, param):
    body = {"model": server.model, "max_tokens": 4, "messages": ASK, **extra}
    error = anthropic_error(*server.post("/v1/messages", body)[::2], 400)
    assert error["param"] == param, error
