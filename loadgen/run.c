/* run.c: a sweep: the run record, levels back to back, the driver's wait
 * (progress line, profile hook), interruption and results.
 *
 * DESIGN: the driver thread starts the level's workers and then only watches
 * shared atomics every millisecond: to print progress and to fire the profile
 * hook the moment every in-flight request of the level is decoding. It joins
 * the workers and merges their results (stats.c) once they have drained. */
#include "lg_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *lg_err_class_name(lg_err_class c)
{
    static const char *const names[LG_ERR__COUNT] = {"ok",        "http_4xx", "http_5xx", "stream_error", "truncated",
                                                     "timeout",   "connect",  "reset",    "other"};
    return (unsigned)c < LG_ERR__COUNT ? names[c] : "other";
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int write_run_line(lg_run *r, const lg_config *cfg)
{
    char host[256] = "unknown";
    cJSON *o = cJSON_CreateObject(), *t;
    int rc = LL_ENOMEM;
    if (!o)
        return LL_ENOMEM;
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    cJSON_AddStringToObject(o, "type", "run");
    cJSON_AddNumberToObject(o, "schema", LL_RECORDS_SCHEMA);
    cJSON_AddStringToObject(o, "tool", "loadlaw");
    cJSON_AddStringToObject(o, "version", LOADLAW_VERSION);
    /* epoch_wall_ns: the wall clock at the epoch, a label only. */
    char wall[32];
    snprintf(wall, sizeof wall, "%" PRId64, ll_wall_ns() - (ll_now_ns() - r->epoch_ns));
    cJSON_AddRawToObject(o, "epoch_wall_ns", wall); /* an integer: a double would round it */
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddNumberToObject(o, "ranks", 1);
    cJSON_AddNumberToObject(o, "threads", r->nthreads);
    if (!(t = cJSON_AddObjectToObject(o, "target")))
        goto out;
    cJSON_AddStringToObject(t, "url", r->url_base);
    cJSON_AddStringToObject(t, "model", r->model);
    cJSON_AddStringToObject(t, "endpoint", r->scn->endpoint == SCN_ENDPOINT_CHAT ? "chat" : "completions");
    cJSON_AddBoolToObject(t, "bundled", cfg->engine_spec != NULL);
    if (cfg->engine_spec)
        cJSON_AddStringToObject(o, "engine", cfg->engine_spec);
    else
        cJSON_AddNullToObject(o, "engine");
    if (cfg->engine_law) {
        cJSON *law = cJSON_Duplicate(cfg->engine_law, 1);
        if (!law)
            goto out;
        cJSON_AddItemToObject(o, "engine_law", law);
    } else {
        cJSON_AddNullToObject(o, "engine_law");
    }
    if (cfg->scenario_name)
        cJSON_AddStringToObject(o, "scenario", cfg->scenario_name);
    else
        cJSON_AddNullToObject(o, "scenario");
    cJSON *c = scn_to_json(r->scn);
    if (!c)
        goto out;
    cJSON_AddItemToObject(o, "config", c);
    rc = ll_jsonl_write(r->rec, o);
out:
    cJSON_Delete(o);
    return rc;
}

int lg_run_create(const lg_config *cfg, lg_run **out, char *err, size_t errlen)
{
    lg_run *r = calloc(1, sizeof *r);
    char path[4096];
    int rc = LL_ENOMEM;
    if (!r)
        return LL_ENOMEM;
    if (!cfg->scn || !cfg->prompts || !cfg->url || !cfg->model || !cfg->run_dir) {
        ll_errf(err, errlen, "lg_run_create: scenario, prompts, url, model and run_dir are required");
        rc = LL_EINVAL;
        goto fail;
    }
    r->scn = cfg->scn;
    r->prompts = cfg->prompts;
    r->on_level_end = cfg->on_level_end;
    r->cb_ctx = cfg->cb_ctx;
    r->progress = cfg->progress;
    size_t ul = strlen(cfg->url);
    while (ul && cfg->url[ul - 1] == '/')
        ul--;
    if (!(r->url_base = strndup(cfg->url, ul)) || !(r->model = strdup(cfg->model)) ||
        !(r->run_dir = strdup(cfg->run_dir)) || (cfg->api_key && !(r->api_key = dup_or_null(cfg->api_key))))
        goto fail;
    /* A base URL that already names the API root ("…/v1") is not doubled. */
    const char *ep = cfg->scn->endpoint == SCN_ENDPOINT_CHAT ? "/chat/completions" : "/completions";
    int has_v1 = ul >= 3 && strncmp(r->url_base + ul - 3, "/v1", 3) == 0;
    snprintf(path, sizeof path, "%s%s%s", r->url_base, has_v1 ? "" : "/v1", ep);
    if (!(r->url_full = strdup(path)))
        goto fail;
    r->nthreads = cfg->threads > 0 ? cfg->threads : cfg->scn->threads;
    if (r->nthreads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        r->nthreads = n > 0 ? (int)n : 1;
    }
    if ((rc = ll_mkdir_p(r->run_dir, err, errlen)))
        goto fail;
    snprintf(path, sizeof path, "%s/records.jsonl", r->run_dir);
    if ((rc = ll_jsonl_open(path, 0, &r->rec, err, errlen)))
        goto fail;
    r->epoch_ns = ll_now_ns();
    if (!(r->workers = calloc((size_t)r->nthreads, sizeof *r->workers))) {
        rc = LL_ENOMEM;
        goto fail;
    }
    for (int i = 0; i < r->nthreads; i++)
        if ((rc = lg_worker_init(&r->workers[i], r, i, err, errlen)))
            goto fail;
    if ((rc = write_run_line(r, cfg))) {
        ll_errf(err, errlen, "%s: writing the run record: %s", path, ll_strerror(rc));
        goto fail;
    }
    *out = r;
    return 0;
fail:
    lg_run_free(r);
    return rc;
}

int lg_run_free(lg_run *r)
{
    int rc = 0;
    if (!r)
        return 0;
    if (r->workers)
        for (int i = 0; i < r->nthreads; i++)
            lg_worker_free(&r->workers[i]);
    free(r->workers);
    rc = ll_jsonl_close(r->rec);
    if (r->api_key)
        memset(r->api_key, 0, strlen(r->api_key));
    free(r->api_key);
    free(r->url_full);
    free(r->url_base);
    free(r->model);
    free(r->run_dir);
    free(r->levels);
    free(r);
    return rc;
}

void lg_run_interrupt(lg_run *r, double drain_s)
{
    int64_t at = ll_now_ns() + (int64_t)(drain_s * 1e9);
    long long zero = 0;
    atomic_store(&r->interrupted, 1);
    atomic_store(&r->stop_issue, 1);
    atomic_compare_exchange_strong(&r->abort_at_ns, &zero, at > 0 ? at : 1);
    for (int i = 0; i < r->nthreads; i++)
        if (r->workers[i].multi && curl_multi_wakeup(r->workers[i].multi) != CURLM_OK)
            ll_warn("curl_multi_wakeup failed; worker %d notices within 100 ms", i); /* it polls at most 100 ms */
}

int lg_run_interrupted(const lg_run *r) { return atomic_load(&r->interrupted); }
int64_t lg_run_epoch_ns(const lg_run *r) { return r->epoch_ns; }
const char *lg_run_dir(const lg_run *r) { return r->run_dir; }
int lg_run_write_record(lg_run *r, const cJSON *obj) { return ll_jsonl_write(r->rec, obj); }

const lg_level_summary *lg_run_levels(const lg_run *r, size_t *n)
{
    *n = r->n_levels;
    return r->levels;
}

/* The profile hook: POST /start_profile once, record when and what came back. */
static size_t sink(char *p, size_t sz, size_t nm, void *ud)
{
    ll_buf *b = ud;
    if (b->len < 1024)
        ll_buf_append(b, p, sz * nm < 1024 ? sz * nm : 1024);
    return sz * nm;
}

static void fire_profile(lg_run *r, const lg_level_ctx *L)
{
    const scn_profile *p = &L->lv->profile;
    char url[4096], body[64], errbuf[CURL_ERROR_SIZE] = "";
    ll_buf resp = {0};
    long status = 0;
    CURL *e = curl_easy_init();
    int64_t t = ll_now_ns();
    CURLcode cr = CURLE_FAILED_INIT;
    struct curl_slist *h = NULL;
    snprintf(url, sizeof url, "%s/start_profile", r->url_base);
    if (p->style == SCN_PROFILE_SGLANG)
        snprintf(body, sizeof body, "{\"num_steps\":%d}", p->num_steps);
    else
        body[0] = '\0';
    if (e && (h = curl_slist_append(NULL, "Content-Type: application/json")) &&
        curl_easy_setopt(e, CURLOPT_URL, url) == CURLE_OK && curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf) == CURLE_OK &&
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L) == CURLE_OK) {
        cr = curl_easy_perform(e);
        if (curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
            status = 0;
    }
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "type", "profile");
        cJSON_AddNumberToObject(o, "level", L->index);
        cJSON_AddNumberToObject(o, "t_ns", (double)(t - r->epoch_ns));
        cJSON_AddNumberToObject(o, "num_steps", p->num_steps);
        cJSON_AddStringToObject(o, "style", p->style == SCN_PROFILE_SGLANG ? "sglang" : "vllm");
        if (status)
            cJSON_AddNumberToObject(o, "http_status", (double)status);
        else
            cJSON_AddNullToObject(o, "http_status");
        cJSON_AddBoolToObject(o, "ok", cr == CURLE_OK && status >= 200 && status < 300);
        cJSON_AddStringToObject(o, "detail", cr != CURLE_OK ? (errbuf[0] ? errbuf : curl_easy_strerror(cr))
                                                             : (resp.p ? resp.p : ""));
        if (ll_jsonl_write(r->rec, o))
            ll_warn("writing the profile record failed");
        cJSON_Delete(o);
    }
    curl_slist_free_all(h);
    if (e)
        curl_easy_cleanup(e);
    ll_buf_free(&resp);
}

static void progress_line(lg_run *r, const lg_level_ctx *L, int64_t now)
{
    double el = (double)(now - L->start_ns) / 1e9;
    long long tok = atomic_load(&r->tokens);
    fprintf(stderr, "\r\033[Klevel %d C=%d  done %d/%d  %.0f tok/s  errors %d  in flight %d", L->index,
            L->lv->concurrency, atomic_load(&r->done), L->total, el > 0 ? (double)tok / el : 0.0,
            atomic_load(&r->errors), atomic_load(&r->inflight));
}

static int write_level_line(lg_run *r, const lg_level_ctx *L)
{
    char line[512];
    const scn_level *lv = L->lv;
    if (lv->rate_per_s > 0)
        snprintf(line, sizeof line,
                 "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"open\",\"rate_per_s\":%.17g,"
                 "\"arrival\":\"%s\",\"n_requests\":%d,\"warmup\":%d,\"start_ns\":%" PRId64 "}",
                 L->index, lv->concurrency, lv->rate_per_s,
                 lv->arrival == SCN_ARRIVAL_POISSON ? "poisson" : "constant", L->total - L->warmup, L->warmup,
                 L->start_ns - r->epoch_ns);
    else
        snprintf(line, sizeof line,
                 "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"closed\",\"rate_per_s\":null,"
                 "\"n_requests\":%d,\"warmup\":%d,\"start_ns\":%" PRId64 "}",
                 L->index, lv->concurrency, L->total - L->warmup, L->warmup, L->start_ns - r->epoch_ns);
    return ll_jsonl_write_raw(r->rec, line);
}

/* Split C over the workers: the first C % W get one more. */
static void assign(lg_run *r, lg_level_ctx *L)
{
    const scn_level *lv = L->lv;
    int W = r->nthreads, C = lv->concurrency;
    int active = lv->rate_per_s > 0 && C == 0 ? W : (C < W ? C : W);
    for (int i = 0; i < W; i++) {
        lg_worker *w = &r->workers[i];
        w->lvl = L;
        w->n_res = 0;
        w->rc = 0;
        w->err[0] = '\0';
        w->slots = C / W + (i < C % W);
        w->stride = i < active ? active : 0;
        w->offset = i;
    }
}

static int run_level(lg_run *r, int index, char *err, size_t errlen)
{
    lg_level_ctx L = {0};
    int rc = 0, started = 0, profiled = 0;
    L.index = index;
    L.lv = &r->scn->levels[index];
    L.warmup = L.lv->warmup;
    L.total = scn_level_requests(L.lv) + L.warmup;
    L.seed = r->scn->seed * 1000003u + (uint64_t)index;
    atomic_init(&L.next, 0);
    atomic_store(&r->done, 0);
    atomic_store(&r->errors, 0);
    atomic_store(&r->tokens, 0);
    assign(r, &L);
    for (int i = 0; i < r->nthreads; i++) {
        ll_pct_free(r->workers[i].itl_ms);
        if (!(r->workers[i].itl_ms = ll_pct_new(0)))
            return LL_ENOMEM;
    }
    L.start_ns = ll_now_ns();
    L.deadline_ns = L.lv->duration_s > 0 ? L.start_ns + (int64_t)(L.lv->duration_s * 1e9) : 0;
    if ((rc = write_level_line(r, &L))) {
        ll_errf(err, errlen, "%s/records.jsonl: write failed", r->run_dir);
        return rc;
    }
    atomic_store(&r->workers_left, r->nthreads);
    for (; started < r->nthreads; started++)
        if (pthread_create(&r->workers[started].thread, NULL, lg_worker_main, &r->workers[started]) != 0) {
            ll_errf(err, errlen, "pthread_create failed");
            rc = LL_ESYS;
            /* the ones not started will never decrement workers_left */
            atomic_fetch_sub(&r->workers_left, r->nthreads - started);
            lg_run_interrupt(r, 0);
            break;
        }
    int64_t next_progress = 0;
    while (atomic_load(&r->workers_left) > 0) {
        int64_t now = ll_now_ns();
        int inflight = atomic_load(&r->inflight), dec = atomic_load(&r->decoding);
        int target = L.lv->rate_per_s > 0 ? (inflight > 0 ? inflight : -1) : L.lv->concurrency;
        if (L.lv->profile.enabled && !profiled && !atomic_load(&r->stop_issue) && inflight == target &&
            dec == target) {
            profiled = 1;
            fire_profile(r, &L);
        }
        if (r->progress && now >= next_progress) {
            progress_line(r, &L, now);
            next_progress = now + 250000000;
        }
        ll_sleep_until_ns(now + 1000000);
    }
    for (int i = 0; i < started; i++)
        if (pthread_join(r->workers[i].thread, NULL) != 0 && rc == 0) {
            ll_errf(err, errlen, "pthread_join failed");
            rc = LL_ESYS;
        }
    if (r->progress)
        fputs("\r\033[K", stderr);
    int64_t end = ll_now_ns();
    for (int i = 0; i < r->nthreads && rc == 0; i++)
        if (r->workers[i].rc) {
            rc = r->workers[i].rc;
            ll_errf(err, errlen, "worker %d: %s", i,
                    r->workers[i].err[0] ? r->workers[i].err : ll_strerror(rc));
        }
    lg_level_summary *nl = realloc(r->levels, (r->n_levels + 1) * sizeof *nl);
    if (!nl)
        return LL_ENOMEM;
    r->levels = nl;
    lg_level_summary *s = &r->levels[r->n_levels++];
    lg_level_stats(r, &L, end, s);
    char line[256];
    snprintf(line, sizeof line,
             "{\"type\":\"level_end\",\"level\":%d,\"end_ns\":%" PRId64 ",\"interrupted\":%s,\"ok\":%d,\"failed\":%d}",
             index, end - r->epoch_ns, s->interrupted ? "true" : "false", s->ok, s->failed);
    if (ll_jsonl_write_raw(r->rec, line) && rc == 0) {
        ll_errf(err, errlen, "%s/records.jsonl: write failed", r->run_dir);
        rc = LL_EIO;
    }
    if (r->on_level_end)
        r->on_level_end(r, index, r->cb_ctx);
    return rc;
}

int lg_run_sweep(lg_run *r, char *err, size_t errlen)
{
    for (size_t i = 0; i < r->scn->n_levels; i++) {
        if (atomic_load(&r->stop_issue))
            break;
        int rc = run_level(r, (int)i, err, errlen);
        if (rc)
            return rc;
    }
    return atomic_load(&r->interrupted) ? LL_EINTR : 0;
}
