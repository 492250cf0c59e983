"""Tool calls streamed as they are written (docs/tools.md): a call's first
chunk carries its index, id, type and name with empty arguments, then its
arguments come in pieces whose concatenation is the arguments string of the
same request unstreamed (same seed); content before the calls streams as
content.  tool_choice "required" and a named function are grammar-enforced;
"auto" reads the model's own syntax, here made to write calls with a regex
(structured outputs), since the default model rarely calls tools by
itself."""
import json
from concurrent.futures import ThreadPoolExecutor

# small tools and short calls: each request here is a few dozen tokens
WEATHER = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
NOTE = {"type": "object", "properties": {"tag": {"enum": ["rain", "sun"]}, "done": {"type": "boolean"}},
        "required": ["tag", "done"], "additionalProperties": False}
SCHEMAS = {"weather": WEATHER, "note": NOTE}
TOOLS = [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in SCHEMAS.items()]
ASK = [{"role": "user", "content": "Weather in Paris? Use the tools."}]
NAMED = {"type": "function", "function": {"name": "weather"}}
CALL = ('<tool_call>\\n\\{"name": "weather", "arguments": \\{"city": "(Paris|Rome|Oslo)", "days": [1-7]\\}\\}'
        '\\n</tool_call>')
NOTE_CALL = '<tool_call>\\n\\{"name": "note", "arguments": \\{"tag": "(rain|sun)", "done": (true|false)\\}\\}\\n</tool_call>'
AUTO = "Checking\\.\\n" + CALL + "\\n" + NOTE_CALL
NOT_CALLS = CALL + " and that is all\\."
BASE = dict(messages=ASK, tools=TOOLS, temperature=1.0, max_tokens=80)


def streamed(client, **kw):
    """Per choice index: content, calls [{id, name, pieces}], finish_reason,
    from the raw chunks, checking each chunk's shape on the way."""
    out = {}
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            c = out.setdefault(ch.index, {"content": "", "calls": {}, "finish": None})
            c["content"] += ch.delta.content or ""
            for tc in ch.delta.tool_calls or []:
                call = c["calls"].get(tc.index)
                if call is None:   # the call's first chunk: index, id, type, name, no arguments yet
                    assert tc.index == len(c["calls"]) and tc.type == "function", tc
                    assert tc.id.startswith("call_") and tc.function.name in SCHEMAS, tc
                    assert tc.function.arguments == "", tc
                    c["calls"][tc.index] = {"id": tc.id, "name": tc.function.name, "pieces": []}
                else:
                    assert tc.id is None and tc.function.name is None and tc.function.arguments, tc
                    call["pieces"].append(tc.function.arguments)
            if ch.finish_reason:
                c["finish"] = ch.finish_reason
    return out


def both(client, kw, stream_it):
    """The request unstreamed and streamed (stream_it(**kw)) at once: one
    batch, and the same tokens as each alone."""
    with ThreadPoolExecutor(2) as pool:
        whole = pool.submit(client.chat.completions.create, **kw)
        stream = pool.submit(stream_it, **kw)
        return whole.result(), stream.result()


def check_same(client, kw, min_calls=1):
    """The stream of kw against the same request unstreamed."""
    whole, stream = both(client, kw, lambda **kw: streamed(client, **kw))
    assert sorted(stream) == list(range(len(whole.choices)))
    for choice in whole.choices:
        s = stream[choice.index]
        message = choice.message
        assert s["finish"] == choice.finish_reason == "tool_calls", (s, choice)
        assert s["content"] == (message.content or ""), (s, message)
        assert len(s["calls"]) == len(message.tool_calls) >= min_calls, (s, message)
        for i, call in enumerate(message.tool_calls):
            got = s["calls"][i]
            assert got["name"] == call.function.name
            assert "".join(got["pieces"]) == call.function.arguments, (got, call)
            if len(json.loads(call.function.arguments)) > 1:
                assert len(got["pieces"]) > 1, got   # arguments of several fields come in pieces
    return whole, stream


def test_required_streams_its_arguments(client, server):
    check_same(client, dict(model=server.model, tool_choice="required", seed=11, parallel_tool_calls=False, **BASE))


def test_auto_calls_stream_after_their_content(client, server):
    """Content, then two calls (index 0 and 1), read from the model's text."""
    kw = dict(model=server.model, seed=4, extra_body={"structured_outputs": {"regex": AUTO}}, **BASE)
    whole, stream = check_same(client, kw, min_calls=2)
    assert whole.choices[0].message.content == "Checking.\n"
    assert [c["name"] for c in stream[0]["calls"].values()] == ["weather", "note"]


def test_auto_text_that_turns_out_not_to_be_calls(client, server):
    """The call streams as it is written; when the text after it shows the
    reply is not calls, the rest of the stream is content, and the content
    adds up to the unstreamed reply's (which has no calls), with its finish
    reason."""
    kw = dict(model=server.model, seed=4, extra_body={"structured_outputs": {"regex": NOT_CALLS}}, **BASE)
    whole, s = both(client, kw, lambda **kw: streamed(client, **kw))
    whole, s = whole.choices[0], s[0]
    assert whole.message.tool_calls is None and whole.message.content.endswith(" and that is all.")
    assert s["content"] == whole.message.content
    assert s["finish"] == whole.finish_reason == "stop"
    assert [c["name"] for c in s["calls"].values()] == ["weather"]   # begun before the text showed it


def test_stream_helper_accumulates_the_pieces_of_a_named_call(client, server):
    """client.chat.completions.stream, a named function, n=2: the arguments
    come in pieces, and the final completion's calls are the unstreamed ones."""
    kw = dict(model=server.model, tool_choice=NAMED, n=2, seed=5, **BASE)
    def helper(**kw):
        with client.chat.completions.stream(**kw) as s:
            return list(s), s.get_final_completion()

    whole, (events, final) = both(client, kw, helper)
    assert sum(e.type == "tool_calls.function.arguments.delta" for e in events) > 2
    for a, b in zip(whole.choices, sorted(final.choices, key=lambda c: c.index)):
        pieces = [tc.function.arguments for e in events if e.type == "chunk" for ch in e.chunk.choices
                  if ch.index == a.index for tc in ch.delta.tool_calls or [] if tc.function.name is None]
        assert len(pieces) > 1
        assert b.finish_reason == a.finish_reason == "tool_calls"
        assert [(c.function.name, c.function.arguments) for c in b.message.tool_calls] == \
               [(c.function.name, c.function.arguments) for c in a.message.tool_calls] == \
               [("weather", "".join(pieces))]
        assert b.message.tool_calls[0].id.startswith("call_")
