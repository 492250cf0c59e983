#!/bin/sh
# check.sh [ROOT] — the layering rule: a file includes headers only from its
# own layer or the layers below it.  Top to bottom:
#
#   cli/         entry points: main.c, the command table, the subcommands
#   server/      the HTTP API
#   engine/      public API, scheduler, block manager, step loop, CUDA runner
#   grammar/     structured outputs: GBNF, JSON Schema / regex compilers, token masks
#   tokenizer/   (reads vocabularies from GGUF files through models/) and,
#   chat/        on the same floor, the Jinja interpreter and chat templates
#   models/      file formats, architectures, model tools
#   kernels/     base utilities, batch, op interface, weight-format math;
#                cpu/ and cuda/, two backends that never include each other
#
# bench/ and tests/ sit outside the layers and may include anything.  Prints
# each violation as file:line and exits 1 when there is one.
root=${1:-.}
cd "$root" || exit 2

rank() {
    case $1 in
    cli/*) echo 6 ;;
    server/*) echo 5 ;;
    engine/*) echo 4 ;;
    grammar/*) echo 3 ;;
    tokenizer/*|chat/*) echo 2 ;;
    models/*) echo 1 ;;
    kernels/*) echo 0 ;;
    *) echo -1 ;;
    esac
}

backend() {
    case $1 in
    kernels/cpu/*) echo cpu ;;
    kernels/cuda/*) echo cuda ;;
    esac
}

bad=0
for f in $(find kernels models tokenizer chat grammar engine server cli -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" >/tmp/layering.$$ || continue
    while IFS= read -r line; do
        inc=${line#*\"}
        inc=${inc%%\"*}
        own=$(rank "$f")
        their=$(rank "$inc")
        why=""
        [ "$their" -gt "$own" ] && why="a layer above its own"
        b1=$(backend "$f")
        b2=$(backend "$inc")
        [ -n "$b1" ] && [ -n "$b2" ] && [ "$b1" != "$b2" ] && why="the other backend"
        if [ -n "$why" ]; then
            echo "$f:${line%%:*}: includes $inc, $why"
            bad=1
        fi
    done </tmp/layering.$$
done
rm -f /tmp/layering.$$
[ $bad -eq 0 ] && echo "layering: every include points down or sideways within its layer"
exit $bad
