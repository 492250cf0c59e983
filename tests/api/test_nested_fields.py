"""The field-table rule at every level of a request (issue 22): an unknown
key in any nested object is a 400 naming its whole path; the inputs peers
accept (developer role, llama.cpp's response_format schema, integer-valued
floats, vLLM's continuous_usage_stats) are accepted.  Several cases are
ported from llama.cpp's server tests (test_chat_completion.py's response
formats) and vLLM's (test_chat.py: long seeds, custom roles), rewritten
for tram."""
import json

import jsonschema
import openai
import pytest

from conftest import stream_raw

MSG = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
CALLED = [{"role": "user", "content": "hi"},
          {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "ok"}]

# (body fields, the path whose unknown key "zz" must be named)
NESTED = [
    ({"stream": True, "stream_options": {"zz": 1}}, "stream_options"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "f"}, "zz": 1}}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "f", "zz": 1}}}, "tool_choice.function"),
    ({"tools": [{**TOOLS[0], "zz": 1}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {**TOOLS[0]["function"], "zz": 1}}]}, "tools[0].function"),
    ({"messages": [{"role": "user", "content": "hi", "zz": 1}]}, "messages[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "zz": 1}]}]}, "messages[0].content[0]"),
    ({"messages": [CALLED[0], {**CALLED[1], "tool_calls": [{**CALLED[1]["tool_calls"][0], "zz": 1}]}, CALLED[2]]},
     "messages[1].tool_calls[0]"),
    ({"messages": [CALLED[0], {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", "zz": 1}}]}, CALLED[2]]},
     "messages[1].tool_calls[0].function"),
    ({"response_format": {"type": "json_object", "zz": 1}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {}, "zz": 1}}},
     "response_format.json_schema"),
]


@pytest.mark.parametrize("fields,path", NESTED)
def test_an_unknown_nested_key_is_400_naming_its_path(server, fields, path):
    status, _, reply = server.post("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, **fields})
    assert status == 400, reply
    assert reply["error"]["param"] == path + ".zz", reply
    # and without it the same body is answered
    status, _, reply = server.request("POST", "/v1/chat/completions", without_zz({"messages": MSG, "max_tokens": 1,
                                                                                  **fields}))
    assert status == 200, reply


def without_zz(v):
    if isinstance(v, dict):
        return {k: without_zz(x) for k, x in v.items() if k != "zz"}
    return [without_zz(x) for x in v] if isinstance(v, list) else v


def test_the_sdk_sends_a_streamed_call_back_with_its_index(client, server):
    """The SDK's accumulated message keeps each call's index: ignored."""
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    r = client.chat.completions.create(model=server.model, max_tokens=2, tools=TOOLS, messages=[
        MSG[0], {"role": "assistant", "tool_calls": [call]}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_developer_role_is_the_system_turn(server):
    """vLLM's and OpenAI's newer role: rendered exactly as a system message."""
    prompts = []
    for role in ("system", "developer"):
        body = {"messages": [{"role": role, "content": "Answer in French."}, MSG[0]]}
        status, _, reply = server.post("/tokenize", body)
        assert status == 200, reply
        prompts.append(reply["tokens"])
    assert prompts[0] == prompts[1]
    status, _, reply = server.post("/v1/chat/completions", {
        "messages": [{"role": "developer", "content": "Be brief."}, MSG[0]], "max_tokens": 2})
    assert status == 200, reply


# llama.cpp's response formats, tram's answers: the schema inside json_object
# holds; a format tram cannot read is a 400 naming where.
FORMATS_OK = [
    ({"type": "json_object", "schema": {"const": "42"}}, lambda v: v == "42"),
    ({"type": "json_object", "schema": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
     lambda v: isinstance(v, list) and all(isinstance(x, int) for x in v)),
    ({"type": "json_schema", "json_schema": {"name": "n", "schema": {"const": "foooooo"}}}, lambda v: v == "foooooo"),
]
FORMATS_BAD = [
    ({"type": "sound"}, "response_format.type"),
    ({"type": "json_object", "schema": 123}, "response_format.schema"),
    ({"type": "json_object", "schema": {"type": 123}}, "response_format.schema"),
    ({"type": "json_object", "schema": {"type": "hiccup"}}, "response_format.schema"),
    ({"type": "text", "json_schema": {"name": "n", "schema": {}}}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "n", "schema": {}}, "schema": {}}, "response_format.schema"),
]


@pytest.mark.parametrize("fmt,holds", FORMATS_OK)
def test_response_format_schema_holds(server, fmt, holds):
    status, _, reply = server.post("/v1/chat/completions", {
        "messages": [{"role": "system", "content": "You are a coding assistant."},
                     {"role": "user", "content": "Write an example"}],
        "response_format": fmt, "max_tokens": 24, "temperature": 0})
    assert status == 200, reply
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    assert holds(json.loads(choice["message"]["content"])), choice


@pytest.mark.parametrize("fmt,param", FORMATS_BAD)
def test_response_format_it_cannot_read_is_400(server, fmt, param):
    status, _, reply = server.post("/v1/chat/completions", {"messages": MSG, "response_format": fmt, "max_tokens": 2})
    assert status == 400, reply
    assert reply["error"]["param"] == param, reply


def test_continuous_usage_stats(server):
    """vLLM's stream option: every chunk carries the usage so far, growing to
    the final count."""
    events = stream_raw(server.port, "/v1/chat/completions", {
        "messages": MSG, "max_tokens": 6, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    assert all(c.get("usage") for c in chunks), chunks
    done = [c["usage"]["completion_tokens"] for c in chunks]
    assert done == sorted(done) and done[-1] == chunks[-1]["usage"]["completion_tokens"] > 0
    assert all(c["usage"]["prompt_tokens"] == chunks[-1]["usage"]["prompt_tokens"] for c in chunks if c["choices"]
               and c["usage"]["completion_tokens"])


@pytest.mark.parametrize("seed", [2**63, -2**63 - 1, 10**30])
def test_long_seed_is_400_naming_seed(client, server, seed):
    """vLLM's test_long_seed: past 64 bits is out of range, named, not a
    parse error."""
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=server.model, messages=MSG, max_tokens=1, seed=seed)
    assert e.value.body["param"] == "seed" and "out of range" in e.value.body["message"]


def test_valid_json_tram_cannot_hold_is_named(server):
    cases = [({"messages": [{"role": "user", "content": "a\u0000b"}]}, "messages[0].content"),
             ({"messages": MSG, "stop": ["x", "\u0000"]}, "stop[1]"),
             ({"messages": MSG, "response_format": {"type": "json_schema", "json_schema": {
                 "name": "n", "schema": {"enum": [1, 2**70]}}}}, "response_format.json_schema.schema.enum[1]")]
    for body, param in cases:
        status, _, reply = server.post("/v1/chat/completions", {"max_tokens": 1, **body})
        assert status == 400 and reply["error"]["param"] == param, reply


def test_integer_valued_decimals_and_schema_annotations_are_taken(client, server):
    """pydantic-based servers take 16.0 for an int (16.5 stays a 400); a
    schema's annotations, a huge default among them, change nothing."""
    params = {"type": "object", "strict": True, "title": "T", "description": "d", "$comment": "c",
              "properties": {"n": {"type": "integer", "default": 2**80, "examples": [1], "deprecated": False,
                                   "readOnly": False, "writeOnly": False, "title": "N"}},
              "required": ["n"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "f", "parameters": params}}]
    r = client.chat.completions.create(model=server.model, messages=MSG, max_tokens=30.0, n=1.0, seed=7.0, extra_body={"top_k": 5.0},
                                       tools=tools, tool_choice="required", temperature=0, parallel_tool_calls=False)
    assert r.choices[0].finish_reason in ("tool_calls", "length"), r
    if r.choices[0].message.tool_calls:
        assert isinstance(json.loads(r.choices[0].message.tool_calls[0].function.arguments)["n"], int)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=server.model, messages=MSG, max_tokens=16.5)
    assert e.value.body["param"] == "max_tokens"
