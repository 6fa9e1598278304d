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
# has no prompt logprobs; `sweep --find` on a TPOT p90 objective derived from
# the short run (find_check.py). The server is stopped on every exit path.
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

# shellcheck source=lib.sh
. "$here/lib.sh"
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
launch_server() { # PORT (lib.sh's start_server)
  "$server" -m "$model" --host 127.0.0.1 --port "$1" --metrics -np "$slots" -c "$ctx" \
    -t "$threads" -tb "$threads" --no-webui >"$work/server.log" 2>&1 &
  serve_watch $!
}
start_server llama-server 120
echo "llama-server: $server"
echo "  $url, model $(basename "$model"), $slots slots, ctx $ctx, $threads threads"
python3 - "$url/v1/models" <<'PY' || true
import json, sys, urllib.request
m = json.load(urllib.request.urlopen(sys.argv[1], timeout=10))["data"][0].get("meta") or {}
print("  model: " + ", ".join("%s %s" % (k, m[k]) for k in
                              ("n_params", "n_vocab", "n_embd", "n_ctx_train", "size") if k in m))
PY

# 4. sweep, fit and check (lib.sh)
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

# 6. sweep --find on a TPOT p90 objective in the largest step of the server's
# own TPOT p90 up to C = 4, measured first on the same workload (a calibration
# sweep, ~10 s; find_check.py objective): the answer's sustain must meet it and
# C + 1's re-measure fail it, or the result says the boundary is within noise
# with both levels' figures. 8-token requests on 32-token prompts (a probe
# carries 100: ten beyond a p90); --find-time bounds the step (~2 min).
find_args=(--url "$url" --model tiny-llama --max-tokens 8 --prompt-tokens 32 --extra-body '{"ignore_eos":true}'
  --no-report -q)
rm -rf "$work/find" "$work/find-cal"
"$loadlaw" sweep "${find_args[@]}" -c 1,2,3,4 -n 8,12,12,16 --seed 12 -o "$work/find-cal" \
  >"$work/find-cal.log" 2>&1 || { tail -20 "$work/find-cal.log"; fail "the calibration sweep for --find failed"; }
find_obj=$(python3 "$here/find_check.py" objective "$work/find-cal")
t0=$(date +%s)
rc=0
timeout -k 10 400 "$loadlaw" sweep "${find_args[@]}" --find "$find_obj" --find-time 240s --seed 11 \
  -o "$work/find" >"$work/find.sweep.log" 2>&1 || rc=$?
echo "sweep --find $find_obj: exit $rc in $(($(date +%s) - t0)) s"
grep -E "^find |probes carried|loadlaw sweep: find" "$work/find.sweep.log" || true
[ "$rc" = 0 ] || { tail -20 "$work/find.sweep.log"; fail "loadlaw sweep --find exited $rc"; }
python3 "$here/find_check.py" check "$work/find" || fail "sweep --find: the boundary was not proved (above)"
