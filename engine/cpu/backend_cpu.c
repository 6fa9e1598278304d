/* backend_cpu.c: eng_backend_cpu, a decode step made of real arithmetic.
 *
 * A step for the scheduler's batch runs, each as a timed phase:
 *   prefill     writes the KV rows of the prompt tokens prefilled this step
 *               (a cheap stand-in: seeded rows, no prompt attention)
 *   dense_gemm  embed last tokens, X · W through OpenBLAS (the law's a),
 *               project queries and each sequence's new KV row
 *   attention   top-k selection + sparse MLA decode attention, naive or tiled
 *               (the law's b: its cost grows with every running sequence)
 *   sampling    mean over heads · Wv, softmax, argmax -> next token
 *
 * KV memory: each slot owns `capacity` rows of 576 bf16 (1152 B), allocated
 * when the slot is first used, filled with seeded "history" and kept for the
 * next request that lands on the slot, so the pool is bounded by
 * (peak running sequences) x capacity x 1152 B: 4.7 MB per slot with the
 * default 4096, 75 MB for 16 running sequences, 1.2 GB for all 256 slots.
 * A sequence attends over min(max(context, min_ctx), capacity) rows; min_ctx
 * defaults to topk so every decode selects exactly k rows and the step law is
 * linear in N even with short benchmark prompts (set min_ctx=0 to attend over
 * the real context only). Positions past capacity wrap around the slot.
 *
 * Every size comes from eng_config (spec keys d_model, d_ff, vocab, capacity,
 * min_ctx, heads, topk, threads; defaults in engine.h), so a run's engine spec
 * in its records says everything the step law depends on.
 *
 * DESIGN (threads): only the scheduler thread calls in (backend.h); inside a
 * step every phase runs on this backend's pool of cfg->threads threads (the
 * dense GEMM as column blocks with OpenBLAS single-threaded, see cpu_model.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "cpu_kernels.h"
#include "cpu_model.h"

typedef struct cpu_opts {
    int heads, topk, threads, tiled;
    int d_model, d_ff, vocab, capacity, min_ctx;
    int max_slots;
    uint64_t seed;
} cpu_opts;

typedef struct cpu_slot {
    uint16_t *kv;        /* (capacity, ATTN_DQK) bf16, NULL until first use */
    int64_t prefilled;   /* prompt rows written for the current request */
    int32_t token;       /* last sampled token */
} cpu_slot;

typedef struct cpu_state {
    cpu_opts o;
    cpu_pool *pool;
    attn_ws *ws;
    cpu_dense dense;
    cpu_slot *slots;     /* (max_slots) */
    /* per-step buffers, grown to the largest batch seen */
    int cap_n;
    float *x, *hd, *q, *kv_new, *out, *mean, *logits;
    int32_t *tokens, *idx;
    attn_seq *seqs;
} cpu_state;

static int opts_from_config(const eng_config *cfg, cpu_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->heads = cfg->heads > 0 ? cfg->heads : 64;
    o->topk = cfg->topk > 0 ? cfg->topk : 2048;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* threads=0: every online core (capped at the pool's 1024) */
    o->threads = cfg->threads > 0 ? cfg->threads : ncpu > 1024 ? 1024 : ncpu > 0 ? (int)ncpu : 1;
    const char *attn = cfg->attn ? cfg->attn : "tiled";
    if (strcmp(attn, "tiled") == 0)
        o->tiled = 1;
    else if (strcmp(attn, "naive") == 0)
        o->tiled = 0;
    else {
        ll_errf(err, errlen, "cpu backend: attn must be naive or tiled, got '%s'", attn);
        return LL_EINVAL;
    }
    /* Sizes are taken as given (no zero-means-default): eng_config_default
     * sets them, and a zeroed config is an error below, not a silent 2048. */
    o->d_model = cfg->d_model;
    o->d_ff = cfg->d_ff;
    o->vocab = cfg->vocab;
    o->capacity = cfg->capacity_tok;
    o->min_ctx = cfg->min_ctx_tok < 0 ? o->topk : cfg->min_ctx_tok;
    o->max_slots = cfg->max_running > 0 ? cfg->max_running : 256;
    o->seed = cfg->seed;
    if (o->heads > 1024 || o->topk > 1 << 20 || o->threads > 1024) {
        ll_errf(err, errlen, "cpu backend: heads <= 1024, topk <= 1048576, threads <= 1024");
        return LL_EINVAL;
    }
    if (o->capacity < 1 || o->capacity > 1 << 24) {
        ll_errf(err, errlen, "cpu backend: capacity must be in [1, 16777216] rows, got %d",
                o->capacity);
        return LL_EINVAL;
    }
    if (cfg->min_ctx_tok < -1 || cfg->min_ctx_tok > 1 << 24) {
        ll_errf(err, errlen, "cpu backend: min_ctx must be -1 (= topk) or in [0, 16777216], got %d",
                cfg->min_ctx_tok);
        return LL_EINVAL;
    }
    return 0;
}

static void cpu_destroy(void *state)
{
    cpu_state *st = state;
    if (!st)
        return;
    if (st->slots)
        for (int i = 0; i < st->o.max_slots; i++)
            free(st->slots[i].kv);
    free(st->slots);
    free(st->x); free(st->hd); free(st->q); free(st->kv_new); free(st->out);
    free(st->mean); free(st->logits); free(st->tokens); free(st->idx); free(st->seqs);
    cpu_dense_free(&st->dense);
    attn_ws_free(st->ws);
    cpu_pool_destroy(st->pool);
    free(st);
}

static int cpu_create(const eng_config *cfg, void **state, char *err, size_t errlen)
{
    *state = NULL;
    cpu_state *st = calloc(1, sizeof *st);
    if (!st) {
        ll_errf(err, errlen, "cpu backend: out of memory");
        return LL_ENOMEM;
    }
    int rc = opts_from_config(cfg, &st->o, err, errlen);
    if (rc != 0)
        goto fail;
    rc = cpu_pool_create(st->o.threads, &st->pool, err, errlen);
    if (rc != 0)
        goto fail;
    rc = cpu_dense_init(&st->dense, st->o.d_model, st->o.d_ff, st->o.vocab, st->o.seed, err, errlen);
    if (rc != 0)
        goto fail;
    st->ws = attn_ws_new();
    st->slots = calloc((size_t)st->o.max_slots, sizeof *st->slots);
    if (!st->ws || !st->slots) {
        ll_errf(err, errlen, "cpu backend: out of memory");
        rc = LL_ENOMEM;
        goto fail;
    }
    ll_info("cpu backend: attn=%s heads=%d topk=%d threads=%d dense %dx%d (%.0f MB fp32) "
            "capacity=%d min_ctx=%d", st->o.tiled ? "tiled" : "naive", st->o.heads, st->o.topk,
            st->o.threads, st->o.d_model, st->o.d_ff,
            (double)st->o.d_model * st->o.d_ff * 4 / 1e6, st->o.capacity, st->o.min_ctx);
    *state = st;
    return 0;
fail:
    cpu_destroy(st);
    return rc;
}

static int grow_batch(cpu_state *st, int n)
{
    if (n <= st->cap_n)
        return 0;
    const cpu_opts *o = &st->o;
    size_t N = (size_t)n;
    float *x = realloc(st->x, N * o->d_model * sizeof(float));
    if (x) st->x = x;
    float *hd = realloc(st->hd, N * o->d_ff * sizeof(float));
    if (hd) st->hd = hd;
    float *q = realloc(st->q, N * o->heads * ATTN_DQK * sizeof(float));
    if (q) st->q = q;
    float *kvn = realloc(st->kv_new, N * ATTN_DQK * sizeof(float));
    if (kvn) st->kv_new = kvn;
    float *out = realloc(st->out, N * o->heads * ATTN_DV * sizeof(float));
    if (out) st->out = out;
    float *mean = realloc(st->mean, N * ATTN_DV * sizeof(float));
    if (mean) st->mean = mean;
    float *lg = realloc(st->logits, N * o->vocab * sizeof(float));
    if (lg) st->logits = lg;
    int32_t *tok = realloc(st->tokens, N * sizeof(int32_t));
    if (tok) st->tokens = tok;
    int32_t *idx = realloc(st->idx, N * o->topk * sizeof(int32_t));
    if (idx) st->idx = idx;
    attn_seq *seqs = realloc(st->seqs, N * sizeof(attn_seq));
    if (seqs) st->seqs = seqs;
    if (!x || !hd || !q || !kvn || !out || !mean || !lg || !tok || !idx || !seqs)
        return LL_ENOMEM;
    st->cap_n = n;
    return 0;
}

/* The slot's KV rows, allocated and filled with seeded history on first use. */
static uint16_t *slot_kv(cpu_state *st, int slot)
{
    cpu_slot *s = &st->slots[slot];
    if (!s->kv) {
        s->kv = malloc((size_t)st->o.capacity * ATTN_ROW_BYTES);
        if (!s->kv)
            return NULL;
        cpu_kv_fill(s->kv, 0, st->o.capacity, cpu_hash64(st->o.seed ^ (uint64_t)slot));
    }
    return s->kv;
}

static int check_slot(const cpu_state *st, int slot)
{
    if (slot < 0 || slot >= st->o.max_slots) {
        ll_error("cpu backend: slot %d out of range [0, %d)", slot, st->o.max_slots);
        return LL_ERANGE;
    }
    return 0;
}

static int phase_prefill(cpu_state *st, const eng_batch *b)
{
    for (int i = 0; i < b->n_prefill; i++) {
        int slot = b->prefill_slot[i];
        int rc = check_slot(st, slot);
        if (rc != 0)
            return rc;
        uint16_t *kv = slot_kv(st, slot);
        if (!kv)
            return LL_ENOMEM;
        cpu_slot *s = &st->slots[slot];
        int64_t cap = st->o.capacity;
        uint64_t seed = cpu_hash64(st->o.seed ^ ((uint64_t)slot << 32) ^ 0x9f11ull);
        for (int64_t t = 0; t < b->prefill_tok[i]; t++)
            cpu_kv_fill(kv, (s->prefilled + t) % cap, 1, seed);
        s->prefilled += b->prefill_tok[i];
    }
    return 0;
}

static int phase_dense(cpu_state *st, const eng_batch *b)
{
    int n = b->n_decode;
    for (int i = 0; i < n; i++) {
        int rc = check_slot(st, b->decode_slot[i]);
        if (rc != 0)
            return rc;
        if (!slot_kv(st, b->decode_slot[i]))
            return LL_ENOMEM;
        st->tokens[i] = st->slots[b->decode_slot[i]].token;
    }
    cpu_embed(&st->dense, st->tokens, n, st->o.seed, st->x);
    cpu_dense_forward(st->pool, &st->dense, st->x, n, st->hd);
    cpu_project(&st->dense, st->hd, n, st->o.heads, st->q, st->kv_new);
    /* this step's token becomes row ctx-1 of the sequence's cache */
    for (int i = 0; i < n; i++) {
        cpu_slot *s = &st->slots[b->decode_slot[i]];
        int64_t ctx = b->decode_ctx[i] > 0 ? b->decode_ctx[i] : 1;
        uint16_t *row = s->kv + ((ctx - 1) % st->o.capacity) * ATTN_DQK;
        for (int d = 0; d < ATTN_DQK; d++)
            row[d] = f32_to_bf16(st->kv_new[(size_t)i * ATTN_DQK + d]);
    }
    return 0;
}

static int phase_attention(cpu_state *st, const eng_batch *b)
{
    const cpu_opts *o = &st->o;
    for (int i = 0; i < b->n_decode; i++) {
        int slot = b->decode_slot[i];
        int64_t ctx = b->decode_ctx[i] > o->min_ctx ? b->decode_ctx[i] : o->min_ctx;
        if (ctx > o->capacity)
            ctx = o->capacity;
        int32_t *idx = st->idx + (size_t)i * o->topk;
        st->seqs[i].kv = st->slots[slot].kv;
        st->seqs[i].idx = idx;
        st->seqs[i].k = cpu_topk_select(ctx, o->topk, cpu_hash64(o->seed ^ (uint64_t)slot), idx);
    }
    attn_batch ab = {.n_seq = b->n_decode, .heads = o->heads, .scale = 1.0f / sqrtf((float)ATTN_DQK),
                     .q = st->q, .seq = st->seqs, .out = st->out};
    return o->tiled ? attn_decode_tiled(st->pool, st->ws, &ab) : attn_decode_naive(st->pool, st->ws, &ab);
}

static void phase_sampling(cpu_state *st, const eng_batch *b)
{
    cpu_sample(&st->dense, st->out, b->n_decode, st->o.heads, st->mean, st->logits, st->tokens, NULL);
    for (int i = 0; i < b->n_decode; i++)
        st->slots[b->decode_slot[i]].token = st->tokens[i];
}

static void phase_mark(eng_phase *ph, int *np, const char *name, int64_t t0)
{
    if (*np >= ENG_MAX_PHASES)
        return;
    ph[*np].name = name;
    ph[*np].start_ns = t0;
    ph[*np].dur_ns = ll_now_ns() - t0;
    (*np)++;
}

static int cpu_step(void *state, const eng_batch *b, int64_t step_start_ns, eng_phase *phases,
                    int *n_phases)
{
    (void)step_start_ns;
    cpu_state *st = state;
    *n_phases = 0;
    int rc = 0;
    if (b->n_decode < 0 || b->n_prefill < 0)
        return LL_EINVAL;
    if (b->n_prefill > 0) {
        int64_t t0 = ll_now_ns();
        rc = phase_prefill(st, b);
        phase_mark(phases, n_phases, "prefill", t0);
        if (rc != 0)
            return rc;
    }
    if (b->n_decode == 0)
        return 0;
    rc = grow_batch(st, b->n_decode);
    if (rc != 0)
        return rc;
    int64_t t0 = ll_now_ns();
    rc = phase_dense(st, b);
    phase_mark(phases, n_phases, "dense_gemm", t0);
    if (rc != 0)
        return rc;
    t0 = ll_now_ns();
    rc = phase_attention(st, b);
    phase_mark(phases, n_phases, "attention", t0);
    if (rc != 0)
        return rc;
    t0 = ll_now_ns();
    phase_sampling(st, b);
    phase_mark(phases, n_phases, "sampling", t0);
    return 0;
}

static void cpu_release(void *state, int slot)
{
    cpu_state *st = state;
    if (check_slot(st, slot) != 0)
        return;
    /* keep the rows (the pool is reused), forget the request */
    st->slots[slot].prefilled = 0;
    st->slots[slot].token = 0;
}

int cpu_backend_token(void *state, int slot)
{
    const cpu_state *st = state;
    if (slot < 0 || slot >= st->o.max_slots)
        return -1;
    return st->slots[slot].token;
}

const eng_backend_ops eng_backend_cpu = {
    .name = "cpu",
    .caps = 0, /* computes on the scheduler thread's pool; its step time is measured */
    .create = cpu_create,
    .step = cpu_step,
    .release = cpu_release,
    .destroy = cpu_destroy,
};
