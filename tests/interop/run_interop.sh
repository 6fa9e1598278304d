#!/usr/bin/env bash
# loadlaw against llama.cpp's llama-server (ctest label "interop").
# Usage: run_interop.sh LOADLAW_BIN WORK_DIR
#
# Builds llama-server once per machine (scripts/llama_server.sh; or takes
# $LOADLAW_LLAMA_SERVER), writes a tiny random-weight LLaMA GGUF
# (make_model.py, with the gguf package from gguf_python.sh), starts the
# server on a free loopback port with /metrics and 8 slots, sweeps it twice
# (short requests at C = 1,2,3,4,6,8 with their outputs recorded; 1,024-token
# requests at C = 1,2,4,8), fits each run with `loadlaw fit` (text and --json)
# and checks both with check_run.py, which prints the figures it compares (the
# short run: the token ids and logprobs the server streamed; the long run: a
# context term); `loadlaw check-decode` on the short run must say the server
# has no prompt logprobs. The server is stopped on every exit path.
#
# Environment: LOADLAW_LLAMA_SERVER (a llama-server binary to use),
# LOADLAW_INTEROP_NO_BUILD=1 (use a cached build only; skip when there is
# none), LOADLAW_INTEROP_THREADS (the server's threads; default: the cores
# this process may use minus one for the client, at least 1).
# Exit status: 0 passed, 1 failed, 77 skipped (llama-server cannot be built
# here, or the gguf package cannot be installed: the reason is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
loadlaw=${1:?usage: run_interop.sh LOADLAW_BIN WORK_DIR}
work=${2:?usage: run_interop.sh LOADLAW_BIN WORK_DIR}
# Two sweeps: short requests over six levels (enough distinct N to place the
# knees a CPU server shows), and long ones whose context grows ~420 -> ~1450
# tokens within each request (the context term).
levels=1,2,3,4,6,8
requests=8,12,12,16,24,32
max_tokens=64
prompt_tokens=128
long_levels=1,2,4,8
long_requests=1,2,4,8 # one round per level: ~1,000 steps each, and the run under 2 min
long_max_tokens=1024
long_prompt_tokens=420
slots=8
ctx=16384 # 2048 per slot: a 420-token prompt, the chat template and 1024 tokens

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work"
loadlaw=$(cd "$(dirname "$loadlaw")" && pwd)/$(basename "$loadlaw")
[ -x "$loadlaw" ] || fail "no loadlaw binary at $loadlaw"

# 1. llama-server
if [ -n "${LOADLAW_LLAMA_SERVER:-}" ]; then
  server=$LOADLAW_LLAMA_SERVER
else
  print=()
  [ "${LOADLAW_INTEROP_NO_BUILD:-0}" = 1 ] && print=(--print)
  rc=0
  server=$(bash "$root/scripts/llama_server.sh" "${print[@]}") || rc=$?
  [ "$rc" = 77 ] && skip "llama-server is not available (the reason: scripts/llama_server.sh on stderr)"
  [ "$rc" = 0 ] || fail "scripts/llama_server.sh failed (exit $rc)"
fi
[ -x "$server" ] || fail "llama-server is not executable: $server"

# 2. the model, cached in WORK_DIR by the generator's own hash
rc=0
py=$(bash "$here/gguf_python.sh") || rc=$?
[ "$rc" = 77 ] && skip "the gguf Python package cannot be installed (the reason: gguf_python.sh on stderr)"
[ "$rc" = 0 ] || fail "gguf_python.sh failed (exit $rc)"
hash=$(sha256sum "$here/make_model.py" | cut -c1-12)
model="$work/tiny-llama-$hash.gguf"
if [ ! -s "$model" ]; then
  rm -f "$work"/tiny-llama-*.gguf
  "$py" "$here/make_model.py" "$model" || fail "make_model.py failed"
fi

# 3. the server
threads=${LOADLAW_INTEROP_THREADS:-$(($(nproc) > 1 ? $(nproc) - 1 : 1))}
pid=""
sweep_pid=""
watch_pid=""
stop_server() {
  # A signal can arrive while the sweep runs: end it first (it keeps its records).
  if [ -n "$sweep_pid" ] && kill -0 "$sweep_pid" 2>/dev/null; then
    kill -TERM "$sweep_pid" 2>/dev/null || true
    wait "$sweep_pid" 2>/dev/null || true
  fi
  sweep_pid=""
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
  watch_pid=""
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT
trap 'stop_server; exit 143' TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
healthy() { # GET URL/health answers 200
  python3 - "$1/health" <<'PY' 2>/dev/null
import sys, urllib.request
try:
    sys.exit(urllib.request.urlopen(sys.argv[1], timeout=2).status != 200)
except Exception:
    sys.exit(1)
PY
}

start_server() { # -> 0 when /health says ok, 1 when the server exited (a port race), 2 timeout
  port=$(free_port)
  url="http://127.0.0.1:$port"
  "$server" -m "$model" --host 127.0.0.1 --port "$port" --metrics -np "$slots" -c "$ctx" \
    -t "$threads" -tb "$threads" --no-webui >"$work/server.log" 2>&1 &
  pid=$!
  # Should this script die without its traps (SIGKILL), the server goes too.
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
  (while kill -0 $$ 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 1; done
   kill -TERM "$pid" 2>/dev/null && sleep 5 && kill -KILL "$pid") >/dev/null 2>&1 </dev/null &
  watch_pid=$!
  for _ in $(seq 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      pid=""
      return 1
    fi
    healthy "$url" && return 0
    sleep 0.3
  done
  return 2
}

started=1
for attempt in 1 2 3; do
  rc=0
  start_server || rc=$?
  [ "$rc" = 0 ] && { started=0; break; }
  [ "$rc" = 2 ] && { tail -30 "$work/server.log"; fail "llama-server not healthy after 120 s"; }
  echo "llama-server exited at start (attempt $attempt):"
  tail -5 "$work/server.log"
done
[ "$started" = 0 ] || { tail -30 "$work/server.log"; fail "llama-server did not start"; }
echo "llama-server: $server"
echo "  $url, model $(basename "$model"), $slots slots, ctx $ctx, $threads threads"
python3 - "$url/v1/models" <<'PY' || true
import json, sys, urllib.request
m = json.load(urllib.request.urlopen(sys.argv[1], timeout=10))["data"][0].get("meta") or {}
print("  model: " + ", ".join("%s %s" % (k, m[k]) for k in
                              ("n_params", "n_vocab", "n_embd", "n_ctx_train", "size") if k in m))
PY

# 4. sweep, fit and check (the server still up: check_run.py asks it to tokenize)
# sweep_check NAME LEVELS REQUESTS MAX_TOKENS PROMPT_TOKENS [check_run.py options]: 0, or
# check_run.py's exit status (3: only the model's size bound missed). With
# --expect-outputs the sweep records outputs (--record-outputs --greedy).
sweep_check() {
  local name=$1 lv=$2 rq=$3 mt=$4 pt=$5 run="$work/$1" rc=0 t0 extra=()
  shift 5
  [[ " $* " == *" --expect-outputs "* ]] && extra=(--record-outputs --greedy)
  rm -rf "$run"
  t0=$(date +%s)
  # In the background with `wait`, so that a signal reaches the traps at once.
  timeout -k 10 600 "$loadlaw" sweep --url "$url" --model tiny-llama -c "$lv" -n "$rq" \
    --max-tokens "$mt" --prompt-tokens "$pt" --seed 7 --metrics-interval 0.2 \
    --extra-body '{"ignore_eos":true}' "${extra[@]}" -o "$run" -q >"$work/$name.sweep.log" 2>&1 &
  sweep_pid=$!
  wait "$sweep_pid" || rc=$?
  sweep_pid=""
  echo "sweep $name: exit $rc in $(($(date +%s) - t0)) s"
  cat "$work/$name.sweep.log"
  [ "$rc" = 0 ] || { tail -20 "$work/server.log"; fail "loadlaw sweep ($name) exited $rc"; }
  "$loadlaw" fit "$run" >"$work/$name.fit.txt" 2>&1 || { cat "$work/$name.fit.txt"; fail "loadlaw fit failed"; }
  "$loadlaw" fit "$run" --json >"$work/$name.fit.json" 2>"$work/$name.fit.json.err" ||
    { cat "$work/$name.fit.json.err"; fail "loadlaw fit --json failed"; }
  echo "--- loadlaw fit ($name)"
  cat "$work/$name.fit.txt"
  echo "---"
  python3 "$here/check_run.py" "$run" "$work/$name.fit.json" "$work/$name.fit.txt" \
    --max-tokens "$mt" --levels "$lv" --url "$url" "$@"
}
# A model past its per-level bounds alone (its size, or the line's error on
# the same levels) may be one noisy level of one round: that sweep is
# measured once more, and must pass then.
sweep_twice() {
  local rc=0
  sweep_check "$@" || rc=$?
  if [ "$rc" = 3 ]; then
    echo "sweep $1: the chosen model misses a level by more than check_run.py's per-level bounds, and every" \
         "other check passed; measuring it once more (one round per level: a noisy level moves them)"
    rc=0
    sweep_check "$@" || rc=$?
  fi
  [ "$rc" = 0 ] || fail "checks failed ($1, above)"
}
sweep_twice short "$levels" "$requests" "$max_tokens" "$prompt_tokens" --expect-outputs

# 5. check-decode: llama-server has no prompt logprobs (it scores only what it
# samples), so the command must say so, naming the server, and exit 2.
rc=0
"$loadlaw" check-decode "$work/short" --url "$url" --max-requests 2 >"$work/check-decode.log" 2>&1 || rc=$?
cat "$work/check-decode.log"
[ "$rc" = 2 ] && grep -q "llama.cpp" "$work/check-decode.log" ||
  fail "check-decode against llama-server: expected exit 2 naming llama.cpp, got exit $rc"
echo "check-decode: exit 2, the server's lack of prompt logprobs named (ok)"
sweep_twice long "$long_levels" "$long_requests" "$long_max_tokens" "$long_prompt_tokens" --expect-context
