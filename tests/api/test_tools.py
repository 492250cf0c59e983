"""Tools through the official SDK: tool_choice required / named give
arguments valid against the function's schema, a call -> result -> answer
round trip works streamed and not, and the stream is what the SDK's stream
helpers accumulate.  The default model's template has no tool format, so
this is tram's generic one (docs/tools.md)."""
import json

import jsonschema
import openai
import pytest


WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 20},
        "filters": {"type": "array", "maxItems": 2,
                    "items": {"type": "object", "properties": {"field": {"enum": ["title", "body"]},
                                                               "weight": {"type": "number", "minimum": 0, "maximum": 1}},
                              "required": ["field", "weight"], "additionalProperties": False}},
        "exact": {"type": ["boolean", "null"]},
    },
    "required": ["query", "filters", "exact"],
    "additionalProperties": False,
}
NOTE = {
    "type": "object",
    "properties": {"day": {"type": "string", "format": "date"},
                   "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 2}},
    "required": ["day", "tags"],
    "additionalProperties": False,
}
SCHEMAS = {"get_weather": WEATHER, "search_docs": SEARCH, "save_note": NOTE}
TOOLS = [{"type": "function", "function": {"name": name, "description": f"The {name} function.", "parameters": schema}}
         for name, schema in SCHEMAS.items()]
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the tools."}]


def check_calls(message, only=None, at_most=None):
    assert message.tool_calls, message
    assert message.content is None
    if at_most:
        assert len(message.tool_calls) <= at_most
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert only is None or call.function.name == only
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    assert len({c.id for c in message.tool_calls}) == len(message.tool_calls)


@pytest.mark.parametrize("seed", [1, 2])
def test_required_gives_valid_arguments(client, server, seed):
    """n samples at temperature 1 are n draws (seeded per sample) through one batch."""
    r = client.chat.completions.create(model=server.model, messages=ASK, tools=TOOLS, tool_choice="required", n=2,
                                       temperature=1.0, seed=seed, max_tokens=100, parallel_tool_calls=False)
    for choice in r.choices:
        assert choice.finish_reason == "tool_calls", choice
        check_calls(choice.message, at_most=1)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_named_function_gives_valid_arguments(client, server, name):
    r = client.chat.completions.create(model=server.model, messages=ASK, tools=TOOLS, n=2, temperature=1.0, seed=7,
                                       tool_choice={"type": "function", "function": {"name": name}}, max_tokens=100)
    for choice in r.choices:
        assert choice.finish_reason == "tool_calls", choice
        check_calls(choice.message, only=name, at_most=1)


def test_parallel_calls(client, server):
    """Several calls in one reply, each valid, when the model writes them
    (the grammar lets it end after any call)."""
    r = client.chat.completions.create(model=server.model, messages=ASK, tools=TOOLS, tool_choice="required",
                                       temperature=1.0, seed=3, n=2, max_tokens=100, logit_bias={"2": 5})
    for choice in r.choices:
        if choice.finish_reason == "tool_calls":
            check_calls(choice.message)
    assert any(c.finish_reason == "tool_calls" for c in r.choices)


NAMED = {"type": "function", "function": {"name": "get_weather"}}
CALL = dict(messages=ASK, tools=TOOLS, tool_choice=NAMED, temperature=0, max_tokens=60)


def answer(client, server, message):
    """The round trip's second half: the call's result back, a final answer."""
    check_calls(message, only="get_weather")
    call = message.tool_calls[0]
    history = ASK + [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 21, "sky": "clear"})}]
    final = client.chat.completions.create(model=server.model, messages=history, tools=TOOLS, temperature=0,
                                           max_tokens=16)
    assert final.choices[0].finish_reason in ("stop", "length", "tool_calls")
    return final


def test_round_trip(client, server):
    first = client.chat.completions.create(model=server.model, **CALL)
    assert first.choices[0].finish_reason == "tool_calls"
    final = answer(client, server, first.choices[0].message)
    # the call and its result reached the second prompt
    assert final.usage.prompt_tokens > first.usage.prompt_tokens + 20


def test_round_trip_streamed(client, server):
    """Through the SDK's stream helper: its events, its accumulation of the
    delta.tool_calls chunks (one with index, id, type and name, then the
    arguments in pieces), equal to the same request unstreamed; then the
    answer."""
    whole = client.chat.completions.create(model=server.model, **CALL).choices[0].message
    with client.chat.completions.stream(model=server.model, **CALL) as s:
        events = list(s)
        first = s.get_final_completion()
    kinds = [e.type for e in events]
    assert "tool_calls.function.arguments.done" in kinds and "content.delta" not in kinds
    deltas = [e.chunk.choices[0].delta for e in events if e.type == "chunk" and e.chunk.choices]
    calls = [tc for d in deltas for tc in d.tool_calls or []]
    assert len(calls) > 2 and all(tc.index == 0 for tc in calls)   # the arguments stream in pieces
    assert calls[0].id.startswith("call_") and calls[0].id != whole.tool_calls[0].id and calls[0].type == "function"
    assert calls[0].function.name == "get_weather" and calls[0].function.arguments == ""
    assert all(tc.id is None and tc.function.name is None for tc in calls[1:])
    assert "".join(tc.function.arguments for tc in calls[1:]) == whole.tool_calls[0].function.arguments
    assert all(d.content is None for d in deltas)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls[0].function.arguments == whole.tool_calls[0].function.arguments
    assert message.tool_calls[0].id == calls[0].id
    answer(client, server, message)


def test_none_and_auto_give_text(client, server):
    for choice in ("none", "auto"):
        r = client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": "Say hello."}],
                                           tools=TOOLS, tool_choice=choice, temperature=0, max_tokens=8)
        assert r.choices[0].message.tool_calls is None
        assert r.choices[0].message.content
        assert r.choices[0].finish_reason in ("stop", "length")


def test_tools_reach_the_prompt(server):
    """The generic format puts the tool list into the system prompt."""
    body = {"messages": ASK, "tools": TOOLS}
    ids = server.post("/tokenize", body)[2]["tokens"]
    text = server.post("/detokenize", {"tokens": ids})[2]["prompt"]
    assert "<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False) + "\n" in text
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


BAD = [
    ({"tools": [{"type": "retrieval"}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}, "tools[0].function.parameters"),
    ({"tools": []}, "tools"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"tools": [TOOLS[0], {"type": "function", "function": {"name": "f", "strict": True}}]}, "tools[1].function.strict"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
      "tool_choice": "required"}, "tools[0].function.parameters"),
]


@pytest.mark.parametrize("extra,param", BAD)
def test_400_names_the_field(server, extra, param):
    status, _, reply = server.post("/v1/chat/completions", {"messages": ASK, **extra})
    assert status == 400, reply
    assert reply["error"]["param"] == param, reply


def test_fields_table_through_http(server):
    """One row of each kind, through the server (the unit tests check every row)."""
    ok = server.post("/v1/chat/completions", {"messages": ASK, "max_tokens": 1, "user": "u", "store": False,
                                              "metadata": {"k": "v"}})
    assert ok[0] == 200
    assert "accepted and ignored: user, store, metadata" in server.log_text()
    for body, param in [({"suffix": "x", "prompt": "a"}, "suffix"), ({"best_of": 3, "prompt": "a"}, "best_of"),
                        ({"frobnicate": 1, "prompt": "a"}, "frobnicate")]:
        status, _, reply = server.post("/v1/completions", body)
        assert status == 400 and reply["error"]["param"] == param, reply
    r = server.post("/v1/completions", {"prompt": "a", "max_completion_tokens": 2, "max_tokens": 9})
    assert r[0] == 200 and r[2]["usage"]["completion_tokens"] <= 2


def test_auto_stream_content_is_the_whole_content(client, server):
    """With tools in auto mode content is held back only while a call may be
    starting: the streamed content adds up to the non-streamed one."""
    kw = dict(model=server.model, messages=[{"role": "user", "content": "Say hello in one sentence."}], tools=TOOLS,
              temperature=0, max_tokens=100, stop=["\n"])
    whole = client.chat.completions.create(**kw).choices[0]
    with client.chat.completions.stream(**kw) as s:
        deltas = [e.delta for e in s if e.type == "content.delta"]
        final = s.get_final_completion().choices[0]
    assert whole.message.tool_calls is None and final.message.tool_calls is None
    assert "".join(deltas) == final.message.content == whole.message.content
    assert final.finish_reason == whole.finish_reason


def test_sdk_parse_with_a_pydantic_tool(client, server):
    """client.chat.completions.parse with pydantic_function_tool (a strict
    function): the SDK parses the arguments into the model."""
    from typing import Literal

    from pydantic import BaseModel, Field

    class Forecast(BaseModel):
        city: str = Field(max_length=12)
        unit: Literal["celsius", "fahrenheit"]

    tool = openai.pydantic_function_tool(Forecast, name="forecast")
    r = client.chat.completions.parse(model=server.model, messages=ASK, tools=[tool], tool_choice="required",
                                      parallel_tool_calls=False, temperature=1.0, seed=5, max_tokens=60)
    call = r.choices[0].message.tool_calls[0]
    assert isinstance(call.function.parsed_arguments, Forecast)
    assert call.function.parsed_arguments.unit in ("celsius", "fahrenheit")
    assert len(call.function.parsed_arguments.city) <= 12


@pytest.mark.parametrize("max_tokens", [1, 3, 9])
@pytest.mark.parametrize("choice", ["required", NAMED])
def test_forced_call_cut_by_max_tokens_is_not_content(client, server, choice, max_tokens):
    """A forced call that max_tokens cuts: no tool_calls and empty content, as
    OpenAI and vLLM answer; streamed, no delta.content carries its markup."""
    kw = dict(model=server.model, messages=ASK, tools=TOOLS, tool_choice=choice, temperature=0,
              max_tokens=max_tokens)
    r = client.chat.completions.create(**kw)
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.tool_calls is None and not r.choices[0].message.content, r
    chunks = list(client.chat.completions.create(stream=True, **kw))
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
