/* prompts.c: the prompt set a scenario sends: seeded synthetic text, a
 * ShareGPT-format JSON file (first human turn of each conversation), or a
 * JSONL file of prompts. Loaded once, then read-only (shared by workers).
 * With prompt_tokens and a tokenizer, synthetic prompts are built to an exact
 * token length (the set owns the tokenizer, which the run also counts with).
 * load.trace makes one prompt per trace row instead, and load.shared_prefix
 * puts one of G fixed texts in front of every prompt (both below). */
#include "scn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* A small vocabulary: English-looking words so tokenizers see ~1.3 tokens/word. */
static const char *const k_vocab[] = {
    "the", "model", "server", "decode", "token", "batch", "latency", "kernel", "memory", "cache",
    "attention", "request", "stream", "throughput", "query", "head", "layer", "weight", "tensor",
    "prefill", "step", "time", "scale", "law", "fit", "profile", "trace", "engine", "answer",
    "think", "about", "why", "how", "when", "every", "number", "grows", "slowly", "quickly",
    "measure", "explain", "compare", "write", "short", "story", "river", "mountain", "city", "light",
};
#define VOCAB_N (sizeof k_vocab / sizeof k_vocab[0])

int scn_count_words(const char *s)
{
    int n = 0, in = 0;
    for (const char *c = s; *c; c++) {
        int sp = *c == ' ' || *c == '\n' || *c == '\t' || *c == '\r';
        if (!sp && !in)
            n++;
        in = !sp;
    }
    return n;
}

static int push(scn_prompts *p, const char *s, int target_tok)
{
    prompt e = {strdup(s), 0, target_tok, target_tok, 0, -1, 0, 0, -1};
    if (!e.text)
        return LL_ENOMEM;
    e.words = scn_count_words(s);
    if (ll_vec_push(&p->set, e)) {
        free(e.text);
        return LL_ENOMEM;
    }
    return 0;
}

static int draw_words(const scn_dist *d, ll_rng *r)
{
    double x;
    switch (d->kind) {
    case SCN_DIST_UNIFORM:
        x = d->min + (d->max - d->min) * ll_rng_uniform(r);
        break;
    case SCN_DIST_NORMAL:
        x = d->mean + d->stddev * ll_rng_normal(r);
        if (d->max > 0 && x > d->max)
            x = d->max;
        if (x < d->min)
            x = d->min;
        break;
    default:
        x = d->value;
    }
    x = floor(x + 0.5);
    return x < 1 ? 1 : (int)x;
}

int scn_add_words(ll_buf *b, int w, ll_rng *r)
{
    int rc = 0;
    for (int k = 0; k < w && rc == 0; k++)
        rc = ll_buf_printf(b, "%s%s", b->len && b->p[b->len - 1] != ' ' ? " " : "", k_vocab[ll_rng_u64(r) % VOCAB_N]);
    return rc;
}

/* Text of exactly `target` tokens into b (lead: starting with a space, as
 * it will be counted after other text): seeded words, encoded, the ids cut
 * to the target and decoded. Re-encoding a cut text can merge differently at
 * the cut (a word split mid-way), so re-count and move the cut by the
 * difference until the count is exact; more words are added if the cut runs
 * past the end. */
static int exact_text_lead(const scn_tokenizer *t, int target, int lead, ll_rng *r, ll_buf *b, char *err,
                           size_t errlen)
{
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n = 0, tlen = 0;
    int rc = 0;
    int64_t cut = target;
    ll_buf_reset(b);
    if (lead)
        LL_TRY(ll_buf_append(b, " ", 1));
    /* Every vocabulary word is at least one token: target words is enough. */
    LL_TRY(scn_add_words(b, target + 8, r));
    LL_TRY(scn_tokenizer_encode(t, b->p, b->len, &ids, &n));
    for (int iter = 0; iter < 64; iter++) {
        while ((size_t)cut > n) {
            free(ids);
            ids = NULL;
            LL_TRY(scn_add_words(b, (int)(cut - (int64_t)n) + 8, r));
            LL_TRY(scn_tokenizer_encode(t, b->p, b->len, &ids, &n));
        }
        free(text);
        text = NULL;
        LL_TRY(scn_tokenizer_decode(t, ids, (size_t)cut, &text, &tlen));
        int64_t c = scn_tokenizer_count(t, text, tlen);
        if (c < 0) {
            rc = (int)c;
            goto fail;
        }
        if (c == target) {
            ll_buf_reset(b);
            LL_TRY(ll_buf_append(b, text, tlen));
            goto fail; /* done: the shared cleanup */
        }
        cut += target - c;
        if (cut < 1)
            cut = 1;
    }
    ll_errf(err, errlen, "tokenizer: could not build a prompt of exactly %d tokens", target);
    rc = LL_EINVAL;
fail:
    free(ids);
    free(text);
    return rc;
}

static int exact_text(const scn_tokenizer *t, int target, ll_rng *r, ll_buf *b, char *err, size_t errlen)
{
    return exact_text_lead(t, target, 0, r, b, err, errlen);
}

/* load.vary_context's length factors (scenario.h, SCN_VARY_CONTEXT_*): a
 * walk on [LO, HI] reflected at both ends, which keeps it uniform there.
 * Its own generator, so the words drawn for the prompts are the same with
 * and without it. */
typedef struct ctx_walk {
    ll_rng r;
    double m;
} ctx_walk;

static void walk_start(ctx_walk *w, uint64_t seed)
{
    ll_rng_seed(&w->r, seed ^ 0xc07e47a1cULL);
    w->m = SCN_VARY_CONTEXT_LO + (SCN_VARY_CONTEXT_HI - SCN_VARY_CONTEXT_LO) * ll_rng_uniform(&w->r);
}

/* The current factor; the walk then takes its step. */
static double walk_next(ctx_walk *w)
{
    double m = w->m, x = w->m + SCN_VARY_CONTEXT_STEP * (2 * ll_rng_uniform(&w->r) - 1);
    if (x < SCN_VARY_CONTEXT_LO)
        x = 2 * SCN_VARY_CONTEXT_LO - x;
    if (x > SCN_VARY_CONTEXT_HI)
        x = 2 * SCN_VARY_CONTEXT_HI - x;
    w->m = x;
    return m;
}

/* A drawn length times the factor, at least 1. */
static int scaled(int len, double factor)
{
    double x = floor(len * factor + 0.5);
    return x < 1 ? 1 : (int)x;
}

static int gen_synthetic(const scn_scenario *s, scn_prompts *p, char *err, size_t errlen)
{
    ll_rng r;
    ctx_walk walk;
    ll_buf b = {0};
    int rc = 0;
    ll_rng_seed(&r, s->seed);
    walk_start(&walk, s->seed);
    for (int i = 0; i < s->prompt_count && rc == 0; i++) {
        int target = 0, w;
        double tok_asked = 0;
        double f = s->vary_context ? walk_next(&walk) : 1;
        if (s->prompt_tokens_set && p->tok) {
            target = scaled(draw_words(&s->prompt_tokens, &r), f);
            rc = exact_text(p->tok, target, &r, &b, err, errlen);
        } else {
            /* No tokenizer: words = tokens / SCN_TOKENS_PER_WORD, and no
             * target is claimed since the count is only an estimate. */
            double tok = s->prompt_tokens_set ? scaled(draw_words(&s->prompt_tokens, &r), f) : 0;
            tok_asked = tok;
            w = s->prompt_tokens_set ? (int)floor(tok / SCN_TOKENS_PER_WORD + 0.5)
                                     : scaled(draw_words(&s->words, &r), f);
            ll_buf_reset(&b);
            rc = scn_add_words(&b, w < 1 ? 1 : w, &r);
        }
        if (rc == 0)
            rc = push(p, b.p ? b.p : "", target);
        if (rc == 0 && s->prompt_tokens_set)
            p->set.v[p->set.n - 1].asked_tok = target > 0 ? target : (int)tok_asked;
    }
    ll_buf_free(&b);
    return rc;
}

void scn_resolve_path(const scn_scenario *s, const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s", name ? name : "");
    if (s->path && name && name[0] != '/') {
        const char *slash = strrchr(s->path, '/');
        if (slash) {
            char cand[4096];
            snprintf(cand, sizeof cand, "%.*s/%s", (int)(slash - s->path), s->path, name);
            FILE *f = fopen(cand, "r");
            if (f) {
                fclose(f);
                snprintf(path, size, "%s", cand);
            }
        }
    }
}

/* A conversation's human turns (load.sessions): appended to p->turns,
 * its start to p->conv when it has any. */
static int keep_conversation(scn_prompts *p, const cJSON *turns)
{
    size_t at = p->turns.n;
    for (const cJSON *t = turns->child; t; t = t->next) {
        const char *from = ll_json_str(t, "from", "");
        const char *val = ll_json_str(t, "value", NULL);
        char *c;
        if ((strcmp(from, "human") == 0 || strcmp(from, "user") == 0) && val && val[0]) {
            if (!(c = strdup(val)) || ll_vec_push(&p->turns, c)) {
                free(c);
                return LL_ENOMEM;
            }
        }
    }
    return p->turns.n > at && ll_vec_push(&p->conv, at) ? LL_ENOMEM : 0;
}

static int load_sharegpt(const char *path, scn_prompts *p, int sessions, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    int rc = ll_read_file(path, &text, &len, err, errlen);
    if (rc)
        return rc;
    root = cJSON_ParseWithOpts(text, NULL, 1);
    if (!cJSON_IsArray(root)) {
        ll_errf(err, errlen, "%s: expected a ShareGPT JSON array of conversations", path);
        rc = LL_EPARSE;
        goto out;
    }
    size_t i = 0;
    for (const cJSON *conv = root->child; conv && rc == 0; conv = conv->next, i++) {
        const cJSON *turns = cJSON_GetObjectItemCaseSensitive(conv, "conversations");
        if (!cJSON_IsArray(turns)) {
            ll_errf(err, errlen, "%s: [%zu].conversations: expected an array", path, i);
            rc = LL_EPARSE;
            goto out;
        }
        if (sessions) {
            rc = keep_conversation(p, turns);
            continue;
        }
        /* The first human turn is the prompt; conversations without one are skipped. */
        for (const cJSON *t = turns->child; t; t = t->next) {
            const char *from = ll_json_str(t, "from", "");
            const char *val = ll_json_str(t, "value", NULL);
            if ((strcmp(from, "human") == 0 || strcmp(from, "user") == 0) && val && val[0]) {
                rc = push(p, val, 0);
                break;
            }
        }
    }
out:
    cJSON_Delete(root);
    free(text);
    return rc;
}

typedef struct jl_ctx {
    scn_prompts *p;
    const char *path;
    char *err;
    size_t errlen;
} jl_ctx;

static int jsonl_line(const cJSON *o, size_t line_no, void *ctx)
{
    jl_ctx *c = ctx;
    const char *s = cJSON_IsString(o) ? o->valuestring : ll_json_str(o, "prompt", ll_json_str(o, "text", NULL));
    if (!s) {
        ll_errf(c->err, c->errlen, "%s:%zu: expected a string or an object with \"prompt\" or \"text\"",
                c->path, line_no);
        return LL_EPARSE;
    }
    return push(c->p, s, 0);
}

/* ---- load.trace and load.shared_prefix ------------------------------------ */

/* A seed for a block hash or a prefix group: its own stream, apart from the
 * synthetic prompts' and from each other's. */
static uint64_t mix(uint64_t seed, uint64_t salt, uint64_t k)
{
    uint64_t z = seed ^ salt ^ (k + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 29);
}

/* Append text of `tok` tokens to b (a space between pieces): exact with a
 * tokenizer (tmp holds it), else tok / 1.33 words. With a tokenizer a piece
 * after the first is built with its leading space, as it is counted there
 * (byte-level BPE folds a space into the word after it, and a word costs
 * fewer tokens with it), so the pieces' counts add up exactly: the
 * pre-tokenizer splits at that space, and no token spans two pieces. */
static int add_piece(const scn_prompts *p, int tok, ll_rng *r, ll_buf *b, ll_buf *tmp, char *err, size_t errlen)
{
    int rc = 0;
    if (!p->tok)
        return scn_add_words(b, tok / SCN_TOKENS_PER_WORD < 1 ? 1 : (int)floor(tok / SCN_TOKENS_PER_WORD + 0.5), r);
    LL_TRY(exact_text_lead(p->tok, tok, b->len > 0, r, tmp, err, errlen));
    LL_TRY(ll_buf_append(b, tmp->p, tmp->len));
fail:
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* How many rows' blocks carry hash h (sorted: every block hash of the trace). */
static size_t hash_uses(const int64_t *sorted, size_t n, int64_t h)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    while (k < n && sorted[k] == h)
        k++;
    return k - lo;
}

/* Push b as a prompt with a trace row's fields. */
static int push_row(scn_prompts *p, const ll_buf *b, int target, const scn_trace_row *row, size_t head_at)
{
    int rc = push(p, b->p ? b->p : "", target);
    if (rc)
        return rc;
    prompt *e = &p->set.v[p->set.n - 1];
    e->send_ns = row->send_ns;
    e->max_tok = row->out_tok;
    e->head_at = head_at;
    return 0;
}

/* Row i of the trace: its hash blocks, SCN_TRACE_BLOCK_TOK tokens each (the
 * last one cut to the input length), each the same text wherever its hash
 * appears (seeded by the hash), then the rest of the input as text of its
 * own. The per-request head goes after the leading blocks other rows share. */
static int trace_prompt(const scn_scenario *s, scn_prompts *p, size_t i, const int64_t *sorted, ll_buf *b,
                        ll_buf *tmp, char *err, size_t errlen)
{
    const scn_trace *t = s->trace;
    const scn_trace_row *row = &t->rows.v[i];
    size_t head_at = 0;
    int left = row->in_tok, shared = 1, rc = 0;
    ll_rng r;
    ll_buf_reset(b);
    for (size_t j = 0; j < row->n_hash && left > 0; j++) {
        int64_t h = t->hashes.v[row->hash_at + j];
        int len = left < SCN_TRACE_BLOCK_TOK ? left : SCN_TRACE_BLOCK_TOK;
        ll_rng_seed(&r, mix(s->seed, 0xb10c, (uint64_t)h));
        LL_TRY(add_piece(p, len, &r, b, tmp, err, errlen));
        left -= len;
        shared = shared && hash_uses(sorted, t->hashes.n, h) > 1;
        if (shared)
            head_at = b->len;
    }
    if (left > 0) {
        ll_rng_seed(&r, mix(s->seed, 0x0e1f, i));
        LL_TRY(add_piece(p, left, &r, b, tmp, err, errlen));
    }
    /* after the space that starts the row's own text */
    if (head_at > 0 && head_at < b->len)
        head_at++;
    LL_TRY(push_row(p, b, p->tok ? row->in_tok : 0, row, head_at));
fail:
    return rc;
}

static int gen_trace(const scn_scenario *s, scn_prompts *p, char *err, size_t errlen)
{
    const scn_trace *t = s->trace;
    ll_buf b = {0}, tmp = {0};
    int64_t *sorted = NULL;
    int rc = 0;
    if (t->hashes.n) {
        LL_TRY((sorted = malloc(t->hashes.n * sizeof *sorted)) ? 0 : LL_ENOMEM);
        memcpy(sorted, t->hashes.v, t->hashes.n * sizeof *sorted);
        qsort(sorted, t->hashes.n, sizeof *sorted, cmp_i64);
    }
    for (size_t i = 0; i < t->rows.n && rc == 0; i++)
        rc = trace_prompt(s, p, i, sorted, &b, &tmp, err, errlen);
fail:
    free(sorted);
    ll_buf_free(&b);
    ll_buf_free(&tmp);
    return rc;
}

/* load.shared_prefix: G texts of P tokens (each seeded by its group), and
 * every prompt of the set becomes one of them, a space, then its own text;
 * prompt i takes group i mod G, or a seeded draw (pick "seeded"). */
static int add_shared_prefix(const scn_scenario *s, scn_prompts *p, char *err, size_t errlen)
{
    int G = s->prefix_groups, rc = 0;
    ll_buf *pre = calloc((size_t)G, sizeof *pre);
    ll_buf tmp = {0}, b = {0};
    ll_rng r, pick;
    if (!pre)
        return LL_ENOMEM;
    for (int g = 0; g < G; g++) {
        ll_rng_seed(&r, mix(s->seed, 0x9e7, (uint64_t)g));
        LL_TRY(add_piece(p, s->prefix_tokens, &r, &pre[g], &tmp, err, errlen));
    }
    ll_rng_seed(&pick, mix(s->seed, 0x91c4, 0));
    for (size_t i = 0; i < p->set.n; i++) {
        prompt *e = &p->set.v[i];
        size_t g = s->prefix_seeded ? (size_t)(ll_rng_u64(&pick) % (uint64_t)G) : i % (size_t)G;
        ll_buf_reset(&b);
        LL_TRY(ll_buf_append(&b, pre[g].p, pre[g].len));
        LL_TRY(ll_buf_printf(&b, " %s", e->text));
        char *text = strdup(b.p);
        LL_TRY(text ? 0 : LL_ENOMEM);
        free(e->text);
        e->text = text;
        e->head_at = pre[g].len + 1;
        e->group = (int)g;
        e->words = 0;
        for (const char *c = text; *c; c++)
            e->words += (c == text || c[-1] == ' ') && *c != ' ';
        if (e->target_tok > 0) {
            /* the joining space folds into the suffix's first word: count the whole */
            int64_t n = scn_tokenizer_count(p->tok, text, strlen(text));
            LL_TRY(n < 0 ? (int)n : 0);
            e->target_tok = (int)n;
        }
    }
fail:
    for (int g = 0; g < G; g++)
        ll_buf_free(&pre[g]);
    free(pre);
    ll_buf_free(&tmp);
    ll_buf_free(&b);
    return rc;
}

int scn_prompts_load(const scn_scenario *s, scn_prompts **out, char *err, size_t errlen)
{
    scn_prompts *p = calloc(1, sizeof *p);
    char path[4096];
    int rc = 0;
    if (!p)
        return LL_ENOMEM;
    path[0] = '\0';
    if (s->tokenizer_path) {
        scn_resolve_path(s, s->tokenizer_path, path, sizeof path);
        rc = scn_tokenizer_load(path, &p->tok, err, errlen);
        if (rc) {
            scn_prompts_free(p);
            return rc;
        }
    }
    /* a trace makes its own prompts, whatever the source */
    scn_source src = s->trace ? SCN_SOURCE_SYNTHETIC : s->source;
    if (src != SCN_SOURCE_SYNTHETIC)
        scn_resolve_path(s, s->prompts_path, path, sizeof path);
    if (s->session_turns > 0 && s->session_sharegpt) {
        scn_resolve_path(s, s->session_path ? s->session_path : s->prompts_path, path, sizeof path);
        if ((rc = load_sharegpt(path, p, 1, err, errlen)) == 0 && p->conv.n == 0) {
            ll_errf(err, errlen, "%s: load.sessions: no conversation with a human turn", path);
            rc = LL_EINVAL;
        }
        src = SCN_SOURCE_SYNTHETIC; /* the prompt set itself stays synthetic (unused) */
    }
    switch (rc ? -1 : (int)src) {
    case -1:
        break;
    case SCN_SOURCE_SHAREGPT:
        rc = load_sharegpt(path, p, 0, err, errlen);
        break;
    case SCN_SOURCE_JSONL: {
        jl_ctx c = {p, path, err, errlen};
        rc = ll_jsonl_foreach(path, jsonl_line, &c, NULL, err, errlen);
        break;
    }
    default:
        rc = s->trace ? gen_trace(s, p, err, errlen) : gen_synthetic(s, p, err, errlen);
    }
    if (rc == 0 && !s->trace && s->prefix_groups > 0)
        rc = add_shared_prefix(s, p, err, errlen);
    if (rc == 0 && p->set.n == 0) {
        ll_errf(err, errlen, "%s: no prompts", s->source == SCN_SOURCE_SYNTHETIC ? "synthetic" : path);
        rc = LL_EINVAL;
    }
    if (rc) {
        scn_prompts_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

size_t scn_prompts_count(const scn_prompts *p) { return p->set.n; }

const char *scn_prompt(const scn_prompts *p, size_t i, int *words)
{
    const prompt *e = &p->set.v[i % p->set.n];
    if (words)
        *words = e->words;
    return e->text;
}

int scn_prompt_target_tokens(const scn_prompts *p, size_t i) { return p->set.v[i % p->set.n].target_tok; }

int scn_prompt_head_inside(const scn_prompts *p, size_t i) { return p->set.v[i % p->set.n].fitted; }

int scn_prompt_prefix_group(const scn_prompts *p, size_t i) { return p->set.v[i % p->set.n].group; }

size_t scn_prompts_n_convs(const scn_prompts *p) { return p->conv.n; }

const char *scn_prompts_conv_turn(const scn_prompts *p, size_t conv, int turn)
{
    if (p->conv.n == 0 || turn < 1)
        return NULL;
    size_t c = conv % p->conv.n, at = p->conv.v[c] + (size_t)turn - 1;
    size_t end = c + 1 < p->conv.n ? p->conv.v[c + 1] : p->turns.n;
    return at < end ? p->turns.v[at] : NULL;
}

int64_t scn_prompt_send_ns(const scn_prompts *p, size_t i) { return p->set.v[i % p->set.n].send_ns; }

int scn_prompt_max_tokens(const scn_prompts *p, size_t i) { return p->set.v[i % p->set.n].max_tok; }

size_t scn_prompt_head_at(const scn_prompts *p, size_t i) { return p->set.v[i % p->set.n].head_at; }

const scn_tokenizer *scn_prompts_tokenizer(const scn_prompts *p) { return p->tok; }

void scn_prompts_free(scn_prompts *p)
{
    if (!p)
        return;
    scn_tokenizer_free(p->tok);
    for (size_t i = 0; i < p->set.n; i++)
        free(p->set.v[i].text);
    ll_vec_free(&p->set);
    for (size_t i = 0; i < p->turns.n; i++)
        free(p->turns.v[i]);
    ll_vec_free(&p->turns);
    ll_vec_free(&p->conv);
    free(p);
}
