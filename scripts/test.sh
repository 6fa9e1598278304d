#!/usr/bin/env bash
# Install what is missing, check function sizes, build, and run the whole test suite under ctest.
#   scripts/test.sh              regular build in build/
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/
# A function over the size or complexity limits (scripts/complexity.sh) fails the run after
# the tests have run; when lizard cannot be installed the check is skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
complexity=0
scripts/complexity.sh || complexity=$?
case $complexity in
  0) ;;
  1) echo "test.sh: the functions marked FAIL above are over the limits: split them into named" \
          "steps, or say why one must stay whole in a 'complexity:' comment above it" >&2 ;;
  *) echo "test.sh: complexity check skipped (scripts/complexity.sh exited $complexity; its" \
          "reason is above)" >&2
     complexity=0 ;;
esac
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
# The interop label (real servers: llama.cpp built once per machine, vLLM
# installed once) runs on its own: scripts/interop.sh, which .ci/run calls after this.
ctest --output-on-failure -j"$(nproc)" --timeout 600 -LE interop
if [ "$complexity" -ne 0 ]; then
  echo "test.sh: tests passed, but the complexity check failed (see above)" >&2
  exit 1
fi
