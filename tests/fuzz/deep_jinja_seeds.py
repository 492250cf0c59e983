"""Writes the deep template shapes of issue 21 into a directory, as seeds for
`make fuzz-jinja`: chains the parser reads in loops (attributes, filters,
operators, elif), nesting it reads by recursion (brackets, blocks, calls),
and templates that recurse when rendered.  Generated, not committed: each is
a few hundred KB.  Usage: python3 deep_jinja_seeds.py DIR"""
import os
import sys

N = 50000   # 50 times past every bound (tree height 1000, nesting 256, depth 2048)
SHAPES = {
    "attributes": "{{ x" + ".y" * N + " }}",
    "filters": "{{ x" + "|upper" * N + " }}",
    "concat": "{{ 'a'" + " ~ 'a'" * N + " }}",
    "sum": "{{ 1" + " + 1" * N + " }}",
    "items": "{{ x" + "[0]" * N + " }}",
    "calls": "{{ x" + "()" * N + " }}",
    "and": "{{ a" + " and a" * N + " }}",
    "tests": "{{ x" + " is defined" * N + " }}",
    "compare": "{{ 1" + " < 2" * N + " }}",
    "not": "{{ " + "not " * N + "1 }}",
    "neg": "{{ " + "-" * N + "1 }}",
    "parens": "{{ " + "(" * N + "1" + ")" * N + " }}",
    "lists": "{{ " + "[" * N + "]" * N + " }}",
    "dicts": "{{ " + "{1: " * N + "1" + "}" * N + " }}",
    "args": "{{ " + "f(" * N + "1" + ")" * N + " }}",
    "ifs": "{% if x %}" * N + "{% endif %}" * N,
    "fors": "{% for a in b %}" * N + "{% endfor %}" * N,
    "macros": "{% macro m() %}" * N + "{% endmacro %}" * N,
    "elifs": "{% if x %}" + "{% elif x %}" * N + "{% endif %}",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "fork": "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) ~ f(n - 1) }}{% endif %}xy{% endmacro %}{{ f(30) }}",
    "map": "{{ ['a'] | map(" + "'map', " * N + "'upper') | list }}",
    "deep_value": "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                  "{{ ns.x | tojson }}{{ ns.x }}{{ ns.x < ns.x }}",
}

os.makedirs(sys.argv[1], exist_ok=True)
for name, text in SHAPES.items():
    with open(os.path.join(sys.argv[1], name + ".jinja"), "w") as f:
        f.write(text)
