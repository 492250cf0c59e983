#!/bin/sh
# cold_start.sh [ROUNDS] — seconds from `tram serve` starting to /health
# answering 200 (ready: loaded, warmed up by a prefill and a decode forward
# pass), for the default model and for random llama-3.2-1b weights
# (--load-format dummy).  Prints one markdown row per configuration: the
# median of ROUNDS (3) and the server's own split (load / warm-up).
set -eu
rounds=${1:-3}
bin=${TRAM_BIN:-bin/tram}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
port=${PORT:-18731}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

once() {  # once FLAGS...: prints "total load"
    start=$(date +%s.%N)
    "$bin" serve -m "$model" --port "$port" --kv-cache-memory 512MiB --max-model-len 2048 "$@" >"$log" 2>&1 &
    pid=$!
    until curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null | grep -q 200; do
        kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.01
    done
    end=$(date +%s.%N)
    kill -TERM "$pid"
    wait "$pid" || true
    load=$(sed -n 's/.*loaded in \([0-9.]*\) s.*/\1/p' "$log")
    ready=$(sed -n 's/.*, \([0-9.]*\) s after start.*/\1/p' "$log")
    echo "$(echo "$end - $start" | bc) $load $ready"
}

row() {  # row NAME FLAGS...
    name=$1
    shift
    results=$(for i in $(seq "$rounds"); do once "$@"; done | sort -n)
    median=$(echo "$results" | sed -n "$(( (rounds + 1) / 2 ))p")
    set -- $median
    printf '| %s | %.2f | %.2f | %.2f | %s |\n' "$name" "$1" "$2" "$(echo "$3 - $2" | bc)" \
        "$(echo "$results" | awk '{printf "%s%.2f", (NR > 1 ? ", " : ""), $1}')"
}

echo "| model | start to ready (s, median) | load (s) | warm-up (s) | all rounds (s) |"
echo "|---|---|---|---|---|"
row "SmolLM2-135M-Instruct Q4_1 (default)"
row "llama-3.2-1b, --load-format dummy" --load-format dummy --preset llama-3.2-1b
