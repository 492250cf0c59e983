#!/bin/sh
# The local fleet test (tests/fleet/fleet.py): three replicas behind nginx,
# a drain, a kill, single-flight.  Called by `make test-fleet`; installs
# Debian's nginx first when it is missing.
#   TRAM_BIN  the binary (bin/tram)      TRAM_MODEL  the model (the default one)
set -e
cd "$(dirname "$0")/../.."
[ -x /usr/sbin/nginx ] || sh tests/deps.sh nginx
export TRAM_BIN="${TRAM_BIN:-bin/tram}"
export TRAM_MODEL="${TRAM_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
# one engine thread per replica, as the API tests: three replicas share the cores
export TRAM_TEST_THREADS="${TRAM_TEST_THREADS:-1}"
exec python3 tests/fleet/fleet.py
