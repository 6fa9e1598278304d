/* outputs.c: the collector of what a request produced (outputs.h): text,
 * tokens with their logprobs and top-k alternatives, token ids, and the
 * prompt as sent. Each server API's file reads its own events' spelling
 * into it (api_openai.c: chat and completions, with llama.cpp's and vLLM's
 * variants; api_responses.c; api_generate.c); the per-token logprobs shape
 * that chat and the Responses API share is read here (lg_out_logprobs).
 * The text is bounded (LL_REC_OUTPUT_TEXT_MAX) and hashed whole, so a long
 * answer costs a record its first 4 KiB, never more. The prompt as sent is
 * kept beside them (up to 64 KiB) for `loadlaw check-decode`: the member of
 * the body the API names (chat's messages, completions' prompt or
 * /generate's text). */
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

void lg_out_text(lg_outputs *o, const char *s, size_t n)
{
    size_t room = o->text_bytes < LL_REC_OUTPUT_TEXT_MAX ? LL_REC_OUTPUT_TEXT_MAX - o->text_bytes : 0;
    if (room && ll_buf_append(&o->text, s, n < room ? n : room))
        o->oom = 1;
    o->text_bytes += n;
    o->text_hash = ll_fnv64(o->text_hash, s, n);
}

double lg_out_num(const lg_jnode *v)
{
    return v && v->type == LG_J_NUM ? v->num : NAN;
}

/* A server's number as a token id: a whole number in [0, 2^53), else -1
 * (a 1e300 or a -3 is no id, and is never cast). */
int64_t lg_out_id_of(const lg_jnode *v)
{
    return v && v->type == LG_J_NUM && v->num >= 0 && v->num < 9e15 && v->num == floor(v->num) ? (int64_t)v->num
                                                                                                : -1;
}

void lg_out_token(lg_outputs *o, const char *s, size_t n, double lp, int64_t id)
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

void lg_out_alt_add(lg_outputs *o, const char *s, size_t n, double lp)
{
    lg_out_alt a = {o->tok.n - 1, dup_n(s, n), lp};
    if (!a.s || ll_vec_push(&o->alts, a)) {
        free(a.s);
        o->oom = 1;
    }
}

void lg_out_logprobs(lg_outputs *o, const lg_jtape *t, const lg_jnode *content, int with_ids)
{
    for (const lg_jnode *e = lg_jchild(t, content); e; e = lg_jnext(t, e)) {
        size_t n = 0;
        const char *s = lg_jstr(t, e, "token", &n);
        lg_out_token(o, s, n, lg_out_num(lg_jget(t, e, "logprob")),
                     with_ids ? lg_out_id_of(lg_jget(t, e, "id")) : -1);
        const lg_jnode *top = lg_jget(t, e, "top_logprobs");
        for (const lg_jnode *a = top && top->type == LG_J_ARR ? lg_jchild(t, top) : NULL; a; a = lg_jnext(t, a)) {
            size_t an = 0;
            const char *as = lg_jstr(t, a, "token", &an);
            if (as)
                lg_out_alt_add(o, as, an, lg_out_num(lg_jget(t, a, "logprob")));
        }
    }
}

void lg_out_id(lg_outputs *o, const lg_jnode *v)
{
    int64_t id = lg_out_id_of(v);
    if (id >= 0 && ll_vec_push(&o->ids, id))
        o->oom = 1;
}

void lg_out_prompt(lg_outputs *o, const char *body, size_t len, const char *key)
{
    if (!key)
        return;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, key);
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
