#!/usr/bin/env bash
# bench/soak.sh MINUTES [OUT_DIR]: the engine (`loadlaw serve`) under an open-loop load at a
# fixed rate (`loadlaw sweep --url ... --rate R --duration MINUTES`) in separate processes on
# loopback, for as long as asked. Every SOAK_EVERY_S seconds it samples both processes' VmRSS
# (/proc/PID/status) and the engine's /metrics (step-time histogram sum and count, running
# requests). At the end it prints, from those samples alone:
#   - each process's RSS slope after warm-up (least squares over the samples after the first
#     quarter, KB/min), with the RSS at the end of warm-up and at the end;
#   - the error count (the sweep's summary.json: failed, by class, plus requests the engine
#     counted as rejected);
#   - the step-time median in the first and last quarter (each sample contributes the mean step
#     time of its interval, Δsum/Δcount of loadlaw_step_duration_seconds);
#   - the server's RSS growth per step after warm-up (least squares of RSS against the step
#     count): while the step log has not wrapped, that is the log's bytes per step;
#   - the client's RSS at each of SOAK_PHASES finished requests (the engine's count) and its
#     growth per request between them, so a bound shows as a slope that falls to ~0.
# Exit 0 when no request failed, 1 when any did (or a process died), 2 for a usage error.
# Figures only: no pass/fail on the slopes or the step times.
#
# Knobs (environment): LOADLAW (binary; default build/loadlaw, then /tmp/build-bench/loadlaw),
# SOAK_RATE requests/s (20), SOAK_LAW ("5+0.1n"), SOAK_MAX_TOKENS (64), SOAK_PORT (0 =
# ephemeral), SOAK_EVERY_S (5), SOAK_THREADS (sweep --threads, 1), SOAK_SERVE_ARGS (more `serve`
# options, split on spaces, e.g. "--step-log-max 10k": the step log is a ring of step_log_max
# steps that fills at ~175 steps/s here, so until it wraps the server's RSS grows 56 B a step by
# design; a small ring shows the flat line within a short soak), SOAK_PHASES (finished requests
# at which the client's RSS is read, "10000,50000,100000"; to reach them in minutes raise the
# rate with a short law and few tokens, e.g. SOAK_RATE=500 SOAK_LAW=1+0.001n SOAK_MAX_TOKENS=8).
# The default load keeps ~8 sequences in the batch (Little: 20/s × 64 steps × ~5.8 ms) and
# ~1,300 token events/s, so a 2-core machine shared with other work can hold it for hours.
set -euo pipefail

usage() { echo "usage: bench/soak.sh MINUTES [OUT_DIR]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
[[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]] || usage
MINUTES=$1
OUT=${2:-$(mktemp -d /tmp/loadlaw-soak.XXXXXX)}
mkdir -p "$OUT"

here=$(cd "$(dirname "$0")/.." && pwd)
LOADLAW=${LOADLAW:-}
if [[ -z $LOADLAW ]]; then
  for c in "$here/build/loadlaw" /tmp/build-bench/loadlaw; do [[ -x $c ]] && LOADLAW=$c && break; done
fi
[[ -n $LOADLAW && -x $LOADLAW ]] || { echo "soak: no loadlaw binary (set LOADLAW=)" >&2; exit 2; }
RATE=${SOAK_RATE:-20}
LAW=${SOAK_LAW:-5+0.1n}
MAXTOK=${SOAK_MAX_TOKENS:-64}
PORT=${SOAK_PORT:-0}
EVERY=${SOAK_EVERY_S:-5}
THREADS=${SOAK_THREADS:-1}
PHASES=${SOAK_PHASES:-10000,50000,100000}
[[ $PHASES =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "soak: SOAK_PHASES: counts separated by commas" >&2; exit 2; }
DURATION_S=$(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }')
(( DURATION_S >= 4 * EVERY )) || { echo "soak: MINUTES too short for 4 samples" >&2; exit 2; }

serve_pid='' sweep_pid=''
cleanup() {
  [[ -n $sweep_pid ]] && kill "$sweep_pid" 2>/dev/null || true
  [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2086
"$LOADLAW" serve --port "$PORT" --law "$LAW" ${SOAK_SERVE_ARGS:-} >"$OUT/serve.out" 2>"$OUT/serve.err" &
serve_pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$OUT/serve.out" 2>/dev/null | head -1 || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { echo "soak: serve did not print its URL" >&2; cat "$OUT/serve.err" >&2; exit 1; }

# Open loop: arrivals do not wait for answers, so a slower engine shows as a growing batch and
# growing step times, not as a lower request rate.
"$LOADLAW" sweep --url "$url" --model loadlaw-synthetic --rate "$RATE" --duration "${DURATION_S}s" --max-tokens "$MAXTOK" \
  --threads "$THREADS" --no-report -q -o "$OUT/run" >"$OUT/sweep.out" 2>"$OUT/sweep.err" &
sweep_pid=$!

echo "soak: $MINUTES min, $RATE req/s open loop, law $LAW ms, max_tokens $MAXTOK, $url," \
     "serve pid $serve_pid, sweep pid $sweep_pid, samples every ${EVERY}s in $OUT/samples.tsv" >&2

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo NA; }
metric() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "NA" }'; }

printf 't_s\tserve_rss_kb\tsweep_rss_kb\tsteps\tstep_sum_s\trunning\tfinished\n' >"$OUT/samples.tsv"
t0=$(date +%s.%N)
while kill -0 "$sweep_pid" 2>/dev/null; do
  m=$(curl -s --max-time 2 "$url/metrics" || true)
  t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$(rss_kb "$serve_pid")" "$(rss_kb "$sweep_pid")" \
    "$(metric loadlaw_step_duration_seconds_count <<<"$m")" \
    "$(metric loadlaw_step_duration_seconds_sum <<<"$m")" \
    "$(metric loadlaw_running_requests <<<"$m")" \
    "$(metric 'loadlaw_requests_total{outcome="finished"}' <<<"$m")" >>"$OUT/samples.tsv"
  sleep "$EVERY"
done
sweep_rc=0
wait "$sweep_pid" || sweep_rc=$?
sweep_pid=
final=$(curl -s --max-time 2 "$url/metrics" || true)
rejected=$(metric 'loadlaw_requests_total{outcome="rejected"}' <<<"$final")
cancelled=$(metric 'loadlaw_requests_total{outcome="cancelled"}' <<<"$final")
serve_alive=1
kill -0 "$serve_pid" 2>/dev/null || serve_alive=0

summary=$OUT/run/summary.json
read -r sent ok failed by_class < <(python3 - "$summary" <<'EOF' 2>/dev/null || echo "NA NA NA NA"
import json, sys
s = json.load(open(sys.argv[1]))
lv = s["levels"]
by = {}
for l in lv:
    for k, v in l.get("failed_by_class", {}).items():
        by[k] = by.get(k, 0) + v
print(sum(l["sent"] for l in lv), sum(l["ok"] for l in lv), sum(l["failed"] for l in lv),
      ",".join(f"{k}={v}" for k, v in by.items() if v) or "-")
EOF
)

# Warm-up is the first quarter of the run: the allocator's arenas, the records writer's buffers
# and the connection pool reach their working size there; growth after it is what a leak looks like.
# Samples after the sweep stopped issuing are left out: there it drains and then loads its records
# for the summary's fit, a one-off peak that is not the steady state.
awk -F'\t' -v rej="$rejected" -v canc="$cancelled" -v sent="$sent" -v ok="$ok" -v failed="$failed" \
    -v by="$by_class" -v rc="$sweep_rc" -v dur="$DURATION_S" '
function slope(col,   i, n, sx, sy, sxx, sxy, x, y) {
  n = 0; sx = sy = sxx = sxy = 0
  for (i = w; i <= N; i++) { x = T[i] / 60; y = V[col, i]; if (y == "NA") continue
    n++; sx += x; sy += y; sxx += x * x; sxy += x * y }
  return n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0
}
function median(a, n,   i, j, t) {
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return n == 0 ? "NA" : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
}
NR > 1 && $1 <= dur { N++; T[N] = $1; V[2, N] = $2; V[3, N] = $3; C[N] = $4; S[N] = $5; R[N] = $6 }
END {
  w = int(N / 4) + 1
  printf "samples %d over %.1f min; warm-up = first quarter (%.1f min)\n", N, T[N] / 60, T[w] / 60
  printf "%-6s %14s %14s %16s\n", "proc", "RSS@warm KB", "RSS@end KB", "slope KB/min"
  printf "%-6s %14s %14s %16.2f\n", "serve", V[2, w], V[2, N], slope(2)
  printf "%-6s %14s %14s %16.2f\n", "sweep", V[3, w], V[3, N], slope(3)
  q = int(N / 4); if (q < 1) q = 1
  n1 = n4 = 0; rmax = 0
  for (i = 2; i <= N; i++) {
    if (R[i] != "NA" && R[i] + 0 > rmax) rmax = R[i] + 0
    dc = C[i] - C[i - 1]; if (dc <= 0 || C[i] == "NA" || C[i - 1] == "NA") continue
    ms = (S[i] - S[i - 1]) / dc * 1000
    if (i <= q + 1) A1[++n1] = ms
    if (i > N - q) A4[++n4] = ms
  }
  printf "step time median (per-interval mean, ms): first quarter %.3f (%d samples), last quarter %.3f (%d samples); ratio last/first %.3f\n",
    median(A1, n1), n1, median(A4, n4), n4, (n1 && n4) ? median(A4, n4) / median(A1, n1) : 0
  printf "steps %d, running requests max %d\n", C[N], rmax
  printf "requests: sent %s ok %s failed %s (%s); engine rejected %s cancelled %s; sweep exit %s\n",
    sent, ok, failed, by, rej, canc, rc
}' "$OUT/samples.tsv" | tee "$OUT/result.txt"

# Memory per unit of work, from the same samples. The server: RSS (KB) against the step count
# after warm-up, in bytes per step; the step log (one eng_step per step, a ring of
# --step-log-max) is what grows with steps, so until the ring wraps this is its record size
# plus noise, and ~0 after. The client: its RSS at the first sample past each phase's count of
# finished requests (the engine's counter: the client's own count is only in its records), and
# the bytes per request between consecutive phases (from the first sample to the first phase,
# which includes the start-up: the later phases are the slope).
awk -F'\t' -v phases="$PHASES" -v dur="$DURATION_S" '
NR > 1 && $1 <= dur && $4 != "NA" && $2 != "NA" && $3 != "NA" && $7 != "NA" {
  N++; S[N] = $4 + 0; SR[N] = $2 * 1024; CR[N] = $3 * 1024; F[N] = $7 + 0 }
END {
  if (N < 4) { print "memory per step / per request: too few samples"; exit }
  w = int(N / 4) + 1; n = 0; sx = sy = sxx = sxy = 0
  for (i = w; i <= N; i++) { n++; sx += S[i]; sy += SR[i]; sxx += S[i] * S[i]; sxy += S[i] * SR[i] }
  d = n * sxx - sx * sx
  printf "server RSS per step after warm-up: %.1f B/step over %d steps (%d samples; the step log until it wraps)\n",
    (d > 0 ? (n * sxy - sx * sy) / d : 0), S[N] - S[w], n
  k = split(phases, P, ","); pf = F[1]; pr = CR[1]; pl = "the first sample"
  printf "client RSS: %.1f MB at the first sample (%d requests)\n", CR[1] / 1048576, F[1]
  for (j = 1; j <= k; j++) {
    for (i = 1; i <= N && F[i] < P[j] + 0; i++) ;
    if (i > N) { printf "client RSS: phase %d requests not reached (%d finished)\n", P[j], F[N]; break }
    printf "client RSS: %.1f MB at %d requests: %+.1f B/request since %s (%d requests)\n", CR[i] / 1048576,
      F[i], (F[i] > pf ? (CR[i] - pr) / (F[i] - pf) : 0), pl, F[i] - pf
    pf = F[i]; pr = CR[i]; pl = P[j] " requests"
  }
}' "$OUT/samples.tsv" | tee -a "$OUT/result.txt"

if [[ $serve_alive != 1 ]]; then echo "soak: FAIL: serve died" >&2; exit 1; fi
if [[ $sweep_rc != 0 || $failed != 0 || ( $rejected != NA && $rejected != 0 ) ]]; then
  echo "soak: FAIL: errors (sweep exit $sweep_rc, failed $failed, rejected $rejected)" >&2
  exit 1
fi
echo "soak: ok, 0 errors ($OUT)" >&2
