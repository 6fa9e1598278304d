/* records_outputs.c: the request's "outputs" member (docs/records.md
 * "outputs"): what a request produced, kept so that `loadlaw compare` can tell
 * whether two runs' outputs agree. Written only when a sweep records outputs,
 * so a run that does not pays nothing and its lines stay as they were.
 *
 * Shape: {"key":"p3-s1","n":N,"ids":[..],"tok":[..],"lp":[..],
 * "top":[[["tok",lp],...],...],"text":"...","text_bytes":B,"text_hash":"hex"},
 * each per-token array present only when the server said it. */
#include "records_outputs.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t ll_fnv64(uint64_t h, const void *p, size_t len)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

void ll_rec_outputs_free(ll_rec_outputs *o)
{
    if (!o)
        return;
    for (size_t i = 0; o->tok && i < o->n_tok; i++)
        free(o->tok[i]);
    for (size_t i = 0; o->top_tok && i < o->n_tok * (size_t)o->top_k; i++)
        free(o->top_tok[i]);
    free(o->ids);
    free(o->tok);
    free(o->lp);
    free(o->top_tok);
    free(o->top_lp);
    free(o->text);
    free(o->prompt);
    free(o);
}

/* ---- writer ------------------------------------------------------------------ */

static int put_num(ll_buf *b, double v)
{
    return isfinite(v) ? ll_buf_printf(b, "%.9g", v) : ll_buf_printf(b, "null");
}

static int put_str(ll_buf *b, const char *s)
{
    return s ? ll_json_escape(b, s) : ll_buf_printf(b, "null");
}

static int put_top(ll_buf *b, const ll_rec_outputs *o)
{
    int rc = 0;
    LL_TRY(ll_buf_printf(b, ",\"top\":["));
    for (size_t i = 0; i < o->n_tok; i++) {
        LL_TRY(ll_buf_printf(b, i ? ",[" : "["));
        int first = 1;
        for (int j = 0; j < o->top_k; j++) {
            size_t k = i * (size_t)o->top_k + (size_t)j;
            if (!o->top_tok[k])
                continue;
            LL_TRY(ll_buf_printf(b, first ? "[" : ",["));
            LL_TRY(put_str(b, o->top_tok[k]));
            LL_TRY(ll_buf_append(b, ",", 1));
            LL_TRY(put_num(b, o->top_lp[k]));
            LL_TRY(ll_buf_append(b, "]", 1));
            first = 0;
        }
        LL_TRY(ll_buf_append(b, "]", 1));
    }
    LL_TRY(ll_buf_append(b, "]", 1));
fail:
    return rc;
}

int ll_rec_format_outputs(ll_buf *b, const ll_rec_outputs *o)
{
    int rc = 0;
    LL_TRY(ll_buf_printf(b, ",\"outputs\":{\"key\":"));
    LL_TRY(ll_json_escape(b, o->key));
    LL_TRY(ll_buf_printf(b, ",\"n\":%zu", o->n_tok));
    if (o->ids) {
        LL_TRY(ll_buf_printf(b, ",\"ids\":["));
        for (size_t i = 0; i < o->n_tok; i++)
            LL_TRY(ll_buf_printf(b, i ? ",%" PRId64 : "%" PRId64, o->ids[i]));
        LL_TRY(ll_buf_append(b, "]", 1));
    }
    if (o->tok) {
        LL_TRY(ll_buf_printf(b, ",\"tok\":["));
        for (size_t i = 0; i < o->n_tok; i++) {
            if (i)
                LL_TRY(ll_buf_append(b, ",", 1));
            LL_TRY(put_str(b, o->tok[i]));
        }
        LL_TRY(ll_buf_append(b, "]", 1));
    }
    if (o->lp) {
        LL_TRY(ll_buf_printf(b, ",\"lp\":["));
        for (size_t i = 0; i < o->n_tok; i++) {
            if (i)
                LL_TRY(ll_buf_append(b, ",", 1));
            LL_TRY(put_num(b, o->lp[i]));
        }
        LL_TRY(ll_buf_append(b, "]", 1));
    }
    if (o->top_k > 0 && o->top_tok && o->top_lp)
        LL_TRY(put_top(b, o));
    if (o->text) {
        LL_TRY(ll_buf_printf(b, ",\"text\":"));
        LL_TRY(ll_json_escape(b, o->text));
        LL_TRY(ll_buf_printf(b, ",\"text_bytes\":%zu,\"text_hash\":\"%016" PRIx64 "\"", o->text_bytes,
                             o->text_hash));
    }
    /* -- the prompt as sent (check-decode) -- */
    if (o->prompt) {
        LL_TRY(ll_buf_printf(b, ",\"prompt\":"));
        LL_TRY(ll_json_escape(b, o->prompt));
    }
    if (o->prompt_bytes)
        LL_TRY(ll_buf_printf(b, ",\"prompt_bytes\":%zu", o->prompt_bytes));
    /* -- end prompt -- */
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

/* ---- reader ------------------------------------------------------------------ */

static char *dup_str(const cJSON *v)
{
    return cJSON_IsString(v) && v->valuestring ? strdup(v->valuestring) : NULL;
}

static double num_or_nan(const cJSON *v)
{
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* An array member of exactly n items, or NULL when absent; *bad when present
 * with another shape. */
static const cJSON *arr_n(const cJSON *o, const char *key, size_t n, int *bad)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!a)
        return NULL;
    if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != n) {
        *bad = 1;
        return NULL;
    }
    return a;
}

static int read_top(ll_rec_outputs *o, const cJSON *top)
{
    int k = 0;
    for (const cJSON *t = top->child; t; t = t->next) {
        int m = cJSON_GetArraySize(t);
        k = m > k ? m : k;
    }
    k = k > LL_REC_OUTPUT_TOP_MAX ? LL_REC_OUTPUT_TOP_MAX : k;
    if (k == 0)
        return 0;
    size_t n = o->n_tok * (size_t)k;
    if (!(o->top_tok = calloc(n, sizeof *o->top_tok)) || !(o->top_lp = malloc(n * sizeof *o->top_lp)))
        return LL_ENOMEM;
    o->top_k = k;
    size_t i = 0;
    for (const cJSON *t = top->child; t; t = t->next, i++) {
        int j = 0;
        for (size_t q = 0; q < (size_t)k; q++)
            o->top_lp[i * (size_t)k + q] = NAN;
        for (const cJSON *p = cJSON_IsArray(t) ? t->child : NULL; p && j < k; p = p->next, j++) {
            size_t at = i * (size_t)k + (size_t)j;
            o->top_tok[at] = cJSON_IsArray(p) ? dup_str(cJSON_GetArrayItem(p, 0)) : NULL;
            o->top_lp[at] = cJSON_IsArray(p) ? num_or_nan(cJSON_GetArrayItem(p, 1)) : NAN;
        }
    }
    return 0;
}

static int read_arrays(ll_rec_outputs *o, const cJSON *v, int *bad)
{
    const cJSON *ids = arr_n(v, "ids", o->n_tok, bad), *tok = arr_n(v, "tok", o->n_tok, bad);
    const cJSON *lp = arr_n(v, "lp", o->n_tok, bad), *top = arr_n(v, "top", o->n_tok, bad);
    size_t i = 0;
    if (ids && !(o->ids = malloc((o->n_tok ? o->n_tok : 1) * sizeof *o->ids)))
        return LL_ENOMEM;
    for (const cJSON *c = ids ? ids->child : NULL; c; c = c->next, i++) {
        int ok = cJSON_IsNumber(c) && c->valuedouble >= 0 && c->valuedouble < 9e15;
        if (!ok)
            *bad = 1;
        o->ids[i] = ok ? (int64_t)c->valuedouble : -1;
    }
    i = 0;
    if (tok && !(o->tok = calloc(o->n_tok ? o->n_tok : 1, sizeof *o->tok)))
        return LL_ENOMEM;
    for (const cJSON *c = tok ? tok->child : NULL; c; c = c->next, i++)
        o->tok[i] = dup_str(c);
    i = 0;
    if (lp && !(o->lp = malloc((o->n_tok ? o->n_tok : 1) * sizeof *o->lp)))
        return LL_ENOMEM;
    for (const cJSON *c = lp ? lp->child : NULL; c; c = c->next, i++)
        o->lp[i] = num_or_nan(c);
    return top ? read_top(o, top) : 0;
}

int ll_rec_read_outputs(const cJSON *v, ll_rec_outputs **out)
{
    ll_rec_outputs *o = NULL;
    int rc = 0, bad = 0;
    *out = NULL;
    if (!cJSON_IsObject(v))
        return LL_EINVAL;
    LL_TRY((o = calloc(1, sizeof *o)) ? 0 : LL_ENOMEM);
    snprintf(o->key, sizeof o->key, "%s", ll_json_str(v, "key", ""));
    double n = ll_json_num(v, "n", 0);
    LL_TRY(n >= 0 && n <= 1e8 ? 0 : LL_EINVAL);
    o->n_tok = (size_t)n;
    LL_TRY(read_arrays(o, v, &bad));
    LL_TRY(bad ? LL_EINVAL : 0);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(v, "text");
    if (cJSON_IsString(text)) {
        LL_TRY((o->text = dup_str(text)) ? 0 : LL_ENOMEM);
        o->text_bytes = (size_t)ll_json_num(v, "text_bytes", (double)strlen(o->text));
        const char *h = ll_json_str(v, "text_hash", NULL);
        o->text_hash = h ? strtoull(h, NULL, 16) : ll_fnv64(LL_FNV64_INIT, o->text, strlen(o->text));
    }
    /* -- the prompt as sent (check-decode) -- */
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(v, "prompt");
    if (cJSON_IsString(prompt))
        LL_TRY((o->prompt = dup_str(prompt)) ? 0 : LL_ENOMEM);
    double pb = ll_json_num(v, "prompt_bytes", o->prompt ? (double)strlen(o->prompt) : 0);
    o->prompt_bytes = pb >= 0 && pb < 9e15 ? (size_t)pb : 0;
    /* -- end prompt -- */
    *out = o;
    return 0;
fail:
    ll_rec_outputs_free(o);
    return rc;
}

/* ---- copy -------------------------------------------------------------------- */

static int dup_strs(char ***dst, char *const *src, size_t n)
{
    if (!src)
        return 0;
    if (!(*dst = calloc(n ? n : 1, sizeof **dst)))
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (src[i] && !((*dst)[i] = strdup(src[i])))
            return LL_ENOMEM;
    return 0;
}

static void *dup_mem(const void *p, size_t bytes, int *oom)
{
    void *q = p ? malloc(bytes ? bytes : 1) : NULL;
    if (p && !q)
        *oom = 1;
    else if (q)
        memcpy(q, p, bytes);
    return q;
}

ll_rec_outputs *ll_rec_outputs_dup(const ll_rec_outputs *o)
{
    ll_rec_outputs *c = calloc(1, sizeof *c);
    int oom = 0;
    if (!c)
        return NULL;
    memcpy(c->key, o->key, sizeof c->key);
    c->n_tok = o->n_tok;
    c->text_bytes = o->text_bytes;
    c->text_hash = o->text_hash;
    c->top_k = o->top_tok && o->top_lp ? o->top_k : 0;
    size_t nt = o->n_tok * (size_t)c->top_k;
    c->ids = dup_mem(o->ids, o->n_tok * sizeof *o->ids, &oom);
    c->lp = dup_mem(o->lp, o->n_tok * sizeof *o->lp, &oom);
    c->top_lp = c->top_k ? dup_mem(o->top_lp, nt * sizeof *o->top_lp, &oom) : NULL;
    c->text = o->text ? strdup(o->text) : NULL;
    c->prompt = o->prompt ? strdup(o->prompt) : NULL; /* the prompt as sent (check-decode) */
    c->prompt_bytes = o->prompt_bytes;
    if (oom || (o->text && !c->text) || (o->prompt && !c->prompt) || dup_strs(&c->tok, o->tok, o->n_tok) ||
        (c->top_k && dup_strs(&c->top_tok, o->top_tok, nt))) {
        ll_rec_outputs_free(c);
        return NULL;
    }
    return c;
}
