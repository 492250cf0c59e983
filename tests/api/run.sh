#!/bin/sh
# API tests: a real `tram serve` on a free loopback port, driven by the
# official openai SDK and raw HTTP.  Called by `make test-api`.
#   TRAM_BIN     the binary (bin/tram)      TRAM_MODEL  the model (the default one)
#   PYTEST_ARGS  extra pytest arguments, e.g. "-k errors"
set -e
cd "$(dirname "$0")/../.."
VENV=.venv
PINS="pytest==9.2.0 openai==3.57.0 anthropic==2.10.0 jsonschema==4.26.0 rfc3339-validator==0.1.4"
if ! "$VENV/bin/python" -c 'import pytest, openai, anthropic, rfc3339_validator, importlib.metadata as m; assert pytest.__version__ == "9.2.0" and openai.__version__ == "3.57.0" and anthropic.__version__ == "2.10.0" and m.version("jsonschema") == "4.26.0"' 2>/dev/null; then
    echo "tram: setting up $VENV with $PINS"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $PINS
fi
TRAM_PORT=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export TRAM_PORT
export TRAM_BIN="${TRAM_BIN:-bin/tram}"
export TRAM_MODEL="${TRAM_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
# one engine thread per server: OpenMP spinning on a shared 2-core box costs more than it gives
export TRAM_TEST_THREADS="${TRAM_TEST_THREADS:-1}"
# shellcheck disable=SC2086
# --durations: the slowest tests, so that CI shows where its minutes go
exec "$VENV/bin/python" -m pytest tests/api -q -rs --durations=25 -p no:cacheprovider $PYTEST_ARGS
