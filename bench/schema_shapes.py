#!/usr/bin/env python3
"""schema_shapes.py OUT.json [N] -- N schemas (default 300) in the shapes real
schemas have, for bench/bench_schema_compile.c: draft-04 documents with `id`,
`definitions` and boolean exclusive bounds; Kubernetes-style objects with
`x-kubernetes-*` keys and deep `$ref`s; OpenAPI-style `nullable` and
`discriminator`; `allOf` of `$ref`s with keywords beside them; many optional
properties with shared string types; `patternProperties` maps;
`dependentRequired`; `if`/`then`/`else` on a tag; enums with `uniqueItems`;
patterns beside `minLength`/`maxLength`.
Written from a fixed seed, not copied from any benchmark."""
import json
import random
import sys

D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
WORDS = ["name", "id", "kind", "status", "created", "owner", "labels", "size", "count", "url", "email",
         "version", "region", "tags", "enabled", "priority", "note", "score", "host", "path"]


def leaf(r, depth):
    k = r.randrange(9)
    if k == 0:
        return {"type": "string", "maxLength": r.choice([16, 64, 255]), "description": "free text"}
    if k == 1:
        return {"type": "integer", "minimum": 0, "maximum": r.choice([10, 100, 65535])}
    if k == 2:
        return {"enum": r.sample(["a", "b", "c", "d", "e"], 3)}
    if k == 3:
        return {"type": "string", "format": r.choice(["date-time", "uri", "email", "ipv4", "hostname", "uuid"])}
    if k == 4:
        return {"type": "boolean", "nullable": True, "x-order": depth}
    if k == 5:
        return {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    if k == 6:
        return r.choice([{"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 63},
                         # lengths beside patterns of several parts; a repeated empty
                         {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
                         {"type": "string", "pattern": "^(?:\\S+\\s+){0,9}\\S+$", "maxLength": 100},
                         {"type": "string", "pattern": "^\\w+(|\\.[\\w,]+)*$", "minLength": 2, "maxLength": 32}])
    if k == 7:
        return {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]}, "uniqueItems": True}
    return {"type": "object", "additionalProperties": {"type": "string", "maxLength": 64}}


def obj(r, depth, defs):
    props = {}
    for w in r.sample(WORDS, r.randrange(3, 12)):
        props[w] = (obj(r, depth + 1, defs) if depth < 2 and r.random() < 0.2 else
                    {"$ref": "#/definitions/" + r.choice(list(defs))} if defs and r.random() < 0.3 else leaf(r, depth))
    o = {"type": "object", "properties": props, "required": r.sample(list(props), min(2, len(props))),
         "title": "thing", "x-kubernetes-preserve-unknown-fields": r.random() < 0.3}
    if r.random() < 0.3:
        o["additionalProperties"] = False
    return o


def shape(r, i):
    defs = {f"def{j}": obj(r, 1, {}) for j in range(r.randrange(0, 6))}
    top = obj(r, 0, defs)
    kind = i % 6
    if kind == 0:
        top = {"$schema": D4, "id": f"http://example.com/s{i}.json", "definitions": defs,
               "type": "object", "properties": dict(top["properties"], count={"type": "number", "minimum": 0,
                                                                              "exclusiveMinimum": True}),
               "self": {"vendor": "acme", "version": "1-0-0"}}
    elif kind == 1 and defs:
        first = next(iter(defs))
        top = {"$schema": D7, "definitions": defs,
               "allOf": [{"$ref": "#/definitions/" + first}, {"properties": {"extra": {"type": "string"}}}]}
    elif kind == 2:
        top = {"definitions": defs, "type": "object", "properties": {"kind": {"enum": ["a", "b"]},
                                                                      "x": {"type": "integer"}, "y": {"type": "string"}},
               "required": ["kind"], "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
               "then": {"required": ["x"]}, "else": {"required": ["y"]}}
    elif kind == 3:
        top = {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False,
               "minProperties": 1}
    elif kind == 4:
        top = dict(top, definitions=defs, dependentRequired={next(iter(top["properties"])): ["note"]},
                   discriminator={"propertyName": "kind"})
    else:
        top = dict(top, definitions=defs)
    return {"name": f"shape-{i:03d}", "schema": top}


def main():
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    r = random.Random(29)
    with open(sys.argv[1], "w") as f:
        json.dump([shape(r, i) for i in range(n)], f)


if __name__ == "__main__":
    main()
