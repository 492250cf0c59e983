"""Structured outputs end to end.

The committed corpus (tests/fixtures/schemas/corpus.json, made by
tests/fixtures/make_schema_corpus.py) runs through the real engine in one
continuous batch (`tram generate --input`), every schema greedy and at
temperature 1 (seeds 1, 2 and 3 in turn over the corpus); every output must
finish with "stop" (a truncated output is a failure), parse, and validate
with the jsonschema package, formats included.  All lines share one prompt,
so that the prefix cache serves it and the run costs decode steps only.  Then the API: regex, choice, json_object, errors, and
the OpenAI SDK's chat.completions.parse with a Pydantic model.
"""
import json
import os
import re
import subprocess
import tempfile

import jsonschema
import pydantic
import pytest

from conftest import BIN, MODEL, stream_raw

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "fixtures", "schemas", "corpus.json")
SEEDS = [1, 2, 3]
MAX_TOKENS = 256
PROMPT = "Reply with one JSON value and nothing else."


def chat(prompt):
    return [{"role": "user", "content": prompt}]


def run_generate(lines):
    """Runs the lines through one `tram generate --input`; returns the bodies in order."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(src, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        # the session's server idles meanwhile: the batch gets every core
        cmd = [BIN, "generate", "-m", MODEL, "--input", src, "--output", dst, "--max-model-len", "1024",
               "--threads", str(os.cpu_count() or 1)]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1500)
        with open(dst) as f:
            outs = {o["custom_id"]: o["response"]["body"] for o in map(json.loads, f)}
        return [outs.get(f"line-{i + 1}") for i in range(len(lines))]


def test_schema_corpus_validates_greedy_and_sampled():
    with open(CORPUS) as f:
        corpus = json.load(f)
    assert len(corpus) >= 200
    lines, meta = [], []
    for i, entry in enumerate(corpus):
        for temperature, seed in [(0.0, 0), (1.0, SEEDS[i % len(SEEDS)])]:
            lines.append({"messages": chat(PROMPT), "max_tokens": MAX_TOKENS,
                          "temperature": temperature, "seed": seed,
                          "response_format": {"type": "json_schema",
                                              "json_schema": {"name": entry["name"], "schema": entry["schema"]}}})
            meta.append((entry, temperature, seed))
    outs = run_generate(lines)
    assert len(outs) == len(lines)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    failures = []
    for (entry, temperature, seed), out in zip(meta, outs):
        where = f"{entry['name']} T={temperature} seed={seed}"
        if not out or "error" in out:
            failures.append(f"{where}: error {out and out['error']}")
            continue
        choice = out["choices"][0]
        text = choice["message"]["content"]
        if choice["finish_reason"] != "stop":
            failures.append(f"{where}: finished by {choice['finish_reason']} (truncated): {text[:200]!r}")
            continue
        try:
            value = json.loads(text)
            jsonschema.validate(value, entry["schema"], format_checker=checker)
        except (ValueError, jsonschema.ValidationError) as ex:
            failures.append(f"{where}: {str(ex)[:300]} in {text[:200]!r}")
    assert not failures, f"{len(failures)} of {len(outs)} outputs failed:\n" + "\n".join(failures)


def post(server, path, body):
    return server.post(path, body)


def schema_reply(server, prompt, name, schema, max_tokens):
    """The greedy chat reply under a json_schema response_format, which must
    stop on its own: the JSON value it wrote."""
    status, _, body = post(server, "/v1/chat/completions", {
        "model": server.model, "messages": chat(prompt), "max_tokens": max_tokens, "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}})
    assert status == 200, body
    c = body["choices"][0]
    assert c["finish_reason"] == "stop", c
    return json.loads(c["message"]["content"])


@pytest.mark.parametrize("pattern", [r"\d{3}-\d{4}", r"(cat|dog)s?", r"[A-Z][a-z]{2,6} [0-9]{1,4}", r"[a-f0-9]{8}",
                                     r"^(yes|no$|maybe( not)?$)"])
def test_regex_fullmatches(server, pattern):
    for seed in (1, 2, 3):
        status, _, body = post(server, "/v1/completions", {
            "model": server.model, "prompt": "Write something:", "max_tokens": 40,
            "temperature": 1.0, "seed": seed, "structured_outputs": {"regex": pattern}})
        assert status == 200, body
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        assert re.fullmatch(pattern, choice["text"]), (pattern, choice["text"])


def test_choice_is_one_of(server):
    choices = ["positive", "negative", "neutral", "ünïcödé ✓"]
    for seed in range(4):
        status, _, body = post(server, "/v1/chat/completions", {
            "model": server.model, "messages": chat("Sentiment of 'great movie'?"),
            "temperature": 1.0, "seed": seed, "n": 2, "guided_choice": choices})
        assert status == 200, body
        for c in body["choices"]:
            assert c["message"]["content"] in choices and c["finish_reason"] == "stop", c


def test_json_object_and_grammar(server):
    status, _, body = post(server, "/v1/chat/completions", {
        "model": server.model, "messages": chat("Give a JSON object with a name and an age."),
        "max_tokens": 200, "temperature": 0, "response_format": {"type": "json_object"}})
    assert status == 200, body
    c = body["choices"][0]
    assert c["finish_reason"] == "stop", c
    assert isinstance(json.loads(c["message"]["content"]), dict)
    gbnf = 'root ::= "The answer is " digit{1,3} "."\ndigit ::= [0-9]'
    status, _, body = post(server, "/v1/completions", {
        "model": server.model, "prompt": "Q: 2+2?", "max_tokens": 30, "temperature": 0,
        "structured_outputs": {"grammar": gbnf}})
    assert status == 200, body
    assert re.fullmatch(r"The answer is [0-9]+\.", body["choices"][0]["text"]), body


def test_long_bounded_string_is_honoured_exactly(server):
    """Past the old 128-character cap: minLength keeps the string open up to
    its 150th character, and maxLength 300 is where it must close; through the
    API, checked by jsonschema."""
    schema = {"type": "object", "properties": {"summary": {"type": "string", "minLength": 150, "maxLength": 300}},
              "required": ["summary"], "additionalProperties": False}
    value = schema_reply(server, "Write a long, detailed summary of the history of Rome.", "summary", schema, 400)
    jsonschema.validate(value, schema)
    assert 150 <= len(value["summary"]) <= 300, value


def test_pattern_beside_lengths_is_kept_by_the_grammar(server):
    """A pattern of several parts beside minLength/maxLength (a slug, as
    Kubernetes and config schemas write them) is exact by grammar: sampled
    replies all stop inside both, none is left for the end validation to turn
    into finish_reason "error"."""
    slug = {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "minLength": 3, "maxLength": 8}
    schema = {"type": "object", "properties": {"slug": slug}, "required": ["slug"], "additionalProperties": False}
    for seed in range(4):
        status, _, body = post(server, "/v1/chat/completions", {
            "model": server.model, "messages": chat("Give a long URL slug for an article about the history of Rome."),
            "max_tokens": 32, "temperature": 1.0, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "slug", "schema": schema}}})
        assert status == 200, body
        c = body["choices"][0]
        assert c["finish_reason"] == "stop", (seed, c)
        jsonschema.validate(json.loads(c["message"]["content"]), schema)


def test_grammars_past_the_limits_are_400_naming_them(server):
    for body, param, words in [
            ({"guided_json": {"type": "string", "maxLength": 1000001}}, "guided_json", "'maxLength' 1000001 at #"),
            ({"structured_outputs": {"grammar": 'root ::= "a"{2000000}'}}, "structured_outputs.grammar",
             "repetition count over 1000000"),
            ({"guided_regex": "a{0,1000001}"}, "guided_regex", "repetition count over 1000000"),
            # read in exponentially many ways: refused, not seconds per byte
            ({"guided_grammar": "root ::= " + "(" * 20 + '"a"' + ")+" * 20}, "guided_grammar", "too ambiguous")]:
        status, _, resp = post(server, "/v1/completions", dict(body, model=server.model, prompt="hi"))
        assert status == 400, resp
        assert resp["error"]["param"] == param and words in resp["error"]["message"], resp


def test_integer_bounds_past_64_bits_are_honoured(server):
    """Issue 29: Snowplow's "maximum": 9223372036854776000 and the like were a
    400 ("out of range"); they are valid JSON, and bounds tram can honour."""
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 18446744073709551615},
        "b": {"type": "integer", "minimum": -9223372036854775809, "maximum": 9223372036854776000}},
        "required": ["a", "b"], "additionalProperties": False}
    value = schema_reply(server, "Two numbers as JSON.", "n", schema, 60)
    jsonschema.validate(value, schema)
    assert isinstance(value["a"], int) and isinstance(value["b"], int), value


DEAD_END = 'root ::= "ab" [^\\x00-\\U0010FFFF]'  # after "ab", a character of an empty class


def test_a_grammar_dead_end_ends_with_error_streamed_and_not(server):
    """The grammar allows "ab", then nothing, and cannot end there: the reply
    says so (finish_reason "error", code grammar_dead_end), never "stop"."""
    status, _, body = post(server, "/v1/completions", {
        "model": server.model, "prompt": "Say:", "max_tokens": 8, "temperature": 0,
        "structured_outputs": {"grammar": DEAD_END}})
    assert status == 200, body
    c = body["choices"][0]
    assert c["text"] == "ab" and c["finish_reason"] == "error", c
    assert c["error"]["code"] == "grammar_dead_end" and c["error"]["type"] == "invalid_output", c
    assert "allows no token" in c["error"]["message"], c
    events = stream_raw(server.port, "/v1/chat/completions", {
        "model": server.model, "messages": chat("Say something."), "max_tokens": 8, "temperature": 0,
        "stream": True, "guided_grammar": DEAD_END})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e)["choices"][0] for e in events[:-1] if json.loads(e)["choices"]]
    assert "".join(c["delta"].get("content") or "" for c in chunks) == "ab"
    assert chunks[-1]["finish_reason"] == "error" and chunks[-1]["error"]["code"] == "grammar_dead_end", chunks
    assert all(c["finish_reason"] is None and "error" not in c for c in chunks[:-1]), chunks


def chain(n, body):
    """n rules, each rule's body naming the next ({next}), the last one "y"; the root last."""
    rules = [f"r{i} ::= " + body.format(next=f"r{i + 1}") for i in range(n - 1)] + [f'r{n - 1} ::= "y"']
    rules[0] = rules[0].replace("r0 ::=", "root ::=", 1)
    return "\n".join(reversed(rules))


def test_grammar_bombs_are_400_naming_the_bound_and_the_field(server):
    """Issue 21: a 60,000-rule chain of bare references (1 MB, written from its
    end) crashed the server; nested references and a lone surrogate are each
    a 400 naming the bound or the character, with the request field."""
    for body, param, words in [
            ({"guided_grammar": chain(60000, "{next}")}, "guided_grammar", "over 32768 rule references"),
            ({"structured_outputs": {"grammar": chain(60000, '{next} "x"')}}, "structured_outputs.grammar",
             "nest over 1024 deep"),
            ({"guided_regex": "\\ud800"}, "guided_regex", "lone surrogate"),
            ({"guided_json": {"type": "string", "pattern": "^\\ud800$"}}, "guided_json", "lone surrogate"),
            ({"guided_grammar": 'root ::= "\\uDFFF"'}, "guided_grammar", "surrogate")]:
        status, _, resp = post(server, "/v1/completions", dict(body, model=server.model, prompt="hi", max_tokens=4))
        assert status == 400, resp
        assert resp["error"]["param"] == param and words in resp["error"]["message"], resp


def test_a_choice_of_100k_values_and_a_60k_chain_are_answered(server):
    """Lists of literals are a trie: 100,000 product codes (each first
    character used) are one stack per prefix, not 100,000; the reply is one
    of them.  A forward 60,000-rule chain with a byte between references
    compiles and is followed."""
    codes = [f"{chr(65 + i % 26)}{i:06d}" for i in range(100000)]
    status, _, body = post(server, "/v1/completions", {
        "model": server.model, "prompt": "Product code:", "max_tokens": 12, "temperature": 1.0, "seed": 3,
        "guided_choice": codes})
    assert status == 200, body
    c = body["choices"][0]
    assert c["text"] in set(codes) and c["finish_reason"] == "stop", c
    gbnf = chain(60000, '"x" {next} | "y"')
    status, _, body = post(server, "/v1/completions", {
        "model": server.model, "prompt": "x", "max_tokens": 6, "temperature": 0, "guided_grammar": gbnf})
    assert status == 200, body
    assert re.fullmatch(r"x*y?", body["choices"][0]["text"]), body


# What the JSON Schema specification calls annotations or unknown keywords
# (vendor keys, draft-4 ids, misspellings, OpenAPI's nullable) change no
# instance's validity: accepted, and the output still validates.
ANNOTATED = {"type": "object", "self": {"vendor": "acme", "name": "pet"}, "id": "pet.json",
             "x-kubernetes-preserve-unknown-fields": True, "readonly": True, "_format": "map",
             "properties": {"name": {"type": "string", "maxLength": 12, "decription": "a misspelling",
                                     "nullable": True, "examples": ["Rex"], "$comment": "c"},
                            "age": {"type": "integer", "minimum": 0, "maximum": 30, "format": "int32",
                                    "deprecated": False, "readOnly": True, "default": 3}},
             "required": ["name", "age"], "additionalProperties": False}


def test_annotations_and_unknown_keywords_are_ignored(server):
    value = schema_reply(server, "Describe a pet as JSON.", "pet", ANNOTATED, 60)
    jsonschema.Draft202012Validator(ANNOTATED).validate(value)
    assert value["name"] is not None, value  # nullable is no keyword of JSON Schema: null is not a string


def test_strict_schema_makes_unknown_keywords_400(server):
    status, _, body = post(server, "/v1/chat/completions", {
        "model": server.model, "messages": chat("hi"), "strict_schema": True,
        "response_format": {"type": "json_schema", "json_schema": {"name": "pet", "schema": ANNOTATED}}})
    assert status == 400, body
    assert body["error"]["param"] == "response_format.json_schema.schema", body
    assert "'self' at #" in body["error"]["message"] and "strict_schema" in body["error"]["message"], body
    status, _, body = post(server, "/v1/completions", {
        "model": server.model, "prompt": "hi", "strict_schema": "yes", "guided_json": {"type": "string"}})
    assert status == 400 and body["error"]["param"] == "strict_schema", body


@pytest.mark.parametrize("body,param,words", [
    ({"response_format": {"type": "yaml"}}, "response_format.type", "'yaml'"),
    ({"guided_json": {"type": "string"}, "guided_regex": "a"}, "guided_regex", "both"),
    ({"response_format": {"type": "json_object"}, "structured_outputs": {"choice": ["a"]}},
     "structured_outputs.choice", "both"),
    ({"structured_outputs": {"regex": "(?=a)"}}, "structured_outputs.regex", "not supported"),
    ({"structured_outputs": {"grammar": "root ::= root \"a\""}}, "structured_outputs.grammar", "left-recursive"),
    ({"structured_outputs": {"disable_fallback": True}}, "structured_outputs.disable_fallback", "not supported"),
    ({"guided_json": {"type": "object", "required": ["a"], "additionalProperties": False}}, "guided_json",
     "no valid value"),
    ({"guided_json": {"type": "object", "properties": {"a": {"not": 1}}}}, "guided_json",
     "'not' at #/properties/a must be a schema"),
])
def test_bad_constraints_are_400(server, body, param, words):
    for path in ("/v1/chat/completions", "/v1/completions"):
        req = dict(body, model=server.model)
        req.update({"messages": chat("hi")} if "chat" in path else {"prompt": "hi"})
        status, _, resp = post(server, path, req)
        assert status == 400, resp
        assert resp["error"]["param"] == param, resp
        assert words in resp["error"]["message"], resp


class Pet(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=16)
    species: str = pydantic.Field(pattern=r"^(cat|dog|bird)$")
    age: int = pydantic.Field(ge=0, le=30)
    vaccinated: bool


def test_sdk_parse_with_pydantic(client, server):
    for seed in (0, 1):
        completion = client.chat.completions.parse(
            model=server.model, messages=chat("Invent a pet."), response_format=Pet,
            max_tokens=120, temperature=1.0, seed=seed)
        msg = completion.choices[0].message
        assert completion.choices[0].finish_reason == "stop", msg
        assert isinstance(msg.parsed, Pet), msg
        assert 0 <= msg.parsed.age <= 30 and msg.parsed.species in ("cat", "dog", "bird")
