#!/bin/sh
# Installs the Debian packages tram builds and tests with, when missing
# (`deps.sh NAME...`: those packages instead, e.g. nginx for the fleet test).
# As root it runs apt-get; otherwise it prints the exact command to run.
set -e
PKGS="build-essential pkg-config unzip python3-venv libopenblas-dev libjansson-dev libevent-dev
      libpcre2-dev libsentencepiece-dev libcriterion-dev clang"
[ $# -eq 0 ] || [ "$1" = packages ] || PKGS="$*"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "tram: installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
    echo "tram: missing Debian packages. Run:" >&2
    echo "    sudo apt-get install -y$missing" >&2
    exit 1
fi
