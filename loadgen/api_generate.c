/* api_generate.c: SGLang's native /generate: the prompt as "text", no
 * model, the length cap and ignore_eos in sampling_params; a stream of
 * events each holding the whole text so far and meta_info with the running
 * token counts (its continuous usage). Outputs: meta_info's
 * output_token_logprobs ([logprob, id, text] each) with output_top_logprobs,
 * or output_ids alone, asked with return_logprob.
 *
 * Re-scoring (check-decode; python/sglang/srt/managers/io_struct.py
 * GenerateReqInput) scores a prompt with {"return_logprob":true,
 * "logprob_start_len":L,"top_logprobs_num":K,"sampling_params":
 * {"max_new_tokens":1,"temperature":0}} and answers meta_info.
 * input_token_logprobs, one [logprob, id, text-or-null] per position from L
 * on, the first always null (the scheduler pads it), and input_top_logprobs
 * (null or K such triples per position). The decoded ids are sent back, not
 * their text: text re-tokenized after a prompt can merge across the seam or
 * differ from what the model sampled, and would score other tokens. So when
 * the run recorded output ids (SGLang's output_token_logprobs give them)
 * two requests are made: the prompt text with L = 0 gives the prompt's ids
 * as the server tokenized them (BOS included, exactly what decode saw), then
 * "input_ids" = those + the output's ids with L = prompt length - 1, whose
 * last n entries score the output. L also bounds SGLang's prefix-cache
 * match (schedule_batch.py: max_prefix_len <= logprob_start_len), so the
 * output's positions are computed by the prefill kernel even when the
 * radix cache still holds decode's KV for them. Without recorded ids: one
 * request, "text" = prompt + OUT with L = 0, aligned by text afterwards. */
#include "api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outputs.h"

/* ---- the request ----------------------------------------------------------- */

static int generate_prompt(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt, size_t head_at)
{
    return lg_body_prompt(b, s, "text", head, prompt, head_at);
}

/* The length cap, ignore_eos and top_p in sampling_params; outputs: meta_info's
 * output token logprobs, top 5, with their text. */
static int generate_limits(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage)
{
    int rc = 0;
    (void)cont_usage; /* meta_info always carries the running count */
    if (lg_body_keep(s, "sampling_params")) {
        LL_TRY(lg_body_key(b, "sampling_params"));
        LL_TRY(ll_buf_printf(b, "{\"max_new_tokens\":%d%s", max_tokens,
                             s->ignore_eos ? ",\"ignore_eos\":true" : ""));
        if (s->top_p > 0)
            LL_TRY(ll_buf_append(b, ",\"top_p\":", 9) || lg_body_double(b, s->top_p));
        LL_TRY(ll_buf_append(b, "}", 1));
    }
    if (s->record_outputs && lg_body_keep(s, "return_logprob"))
        LL_TRY(lg_body_key(b, "return_logprob") || ll_buf_printf(b, "true,\"top_logprobs_num\":5,"
                                                                    "\"return_text_in_logprobs\":true"));
fail:
    return rc;
}

/* ---- the stream and its outputs ------------------------------------------ */

/* One [logprob, id, text] triple (text null unless return_text_in_logprobs). */
static void sglang_token(lg_outputs *o, const lg_jtape *t, const lg_jnode *e)
{
    const lg_jnode *lp = lg_jchild(t, e), *id = lp ? lg_jnext(t, lp) : NULL, *tx = id ? lg_jnext(t, id) : NULL;
    int have = tx && tx->type == LG_J_STR;
    lg_out_token(o, have ? tx->str : NULL, have ? tx->str_len : 0, lg_out_num(lp), lg_out_id_of(id));
}

static void sglang_alts(lg_outputs *o, const lg_jtape *t, const lg_jnode *row)
{
    for (const lg_jnode *a = row && row->type == LG_J_ARR ? lg_jchild(t, row) : NULL; a; a = lg_jnext(t, a)) {
        const lg_jnode *lp = lg_jchild(t, a), *id = lp ? lg_jnext(t, lp) : NULL, *tx = id ? lg_jnext(t, id) : NULL;
        char buf[32];
        int64_t n = lg_out_id_of(id);
        if (tx && tx->type == LG_J_STR)
            lg_out_alt_add(o, tx->str, tx->str_len, lg_out_num(lp));
        else if (n >= 0)
            lg_out_alt_add(o, buf, (size_t)snprintf(buf, sizeof buf, "token_id:%lld", (long long)n), lg_out_num(lp));
    }
}

/* An event's outputs: text (n bytes) is what it added to the output;
 * meta_info.output_token_logprobs ([logprob, id, text] each) with
 * output_top_logprobs, or else output_ids. cumulative: the event repeats
 * every token so far (SGLang's default), so the ones already taken are
 * skipped; else each event has only its new ones. */
static void generate_outputs(lg_outputs *o, const lg_jtape *t, const lg_jnode *ev, const char *text, size_t n,
                             int cumulative)
{
    const lg_jnode *meta = lg_jget(t, ev, "meta_info");
    const lg_jnode *lps = meta ? lg_jget(t, meta, "output_token_logprobs") : NULL;
    const lg_jnode *tops = meta ? lg_jget(t, meta, "output_top_logprobs") : NULL;
    const lg_jnode *ids = lg_jget(t, ev, "output_ids");
    if (text && n)
        lg_out_text(o, text, n);
    if (lps && lps->type == LG_J_ARR) {
        /* a cumulative event repeats the tokens already taken: skip them */
        size_t i = 0, skip = cumulative ? o->tok.n : 0;
        const lg_jnode *top = tops && tops->type == LG_J_ARR ? lg_jchild(t, tops) : NULL;
        for (const lg_jnode *e = lg_jchild(t, lps); e; e = lg_jnext(t, e), i++, top = top ? lg_jnext(t, top) : NULL)
            if (i >= skip && e->type == LG_J_ARR) {
                sglang_token(o, t, e);
                sglang_alts(o, t, top);
            }
        return;
    }
    size_t i = 0, skip = cumulative ? o->ids.n : 0;
    for (const lg_jnode *e = ids && ids->type == LG_J_ARR ? lg_jchild(t, ids) : NULL; e; e = lg_jnext(t, e), i++)
        if (i >= skip)
            lg_out_id(o, e);
}

/* SGLang's /generate stream: each event holds the whole text so far and
 * meta_info with the running token counts (its continuous usage). */
static void generate_event(lg_delta *d, const char *name, const lg_jtape *t, lg_delta_out *out)
{
    const lg_jnode *root = &t->n[0];
    (void)name; /* its events are unnamed */
    if (lg_delta_error_body(d, t))
        return;
    const lg_jnode *meta = lg_jget(t, root, "meta_info");
    size_t n = 0, tb = 0, ab = 0;
    const char *text = lg_jstr(t, root, "text", &n);
    int64_t ct_now = -1;
    if (text) {
        /* The new text is the suffix beyond what was seen; a shorter text
         * (not a continuation) only resets the mark. */
        if (n > d->api_mark)
            lg_delta_content(d, text + d->api_mark, n - d->api_mark, &tb, &ab, &out->reclassify);
        if (d->out) /* outputs: the same suffix, and the tokens beyond those taken */
            generate_outputs(d->out, t, root, n > d->api_mark ? text + d->api_mark : NULL,
                             n > d->api_mark ? n - d->api_mark : 0, n >= d->api_mark);
        d->api_mark = n;
    } else if (d->out) {
        generate_outputs(d->out, t, root, NULL, 0, 1);
    }
    if (meta && meta->type == LG_J_OBJ) {
        int64_t p = lg_jcount(t, meta, "prompt_tokens"), r = lg_jcount(t, meta, "reasoning_tokens");
        ct_now = lg_jcount(t, meta, "completion_tokens");
        if (p >= 0)
            d->usage_prompt = p;
        if (ct_now >= 0)
            d->usage_completion = ct_now;
        if (r >= 0)
            d->usage_reasoning = r;
        int64_t c = lg_jcount(t, meta, "cached_tokens");
        if (c >= 0)
            d->usage_cached = c;
        lg_delta_finish(d, t, lg_jget(t, meta, "finish_reason"));
    }
    lg_delta_count(d, tb, ab, ct_now, out);
}

/* ---- re-scoring ----------------------------------------------------------- */

/* A server's number as a token id: a whole number in [0, 2^53), else -1
 * (never cast before the check). */
static int64_t json_id(const cJSON *v)
{
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    return d >= 0 && d < 9e15 && d == floor(d) ? (int64_t)d : -1;
}

/* {"text":T} or {"input_ids":a then b}, with the logprob keys; NULL when
 * out of memory. */
static char *gen_body(const char *text, const int64_t *a, size_t na, const int64_t *b, size_t nb, size_t start,
                      int top_k, int with_text)
{
    cJSON *root = cJSON_CreateObject(), *ids = NULL, *sp = NULL;
    int ok = root != NULL;
    if (ok && text) {
        ok = cJSON_AddStringToObject(root, "text", text) != NULL;
    } else if (ok) {
        ok = (ids = cJSON_AddArrayToObject(root, "input_ids")) != NULL;
        for (size_t i = 0; ok && i < na + nb; i++) {
            cJSON *v = cJSON_CreateNumber((double)(i < na ? a[i] : b[i - na]));
            ok = v && cJSON_AddItemToArray(ids, v);
            if (!ok)
                cJSON_Delete(v);
        }
    }
    ok = ok && cJSON_AddTrueToObject(root, "return_logprob") &&
         cJSON_AddNumberToObject(root, "logprob_start_len", (double)start) &&
         cJSON_AddNumberToObject(root, "top_logprobs_num", top_k) &&
         cJSON_AddBoolToObject(root, "return_text_in_logprobs", with_text) &&
         (sp = cJSON_AddObjectToObject(root, "sampling_params")) &&
         cJSON_AddNumberToObject(sp, "max_new_tokens", 1) && cJSON_AddNumberToObject(sp, "temperature", 0);
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

/* Send body; the answer's meta_info.input_token_logprobs in *lps and
 * input_top_logprobs (NULL when absent) in *tops, both inside *root (the
 * caller deletes it). LG_RESCORE_UNSUPPORTED when the answer has none. */
static int gen_ask(const lg_rescore_req *q, const char *body, cJSON **root, const cJSON **lps, const cJSON **tops,
                   char *err, size_t errlen)
{
    ll_buf resp = {0};
    int rc = lg_rescore_exchange(q, body, &resp, err, errlen);
    *root = NULL;
    if (rc == 0) {
        *root = cJSON_ParseWithLengthOpts(resp.p ? resp.p : "", resp.len, NULL, 0);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(*root, "meta_info");
        *lps = cJSON_GetObjectItemCaseSensitive(meta, "input_token_logprobs");
        *tops = cJSON_GetObjectItemCaseSensitive(meta, "input_top_logprobs");
        *tops = cJSON_IsArray(*tops) ? *tops : NULL;
        if (!cJSON_IsArray(*lps)) {
            ll_errf(err, errlen, "%s answered without meta_info.input_token_logprobs: this server does not return "
                    "prompt logprobs", q->url);
            rc = LG_RESCORE_UNSUPPORTED;
        }
    }
    ll_buf_free(&resp);
    return rc;
}

/* The prompt's token ids as the server tokenizes it (into *ids, n_ids). */
static int gen_prompt_ids(const lg_rescore_req *q, const char *prompt, int64_t **ids, size_t *n_ids, char *err,
                          size_t errlen)
{
    cJSON *root = NULL;
    const cJSON *lps = NULL, *tops = NULL;
    char *body = gen_body(prompt, NULL, 0, NULL, 0, 0, 0, 0);
    int rc = body ? gen_ask(q, body, &root, &lps, &tops, err, errlen) : LL_ENOMEM;
    size_t n = rc == 0 ? (size_t)cJSON_GetArraySize(lps) : 0, i = 0;
    free(body);
    *n_ids = 0;
    if (rc == 0 && !(*ids = malloc((n ? n : 1) * sizeof **ids)))
        rc = LL_ENOMEM;
    for (const cJSON *e = rc == 0 ? lps->child : NULL; e && rc == 0; e = e->next, i++)
        if (((*ids)[i] = json_id(cJSON_GetArrayItem(e, 1))) < 0) {
            ll_errf(err, errlen, "%s: prompt position %zu has no token id", q->url, i);
            rc = LL_EPARSE;
        }
    *n_ids = rc == 0 ? n : 0;
    cJSON_Delete(root);
    return rc;
}

/* The place of token id (logprob lp) in a position's top list: 1 when it
 * is first or ties the first (as vLLM ranks), k + 1 when it is not among
 * the k; 0 when unknown. */
static int gen_rank(const cJSON *row, int64_t id, double lp)
{
    int j = 1;
    for (const cJSON *a = cJSON_IsArray(row) ? row->child : NULL; a; a = a->next, j++) {
        const cJSON *alp = cJSON_GetArrayItem(a, 0);
        if (j == 1 && cJSON_IsNumber(alp) && lp >= alp->valuedouble)
            return 1;
        if (id >= 0 && json_id(cJSON_GetArrayItem(a, 1)) == id)
            return j;
    }
    return j > 1 && id >= 0 && !isnan(lp) ? j : 0;
}

/* Prefill's first logprob at a position: the row's first triple's, or the
 * token's own when that is higher (it ties or the row is missing). */
static double gen_top_lp(const cJSON *row, double lp)
{
    const cJSON *a = cJSON_IsArray(row) ? row->child : NULL;
    const cJSON *alp = a ? cJSON_GetArrayItem(a, 0) : NULL;
    if (!cJSON_IsNumber(alp))
        return isnan(lp) ? NAN : lp;
    return isnan(lp) || alp->valuedouble > lp ? alp->valuedouble : lp;
}

/* The last q->n_tok entries of lps (and their rows of tops) into r. */
static int gen_take(const lg_rescore_req *q, const cJSON *lps, const cJSON *tops, lg_rescore *r, char *err,
                    size_t errlen)
{
    size_t total = (size_t)cJSON_GetArraySize(lps), n = q->n_tok;
    if (total < n) {
        ll_errf(err, errlen, "%s scored %zu prompt positions, fewer than the %zu output tokens", q->url, total, n);
        return LL_EPARSE;
    }
    int rc = lg_rescore_alloc(r, n);
    /* the top rows run beside the entries when the server sent one per position */
    const cJSON *row = tops && (size_t)cJSON_GetArraySize(tops) == total ? tops->child : NULL;
    size_t i = 0, skip = total - n;
    for (const cJSON *e = lps->child; e && rc == 0; e = e->next, row = row ? row->next : NULL, i++) {
        if (i < skip)
            continue;
        const cJSON *lp = cJSON_GetArrayItem(e, 0), *tx = cJSON_GetArrayItem(e, 2);
        size_t k = i - skip;
        r->lp[k] = cJSON_IsNumber(lp) ? lp->valuedouble : NAN;
        r->id[k] = json_id(cJSON_GetArrayItem(e, 1));
        r->rank[k] = gen_rank(row, r->id[k], r->lp[k]);
        r->top_lp[k] = gen_top_lp(row, r->lp[k]);
        if (cJSON_IsString(tx) && !(r->tok[k] = strdup(tx->valuestring)))
            rc = LL_ENOMEM;
    }
    return rc;
}

/* The request that scores the output: by ids when recorded, else by text. */
static char *gen_score_body(const lg_rescore_req *q, const char *prompt, char *err, size_t errlen, int *rc)
{
    if (q->ids) {
        int64_t *pids = NULL;
        size_t np = 0;
        char *body = NULL;
        if ((*rc = gen_prompt_ids(q, prompt, &pids, &np, err, errlen)) == 0 &&
            !(body = gen_body(NULL, pids, np, q->ids, q->n_tok, np ? np - 1 : 0, q->top_k, 1)))
            *rc = LL_ENOMEM;
        free(pids);
        return body;
    }
    size_t a = strlen(prompt), b = strlen(q->output);
    char *text = malloc(a + b + 1), *body = NULL;
    if (text) {
        memcpy(text, prompt, a);
        memcpy(text + a, q->output, b + 1);
        body = gen_body(text, NULL, 0, NULL, 0, 0, q->top_k, 1);
    }
    free(text);
    *rc = body ? 0 : LL_ENOMEM;
    return body;
}

static int generate_rescore(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    cJSON *prompt = cJSON_Parse(q->prompt_json), *root = NULL;
    const cJSON *lps = NULL, *tops = NULL;
    int rc = LL_EINVAL;
    char *body = NULL;
    if (!cJSON_IsString(prompt)) {
        ll_errf(err, errlen, "the recorded prompt is not a JSON string");
        goto done;
    }
    if ((body = gen_score_body(q, prompt->valuestring, err, errlen, &rc)) == NULL)
        goto done;
    if ((rc = gen_ask(q, body, &root, &lps, &tops, err, errlen)) == 0)
        rc = gen_take(q, lps, tops, out, err, errlen);
done:
    if (rc == LL_ENOMEM && !err[0])
        ll_errf(err, errlen, "out of memory");
    free(body);
    cJSON_Delete(root);
    cJSON_Delete(prompt);
    return rc;
}

const lg_api lg_api_generate = {
    .sends_model = 0,
    .cont_usage = 0,
    .put_prompt = generate_prompt,
    .put_limits = generate_limits,
    .event = generate_event,
    .prompt_key = "text",
    .rescore = generate_rescore,
};
