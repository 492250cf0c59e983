#!/bin/sh
# tests/gpu/run.sh — `make gpu-check`: the CUDA backend on a machine with an
# NVIDIA GPU (an H200 when lent), in one command that fits in 8 minutes:
#   1. build for sm_90a, or unpack build/gpu-bundle.tar.xz when it was carried
#   2. every CUDA op against the CPU backend (check_kernels)
#   3. the default model end to end: greedy text of 8 prompts, CPU = CUDA
#   4. benchmark: copy bandwidth, bf16 GEMM rate, decode step of a preset
# Full logs go to $OUT (default /tmp/tram-gpu-check); a summary table is
# printed last.  Exit status: 0 when every check that ran passed.
#
#   sh tests/gpu/run.sh bundle   on a machine without a GPU: build and pack
#        build/gpu-bundle.tar.xz (binaries + the shared libraries a bare CUDA
#        image lacks), to carry to the device machine, which has nvcc but not
#        tram's Debian dev packages
#
# Environment: TRAM_GPU_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf),
# TRAM_GPU_PRESET (llama-3.1-8b), TRAM_GPU_SEED (kernel check seed).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/tram-gpu-check}
MODEL=${TRAM_GPU_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
PRESET=${TRAM_GPU_PRESET:-llama-3.1-8b}
BUNDLE=build/gpu-bundle.tar.xz
PATH="$PATH:/usr/local/cuda/bin"
export PATH

# ---------------------------------------------------------------- bundle
# Checksum of every source the binaries are built from: a bundle built from
# other sources than the tree it travels with is refused, never run.
sources_sum() {
    find engine models kernels server tokenizer tests/gpu -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.json' \) |
        LC_ALL=C sort | xargs cat | md5sum | cut -d' ' -f1
}

bundle() {
    make cuda || exit 1
    rm -rf build/gpu-bundle && mkdir -p build/gpu-bundle/bin build/gpu-bundle/lib || exit 1
    cp bin/tram-cuda build/cuda/tests/gpu/check_kernels build/cuda/tests/gpu/bench_device build/gpu-bundle/bin/ || exit 1
    # Libraries outside glibc, the C++ runtime and CUDA: the device image has
    # those (newer, which stays compatible; an older copy here could not).
    ldd build/gpu-bundle/bin/* | awk '/=> \// {print $3}' | sort -u |
        grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
        while read -r lib; do cp -L "$lib" build/gpu-bundle/lib/ || exit 1; done
    sources_sum >build/gpu-bundle/sources.md5
    tar -C build -cJf "$BUNDLE" gpu-bundle || exit 1
    ls -la "$BUNDLE"
    echo "carry $BUNDLE (and nothing under build/cuda) with: sh tests/gpu/run.sh"
    exit 0
}
[ "${1:-}" = bundle ] && bundle

mkdir -p "$OUT"
summary=""
failed=0
row() { summary="$summary$(printf '| %-12s | %-60s |' "$1" "$2")
"; }

# ---------------------------------------------------------------- 1. build
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/device.txt" 2>&1
if [ -f "$BUNDLE" ]; then
    tar -C build -xJf "$BUNDLE" || exit 1
    if [ "$(cat build/gpu-bundle/sources.md5)" != "$(sources_sum)" ]; then
        echo "gpu-check: $BUNDLE was built from other sources than this tree: run 'sh tests/gpu/run.sh bundle' again"
        exit 1
    fi
    BIN=build/gpu-bundle/bin
    # NCCL ships with the toolkit here, inside the Python wheels there.
    NCCL_DIR=$(dirname "$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' 2>/dev/null | head -n 1)" 2>/dev/null)
    LD_LIBRARY_PATH="$PWD/build/gpu-bundle/lib:/usr/local/cuda/lib64:${NCCL_DIR:-.}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    row build "carried bundle (built for sm_90a by run.sh bundle)"
elif make cuda >"$OUT/build.log" 2>&1; then
    mkdir -p build/gpu-bin && cp bin/tram-cuda build/cuda/tests/gpu/check_kernels build/cuda/tests/gpu/bench_device build/gpu-bin/
    BIN=build/gpu-bin
    row build "make cuda: ok"
else
    tail -n 30 "$OUT/build.log"
    echo "gpu-check: the build failed and no $BUNDLE was carried (see $OUT/build.log)"
    exit 1
fi

# ---------------------------------------------------------------- 2. kernels
timeout 180 "$BIN/check_kernels" ${TRAM_GPU_SEED:+"$TRAM_GPU_SEED"} >"$OUT/check_kernels.log" 2>&1
rc=$?
passed=$(grep -c '^PASS' "$OUT/check_kernels.log")
total=$(grep -c -E '^(PASS|FAIL)' "$OUT/check_kernels.log")
worst=$(awk '$1 == "PASS" || $1 == "FAIL" { for (i = 1; i < NF; i++) if ($i == "rel" && $(i + 1) > w) w = $(i + 1) } END { print w + 0 }' "$OUT/check_kernels.log")
row kernels "$passed of $total cases pass (exit $rc), worst rel err $worst"
grep '^FAIL' "$OUT/check_kernels.log" | head -n 5
[ "$rc" = 0 ] || failed=1
[ "$rc" = 2 ] && { cat "$OUT/check_kernels.log"; printf '%s' "$summary"; exit 1; }

# ---------------------------------------------------------------- 3. end to end
e2e() {
    same=0
    n=0
    for p in "The capital of France is" "Write a haiku about trams." "def fibonacci(n):" \
             "Once upon a time," "List three primary colors:" "Translate to French: good morning" \
             "The square root of 144 is" "Explain photosynthesis in one sentence."; do
        n=$((n + 1))
        rm -f "$OUT/e2e.cpu" "$OUT/e2e.cuda"
        for dev in cpu cuda; do
            timeout 60 "$BIN/tram-cuda" generate -m "$MODEL" -p "$p" -n 16 --temperature 0 --device "$dev" \
                >"$OUT/e2e.$dev" 2>>"$OUT/e2e.log" || { echo "prompt $n: $dev run failed" >>"$OUT/e2e.log"; break; }
        done
        { echo "== prompt $n: $p"; echo "-- cpu:"; cat "$OUT/e2e.cpu"; echo "-- cuda:"; cat "$OUT/e2e.cuda"; } >>"$OUT/e2e.log"
        cmp -s "$OUT/e2e.cpu" "$OUT/e2e.cuda" && same=$((same + 1))
    done
    rm -f "$OUT/e2e.cpu" "$OUT/e2e.cuda"
    row end-to-end "$same of $n prompts: 16 greedy tokens equal on cpu and cuda"
    [ "$same" = "$n" ] || failed=1
}
: >"$OUT/e2e.log"
if [ -f "$MODEL" ]; then
    e2e
else
    row end-to-end "skipped: $MODEL is not here (set TRAM_GPU_MODEL)"
fi

# ---------------------------------------------------------------- 4. benchmark
timeout 240 "$BIN/bench_device" "$PRESET" 1 8 64 256 >"$OUT/bench.log" 2>&1 || {
    row bench "failed (exit $?), see bench.log"
    failed=1
}

echo
cat "$OUT/device.txt"
printf '%s' "$summary"
grep '^|' "$OUT/bench.log"
printf '%s' "$summary" >"$OUT/summary.md"
grep '^|' "$OUT/bench.log" >>"$OUT/summary.md"
exit "$failed"
