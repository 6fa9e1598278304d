#!/usr/bin/env bash
# Configure and build into BUILD_DIR (default build/). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log" >&2; exit 1; }
grep -E '^-- (loadlaw|  )' "$build.configure.log" | sed 's/^-- //' >&2 || true
cmake --build "$build" -j"$(nproc)"
