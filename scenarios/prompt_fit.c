/* prompt_fit.c: synthetic prompts asked as a token length (prompt_tokens),
 * fitted before a sweep so that each one, with the head it is sent with in
 * front (the request's id and run tag that keep it fresh), counts its asked
 * length as the target counts it: the server's /tokenize, or the scenario's
 * tokenizer. The head is inside the length, not on top of it.
 *
 * Method: count head + text; over the length, drop trailing words (as many
 * as the text's tokens per word says the excess is, at least one); under it
 * by a few tokens, append " the" once per missing token (one token with a
 * leading space in every English BPE and SentencePiece vocabulary, and a
 * piece of its own after the pre-tokenizer's split at the space, so each
 * adds exactly one); under by more, append seeded vocabulary words. Count
 * again, at most SCN_FIT_MAX_COUNTS times. A prompt that does not land on
 * its length keeps the last count as its target: the records then say what
 * was sent, not what was asked. Against a server each count is one
 * /tokenize request: three or four per prompt, before the first level. */
#include "scn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Counts per prompt before its last count is kept as it is. */
#define SCN_FIT_MAX_COUNTS 8
/* Missing tokens up to this many are filled with " the", one per token. */
#define SCN_FIT_FILL_TOK 4

/* text without its last k words (at least one word is kept): 1 when a word
 * went, 0 when only one was left. */
static int drop_words(ll_buf *t, int k)
{
    int dropped = 0;
    while (k-- > 0) {
        size_t n = t->len;
        while (n > 0 && t->p[n - 1] == ' ')
            n--;
        while (n > 0 && t->p[n - 1] != ' ')
            n--;
        while (n > 0 && t->p[n - 1] == ' ')
            n--;
        if (n == 0)
            break;
        t->len = n;
        t->p[n] = '\0';
        dropped = 1;
    }
    return dropped;
}

/* One step toward want tokens from got (t's words, head included in got):
 * 0, 1 when nothing more can be done, or LL_ENOMEM. */
static int step_toward(ll_buf *t, int64_t got, int want, int head_words, ll_rng *r)
{
    int words = scn_count_words(t->p ? t->p : "") + head_words;
    double per_word = (double)got / (words > 0 ? words : 1);
    int64_t diff = want - got;
    if (diff < 0) {
        int k = (int)floor((double)-diff / per_word);
        return drop_words(t, k < 1 ? 1 : k) ? 0 : 1;
    }
    if (diff <= SCN_FIT_FILL_TOK) {
        int rc = 0;
        for (int64_t k = 0; k < diff && rc == 0; k++)
            rc = ll_buf_printf(t, "%sthe", t->len ? " " : "");
        return rc;
    }
    int k = (int)floor((double)diff / per_word);
    return scn_add_words(t, k < 1 ? 1 : k, r);
}

/* Fit prompt e (index i) behind head. */
static int fit_one(prompt *e, size_t i, const char *head, scn_count_fn count, void *cctx, ll_buf *b,
                   ll_buf *t, scn_fit_stats *st)
{
    ll_rng r;
    int64_t got = -1;
    int rc = 0, head_words = scn_count_words(head);
    ll_rng_seed(&r, 0xf17f17ULL ^ (i * 0x9e3779b97f4a7c15ULL));
    ll_buf_reset(t);
    LL_TRY(ll_buf_append(t, e->text, strlen(e->text)));
    for (int k = 0; k < SCN_FIT_MAX_COUNTS; k++) {
        ll_buf_reset(b);
        LL_TRY(ll_buf_printf(b, "%s%s", head, t->p ? t->p : ""));
        got = count(cctx, b->p, b->len);
        st->n_counts++;
        if (got < 0) {
            rc = (int)got;
            goto fail;
        }
        if (got == e->asked_tok || k == SCN_FIT_MAX_COUNTS - 1)
            break;
        int s = step_toward(t, got, e->asked_tok, head_words, &r);
        if (s == 1)
            break;
        LL_TRY(s);
    }
    char *text = strdup(t->p ? t->p : "");
    LL_TRY(text ? 0 : LL_ENOMEM);
    free(e->text);
    e->text = text;
    e->words = scn_count_words(text);
    e->target_tok = (int)got;
    e->fitted = 1;
    st->n_fitted++;
    st->n_exact += got == e->asked_tok;
    int off = (int)llabs(got - e->asked_tok);
    if (off > st->max_off_tok)
        st->max_off_tok = off;
fail:
    return rc;
}

/* A prompt this file can fit: synthetic, asked in tokens, the head at its start. */
static int fittable(const prompt *e) { return e->asked_tok > 0 && e->head_at == 0 && e->group < 0; }

int scn_prompts_fittable(const scn_prompts *p)
{
    for (size_t i = 0; i < p->set.n; i++)
        if (fittable(&p->set.v[i]))
            return 1;
    return 0;
}

int scn_prompts_fit(scn_prompts *p, size_t n_use, scn_head_fn head, void *hctx, scn_count_fn count, void *cctx,
                    scn_fit_stats *st, char *err, size_t errlen)
{
    ll_buf b = {0}, t = {0};
    char h[64];
    int rc = 0;
    memset(st, 0, sizeof *st);
    for (size_t i = 0; i < p->set.n && i < n_use && rc == 0; i++) {
        if (!fittable(&p->set.v[i]) || !head(hctx, i, h, sizeof h))
            continue;
        rc = fit_one(&p->set.v[i], i, h, count, cctx, &b, &t, st);
        if (rc)
            ll_errf(err, errlen, "fitting prompt %zu to %d tokens: %s", i, p->set.v[i].asked_tok,
                    ll_strerror(rc));
    }
    ll_buf_free(&b);
    ll_buf_free(&t);
    return rc;
}
