#!/usr/bin/env bash
# bench/mpi/bench_mpi.sh: what K ranks of `mpirun -np K loadlaw sweep` buy on this machine
# (client capacity, clock estimates). Against one fast engine run apart (`loadlaw serve`, a law of MPI_LAW ms per step,
# so the client, not the engine, is the bottleneck), it runs the same closed-loop level
# (MPI_C streams, MPI_TOKENS tokens each, one worker thread per rank) with 1, 2 and 4 ranks and
# prints, per K:
#   - client capacity: token events ingested per second over the level (level_end "client":
#     events / wall_s, the union over ranks), and the busiest worker thread's CPU share;
#   - the clock estimates of the run: per-rank ping-pong round trip (min-RTT sample of 64, as
#     recorded) and offset. On one host every rank reads the same CLOCK_MONOTONIC, so the true
#     offset is 0 and |offset| is the estimator's error; with MPI_SKEW_NS set, ranks > 0 read
#     their clock that far ahead (the test key) and |offset - skew| is the error.
# Everything runs on this host: it measures K processes sharing its cores, not K hosts.
#
# Knobs (environment): LOADLAW (binary; default build/loadlaw, then /tmp/build-mpi/loadlaw),
# MPIRUN (mpirun), MPI_RANKS ("1 2 4"), MPI_C (512), MPI_TOKENS (512), MPI_LAW ("0.5+0n": the
# engine could give 1M token events/s at C = 512, more than one client thread takes),
# MPI_SKEW_NS (0), MPI_OUT (work dir; default a new /tmp/loadlaw-mpi.*).
# Exit 0 when every run ended 0, 1 otherwise.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
LOADLAW=${LOADLAW:-}
if [[ -z $LOADLAW ]]; then
  for b in "$here/build/loadlaw" /tmp/build-mpi/loadlaw; do [[ -x $b ]] && LOADLAW=$b && break; done
fi
[[ -n $LOADLAW && -x $LOADLAW ]] || { echo "bench_mpi: no loadlaw binary (set LOADLAW)" >&2; exit 1; }
MPIRUN=${MPIRUN:-$(command -v mpirun || true)}
[[ -n $MPIRUN ]] || { echo "bench_mpi: no mpirun (apt install openmpi-bin)" >&2; exit 1; }
RANKS=${MPI_RANKS:-1 2 4}
C=${MPI_C:-512}
TOKENS=${MPI_TOKENS:-512}
LAW=${MPI_LAW:-0.5+0n}
SKEW=${MPI_SKEW_NS:-0}
OUT=${MPI_OUT:-$(mktemp -d /tmp/loadlaw-mpi.XXXXXX)}
mkdir -p "$OUT"
# CI and containers run as root; --oversubscribe: more ranks than cores is the point here.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$LOADLAW" serve --port 0 --law "$LAW" --max-running $((C + 64)) --max-connections $((C + 256)) \
  >"$OUT/serve.out" 2>"$OUT/serve.err" &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*' "$OUT/serve.out" | head -1 || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { echo "bench_mpi: serve printed no URL (see $OUT/serve.err)" >&2; exit 1; }

echo "bench_mpi: $(nproc) cores; engine $url law $LAW ms; C=$C x $TOKENS tokens; $(${MPIRUN} --version | head -1)"
printf '%-3s %14s %12s %10s %s\n' K "events/s" "busiest cpu" "wall s" "clock (ranks>0): rtt ns min/median/max, |offset err| ns max"
status=0
for k in $RANKS; do
  run="$OUT/k$k"
  rm -rf "$run"
  args=(sweep --url "$url" --model loadlaw-synthetic -c "$C" -n "$C" --max-tokens "$TOKENS"
        --prompt-words 16 --threads 1 -q --no-report -o "$run")
  if ! "$MPIRUN" --oversubscribe -np "$k" -x LOADLAW_TEST_CLOCK_SKEW_NS="$SKEW" "$LOADLAW" "${args[@]}" \
      >"$OUT/k$k.out" 2>"$OUT/k$k.err"; then
    echo "bench_mpi: K=$k failed (see $OUT/k$k.err)" >&2
    status=1
    continue
  fi
  rec="$run/records.jsonl"
  client=$(grep '"type":"level_end"' "$rec" | head -1 | grep -o '"client":{[^}]*}')
  events=$(grep -o '"events":[0-9]*' <<<"$client" | cut -d: -f2)
  wall=$(grep -o '"wall_s":[0-9.e+-]*' <<<"$client" | cut -d: -f2)
  cpu=$(grep -o '"cpu_s_max":[0-9.e+-]*' <<<"$client" | cut -d: -f2)
  rtts=$(grep '"type":"clock"' "$rec" | grep -o '"rtt_ns":[0-9]*' | cut -d: -f2 | sort -n || true)
  if [[ -z $rtts ]]; then
    clock="(one rank: no clock records)"
  else
    n=$(wc -l <<<"$rtts")
    err=$(grep '"type":"clock"' "$rec" | grep -o '"offset_ns":-*[0-9]*' | cut -d: -f2 |
          awk -v skew="$SKEW" '{ e = $1 - skew; if (e < 0) e = -e; if (e > m) m = e } END { print m + 0 }')
    clock="$(head -1 <<<"$rtts")/$(sed -n "$(((n + 1) / 2))p" <<<"$rtts")/$(tail -1 <<<"$rtts"), $err"
  fi
  awk -v k="$k" -v ev="$events" -v w="$wall" -v c="$cpu" -v ck="$clock" \
    'BEGIN { printf "%-3s %14.0f %11.0f%% %10.2f %s\n", k, ev / w, 100 * c / w, w, ck }'
done
echo "runs in $OUT"
exit $status
