/* profile_hook.c: the profile hook's requests (lg_internal.h lg_prof): the
 * server's profiler API told from its /metrics before the level, POST
 * /start_profile once in the level, the moment every in-flight request is
 * decoding (run.c watch_level decides when), and after the level's end is
 * stamped POST /stop_profile (vLLM's form), the wait (profile_wait.c) and
 * the profile record.
 *
 * They go beside /metrics at the server's root (server_root.c: lg_root_ask,
 * with the run's key: a server with a key guards its control endpoints too).
 * Each keeps the first 1 KiB of the answer, the part a record or a warning
 * shows.
 *
 * A profiler slows the server while it captures and stalls it while it
 * writes: vLLM exports the torch trace inside its worker, between two steps
 * (3 min for 32 MB on its CPU backend), and answers /stop_profile only when
 * that is done; SGLang writes after its num_steps by itself. So the capture
 * is bounded by steps where the server takes a bound (SGLang's num_steps,
 * vLLM's max_iterations), the level is marked profiled (its level_end; fit
 * leaves it out of the law), and the next level starts only once the trace
 * files stopped growing and a probe request is back at the pace it had
 * before the capture (profile_wait.c). The stop waits up to
 * PROFILE_STOP_TIMEOUT_MS, saying so on stderr. */
#include "lg_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect.h"

#define PROFILE_TIMEOUT_MS 10000L
/* vLLM's own advice for a long flush is VLLM_RPC_TIMEOUT of 30 min. */
#define PROFILE_STOP_TIMEOUT_MS (30L * 60 * 1000)
/* The reference pace: the quickest of this many probes. */
#define PROFILE_REF_PROBES 3

/* style "auto": SGLang's form for SGLang and the bundled engine (whose
 * answer names the file it wrote), vLLM's for vLLM and for a server that
 * says neither (its stop bounds a capture that no step count bounded). */
static scn_profile_style resolve_style(const lg_run *r, int level)
{
    ll_srv s = lg_root_server(r);
    if (s != LL_SRV_LOADLAW && s != LL_SRV_VLLM && s != LL_SRV_SGLANG)
        s = LL_SRV__COUNT; /* a profiler API not known: vLLM's form */
    scn_profile_style st = s == LL_SRV_SGLANG || s == LL_SRV_LOADLAW ? SCN_PROFILE_SGLANG : SCN_PROFILE_VLLM;
    fprintf(stderr, "loadlaw: level %d: profile style %s (%s)\n", level, st == SCN_PROFILE_SGLANG ? "sglang" : "vllm",
            s == LL_SRV__COUNT ? "no server named by its /metrics" : ll_srv_name(s));
    return st;
}

static void prepare(lg_run *r, const lg_level_ctx *L, lg_prof *p)
{
    memset(p, 0, sizeof *p);
    p->style = L->lv->profile.style;
    if (p->style == SCN_PROFILE_AUTO)
        p->style = resolve_style(r, L->index);
    if (r->profile_dir)
        lg_prof_scan(r->profile_dir, &p->before);
    /* The server is idle between levels: the quickest of a few probes is
     * its pace, the one the wait after the capture comes back to. */
    p->probe_ref_ms = NAN;
    if (!(L->lv->profile.pace_wait_s > 0))
        return; /* no probe asked for */
    /* as many at once as the next level will send (the last level: its own) */
    const scn_level *next = (size_t)L->index + 1 < r->n_levels ? &r->levels[L->index + 1] : L->lv;
    p->burst = next->concurrency < 1 ? 1 : next->concurrency > LG_PROF_BURST_MAX ? LG_PROF_BURST_MAX
                                                                               : next->concurrency;
    for (int i = 0; i < PROFILE_REF_PROBES; i++) {
        double ms = lg_prof_probe(r, p->burst);
        if (isfinite(ms) && !(ms >= p->probe_ref_ms))
            p->probe_ref_ms = ms;
    }
    if (!isfinite(p->probe_ref_ms))
        ll_warn("level %d: the probe request before the capture failed: the next level will not wait for the "
                "server's pace", L->index);
}

/* Rank 0 prepares a profiled level's hook (the idle server probed,
 * profile_hook.c) while it is still its turn: before the first level, or at
 * the end of the level before it, so an interleaved A/B's other side never
 * measures while this side probes, and K ranks agree on a level's start
 * after it. *prepared: the level it was done for. */
int lg_profile_prepare_level(lg_run *r, size_t i, lg_prof **prof, int *prepared, char *err, size_t errlen)
{
    if (i >= r->n_levels || !r->levels[i].profile.enabled || r->rank != 0 ||
        atomic_load(&r->stop_issue) || r->stopped_after >= 0)
        return 0;
    if (!*prof && !(*prof = malloc(sizeof **prof))) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    prepare(r, &(lg_level_ctx){.index = (int)i, .lv = &r->levels[i]}, *prof);
    *prepared = (int)i;
    return 0;
}

void lg_profile_start(lg_run *r, const lg_level_ctx *L, lg_prof *p)
{
    char body[96] = "", err[320] = "";
    ll_buf resp = {0};
    long status = 0;
    p->t_ns = ll_now_ns() - r->epoch_ns;
    /* SGLang's num_steps; vLLM (0.32 and later) takes max_iterations, after
     * which its worker stops by itself, and ignores it where older. */
    snprintf(body, sizeof body, p->style == SCN_PROFILE_SGLANG ? "{\"num_steps\":%d}" : "{\"max_iterations\":%d}",
             L->lv->profile.num_steps);
    int rc = lg_root_ask(r, "/start_profile", body, PROFILE_TIMEOUT_MS, LG_PROF_REPLY_BYTES, &resp, &status, err,
                         sizeof err);
    p->started = 1;
    p->http_status = (int)status;
    p->ok = rc == 0 && status >= 200 && status < 300;
    snprintf(p->detail, sizeof p->detail, "%s", rc ? err : resp.p ? resp.p : "");
    /* the bundled engine's answer names the file it wrote */
    cJSON *d = p->ok ? cJSON_ParseWithOpts(p->detail, NULL, 0) : NULL;
    const char *path = d ? ll_json_str(d, "path", NULL) : NULL;
    if (path && p->wrote.n < LG_PROF_MAX_FILES)
        snprintf(p->wrote.f[p->wrote.n++].path, sizeof p->wrote.f[0].path, "%s", path);
    cJSON_Delete(d);
    ll_buf_free(&resp);
}

/* vLLM's form: its profiler runs until max_iterations steps or POST
 * /stop_profile, and writes its trace then. Sent whether or not the worker
 * stopped by itself (a stop then is a no-op that waits for the write to
 * end). Its seconds, NAN when it failed (said on stderr). */
static double stop(lg_run *r, int level)
{
    char err[320] = "";
    ll_buf resp = {0};
    long status = 0;
    int64_t t0 = ll_now_ns();
    fprintf(stderr, "loadlaw: level %d: POST /stop_profile: waiting for the server to write its trace (at most %ld min)\n",
            level, PROFILE_STOP_TIMEOUT_MS / 60000);
    int rc = lg_root_ask(r, "/stop_profile", "", PROFILE_STOP_TIMEOUT_MS, LG_PROF_REPLY_BYTES, &resp, &status, err,
                         sizeof err);
    double s = (double)(ll_now_ns() - t0) / 1e9;
    ll_buf_free(&resp);
    if (rc || status < 200 || status >= 300) {
        ll_warn("POST /stop_profile after %.1f s: %s", s, rc ? err : "the server refused it (HTTP status not 2xx)");
        return NAN;
    }
    fprintf(stderr, "loadlaw: level %d: /stop_profile answered in %.1f s\n", level, s);
    return s;
}

/* Where each trace went, on stderr (the record has them too). */
static void say_files(int level, const lg_prof_files *w)
{
    if (w->n == 0)
        fprintf(stderr, "loadlaw: level %d: no trace file seen (give --profile-dir: the server's trace folder)\n",
                level);
    for (size_t i = 0; i < w->n; i++)
        fprintf(stderr, "loadlaw: level %d: trace %s (%.1f MB)\n", level, w->f[i].path, (double)w->f[i].bytes / 1e6);
}

void lg_profile_finish(lg_run *r, const lg_level_ctx *L, lg_prof *p)
{
    const char *paths[LG_PROF_MAX_FILES];
    int64_t bytes[LG_PROF_MAX_FILES];
    int64_t t0 = ll_now_ns();
    double stop_s = NAN, last_ms = NAN;
    int settled = 0;
    if (!p->started)
        return;
    if (p->ok && p->style == SCN_PROFILE_VLLM)
        stop_s = stop(r, L->index);
    if (p->ok) {
        lg_prof_wait_files(r, L->index, p);
        say_files(L->index, &p->wrote);
        settled = lg_prof_wait_pace(r, L->index, L->lv->profile.pace_wait_s, p, &last_ms);
    }
    for (size_t i = 0; i < p->wrote.n; i++) {
        paths[i] = p->wrote.f[i].path;
        bytes[i] = p->wrote.f[i].bytes;
    }
    int64_t done = ll_now_ns();
    ll_rec_profile pr = {
        .level = L->index, .t_ns = p->t_ns, .num_steps = L->lv->profile.num_steps,
        .style = p->style == SCN_PROFILE_SGLANG ? "sglang" : "vllm", .http_status = p->http_status, .ok = p->ok,
        .detail = p->detail, .has_wait = 1, .stop_s = stop_s, .wait_s = (double)(done - t0) / 1e9,
        .done_ns = done - r->epoch_ns, .probe_ref_ms = p->probe_ref_ms, .probe_ms = last_ms, .settled = settled,
        .n_files = p->wrote.n, .files = paths, .file_bytes = bytes,
    };
    if (ll_rec_put_profile(r->rec, &pr))
        ll_warn("queueing the profile record failed");
}
