"""Schemas in real-world shapes (tests/fixtures/make_schema_world.py: function
calling, CI workflows, Kubernetes-like resources, Snowplow-like draft-04
self-describing schemas, config-file schemas) through the server, greedy
and at temperature 1: every reply that ends with finish_reason "stop" must
validate under the Python `jsonschema` package, read with the schema's own
draft and formats checked (greedy for one schema of each family, sampled
for two of them).  A schema tram refuses is a 400 naming the
schema's field (never a 200 it cannot keep); the sample must hold enough
accepted schemas to mean something.  Sent at once, so the engine batches
them."""
import concurrent.futures
import json
import os
import subprocess
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_TOKENS = 96


def world(tmp_path, per_family):
    out = tmp_path / "world"
    subprocess.run([sys.executable, os.path.join(HERE, "..", "fixtures", "make_schema_world.py"), str(out),
                    str(per_family)], check=True)
    return {p.name: json.loads(p.read_text()) for p in sorted(out.iterdir())}


def ask(server, schema, temperature, seed):
    body = {"messages": [{"role": "user", "content": "Reply with one JSON value that fits the schema."}],
            "max_tokens": MAX_TOKENS, "temperature": temperature, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": schema}}}
    status, _, data = server.request("POST", "/v1/chat/completions", body, timeout=900)
    return status, None, json.loads(data)


def test_real_world_shapes_validate_under_their_own_draft(server, tmp_path):
    schemas = world(tmp_path, 1)
    sample = {name: s for name, s in schemas.items() if name.endswith("-00.json")}
    assert len(sample) == 5
    # greedy for each family, sampled for two (the test stays cheap)
    jobs = [(name, 0.0, 0) for name in sample] + [(name, 1.0, 7) for name in sample
                                                   if name.startswith(("function", "workflow"))]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        replies = list(pool.map(lambda j: ask(server, sample[j[0]], j[1], j[2]), jobs))
    failures, stopped, refused = [], 0, 0
    for (name, t, seed), (status, _, body) in zip(jobs, replies):
        where = f"{name} T={t}"
        if status == 400:
            refused += 1
            assert body["error"]["param"] == "response_format.json_schema.schema", (where, body)
            continue
        assert status == 200, (where, body)
        choice = body["choices"][0]
        if choice["finish_reason"] != "stop":
            assert choice["finish_reason"] in ("length", "error"), (where, choice)
            continue
        stopped += 1
        schema = sample[name]
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(json.loads(choice["message"]["content"]))
        except (ValueError, jsonschema.ValidationError) as ex:
            failures.append(f"{where}: {str(ex)[:300]} in {choice['message']['content'][:200]!r}")
    assert not failures, "\n".join(failures)
    assert stopped >= 2, f"only {stopped} of {len(jobs)} replies finished ({refused} refused)"
