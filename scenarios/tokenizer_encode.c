/* tokenizer_encode.c: text -> token ids and back with a loaded tokenizer
 * (tokenizer.c reads tokenizer.json and says the pipeline): added tokens cut
 * out first, each remaining segment split by the pre-tokenizer steps, each
 * piece BPE-merged by rank; decode concatenates the tokens' bytes. The
 * tokenizer is read-only here: every call allocates its own scratch (the
 * PCRE2 match data too), so any number of threads may encode at once. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ---- encoding ------------------------------------------------------------------ */

/* A piece: a byte range of the per-call arena (prefix spaces are new copies). */
typedef struct tk_piece {
    size_t off, len;
    int match;
} tk_piece;
typedef LL_VEC(tk_piece) tk_pieces;
typedef LL_VEC(int32_t) tk_ids;

/* The parts of piece p by st's regex: (range, is_match) pairs that cover
 * it in order (with invert, the gaps are the matches). */
static int regex_parts(const tk_step *st, const char *arena, tk_piece p, pcre2_match_data *md, tk_pieces *parts)
{
    int rc = 0;
    size_t pos = 0, last = 0;
    while (pos <= p.len) {
        int m = pcre2_match(st->re, (PCRE2_SPTR)arena + p.off, p.len, pos, 0, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH)
            break;
        if (m < 0)
            return LL_EINVAL;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (e == s) { /* empty match: no part; step one character on */
            pos = s + 1;
            while (pos < p.len && ((unsigned char)arena[p.off + pos] & 0xC0) == 0x80)
                pos++;
            continue;
        }
        if (s > last)
            LL_TRY(ll_vec_push(parts, ((tk_piece){p.off + last, s - last, st->invert})));
        LL_TRY(ll_vec_push(parts, ((tk_piece){p.off + s, e - s, !st->invert})));
        last = pos = e;
    }
    if (last < p.len)
        LL_TRY(ll_vec_push(parts, ((tk_piece){p.off + last, p.len - last, st->invert})));
fail:
    return rc;
}

/* MergedWithPrevious (after_match 0): a match is glued to the non-match
 * before it; Contiguous (after_match 1): to the match before it. Only
 * pieces of this call grow. Parts are adjacent in the arena, so merging is
 * widening. */
static int glue_prev(const tk_pieces *parts, int after_match, tk_pieces *out)
{
    size_t base = out->n;
    int prev_match = 0, rc = 0;
    for (size_t i = 0; i < parts->n; i++) {
        if (parts->v[i].match && (after_match ? prev_match : !prev_match) && out->n > base)
            out->v[out->n - 1].len += parts->v[i].len;
        else
            LL_TRY(ll_vec_push(out, parts->v[i]));
        prev_match = parts->v[i].match;
    }
fail:
    return rc;
}

/* MergedWithNext: a match is glued to the part after it. */
static int glue_next(const tk_pieces *parts, tk_pieces *out)
{
    int rc = 0;
    for (size_t i = 0; i < parts->n; i++) {
        tk_piece q = parts->v[i];
        if (q.match && i + 1 < parts->n && !parts->v[i + 1].match) {
            q.len += parts->v[i + 1].len;
            i++;
        }
        LL_TRY(ll_vec_push(out, q));
    }
fail:
    return rc;
}

/* The parts combined by the behavior and appended to out. */
static int combine_parts(tk_behavior behavior, const tk_pieces *parts, tk_pieces *out)
{
    int rc = 0;
    switch (behavior) {
    case TK_ISOLATED:
        for (size_t i = 0; i < parts->n; i++)
            LL_TRY(ll_vec_push(out, parts->v[i]));
        break;
    case TK_REMOVED:
        for (size_t i = 0; i < parts->n; i++)
            if (!parts->v[i].match)
                LL_TRY(ll_vec_push(out, parts->v[i]));
        break;
    case TK_MERGED_PREV:
        return glue_prev(parts, 0, out);
    case TK_MERGED_NEXT:
        return glue_next(parts, out);
    case TK_CONTIGUOUS:
        return glue_prev(parts, 1, out);
    }
fail:
    return rc;
}

/* Split one piece by st's regex into (range, is_match) parts covering it, then
 * combine them by the behavior, as tokenizers' NormalizedString::split does. */
static int split_piece(const tk_step *st, const char *arena, tk_piece p, pcre2_match_data *md, tk_pieces *out)
{
    tk_pieces parts = {0};
    int rc = regex_parts(st, arena, p, md, &parts);
    if (rc == 0)
        rc = combine_parts(st->behavior, &parts, out);
    ll_vec_free(&parts);
    return rc;
}

/* BPE of one piece of raw bytes, ids appended to out. Lowest rank first, the
 * leftmost on ties, as tokenizers' merge queue does. */
static int bpe_piece(const scn_tokenizer *t, const char *s, size_t n, tk_ids *out)
{
    if (t->ignore_merges) {
        int32_t id = scn_tk_vocab_find(t, s, n);
        if (id >= 0)
            return ll_vec_push(out, id);
    }
    int32_t stack[64];
    int32_t *sym = n <= 64 ? stack : malloc(n * sizeof *sym);
    size_t k = 0;
    if (!sym)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)s[i]];
        if (id < 0)
            id = t->unk_id;
        if (id >= 0) /* no unk token: the byte is dropped, as tokenizers does */
            sym[k++] = id;
    }
    for (;;) {
        int32_t best_rank = INT32_MAX, best_id = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            const tk_merge *m = scn_tk_merge_find(t, sym[i], sym[i + 1]);
            if (m && m->rank < best_rank) {
                best_rank = m->rank;
                best_id = m->id;
                best = i;
            }
        }
        if (best_id < 0)
            break;
        sym[best] = best_id;
        memmove(sym + best + 1, sym + best + 2, (k - best - 2) * sizeof *sym);
        k--;
    }
    int rc = ll_vec_reserve(out, out->n + k);
    if (rc == 0) {
        memcpy(out->v + out->n, sym, k * sizeof *sym);
        out->n += k;
    }
    if (sym != stack)
        free(sym);
    return rc;
}

/* A segment between added tokens: pre-tokenize, then BPE each piece. */
static int encode_segment(const scn_tokenizer *t, const char *text, size_t len, pcre2_match_data *md,
                          tk_ids *out)
{
    ll_buf arena = {0};
    tk_pieces cur = {0}, next = {0};
    int rc = 0;
    if (len == 0)
        return 0;
    LL_TRY(ll_buf_append(&arena, text, len));
    LL_TRY(ll_vec_push(&cur, ((tk_piece){0, len, 0})));
    for (size_t si = 0; si < t->steps.n; si++) {
        const tk_step *st = &t->steps.v[si];
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            tk_piece p = cur.v[i];
            if (st->add_prefix_space && arena.p[p.off] != ' ') {
                /* Copied out first: appending may move the arena under it. */
                char *copy = malloc(p.len + 1);
                size_t off = arena.len;
                if (!copy) {
                    rc = LL_ENOMEM;
                    goto fail;
                }
                copy[0] = ' ';
                memcpy(copy + 1, arena.p + p.off, p.len);
                rc = ll_buf_append(&arena, copy, p.len + 1);
                free(copy);
                if (rc)
                    goto fail;
                p = (tk_piece){off, p.len + 1, 0};
            }
            if (st->re)
                LL_TRY(split_piece(st, arena.p, p, md, &next));
            else
                LL_TRY(ll_vec_push(&next, p));
        }
        tk_pieces tmp = cur;
        cur = next;
        next = tmp;
    }
    for (size_t i = 0; i < cur.n; i++)
        if (cur.v[i].len)
            LL_TRY(bpe_piece(t, arena.p + cur.v[i].off, cur.v[i].len, out));
fail:
    ll_buf_free(&arena);
    ll_vec_free(&cur);
    ll_vec_free(&next);
    return rc;
}

/* The added token starting at text[i], longest first, or NULL. */
static const tk_added *added_at(const scn_tokenizer *t, const char *text, size_t len, size_t i)
{
    const tk_added *best = NULL;
    if (!t->added_first[(unsigned char)text[i]])
        return NULL;
    for (size_t k = 0; k < t->added.n; k++) {
        const tk_added *a = &t->added.v[k];
        if (a->len <= len - i && (!best || a->len > best->len) && memcmp(text + i, a->text, a->len) == 0)
            best = a;
    }
    return best;
}

static int encode_into(const scn_tokenizer *t, const char *text, size_t len, tk_ids *out)
{
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = 0;
    size_t pos = 0;
    if (!md)
        return LL_ENOMEM;
    while (pos < len) {
        size_t i = pos;
        const tk_added *a = NULL;
        while (i < len && !(a = added_at(t, text, len, i)))
            i++;
        LL_TRY(encode_segment(t, text + pos, i - pos, md, out));
        if (a) {
            LL_TRY(ll_vec_push(out, a->id));
            i += a->len;
        }
        pos = i;
    }
fail:
    pcre2_match_data_free(md);
    return rc;
}

int scn_tokenizer_encode(const scn_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n)
{
    tk_ids out = {0};
    int rc = encode_into(t, text, len, &out);
    if (rc) {
        ll_vec_free(&out);
        return rc;
    }
    *ids = out.v ? out.v : malloc(sizeof(int32_t)); /* never NULL on success */
    *n = out.n;
    return *ids ? 0 : LL_ENOMEM;
}

int64_t scn_tokenizer_count(const scn_tokenizer *t, const char *text, size_t len)
{
    tk_ids out = {0};
    int rc = encode_into(t, text, len, &out);
    int64_t n = rc ? rc : (int64_t)out.n;
    ll_vec_free(&out);
    return n;
}

int scn_tokenizer_decode(const scn_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len)
{
    ll_buf b = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->tok[ids[i]]) {
            rc = LL_EINVAL;
            goto fail;
        }
        LL_TRY(ll_buf_append(&b, t->tok[ids[i]], t->tok_len[ids[i]]));
    }
    LL_TRY(ll_buf_append(&b, "", 0));
    if (!b.p) {
        b.p = calloc(1, 1);
        if (!b.p)
            return LL_ENOMEM;
    }
    *text = b.p;
    *len = b.len;
    return 0;
fail:
    ll_buf_free(&b);
    return rc;
}
