#!/usr/bin/env bash
# Build and run the libFuzzer harnesses of tests/fuzz/ (docs/fuzzing.md).
#   scripts/fuzz.sh TARGET MINUTES   run one harness that long (sse, engine_request,
#                                    scenario, trace, records, tokenizer, prom, url)
#   scripts/fuzz.sh --ci             every harness for 20 s each; exit 1 on any crash
#   scripts/fuzz.sh --long SECONDS [TARGET...]
#                                    each harness (or those named) SECONDS long, then
#                                    merge what adds coverage into the committed corpus
#   scripts/fuzz.sh --list           the harness names
# Builds into FUZZ_BUILD_DIR (default build-fuzz/) with clang (FUZZ_CC, default
# clang). A run starts from the committed corpus tests/fuzz/corpus/TARGET but
# writes what it finds into a scratch corpus, FUZZ_BUILD_DIR/work/TARGET, and a
# crashing input into FUZZ_BUILD_DIR/work/TARGET/crash-*. Only --long writes to
# the committed corpus: it re-minimises it with libFuzzer's -merge=1 over the old
# and the new inputs (hand-written seeds always stay), so it grows only by what
# adds coverage; review and commit the change. Without clang or libFuzzer it says so and exits 0:
# fuzzing is optional where the compiler cannot do it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${FUZZ_CC:-clang}
ci_seconds=20

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }

targets() { ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||'; }

# Exit 0 with a reason when this machine cannot build libFuzzer harnesses
# (after installing Debian's clang and its libFuzzer runtime when they are
# missing and the default compiler is asked for).
need_libfuzzer() {
  if [ -z "${FUZZ_CC:-}" ]; then
    scripts/deps.sh --fuzz
  fi
  if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: skipped: $cc not found (libFuzzer needs clang; set FUZZ_CC)" >&2
    exit 0
  fi
  local tmp
  tmp=$(mktemp -d)
  printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
    >"$tmp/probe.c"
  if ! "$cc" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
    rm -rf "$tmp"
    echo "fuzz: skipped: $cc cannot link -fsanitize=fuzzer,address,undefined (libclang_rt.fuzzer missing?)" >&2
    exit 0
  fi
  rm -rf "$tmp"
}

build_targets() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CC="$cc" cmake -S . -B "$build" -DLOADLAW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
  fi
  cmake --build "$build" -j"$(nproc)" --target "$@" >&2
}

# run_one TARGET SECONDS: fuzz from the committed corpus into the scratch one;
# prints "TARGET execs exec/s cov ft seconds status" and returns libFuzzer's status.
run_one() {
  local t=$1 secs=$2 work="$build/work/$1" dict=tests/fuzz/json.dict log rc
  if [ -f "tests/fuzz/$t.dict" ]; then # a harness's own dictionary, else the JSON one
    dict="tests/fuzz/$t.dict"
  fi
  mkdir -p "$work"
  log="$work/fuzz.log"
  rc=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -dict="$dict" -artifact_prefix="$work/" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  local last execs speed cov ft took
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
  printf '%-16s %12s %10s %7s %7s %6s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" \
    "${ft:-?}" "${took:-$secs}" "$([ $rc -eq 0 ] && echo ok || echo "FAILED ($log)")"
  if [ $rc -ne 0 ]; then
    grep -E 'ERROR: |runtime error|property violated|Test unit written' "$log" | head -5 >&2 || true
  fi
  return $rc
}

# merge_one TARGET: re-minimise tests/fuzz/corpus/TARGET with libFuzzer's
# -merge=1 over the committed inputs and the scratch ones: the seeds written by
# hand (any name that is not a 40-hex content hash) always stay, and of the rest
# only a set that keeps every feature reached is kept. Prints "+added -removed".
merge_one() {
  local t=$1 work="$build/work/$1" dst="tests/fuzz/corpus/$1" tmp f added removed
  tmp=$(mktemp -d)
  mkdir "$tmp/keep" "$tmp/old"
  for f in "$dst"/*; do
    if [[ "$(basename "$f")" =~ ^[0-9a-f]{40}$ ]]; then cp "$f" "$tmp/old/"; else cp "$f" "$tmp/keep/"; fi
  done
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
    "$build/tests/fuzz/fuzz_$t" -merge=1 -timeout=10 -rss_limit_mb=2048 "$tmp/keep" "$tmp/old" "$work" \
    >"$work/merge.log" 2>&1 || { echo "fuzz: merge of $t failed ($work/merge.log)" >&2; rm -rf "$tmp"; return 1; }
  added=0
  removed=0
  for f in "$tmp/keep"/*; do
    [ -e "$dst/$(basename "$f")" ] || { cp "$f" "$dst/"; added=$((added + 1)); }
  done
  for f in "$dst"/*; do
    [ -e "$tmp/keep/$(basename "$f")" ] || { rm "$f"; removed=$((removed + 1)); }
  done
  rm -rf "$tmp"
  echo "+$added -$removed"
}

header() { printf '%-16s %12s %10s %7s %7s %6s  %s\n' target execs exec/s cov ft s status; }

case "${1:-}" in
  --list) targets; exit 0 ;;
  --ci)
    need_libfuzzer
    build_targets fuzz
    header
    failed=0
    for t in $(targets); do
      run_one "$t" "$ci_seconds" || failed=1
    done
    [ $failed -eq 0 ] || { echo "fuzz: a harness failed (inputs under $build/work/)" >&2; exit 1; }
    ;;
  --long)
    secs=${2:-}
    [[ "$secs" =~ ^[0-9]+$ ]] && [ "$secs" -ge 1 ] || { echo "fuzz: --long needs SECONDS (a whole number), got '$secs'" >&2; exit 2; }
    shift 2
    want=("$@")
    [ ${#want[@]} -gt 0 ] || mapfile -t want < <(targets)
    for t in "${want[@]}"; do
      [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz: no harness '$t' (have: $(targets | tr '\n' ' '))" >&2; exit 2; }
    done
    need_libfuzzer
    build_targets fuzz
    header
    failed=0
    added=()
    for t in "${want[@]}"; do
      if run_one "$t" "$secs"; then
        added+=("$t $(merge_one "$t" || echo 'merge failed')")
      else
        failed=1
      fi
    done
    echo "committed corpus (re-minimised, +added -removed): ${added[*]:-none}"
    [ $failed -eq 0 ] || { echo "fuzz: a harness failed (inputs under $build/work/)" >&2; exit 1; }
    ;;
  -h|--help) usage ;;
  "") usage >&2; exit 2 ;;
  *)
    t=$1
    minutes=${2:-}
    [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz: no harness '$t' (have: $(targets | tr '\n' ' '))" >&2; exit 2; }
    [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "fuzz: MINUTES must be a number, got '$minutes'" >&2; exit 2; }
    need_libfuzzer
    build_targets "fuzz_$t"
    secs=$(awk -v m="$minutes" 'BEGIN { s = int(m * 60 + 0.5); print s < 1 ? 1 : s }')
    header
    run_one "$t" "$secs"
    ;;
esac
