"""tram's JSON Schema validator (grammar/json_validate.c, through `tram
validate-schema`) against the Python `jsonschema` package on generated
schema/instance pairs: every draft, every assertion keyword, instances drawn
both at random and from values near the schema's own constants.  The two
must give the same verdict on every pair.

Left out of the generator, as the two differ there by design
(docs/structured-outputs.md): `format` (jsonschema checks few formats without
extra packages; tram asserts them, tests/unit/test_json_validate.c tests
them), `dependencies` and array-form `items` outside drafts 4-7 (tram keeps
their draft-07 meaning), and patterns beyond what Python's `re` and PCRE2
read alike."""
import json
import os
import random
import subprocess

import jsonschema

TRAM = os.environ.get("TRAM_BIN", "bin/tram")
DRAFTS = {
    4: "http://json-schema.org/draft-04/schema#",
    6: "http://json-schema.org/draft-06/schema#",
    7: "http://json-schema.org/draft-07/schema#",
    2019: "https://json-schema.org/draft/2019-09/schema",
    2020: "https://json-schema.org/draft/2020-12/schema",
}
NUMBERS = [0, 1, -1, 2, 3, 1.0, 2.5, -0.5, 10, 7, 0.25, 100]
STRINGS = ["", "a", "ab", "abc", "b", "x-1", "é", "12", "a1b2", "zzzz"]
PATTERNS = ["^a", "b$", "[0-9]", "^[a-z]+$", "x-", "^.{2}$"]
TYPES = ["null", "boolean", "object", "array", "number", "string", "integer"]


class Gen:
    def __init__(self, rng, draft):
        self.rng, self.draft = rng, draft
        self.defs = {}  # the root's definitions / $defs, which "$ref"s point into

    def pick(self, xs):
        return self.rng.choice(xs)

    def value(self, depth=0):
        r = self.rng.random()
        if depth > 2 or r < 0.35:
            return self.pick(NUMBERS + STRINGS + [None, True, False])
        if r < 0.65:
            return [self.value(depth + 1) for _ in range(self.rng.randrange(4))]
        keys = self.rng.sample(["a", "b", "c", "x-1", "ab"], self.rng.randrange(4))
        return {k: self.value(depth + 1) for k in keys}

    def sub(self, depth):
        if self.draft > 4 and self.rng.random() < 0.08:
            return self.pick([True, False])
        return self.schema(depth + 1)

    def schema(self, depth=0):
        s = {}
        n_keywords = self.rng.randrange(1, 4) if depth < 3 else 1
        for _ in range(n_keywords):
            self.keyword(s, depth)
        return s

    def keyword(self, s, depth):
        d, rng = self.draft, self.rng
        choices = ["type", "enum", "number", "number", "string", "array", "array", "object", "object"]
        if depth < 2:
            choices += ["allOf", "anyOf", "oneOf", "not", "ref"]
            if d >= 7:
                choices.append("if")
        k = self.pick(choices)
        if k == "type":
            s["type"] = self.pick(TYPES) if rng.random() < 0.7 else rng.sample(TYPES, 2)
        elif k == "enum":
            s["enum"] = [self.value(2) for _ in range(rng.randrange(1, 4))]
            if d >= 6 and rng.random() < 0.3:
                s["const"] = s.pop("enum")[0]
        elif k == "number":
            self.number(s)
        elif k == "string":
            s[self.pick(["minLength", "maxLength"])] = rng.randrange(4)
            if rng.random() < 0.5:
                s["pattern"] = self.pick(PATTERNS)
        elif k == "array":
            self.array(s, depth)
        elif k == "object":
            self.object(s, depth)
        elif k in ("allOf", "anyOf", "oneOf"):
            s[k] = [self.sub(depth) for _ in range(rng.randrange(1, 4))]
        elif k == "not":
            s["not"] = self.sub(depth)
        elif k == "if":
            s["if"] = self.sub(depth)
            for branch in ("then", "else"):
                if rng.random() < 0.7:
                    s[branch] = self.sub(depth)
        elif k == "ref":
            name = "d%d" % len(self.defs)
            self.defs[name] = None  # claimed before the subschema, which may add more
            self.defs[name] = self.sub(depth)
            s["$ref"] = "#/%s/%s" % (self.defs_keyword(), name)

    def defs_keyword(self):
        return "definitions" if self.draft <= 7 else "$defs"

    def root(self):
        s = self.schema()
        if self.defs:
            s.setdefault(self.defs_keyword(), {}).update(self.defs)
        s["$schema"] = DRAFTS[self.draft]
        return s

    def number(self, s):
        rng = self.rng
        k = self.pick(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"])
        bound = self.pick([0, 1, 2, 2.5, -1, 10])
        if k == "multipleOf":
            s[k] = self.pick([1, 2, 3, 0.5, 0.25, 2.5])
        elif k.startswith("exclusive") and self.draft == 4:
            s[k.replace("exclusiveM", "m")] = bound
            s[k] = rng.random() < 0.5
        else:
            s[k] = bound

    def array(self, s, depth):
        rng, d = self.rng, self.draft
        k = self.pick(["items", "tuple", "contains", "count", "unique"])
        if k == "items":
            s["items"] = self.sub(depth)
        elif k == "tuple":
            prefix = [self.sub(depth) for _ in range(rng.randrange(1, 3))]
            if d == 2020:
                s["prefixItems"] = prefix
                if rng.random() < 0.5:
                    s["items"] = self.sub(depth)
            else:
                s["items"] = prefix
                if rng.random() < 0.5:
                    s["additionalItems"] = self.sub(depth)
        elif k == "contains" and d >= 6:
            s["contains"] = self.sub(depth)
            if d >= 2019 and rng.random() < 0.5:
                s[self.pick(["minContains", "maxContains"])] = rng.randrange(3)
        elif k == "count":
            s[self.pick(["minItems", "maxItems"])] = rng.randrange(4)
        else:
            s["uniqueItems"] = rng.random() < 0.8

    def object(self, s, depth):
        rng, d = self.rng, self.draft
        k = self.pick(["properties", "required", "additional", "patterns", "names", "count", "deps"])
        if k == "properties":
            s["properties"] = {n: self.sub(depth) for n in rng.sample(["a", "b", "c"], rng.randrange(1, 3))}
        elif k == "required":
            s["required"] = rng.sample(["a", "b", "c"], rng.randrange(1, 3))
        elif k == "additional":
            s["additionalProperties"] = self.sub(depth) if rng.random() < 0.5 else False
        elif k == "patterns":
            s["patternProperties"] = {self.pick(PATTERNS): self.sub(depth)}
        elif k == "names" and d >= 6:
            s["propertyNames"] = {self.pick(["maxLength", "minLength"]): rng.randrange(3)}
        elif k == "count":
            s[self.pick(["minProperties", "maxProperties"])] = rng.randrange(3)
        elif k == "deps":
            if d <= 7:
                s["dependencies"] = {"a": self.pick([["b"], self.sub(depth)])}
            else:
                key = self.pick(["dependentRequired", "dependentSchemas"])
                s[key] = {"a": ["b"] if key == "dependentRequired" else self.sub(depth)}

    def instances(self, schema, n):
        """Random values, and values built from the schema's own constants."""
        consts = []

        def collect(x):
            if isinstance(x, dict):
                for k, v in x.items():
                    if k in ("enum",) and isinstance(v, list):
                        consts.extend(v)
                    elif k == "const":
                        consts.append(v)
                    elif k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf") \
                            and not isinstance(v, bool):
                        consts.extend([v, v * 3, v - 1, v + 0.5])
                    collect(v)
            elif isinstance(x, list):
                for v in x:
                    collect(v)

        collect(schema)
        out = []
        for _ in range(n):
            if consts and self.rng.random() < 0.4:
                v = self.pick(consts)
                out.append(self.pick([v, [v, v], {"a": v}, {"a": v, "b": v}]))
            else:
                out.append(self.value())
        return out


def python_verdict(schema, instance):
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema).is_valid(instance)


def test_validator_agrees_with_python_jsonschema(tmp_path):
    rng = random.Random(29)
    pairs = disagreements = 0
    report = []
    for i in range(160):
        draft = rng.choice(list(DRAFTS))
        g = Gen(rng, draft)
        schema = g.root()
        instances = g.instances(schema, 12)
        sf, inf = tmp_path / ("s%d.json" % i), tmp_path / ("i%d.jsonl" % i)
        sf.write_text(json.dumps(schema))
        inf.write_text("".join(json.dumps(x) + "\n" for x in instances))
        out = subprocess.run([TRAM, "validate-schema", "--jsonl", str(sf), str(inf)],
                             capture_output=True, text=True, timeout=60)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith(str(inf) + ":")]
        assert "validator: compiles" in out.stdout, (schema, out.stdout, out.stderr)
        assert len(lines) == len(instances), out.stdout
        for inst, line in zip(instances, lines):
            verdict = line.split(": ", 1)[1]
            assert not verdict.startswith("no verdict"), (schema, inst, line)
            pairs += 1
            if verdict.startswith("valid") != python_verdict(schema, inst):
                disagreements += 1
                report.append("%s\n  %s\n  tram: %s" % (json.dumps(schema), json.dumps(inst), verdict))
    assert pairs == 160 * 12
    assert disagreements == 0, "\n".join(report[:10])


def test_validate_schema_exit_status_and_lines(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}}))
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"n": 4}')
    bad.write_text('{"n": 1}')
    ok = subprocess.run([TRAM, "validate-schema", str(schema), str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and "valid" in ok.stdout and "grammar: compiles" in ok.stdout
    no = subprocess.run([TRAM, "validate-schema", str(schema), str(good), str(bad)], capture_output=True, text=True)
    assert no.returncode == 1
    assert "invalid at '/n': minimum" in no.stdout
    refused = tmp_path / "r.json"
    refused.write_text('{"$ref": "http://elsewhere.test/x.json"}')
    r = subprocess.run([TRAM, "validate-schema", str(refused), str(good)], capture_output=True, text=True)
    assert r.returncode == 1 and "validator: refused" in r.stdout
