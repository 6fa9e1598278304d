#!/usr/bin/env python3
"""Check a loadlaw sweep of a real server: llama.cpp's llama-server
(run_interop.sh) or vLLM (run_vllm.sh).

Usage: check_run.py RUN_DIR FIT.json FIT.txt --max-tokens N --levels 1,2,4,8
                    [--server llama.cpp|vllm] [--url http://127.0.0.1:PORT]
                    [--model NAME] [--expect-context] [--expect-outputs]

Reads RUN_DIR/records.jsonl (docs/records.md), the `loadlaw fit --json` output
and the text `loadlaw fit` printed, prints every figure it compares (the
client's beside the server's), and exits 1 when a check fails (3 when only
checks that rest on the timing of one round failed: RETRIED). Checks:

  sweep      every level ran its requests, none failed, none interrupted
  tokens     every measured request streamed exactly --max-tokens completion
             tokens, the server's usage.completion_tokens says the same, and
             the stream carried one token per chunk (counts "stream")
  outputs    (with --expect-outputs: a run with --record-outputs) the token
             ids (llama-server) or texts (vLLM: its chat logprobs carry no
             ids), logprobs and top-5 rows the server streamed were recorded
  fit        the law was fitted; the text shows the model check and a row per
             level with its error against the law
  tokenize   (with --url) the server's /tokenize makes one token of each
             prompt word (each server's own request and answer shape)
  prompts    (a run asked a fixed --prompt-tokens N) every prompt was built
             to N tokens with the request's head inside (prompt_tok_target;
             fitted by the server's /tokenize), within PROMPT_TOL_TOK; the
             server's usage.prompt_tokens is that plus the same template
             count for every request (0 on completions), and the fit's
             prompt_tok_template says it per level on chat
  model      the chosen step-time model's worst level no worse than the
             line's (model-line) and within MODEL_TOL (model-size); the
             headline says "no model fits"
             exactly when a level misses by more than 5%; with
             --expect-context the model has the context term (K/1k), its 95%
             interval above 0
and, once the fit carries the server's figures (a check whose keys are absent
says so and neither passes nor fails):
  tpot       per level, the client's TPOT p50 within 2% of the server's own
             (llama-server's timings.predicted_per_token_ms, vLLM's
             metrics.mean_itl_ms): server_tpot_ms
  ttft       per level, every request carried the server's own timing
             (server_timed), and the server's TTFT p50 (server_ttft_ms) is
             not above the client's: the client's includes it
  server N   per level, the server's running requests from /metrics on the
             steady windows (server_n) equal to the client's D = C
  cache      per level, the share of prompt tokens the server took from its
             prompt cache (server_cache_share, from /metrics) small: the
             prompts differ but for a head (the chat template's, loadlaw's
             run tag); the requests' own cached tokens (cached_tok on the
             records, from usage.prompt_tokens_details) agree with it, and
             no request took most of its prompt from the cache
  srv step   (--server vllm) per level, the server's step (server_step_ms:
             the Δsum/Δcount of vllm:inter_token_latency_seconds over the
             steady windows) within STEP_REL_TOL of vLLM's own per-request
             decode step (the mean of the requests' metrics.mean_itl_ms)
  itl        (--server vllm) per level, the client's ITL mean within
             ITL_WINDOW_TOL of vLLM's vllm:inter_token_latency_seconds over
             the same window (its first to its last scrape inside the level)
"""

import argparse
import base64
import json
import math
import sys
import urllib.request

TPOT_REL_TOL = 0.02


def chunks_of(rec):
    """A request's [[t_ns, tokens, kind], ...]: its "chunks" list (older
    files) or its "chunks_packed" text decoded (docs/records.md, "The packed
    chunk list")."""
    if "chunks_packed" not in rec:
        return rec.get("chunks") or []
    b, i, t, tok, kind, out = base64.b64decode(rec["chunks_packed"]), 0, 0, 1, "a", []

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            v, shift, i = v | (b[i] & 0x7F) << shift, shift + 7, i + 1
            if b[i - 1] < 0x80:
                return v

    while i < len(b):
        h = varint()
        dt = (h >> 2) ^ -((h >> 1) & 1)  # h = 2*zigzag(dt) + x
        t = (t + dt + 2**63) % 2**64 - 2**63
        if h & 1:
            v = varint()
            tok, kind = v >> 1, "t" if v & 1 else "a"
        out.append([t, tok, kind])
    return out

# The fit averages the gauge over the scrapes in the steady windows (a few
# per level); a scrape at a window's edge can see a slot between requests.
SERVER_N_TOL = lambda c: 0.1 * c + 0.3  # noqa: E731
# Distinct prompts still share a head with the prompt a slot held before: the
# chat template's (<s><|im_start|>user\n, 11 tokens here, spelled in byte
# tokens) and the "[" that opens each of loadlaw's fresh prompts, whose
# request id comes next: ~12 of ~144 tokens, a share of ~0.08. vLLM caches
# whole blocks (128 tokens on its CPU backend), so that head gives it none.
# A prompt sent again is served whole from the cache (a share near 1).
CACHE_SHARE_MAX = 0.12
CACHE_REQ_MAX = 0.15  # no single request's cached share above this
# The requests' own cached tokens (usage.prompt_tokens_details) against the
# share from the server's /metrics counters over the level.
CACHE_SHARE_AGREE = 0.1
# The chosen model against each level's measured steady throughput. The
# family's own bar is 5% (FIT_MODEL_LEVEL_FIT): the fit's headline must say
# when a level misses it, and not say it otherwise. A CPU server's step is not
# always a shape of the family (llama-server on one core has run N = 3 faster
# than N = 2), so the check asks for what must hold on any run: the chosen
# model's worst level no worse than the line's (or within 5%), and within
# MODEL_TOL. Both per-level bounds depend on one round per level being
# representative (another busy process moves a level's throughput by 10-20%,
# and a CI run once had the chosen model's worst level at 11.7% where the
# line's, on that noisy level, was 9.3%): when they are the only checks
# missed (RETRIED), the exit status is 3 and the runner (lib.sh's
# sweep_twice) measures that sweep once more, which must pass.
# Measured on a 2-core machine, worst levels: llama-server, short runs 3.7%,
# 4.4% and 8.2% (the line: 20%, 29% and 20%); 1,024-token runs of two rounds
# per level 2.8% and 4.0% (the line: 14%, 25%), of one round 6.0% (the line:
# 13%). vLLM (CPU backend, 24.6M parameters), short runs at C = 1..16 on a
# machine shared with other builds: 8.7%, 11.0%, 9.2% and 3.4% (the line:
# 17%, 29%, 5.7% and 10%; the third missed model-line, measured again).
FIT_MODEL_LEVEL_FIT = 0.05
MODEL_TOL = 0.12
# The checks that rest on the machine's timing of one round per level, and
# so may be measured once more: the model's bounds above, and the TPOT and
# server-N checks below (on a 2-core machine under other builds, vLLM's API
# server sent a level's first tokens 20-35 ms late, which moved the client's
# TPOT p50 by up to 5% of the server's with a 5.5M model; 1.3% at most with
# the 24.6M model the test serves).
RETRIED = {"model-size", "model-line", "tpot", "server N"}
# The synthetic prompt words (scenarios/prompts.c), each one token in the model.
PROMPT_WORDS = ("the model server decode token batch latency kernel memory cache attention "
                "request stream throughput query").split()
# The client's TTFT p50 against the server's own: the client's includes the
# server's, but the two medians come from different requests' figures.
TTFT_SLACK_MS = 0.5

# What differs between the servers the interop tests start: where the
# recorded outputs keep each token and what a valid entry is (llama.cpp's
# logprobs entries carry ids, vLLM's chat logprobs only texts), the name of
# its own per-request TPOT, and its /tokenize request body.
SERVERS = {
    "llama.cpp": {"out_tok": ("ids", "token ids", lambda v: isinstance(v, int) and v >= 0),
                  "tpot": "predicted_per_token_ms",
                  "tokenize": lambda text, model: {"content": text, "add_special": False}},
    "vllm": {"out_tok": ("tok", "token texts", lambda v: isinstance(v, str)),
             "tpot": "mean_itl_ms",
             "tokenize": lambda text, model: {"model": model, "prompt": text,
                                               "add_special_tokens": False}},
}


# How far a prompt's built length may be from --prompt-tokens: a
# tokenizer's merge at the end of the text can make exactly N impossible.
PROMPT_TOL_TOK = 1


class Checks:
    def __init__(self):
        self.failed = []
        self.pending = []

    def ok(self, name, cond, detail):
        print("  %-9s %s  %s" % (name, "ok  " if cond else "FAIL", detail))
        if not cond:
            self.failed.append(name)
        return cond

    def absent(self, name, detail):
        print("  %-9s n/a   %s" % (name, detail))
        self.pending.append(name)


ITL_SERIES = "vllm:inter_token_latency_seconds_"


def read_records(path):
    recs = {"level": [], "level_end": [], "request": [], "metric": 0, "itl": {"sum": {}, "count": {}}}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a truncated last line
            t = r.get("type")
            if t == "metric":
                recs["metric"] += 1
                part = r.get("name", "")[len(ITL_SERIES):] if r.get("name", "").startswith(ITL_SERIES) else ""
                if part in recs["itl"]:
                    series = recs["itl"][part]
                    series[r["t_ns"]] = series.get(r["t_ns"], 0.0) + r["value"]
            elif t in recs:
                recs[t].append(r)
    return recs


def check_sweep(ck, recs, levels):
    by_c = [lv["concurrency"] for lv in recs["level"]]
    ck.ok("sweep", by_c == levels, "levels run: C = %s (asked %s)" % (by_c, levels))
    ends = {e["level"]: e for e in recs["level_end"]}
    for lv in recs["level"]:
        e = ends.get(lv["level"])
        if e is None:
            ck.ok("sweep", False, "C=%d: no level_end" % lv["concurrency"])
            continue
        ck.ok("sweep", e["failed"] == 0 and e["ok"] == lv["n_requests"] and not e["interrupted"],
              "C=%d: %d of %d requests ok, %d failed%s" % (
                  lv["concurrency"], e["ok"], lv["n_requests"], e["failed"],
                  ", interrupted" if e["interrupted"] else ""))
    errs = [r for r in recs["request"] if r["status"] != "ok"]
    for r in errs[:5]:
        print("    request %s: %s %s %s" % (r["id"], r.get("error_class"), r.get("http_status"),
                                           (r.get("error") or "")[:200]))
    ck.ok("sweep", not errs, "%d request records, %d errors (warmup included)"
          % (len(recs["request"]), len(errs)))


def check_outputs(ck, recs, max_tokens, server):
    """--record-outputs against the server's chat stream: each token's id
    (llama-server's logprobs entries' "id") or text (vLLM's), and its logprob
    with the top 5, as records.md says; a token held back by the server (a
    partial UTF-8 sequence) may lack its entry, so 95% of the tokens must
    carry one."""
    meas = [r for r in recs["request"] if not r.get("warmup")]
    outs = [r.get("outputs") or {} for r in meas]
    n_tok = len(meas) * max_tokens
    key, what_tok, valid = SERVERS[server]["out_tok"]
    ids = sum(sum(1 for i in o.get(key) or [] if valid(i)) for o in outs)
    lps = sum(sum(1 for v in o.get("lp") or [] if isinstance(v, (int, float)) and v <= 0) for o in outs)
    tops = sum(sum(1 for t in o.get("top") or [] if len(t) == 5) for o in outs)
    keyed = sum(1 for o in outs if o.get("key"))
    ck.ok("outputs", meas and keyed == len(meas), "%d of %d requests carry an outputs key" % (keyed, len(meas)))
    for what, k in ((what_tok, ids), ("logprobs", lps), ("top-5 rows", tops)):
        ck.ok("outputs", k >= 0.95 * n_tok, "%s recorded for %d of %d tokens" % (what, k, n_tok))


def check_tokens(ck, recs, max_tokens):
    meas = [r for r in recs["request"] if not r.get("warmup")]
    bad_stream, bad_usage, bad_chunks, not_stream = [], [], [], []
    for r in meas:
        streamed = (r.get("think_tok") or 0) + (r.get("answer_tok") or 0)
        usage = (r.get("usage") or {}).get("completion_tokens")
        chunk_tok = sum(c[1] for c in chunks_of(r))
        if streamed != max_tokens:
            bad_stream.append((r["id"], streamed))
        if usage != max_tokens:
            bad_usage.append((r["id"], usage))
        if chunk_tok != max_tokens:
            bad_chunks.append((r["id"], chunk_tok))
        if r.get("counts", "stream") != "stream":
            not_stream.append((r["id"], r.get("counts"), r.get("stream_tok")))
    n = len(meas)
    ck.ok("tokens", n > 0 and not bad_stream,
          "%d requests: client-counted completion tokens = %d in %d (off: %s)"
          % (n, max_tokens, n - len(bad_stream), bad_stream[:5]))
    ck.ok("tokens", n > 0 and not bad_usage,
          "server usage.completion_tokens = %d in %d of %d (off: %s)"
          % (max_tokens, n - len(bad_usage), n, bad_usage[:5]))
    ck.ok("tokens", not bad_chunks, "chunks carry %d tokens in %d of %d (off: %s)"
          % (max_tokens, n - len(bad_chunks), n, bad_chunks[:5]))
    ck.ok("tokens", not not_stream, "one token per chunk (counts \"stream\") in %d of %d (%s)"
          % (n - len(not_stream), n, not_stream[:3]))
    pt = [r["prompt_tok"] for r in meas if r.get("prompt_tok") is not None]
    if pt:
        print("  %-9s      server prompt tokens per request: mean %.1f, min %d, max %d"
              % ("", sum(pt) / len(pt), min(pt), max(pt)))


def check_fit(ck, fit, text, levels):
    law = fit.get("law") or {}
    ck.ok("fit", bool(law.get("ok")) and law.get("b_ms") is not None,
          "law: step(N) = %s + %s*N ms (a 95%% %s, b 95%% %s), R2 %s, %s step points"
          % (fmt(law.get("a_ms")), fmt(law.get("b_ms")), law.get("a_ci_ms"), law.get("b_ci_ms"),
             fmt(law.get("r2")), law.get("n_points")))
    mc = fit.get("model_check") or {}
    ck.ok("fit", "model check:" in text and bool(mc.get("done")),
          "model check printed: %s" % (mc.get("verdict") or "(none in the JSON)"))
    lv = fit.get("levels") or []
    ck.ok("fit", [x["concurrency"] for x in lv] == levels,
          "fit levels C = %s" % [x["concurrency"] for x in lv])
    hdr = [ln for ln in text.splitlines() if ln.split()[:4] == ["level", "C", "steady", "t/s"]]
    ck.ok("fit", bool(hdr) and "err %" in hdr[0], "per-level table printed: %s"
          % (hdr[0].strip() if hdr else "(no header)"))
    for x in lv:
        row = [ln for ln in text.splitlines()
               if ln.split()[:2] == [str(x["level"]), str(x["concurrency"])]]
        e = x.get("error_rel")
        ck.ok("fit", bool(row) and e is not None and math.isfinite(e),
              "C=%d: steady %s tok/s, law %s tok/s, error %s%%, TPOT p50 %s ms, step %s ms"
              % (x["concurrency"], fmt(x.get("steady_tok_per_s")), fmt(x.get("predicted_tok_per_s")),
                 fmt(None if e is None else 100 * e), fmt(p50(x.get("tpot_ms"))),
                 fmt(x.get("steady_step_ms"))))


def check_headline(ck, fit, text, no_fit):
    """The first line is the chosen model's (or that none fits, with no
    ceiling); the held-out prediction of every level, and its warning exactly
    when a level misses by more than the bound."""
    hd = fit.get("headline") or {}
    first = text.splitlines()[0] if text else ""
    ck.ok("headline", first.startswith("NO MODEL" if no_fit else "model (%s)" % hd.get("model")),
          "first line: %s" % first[:160])
    ck.ok("headline", not no_fit or ("at most" not in first and hd.get("ceiling_tok_per_s") is None),
          "no ceiling when no model fits (%s)" % hd.get("no_ceiling"))
    bound = hd.get("heldout_bound") or 0.05
    if hd.get("no_heldout"):
        # fewer levels than the chosen model's parameters: said, not made
        ck.ok("heldout", ("held out: " + hd["no_heldout"]) in text and not hd.get("heldout_levels"),
              "held out: %s" % hd["no_heldout"])
        return
    worst = 0.0
    for x in fit.get("levels") or []:
        h = x.get("heldout_error_rel")
        if x.get("steady_tok_per_s") is None or x.get("profiled"):
            continue  # a level the law does not use is not predicted
        ck.ok("heldout", h is not None and math.isfinite(h),
              "C=%d: refitted without it, the %s model predicts %s tok/s, measured %s: %s%%"
              % (x["concurrency"], hd.get("model"), fmt(x.get("heldout_pred_tok_per_s")),
                 fmt(x.get("steady_tok_per_s")), fmt(None if h is None else 100 * h)))
        worst = max(worst, abs(h if h is not None else math.inf))
    warned = "HELD OUT, A LEVEL IS MISSED" in text
    ck.ok("heldout", warned == (worst > bound) and bool(hd.get("heldout_warn")) == warned,
          "the held-out line %s (worst %.1f%%, bound %.0f%%): %s"
          % ("warns" if warned else "does not warn", 100 * worst, 100 * bound, hd.get("heldout_text")))
    ck.ok("heldout", not warned or hd.get("ceiling_tok_per_s") is None,
          "no ceiling from a model that misses a level it did not see (%s)" % hd.get("no_ceiling"))


def check_model(ck, fit, text, expect_context):
    """The chosen model against the line, and the headline's honesty about it;
    with expect_context, its context term."""
    mc = fit.get("model_check") or {}
    chosen = mc.get("chosen") or {}
    print("  %-9s      chosen model: %s (%s)" % ("", mc.get("best"), mc.get("verdict")))
    worst_m = worst_l = 0.0
    for x in fit.get("levels") or []:
        e, el = x.get("model_error_rel"), x.get("error_rel")
        ck.ok("model", e is not None and el is not None,
              "C=%d: steady %s tok/s, the %s model %s tok/s: %s%% (the line: %s%%)"
              % (x["concurrency"], fmt(x.get("steady_tok_per_s")), mc.get("best"),
                 fmt(x.get("model_pred_tok_per_s")), fmt(None if e is None else 100 * e),
                 fmt(None if el is None else 100 * el)))
        worst_m = max(worst_m, abs(e if e is not None else math.inf))
        worst_l = max(worst_l, abs(el if el is not None else math.inf))
    ck.ok("model-line", worst_m <= max(worst_l, FIT_MODEL_LEVEL_FIT),
          "worst level: the chosen model %.1f%%, the line %.1f%% (the model at most the line's, or 5%%)"
          % (100 * worst_m, 100 * worst_l))
    ck.ok("model-size", worst_m <= MODEL_TOL,
          "worst level: the chosen model %.1f%% (at most %.0f%%)" % (100 * worst_m, 100 * MODEL_TOL))
    said = "NO MODEL OF THE FAMILY FITS EVERY LEVEL WITHIN 5%" in text
    ck.ok("model", said == (worst_m > FIT_MODEL_LEVEL_FIT),
          "the headline %s that no model fits every level within 5%% (worst %.1f%%)"
          % ("says" if said else "does not say", 100 * worst_m))
    check_headline(ck, fit, text, said)
    if not expect_context:
        return
    k = [t for t in chosen.get("terms") or [] if t.get("term") == "K/1k"]
    ci = k[0].get("ci") if k else None
    ck.ok("model", bool(k) and ci is not None and ci[0] is not None and ci[0] > 0,
          "context term: c = %s ms per 1k context tokens, 95%% %s" % (fmt(k[0].get("coef")) if k else "-", ci))


def check_tokenize(ck, url, server, model):
    body = json.dumps(SERVERS[server]["tokenize"](" ".join(PROMPT_WORDS), model)).encode()
    req = urllib.request.Request(url + "/tokenize", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            toks = json.load(f).get("tokens", [])
    except Exception as e:  # the server is up: any failure here is one
        ck.ok("tokenize", False, "POST /tokenize: %s" % e)
        return
    ck.ok("tokenize", len(toks) == len(PROMPT_WORDS),
          "%d prompt words -> %d tokens %s" % (len(PROMPT_WORDS), len(toks), toks))


# Checks on figures the fit carries once the scraper and the records know
# llama-server's: each reads its key per level and says when it is absent.

def check_prompt_len(ck, run_dir, fit):
    with open(run_dir + "/records.jsonl") as f:
        run = json.loads(f.readline())
    tokens = run.get("config", {}).get("prompts", {}).get("tokens") or {}
    if tokens.get("dist") != "fixed" or run.get("config", {}).get("load", {}).get("vary_context"):
        ck.absent("prompts", "the run asked no fixed --prompt-tokens")
        return
    want, built, extra = tokens["value"], [], set()
    with open(run_dir + "/records.jsonl") as f:
        for line in f:
            r = json.loads(line) if '"type":"request"' in line else None
            if r and r.get("status") == "ok" and not r.get("warmup"):
                built.append(r.get("prompt_tok_target", 0))
                extra.add(r.get("usage", {}).get("prompt_tokens", -1) - built[-1])
    off = max((abs(b - want) for b in built), default=None)
    exact = sum(b == want for b in built)
    ck.ok("prompts", off is not None and off <= PROMPT_TOL_TOK,
          "%d of %d prompts built to exactly %d tokens, head inside (the rest within %s)"
          % (exact, len(built), want, off))
    chat = run.get("target", {}).get("endpoint") in ("chat", "responses")
    tmpl = [lv.get("prompt_tok_template") for lv in fit["levels"]]
    ck.ok("prompts", len(extra) == 1 and (not chat or all(t == min(extra) for t in tmpl)),
          "server's usage.prompt_tokens less the built length: %s for every request; the fit's "
          "chat template per level: %s" % (sorted(extra), tmpl if chat else "n/a (not chat)"))


def check_tpot(ck, fit, server):
    """Client TPOT p50 against the server's own (SERVERS' "tpot"), per level."""
    lv = fit.get("levels") or []
    if not any(x.get("server_tpot_ms") is not None for x in lv):
        ck.absent("tpot", "no server_tpot_ms in the fit: the server's per-request timings "
                  "are not on the records")
        for x in lv:
            print("  %-9s      C=%d: client TPOT p50 %s ms (server's: -)"
                  % ("", x["concurrency"], fmt(p50(x.get("tpot_ms")))))
        return
    for x in lv:
        cli, srv = p50(x.get("tpot_ms")), p50(x.get("server_tpot_ms"))
        if cli is None or srv is None or srv <= 0:
            ck.ok("tpot", False, "C=%d: client TPOT p50 %s ms, server %s ms"
                  % (x["concurrency"], fmt(cli), fmt(srv)))
            continue
        rel = cli / srv - 1
        ck.ok("tpot", abs(rel) <= TPOT_REL_TOL,
              "C=%d: client TPOT p50 %.3f ms, server %s %.3f ms: %+.2f%% (tol %.0f%%)"
              % (x["concurrency"], cli, SERVERS[server]["tpot"], srv, 100 * rel, 100 * TPOT_REL_TOL))


def check_ttft(ck, fit):
    """The server's own timing on every request, and its TTFT within the client's."""
    lv = fit.get("levels") or []
    if not any(x.get("server_ttft_ms") is not None for x in lv):
        ck.absent("ttft", "no server_ttft_ms in the fit: the server's per-request timings "
                  "are not on the records")
        return
    for x in lv:
        n, timed = x.get("n_ok"), x.get("server_timed")
        cli, srv = p50(x.get("ttft_ms")), x.get("server_ttft_ms")
        ck.ok("ttft", timed == n and cli is not None and srv is not None and srv <= cli + TTFT_SLACK_MS,
              "C=%d: %s of %s requests timed by the server; TTFT p50 client %s ms, server %s ms "
              "(beyond the server %s ms)" % (x["concurrency"], timed, n, fmt(cli), fmt(srv),
                                              fmt(x.get("ttft_beyond_server_ms"))))


def check_server_n(ck, fit):
    """The server's running requests (its /metrics) against the client's D = C."""
    lv = [x for x in fit.get("levels") or [] if x.get("closed_loop", True)]
    if not any(x.get("server_n") is not None for x in lv):
        ck.absent("server N", "no server_n in the fit: /metrics gave no running-requests "
                  "gauge the scraper knows")
        return
    for x in lv:
        c, n = x["concurrency"], x.get("server_n")
        tol = SERVER_N_TOL(c)
        ck.ok("server N", n is not None and abs(n - c) <= tol,
              "C=%d: client D %d, server N %s (tol %.2f, %s scrapes)"
              % (c, c, fmt(n), tol, x.get("server_scrapes")))


def check_cache_share(ck, fit, recs):
    """The share of prompt tokens the server served from its prompt cache
    (the fit's, from /metrics), per level; and the requests' own cached
    tokens (cached_tok on the records, from usage.prompt_tokens_details):
    their share agrees with the server's, and no request took more than
    CACHE_REQ_MAX of its prompt from the cache."""
    lv = fit.get("levels") or []
    per_req = {}
    for r in recs["request"]:
        if not r.get("warmup") and r.get("cached_tok") is not None and r.get("prompt_tok"):
            per_req.setdefault(r["level"], []).append((r["cached_tok"], r["prompt_tok"]))
    if not any(x.get("server_cache_share") is not None for x in lv):
        ck.absent("cache", "no server_cache_share in the fit")
        return
    for x in lv:
        s = x.get("server_cache_share")
        reqs = per_req.get(x["level"], [])
        c, p = sum(q[0] for q in reqs), sum(q[1] for q in reqs)
        ck.ok("cache", s is not None and s <= CACHE_SHARE_MAX,
              "C=%d: cached prompt share %s from /metrics (max %.2f); the requests' usage: %s of %d "
              "prompt tokens (fit cache_share %s)" % (x["concurrency"], fmt(s), CACHE_SHARE_MAX,
                                                     c if p else "-", p, fmt(x.get("cache_share"))))
        if not p:
            continue
        if s is not None:
            ck.ok("cache", abs(c / p - s) <= CACHE_SHARE_AGREE,
                  "C=%d: cached share, requests' usage %.3f vs server /metrics %.3f (tol %.2f)"
                  % (x["concurrency"], c / p, s, CACHE_SHARE_AGREE))
        worst = max(reqs, key=lambda q: q[0] / q[1])
        ck.ok("cache", worst[0] / worst[1] <= CACHE_REQ_MAX,
              "C=%d: most cached request: %d of %d prompt tokens (max share %.2f)"
              % (x["concurrency"], worst[0], worst[1], CACHE_REQ_MAX))


# The server's step from vLLM's histogram against its per-request figures:
# in docs/remote.md's runs (float32, C = 1..32, 64-token outputs) the step
# was within 2.0% of the requests' mean_itl_ms mean.
STEP_REL_TOL = 0.05
# Timing of one round per level, like TPOT: may be measured once more.
RETRIED = RETRIED | {"srv step"}


def check_server_step(ck, fit, recs):
    """vLLM's decode step from its /metrics beside its per-request figures."""
    lv = fit.get("levels") or []
    if not any(x.get("server_itl_mean_ms") is not None for x in lv):
        ck.absent("srv step", "no server_itl_mean_ms in the fit: /metrics gave no "
                  "inter-token-latency histogram the scraper knows")
        return
    per_req = {}
    for r in recs["request"]:
        t = (r.get("server") or {}).get("tpot_ms")
        if not r.get("warmup") and t is not None:
            per_req.setdefault(r["level"], []).append(t)
    for x in lv:
        c, step, own = x["concurrency"], x.get("server_step_ms"), per_req.get(x["level"])
        ref = sum(own) / len(own) if own else None
        ck.ok("srv step", step is not None and ref and abs(step / ref - 1) <= STEP_REL_TOL,
              "C=%d: server step %s ms (its ITL histogram), the requests' mean_itl_ms mean %s ms "
              "(tol %.0f%%)" % (c, fmt(step), fmt(ref), 100 * STEP_REL_TOL))


# The client's ITL mean against vLLM's histogram over one window: from the
# first scrape inside a level to its last (so no other level's tokens count
# on either side). A gap is between two chunks that carry tokens (a chunk of
# n tokens stands for n gaps of 1/n its interval), counted when its later
# chunk arrived inside the window; vLLM counts a gap when its engine emits
# the token. So the counts agree but for the tokens in flight during the
# window's two scrapes (up to 3% of them when a scrape takes 50 ms). The
# means agreed within 0.4% at every level of the suite on a quiet machine,
# and missed by up to 3.5% with a compiler on the other core: the API
# server streams on one Python loop, which also renders /metrics (~400
# series every 0.2 s here), so the client's first token of a request comes
# later than vLLM's stamp by a varying amount, and shortens its gaps' sum.
ITL_WINDOW_TOL = 0.04
RETRIED = RETRIED | {"itl"}


def check_itl_window(ck, fit, recs):
    ser = recs["itl"]
    ts = sorted(t for t in ser["sum"] if t in ser["count"])
    if not ts:
        ck.absent("itl", "no %s{sum,count} metric records" % ITL_SERIES)
        return
    ends = {e["level"]: e["end_ns"] for e in recs["level_end"]}
    conc = {x["level"]: x["concurrency"] for x in fit.get("levels") or []}
    for lv in recs["level"]:
        n = lv["level"]
        w = [t for t in ts if lv["start_ns"] <= t <= ends.get(n, -1)]
        if len(w) < 2:
            ck.absent("itl", "C=%s: fewer than two scrapes inside the level" % conc.get(n))
            continue
        a, b = w[0], w[-1]
        dc = ser["count"][b] - ser["count"][a]
        srv = 1000 * (ser["sum"][b] - ser["sum"][a]) / dc if dc > 0 else None
        gaps, total = 0, 0.0
        for r in recs["request"]:
            if r["level"] != n:
                continue
            prev = None
            for ch in chunks_of(r):
                if ch[1] <= 0:
                    continue
                if prev is not None and a < ch[0] <= b:
                    gaps += ch[1]
                    total += (ch[0] - prev) / 1e6
                prev = ch[0]
        cli = total / gaps if gaps else None
        ck.ok("itl", cli and srv and abs(cli / srv - 1) <= ITL_WINDOW_TOL,
              "C=%s: ITL mean over the same %.1f s window: client %s ms (%d gaps), vLLM's histogram %s ms "
              "(%d) (tol %.0f%%)" % (conc.get(n), (b - a) / 1e9, fmt(cli), gaps, fmt(srv), dc,
                                    100 * ITL_WINDOW_TOL))


def p50(v):
    if isinstance(v, dict):
        return v.get("p50")
    return v


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("fit_json")
    ap.add_argument("fit_text")
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--levels", required=True)
    ap.add_argument("--url")
    ap.add_argument("--server", choices=sorted(SERVERS), default="llama.cpp")
    ap.add_argument("--model", help="the model name (vLLM's /tokenize asks for it)")
    ap.add_argument("--expect-context", action="store_true")
    ap.add_argument("--expect-outputs", action="store_true")
    a = ap.parse_args()
    levels = [int(c) for c in a.levels.split(",")]
    recs = read_records(a.run_dir + "/records.jsonl")
    with open(a.fit_json) as f:
        fit = json.load(f)
    with open(a.fit_text) as f:
        text = f.read()

    ck = Checks()
    print("checks (client beside server):")
    check_sweep(ck, recs, levels)
    check_tokens(ck, recs, a.max_tokens)
    if a.expect_outputs:
        check_outputs(ck, recs, a.max_tokens, a.server)
    check_fit(ck, fit, text, levels)
    check_model(ck, fit, text, a.expect_context)
    if a.url:
        check_tokenize(ck, a.url, a.server, a.model)
    check_prompt_len(ck, a.run_dir, fit)
    print("  %-9s      %d metric records scraped from the server" % ("", recs["metric"]))
    check_tpot(ck, fit, a.server)
    check_ttft(ck, fit)
    check_server_n(ck, fit)
    check_cache_share(ck, fit, recs)
    if a.server == "vllm":
        check_server_step(ck, fit, recs)
        check_itl_window(ck, fit, recs)
    if ck.pending:
        print("not checked (keys absent): %s" % ", ".join(dict.fromkeys(ck.pending)))
    if ck.failed:
        print("FAILED: %s" % ", ".join(dict.fromkeys(ck.failed)))
        return 3 if set(ck.failed) <= RETRIED else 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
