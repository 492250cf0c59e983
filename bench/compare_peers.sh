#!/bin/sh
# Installs the peers that `make compare` measures tram against, under
# bench/peers/ (git-ignored), skipping every step whose result is already there:
#   - llama.cpp's own llama-server, llama-batched-bench and llama-bench, and
#     the llama-lookup, llama-speculative, llama-quantize (the F32 target of
#     llama-speculative) and llama-embedding tools that bench/spec.py and
#     bench/embed.py run (LLAMA_TARGETS), built with CMake
#     (CPU, Release, GGML_NATIVE) from the llama.cpp source that the
#     llama-cpp-python sdist vendors;
#   - a virtual environment with transformers + torch (+ accelerate, gguf).
# Versions are pinned so that two runs of `make compare` measure the same code.
# The default Linux torch wheel is the CUDA build (about 5 GB installed with
# its nvidia-* packages; it runs on the CPU all the same).  PEER_PIP_ARGS goes
# to pip as it is, e.g. to install a CPU-only build of the same version.
set -e
cd "$(dirname "$0")/.."

LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
PEER_PIP_PACKAGES="${PEER_PIP_PACKAGES:-torch==2.15.0 transformers==5.24.0 accelerate==1.15.0 gguf==0.19.0 sentencepiece==0.2.3 protobuf==7.36.2}"
PEER_PIP_ARGS="${PEER_PIP_ARGS:-}"
PEERS=bench/peers
PY="${PYTHON:-python3}"
JOBS="${JOBS:-2}"

SRC="$PEERS/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
BUILD="$PEERS/llama-build-$LLAMA_CPP_PYTHON_VERSION"
LLAMA_TARGETS="${LLAMA_TARGETS:-llama-server llama-batched-bench llama-bench llama-lookup llama-speculative llama-embedding llama-quantize}"
mkdir -p "$PEERS/dl" "$PEERS/src"

if [ ! -d "$SRC/vendor/llama.cpp" ]; then
    SDIST="$PEERS/dl/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
    if [ ! -f "$SDIST" ]; then
        echo "compare: downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist"
        "$PY" -m pip download --quiet --no-binary :all: --no-deps \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$PEERS/dl"
    fi
    tar -xzf "$SDIST" -C "$PEERS/src"
fi

# No AMX: on the Xeons here (AMX-INT8 in a VM) this llama.cpp's AMX mul_mat
# segfaults in the first forward pass (llama-bench and llama-server alike), so
# it runs its AVX-512 VNNI kernels, as on the AMD machines; tram uses no AMX
# either.  The flags change nothing where the CPU has no AMX.  A build made
# with other flags (its stamp says) is made again.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
built=1
for t in $LLAMA_TARGETS; do [ -x "$BUILD/bin/$t" ] || built=0; done
[ "$(cat "$BUILD/.tram-flags" 2>/dev/null)" = "$NO_AMX" ] || built=0
if [ $built = 0 ]; then
    echo "compare: building $LLAMA_TARGETS (CPU, Release, native) with -j$JOBS"
    # No curl (models are local files), no shared libraries (the binaries run
    # from anywhere), no tests or examples beyond the targets.
    rm -rf "$BUILD"
    cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" \
        -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DGGML_CUDA=OFF \
        >"$PEERS/cmake-configure.log" 2>&1 || { cat "$PEERS/cmake-configure.log"; exit 1; }
    # shellcheck disable=SC2086
    cmake --build "$BUILD" -j "$JOBS" --target $LLAMA_TARGETS >"$PEERS/cmake-build.log" 2>&1 ||
        { tail -40 "$PEERS/cmake-build.log"; exit 1; }
    echo "$NO_AMX" >"$BUILD/.tram-flags"
fi

# The stamp names the packages it was made for: changing a pin reinstalls.
STAMP="$PEERS/venv/.installed"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$PEER_PIP_ARGS $PEER_PIP_PACKAGES" ]; then
    echo "compare: installing $PEER_PIP_PACKAGES into $PEERS/venv (torch is large: minutes)"
    [ -x "$PEERS/venv/bin/python" ] || "$PY" -m venv "$PEERS/venv"
    "$PEERS/venv/bin/python" -m pip install --quiet --upgrade pip
    # shellcheck disable=SC2086
    "$PEERS/venv/bin/python" -m pip install --quiet $PEER_PIP_ARGS $PEER_PIP_PACKAGES
    echo "$PEER_PIP_ARGS $PEER_PIP_PACKAGES" >"$STAMP"
fi
echo "compare: peers ready (llama.cpp from llama-cpp-python $LLAMA_CPP_PYTHON_VERSION, $PEERS/venv)"
