#!/usr/bin/env bash
# bench/scale.sh [C,C,...]: how many concurrent streams `loadlaw serve` and `loadlaw sweep`, in
# separate processes on loopback, hold with 0 errors, and what each stream costs in memory.
#
# For each C (default 1024,4096,8192,16384) it starts a fresh `serve` (batch, queue and
# connection limits raised to C) and a fresh `sweep --url` of exactly C requests at concurrency C,
# with a law slow enough that every stream stays open for ~SCALE_TOKENS steps of SCALE_LAW ms
# (default 48 × 500 ms = 24 s), far longer than it takes to open them all. While it runs, it
# samples every 0.5 s both processes' VmRSS and VmHWM (/proc/PID/status) and the engine's
# loadlaw_running_requests gauge (a scrape that fails or times out is skipped and counted:
# "n samples, k missed" per C). It prints, per C: the peak gauge (it must reach C: proof that
# the C streams were open at once), the established connections counted by `ss` when the gauge
# first reached C, each process's RSS at the plateau (the largest sample while the gauge was C)
# and its VmHWM, and the errors. Then the memory per stream: the least-squares slope of plateau
# RSS (and of VmHWM, which also catches what grows as streams end) against C for each process,
# in KB per stream (a slope, so fixed costs such as the binary, the allocator's arenas and the
# thread stacks drop out).
# Exit 0 when every level had 0 errors and reached C, 1 otherwise, 2 when a C cannot fit the
# hard open-file limit (said before anything starts).
#
# Knobs (environment): LOADLAW (binary; default build/loadlaw, then /tmp/build-bench/loadlaw),
# SCALE_LAW ("500+0n" ms), SCALE_TOKENS (48), SCALE_PROMPT_TOKENS (16), SCALE_THREADS (sweep
# --threads; default: sweep's own), SCALE_OUT (work dir; default a new /tmp/loadlaw-scale.*).
set -euo pipefail

LEVELS=${1:-1024,4096,8192,16384}
[[ $LEVELS =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "usage: bench/scale.sh [C,C,...]" >&2; exit 2; }
IFS=, read -r -a CS <<<"$LEVELS"
here=$(cd "$(dirname "$0")/.." && pwd)
LOADLAW=${LOADLAW:-}
if [[ -z $LOADLAW ]]; then
  for c in "$here/build/loadlaw" /tmp/build-bench/loadlaw; do [[ -x $c ]] && LOADLAW=$c && break; done
fi
[[ -n $LOADLAW && -x $LOADLAW ]] || { echo "scale: no loadlaw binary (set LOADLAW=)" >&2; exit 2; }
LAW=${SCALE_LAW:-500+0n}
TOKENS=${SCALE_TOKENS:-48}
PROMPT=${SCALE_PROMPT_TOKENS:-16}
THREADS=${SCALE_THREADS:-}
OUT=${SCALE_OUT:-$(mktemp -d /tmp/loadlaw-scale.XXXXXX)}
mkdir -p "$OUT"

# Each process holds one socket per stream plus its own files (listener, epoll, records, curl's
# internals). `sweep` keeps 256 spare (SWEEP_FD_SPARE in cli/) and refuses a C that does not fit;
# say so here, for every level, before anything starts rather than fail mid-run.
HARD=$(ulimit -Hn)
SLACK=256
for C in "${CS[@]}"; do
  if [[ $HARD != unlimited ]] && (( C + SLACK > HARD )); then
    echo "scale: C=$C cannot fit: each process needs C + $SLACK descriptors and the hard open-file" \
         "limit is $HARD (largest C here: $((HARD - SLACK))); nothing was run" >&2
    exit 2
  fi
done
ulimit -n "$HARD"

serve_pid='' sweep_pid='' sampler_pid=''
cleanup() {
  for p in $sampler_pid $sweep_pid $serve_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

status_kb() { awk -v k="$2:" '$1 == k { print $2; f = 1 } END { if (!f) print "NA" }' "/proc/$1/status" 2>/dev/null || echo NA; }

printf 'C\tpeak_running\testab_at_peak\tserve_rss_kb\tserve_hwm_kb\tsweep_rss_kb\tsweep_hwm_kb\tsent\tok\tfailed\twall_s\n' \
  >"$OUT/levels.tsv"
status=0
for C in "${CS[@]}"; do
  d=$OUT/c$C
  rm -rf "$d"
  mkdir -p "$d"
  "$LOADLAW" serve --port 0 --law "$LAW" --max-running "$C" --max-waiting "$C" \
    --max-connections $((C + 64)) --prefill-budget $((C * (PROMPT + 64))) \
    >"$d/serve.out" 2>"$d/serve.err" &
  serve_pid=$!
  url=
  for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.]*:[0-9]*' "$d/serve.out" 2>/dev/null | head -1 || true)
    [[ -n $url ]] && break
    sleep 0.1
  done
  [[ -n $url ]] || { echo "scale: serve did not start" >&2; cat "$d/serve.err" >&2; exit 1; }
  port=${url##*:}
  t0=$(date +%s.%N)
  "$LOADLAW" sweep --url "$url" --model loadlaw-synthetic -c "$C" -n "$C" --max-tokens "$TOKENS" \
    --prompt-tokens "$PROMPT" ${THREADS:+--threads "$THREADS"} --no-report -q -o "$d/run" \
    >"$d/sweep.out" 2>"$d/sweep.err" &
  sweep_pid=$!
  # The sampler: one line per 0.5 s; the first time the gauge reads C it also counts the
  # established server-side sockets, so the proof of concurrency does not rest on the gauge alone.
  # A scrape that fails or times out (a server busy with C streams may not answer in 2 s) is
  # not a sample: it is skipped and counted, and the level's figures come from the samples that
  # worked ("n samples, k missed" in $d/sampler.txt and on stdout). The subshell inherits
  # `set -e` and pipefail, so every command here that may fail is tested explicitly.
  (
    counted=0 n_ok=0 n_missed=0
    while kill -0 "$sweep_pid" 2>/dev/null; do
      if ! metrics=$(curl -sf --max-time 2 "$url/metrics"); then
        n_missed=$((n_missed + 1))
        sleep 0.5
        continue
      fi
      run=$(awk '$1 == "loadlaw_running_requests" { print $2 }' <<<"$metrics") || run=
      est=-
      if [[ $counted == 0 && ${run:-0} -ge $C ]]; then
        est=$(ss -Htn state established "( sport = :$port )" | wc -l) || est=NA
        counted=1
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%s.%N)" "${run:-NA}" "$est" \
        "$(status_kb "$serve_pid" VmRSS)" "$(status_kb "$serve_pid" VmHWM)" \
        "$(status_kb "$sweep_pid" VmRSS)" "$(status_kb "$sweep_pid" VmHWM)"
      n_ok=$((n_ok + 1))
      sleep 0.5
    done
    echo "$n_ok $n_missed" >"$d/sampler.txt"
  ) >"$d/samples.tsv" &
  sampler_pid=$!
  sweep_rc=0
  wait "$sweep_pid" || sweep_rc=$?
  sweep_pid=
  wait "$sampler_pid" || true
  sampler_pid=
  read -r n_samples n_missed <"$d/sampler.txt" 2>/dev/null || { n_samples=NA n_missed=NA; }
  echo "scale: C=$C: $n_samples samples, $n_missed missed (scrapes of /metrics that failed or timed out)"
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  kill "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=
  read -r sent ok failed < <(python3 - "$d/run/summary.json" <<'EOF' 2>/dev/null || echo "NA NA NA"
import json, sys
l = json.load(open(sys.argv[1]))["levels"][0]
print(l["sent"], l["ok"], l["failed"])
EOF
  )
  # Plateau: samples where the gauge reads C; RSS there is the memory of C open streams.
  line=$(awk -F'\t' -v C="$C" -v sent="$sent" -v ok="$ok" -v failed="$failed" -v wall="$wall" '
    { if ($2 != "NA" && $2 + 0 > pk) pk = $2 + 0
      if ($3 != "-" && $3 != "") est = $3
      if ($2 + 0 >= C) { if ($4 + 0 > srss) srss = $4 + 0; if ($6 + 0 > crss) crss = $6 + 0 }
      if ($5 != "NA") shwm = $5; if ($7 != "NA") chwm = $7 }
    END { printf "%d\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s", C, pk, est == "" ? "NA" : est,
          srss, shwm, crss, chwm, sent, ok, failed, wall }' "$d/samples.tsv")
  printf '%s\n' "$line" >>"$OUT/levels.tsv"
  read -r _ pk _ srss _ _ _ _ ok failed _ <<<"$line"
  if [[ $sweep_rc != 0 || $failed != 0 || $ok != "$C" || $pk -lt $C || $srss == 0 ]]; then
    echo "scale: C=$C: sweep exit $sweep_rc, ok $ok, failed $failed, peak running $pk (see $d)" >&2
    status=1
  fi
done

echo "scale: serve + sweep on loopback, law $LAW ms, $TOKENS tokens, $PROMPT-token prompts ($OUT)"
awk -F'\t' '
NR == 1 { next }
{ m++; line[m] = $0; if ($10 != "0" || $9 != $1 || $2 < $1) { bad++; next }
  n++; C[n] = $1; Y[0, n] = $4; Y[1, n] = $6; Y[2, n] = $5; Y[3, n] = $7 }
END {
  printf "%7s %9s %9s %13s %13s %13s %13s %6s %7s %8s\n", "C", "running", "estab", "serve RSS KB",
    "serve HWM KB", "sweep RSS KB", "sweep HWM KB", "ok", "failed", "wall s"
  for (i = 1; i <= m; i++) { split(line[i], f, "\t")
    printf "%7d %9d %9s %13d %13s %13d %13s %6s %7s %8s\n", f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[9], f[10], f[11] }
  if (n < 2) exit
  split("server (serve) plateau RSS|client (sweep) plateau RSS|server (serve) VmHWM|client (sweep) VmHWM", what, "|")
  for (p = 0; p < 4; p++) {
    sx = sy = sxx = sxy = 0
    for (i = 1; i <= n; i++) { y = Y[p, i]; sx += C[i]; sy += y; sxx += C[i] * C[i]; sxy += C[i] * y }
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n
    printf "%-27s per stream: %6.2f KB/stream (= %.0f KB + %.2f KB x C, least squares over %d levels%s)\n",
      what[p + 1], b, a, b, n, bad ? ", failed levels left out" : ""
  }
}' "$OUT/levels.tsv" | tee "$OUT/result.txt"
exit "$status"
