#!/bin/sh
# fleet.sh — the figures of bench/results/fleet.md: the response cache (hit
# against miss; a workload with 10% repeated prompts, cache on and off), the
# cold start, and the fleet test's counts.  Prints markdown; paste it in with
# the CPU, the date and the commit.
set -eu
cd "$(dirname "$0")/.."
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d)"
echo
echo "## The response cache"
echo
python3 bench/response_cache.py
echo
echo "## Cold start"
echo
sh bench/cold_start.sh 3
echo
echo "## The fleet test"
echo
sh tests/fleet/run.sh
