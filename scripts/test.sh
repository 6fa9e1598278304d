#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite under ctest.
#   scripts/test.sh              regular build in build/
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
extra=()
if [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR=build-asan
  extra=(-DLOADLAW_SANITIZE=ON)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
build=${BUILD_DIR:-build}
scripts/build.sh "${extra[@]}"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600
