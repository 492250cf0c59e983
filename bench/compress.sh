#!/bin/sh
# compress.sh — the compression tables of bench/results/compress.md: quality
# of each format against the f32 model (tram perplexity's PPL, KL and top-1
# agreement, on a text of another source than the calibration text: the KV
# formats, 2:4 and FP8 weights, tram quantize --format fp8), what an
# int8 KV cache holds in 1 GiB and its decode speed at 4k context, decode
# attention alone over a 4k KV per dtype, the 2:4 sparse product against
# the dense one, and the CPU's FP8 product against the f32 and int8 ones.
#   sh bench/compress.sh            (about 25 minutes of CPU on a quiet 2-core machine)
# Environment: MODEL (the default model), TEXT (/usr/share/common-licenses/GPL-3),
# CHUNKS (6 windows of 512), THREADS (all cores), KV_SEQS (4), KV_CTX (4096),
# SGPT_CALIB (SparseGPT's calibration text: CALIB; it needs more tokens than
# CALIB's 1,400, see bench/results/compress.md), DENSE (the layers the "best
# exclusions" rows leave dense: the first and last 4 of 30).
set -e
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
text=${TEXT:-/usr/share/common-licenses/GPL-3}
chunks=${CHUNKS:-6}
threads=${THREADS:+-t $THREADS}
calib=${CALIB:-tests/fixtures/int8/calib.txt}
make --no-print-directory bin/tram build/bench/kv_cache build/bench/kv_attention build/bench/sparse_gemm \
    build/bench/fp8_gemm >/dev/null
mkdir -p build/compress
sgpt_calib=${SGPT_CALIB:-$calib}
dense=${DENSE:-blk.0,blk.1,blk.2,blk.3,blk.26,blk.27,blk.28,blk.29}
bin/tram prune -m "$model" -o build/compress/s24.gguf --sparsity 2:4 --calib "$calib" $threads 2>/dev/null
bin/tram prune -m "$model" -o build/compress/s24_sgpt.gguf --sparsity 2:4 --method sparsegpt --calib "$sgpt_calib" \
    $threads 2>/dev/null
bin/tram prune -m "$model" -o build/compress/s24_best.gguf --sparsity 2:4 --method sparsegpt --calib "$sgpt_calib" \
    --exclude "$dense" $threads 2>/dev/null
bin/tram quantize -m build/compress/s24_best.gguf -o build/compress/s24_best_int8.gguf --calib "$sgpt_calib" \
    $threads 2>/dev/null
bin/tram quantize -m "$model" -o build/compress/fp8.gguf --format fp8 2>/dev/null

# one table row: NAME, the model under test, then its flags for `tram perplexity`
row() {
    name=$1
    under=$2
    shift 2
    bin/tram perplexity -m "$under" --compare "$model" -f "$text" --chunks "$chunks" $threads "$@" 2>/dev/null |
        awk -v name="$name" '
            /^PPL \(this model\)/ { ppl = $5 }
            /^PPL \(reference\)/  { ref = $4 }
            /^PPL ratio/          { pct = $5; gsub(/[()]/, "", pct) }
            /^Mean KLD/           { kl = $6 " ± " $8 }
            /^Same top-1/         { top = $5 " ± " $7 " %" }
            END { printf "| %-24s | %7.3f | %7.3f | %8s | %17s | %15s |\n", name, ppl, ref, pct, kl, top }'
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d); commit $(git rev-parse --short HEAD)"
echo "Model: $model; text: $text, $chunks windows of 512 tokens scored on their second half"
echo
echo "| format                   |     PPL | PPL f32 |  vs f32  | mean KL (f32‖q)   | same top-1      |"
echo "|--------------------------|--------:|--------:|---------:|------------------:|----------------:|"
row "int8 KV cache" "$model" --kv-cache-dtype int8
row "fp8 (E4M3) KV cache" "$model" --kv-cache-dtype fp8
row "2:4 sparse (Wanda)" build/compress/s24.gguf
row "2:4 sparse (SparseGPT)" build/compress/s24_sgpt.gguf
row "2:4 SparseGPT, 8 dense" build/compress/s24_best.gguf
row "2:4 + INT8, 8 dense" build/compress/s24_best_int8.gguf
row "FP8 weights (W8A8)" build/compress/fp8.gguf
echo
build/bench/kv_cache -m "$model" --ctx "${KV_CTX:-4096}" --seqs "${KV_SEQS:-4}" $threads auto int8 fp8
echo
build/bench/kv_attention --ctx "${KV_CTX:-4096}" $threads
echo
build/bench/sparse_gemm $threads
echo
build/bench/fp8_gemm $threads
