#!/bin/sh
# int8_speed.sh — f32 against W8A8 decode speed on this CPU, in one run, with
# the machine's load and memory bandwidth measured around the runs (the
# floors of bench/results/int8.md).  Single stream for the f32 model and
# every W8A8 file; 64 requests for the f32 model and the first W8A8 file.
#   sh bench/int8_speed.sh W8A8.gguf [MORE_W8A8.gguf ...]
set -e
[ $# -ge 1 ] || { echo "usage: sh bench/int8_speed.sh W8A8.gguf [MORE_W8A8.gguf ...]" >&2; exit 2; }
f32=${F32_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -x build/bench/stream ] || make --no-print-directory build/bench/stream >/dev/null

step() {
    echo "== $1 ($(uptime | sed 's/.*load/load/'))"
    shift
    "$@" 2>&1 | grep -E '^\| batched|^\{' || true
}

step "bandwidth before" build/bench/stream --mib 256 --reps 5
for m in "$f32" "$@"; do
    step "1 request: $m" bin/tram bench throughput -m "$m" --num-prompts 1 --input-len 32 --output-len 128
done
for m in "$f32" "$1"; do
    step "64 requests: $m" bin/tram bench throughput -m "$m" --num-prompts 64 --input-len 128 --output-len 128
done
step "bandwidth after" build/bench/stream --mib 256 --reps 5
