#!/bin/sh
# `make compare`: installs the peers (bench/compare_peers.sh, skipped when
# present), then runs bench/compare.py, which prints the table and writes
# bench/results/compare-cpu.md.  Knobs (environment; defaults in compare.py):
#   COMPARE_QUICK=1            a smoke run of a few minutes (1 run, tiny sizes)
#   COMPARE_RUNS=3             timed runs per figure (the median is reported)
#   COMPARE_ENGINES="tram llama.cpp transformers"
#   COMPARE_OFFLINE_PROMPTS="64 256"  COMPARE_INPUT_LEN=128  COMPARE_OUTPUT_LEN=128
#   COMPARE_PREFILL_LEN=512  COMPARE_DECODE_LEN=128  COMPARE_COMPETITORS=N (contention row: busy processes)
#   COMPARE_SERVE_RATES="0.5 1 2"  COMPARE_SERVE_PROMPTS=24
#   COMPARE_SERVE_INPUT_LEN=128  COMPARE_SERVE_OUTPUT_LEN=64  COMPARE_LLAMA_SLOTS=32
#   COMPARE_CLOSED_CLIENTS=32  COMPARE_CLOSED_PROMPTS=64  (closed-loop serving: clients, requests)
#   COMPARE_CLOSED_INPUT_LEN=96  COMPARE_CLOSED_OUTPUT_LEN=128
#   COMPARE_TRAM_FLAGS="--weight-format native"  (engine flags: bench and serve)
#   COMPARE_HF_MAX_PROMPTS=64  COMPARE_HF_BATCH=0  (transformers: offline sizes; prompts per generate(), 0 all)
#   COMPARE_THREADS=N  COMPARE_OUT=path.md
set -e
cd "$(dirname "$0")/.."
sh bench/compare_peers.sh
exec "${PYTHON:-python3}" bench/compare.py
