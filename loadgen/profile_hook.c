/* profile_hook.c: the profile hook's requests (lg_internal.h): POST
 * /start_profile once in a level, the moment every in-flight request is
 * decoding (run.c watch_level decides when), and for vLLM's form POST
 * /stop_profile when the level ends.
 *
 * Both go beside /metrics at the server's root (a base's "/v1" is not its
 * root), on the driver thread, through common's one-shot HTTP helper
 * (http1.h) with the run's key: a server with a key guards its control
 * endpoints too (vLLM, `loadlaw serve --api-key`). Each keeps the first
 * 1 KiB of the answer, the part a record or a warning shows.
 *
 * A profiler that writes its trace stalls the server while it writes: vLLM
 * exports the torch trace inside its worker, between two steps (3 min for
 * 32 MB on its CPU backend), and answers /stop_profile only when that is
 * done. So the stop is not bounded by the start's 10 s: it waits up to
 * PROFILE_STOP_TIMEOUT_MS, saying so on stderr, and is sent after the
 * level's end is stamped and before the next level starts (run.c), so no
 * level is measured against a server still writing. */
#include "lg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http1.h"

#define PROFILE_TIMEOUT_MS 10000L
/* vLLM's own advice for a long flush is VLLM_RPC_TIMEOUT of 30 min. */
#define PROFILE_STOP_TIMEOUT_MS (30L * 60 * 1000)
#define PROFILE_REPLY_BYTES 1024

/* POST body to the server's root + path: 0 when an answer came (its
 * status in *status, its first 1 KiB in resp), else an error code and
 * libcurl's words in err. */
static int post(const lg_run *r, const char *path, const char *body, long timeout_ms, ll_buf *resp, long *status,
                char *err, size_t errlen)
{
    size_t un = strlen(r->url_base) + strlen(path) + 2;
    char *url = malloc(un);
    int rc;
    *status = 0;
    if (!url) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    if ((rc = ll_url_join(r->url_base, "/v1", path, url, un)) == 0) {
        ll_http1_opts o = {.url = url, .content_type = "application/json", .api_key = r->api_key,
                           .max_bytes = PROFILE_REPLY_BYTES, .keep_head = 1, .timeout_ms = timeout_ms};
        rc = ll_http1_once(&o, body, resp, status, err, errlen);
    } else {
        ll_errf(err, errlen, "the URL is too long");
    }
    free(url);
    return rc;
}

void lg_profile_start(lg_run *r, const lg_level_ctx *L)
{
    const scn_profile *p = &L->lv->profile;
    char body[64] = "", err[320] = "";
    ll_buf resp = {0};
    long status = 0;
    int64_t t = ll_now_ns();
    /* SGLang's num_steps; vLLM (0.32 and later) takes max_iterations, after
     * which its worker stops by itself, and ignores it where older. */
    snprintf(body, sizeof body, p->style == SCN_PROFILE_SGLANG ? "{\"num_steps\":%d}" : "{\"max_iterations\":%d}",
             p->num_steps);
    int rc = post(r, "/start_profile", body, PROFILE_TIMEOUT_MS, &resp, &status, err, sizeof err);
    ll_rec_profile pr = {
        .level = L->index,
        .t_ns = t - r->epoch_ns,
        .num_steps = p->num_steps,
        .style = p->style == SCN_PROFILE_SGLANG ? "sglang" : "vllm",
        .http_status = (int)status,
        .ok = rc == 0 && status >= 200 && status < 300,
        .detail = rc ? err : resp.p ? resp.p : "",
    };
    if (ll_rec_put_profile(r->rec, &pr))
        ll_warn("queueing the profile record failed");
    ll_buf_free(&resp);
}

/* vLLM's form of the hook: its profiler runs until max_iterations steps or
 * POST /stop_profile, and writes its trace then. The driver sends the stop
 * when the level has ended (run.c), whether or not the worker stopped by
 * itself (a stop then is a no-op that waits for the write to end). A
 * failure is said, not recorded: the start's record stands for the
 * capture. */
void lg_profile_stop(lg_run *r, int level)
{
    char err[320] = "";
    ll_buf resp = {0};
    long status = 0;
    int64_t t0 = ll_now_ns();
    fprintf(stderr, "loadlaw: level %d: POST /stop_profile: waiting for the server to write its trace (at most %ld min)\n",
            level, PROFILE_STOP_TIMEOUT_MS / 60000);
    int rc = post(r, "/stop_profile", "", PROFILE_STOP_TIMEOUT_MS, &resp, &status, err, sizeof err);
    double s = (double)(ll_now_ns() - t0) / 1e9;
    if (rc || status < 200 || status >= 300)
        ll_warn("POST /stop_profile after %.1f s: %s", s, rc ? err : "the server refused it (HTTP status not 2xx)");
    else
        fprintf(stderr, "loadlaw: level %d: the server's trace was written in %.1f s; the next level starts after it\n",
                level, s);
    ll_buf_free(&resp);
}
