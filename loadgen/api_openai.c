/* api_openai.c: what chat and completions share (api.h "the OpenAI
 * family"): the limits a body asks, the stream's chunks, the outputs they
 * carry, and re-scoring in vLLM's spelling. api_chat.c and
 * api_completions.c hold what differs: the prompt's shape in a request and
 * in a re-scoring request.
 *
 * The stream: chunks with choices[].delta (reasoning_content or reasoning,
 * and content) for chat or choices[].text for completions, and a final
 * chunk with usage and no choices (stream_options.include_usage); with
 * continuous_usage_stats every chunk carries the running usage. Outputs,
 * where each server puts them: the text; per-token logprobs (chat:
 * choices[].logprobs.content[] of {token, logprob, top_logprobs: [{token,
 * logprob}]}; completions: logprobs.tokens[], token_logprobs[],
 * top_logprobs[] of {token: logprob}); token ids (vLLM's return_token_ids:
 * choices[].token_ids; its return_tokens_as_token_ids spells a logprobs
 * token "token_id:N"). llama.cpp's llama-server spells chat and completions
 * logprobs alike, chat's content[] shape with each token's "id" (and each
 * alternative's), so its ids come from there (tools/server/server-task.cpp
 * probs_vector_to_json); a choice that also has token_ids keeps those, and
 * a "token_id:N" token its N, so no id is taken twice.
 *
 * Re-scoring (check-decode): the recorded prompt followed by the decoded
 * tokens, asking for prompt logprobs in vLLM's spelling and generating one
 * token. The answer's "prompt_logprobs" (a completions choice's, or a chat
 * response's top level) holds one entry per prompt position, null or
 * {"<id>":{"logprob":L, "rank":R,"decoded_token":T}, ...} with the
 * position's own token first (vLLM puts it before its top k); its last n
 * entries are the output's. A server without them (llama.cpp's
 * llama-server has no prompt logprobs: it scores only what it samples)
 * answers without the key, or refuses. */
#include "api.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outputs.h"

/* ---- the request's limits ------------------------------------------------ */

/* What comparing outputs needs: greedy decoding (temperature 0, the
 * scenario's seed) and, when outputs are recorded, the chosen tokens'
 * logprobs with the top 5 (chat: logprobs + top_logprobs; completions: a
 * count). Nothing when neither is asked, so bodies stay as they were. */
static int put_output_keys(ll_buf *b, const scn_scenario *s, int chat)
{
    int rc = 0;
    if (s->greedy && lg_body_keep(s, "temperature"))
        LL_TRY(lg_body_key(b, "temperature") || ll_buf_printf(b, "0"));
    if (s->greedy && lg_body_keep(s, "seed"))
        LL_TRY(lg_body_key(b, "seed") || ll_buf_printf(b, "%" PRIu64, s->seed % 2147483648u));
    if (s->record_outputs && lg_body_keep(s, "logprobs")) {
        LL_TRY(lg_body_key(b, "logprobs"));
        LL_TRY(ll_buf_printf(b, chat ? "true" : "5"));
    }
    if (s->record_outputs && chat && lg_body_keep(s, "top_logprobs"))
        LL_TRY(lg_body_key(b, "top_logprobs") || ll_buf_printf(b, "5"));
fail:
    return rc;
}

int lg_openai_limits(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage, int chat)
{
    int rc = 0;
    if (lg_body_keep(s, "max_tokens")) {
        LL_TRY(lg_body_key(b, "max_tokens"));
        LL_TRY(ll_buf_printf(b, "%d", max_tokens));
    }
    if (lg_body_keep(s, "stream_options")) {
        LL_TRY(lg_body_key(b, "stream_options"));
        LL_TRY(ll_buf_printf(b, "{\"include_usage\":true%s}",
                             cont_usage ? ",\"continuous_usage_stats\":true" : ""));
    }
    /* loadlaw's engine extensions, sent only when the scenario asks */
    if (s->ignore_eos && lg_body_keep(s, "ignore_eos"))
        LL_TRY(lg_body_key(b, "ignore_eos") || ll_buf_printf(b, "true"));
    if (s->think_tokens >= 0 && lg_body_keep(s, "think_tokens"))
        LL_TRY(lg_body_key(b, "think_tokens") || ll_buf_printf(b, "%d", s->think_tokens));
    LL_TRY(lg_body_top_p(b, s));
    LL_TRY(put_output_keys(b, s, chat));
fail:
    return rc;
}

/* ---- the stream and its outputs ------------------------------------------ */

/* completions: logprobs.tokens[], token_logprobs[], top_logprobs[] of {token: logprob} */
static void completion_logprobs(lg_outputs *o, const lg_jtape *t, const lg_jnode *lp)
{
    const lg_jnode *toks = lg_jget(t, lp, "tokens"), *tlp = lg_jget(t, lp, "token_logprobs");
    const lg_jnode *top = lg_jget(t, lp, "top_logprobs");
    const lg_jnode *l = tlp && tlp->type == LG_J_ARR ? lg_jchild(t, tlp) : NULL;
    const lg_jnode *k = top && top->type == LG_J_ARR ? lg_jchild(t, top) : NULL;
    for (const lg_jnode *e = toks->type == LG_J_ARR ? lg_jchild(t, toks) : NULL; e; e = lg_jnext(t, e)) {
        lg_out_token(o, e->type == LG_J_STR ? e->str : NULL, e->type == LG_J_STR ? e->str_len : 0, lg_out_num(l), -1);
        for (const lg_jnode *a = k && k->type == LG_J_OBJ ? lg_jchild(t, k) : NULL; a; a = lg_jnext(t, a))
            lg_out_alt_add(o, a->key, a->key_len, lg_out_num(a));
        l = l ? lg_jnext(t, l) : NULL;
        k = k ? lg_jnext(t, k) : NULL;
    }
}

static void token_ids(lg_outputs *o, const lg_jtape *t, const lg_jnode *ids)
{
    for (const lg_jnode *e = lg_jchild(t, ids); e; e = lg_jnext(t, e))
        lg_out_id(o, e);
}

static void choice_outputs(lg_outputs *o, const lg_jtape *t, const lg_jnode *choice)
{
    const lg_jnode *delta = lg_jget(t, choice, "delta"), *lp = lg_jget(t, choice, "logprobs");
    const lg_jnode *ids = lg_jget(t, choice, "token_ids");
    size_t n = 0;
    const char *s;
    if (delta && delta->type == LG_J_OBJ) {
        if ((s = lg_jstr(t, delta, "reasoning_content", &n)) || (s = lg_jstr(t, delta, "reasoning", &n)))
            lg_out_text(o, s, n);
        if ((s = lg_jstr(t, delta, "content", &n)))
            lg_out_text(o, s, n);
        if (!ids)
            ids = lg_jget(t, delta, "token_ids");
    } else if ((s = lg_jstr(t, choice, "text", &n))) {
        lg_out_text(o, s, n);
    }
    if (lp && lp->type == LG_J_OBJ) {
        const lg_jnode *content = lg_jget(t, lp, "content"), *toks = lg_jget(t, lp, "tokens");
        if (content && content->type == LG_J_ARR)
            lg_out_logprobs(o, t, content, !(ids && ids->type == LG_J_ARR));
        else if (toks && toks->type == LG_J_ARR)
            completion_logprobs(o, t, lp);
    }
    if (ids && ids->type == LG_J_ARR)
        token_ids(o, t, ids);
}

/* A duration from the server in ms, or NAN when absent or not sane (a
 * request of more than a day is not one). */
static double jms(const lg_jtape *t, const lg_jnode *o, const char *k)
{
    const lg_jnode *v = lg_jget(t, o, k);
    return v && v->type == LG_J_NUM && v->num >= 0 && v->num <= 864e5 ? v->num : NAN;
}

/* usage.prompt_tokens_details.cached_tokens (OpenAI's, vLLM's, SGLang's
 * spelling), or usage.cached_tokens. */
static void take_cached(lg_delta *d, const lg_jtape *t, const lg_jnode *usage)
{
    const lg_jnode *det = lg_jget(t, usage, "prompt_tokens_details");
    int64_t c = det && det->type == LG_J_OBJ ? lg_jcount(t, det, "cached_tokens") : -1;
    if (c < 0)
        c = lg_jcount(t, usage, "cached_tokens");
    if (c >= 0)
        d->usage_cached = c;
}

/* The server's own timing of the request, where the event carries one:
 * llama.cpp's "timings" (on its last chunk), vLLM's per-request "metrics"
 * (--enable-per-request-metrics with include_metrics). */
static void take_server_timing(lg_delta *d, const lg_jtape *t, const lg_jnode *root)
{
    const lg_jnode *tm = lg_jget(t, root, "timings"), *m = lg_jget(t, root, "metrics");
    if (tm && tm->type == LG_J_OBJ) {
        d->srv.present = 1;
        d->srv.prompt_ms = jms(t, tm, "prompt_ms");
        d->srv.decode_ms = jms(t, tm, "predicted_ms");
        d->srv.tpot_ms = jms(t, tm, "predicted_per_token_ms");
        d->srv.prompt_n = lg_jcount(t, tm, "prompt_n");
        d->srv.decode_n = lg_jcount(t, tm, "predicted_n");
        int64_t c = lg_jcount(t, tm, "cache_n");
        if (c >= 0 && d->usage_cached < 0)
            d->usage_cached = c;
    }
    if (m && m->type == LG_J_OBJ) {
        d->srv.present = 1;
        d->srv.ttft_ms = jms(t, m, "time_to_first_token_ms");
        d->srv.queue_ms = jms(t, m, "queue_time_ms");
        d->srv.decode_ms = jms(t, m, "generation_time_ms");
        d->srv.tpot_ms = jms(t, m, "mean_itl_ms");
    }
}

/* The text of every choice from first on (chat: delta.reasoning_content or
 * delta.reasoning, and delta.content; completions: text), by kind. */
static void choices_text(lg_delta *d, const lg_jtape *t, const lg_jnode *first, size_t *tb, size_t *ab,
                         lg_delta_out *out)
{
    for (const lg_jnode *c = first; c; c = lg_jnext(t, c)) {
        const lg_jnode *delta = lg_jget(t, c, "delta");
        size_t n = 0;
        const char *s;
        if (delta && delta->type == LG_J_OBJ) {
            if ((s = lg_jstr(t, delta, "reasoning_content", &n)) || (s = lg_jstr(t, delta, "reasoning", &n)))
                lg_delta_thinking(d, s, n, tb);
            if ((s = lg_jstr(t, delta, "content", &n)))
                lg_delta_content(d, s, n, tb, ab, &out->reclassify);
        } else if ((s = lg_jstr(t, c, "text", &n))) {
            lg_delta_content(d, s, n, tb, ab, &out->reclassify);
        }
    }
}

void lg_openai_event(lg_delta *d, const char *name, const lg_jtape *t, lg_delta_out *out)
{
    const lg_jnode *root = &t->n[0];
    (void)name; /* events of these APIs are unnamed */
    if (lg_delta_error_body(d, t))
        return;
    const lg_jnode *choices = lg_jget(t, root, "choices");
    const lg_jnode *usage = lg_jget(t, root, "usage");
    const lg_jnode *first = choices && choices->type == LG_J_ARR ? lg_jchild(t, choices) : NULL;
    if (usage && usage->type == LG_J_OBJ && !first) {
        /* The final usage chunk: what the server says it did. */
        const lg_jnode *det = lg_jget(t, usage, "completion_tokens_details");
        d->usage_prompt = lg_jcount(t, usage, "prompt_tokens");
        d->usage_completion = lg_jcount(t, usage, "completion_tokens");
        d->usage_reasoning = lg_jcount(t, usage, "reasoning_tokens");
        if (d->usage_reasoning < 0 && det && det->type == LG_J_OBJ)
            d->usage_reasoning = lg_jcount(t, det, "reasoning_tokens");
        take_cached(d, t, usage);
        take_server_timing(d, t, root);
        return;
    }
    size_t tb = 0, ab = 0;
    choices_text(d, t, first, &tb, &ab, out);
    if (first && d->out)
        choice_outputs(d->out, t, first);
    if (first) {
        /* the last chunk of a choice: its finish reason, and where the
         * server puts them there (llama.cpp), its own timings */
        const lg_jnode *fr = lg_jget(t, first, "finish_reason");
        if (fr && fr->type != LG_J_NULL) {
            lg_delta_finish(d, t, fr);
            take_server_timing(d, t, root);
            if (usage && usage->type == LG_J_OBJ)
                take_cached(d, t, usage);
        }
    }
    lg_delta_count(d, tb, ab, usage && usage->type == LG_J_OBJ ? lg_jcount(t, usage, "completion_tokens") : -1, out);
}

/* ---- re-scoring ----------------------------------------------------------- */

/* The "prompt_logprobs" array of an answer: a completions choice's, else
 * the top level's (chat). NULL when the server sent none. */
static const cJSON *find_plp(const cJSON *root)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(ch, "prompt_logprobs");
    if (!cJSON_IsArray(a))
        a = cJSON_GetObjectItemCaseSensitive(root, "prompt_logprobs");
    return cJSON_IsArray(a) ? a : NULL;
}

/* Entry e (an object whose first member is the position's token) into slot i. */
static int take_entry(lg_rescore *r, size_t i, const cJSON *e)
{
    const cJSON *m = cJSON_IsObject(e) ? e->child : NULL;
    r->lp[i] = r->top_lp[i] = NAN;
    r->rank[i] = 0;
    r->id[i] = -1;
    if (!m)
        return 0;
    char *end = NULL;
    long long id = strtoll(m->string ? m->string : "", &end, 10);
    r->id[i] = end && *end == '\0' && id >= 0 ? id : -1;
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(m, "logprob");
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(m, "rank");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(m, "decoded_token");
    r->lp[i] = cJSON_IsNumber(lp) ? lp->valuedouble : cJSON_IsNumber(m) ? m->valuedouble : NAN;
    /* a server's number: cast only what an int holds */
    r->rank[i] = cJSON_IsNumber(rk) && fabs(rk->valuedouble) < 1e9 ? (int)rk->valuedouble : 0;
    /* the other members are the top-k alternatives: prefill's first is the
     * largest logprob of them all */
    for (const cJSON *a = m; a; a = a->next) {
        const cJSON *alp = cJSON_GetObjectItemCaseSensitive(a, "logprob");
        double v = cJSON_IsNumber(alp) ? alp->valuedouble : cJSON_IsNumber(a) ? a->valuedouble : NAN;
        if (isfinite(v) && !(v <= r->top_lp[i]))
            r->top_lp[i] = v;
    }
    if (cJSON_IsString(dt) && !(r->tok[i] = strdup(dt->valuestring)))
        return LL_ENOMEM;
    return 0;
}

static int parse_answer(const lg_rescore_req *q, const ll_buf *resp, lg_rescore *r, char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLengthOpts(resp->p ? resp->p : "", resp->len, NULL, 0);
    const cJSON *a = root ? find_plp(root) : NULL;
    int rc = 0;
    if (!a) {
        /* llama.cpp's answers carry its "timings": name it, it never will */
        int llama = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "timings"));
        ll_errf(err, errlen, "%s answered without \"prompt_logprobs\": this server does not return prompt "
                "logprobs%s", q->url, llama ? " (llama.cpp's llama-server scores only the tokens it samples)" : "");
        cJSON_Delete(root);
        return LG_RESCORE_UNSUPPORTED;
    }
    size_t total = (size_t)cJSON_GetArraySize(a), n = q->n_tok;
    if (total < n) {
        ll_errf(err, errlen, "%s scored %zu prompt positions, fewer than the %zu output tokens", q->url, total, n);
        cJSON_Delete(root);
        return LL_EPARSE;
    }
    rc = lg_rescore_alloc(r, n);
    size_t i = 0, skip = total - n;
    for (const cJSON *e = a->child; e && rc == 0; e = e->next, i++)
        if (i >= skip)
            rc = take_entry(r, i - skip, e);
    cJSON_Delete(root);
    return rc;
}

int lg_openai_rescore(const lg_rescore_req *q, lg_openai_fill fill, const char *shape, lg_rescore *out, char *err,
                      size_t errlen)
{
    cJSON *root = cJSON_CreateObject(), *prompt = cJSON_Parse(q->prompt_json);
    char *body = NULL;
    ll_buf resp = {0};
    int rc = root && (!q->model || cJSON_AddStringToObject(root, "model", q->model)) ? 0 : LL_ENOMEM;
    if (rc == 0)
        rc = prompt ? fill(root, &prompt, q) : LL_EINVAL;
    if (rc == 0 && !(cJSON_AddNumberToObject(root, "prompt_logprobs", q->top_k) &&
                     cJSON_AddNumberToObject(root, "max_tokens", 1) &&
                     cJSON_AddNumberToObject(root, "temperature", 0) &&
                     (body = cJSON_PrintUnformatted(root))))
        rc = LL_ENOMEM;
    cJSON_Delete(prompt);
    cJSON_Delete(root);
    if (rc == LL_EINVAL)
        ll_errf(err, errlen, "the recorded prompt is not %s", shape);
    else if (rc)
        ll_errf(err, errlen, "out of memory");
    if (rc == 0 && (rc = lg_rescore_exchange(q, body, &resp, err, errlen)) == 0)
        rc = parse_answer(q, &resp, out, err, errlen);
    free(body);
    ll_buf_free(&resp);
    return rc;
}
