#!/bin/sh
# batch.sh — `tram generate --input` throughput on the thousand-line file of
# tests/api/test_batch.py (tests/api/batch_files.py: greedy, 1-3 tokens each,
# one opening the prefix cache serves, chat and completions, twenty kinds of
# sampling fields); prints the CPU, the load around the run, the run's
# summary line (requests/s, generated tokens/s) and its CPU time.
# Results: bench/results/batch.md.
#   sh bench/batch.sh [generate flags, e.g. --threads 2]
set -e
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
PYTHONPATH=tests/api python3 -c 'import json, batch_files
for line in batch_files.thousand_lines():
    print(json.dumps(line))' > "$dir/in.jsonl"
echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(wc -l < "$dir/in.jsonl") requests"
echo "== before: $(uptime | sed 's/.*load/load/')"
/usr/bin/time -f "== %e s wall including the model load, %U s user, %S s system" \
    bin/tram generate -m "$model" --input "$dir/in.jsonl" --output "$dir/out.jsonl" "$@" 2>&1 | tail -2
echo "== after: $(uptime | sed 's/.*load/load/')"
