/* profile_hook.c: the profile hook's requests (lg_internal.h): POST
 * /start_profile once in a level, the moment every in-flight request is
 * decoding (run.c watch_level decides when), and for vLLM's form POST
 * /stop_profile when the level ends.
 *
 * Both go beside /metrics at the server's root (a base's "/v1" is not its
 * root), on the driver thread, through common's one-shot HTTP helper
 * (http1.h) with the run's key: a server with a key guards its control
 * endpoints too (vLLM, `loadlaw serve --api-key`). Each is bounded by 10 s
 * and keeps the first 1 KiB of the answer, the part a record or a warning
 * shows. */
#include "lg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "http1.h"

#define PROFILE_TIMEOUT_MS 10000L
#define PROFILE_REPLY_BYTES 1024

/* POST body to the server's root + path: 0 when an answer came (its
 * status in *status, its first 1 KiB in resp), else an error code and
 * libcurl's words in err. */
static int post(const lg_run *r, const char *path, const char *body, ll_buf *resp, long *status, char *err,
                size_t errlen)
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
                           .max_bytes = PROFILE_REPLY_BYTES, .keep_head = 1, .timeout_ms = PROFILE_TIMEOUT_MS};
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
    if (p->style == SCN_PROFILE_SGLANG) /* vLLM's takes no body */
        snprintf(body, sizeof body, "{\"num_steps\":%d}", p->num_steps);
    int rc = post(r, "/start_profile", body, &resp, &status, err, sizeof err);
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

/* vLLM's form of the hook has no step count: its profiler runs until POST
 * /stop_profile and writes its trace then. The driver sends it when the
 * level ends (watch_level): the capture is the level's steady part to its
 * end, whatever num_steps says (the client sees tokens only as requests
 * finish, too coarse to count steps by). A failure is said, not recorded:
 * the start's record stands for the capture. */
void lg_profile_stop(lg_run *r)
{
    char err[320] = "";
    ll_buf resp = {0};
    long status = 0;
    int rc = post(r, "/stop_profile", "", &resp, &status, err, sizeof err);
    if (rc || status < 200 || status >= 300)
        ll_warn("POST /stop_profile: %s", rc ? err : "the server refused it (HTTP status not 2xx)");
    ll_buf_free(&resp);
}
