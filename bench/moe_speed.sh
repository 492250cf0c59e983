#!/bin/sh
# moe_speed.sh — CPU decode and batched throughput of a Mixtral-shaped MoE
# (bench/presets/mixtral-small.json: 8 experts, 2 per token) beside the dense
# model with the same active parameters (mixtral-small-dense.json: one FFN as
# wide as two experts), both dummy weights, in one run.  The two alternate,
# twice, so that a change in the machine's load falls on both.  The MoE holds
# 3.4x the dense model's FFN weights but runs only 2 experts per token.
#   sh bench/moe_speed.sh > out.txt   (results: bench/results/moe.md)
set -e
tok=${TOKENIZER_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
step() {
    echo "== $1 ($(uptime | sed 's/.*load/load/'))"
    shift
    "$@" 2>&1 | grep -E '^\| batched|^\{' || true
}
run() {
    preset=$1; shift
    bin/tram bench throughput -m "$tok" --load-format dummy --preset "bench/presets/$preset.json" --no-peak "$@"
}
for round in 1 2; do
    for p in mixtral-small mixtral-small-dense; do
        step "round $round, 1 request: $p" run $p --num-prompts 1 --input-len 32 --output-len 64
    done
    for p in mixtral-small mixtral-small-dense; do
        step "round $round, 16 requests: $p" run $p --num-prompts 16 --input-len 64 --output-len 32
    done
done
