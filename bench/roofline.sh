#!/bin/sh
# The CPU roofline report: `tram bench roofline` (prefill, decode at batch 1,
# 8 and 32: bytes, FLOPs, GB/s and GFLOP/s per class of op against the floors
# measured in the same run) written to bench/results/roofline.md with the
# commit it ran at.  Arguments go to `tram bench roofline` (e.g. -t 2,
# --weight-format f32, or --preset llama-3.2-1b for weights larger than the
# cache); ROOFLINE_NOTE adds a sentence (e.g. "measured under load");
# ROOFLINE_OUT changes the file (bench/results/roofline-dram.md is the
# --preset llama-3.2-1b report).  About a minute on 2 quiet cores.
# The file's "## Changes measured" section (before/after figures of single
# changes, written by hand) is carried over to the new report.
set -e
cd "$(dirname "$0")/.."
out=${ROOFLINE_OUT:-bench/results/roofline.md}
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.changes"' EXIT
sed -n '/^## Changes measured/,$p' "$out" 2>/dev/null > "$tmp.changes" || true
bin/tram bench roofline "$@" > "$tmp"
{
    echo "# CPU roofline"
    echo
    echo "Made by \`sh bench/roofline.sh${*:+ $*}\` at tram commit $(git rev-parse --short HEAD)."
    [ -n "$ROOFLINE_NOTE" ] && echo "$ROOFLINE_NOTE"
    echo
    cat "$tmp"
    echo "Bytes are what each op must move at least (every weight, input and output once, each"
    echo "sequence's KV once); a share above 100% of the triad means the data came from cache."
    echo "GEMM peak: tram's block kernel on weights in cache for native weights, OpenBLAS sgemm for f32."
    echo "Scheduling is not in this loop (the model runs without the engine): \`tram bench throughput\`'s"
    echo "ms/step against the step time here is its cost."
    if [ -s "$tmp.changes" ]; then
        echo
        cat "$tmp.changes"
    fi
} > "$out"
cat "$out"
