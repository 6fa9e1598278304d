/* cache_reset.c: the server's prefix cache before each level (load.cache,
 * --cache; lg_internal.h lg_cache_before_level).
 *
 * Why: a prefix cache carries state from level to level and from run to
 * run. Fresh prompts keep a plain sweep's requests apart, but shared
 * prefixes, multi-turn sessions and traces fill the cache by design, so the
 * level after a large one would start warm and its TTFT would be the
 * cache's, not the load's. So each level starts from an empty cache where
 * the server can be told to forget it, and every level record says what was
 * done and whether the server confirmed it.
 *
 * How, per server (told from its /metrics once, server_root.c):
 *   vLLM and the bundled engine: POST /reset_prefix_cache, confirmed by
 *     {"success":true}. vLLM serves it only with VLLM_SERVER_DEV_MODE=1 (a
 *     404 otherwise), and answers false while blocks are still held, so a
 *     refusal is retried a few times.
 *   SGLang: POST /flush_cache, confirmed by a 2xx (a 400 while requests run).
 *   llama.cpp: GET /slots (served unless --no-slots), then POST
 *     /slots/{id}?action=erase for each slot, confirmed when every one is 2xx.
 * "auto" resets where the server is one of these and keeps elsewhere (a
 * 404 counts as elsewhere: the route is not served), and after a refusal
 * keeps for the rest of the run (said per level);
 * "reset" asks every level, and on a server /metrics does not name tries
 * vLLM's, then SGLang's spelling; "keep" never asks.
 *
 * The reset is sent after the level before has ended and before this
 * level's first request (run.c: after an A/B side's turn is granted, so the
 * other side never measures while it happens; under K ranks before the
 * ranks agree on the start, so no rank sends while it happens). */
#include "lg_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define CACHE_TIMEOUT_MS 30000L
#define CACHE_REPLY_BYTES 512
/* vLLM refuses while blocks are held (the last level's aborted requests
 * being freed): tries, this far apart. */
#define CACHE_TRIES 3
#define CACHE_RETRY_NS 200000000L
/* llama.cpp: slots erased at most (GET /slots lists them). */
#define CACHE_MAX_SLOTS 1024

/* One request: status and reply into c (the reply's start as its note when
 * refused); 1 when it was answered with a 2xx. */
static int post(lg_run *r, const char *path, ll_rec_cache *c, ll_buf *resp)
{
    char err[320] = "";
    long status = 0;
    int rc = lg_root_ask(r, path, "", CACHE_TIMEOUT_MS, CACHE_REPLY_BYTES, resp, &status, err, sizeof err);
    c->status = (int)status;
    if (rc)
        snprintf(c->note, sizeof c->note, "%s: %s", path, err);
    else if (status < 200 || status >= 300)
        snprintf(c->note, sizeof c->note, "HTTP %ld: %.120s", status, resp->p ? resp->p : "");
    return rc == 0 && status >= 200 && status < 300;
}

/* vLLM's (and the bundled engine's) POST /reset_prefix_cache. */
static void reset_vllm(lg_run *r, ll_rec_cache *c)
{
    ll_buf resp = {0};
    snprintf(c->how, sizeof c->how, "POST /reset_prefix_cache");
    for (int i = 0; i < CACHE_TRIES && !c->done; i++) {
        if (i)
            nanosleep(&(struct timespec){0, CACHE_RETRY_NS}, NULL);
        if (!post(r, "/reset_prefix_cache", c, &resp))
            break; /* not offered, or not reachable: no retry helps */
        cJSON *o = cJSON_ParseWithOpts(resp.p ? resp.p : "", NULL, 0);
        c->done = o && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "success"));
        cJSON_Delete(o);
        snprintf(c->note, sizeof c->note, "%.120s", resp.p ? resp.p : "");
    }
    if (c->status == 404)
        snprintf(c->note, sizeof c->note, "HTTP 404: not offered (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)");
    ll_buf_free(&resp);
}

static void reset_sglang(lg_run *r, ll_rec_cache *c)
{
    ll_buf resp = {0};
    snprintf(c->how, sizeof c->how, "POST /flush_cache");
    c->done = post(r, "/flush_cache", c, &resp);
    if (c->done)
        snprintf(c->note, sizeof c->note, "%.120s", resp.p ? resp.p : "");
    ll_buf_free(&resp);
}

/* llama.cpp: every slot GET /slots lists, erased. */
static void reset_llamacpp(lg_run *r, ll_rec_cache *c)
{
    char err[320] = "", path[64];
    ll_buf resp = {0};
    long status = 0;
    snprintf(c->how, sizeof c->how, "POST /slots/{id}?action=erase");
    int rc = lg_root_ask(r, "/slots", NULL, CACHE_TIMEOUT_MS, 1 << 20, &resp, &status, err, sizeof err);
    cJSON *slots = rc == 0 && status == 200 ? cJSON_ParseWithOpts(resp.p ? resp.p : "", NULL, 0) : NULL;
    c->status = (int)status;
    if (!cJSON_IsArray(slots)) {
        snprintf(c->note, sizeof c->note, "GET /slots: %s: the server lists no slots (llama-server --slots)",
                 rc ? err : status != 200 ? "refused" : "not a list");
        goto out;
    }
    int n = cJSON_GetArraySize(slots), ok = 0;
    for (int i = 0; i < n && i < CACHE_MAX_SLOTS; i++) {
        int id = (int)ll_json_num(cJSON_GetArrayItem(slots, i), "id", i);
        snprintf(path, sizeof path, "/slots/%d?action=erase", id);
        ok += post(r, path, c, &resp);
    }
    c->slots = n;
    c->done = n > 0 && ok == n;
    if (c->done)
        snprintf(c->note, sizeof c->note, "%d slots erased", n);
out:
    cJSON_Delete(slots);
    ll_buf_free(&resp);
}

/* load.cache "reset" on a server /metrics does not name: vLLM's spelling,
 * then SGLang's where the first is not there. */
static void reset_unknown(lg_run *r, ll_rec_cache *c)
{
    reset_vllm(r, c);
    if (!c->done && (c->status == 404 || c->status == 405))
        reset_sglang(r, c);
}

static void say(const lg_run *r, int level, const ll_rec_cache *c)
{
    if (!c->action_reset)
        fprintf(stderr, "loadlaw: level %d: prefix cache kept (%s%s%s)\n", level,
                r->scn->cache == SCN_CACHE_KEEP ? "--cache keep" : c->how, c->how[0] ? ": " : "", c->note);
    else if (c->done)
        fprintf(stderr, "loadlaw: level %d: prefix cache reset (%s, HTTP %d)\n", level, c->how, c->status);
    else
        ll_warn("level %d: the prefix cache may be warm: %s was not confirmed: %s", level, c->how, c->note);
}

void lg_cache_before_level(lg_run *r, int level)
{
    ll_rec_cache *c = &r->cache;
    memset(c, 0, sizeof *c);
    if (r->rank != 0)
        return; /* rank 0's level line is the level's */
    c->present = 1;
    c->asked = scn_cache_names[r->scn->cache];
    if (r->scn->cache != SCN_CACHE_KEEP && !r->cache_told) {
        r->cache_srv = lg_root_server(r);
        r->cache_told = 1;
    }
    ll_srv s = r->scn->cache == SCN_CACHE_KEEP ? LL_SRV__COUNT : r->cache_srv;
    if (s != LL_SRV__COUNT)
        snprintf(c->server, sizeof c->server, "%s", ll_srv_name(s));
    int offered = s == LL_SRV_LOADLAW || s == LL_SRV_VLLM || s == LL_SRV_SGLANG || s == LL_SRV_LLAMACPP;
    if (r->scn->cache == SCN_CACHE_AUTO && (!offered || r->cache_refused)) {
        snprintf(c->note, sizeof c->note, "%s",
                 r->cache_refused ? "the server refused a reset before: auto keeps it from then on"
                                  : "auto: the server's /metrics names none with a known reset (vLLM, SGLang, "
                                    "llama.cpp, loadlaw serve)");
    } else if (r->scn->cache != SCN_CACHE_KEEP) {
        c->action_reset = 1;
        if (s == LL_SRV_SGLANG)
            reset_sglang(r, c);
        else if (s == LL_SRV_LLAMACPP)
            reset_llamacpp(r, c);
        else if (offered)
            reset_vllm(r, c);
        else
            reset_unknown(r, c);
        r->cache_refused = !c->done && r->scn->cache == SCN_CACHE_AUTO;
        /* auto on a server without the route (vLLM outside its dev mode,
         * llama.cpp with --no-slots): not offered, so kept, not a warning */
        if (r->cache_refused && (c->status == 404 || c->status == 405 || c->status == 501))
            c->action_reset = 0;
    }
    say(r, level, c);
}
