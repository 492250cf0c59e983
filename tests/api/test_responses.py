"""POST /v1/responses through the official SDK: responses.create, .stream
and .parse, the same reply as the chat completion it runs as, tool round
trips over previous_response_id and over input items without state, the
stored responses (GET, DELETE, one API key's never another's, eviction),
and a 400 naming every field tram refuses."""
import json
import subprocess
import time
from typing import Literal

import jsonschema
import openai
import pytest
from pydantic import BaseModel

from conftest import BIN, Server

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city.", "parameters": WEATHER}]
ASK = "What is the weather in Paris? Use the tools."
# one call, forced, and nothing after it: the reply ends well before max_output_tokens
FORCED = dict(tools=TOOLS, tool_choice={"type": "function", "name": "get_weather"}, parallel_tool_calls=False,
              max_output_tokens=60)


class Answer(BaseModel):
    answer: Literal["yes", "no"]
    sure: bool


def create(client, server, **kw):
    return client.responses.create(model=server.model, **{"temperature": 0, **kw})


def successes(server):
    return sum(v for k, v in server.metrics().items() if k.startswith("tram:request_success_total"))


def test_create_is_the_chat_completion_it_runs_as(client, server):
    before = successes(server)
    r = create(client, server, input="Say hello.", instructions="Be brief.", max_output_tokens=8)
    assert successes(server) == before + 1   # counted as any request is
    chat = client.chat.completions.create(model=server.model, temperature=0, max_tokens=8, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}])
    assert r.id.startswith("resp_") and r.object == "response" and r.model == server.model
    assert r.output_text == chat.choices[0].message.content and r.output_text
    assert [item.type for item in r.output] == ["message"] and r.output[0].role == "assistant"
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    assert r.usage.output_tokens == chat.usage.completion_tokens == 8
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert chat.choices[0].finish_reason == "length"
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.instructions == "Be brief." and r.max_output_tokens == 8 and r.store is True


def test_input_items_are_the_same_conversation_as_a_string(client, server):
    plain = create(client, server, input="Name a colour.", max_output_tokens=6)
    items = create(client, server, max_output_tokens=6, input=[
        {"role": "user", "content": [{"type": "input_text", "text": "Name a colour."}]}])
    assert items.output_text == plain.output_text and items.usage.input_tokens == plain.usage.input_tokens
    developer = create(client, server, max_output_tokens=6, input=[
        {"type": "message", "role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."}])
    with_instructions = create(client, server, max_output_tokens=6, instructions="Be brief.", input="Name a colour.")
    assert developer.output_text == with_instructions.output_text


def test_stream_events_come_in_the_order_the_sdk_checks(client, server):
    whole = create(client, server, input="Count to five.", max_output_tokens=10)
    with client.responses.stream(model=server.model, input="Count to five.", max_output_tokens=10,
                                 temperature=0) as s:
        events = list(s)
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == events[-4].text
    final = events[-1].response
    assert final.id == events[0].response.id and final.output[0].content[0].text == text
    assert final.usage.output_tokens == 10 and final.incomplete_details.reason == "max_output_tokens"


def test_parse_and_stream_with_a_pydantic_model(client, server):
    parsed = client.responses.parse(model=server.model, input="Is the sky blue? Answer in JSON.",
                                    text_format=Answer, temperature=0, max_output_tokens=60)
    assert parsed.status == "completed", parsed
    assert isinstance(parsed.output_parsed, Answer)
    with client.responses.stream(model=server.model, input="Is the sky blue? Answer in JSON.", text_format=Answer,
                                 temperature=0, max_output_tokens=60) as s:
        kinds = [e.type for e in s]
        final = s.get_final_response()
    assert kinds[-1] == "response.completed"
    assert final.output_parsed == parsed.output_parsed
    assert final.text.format.type == "json_schema"


def call_of(response):
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls, response.output
    for call in calls:
        assert call.name == "get_weather" and call.call_id and call.id.startswith("fc_")
        jsonschema.validate(json.loads(call.arguments), WEATHER)
    return calls[0]


def test_a_tool_round_trip_over_previous_response_id_and_over_items(client, server):
    first = create(client, server, input=ASK, **FORCED)
    assert first.status == "completed", first
    call = call_of(first)
    result = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"temp_c": 21})}
    second = create(client, server, previous_response_id=first.id, input=[result], tools=TOOLS,
                    max_output_tokens=12)
    assert second.previous_response_id == first.id and second.output_text
    # the question, the call and its result reached the second prompt
    assert second.usage.input_tokens > first.usage.input_tokens + 10
    stateless = create(client, server, store=False, tools=TOOLS, max_output_tokens=12, input=[
        {"role": "user", "content": ASK}, *[item.model_dump(exclude_none=True) for item in first.output], result])
    assert stateless.output_text == second.output_text
    assert stateless.usage.input_tokens == second.usage.input_tokens
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(stateless.id)


def test_a_streamed_tool_call_is_the_unstreamed_one(client, server):
    whole = call_of(create(client, server, input=ASK, **FORCED))
    with client.responses.stream(model=server.model, input=ASK, temperature=0, **FORCED) as s:
        events = list(s)
        final = s.get_final_response()
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and "".join(deltas) == whole.arguments
    streamed = call_of(final)
    assert streamed.arguments == whole.arguments and streamed.call_id != whole.call_id
    added = [e for e in events if e.type == "response.output_item.added"]
    assert added[0].item.type == "function_call" and added[0].item.call_id == streamed.call_id


def test_retrieve_and_delete_a_stored_response(client, server):
    r = create(client, server, input="Say hi.", max_output_tokens=4, metadata={"run": "7"})
    got = client.responses.retrieve(r.id)
    assert got.model_dump() == r.model_dump() and got.metadata == {"run": "7"}
    deleted = client.responses.delete(r.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.retrieve(r.id)
    assert e.value.body["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        create(client, server, input="Again.", previous_response_id=r.id, max_output_tokens=2)
    assert e.value.body["param"] == "previous_response_id"


@pytest.fixture(scope="module")
def keyed():
    s = Server("--api-key", "sk-one", "--api-key", "sk-two", "--responses-store-count", "2")
    yield s
    assert s.stop() == 0, s.final_log


def keyed_client(server, key):
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=300)


def test_one_api_key_never_reads_anothers_response(keyed):
    one, two = keyed_client(keyed, "sk-one"), keyed_client(keyed, "sk-two")
    r = create(one, keyed, input="Say hi.", max_output_tokens=2)
    assert one.responses.retrieve(r.id).id == r.id
    with pytest.raises(openai.NotFoundError):
        two.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        two.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        create(two, keyed, input="Go on.", previous_response_id=r.id, max_output_tokens=2)
    assert one.responses.retrieve(r.id).id == r.id
    with pytest.raises(openai.AuthenticationError):
        keyed_client(keyed, "sk-three").responses.retrieve(r.id)


def test_the_least_recently_used_response_is_evicted(keyed):
    one = keyed_client(keyed, "sk-one")
    first, second = (create(one, keyed, input=f"Say {w}.", max_output_tokens=2).id for w in ("a", "b"))
    one.responses.retrieve(first)            # now second is the least recently used
    third = create(one, keyed, input="Say c.", max_output_tokens=2).id
    with pytest.raises(openai.NotFoundError):
        one.responses.retrieve(second)
    assert one.responses.retrieve(first).id == first and one.responses.retrieve(third).id == third


def settled(client, response_id):
    """The stored background response once it no longer runs."""
    deadline = time.time() + 300
    while True:
        r = client.responses.retrieve(response_id)
        if r.status not in ("queued", "in_progress"):
            return r
        assert time.time() < deadline, r
        time.sleep(0.2)


def test_a_background_response_is_polled_continued_and_cancelled(client, server):
    ask = dict(input="Say hello.", instructions="Be brief.", max_output_tokens=8)
    queued = create(client, server, background=True, **ask)
    assert queued.status == "queued" and queued.background is True and queued.output == []
    done = settled(client, queued.id)
    foreground = create(client, server, **ask)
    assert done.status == "incomplete" and done.background is True and done.usage.output_tokens == 8
    assert done.output_text == foreground.output_text and done.usage.input_tokens == foreground.usage.input_tokens
    then = create(client, server, previous_response_id=done.id, input="Again.", max_output_tokens=2)
    assert then.usage.input_tokens > done.usage.input_tokens
    with pytest.raises(openai.BadRequestError):   # it is not running
        client.responses.cancel(done.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_never")
    running = create(client, server, background=True, input="Tell a long story.", max_output_tokens=1500)
    with pytest.raises(openai.BadRequestError) as e:   # no conversation to continue until it ends
        create(client, server, previous_response_id=running.id, input="Go on.", max_output_tokens=2)
    assert e.value.body["param"] == "previous_response_id"
    assert client.responses.cancel(running.id).status == "cancelled"
    cancelled = settled(client, running.id)
    assert cancelled.status == "cancelled" and cancelled.usage.output_tokens < 1500


LOGPROBS = dict(include=["message.output_text.logprobs"], top_logprobs=2)


def test_logprobs_are_the_chat_completions_streamed_or_not(client, server):
    r = create(client, server, input="Name a colour.", max_output_tokens=6, **LOGPROBS)
    chat = client.chat.completions.create(model=server.model, temperature=0, max_tokens=6, logprobs=True,
                                          top_logprobs=2, messages=[{"role": "user", "content": "Name a colour."}])
    got, want = r.output[0].content[0].logprobs, chat.choices[0].logprobs.content
    assert len(got) == len(want) == 6 and r.top_logprobs == 2
    assert [(l.token, l.bytes) for l in got] == [(l.token, l.bytes) for l in want]
    assert [l.logprob for l in got] == pytest.approx([l.logprob for l in want], abs=1e-4)
    for g, w in zip(got, want):
        assert [t.token for t in g.top_logprobs] == [t.token for t in w.top_logprobs] and len(g.top_logprobs) == 2
    assert "".join(l.token for l in got) == r.output_text
    with client.responses.stream(model=server.model, input="Name a colour.", max_output_tokens=6, temperature=0,
                                 **LOGPROBS) as s:
        events = list(s)
    streamed = [l for e in events if e.type == "response.output_text.delta" for l in e.logprobs]
    assert [l.token for l in streamed] == [l.token for l in got]
    assert [l.logprob for l in streamed] == pytest.approx([l.logprob for l in got], abs=1e-4)
    done = next(e for e in events if e.type == "response.output_text.done")
    assert [l.token for l in done.logprobs] == [l.token for l in got]
    assert events[-1].response.output[0].content[0].logprobs[-1].token == got[-1].token
    # asked for nothing, or only for data of items tram never makes: none
    for extra in ({}, {"include": ["reasoning.encrypted_content"]}):
        plain = create(client, server, input="Name a colour.", max_output_tokens=6, **extra)
        assert plain.output[0].content[0].logprobs == [] and plain.output_text == r.output_text


# What tram refuses at the top of the body, each with a value that changes the output.
REFUSED = {
    "conversation": "conv_1",
    "prompt": {"id": "pmpt_1"},
    "reasoning": {"effort": "low"},
    "truncation": "auto",
    "context_management": [{"type": "compaction"}],
}
BUILT_IN_TOOLS = ["web_search", "web_search_preview", "file_search", "computer_use_preview", "code_interpreter",
                  "image_generation", "mcp", "local_shell", "shell", "custom", "apply_patch"]
NESTED = [  # (extra body fields, the param named)
    ({"text": {"verbosity": "low"}}, "text.verbosity"),
    ({"tool_choice": {"type": "file_search"}}, "tool_choice.type"),
    ({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}, "tool_choice.type"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"input": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0].type"),
    ({"input": [{"role": "user", "content": "hi", "phase": "x"}]}, "input[0].phase"),
    ({"stream_options": {"include_usage": True}}, "stream_options.include_usage"),
    ({"include": ["message.output_text.bogus"]}, "include[0]"),
    ({"include": ["reasoning.encrypted_content", 5]}, "include[1]"),
    ({**LOGPROBS, "top_logprobs": 21}, "top_logprobs"),
    ({"background": True, "store": False}, "background"),
    ({"background": True, "stream": True}, "background"),
    ({"frobnicate": 1}, "frobnicate"),
]


def refused_by_the_table():
    out = subprocess.run([BIN, "fields"], check=True, capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()[1:] == ["responses", "refused"]}


def test_every_refused_field_is_a_400_naming_it(server):
    assert set(REFUSED) == refused_by_the_table()
    cases = [({name: value}, name) for name, value in REFUSED.items()]
    cases += [({"tools": [{"type": t}]}, "tools[0].type") for t in BUILT_IN_TOOLS]
    cases += NESTED
    for extra, param in cases:
        body = {"model": server.model, "input": "hi", "max_output_tokens": 2, **extra}
        status, _, reply = server.post("/v1/responses", body)
        assert status == 400 and reply["error"]["param"] == param, (extra, reply)
        assert param.split(".")[-1].split("[")[0] in reply["error"]["message"] or param in reply["error"]["message"], reply
    for name, harmless in {"truncation": "disabled"}.items():
        body = {"model": server.model, "input": "hi", "max_output_tokens": 2, name: harmless, "store": False}
        assert server.post("/v1/responses", body)[0] == 200, name
