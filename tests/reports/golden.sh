#!/bin/sh
# golden.sh BUILD_DIR RUNS_DIR OUT_DIR: every output loadlaw derives from
# recorded runs, written to OUT_DIR, so that a restructuring can be checked
# byte for byte: run it before the change and after, then `diff -r`.
#
# RUNS_DIR holds run folders (records.jsonl each; an A/B folder's sides count
# as runs). For each run: fit (text, --json, --n server), plan (text, --json),
# report.html and summary.json written again; then compare of every pair of
# runs in name order (text and --json). Nothing here depends on the clock: the
# outputs are functions of the records alone.
set -u
build=${1:?usage: golden.sh BUILD_DIR RUNS_DIR OUT_DIR}
runs=${2:?usage: golden.sh BUILD_DIR RUNS_DIR OUT_DIR}
out=${3:?usage: golden.sh BUILD_DIR RUNS_DIR OUT_DIR}
ll=$(cd "$build" && pwd)/loadlaw
summ=$(cd "$build" && pwd)/tests/reports/golden_summary
mkdir -p "$out/.work"
out=$(cd "$out" && pwd)
runs=$(cd "$runs" && pwd)
# Runs are named by their path under RUNS_DIR and read from the scratch
# folder by that name, so no output holds a path that differs between runs.
cd "$out/.work" || exit 1
dirs=$(find "$runs" -name records.jsonl -printf '%h\n' | sort)
for d in $dirs; do
  name=$(echo "${d#"$runs"/}" | tr / _)
  work=$name
  rm -rf "$work" && mkdir -p "$work" && cp "$d"/records.jsonl "$work"/
  for args in "" "--json" "--n server" "--json --n server"; do
    tag=$(echo "fit $args" | tr ' ' _ | tr -s _)
    # shellcheck disable=SC2086
    "$ll" fit "$work" $args >"$out/$name.$tag.out" 2>&1
    echo "rc=$?" >>"$out/$name.$tag.out"
  done
  for args in "" "--json"; do
    tag=$(echo "plan $args" | tr ' ' _ | tr -s _)
    # shellcheck disable=SC2086
    "$ll" plan "$work" $args >"$out/$name.$tag.out" 2>&1
    echo "rc=$?" >>"$out/$name.$tag.out"
  done
  "$ll" report "$work" >"$out/$name.report.out" 2>&1
  echo "rc=$?" >>"$out/$name.report.out"
  cp "$work/report.html" "$out/$name.report.html" 2>/dev/null
  "$summ" "$work" >"$out/$name.summary.out" 2>&1
  echo "rc=$?" >>"$out/$name.summary.out"
  cp "$work/summary.json" "$out/$name.summary.json" 2>/dev/null
done
for a in $dirs; do
  for b in $dirs; do
    [ "$a" \< "$b" ] || continue
    na=$(echo "${a#"$runs"/}" | tr / _)
    nb=$(echo "${b#"$runs"/}" | tr / _)
    for args in "" "--json" "--expect-same-outputs 0.99 --json"; do
      tag=$(echo "compare $args" | tr ' ' _ | tr -s _)
      # shellcheck disable=SC2086
      "$ll" compare "$na" "$nb" $args >"$out/$na.$nb.$tag.out" 2>&1
      echo "rc=$?" >>"$out/$na.$nb.$tag.out"
    done
  done
done
cd "$out" && rm -rf .work
