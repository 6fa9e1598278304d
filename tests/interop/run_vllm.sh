#!/usr/bin/env bash
# loadlaw against vLLM's OpenAI-compatible server, its CPU backend (ctest
# label "interop").
# Usage: run_vllm.sh LOADLAW_BIN WORK_DIR
#
# Makes vLLM's Python environment once per machine (scripts/vllm_env.sh; or
# takes $LOADLAW_VLLM_ENV), writes a small random-weight Llama in Hugging Face
# format (vllm/make_model.py: float32, a BPE tokenizer trained on text on
# disk, a chat template), starts `vllm serve` on it once, on a free loopback
# port, in bfloat16 (what servers run; LOADLAW_VLLM_DTYPE=float32 for the
# exact one), with per-request metrics and cached-token details, and
# sends one request first (the first one a fresh server answers carries its
# warm-up). Then it sweeps it (64-token requests at C = 1..16 with their
# outputs recorded, greedy), fits the run with `loadlaw fit` (text and
# --json) and checks it with check_run.py --server vllm: every request and
# token against the server's usage, the law and the chosen model per level,
# the server's N from vllm:num_requests_running, the server's own TPOT
# (metrics.mean_itl_ms) and TTFT against the client's, its cached tokens
# against its prefix-cache counters, /tokenize, the prompts' lengths (the
# chat body and, in a short completions sweep, the whole prompt: 64 tokens
# as vLLM counts them for --prompt-tokens 64). Last, `loadlaw check-decode
# RUN` with no --url (the run's recorded target) must re-score most of the
# run's requests through the server's prefill and exit 0, under its default
# gate (a remote server judged as bf16), and under --dtype fp32 (the strict
# one) exit 0 on a float32 server, whose decode and prefill agree to ~1e-8
# nat, and 3 on a bfloat16 one, whose rounding it flags (~8% of positions over
# 0.005 nat against a 1% gate: docs/check-decode.md). The server (and its engine-core and
# worker processes) is stopped on every exit path.
#
# Environment: LOADLAW_VLLM_ENV (a virtual environment with vLLM to use),
# LOADLAW_INTEROP_NO_BUILD=1 (use a cached environment only; skip when there
# is none), LOADLAW_INTEROP_THREADS (the server's OpenMP threads, bound to
# the last cores this process may use; default: those cores minus one for
# the client, at least 1), LOADLAW_VLLM_DTYPE (the server's --dtype:
# bfloat16, or float32).
# Exit status: 0 passed, 1 failed, 77 skipped (vLLM cannot be installed
# here: the reason is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
loadlaw=${1:?usage: run_vllm.sh LOADLAW_BIN WORK_DIR}
work=${2:?usage: run_vllm.sh LOADLAW_BIN WORK_DIR}
levels=1,2,3,4,6,8,12,16
requests=8,12,12,16,24,32,48,64
max_tokens=64
prompt_tokens=128
ctx=2048
# The share of re-scored requests check-decode must compare (the rest score
# other tokens than decode's: a text that tokenizes differently). The model
# emits only whole words, which tokenize back as they were decoded.
decode_compared_min=0.9
dtype=${LOADLAW_VLLM_DTYPE:-bfloat16}
stop_wait_s=30 # vLLM shuts its engine core and workers down on SIGTERM

# shellcheck source=lib.sh
. "$here/lib.sh"
mkdir -p "$work"
loadlaw=$(cd "$(dirname "$loadlaw")" && pwd)/$(basename "$loadlaw")
[ -x "$loadlaw" ] || fail "no loadlaw binary at $loadlaw"
command -v setsid >/dev/null || skip "no setsid (util-linux)"

# 1. vLLM
if [ -n "${LOADLAW_VLLM_ENV:-}" ]; then
  venv=$LOADLAW_VLLM_ENV
else
  print=()
  [ "${LOADLAW_INTEROP_NO_BUILD:-0}" = 1 ] && print=(--print)
  rc=0
  venv=$(bash "$root/scripts/vllm_env.sh" "${print[@]}") || rc=$?
  [ "$rc" = 77 ] && skip "vLLM is not available (the reason: scripts/vllm_env.sh on stderr)"
  [ "$rc" = 0 ] || fail "scripts/vllm_env.sh failed (exit $rc)"
fi
[ -x "$venv/bin/vllm" ] || fail "no vllm command in $venv"

# 2. the model (~1 s to write, so written every run: nothing stale)
model="$work/model"
rm -rf "$model"
"$venv/bin/python" "$here/vllm/make_model.py" "$model" || fail "make_model.py failed"

# 3. the server: offline, in its own process group (its engine core and
# worker are processes of their own), its OpenMP threads bound to the last
# cores this process may use, 1 GiB of KV cache (~130k tokens of this
# model: no preemption at C = 16), its caches (torch.compile's, whose C++
# it builds at start) in WORK_DIR: a later run on the same model starts
# faster.
cpus=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
ncpu=$(wc -w <<<"$cpus")
threads=${LOADLAW_INTEROP_THREADS:-$((ncpu > 1 ? ncpu - 1 : 1))}
bind=$(tr ' ' '\n' <<<"$cpus" | tail -n "$threads" | paste -sd, -)
# The torch profiler on (step 6), into WORK_DIR/traces: only what a
# /start_profile asks for is captured. The worker's trace only, without the
# Python stack: the front end's own (AsyncLLM) traces the whole rest of the
# level, whatever max_iterations says, and takes ~2 min to write here.
traces="$work/traces"
profiler_config="{\"profiler\":\"torch\",\"torch_profiler_dir\":\"$traces\",\"torch_profiler_with_stack\":false,\"ignore_frontend\":true}"
launch_server() { # PORT (lib.sh's start_server)
  env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME="$work/hf" VLLM_CACHE_ROOT="$work/vllm-cache" \
    TORCHINDUCTOR_CACHE_DIR="$work/inductor-cache" \
    VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND="$bind" \
    VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
    setsid "$venv/bin/vllm" serve "$model" --served-model-name tiny-llama \
    --host 127.0.0.1 --port "$1" --dtype "$dtype" --max-model-len "$ctx" --seed 0 \
    --enable-prompt-tokens-details --enable-per-request-metrics --profiler-config "$profiler_config" \
    >"$work/server.log" 2>&1 </dev/null &
  serve_watch $! group
}
t0=$(date +%s)
start_server "vllm serve" 600
echo "vllm serve: $venv/bin/vllm ($("$venv/bin/vllm" --version 2>/dev/null | tail -1)), ready in $(($(date +%s) - t0)) s"
echo "  $url, model tiny-llama ($model), $dtype, ctx $ctx, OpenMP threads on cores $bind"
python3 - "$url" <<'PY' || fail "the first request to vllm serve failed"
import json, sys, time, urllib.request
body = {"model": "tiny-llama", "max_tokens": 8, "temperature": 0,
        "messages": [{"role": "user", "content": "the model server decode"}]}
req = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
t = time.monotonic()
r = json.load(urllib.request.urlopen(req, timeout=120))
print("  first request: %d tokens in %.2f s: %r" % (r["usage"]["completion_tokens"],
      time.monotonic() - t, r["choices"][0]["message"]["content"]))
PY

# 4. sweep, fit and check (lib.sh)
sweep_twice short "$levels" "$requests" "$max_tokens" "$prompt_tokens" --expect-outputs \
  --server vllm --model tiny-llama

# 4b. prompt lengths on /v1/completions: --prompt-tokens 64 is 64 tokens as
# vLLM counts the prompt (BOS included), the request's head inside: every
# request's usage.prompt_tokens is 64 (the chat sweep above checks the
# body's length and the chat template's tokens apart: check_run.py prompts).
rm -rf "$work/plen"
"$loadlaw" sweep --url "$url" --model tiny-llama --endpoint completions -c 4 -n 8 --max-tokens 4 \
  --prompt-tokens 64 --extra-body '{"ignore_eos":true}' -o "$work/plen" -q --no-report \
  >"$work/plen.log" 2>&1 || { cat "$work/plen.log"; fail "the completions sweep (prompt lengths) failed"; }
grep "prompts fitted" "$work/plen.log" || true
python3 - "$work/plen/records.jsonl" <<'PY' || fail "prompt lengths on /v1/completions"
import json, sys
got = [json.loads(l)["usage"]["prompt_tokens"] for l in open(sys.argv[1]) if '"type":"request"' in l]
ok = len(got) == 8 and all(abs(g - 64) <= 1 for g in got)
print("prompts   %s  /v1/completions --prompt-tokens 64: vLLM counted %s" % ("ok  " if ok else "FAIL", got))
sys.exit(not ok)
PY

# 4c. the prompt cache: every prompt starts with one of two fixed 640-token
# texts (--shared-prefix 2:640) before its own 128, so vLLM serves over half
# of each prompt from its prefix cache (whole blocks only: its CPU backend's
# are 128 tokens, so a shorter prefix is never a hit). Per level, the share
# of prompt tokens the requests' usage says were cached
# (usage.prompt_tokens_details) and the share vLLM's counters give
# (vllm:prefix_cache_hits / _queries over the level, the fit's
# server_cache_share) agree within 2 points, and are above 30%. The server's
# share is over the scrapes inside the level, which miss its first and last
# requests, and a level's first requests are the cold ones (0 cached; 53
# against 51%, 61 against 64% when they were measured): so a sweep with the
# same seed sends both prefixes first, and the measured levels' requests
# are all warm.
rm -rf "$work/shared" "$work/shared-warm"
for run in shared-warm shared; do
  "$loadlaw" sweep --url "$url" --model tiny-llama -c 2,4 -n 8,24 --max-tokens 8 --prompt-tokens 128 \
    --shared-prefix 2:640 --cache keep --metrics-interval 0.2 --extra-body '{"ignore_eos":true}' -o "$work/$run" -q \
    --no-report >"$work/$run.log" 2>&1 || { cat "$work/$run.log"; fail "the shared-prefix sweep ($run) failed"; }
done
"$loadlaw" fit "$work/shared" --json >"$work/shared-fit.json" || fail "fit on the shared-prefix run failed"
python3 - "$work/shared/records.jsonl" "$work/shared-fit.json" <<'PY' || fail "cached shares against vLLM's counters"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ok = True
for lv in json.load(open(sys.argv[2]))["levels"]:
    reqs = [r for r in recs if r.get("type") == "request" and r.get("level") == lv["level"] and not r.get("warmup")]
    c, p = sum(r.get("cached_tok") or 0 for r in reqs), sum(r.get("prompt_tok") or 0 for r in reqs)
    s = lv.get("server_cache_share")
    good = p > 0 and s is not None and c / p > 0.3 and abs(c / p - s) <= 0.02
    ok &= good
    print("cache     %s  C=%d: cached share, the requests' usage %.1f%%, vLLM's counters %s (within 2 points)"
          % ("ok  " if good else "FAIL", lv["concurrency"], 100 * c / p if p else float("nan"),
             "%.1f%%" % (100 * s) if s is not None else "none"))
sys.exit(not ok)
PY

# 5. check-decode with the run's recorded target: exit 0, most requests compared,
# under the default gate (bf16 assumed for a remote server), then exit 0 under
# the strict one (--dtype fp32: 0.005 nat), which a float32 server meets and a
# bfloat16 one does not.
rc=0
"$loadlaw" check-decode "$work/short" >"$work/check-decode.log" 2>&1 || rc=$?
cat "$work/check-decode.log"
[ "$rc" = 0 ] || fail "check-decode on the $dtype server: expected exit 0, got $rc"
grep -q "bf16 rounding (assumed" "$work/check-decode.log" || fail "check-decode: the default gate is not bf16's"
python3 - "$work/check-decode.log" "$decode_compared_min" <<'PY' || fail "check-decode compared too few requests"
import re, sys
text = open(sys.argv[1]).read()
sent = re.search(r"(\d+) of \d+ requests with outputs re-scored", text)
rows = [ln.split() for ln in text.splitlines() if ln.split()[:1] == ["all"]]
sent, compared = (int(sent.group(1)) if sent else 0), (int(rows[0][1]) if rows else 0)
ok = sent > 0 and compared >= float(sys.argv[2]) * sent
print("check-decode: exit 0, %d of %d re-scored requests compared (at least %.0f%%)%s"
      % (compared, sent, 100 * float(sys.argv[2]), "" if ok else ": FAIL"))
sys.exit(not ok)
PY
rc=0
"$loadlaw" check-decode "$work/short" --dtype fp32 --max-requests 50 >"$work/check-decode-fp32.log" 2>&1 || rc=$?
tail -2 "$work/check-decode-fp32.log"
want=3
[ "$dtype" = float32 ] && want=0
[ "$rc" = "$want" ] || fail "check-decode --dtype fp32 on the $dtype server: expected exit $want, got $rc"

# 6. A profiled level (docs/profiling.md): `--profile 4:6` captures 6 steps at
# C = 4 (POST /start_profile {"max_iterations": 6}, then /stop_profile when
# the level ends); the next level (C = 8) starts only once the trace files in
# --profile-dir stopped growing and a burst of 8 probe requests is back at
# the pace it had before. The profile record names the worker's trace (its
# size as on disk), the level is marked and left out of the law, the C = 8
# level's TTFT p99 stays within 2x of the same level in the short run (a
# sanity bound: this machine's noise; docs/profiling.md has the figure), and
# `loadlaw trace` on the files puts matmul first among the CPU categories.
rm -rf "$traces" "$work/profiled"
mkdir -p "$traces"
t0=$(date +%s)
"$loadlaw" sweep --url "$url" --model tiny-llama -c 4,8 -n 8,16 --max-tokens "$max_tokens" \
  --prompt-tokens "$prompt_tokens" --profile 4:6 --profile-dir "$traces" -o "$work/profiled" -q --no-report \
  >"$work/profiled.log" 2>&1 || { cat "$work/profiled.log"; fail "the profiled sweep failed"; }
grep '^loadlaw: level' "$work/profiled.log" | sed 's/^/  /'
"$loadlaw" fit "$work/profiled" --json >"$work/profiled-fit.json" || fail "fit on the profiled run failed"
"$loadlaw" fit "$work/short" --json >"$work/short-fit.json" || fail "fit on the short run failed"
python3 - "$work/profiled" "$work/profiled-fit.json" "$work/short-fit.json" >"$work/profiled-files.txt" <<'PY' ||
import json, os, sys
recs = [json.loads(l) for l in open(os.path.join(sys.argv[1], "records.jsonl"))]
prof = [r for r in recs if r["type"] == "profile"]
assert len(prof) == 1 and prof[0]["ok"] and prof[0]["style"] == "vllm", "one vllm-style profile record: %r" % prof
p = prof[0]
files = p.get("files") or []
assert files, "the profile record names no trace file"
for f in files:
    assert os.path.getsize(f["path"]) == f["bytes"], "%s: %d bytes on disk, %d in the record" % (
        f["path"], os.path.getsize(f["path"]), f["bytes"])
assert p["settled"], "the server did not come back to its pace (probe %r ms, %r before)" % (
    p["probe_ms"], p["probe_ref_ms"])
ends = {r["level"]: r for r in recs if r["type"] == "level_end"}
start1 = [r["start_ns"] for r in recs if r["type"] == "level" and r["level"] == 1][0]
assert ends[0].get("profiled") and not ends[1].get("profiled"), "level 0 marked profiled, level 1 not"
assert ends[0]["end_ns"] <= p["done_ns"] <= start1, "the wait between the levels"
fit = json.load(open(sys.argv[2]))
lv = {l["concurrency"]: l for l in fit["levels"]}
assert lv[4].get("profiled_out_of_law") is True, "the profiled level is out of the law"
short = {l["concurrency"]: l for l in json.load(open(sys.argv[3]))["levels"]}
a, b = lv[8]["ttft_ms"]["p99"], short[8]["ttft_ms"]["p99"]
assert a <= 2 * b + 50, "C = 8 after the profile: TTFT p99 %.0f ms against %.0f ms in the short run" % (a, b)
print("profile: %d file(s), stop %.1f s, wait %.1f s, probe %.0f ms (%.0f before); C = 8 TTFT p99 %.0f ms "
      "(short run: %.0f)" % (len(files), p["stop_s"], p["wait_s"], p["probe_ms"], p["probe_ref_ms"], a, b),
      file=sys.stderr)
for f in files:
    print(f["path"])
PY
  fail "the profiled run's records"
mapfile -t trace_files <"$work/profiled-files.txt"
"$loadlaw" trace "${trace_files[@]}" --json >"$work/trace.json" || fail "loadlaw trace on the profile's files failed"
python3 - "$work/trace.json" <<'PY' || fail "loadlaw trace: matmul is not first"
import json, sys
d = json.load(open(sys.argv[1]))
cats = sorted(d["categories"], key=lambda c: -c["total_us"])
print("trace: %s" % ", ".join("%s %.1f ms" % (c["category"], c["total_us"] / 1e3) for c in cats[:3]))
sys.exit(d["breakdown"] != "cpu" or cats[0]["category"] != "GEMM")
PY
echo "profiled level: $(($(date +%s) - t0)) s"
