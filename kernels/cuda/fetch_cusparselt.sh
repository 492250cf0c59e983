#!/bin/sh
# Fetches cuSPARSELt's header for the CUDA build (kernels/cuda/sparse24.cu
# compiles against its prototypes; the binary does not link the library,
# it dlopens it at run time).  The header ships in the PyPI wheel
# nvidia-cusparselt-cu13, pinned here with its checksum; the wheel (170 MB)
# is cached outside the clone (~/.cache/tram, or $TRAM_CACHE) so a fresh
# clone does not download it again, and only what is asked is unzipped.
#
#   fetch_cusparselt.sh DIR        DIR/include/cusparseLt.h (what make cuda runs)
#   fetch_cusparselt.sh DIR lib    also DIR/lib/libcusparseLt.so.0 (237 MB), for
#                                  TRAM_CUSPARSELT=DIR/lib on a machine that
#                                  cannot pip install it (docs/gpu.md)
set -e
dest=${1:?usage: fetch_cusparselt.sh DIR [lib]}
version=0.10.0
sha=b46f95b786b4ed96193d639527d95c1703f421d14a89afea1437a84ae3c36823
name=nvidia_cusparselt_cu13-$version-py3-none-manylinux2014_x86_64.whl
cache=${TRAM_CACHE:-$HOME/.cache/tram}
wheel=$cache/$name
mkdir -p "$cache"
if [ ! -f "$wheel" ]; then
    echo "tram: downloading cuSPARSELt's header (nvidia-cusparselt-cu13==$version from PyPI, 170 MB, once)"
    tmp=$(mktemp -d)
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        --dest "$tmp" "nvidia-cusparselt-cu13==$version"
    mv "$tmp/$name" "$wheel.part"
    rm -rf "$tmp"
    if ! echo "$sha  $wheel.part" | sha256sum -c --quiet -; then
        echo "tram: checksum mismatch for $name; removed" >&2
        rm -f "$wheel.part"
        exit 1
    fi
    mv "$wheel.part" "$wheel"
fi
mkdir -p "$dest/include"
for h in cusparseLt.h cusparseLt_cusparse_stub.h; do
    unzip -o -q -p "$wheel" "nvidia/cu13/include/$h" > "$dest/include/$h.part"
    mv "$dest/include/$h.part" "$dest/include/$h"
done
if [ "${2:-}" = lib ]; then
    mkdir -p "$dest/lib"
    unzip -o -q -p "$wheel" nvidia/cu13/lib/libcusparseLt.so.0 > "$dest/lib/libcusparseLt.so.0.part"
    mv "$dest/lib/libcusparseLt.so.0.part" "$dest/lib/libcusparseLt.so.0"
fi
