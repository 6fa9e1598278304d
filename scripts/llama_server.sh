#!/usr/bin/env bash
# Build llama.cpp's llama-server for the interop tests, once per machine.
# Usage: scripts/llama_server.sh [--print]
#
# The llama.cpp tree comes from the llama-cpp-python source distribution on
# PyPI (it vendors the whole tree), pinned to LLAMA_PY_VERSION, so the build
# needs only PyPI and a C++ compiler: configured offline (no libcurl, no
# OpenSSL, no prebuilt web UI downloaded), CPU only, static. The binary is kept
# under $LOADLAW_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/loadlaw) in a
# folder named by the version, so only the first run on a machine pays the
# build (~15-25 min on 2 cores); later runs print the path at once.
# Prints the absolute path of llama-server on stdout; progress on stderr.
# Exit status: 0 built or cached, 77 cannot build here (no compiler/cmake or
# PyPI unreachable: the reason on stderr), 1 the build failed.
set -euo pipefail
version=${LLAMA_PY_VERSION:-0.3.36}
cache=${LOADLAW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loadlaw}
dir="$cache/llama-server-$version"
bin="$dir/bin/llama-server"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
[ "${1:-}" = "--print" ] && { echo "llama_server.sh: not built yet ($bin)" >&2; exit 77; }

skip() { echo "llama_server.sh: cannot build llama-server here: $*" >&2; exit 77; }
command -v cmake >/dev/null || skip "no cmake"
command -v c++ >/dev/null || command -v g++ >/dev/null || skip "no C++ compiler"
command -v python3 >/dev/null || skip "no python3"

mkdir -p "$cache"
# One build at a time per machine: a second caller waits for the first.
exec 9>"$cache/llama-server-$version.lock"
flock 9
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

work=$(mktemp -d "$cache/build-$version.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "llama_server.sh: downloading llama-cpp-python $version (source) from PyPI" >&2
python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$work" \
  "llama-cpp-python==$version" >&2 || skip "pip download llama-cpp-python==$version failed"
tar xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
[ -f "$src/tools/server/server.cpp" ] || { echo "llama_server.sh: no server source in the sdist" >&2; exit 1; }

jobs=$(nproc 2>/dev/null || echo 2)
echo "llama_server.sh: building llama-server ($jobs jobs; the first time only)" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TOOLS=ON -DGGML_CUDA=OFF -DGGML_NATIVE=ON >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log" >&2; echo "llama_server.sh: configure failed" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; echo "llama_server.sh: build failed" >&2; exit 1; }
mkdir -p "$dir/bin"
install -m 0755 "$work/build/bin/llama-server" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
