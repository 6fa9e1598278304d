#!/usr/bin/env bash
# bench/records/records.sh [BUILD_DIR]: what a run's records cost as it grows. Prints figures;
# never pass/fail.
#
# (a) Synthetic: for each N in REC_EVENTS (default "1e7 1e8"), gen_records writes a run of N
#     token events through the records writer (streamed to disk, deleted afterwards), then
#     `loadlaw fit --json` reads it under GNU time: records bytes per event, fit's peak RSS, fit's
#     CPU (user+sys) per event. REC_FIT_MEM_KB (default 8000000) caps fit's address space
#     (ulimit -v) so a fit that would need more fails instead of pushing a shared machine into
#     swap or the OOM killer; such a fit is printed as "over the cap".
# (b) Live: one `loadlaw serve --law 0+0n` (zero compute: one character an event) on CPU 0 and
#     `loadlaw sweep --url` with C = REC_C (256) streams of REC_TOKENS (1000) tokens for
#     REC_LIVE_S (60) seconds on CPU 1: records bytes per token event (the level_end's
#     client.events) and `loadlaw fit --json` of that run as in (a); then the bytes for the default
#     bundled sweep (52+30n, `loadlaw sweep`); each also rewritten in the list form of older files
#     (`loadlaw records expand`) for the before.
#
# Knobs: REC_EVENTS (1e9 needs ~6 GB of disk under REC_DIR), REC_FIT_MEM_KB, REC_C, REC_TOKENS, REC_LIVE_S, REC_DIR (default a
# mktemp folder under /tmp; mind its free space: ~6 bytes an event), REC_SKIP_LIVE=1.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$here/build}
LL=$B/loadlaw GEN=$B/bench/records/gen_records
for x in "$LL" "$GEN"; do
  [[ -x $x ]] || { echo "records: missing $x (build loadlaw gen_records)" >&2; exit 2; }
done
EVENTS=${REC_EVENTS:-1e7 1e8} MEM_KB=${REC_FIT_MEM_KB:-8000000}
C=${REC_C:-256} TOK=${REC_TOKENS:-1000} LIVE_S=${REC_LIVE_S:-60}
[[ -x /usr/bin/time ]] || { echo "records: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
# A folder of our own is removed at exit; REC_DIR, the user's, only loses what we wrote there.
if [[ -n ${REC_DIR:-} ]]; then
  TMP=$REC_DIR own=0
  mkdir -p "$TMP"
else
  TMP=$(mktemp -d /tmp/loadlaw-records.XXXXXX) own=1
fi
serve_pid=
stop_serve() { [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true; serve_pid=; }
cleanup() {
  stop_serve
  if [[ $own = 1 ]]; then rm -rf "$TMP"; else rm -rf "$TMP"/{syn,live,live-list,default,default-list,time,fit.err,serve.err,serve.out,sweep.err}; fi
}
trap cleanup EXIT

# GNU time's -f: peak RSS (KB), user and system seconds.
field() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) if ($i ~ "^" k "=") { sub(k "=", "", $i); print $i } }' "$2"; }

# fit_cost DIR EVENTS LABEL: `loadlaw fit DIR --json` under GNU time (address space capped at
# MEM_KB): one row of records bytes per event, fit peak RSS and CPU per event.
fit_cost() {
  local dir=$1 ev=$2 label=$3 bytes
  bytes=$(stat -c %s "$dir/records.jsonl")
  if (ulimit -v "$MEM_KB"; /usr/bin/time -f 'rss=%M user=%U sys=%S' -o "$TMP/time" "$LL" fit "$dir" --json \
      >/dev/null 2>"$TMP/fit.err"); then
    local rss u s
    rss=$(field rss "$TMP/time") u=$(field user "$TMP/time") s=$(field sys "$TMP/time")
    awk -v l="$label" -v ev="$ev" -v b="$bytes" -v rss="$rss" -v u="$u" -v s="$s" 'BEGIN {
      printf "%-10s %12d %10.2f %12.0f %14.0f %14.3f %10.1f\n", l, ev, b / ev, b / 1e6, rss / 1024, (u + s) * 1e6 / ev, u + s }'
  else
    awk -v l="$label" -v ev="$ev" -v b="$bytes" -v cap="$MEM_KB" 'BEGIN {
      printf "%-10s %12d %10.2f %12.0f %14s %14s %10s   (fit over the %.0f MB cap)\n", l, ev, b / ev, b / 1e6, "over cap", "-", "-", cap / 1024 }'
    tail -2 "$TMP/fit.err" >&2
  fi
}
header() { printf '%-10s %12s %10s %12s %14s %14s %10s\n' run events bytes/ev "records MB" "fit peak MB" "fit us/event" "fit s"; }

echo "synthetic runs (gen_records: C = 1..64, 1,000 tokens a request, law 2.6+1.5n ms played)"
header
for n in $EVENTS; do
  mkdir -p "$TMP/syn"
  gen=$("$GEN" "$TMP/syn/records.jsonl" --events "$n") || { echo "records: gen_records failed" >&2; exit 1; }
  ev=$(echo "$gen" | sed 's/.*events=\([0-9]*\).*/\1/')
  fit_cost "$TMP/syn" "$ev" synthetic
  rm -rf "$TMP/syn"
done

[[ ${REC_SKIP_LIVE:-0} == 1 ]] && exit 0
on_srv=() on_cli=()
if (( $(nproc) >= 2 )) && command -v taskset >/dev/null; then on_srv=(taskset -c 0) on_cli=(taskset -c 1); fi
ulimit -n "$(ulimit -Hn)"
per_event() {     # per_event RUN_DIR LABEL: records bytes per token event of a run
  python3 - "$1/records.jsonl" "$2" <<'EOF'
import json, os, sys
ev = req = rq_bytes = 0
for line in open(sys.argv[1]):
    if '"type":"level_end"' in line:
        ev += (json.loads(line).get("client") or {}).get("events", 0)
    elif '"type":"request"' in line:
        req += 1
        rq_bytes += len(line.encode())
size = os.path.getsize(sys.argv[1])
print("%-32s %8d requests %10d token events %10d bytes: %6.2f bytes/event (request lines %5.2f)"
      % (sys.argv[2], req, ev, size, size / max(ev, 1), rq_bytes / max(ev, 1)))
EOF
}
"${on_srv[@]}" "$LL" serve --port 0 --law 0+0n --max-running "$C" >"$TMP/serve.out" 2>"$TMP/serve.err" &
serve_pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$TMP/serve.out" 2>/dev/null | head -1 || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { echo "records: serve did not start" >&2; cat "$TMP/serve.err" >&2; exit 1; }
"${on_cli[@]}" "$LL" sweep --url "$url" --model loadlaw-synthetic -c "$C" -n 100000000 --duration "$LIVE_S" \
  --max-tokens "$TOK" --threads 1 --no-report -q -o "$TMP/live" >/dev/null 2>"$TMP/sweep.err" ||
  { echo "records: the live sweep failed" >&2; tail -3 "$TMP/sweep.err" >&2; exit 1; }
stop_serve
per_event "$TMP/live" "live, serve --law 0+0n, ${LIVE_S}s"
live_ev=$(python3 -c 'import json, sys
print(sum((json.loads(l).get("client") or {}).get("events", 0) for l in open(sys.argv[1]) if "\"type\":\"level_end\"" in l))' \
  "$TMP/live/records.jsonl")
echo "loadlaw fit of the live run"
header
fit_cost "$TMP/live" "$live_ev" live
# The same run in the list form of older files, for the before/after: loadlaw records expand.
mkdir -p "$TMP/live-list" && "$LL" records expand "$TMP/live" "$TMP/live-list" 2>/dev/null &&
  per_event "$TMP/live-list" "  the same, list form (expand)" && rm -rf "$TMP/live-list"
rm -rf "$TMP/live"
"$LL" sweep --no-report -q -o "$TMP/default" >/dev/null 2>"$TMP/sweep.err" ||
  { echo "records: the default sweep failed" >&2; tail -3 "$TMP/sweep.err" >&2; exit 1; }
per_event "$TMP/default" "default bundled sweep (52+30n)"
mkdir -p "$TMP/default-list" && "$LL" records expand "$TMP/default" "$TMP/default-list" 2>/dev/null &&
  per_event "$TMP/default-list" "  the same, list form (expand)"
