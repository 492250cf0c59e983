#!/bin/sh
# ab.sh OLD_BIN NEW_BIN [ROUNDS] — two builds of bin/tram side by side, in one
# run: single-stream decode (tram generate, 128 greedy tokens) and offline
# throughput (tram bench throughput, 64 × 128/128), each with the exact f32
# weights and with --weight-format native (FORMATS="native" for one).
# SAMPLING replaces the decode's "--temperature 0" (e.g. SAMPLING="--temperature
# 0.8 --top-p 0.95 --seed 1" for a change to the sampler's truncation).  Rounds
# alternate old/new so that a machine's drift hits both; prints each
# figure's median and new ÷ old.  For a refactor that must not change speed,
# or to measure one that should.
set -eu
old=$1
new=$2
rounds=${3:-3}
formats=${FORMATS:-f32 native}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
sampling=${SAMPLING:---temperature 0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

decode() {  # decode BIN FORMAT: decode tokens/s
    # shellcheck disable=SC2086
    "$1" generate -m "$model" -p "The capital of France is" -n 128 $sampling --ignore-eos \
        --weight-format "$2" 2>&1 >/dev/null | sed -n 's/.*decode: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p'
}

offline() {  # offline BIN FORMAT: output tokens/s
    "$1" bench throughput -m "$model" --num-prompts 64 --input-len 128 --output-len 128 --no-peak \
        --weight-format "$2" 2>&1 | awk -F'|' '/^\| batched/ {gsub(/ /, "", $5); print $5}'
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

load=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$rounds"); do
    for fmt in $formats; do
        for side in old new; do
            eval bin=\$$side
            decode "$bin" $fmt >>"$tmp/decode-$fmt-$side"
            offline "$bin" $fmt >>"$tmp/offline-$fmt-$side"
        done
    done
    echo "round $r of $rounds done" >&2
done

echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; load average before the runs: $load"
echo "old: $old   new: $new   rounds: $rounds (medians; every value in brackets); decode: $sampling"
echo
echo "| figure | old | new | new ÷ old |"
echo "|---|---:|---:|---:|"
for what in decode offline; do
    for fmt in $formats; do
        o=$(median <"$tmp/$what-$fmt-old")
        n=$(median <"$tmp/$what-$fmt-new")
        label="single-stream decode, tok/s"
        [ $what = offline ] && label="offline 64 × 128/128, output tok/s"
        echo "| $label, $fmt | $o [$(tr '\n' ' ' <"$tmp/$what-$fmt-old" | sed 's/ $//')] |" \
             "$n [$(tr '\n' ' ' <"$tmp/$what-$fmt-new" | sed 's/ $//')] | $(awk "BEGIN {printf \"%.3f\", $n / $o}") |"
    done
done
