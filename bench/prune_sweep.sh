#!/bin/sh
# prune_sweep.sh — 2:4 quality against what is left dense: prunes the default
# model with each exclusion list below (and each --method), scores it on a
# text of another source than the calibration text, and prints one row per
# configuration for bench/results/compress.md: the share of the layers'
# weights that is 2:4 sparse, PPL, KL and top-1 against the f32 model.
#   sh bench/prune_sweep.sh          (about 20 minutes of CPU on a quiet 2-core machine)
# Environment: TRAM (bin/tram), MODEL, TEXT, CALIB, CHUNKS (6), METHODS
# ("wanda sparsegpt"), CONFIGS (names below; all by default), KEEP (keep the
# pruned files in build/prune_sweep).
set -e
tram=${TRAM:-bin/tram}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
text=${TEXT:-/usr/share/common-licenses/GPL-3}
calib=${CALIB:-tests/fixtures/int8/calib.txt}
chunks=${CHUNKS:-6}
methods=${METHODS:-wanda sparsegpt}
layers=30
out=build/prune_sweep
mkdir -p $out

# a comma-separated list of blk.L.SUFFIX for each L in the range and each
# suffix (attn: q, k, v and o; ffn: gate, up and down)
each() {
    from=$1 to=$2
    shift 2
    suffixes=$(echo "$*" | sed 's/\battn\b/attn_q attn_k attn_v attn_output/; s/\bffn\b/ffn_gate ffn_up ffn_down/')
    l=$from
    while [ "$l" -le "$to" ]; do
        for s in $suffixes; do printf 'blk.%d.%s,' "$l" "$s"; done
        l=$((l + 1))
    done
}

# exclusion list of configuration $1 (none: every layer matrix pruned)
exclusions() {
    last=$((layers - 1))
    case $1 in
    all) echo "" ;;
    first2) each 0 1 attn ffn ;;
    first2-last2) { each 0 1 attn ffn; each $((last - 1)) $last attn ffn; } ;;
    first4-last4) { each 0 3 attn ffn; each $((last - 3)) $last attn ffn; } ;;
    qk) each 0 $last attn_q attn_k ;;
    down) each 0 $last ffn_down ;;
    attn) each 0 $last attn ;;
    mlp) each 0 $last ffn ;;
    down-first2-last2) { each 0 $last ffn_down; each 0 1 attn ffn; each $((last - 1)) $last attn ffn; } ;;
    esac
}

# the share of the layers' weights the list leaves sparse, in percent
share() {
    awk -v list="$1" -v n=$layers 'BEGIN {
        split("attn_q 331776 attn_k 110592 attn_v 110592 attn_output 331776 ffn_gate 884736 ffn_up 884736 ffn_down 884736", a, " ")
        for (i = 1; i < 15; i += 2) size[a[i]] = a[i + 1]
        for (l = 0; l < n; l++) for (s in size) { total += size[s]; kept["blk." l "." s] = 0 }
        m = split(list, e, ",")
        for (l = 0; l < n; l++) for (s in size) {
            name = "blk." l "." s; dense = 0
            for (i = 1; i <= m; i++) if (e[i] != "" && index(name ".", e[i] ".") == 1) dense = 1
            if (!dense) sparse += size[s]
        }
        printf "%.0f", 100 * sparse / total }'
}

echo "| method    | dense (excluded)     | sparse share |     PPL | PPL f32 |  vs f32  | mean KL (f32‖q)   | same top-1      |"
echo "|-----------|----------------------|-------------:|--------:|--------:|---------:|------------------:|----------------:|"
for method in $methods; do
    for c in ${CONFIGS:-all first2-last2 first4-last4 qk down attn mlp down-first2-last2}; do
        list=$(exclusions $c | sed 's/,$//')
        $tram prune -m "$model" -o $out/$c.gguf --sparsity 2:4 --method $method --calib "$calib" \
            ${list:+--exclude "$list"} 2>/dev/null
        $tram perplexity -m $out/$c.gguf --compare "$model" -f "$text" --chunks "$chunks" 2>/dev/null |
            awk -v m="$method" -v c="$c" -v share="$(share "$list")" '
                /^PPL \(this model\)/ { ppl = $5 }
                /^PPL \(reference\)/  { ref = $4 }
                /^PPL ratio/          { pct = $5; gsub(/[()]/, "", pct) }
                /^Mean KLD/           { kl = $6 " ± " $8 }
                /^Same top-1/         { top = $5 " ± " $7 " %" }
                END { printf "| %-9s | %-20s | %11s%% | %7.3f | %7.3f | %8s | %17s | %15s |\n", m, c, share, ppl, ref, pct, kl, top }'
        [ -n "$KEEP" ] || rm -f $out/$c.gguf
    done
done
