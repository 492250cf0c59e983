#!/bin/sh
# moe_speed.sh — CPU decode and batched throughput of a Mixtral-shaped MoE
# (bench/presets/mixtral-small.json: 8 experts, 2 per token) beside the dense
# model with the same active parameters (mixtral-small-dense.json: one FFN as
# wide as two experts), both dummy weights, in one run.  The MoE holds 3.4x
# the dense model's FFN weights but reads only its 2 routed experts per token.
#   sh bench/moe_speed.sh > out.txt   (results: bench/results/moe.md)
set -e
tok=${TOKENIZER_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
step() {
    echo "== $1 ($(uptime | sed 's/.*load/load/'))"
    shift
    "$@" 2>&1 | grep -E '^\| |^\{|tokens/s' || true
}
for p in mixtral-small mixtral-small-dense; do
    common="-m $tok --load-format dummy --preset bench/presets/$p.json --no-peak"
    step "1 request: $p" bin/tram bench throughput $common --num-prompts 1 --input-len 32 --output-len 64
    step "16 requests: $p" bin/tram bench throughput $common --num-prompts 16 --input-len 128 --output-len 64
done
