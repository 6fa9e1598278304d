#!/usr/bin/env bash
# The cpu backend's kernel A/B, kept for old instructions: it is now one
# command, `loadlaw sweep scenarios/kernel-ab.json -o OUT_DIR`, whose "ab"
# section runs the sweep on attn=naive (OUT_DIR/naive) and attn=tiled
# (OUT_DIR/tiled), prints each side's C=16 trace breakdown and compares them
# (OUT_DIR/compare.html). Exit status: the sweep's (3 when tiled misses the
# scenario's expect_speedup).
#
#   LOADLAW=build/loadlaw bench/cpu/kernel_ab.sh [OUT_DIR] [extra `loadlaw sweep` flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${LOADLAW:-build/loadlaw}
out=${1:-runs/kernel-ab-$(date +%Y%m%d-%H%M%S)} # a sweep refuses a folder that holds a run
shift || true
exec "$bin" sweep scenarios/kernel-ab.json -o "$out" -q "$@"
