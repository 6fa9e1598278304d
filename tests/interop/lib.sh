# What the interop runners share (run_interop.sh: llama.cpp, run_vllm.sh:
# vLLM), sourced by both: the exit paths, a free port, the server's
# lifetime (started by the runner, watched, stopped on every exit), and a
# sweep checked by check_run.py.
#
# The runner sets, before calling these: here (this folder), loadlaw (the
# binary), work (its folder), url (the server's, once started); it starts
# its server in the background and hands its pid to serve_watch. A server
# that runs child processes (vLLM: its engine core and workers) is started
# under `setsid` and watched with `serve_watch PID group`: every signal
# then goes to its whole process group, so no child outlives the test.
# stop_wait_s: how long a stopped server may take to exit before SIGKILL.
# Server output goes to $work/server.log.

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

pid=""       # the server
group=""     # "-" when the signals go to its process group
sweep_pid="" # a sweep in flight
watch_pid="" # the watchdog of the server
stop_wait_s=${stop_wait_s:-5}

stop_server() {
  # A signal can arrive while the sweep runs: end it first (it keeps its records).
  if [ -n "$sweep_pid" ] && kill -0 "$sweep_pid" 2>/dev/null; then
    kill -TERM "$sweep_pid" 2>/dev/null || true
    wait "$sweep_pid" 2>/dev/null || true
  fi
  sweep_pid=""
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "$group$pid" 2>/dev/null || true
    for _ in $(seq $((stop_wait_s * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  forget_server
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
  watch_pid=""
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT
trap 'stop_server; exit 143' TERM

# The server is gone, or must go now: SIGKILL to what is left of it (with a
# group, the children a server that died may have left behind).
forget_server() {
  if [ -n "$pid" ]; then
    kill -KILL -- "$group$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
}

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

# serve_watch PID [group]: the server is PID from now on (with "group", its
# process group); should the runner die without its traps (SIGKILL), the
# server goes too.
serve_watch() {
  pid=$1
  group=""
  [ "${2:-}" = group ] && group=-
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
  (while kill -0 $$ 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 1; done
   kill -TERM -- "$group$pid" 2>/dev/null && sleep "$stop_wait_s" && kill -KILL -- "$group$pid") \
    >/dev/null 2>&1 </dev/null &
  watch_pid=$!
}

# serve_wait SECONDS -> 0 when $url/health says ok, 1 when the server exited
# (a port race, or it failed: $work/server.log says), 2 not ready in time.
serve_wait() {
  local end=$((SECONDS + $1))
  while [ "$SECONDS" -lt "$end" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      forget_server
      return 1
    fi
    healthy "$url" && return 0
    sleep 0.3
  done
  return 2
}

# start_server NAME SECONDS: the runner's launch_server PORT on a free
# port, until $url/health answers; a server that exits at start (another
# process took the port between free_port and its bind) is started again,
# three times at most. Sets url.
start_server() {
  local name=$1 wait_s=$2 attempt rc
  for attempt in 1 2 3; do
    port=$(free_port)
    url="http://127.0.0.1:$port"
    launch_server "$port"
    rc=0
    serve_wait "$wait_s" || rc=$?
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 2 ] && { tail -30 "$work/server.log"; fail "$name not healthy after $wait_s s"; }
    echo "$name exited at start (attempt $attempt):"
    tail -5 "$work/server.log"
  done
  tail -30 "$work/server.log"
  fail "$name did not start"
}

# sweep_check NAME LEVELS REQUESTS MAX_TOKENS PROMPT_TOKENS [check_run.py options]: 0, or
# check_run.py's exit status (3: only checks in its RETRIED missed). With
# --expect-outputs the sweep records outputs (--record-outputs --greedy).
# The server must still be up: check_run.py asks it to tokenize.
sweep_seed=7
sweep_check() {
  local name=$1 lv=$2 rq=$3 mt=$4 pt=$5 run="$work/$1" rc=0 t0 extra=()
  shift 5
  [[ " $* " == *" --expect-outputs "* ]] && extra=(--record-outputs --greedy)
  rm -rf "$run"
  t0=$(date +%s)
  # In the background with `wait`, so that a signal reaches the traps at once.
  timeout -k 10 600 "$loadlaw" sweep --url "$url" --model tiny-llama -c "$lv" -n "$rq" \
    --max-tokens "$mt" --prompt-tokens "$pt" --seed "$sweep_seed" --metrics-interval 0.2 \
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
# Checks that rest on the machine's timing of one round per level alone
# (check_run.py's RETRIED: the model's per-level bounds, TPOT, server N) may
# have met one noisy level: that sweep is measured once more, and must pass
# then.
sweep_twice() {
  local rc=0
  sweep_check "$@" || rc=$?
  if [ "$rc" = 3 ]; then
    echo "sweep $1: only checks that rest on the timing of one round per level failed (check_run.py's" \
         "RETRIED), every other check passed; measuring it once more (a noisy level moves them)"
    rc=0
    # Other prompts: a run that records outputs heads each prompt with the
    # seed, not the run (loadgen/xfer.c fresh_head), so the same seed would
    # meet the first sweep's prompts in the server's prompt cache.
    sweep_seed=$((sweep_seed + 1))
    sweep_check "$@" || rc=$?
    sweep_seed=7
  fi
  [ "$rc" = 0 ] || fail "checks failed ($1, above)"
}
