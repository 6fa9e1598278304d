/* outputs.c: gather what a request produced from its stream (outputs.h).
 *
 * Servers say it in three places, each kept where present: the text
 * (chat delta.content / reasoning, completions text), per-token logprobs
 * (chat: choices[].logprobs.content[] of {token, logprob, top_logprobs:
 * [{token, logprob}]}; completions: logprobs.tokens[], token_logprobs[],
 * top_logprobs[] of {token: logprob}), and token ids (vLLM's return_token_ids:
 * choices[].token_ids; its return_tokens_as_token_ids spells a logprobs token
 * "token_id:N"); the Responses API's output_text deltas carry logprobs in
 * chat's per-token shape, and SGLang's /generate meta_info.output_token_logprobs
 * [logprob, id, text] triples (output_top_logprobs rows of them) or
 * output_ids alone. llama.cpp's llama-server spells chat and completions
 * logprobs alike, chat's content[] shape with each token's "id" (and each
 * alternative's), so its ids come from there (tools/server/server-task.cpp
 * probs_vector_to_json); a choice that also has token_ids keeps those, and a
 * "token_id:N" token its N, so no id is taken twice. The text is bounded (LL_REC_OUTPUT_TEXT_MAX) and hashed whole,
 * so a long answer costs a record its first 4 KiB, never more. The prompt
 * as sent is kept beside them (up to 64 KiB) for `loadlaw check-decode`:
 * chat's messages, completions' prompt or /generate's text. */
#include "outputs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lg_outputs *lg_out_new(void)
{
    lg_outputs *o = calloc(1, sizeof *o);
    if (o)
        o->text_hash = LL_FNV64_INIT;
    return o;
}

static void clear(lg_outputs *o)
{
    for (size_t i = 0; i < o->tok.n; i++)
        free(o->tok.v[i]);
    for (size_t i = 0; i < o->alts.n; i++)
        free(o->alts.v[i].s);
    ll_vec_free(&o->ids);
    ll_vec_free(&o->tok);
    ll_vec_free(&o->lp);
    ll_vec_free(&o->alts);
    ll_buf_free(&o->text);
    free(o->prompt);
    o->prompt = NULL;
    o->prompt_bytes = 0;
}

void lg_out_free(lg_outputs *o)
{
    if (!o)
        return;
    clear(o);
    free(o);
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static void add_text(lg_outputs *o, const char *s, size_t n)
{
    size_t room = o->text_bytes < LL_REC_OUTPUT_TEXT_MAX ? LL_REC_OUTPUT_TEXT_MAX - o->text_bytes : 0;
    if (room && ll_buf_append(&o->text, s, n < room ? n : room))
        o->oom = 1;
    o->text_bytes += n;
    o->text_hash = ll_fnv64(o->text_hash, s, n);
}

static double num_or_nan(const lg_jnode *v)
{
    return v && v->type == LG_J_NUM ? v->num : NAN;
}

/* A server's number as a token id: a whole number in [0, 2^53), else -1
 * (a 1e300 or a -3 is no id, and is never cast). */
static int64_t id_of(const lg_jnode *v)
{
    return v && v->type == LG_J_NUM && v->num >= 0 && v->num < 9e15 && v->num == floor(v->num) ? (int64_t)v->num
                                                                                                : -1;
}

/* One token: its text, logprob and id: from "token_id:N", else id (-1: none). */
static void add_token(lg_outputs *o, const char *s, size_t n, double lp, int64_t id)
{
    char *p = dup_n(s ? s : "", s ? n : 0);
    if (!p || ll_vec_push(&o->tok, p) || ll_vec_push(&o->lp, lp)) {
        free(p);
        o->oom = 1;
        return;
    }
    if (n > 9 && memcmp(s, "token_id:", 9) == 0) {
        char *end = NULL;
        long long v = strtoll(p + 9, &end, 10);
        id = end != p + 9 && *end == '\0' && v >= 0 ? v : -1;
    }
    if (id >= 0 && ll_vec_push(&o->ids, id))
        o->oom = 1;
}

static void add_alt(lg_outputs *o, const char *s, size_t n, double lp)
{
    lg_out_alt a = {o->tok.n - 1, dup_n(s, n), lp};
    if (!a.s || ll_vec_push(&o->alts, a)) {
        free(a.s);
        o->oom = 1;
    }
}

/* chat: logprobs.content[] of {token, logprob, top_logprobs: [{token,
 * logprob}]}, with llama.cpp an "id" in each (taken when with_ids). */
static void chat_logprobs(lg_outputs *o, const lg_jtape *t, const lg_jnode *content, int with_ids)
{
    for (const lg_jnode *e = lg_jchild(t, content); e; e = lg_jnext(t, e)) {
        size_t n = 0;
        const char *s = lg_jstr(t, e, "token", &n);
        add_token(o, s, n, num_or_nan(lg_jget(t, e, "logprob")), with_ids ? id_of(lg_jget(t, e, "id")) : -1);
        const lg_jnode *top = lg_jget(t, e, "top_logprobs");
        for (const lg_jnode *a = top && top->type == LG_J_ARR ? lg_jchild(t, top) : NULL; a; a = lg_jnext(t, a)) {
            size_t an = 0;
            const char *as = lg_jstr(t, a, "token", &an);
            if (as)
                add_alt(o, as, an, num_or_nan(lg_jget(t, a, "logprob")));
        }
    }
}

/* completions: logprobs.tokens[], token_logprobs[], top_logprobs[] of {token: logprob} */
static void completion_logprobs(lg_outputs *o, const lg_jtape *t, const lg_jnode *lp)
{
    const lg_jnode *toks = lg_jget(t, lp, "tokens"), *tlp = lg_jget(t, lp, "token_logprobs");
    const lg_jnode *top = lg_jget(t, lp, "top_logprobs");
    const lg_jnode *l = tlp && tlp->type == LG_J_ARR ? lg_jchild(t, tlp) : NULL;
    const lg_jnode *k = top && top->type == LG_J_ARR ? lg_jchild(t, top) : NULL;
    for (const lg_jnode *e = toks->type == LG_J_ARR ? lg_jchild(t, toks) : NULL; e; e = lg_jnext(t, e)) {
        add_token(o, e->type == LG_J_STR ? e->str : NULL, e->type == LG_J_STR ? e->str_len : 0, num_or_nan(l), -1);
        for (const lg_jnode *a = k && k->type == LG_J_OBJ ? lg_jchild(t, k) : NULL; a; a = lg_jnext(t, a))
            add_alt(o, a->key, a->key_len, num_or_nan(a));
        l = l ? lg_jnext(t, l) : NULL;
        k = k ? lg_jnext(t, k) : NULL;
    }
}

/* v's id onto the ids, when it is one. */
static void push_id(lg_outputs *o, const lg_jnode *v)
{
    int64_t id = id_of(v);
    if (id >= 0 && ll_vec_push(&o->ids, id))
        o->oom = 1;
}

static void token_ids(lg_outputs *o, const lg_jtape *t, const lg_jnode *ids)
{
    for (const lg_jnode *e = lg_jchild(t, ids); e; e = lg_jnext(t, e))
        push_id(o, e);
}

void lg_out_choice(lg_outputs *o, const lg_jtape *t, const lg_jnode *choice)
{
    const lg_jnode *delta = lg_jget(t, choice, "delta"), *lp = lg_jget(t, choice, "logprobs");
    const lg_jnode *ids = lg_jget(t, choice, "token_ids");
    size_t n = 0;
    const char *s;
    if (delta && delta->type == LG_J_OBJ) {
        if ((s = lg_jstr(t, delta, "reasoning_content", &n)) || (s = lg_jstr(t, delta, "reasoning", &n)))
            add_text(o, s, n);
        if ((s = lg_jstr(t, delta, "content", &n)))
            add_text(o, s, n);
        if (!ids)
            ids = lg_jget(t, delta, "token_ids");
    } else if ((s = lg_jstr(t, choice, "text", &n))) {
        add_text(o, s, n);
    }
    if (lp && lp->type == LG_J_OBJ) {
        const lg_jnode *content = lg_jget(t, lp, "content"), *toks = lg_jget(t, lp, "tokens");
        if (content && content->type == LG_J_ARR)
            chat_logprobs(o, t, content, !(ids && ids->type == LG_J_ARR));
        else if (toks && toks->type == LG_J_ARR)
            completion_logprobs(o, t, lp);
    }
    if (ids && ids->type == LG_J_ARR)
        token_ids(o, t, ids);
}

/* ---- the Responses API and SGLang's /generate -------------------------------- */

void lg_out_responses(lg_outputs *o, const lg_jtape *t, const lg_jnode *ev)
{
    if (!o)
        return;
    size_t n = 0;
    const char *s = lg_jstr(t, ev, "delta", &n);
    const lg_jnode *lp = lg_jget(t, ev, "logprobs");
    if (s)
        add_text(o, s, n);
    if (lp && lp->type == LG_J_ARR)
        chat_logprobs(o, t, lp, 1);
}

/* One [logprob, id, text] triple (text null unless return_text_in_logprobs). */
static void sglang_token(lg_outputs *o, const lg_jtape *t, const lg_jnode *e)
{
    const lg_jnode *lp = lg_jchild(t, e), *id = lp ? lg_jnext(t, lp) : NULL, *tx = id ? lg_jnext(t, id) : NULL;
    int have = tx && tx->type == LG_J_STR;
    add_token(o, have ? tx->str : NULL, have ? tx->str_len : 0, num_or_nan(lp), id_of(id));
}

static void sglang_alts(lg_outputs *o, const lg_jtape *t, const lg_jnode *row)
{
    for (const lg_jnode *a = row && row->type == LG_J_ARR ? lg_jchild(t, row) : NULL; a; a = lg_jnext(t, a)) {
        const lg_jnode *lp = lg_jchild(t, a), *id = lp ? lg_jnext(t, lp) : NULL, *tx = id ? lg_jnext(t, id) : NULL;
        char buf[32];
        int64_t n = id_of(id);
        if (tx && tx->type == LG_J_STR)
            add_alt(o, tx->str, tx->str_len, num_or_nan(lp));
        else if (n >= 0)
            add_alt(o, buf, (size_t)snprintf(buf, sizeof buf, "token_id:%lld", (long long)n), num_or_nan(lp));
    }
}

void lg_out_generate(lg_outputs *o, const lg_jtape *t, const lg_jnode *ev, const char *text, size_t n, int cumulative)
{
    const lg_jnode *meta = lg_jget(t, ev, "meta_info");
    const lg_jnode *lps = meta ? lg_jget(t, meta, "output_token_logprobs") : NULL;
    const lg_jnode *tops = meta ? lg_jget(t, meta, "output_top_logprobs") : NULL;
    const lg_jnode *ids = lg_jget(t, ev, "output_ids");
    if (text && n)
        add_text(o, text, n);
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
            push_id(o, e);
}

void lg_out_prompt(lg_outputs *o, const char *body, size_t len, int chat)
{
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, chat ? "messages" : "prompt");
    if (!chat && !p) /* SGLang's /generate: the prompt is "text" */
        p = cJSON_GetObjectItemCaseSensitive(root, "text");
    char *s = p ? cJSON_PrintUnformatted(p) : NULL;
    cJSON_Delete(root);
    if (!s)
        return;
    o->prompt_bytes = strlen(s);
    if (o->prompt_bytes <= LL_REC_OUTPUT_PROMPT_MAX)
        o->prompt = s;
    else
        free(s);
}

/* The alternatives as n_tok rows of k (the most any token has, capped). */
static int take_top(const lg_outputs *o, ll_rec_outputs *r)
{
    size_t k = 0, run = 0;
    for (size_t i = 0; i < o->alts.n; i++) {
        run = i > 0 && o->alts.v[i].tok_i == o->alts.v[i - 1].tok_i ? run + 1 : 1;
        k = run > k ? run : k;
    }
    k = k > LL_REC_OUTPUT_TOP_MAX ? LL_REC_OUTPUT_TOP_MAX : k;
    if (k == 0 || r->n_tok == 0)
        return 0;
    if (!(r->top_tok = calloc(r->n_tok * k, sizeof *r->top_tok)) ||
        !(r->top_lp = malloc(r->n_tok * k * sizeof *r->top_lp)))
        return LL_ENOMEM;
    r->top_k = (int)k;
    for (size_t i = 0; i < r->n_tok * k; i++)
        r->top_lp[i] = NAN;
    for (size_t i = 0, j = 0; i < o->alts.n; i++) {
        j = i > 0 && o->alts.v[i].tok_i == o->alts.v[i - 1].tok_i ? j + 1 : 0;
        size_t ti = o->alts.v[i].tok_i;
        if (j >= k || ti >= r->n_tok)
            continue;
        r->top_tok[ti * k + j] = o->alts.v[i].s;
        r->top_lp[ti * k + j] = o->alts.v[i].lp;
        o->alts.v[i].s = NULL; /* moved */
    }
    return 0;
}

ll_rec_outputs *lg_out_take(lg_outputs *o, const char *key)
{
    ll_rec_outputs *r = calloc(1, sizeof *r);
    if (!r)
        goto fail;
    snprintf(r->key, sizeof r->key, "%s", key);
    r->n_tok = o->tok.n ? o->tok.n : o->ids.n;
    if (o->tok.n) {
        r->tok = o->tok.v, r->lp = o->lp.v;
        o->tok.v = NULL, o->lp.v = NULL;
        o->tok.n = o->lp.n = 0;
    }
    if (o->ids.n && o->ids.n == r->n_tok) {
        r->ids = o->ids.v;
        o->ids.v = NULL;
    }
    if (take_top(o, r))
        goto fail;
    r->prompt = o->prompt; /* moved */
    r->prompt_bytes = o->prompt_bytes;
    o->prompt = NULL;
    if (o->text_bytes || o->text.len) {
        if (!(r->text = dup_n(o->text.p ? o->text.p : "", o->text.len)))
            goto fail;
        r->text_bytes = o->text_bytes;
        r->text_hash = o->text_hash;
    }
    clear(o);
    return r;
fail:
    ll_rec_outputs_free(r);
    clear(o);
    return NULL;
}
