#!/usr/bin/env bash
# Build loadlaw if needed and run the interop tests: ctest label "interop",
# loadlaw against llama.cpp's llama-server and vLLM's CPU backend
# (tests/interop/, docs/interop.md).
#   scripts/interop.sh            in BUILD_DIR (default build/); extra arguments go to ctest
# A build folder not configured yet is configured and built whole (scripts/build.sh);
# one that is gets configured again (tests/CMakeLists.txt finds the test folders at
# configure time) and only loadlaw is brought up to date. The first run on a machine
# also builds llama-server (scripts/llama_server.sh: ~20-30 min on 2 cores) and
# installs vLLM into a virtual environment (scripts/vllm_env.sh: ~3 min and 6.3 GB
# with a fast PyPI), both kept under ${LOADLAW_CACHE:-~/.cache/loadlaw}.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test --interop
build=${BUILD_DIR:-build}
if [ -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
  cmake --build "$build" --target loadlaw -j"$(nproc)"
else
  scripts/build.sh
fi
cd "$build"
if ! ctest -N -L interop | grep -q 'Total Tests: [1-9]'; then
  echo "interop.sh: no tests labelled interop in $build" >&2
  exit 1
fi
ctest -L interop --output-on-failure "$@"
