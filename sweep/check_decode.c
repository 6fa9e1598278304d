/* check_decode.c: `loadlaw check-decode RUN_DIR` (sweep.h
 * sweep_check_decode), a decode kernel's self-check that needs no second
 * server: each recorded output is sent back, after its prompt, to the same
 * server, which scores the decoded tokens through prefill (prompt logprobs);
 * a decode path that computes another distribution than prefill shows as
 * decode-time logprobs that the prefill does not reproduce.
 *
 * Data flow: the records (ll_rec_read) give the run's target and every ok,
 * measured request's outputs (with --record-outputs: prompt as sent, tokens,
 * logprobs); an evenly spaced sample of at most max_requests of them is
 * re-scored one at a time (loadgen lg_rescore_run, plain HTTP); fit's
 * check_decode.c does the arithmetic and the printing. The target: --url,
 * else --engine (the bundled engine started here), else the run's own: its
 * URL, or, for a run against the in-process engine (gone with its process),
 * that engine started again from the spec the run line recorded. A run
 * recorded through SGLang's /generate is re-scored there, in its spelling
 * (loadgen rescore.c says how). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fit_outputs.h"
#include "host_engine.h"
#include "loadgen.h"
#include "records.h"
#include "report.h"
#include "sweep.h"

void sweep_check_decode_opts_default(sweep_check_decode_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_requests = 200;
    o->tolerance = SWEEP_CHECK_DECODE_TOLERANCE;
    o->max_over = SWEEP_CHECK_DECODE_MAX_OVER;
    o->dtype = SWEEP_CHECK_DECODE_DTYPE_AUTO;
    o->timeout_s = 120;
}

typedef struct cd_req {
    int level;
    ll_rec_outputs *o;
} cd_req;

typedef struct cd_read {
    char url[2048], model[256], endpoint[32], engine[1024];
    int bundled, recorded, have_run;
    LL_VEC(int) level_c;          /* level index -> C */
    LL_VEC(cd_req) reqs;
    size_t n_ok, n_no_outputs, n_no_prompt, n_no_lp;
} cd_read;

static int on_run(const ll_rec_run *run, void *ctx)
{
    cd_read *s = ctx;
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(run->config, "request");
    s->have_run = 1;
    s->recorded = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "record_outputs"));
    snprintf(s->url, sizeof s->url, "%s", run->url ? run->url : "");
    snprintf(s->model, sizeof s->model, "%s", run->model ? run->model : "");
    snprintf(s->endpoint, sizeof s->endpoint, "%s", run->endpoint ? run->endpoint : "");
    snprintf(s->engine, sizeof s->engine, "%s", run->engine ? run->engine : "");
    s->bundled = run->bundled;
    return 0;
}

static int on_level(const ll_rec_level *lv, void *ctx)
{
    cd_read *s = ctx;
    if (lv->level < 0 || lv->level > 1000000)
        return 0;
    while (s->level_c.n <= (size_t)lv->level)
        if (ll_vec_push(&s->level_c, 0))
            return LL_ENOMEM;
    s->level_c.v[lv->level] = lv->concurrency;
    return 0;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    cd_read *s = ctx;
    if (rq->warmup || rq->cls != LL_ERRC_OK)
        return 0;
    s->n_ok++;
    const ll_rec_outputs *o = rq->outputs;
    if (!o || o->n_tok == 0) {
        s->n_no_outputs++;
        return 0;
    }
    if (!o->prompt) {
        s->n_no_prompt++;
        return 0;
    }
    if (!o->lp || (!o->tok && !o->text)) {
        s->n_no_lp++;
        return 0;
    }
    cd_req r = {rq->level, ll_rec_outputs_dup(o)};
    if (!r.o || ll_vec_push(&s->reqs, r)) {
        ll_rec_outputs_free(r.o);
        return LL_ENOMEM;
    }
    return 0;
}

static void read_free(cd_read *s)
{
    for (size_t i = 0; i < s->reqs.n; i++)
        ll_rec_outputs_free(s->reqs.v[i].o);
    ll_vec_free(&s->reqs);
    ll_vec_free(&s->level_c);
}

static int read_run(const char *run_dir, cd_read *s, char *err, size_t errlen)
{
    char path[4096];
    struct stat st;
    if (stat(run_dir, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(path, sizeof path, "%s/records.jsonl", run_dir);
    else
        snprintf(path, sizeof path, "%s", run_dir);
    ll_rec_handlers h = {.on_run = on_run, .on_level = on_level, .on_request = on_request};
    ll_rec_read_stats rs;
    return ll_rec_read(path, &h, s, &rs, err, errlen);
}

/* The decoded text to send back: the tokens as streamed (their texts
 * joined), else the recorded text when it is whole; think tags dropped (they
 * are markup around tokens, not tokens). NULL when neither is usable. */
static char *output_text(const ll_rec_outputs *o)
{
    ll_buf b = {0};
    int rc = 0;
    if (o->tok) {
        for (size_t i = 0; i < o->n_tok && !rc; i++)
            rc = o->tok[i] ? ll_buf_append(&b, o->tok[i], strlen(o->tok[i])) : LL_EINVAL;
    } else if (o->text && strlen(o->text) == o->text_bytes) {
        rc = ll_buf_append(&b, o->text, strlen(o->text));
    } else {
        rc = LL_EINVAL;
    }
    rc = rc ? rc : ll_buf_append(&b, "", 1);
    if (rc) {
        ll_buf_free(&b);
        return NULL;
    }
    static const char *const tags[] = {"<think>", "</think>"};
    for (int t = 0; t < 2; t++)
        for (char *p; (p = strstr(b.p, tags[t]));)
            memmove(p, p + strlen(tags[t]), strlen(p + strlen(tags[t])) + 1);
    return b.p;
}

/* Does position i of the answer score the token decode chose? By id where
 * both sides have one, else by text; unknown counts as aligned. */
static int aligned(const ll_rec_outputs *o, const lg_rescore *r, size_t i)
{
    if (o->ids && r->id[i] >= 0)
        return o->ids[i] == r->id[i];
    if (o->tok && o->tok[i] && r->tok[i])
        return strcmp(o->tok[i], r->tok[i]) == 0;
    return 1;
}

typedef struct cd_run {
    const sweep_check_decode_opts *o;
    const cd_read *rd;
    char url[2300];
    const char *model;
    scn_endpoint endpoint;
    fit_check_decode *res;
    int dtype_assumed;         /* the dtype is auto's guess for a remote server */
    size_t n_sent, n_misaligned, n_failed, n_no_text;
    int unsupported;
    char first_err[512];
} cd_run;

/* One request re-scored and added to the figures. 0 or LL_ENOMEM; a
 * request the server could not score is counted, not fatal, unless the
 * server cannot return prompt logprobs at all (cx->unsupported). */
static int check_one(cd_run *cx, const cd_req *q)
{
    char *text = output_text(q->o), err[512] = "";
    if (!text) {
        cx->n_no_text++;
        return 0;
    }
    lg_rescore_req rq = {.url = cx->url, .api_key = cx->o->api_key, .model = cx->model,
                         .endpoint = cx->endpoint, .prompt_json = q->o->prompt, .output = text,
                         .ids = q->o->ids, .n_tok = q->o->n_tok, .top_k = 1, .timeout_s = cx->o->timeout_s};
    lg_rescore r;
    int rc = lg_rescore_run(&rq, &r, err, sizeof err);
    free(text);
    cx->n_sent++;
    if (rc) {
        cx->unsupported |= r.unsupported;
        cx->n_failed++;
        if (!cx->first_err[0])
            snprintf(cx->first_err, sizeof cx->first_err, "%s", err);
        return rc == LL_ENOMEM ? rc : 0;
    }
    int ok = 1;
    for (size_t i = 0; i < r.n && ok; i++)
        ok = aligned(q->o, &r, i);
    if (!ok)
        cx->n_misaligned++;
    int c = q->level >= 0 && (size_t)q->level < cx->rd->level_c.n ? cx->rd->level_c.v[q->level] : 0;
    rc = ok ? fit_cd_add(cx->res, q->level, c, q->o->key, q->o->lp, r.lp, r.top_lp, r.rank, r.n) : 0;
    lg_rescore_free(&r);
    return rc;
}

/* Where to send: --url, --engine or the run's bundled engine (started into
 * *h), else the run's URL; then the endpoint's path. */
static int pick_target(cd_run *cx, host_engine *h, char *err, size_t errlen)
{
    const cd_read *rd = cx->rd;
    const char *base = cx->o->url, *spec = cx->o->engine;
    if (!base && !spec && rd->bundled)
        spec = rd->engine[0] ? rd->engine : "backend=synthetic";
    if (!base && spec) {
        int rc = host_engine_start(h, spec, NULL, NULL, err, errlen);
        if (rc)
            return rc;
        base = host_engine_url(h);
        cx->model = h->model;
    }
    if (!base && !spec)
        base = rd->url;
    if (!base || !base[0]) {
        ll_errf(err, errlen, "the run line names no target URL: give --url or --engine");
        return LL_EINVAL;
    }
    /* The records show a URL with its secrets hidden (docs/security.md): not
     * the server's address any more. */
    if (base == rd->url && strstr(base, "(hidden)")) {
        ll_errf(err, errlen, "the run's URL held credentials, hidden in its records (%.200s): give --url", base);
        return LL_EINVAL;
    }
    /* the API's standard path, put as the sweep put it (loadgen run.c
     * set_urls): a "/v1/..." path replaces a base's "/v1", /generate goes
     * after the base's path, /v1 or not */
    const char *path = scn_endpoint_path(cx->endpoint);
    if (ll_url_join(base, strncmp(path, "/v1/", 4) == 0 ? "/v1" : NULL, path, cx->url, sizeof cx->url)) {
        ll_errf(err, errlen, "URL too long: %.100s", base);
        return LL_EINVAL;
    }
    return 0;
}

/* The APIs check-decode can send a prompt back to, as "a, b or c". */
static void rescore_apis(char *out, size_t n)
{
    int m = 0, k = 0;
    for (int e = 0; e < SCN_ENDPOINT__COUNT; e++)
        m += lg_rescore_supported((scn_endpoint)e);
    out[0] = '\0';
    for (int e = 0; e < SCN_ENDPOINT__COUNT; e++) {
        if (!lg_rescore_supported((scn_endpoint)e))
            continue;
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", k == 0 ? "" : k == m - 1 ? " or " : ", ",
                 scn_endpoint_name((scn_endpoint)e));
        k++;
    }
}

/* Why the run cannot be checked (SWEEP_USAGE after saying so), or SWEEP_OK. */
static int check_readable(const char *run_dir, const cd_read *rd, scn_endpoint *endpoint)
{
    const char *why = NULL;
    char apis[128], not_api[256];
    int known = scn_endpoint_parse(rd->endpoint, endpoint) == 0;
    rescore_apis(apis, sizeof apis);
    snprintf(not_api, sizeof not_api, "is not a %s run (check-decode sends the prompt back to one of those)", apis);
    if (!rd->recorded || rd->n_ok == rd->n_no_outputs)
        why = "has no recorded outputs (run the sweep with --record-outputs)";
    else if (!known || !lg_rescore_supported(*endpoint))
        why = not_api;
    else if (rd->reqs.n == 0 && rd->n_no_prompt > 0)
        why = "recorded outputs without the prompts (recorded by an older loadlaw, or prompts over 64 KiB)";
    else if (rd->reqs.n == 0)
        why = "recorded no per-token logprobs with its outputs (the server sent none)";
    if (!why)
        return SWEEP_OK;
    fprintf(stderr, "loadlaw check-decode: %s %s\n", run_dir, why);
    return SWEEP_USAGE;
}

static void print_counts(FILE *f, const cd_run *cx)
{
    const cd_read *rd = cx->rd;
    const fit_check_decode *c = cx->res;
    fprintf(f, "check-decode: %s, %zu of %zu requests with outputs re-scored through prefill\n", cx->url, cx->n_sent,
            rd->reqs.n);
    fprintf(f, "bound: %.3g nat + %.3g x (1 + |prefill lp|), %s rounding%s; gate %.3g%% of positions\n",
            c->tolerance, c->rel, fit_cd_dtype_name(c->dtype),
            cx->dtype_assumed ? " (assumed: the server does not say; --dtype fp32 for a float32 server)" : "",
            100 * c->max_over);
    if (cx->n_failed || cx->n_misaligned || cx->n_no_text)
        fprintf(f, "not compared: %zu failed, %zu scored other tokens than decode's, %zu without usable token "
                "text\n", cx->n_failed, cx->n_misaligned, cx->n_no_text);
}

static int report(cd_run *cx)
{
    int passed = fit_cd_passed(cx->res);
    if (cx->o->json) {
        cJSON *j = rpt_cd_to_json(cx->res);
        char *t = NULL;
        if (j && cJSON_AddStringToObject(j, "url", cx->url) && cJSON_AddNumberToObject(j, "sent", (double)cx->n_sent) &&
            cJSON_AddNumberToObject(j, "failed", (double)cx->n_failed) &&
            cJSON_AddNumberToObject(j, "misaligned", (double)cx->n_misaligned) &&
            cJSON_AddBoolToObject(j, "dtype_assumed", cx->dtype_assumed))
            t = cJSON_Print(j);
        cJSON_Delete(j);
        if (!t) {
            fprintf(stderr, "loadlaw check-decode: out of memory\n");
            return SWEEP_FAIL;
        }
        printf("%s\n", t);
        free(t);
    } else {
        print_counts(stdout, cx);
        rpt_cd_print(stdout, cx->res);
    }
    if (fit_cd_positions(cx->res) == 0) {
        fprintf(stderr, "loadlaw check-decode: no position was compared%s%s\n", cx->first_err[0] ? ": " : "",
                cx->first_err);
        return SWEEP_FAIL;
    }
    const fit_cd_stats *a = &cx->res->all;
    if (!cx->o->json)
        printf("%s: %.2f%% of positions disagree beyond %s rounding (%zu over the bound, %zu ranked below another "
               "token by more; gate %.3g%%)\n", passed ? "ok" : "DECODE DISAGREES WITH PREFILL",
               100 * fit_cd_share_disagree(cx->res), fit_cd_dtype_name(cx->res->dtype), a->n_over, a->n_rank_miss,
               100 * cx->o->max_over);
    return passed ? SWEEP_OK : SWEEP_GATE;
}

/* Every sampled request, in order, until the server says it cannot. */
static int run_all(cd_run *cx)
{
    const cd_read *rd = cx->rd;
    size_t n = rd->reqs.n, m = cx->o->max_requests > 0 && (size_t)cx->o->max_requests < n ? (size_t)cx->o->max_requests : n;
    for (size_t k = 0; k < m && !cx->unsupported; k++) {
        int rc = check_one(cx, &rd->reqs.v[k * n / m]); /* evenly spaced over the run */
        if (rc)
            return rc;
    }
    return 0;
}

int sweep_check_decode(const char *run_dir, const sweep_check_decode_opts *o)
{
    cd_read rd = {0};
    host_engine h = {0};
    cd_run cx = {.o = o, .rd = &rd};
    char err[1024] = "";
    int ret = SWEEP_FAIL, rc = read_run(run_dir, &rd, err, sizeof err);
    if (rc) {
        fprintf(stderr, "loadlaw check-decode: %s\n", err);
        ret = rc == LL_EIO ? SWEEP_USAGE : SWEEP_FAIL;
        goto done;
    }
    if ((ret = check_readable(run_dir, &rd, &cx.endpoint)) != SWEEP_OK)
        goto done;
    cx.model = rd.model[0] ? rd.model : NULL;
    if ((rc = pick_target(&cx, &h, err, sizeof err)) != 0) {
        fprintf(stderr, "loadlaw check-decode: %s\n", err);
        ret = rc == LL_EINVAL ? SWEEP_USAGE : SWEEP_FAIL;
        goto done;
    }
    /* auto: the bundled engine computes in fp32 (its every backend agrees
     * with its prefill within 1e-4 nat); a remote server does not say, and
     * bf16 is what servers run */
    fit_cd_dtype dt = o->dtype >= 0 ? (fit_cd_dtype)o->dtype : h.eng ? FIT_CD_FP32 : FIT_CD_BF16;
    cx.dtype_assumed = o->dtype < 0 && !h.eng;
    if (!(cx.res = fit_cd_new(o->tolerance, dt, o->max_over))) {
        fprintf(stderr, "loadlaw check-decode: out of memory\n");
        goto done;
    }
    if ((rc = run_all(&cx)) != 0) {
        fprintf(stderr, "loadlaw check-decode: %s\n", ll_strerror(rc));
        ret = SWEEP_FAIL;
    } else if (cx.unsupported) {
        fprintf(stderr, "loadlaw check-decode: the server cannot return prompt logprobs, so decode cannot be "
                "checked against prefill (%s)\n", cx.first_err);
        ret = SWEEP_USAGE;
    } else {
        ret = report(&cx);
    }
done:
    host_engine_stop(&h);
    fit_cd_free(cx.res);
    read_free(&rd);
    return ret;
}
