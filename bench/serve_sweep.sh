#!/bin/sh
# Runs `tram bench serve` against tram on loopback at three request rates and
# writes bench/results/serve.md and serve.png (via serve_report.py).
#   RATES="0.5 1 2"  NUM_PROMPTS=24  INPUT_LEN=64  OUTPUT_LEN=32  MODEL=...  SERVE_FLAGS=...
set -e
cd "$(dirname "$0")/.."
RATES="${RATES:-0.5 1 2}"
MODEL="${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
PY="${PYTHON:-python3}"
PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
OUT=$(mktemp -d)
# shellcheck disable=SC2086
bin/tram serve -m "$MODEL" --port "$PORT" --log-level warning $SERVE_FLAGS 2>"$OUT/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$OUT"' EXIT
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
    kill -0 $SERVER || { cat "$OUT/serve.log"; exit 1; }
    sleep 0.5
done
for rate in $RATES; do
    bin/tram bench serve --base-url "http://127.0.0.1:$PORT" --request-rate "$rate" \
        --num-prompts "${NUM_PROMPTS:-24}" --random-input-len "${INPUT_LEN:-64}" \
        --random-output-len "${OUTPUT_LEN:-32}" --goodput ttft:1000 tpot:250 \
        --label "rate $rate" --result-json "$OUT/rate-$rate.json"
done
$PY bench/serve_report.py --md bench/results/serve.md --png bench/results/serve.png \
    --setup "${NUM_PROMPTS:-24} prompts, ${INPUT_LEN:-64} words in, ${OUTPUT_LEN:-32} tokens out, flags: ${SERVE_FLAGS:-none}" \
    "$OUT"/rate-*.json
