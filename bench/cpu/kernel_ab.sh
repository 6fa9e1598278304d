#!/usr/bin/env bash
# The cpu backend's kernel A/B in one command: the same sweep
# (scenarios/kernel-ab.json) on attn=naive (A) and attn=tiled (B), then
# `loadlaw compare A B` (per-level speedups with intervals, both laws, slope
# ratio), after the kernel breakdown of each run's C=16 profiler trace.
#
#   bench/cpu/kernel_ab.sh [OUT_DIR] [extra `loadlaw sweep` flags...]
#   LOADLAW=build/loadlaw THREADS=2 bench/cpu/kernel_ab.sh runs/kernel-ab
#
# Exit status: compare's (0 ok, 3 when an --expect-speedup gate in
# COMPARE_ARGS is missed), or the first failing sweep's.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${LOADLAW:-build/loadlaw}
out=${1:-runs/kernel-ab}
shift || true
spec="backend=cpu,heads=${HEADS:-64},topk=${TOPK:-2048},threads=${THREADS:-2},seed=1"
"$bin" sweep scenarios/kernel-ab.json --engine "$spec,attn=naive" -o "$out/naive" -q "$@"
"$bin" sweep scenarios/kernel-ab.json --engine "$spec,attn=tiled" -o "$out/tiled" -q "$@"
# attention's share of the step in each run's C=16 profiler trace
for run in naive tiled; do
  trace=$(grep -o 'path\\":\\"[^\\]*' "$out/$run/records.jsonl" | sed 's/^path\\":\\"//' | tail -n 1 || true)
  if [ -n "$trace" ] && [ -f "$trace" ]; then
    echo "== $run: loadlaw trace $trace"
    "$bin" trace "$trace" | sed -n '3,7p'
  fi
done
# shellcheck disable=SC2086
"$bin" compare "$out/naive" "$out/tiled" ${COMPARE_ARGS:-}
