#!/bin/sh
# Structured outputs: tram's per-token mask time beside XGrammar and
# llguidance (PyPI, in a venv under bench/peers/) on the same schemas,
# vocabulary and token sequences, and constrained against free throughput
# at 32 concurrent requests; writes bench/results/structured.md.
#   --bounds   only the large-bounds section (compile, memory and mask time
#              of counts such as maxLength 100000), no peers
#   --big      only the large-grammars section (rule chains of 8k..60k
#              rules, enums and choices of 1k..100k values), no peers
set -e
cd "$(dirname "$0")/.."
make --no-print-directory bin/tram build/libtram.a
cc -O2 -march=native -std=c11 -I. -D_GNU_SOURCE -o build/bench_grammar bench/bench_grammar.c build/libtram.a \
   $(pkg-config --libs openblas jansson libevent libevent_pthreads libpcre2-8 sentencepiece) -lstdc++ -lm -lpthread -fopenmp
if [ "$1" = --bounds ] || [ "$1" = --big ]; then
    exec python3 bench/structured.py "$1"
fi
VENV=bench/peers/venv
if ! "$VENV/bin/python" -c 'import xgrammar, llguidance' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check xgrammar==0.2.8 llguidance==1.9.1
fi
python3 bench/structured.py
