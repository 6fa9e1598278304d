#!/usr/bin/env bash
# bench/ab/bench_ab.sh: does an interleaved A/B survive a noisy machine where a
# sequential one does not? Two bundled synthetic engines of known laws,
# A = 52+30n and B = 52+10n ms (played at AB_TIME_SCALE), so the true
# throughput ratio B/A at concurrency C is exactly (52+30C)/(52+10C). Each
# order (sequential: all of A, then all of B; interleaved: per level A then B,
# --repeat AB_REPEAT in ABBA order) runs once on a quiet machine, to learn its
# length T, then again with a disturbance that this script starts at
# AB_HOG_AT*T and stops AB_HOG_FOR*T later (or when the sweep ends). It
# prints, per C, the true ratio and each run's estimate with its 95% interval
# (loadlaw compare --json: the step bootstrap for sequential, the paired
# interval for interleaved), and whether the interval covers the truth.
# Figures, not a pass/fail test: the disturbance and the machine's other
# tenants decide them.
#
# The disturbance (AB_HOG):
#  busy  one `nice -n AB_HOG_NICE` busy loop per core. The synthetic engine
#        sleeps its steps on a deadline chain from a real-time scheduler
#        thread (where the system grants it), so a busy loop only delays the
#        threads that write and read the tokens: stalls, which the step
#        bootstrap sees (its interval widens), more than a steady slowdown.
#  stop  the CPU taken from the sweep's process itself, as a busy neighbour
#        takes it from a compute-bound engine (the story's cpu kernels): the
#        script stops the process (SIGSTOP) for AB_STOP_MS of every
#        AB_PERIOD_MS and lets it run (SIGCONT) the rest. Every step that
#        straddles a stop is late, on both sides alike when both are under it.
#
# Knobs (environment): LOADLAW (binary; default build/loadlaw), AB_HOG (stop),
# AB_TIME_SCALE (0.01: steps of 0.6-5 ms), AB_LEVELS (1,2,4,8,16), AB_TOKENS
# (64), AB_REQUESTS (24), AB_REPEAT (3), AB_HOG_AT (0.4), AB_HOG_FOR (0.3;
# 1: to the end), AB_HOG_NICE (-5), AB_STOP_MS (4), AB_PERIOD_MS (10),
# AB_ROUNDS (3), AB_OUT (work dir; default a new /tmp/loadlaw-ab.*).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
LOADLAW=${LOADLAW:-$here/build/loadlaw}
[[ -x $LOADLAW ]] || { echo "bench_ab: no loadlaw binary at $LOADLAW (set LOADLAW=)" >&2; exit 2; }
HOG=${AB_HOG:-stop}
[[ $HOG == stop || $HOG == busy ]] || { echo "bench_ab: AB_HOG is stop or busy" >&2; exit 2; }
TS=${AB_TIME_SCALE:-0.01}
LEVELS=${AB_LEVELS:-1,2,4,8,16}
TOKENS=${AB_TOKENS:-64}
REQUESTS=${AB_REQUESTS:-24}
REPEAT=${AB_REPEAT:-3}
HOG_AT=${AB_HOG_AT:-0.4}
HOG_FOR=${AB_HOG_FOR:-0.3}
HOG_NICE=${AB_HOG_NICE:--5}
STOP_MS=${AB_STOP_MS:-4}
PERIOD_MS=${AB_PERIOD_MS:-10}
ROUNDS=${AB_ROUNDS:-3}
OUT=${AB_OUT:-$(mktemp -d /tmp/loadlaw-ab.XXXXXX)}
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "bench_ab: needs python3 (timing, compare --json)" >&2; exit 2; }

levels_json=$(echo "$LEVELS" | sed 's/\([0-9][0-9]*\)/{"concurrency":\1}/g')
cat >"$OUT/ab.json" <<JSON
{"name":"bench-ab","engine":"backend=synthetic,time_scale=$TS,seed=1",
 "request":{"max_tokens":$TOKENS,"think_tokens":0,"ignore_eos":true,"timeout_s":120},
 "prompts":{"source":"synthetic","words":{"dist":"fixed","value":20},"count":256},
 "load":{"drain_s":5,"requests":$REQUESTS},"levels":[$levels_json],
 "ab":{"a":{"name":"a30","engine":"law=52+30n"},"b":{"name":"b10","engine":"law=52+10n"}}}
JSON

# The busy loops of a disturbance still running: killed on any exit, so an
# interrupted benchmark leaves no core spinning.
hogs=()
trap 'for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

# disturb PID SECONDS: the chosen disturbance for SECONDS or until PID ends.
disturb() {
  local pid=$1 secs=$2
  if [[ $HOG == busy ]]; then
    local n; n=$(nproc)
    hogs=()
    for ((i = 0; i < n; i++)); do
      nice -n "$HOG_NICE" sh -c 'while :; do :; done' &
      hogs+=($!)
    done
    python3 - "$pid" "$secs" <<'PY'
import os, sys, time
pid, end = int(sys.argv[1]), time.time() + float(sys.argv[2])
while time.time() < end:
    try: os.kill(pid, 0)
    except OSError: break
    time.sleep(0.05)
PY
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
    hogs=()
  else
    python3 - "$pid" "$secs" "$STOP_MS" "$PERIOD_MS" <<'PY'
import os, signal, sys, time
pid, end = int(sys.argv[1]), time.time() + float(sys.argv[2])
stop_s, period_s = float(sys.argv[3]) / 1e3, float(sys.argv[4]) / 1e3
try:
    while time.time() < end:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stop_s)
        os.kill(pid, signal.SIGCONT)
        time.sleep(period_s - stop_s)
except OSError:
    pass
finally:
    try: os.kill(pid, signal.SIGCONT)
    except OSError: pass
PY
  fi
}

# run NAME ORDER HOG_AFTER_S HOG_FOR_S: one sweep (disturbed from HOG_AFTER_S
# for HOG_FOR_S; "" for none); prints its wall time in seconds.
run() {
  local name=$1 order=$2 after=$3 for_s=${4:-} extra=()
  [[ $order == interleaved ]] && extra=(--repeat "$REPEAT")
  local t0; t0=$(date +%s.%N)
  "$LOADLAW" sweep "$OUT/ab.json" -o "$OUT/$name" -q --no-report --gpu off --no-metrics \
    --order "$order" "${extra[@]}" >"$OUT/$name.out" 2>"$OUT/$name.err" &
  local pid=$!
  if [[ -n $after ]]; then
    sleep "$after"
    kill -0 "$pid" 2>/dev/null && disturb "$pid" "$for_s"
  fi
  wait "$pid" || { echo "bench_ab: $name failed (see $OUT/$name.err)" >&2; exit 1; }
  python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)"
}

# table NAME...: per C, the truth and each run's ratio [interval] and coverage.
table() {
  for name in "$@"; do
    "$LOADLAW" compare "$OUT/$name/a30" "$OUT/$name/b10" --json >"$OUT/$name.json"
  done
  python3 - "$OUT" "$@" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
runs = {n: {L["concurrency"]: L for L in json.load(open(f"{out}/{n}.json"))["levels"]} for n in names}
cs = sorted(set().union(*[set(r) for r in runs.values()]))
print("%4s %7s  " % ("C", "true") + "  ".join("%-30s" % n for n in names))
miss = {n: 0 for n in names}
for c in cs:
    truth = (52 + 30 * c) / (52 + 10 * c)
    cells = []
    for n in names:
        L = runs[n].get(c)
        if not L or L["ratio"] is None or L["ratio_ci"][0] is None:
            cells.append("%-30s" % "-")
            continue
        lo, hi = L["ratio_ci"]
        ok = lo <= truth <= hi
        miss[n] += not ok
        cells.append("%-30s" % ("%.3f [%.3f, %.3f] %s" % (L["ratio"], lo, hi, "covers" if ok else "MISSES")))
    print("%4d %7.3f  " % (c, truth) + "  ".join(cells))
print("levels whose interval misses the truth: " + ", ".join("%s %d/%d" % (n, miss[n], len(cs)) for n in names))
PY
}

if [[ $HOG == busy ]]; then what="$(nproc) x 'nice -n $HOG_NICE' busy loop"; else what="SIGSTOP ${STOP_MS} ms of every ${PERIOD_MS} ms"; fi
echo "bench_ab: A = 52+30n, B = 52+10n ms at time scale $TS, C = $LEVELS, $REQUESTS requests of $TOKENS tokens per level"
echo "bench_ab: disturbance: $what, from ${HOG_AT} of the run for ${HOG_FOR} of it; work dir $OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  tq_s=$(run "quiet-seq-$r" sequential "")
  tq_i=$(run "quiet-int-$r" interleaved "")
  at_s=$(python3 -c "print('%.1f' % ($HOG_AT * $tq_s))")
  at_i=$(python3 -c "print('%.1f' % ($HOG_AT * $tq_i))")
  for_s=$(python3 -c "print('%.1f' % ($HOG_FOR * $tq_s))")
  for_i=$(python3 -c "print('%.1f' % ($HOG_FOR * $tq_i))")
  t_s=$(run "hog-seq-$r" sequential "$at_s" "$for_s")
  t_i=$(run "hog-int-$r" interleaved "$at_i" "$for_i")
  echo
  echo "round $r: quiet sequential ${tq_s}s, quiet interleaved (R=$REPEAT) ${tq_i}s;" \
       "disturbed from ${at_s}s for ${for_s}s / from ${at_i}s for ${for_i}s: ${t_s}s / ${t_i}s"
  table "quiet-seq-$r" "quiet-int-$r" "hog-seq-$r" "hog-int-$r"
done
