#!/bin/sh
# tests/gpu/standin.sh — stands in, on a machine without a GPU, for every
# program and tool tests/gpu/run.sh --dry-run would run on the device: it
# acts on the name it is called by (nvidia-smi, ldd, compute-sanitizer,
# gpu_probe, tram-cuda, and any program of tests/gpu) and prints what the
# real one prints in the form run.sh reads.
#
# TRAM_GPU_STANDIN plants faults, a list of NAME=MODE words, where NAME is a
# program's name or a sanitizer tool:
#   fail   print a FAIL line and exit 1        hang   never finish
#   nogpu  exit 2 (no usable GPU)              errors (a sanitizer tool) report an error
#   skip   exit 77 (could not run here: check_sparse24 without cuSPARSELt)
#   unsupported (a sanitizer tool) refuse the device, as on gVisor
#   missing (ldd) report a library not found for check_e2e
me=$(basename "$0")
mode_of() {
    for w in $(echo "${TRAM_GPU_STANDIN:-}" | tr ',' ' '); do
        [ "${w%%=*}" = "$1" ] && echo "${w#*=}" && return
    done
}
case $me in
nvidia-smi)
    case "$*" in
    *--query-gpu*) echo "stand-in GPU, 0.0, 0 MiB" ;;
    *) echo "stand-in nvidia-smi: no GPU, this is the dry run" ;;
    esac
    exit 0
    ;;
ldd)
    [ "$1" = --version ] && echo "ldd (stand-in) 0.0" && exit 0
    [ "$(mode_of ldd)" = missing ] && [ "$(basename "$1")" = check_e2e ] && printf '\tlibjansson.so.4 => not found\n'
    printf '\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x0)\n'
    exit 0
    ;;
compute-sanitizer)
    while [ "$#" -gt 0 ]; do
        case $1 in
        --tool) tool=$2 && shift 2 ;;
        --*) shift 2 ;;
        *) break ;;
        esac
    done
    case "$(mode_of "$tool")" in
    unsupported) echo "========= Error: Device not supported" && exit 1 ;;
    errors) "$@" && echo "========= Invalid __global__ write of size 4" && echo "========= ERROR SUMMARY: 1 error" && exit 3 ;;
    esac
    "$@" || exit
    echo "========= ERROR SUMMARY: 0 errors"
    exit 0
    ;;
esac
case "$(mode_of "$me")" in
fail) echo "FAIL   $me planted failure" && exit 1 ;;
hang) exec sleep 600 ;;
nogpu) echo "$me: no CUDA device (planted)" && exit 2 ;;
skip) echo "SKIP $me: cannot load libcusparseLt.so.0 (planted)" && exit 77 ;;
esac
case $me in
tram-cuda) echo "| batched | stand-in | - | 1.0 |" ;;
bench_device) echo "| stand-in bench_device | - |" ;;
*) echo "PASS   $me stand-in case, rel 0.001" ;;
esac
exit 0
