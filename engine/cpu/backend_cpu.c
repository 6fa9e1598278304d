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
 * Outputs are a function of the prompt (and the engine's seed), never of the
 * slot, the batch or the requests before: a request's seed (eng_batch's
 * prefill_seed, from its prompt) gives its first token, its prompt rows and
 * its top-k choice; the "history" rows are the same seeded rows in every
 * slot, and the rows a request wrote are put back to them when it leaves.
 * Each decode's greedy token goes back to the engine with its logprob and
 * the top ENG_TOK_TOP alternatives (a real log-softmax over the logits).
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
 *
 * Tensor parallelism (tp=K, engine/cpu/README.md): K ranks, each a thread
 * group with its own pool (the threads split as evenly as they go, at least
 * one each; rank 0's group includes the scheduler thread, ranks 1..K-1 are
 * led by the threads of `ranks`, a pool used with cpu_pool_run_each). Rank r
 * owns heads [r·H/K, (r+1)·H/K) and the columns [r·d_ff/K, (r+1)·d_ff/K) of
 * W. Per step, every rank:
 *   dense_gemm  its columns of Hd = X · W (column-parallel; Hd is one shared
 *               buffer, so the "all-gather" is a barrier), then its heads'
 *               queries from the whole Hd; rank 0 writes the new KV rows
 *               (the latent KV cache is one, shared, as MLA's is replicated
 *               on every GPU); a second barrier before anyone attends
 *   attention   its heads, then their sum (n, 512): the row-parallel part
 *   all_reduce  the head sums over the ranks (comm_host): every rank holds
 *               the sum over all H heads
 * and rank 0 samples. With K = 1 there is no rank thread, no barrier, no
 * all-reduce and no "all_reduce" phase: the step is the tp-less one,
 * operation for operation (the conformance suite's cpu_tp checks the bits).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "comm.h"
#include "common.h"
#include "cpu_kernels.h"
#include "cpu_model.h"
#include "cpu_rescore.h"
#include "model_opts.h"

#ifndef CPU_ATTN_SHARP
#define CPU_ATTN_SHARP 6.0f
#endif

/* The model's keys (model_opts.h, shared with the cuda backend); threads
 * resolved here (0 = every online core). */
typedef eng_model_opts cpu_opts;

typedef struct cpu_slot {
    uint16_t *kv;        /* (capacity, ATTN_DQK) bf16, NULL until first use */
    int64_t prefilled;   /* prompt rows written for the current request */
    int32_t token;       /* last sampled token */
    uint64_t seed;       /* the current request's (its prompt's) seed */
    int64_t hi;          /* rows [0, hi) may hold the current request's rows */
} cpu_slot;

/* One tensor-parallel rank: its heads, its columns of W, its threads and
 * buffers, and the phases it timed in the current step. */
typedef struct cpu_rank {
    int h0, h1;          /* heads [h0, h1) */
    int c0, c1;          /* columns [c0, c1) of W and Hd */
    cpu_pool *pool;
    attn_ws *ws;
    float *q;            /* (cap_n, h1-h0, ATTN_DQK) */
    float *out;          /* (cap_n, h1-h0, ATTN_DV) */
    float *sum;          /* (cap_n, ATTN_DV) head sum; after the all-reduce, over all heads */
    int rc;              /* this step's first error */
    int n_ph;
    eng_phase ph[3];
} cpu_rank;

typedef struct cpu_state {
    cpu_opts o;
    int fault;           /* attn_fault (tiled only): a deliberate kernel bug, for tests */
    cpu_rank *rank;      /* (tp) */
    cpu_pool *ranks;     /* tp threads leading ranks 1..tp-1 (NULL when tp = 1) */
    eng_comm *comm;      /* host all-reduce over the ranks (NULL when tp = 1) */
    cpu_dense dense;
    cpu_slot *slots;     /* (max_slots) */
    /* per-step buffers, grown to the largest batch seen */
    int cap_n;
    float *x, *hd, *kv_new, *logits;
    int32_t *tokens, *idx;
    attn_seq *seqs;
    const eng_batch *b; /* the step the ranks are running */
    int64_t t_dense;    /* when the step's dense phase began (rank 0's embed) */
} cpu_state;

static int opts_from_config(const eng_config *cfg, cpu_opts *o, char *err, size_t errlen)
{
    int rc = eng_model_opts_from_config(cfg, "cpu", o, err, errlen);
    if (rc != 0)
        return rc;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* threads=0: every online core (capped at the pool's 1024) */
    o->threads = cfg->threads > 0 ? cfg->threads : ncpu > 1024 ? 1024 : ncpu > 0 ? (int)ncpu : 1;
    if (o->threads > 1024) {
        ll_errf(err, errlen, "cpu backend: threads <= 1024 (got %d)", o->threads);
        return LL_EINVAL;
    }
    /* each rank reports 3 phases, plus prefill and sampling */
    if (o->tp > (ENG_MAX_PHASES - 2) / 3) {
        ll_errf(err, errlen, "cpu backend: tp must be in [1, %d], got %d",
                (ENG_MAX_PHASES - 2) / 3, o->tp);
        return LL_EINVAL;
    }
    if (o->heads % o->tp != 0 || o->d_ff % o->tp != 0) {
        ll_errf(err, errlen, "cpu backend: tp=%d must divide heads (%d) and d_ff (%d): each rank "
                "owns heads/tp heads and d_ff/tp columns of the dense weights", o->tp, o->heads,
                o->d_ff);
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
    free(st->x); free(st->hd); free(st->kv_new);
    free(st->logits); free(st->tokens); free(st->idx); free(st->seqs);
    cpu_dense_free(&st->dense);
    if (st->rank)
        for (int r = 0; r < st->o.tp; r++) {
            cpu_rank *k = &st->rank[r];
            free(k->q); free(k->out); free(k->sum);
            attn_ws_free(k->ws);
            cpu_pool_destroy(k->pool);
        }
    free(st->rank);
    cpu_pool_destroy(st->ranks);
    eng_comm_destroy(st->comm);
    free(st);
}

/* Ranks, their shares of heads, columns and threads, their pools, and
 * (tp > 1) the threads that lead them and the all-reduce between them. */
static int create_ranks(cpu_state *st, char *err, size_t errlen)
{
    const cpu_opts *o = &st->o;
    int k = o->tp;
    st->rank = calloc((size_t)k, sizeof *st->rank);
    if (!st->rank) {
        ll_errf(err, errlen, "cpu backend: out of memory");
        return LL_ENOMEM;
    }
    for (int r = 0; r < k; r++) {
        cpu_rank *rk = &st->rank[r];
        rk->h0 = r * (o->heads / k);
        rk->h1 = rk->h0 + o->heads / k;
        rk->c0 = r * (o->d_ff / k);
        rk->c1 = rk->c0 + o->d_ff / k;
        /* threads split as evenly as they go; a rank without a share still
         * gets its leader (more threads than cores when threads < tp) */
        int t = o->threads / k + (r < o->threads % k);
        int rc = cpu_pool_create(t > 0 ? t : 1, &rk->pool, err, errlen);
        if (rc != 0)
            return rc;
        if (!(rk->ws = attn_ws_new())) {
            ll_errf(err, errlen, "cpu backend: out of memory");
            return LL_ENOMEM;
        }
    }
    if (k == 1)
        return 0;
    int rc = cpu_pool_create(k, &st->ranks, err, errlen);
    if (rc == 0)
        rc = eng_comm_host_create(k, &st->comm, err, errlen);
    return rc;
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
    st->fault = st->o.tiled ? cfg->attn_fault : ENG_ATTN_FAULT_NONE;
    rc = create_ranks(st, err, errlen);
    if (rc != 0)
        goto fail;
    rc = cpu_dense_init(&st->dense, st->o.d_model, st->o.d_ff, st->o.vocab, st->o.seed, err, errlen);
    if (rc != 0)
        goto fail;
    st->slots = calloc((size_t)st->o.max_slots, sizeof *st->slots);
    if (!st->slots) {
        ll_errf(err, errlen, "cpu backend: out of memory");
        rc = LL_ENOMEM;
        goto fail;
    }
    ll_info("cpu backend: attn=%s heads=%d topk=%d threads=%d tp=%d dense %dx%d (%.0f MB fp32) "
            "capacity=%d min_ctx=%d", st->o.tiled ? "tiled" : "naive", st->o.heads, st->o.topk,
            st->o.threads, st->o.tp, st->o.d_model, st->o.d_ff,
            (double)st->o.d_model * st->o.d_ff * 4 / 1e6, st->o.capacity, st->o.min_ctx);
    if (st->fault != ENG_ATTN_FAULT_NONE)
        ll_warn("cpu backend: attn_fault=%s: the tiled kernel is wrong on purpose (testing)",
                st->fault == ENG_ATTN_FAULT_SKIP_LAST_TILE ? "skip_last_tile" : "swap_heads");
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
    int bad = 0;
#define GROW(p, count)                                                         \
    do {                                                                       \
        void *g_ = realloc((p), (count) * sizeof *(p));                        \
        if (g_)                                                                \
            (p) = g_;                                                          \
        else                                                                   \
            bad = 1;                                                           \
    } while (0)
    GROW(st->x, N * o->d_model);
    GROW(st->hd, N * o->d_ff);
    GROW(st->kv_new, N * ATTN_DQK);
    GROW(st->logits, N * o->vocab);
    GROW(st->tokens, N);
    GROW(st->idx, N * o->topk);
    GROW(st->seqs, N);
    for (int r = 0; r < o->tp; r++) {
        cpu_rank *rk = &st->rank[r];
        size_t hr = (size_t)(rk->h1 - rk->h0);
        GROW(rk->q, N * hr * ATTN_DQK);
        GROW(rk->out, N * hr * ATTN_DV);
        GROW(rk->sum, N * ATTN_DV);
    }
#undef GROW
    if (bad)
        return LL_ENOMEM;
    st->cap_n = n;
    return 0;
}

/* The history rows' seed: the same in every slot, so no output depends on
 * which slot a request landed on. */
static uint64_t history_seed(const cpu_state *st) { return ll_splitmix64(st->o.seed ^ 0x4b56ull); }

/* The slot's KV rows, allocated and filled with seeded history on first use. */
static uint16_t *slot_kv(cpu_state *st, int slot)
{
    cpu_slot *s = &st->slots[slot];
    if (!s->kv) {
        s->kv = malloc((size_t)st->o.capacity * ATTN_ROW_BYTES);
        if (!s->kv)
            return NULL;
        cpu_kv_fill(s->kv, 0, st->o.capacity, history_seed(st));
    }
    return s->kv;
}

static void slot_touch(cpu_slot *s, int64_t rows)
{
    if (rows > s->hi)
        s->hi = rows;
}

static int check_slot(const cpu_state *st, int slot)
{
    if (slot < 0 || slot >= st->o.max_slots) {
        ll_error("cpu backend: slot %d out of range [0, %d)", slot, st->o.max_slots);
        return LL_ERANGE;
    }
    return 0;
}

/* A prompt's scored continuation (cpu_rescore.h): its rows and logits
 * through the prefill path; the token after it becomes the first output. */
static int prefill_scored(cpu_state *st, cpu_slot *s, const eng_cont *c, eng_tok *out)
{
    cpu_rescore_in in = {.pool = st->rank[0].pool, .ws = st->rank[0].ws, .dense = &st->dense,
                         .heads = st->o.heads, .topk = st->o.topk, .capacity = st->o.capacity,
                         .min_ctx = st->o.min_ctx, .scale = CPU_ATTN_SHARP / sqrtf((float)ATTN_DQK),
                         .model_seed = st->o.seed, .seq_seed = s->seed,
                         .hist_seed = history_seed(st), .first_tok = s->token, .kv = s->kv};
    eng_tok next;
    int64_t hi = 0;
    int rc = cpu_rescore(&in, c, &next, &hi);
    if (rc != 0)
        return rc;
    slot_touch(s, hi);
    s->token = next.id;
    if (out)
        *out = next;
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
        if (s->prefilled == 0) { /* a new request: its seed, and its first token */
            s->seed = b->prefill_seed ? b->prefill_seed[i] : ll_splitmix64(st->o.seed ^ (uint64_t)slot);
            s->token = (int32_t)(ll_splitmix64(s->seed ^ 0x70ull) % (uint64_t)st->o.vocab);
        }
        uint64_t seed = ll_splitmix64(s->seed ^ 0x9f11ull);
        for (int64_t t = 0; t < b->prefill_tok[i]; t++)
            cpu_kv_fill(kv, (s->prefilled + t) % cap, 1, seed);
        s->prefilled += b->prefill_tok[i];
        slot_touch(s, s->prefilled < cap ? s->prefilled : cap);
        if (b->prefill_out) /* the prompt's token: certain, no alternatives computed */
            b->prefill_out[i] = (eng_tok){.id = s->token, .n_top = 1, .top_id = {s->token}};
        const eng_cont *c = b->prefill_cont ? b->prefill_cont[i] : NULL;
        if (c && (rc = prefill_scored(st, s, c, b->prefill_out ? &b->prefill_out[i] : NULL)) != 0)
            return rc;
    }
    return 0;
}

/* Before the ranks start (scheduler thread): the slots are valid and have
 * their rows, each sequence's last token is embedded into X, and each
 * sequence's top-k rows are chosen (the indexer is not sharded: every rank
 * reads the same rows for its heads). */
static int step_prepare(cpu_state *st, const eng_batch *b)
{
    const cpu_opts *o = &st->o;
    int n = b->n_decode;
    for (int i = 0; i < n; i++) {
        int slot = b->decode_slot[i];
        int rc = check_slot(st, slot);
        if (rc != 0)
            return rc;
        if (!slot_kv(st, slot))
            return LL_ENOMEM;
        st->tokens[i] = st->slots[slot].token;
    }
    cpu_embed(&st->dense, st->tokens, n, o->seed, st->x);
    for (int i = 0; i < n; i++) {
        int slot = b->decode_slot[i];
        int64_t ctx = b->decode_ctx[i] > o->min_ctx ? b->decode_ctx[i] : o->min_ctx;
        if (ctx > o->capacity)
            ctx = o->capacity;
        int32_t *idx = st->idx + (size_t)i * o->topk;
        st->seqs[i].kv = st->slots[slot].kv;
        st->seqs[i].idx = idx;
        st->seqs[i].k = cpu_topk_select(ctx, o->topk, ll_splitmix64(st->slots[slot].seed), idx);
    }
    return 0;
}

static void rank_mark(cpu_rank *rk, int r, const char *name, int64_t t0)
{
    rk->ph[rk->n_ph++] = (eng_phase){.name = name, .start_ns = t0, .dur_ns = ll_now_ns() - t0,
                                     .rank = r};
}

/* A collective failed: the rank keeps calling the others (so no rank waits
 * forever in a barrier) and the step reports the first error. */
static void rank_comm(cpu_state *st, cpu_rank *rk, int rc)
{
    if (rc != 0 && rk->rc == 0) {
        ll_error("cpu backend: %s", eng_comm_last_error(st->comm));
        rk->rc = rc;
    }
}

/* One rank's share of the decode step (see the DESIGN note on top). Every
 * rank calls every collective, even after an error of its own. */
static void rank_step(void *vst, int r, int worker)
{
    (void)worker;
    cpu_state *st = vst;
    const cpu_opts *o = &st->o;
    const eng_batch *b = st->b;
    cpu_rank *rk = &st->rank[r];
    int n = b->n_decode, hr = rk->h1 - rk->h0, k = o->tp;
    rk->rc = 0;
    rk->n_ph = 0;

    int64_t t0 = r == 0 ? st->t_dense : ll_now_ns();
    cpu_dense_forward(rk->pool, &st->dense, st->x, n, rk->c0, rk->c1, st->hd);
    if (k > 1)
        rank_comm(st, rk, eng_comm_barrier(st->comm, r)); /* every column of Hd is in */
    cpu_project_q(&st->dense, st->hd, n, rk->h0, rk->h1, rk->q);
    if (r == 0) {
        /* this step's token becomes row ctx-1 of the sequence's cache */
        cpu_project_kv(&st->dense, st->hd, n, st->kv_new);
        for (int i = 0; i < n; i++) {
            cpu_slot *s = &st->slots[b->decode_slot[i]];
            int64_t ctx = b->decode_ctx[i] > 0 ? b->decode_ctx[i] : 1;
            uint16_t *row = s->kv + ((ctx - 1) % o->capacity) * ATTN_DQK;
            slot_touch(s, ctx < o->capacity ? ctx : o->capacity);
            for (int d = 0; d < ATTN_DQK; d++)
                row[d] = f32_to_bf16(st->kv_new[(size_t)i * ATTN_DQK + d]);
        }
    }
    if (k > 1)
        rank_comm(st, rk, eng_comm_barrier(st->comm, r)); /* the new KV rows are in */
    rank_mark(rk, r, "dense_gemm", t0);

    t0 = ll_now_ns();
    attn_batch ab = {.n_seq = n, .heads = hr, .scale = CPU_ATTN_SHARP / sqrtf((float)ATTN_DQK),
                     .q = rk->q, .seq = st->seqs, .out = rk->out, .fault = st->fault};
    int rc = o->tiled ? attn_decode_tiled(rk->pool, rk->ws, &ab)
                      : attn_decode_naive(rk->pool, rk->ws, &ab);
    if (rc != 0 && rk->rc == 0)
        rk->rc = rc;
    cpu_head_sum(rk->out, n, hr, rk->sum);
    rank_mark(rk, r, "attention", t0);

    if (k > 1) {
        t0 = ll_now_ns();
        rank_comm(st, rk, eng_comm_allreduce(st->comm, r, rk->sum, (size_t)n * ATTN_DV, NULL));
        rank_mark(rk, r, "all_reduce", t0);
    }
}

/* t = the greedy token (cpu_sample's argmax, the first of equal logits), its
 * log-softmax and the ENG_TOK_TOP largest logits' (the chosen one first). */
static void token_out(const float *lg, int vocab, int32_t token, eng_tok *t)
{
    double s = 0;
    for (int v = 0; v < vocab; v++)
        s += exp((double)(lg[v] - lg[token]));
    double lse = lg[token] + log(s);
    *t = (eng_tok){.id = token, .lp = (float)(lg[token] - lse)};
    int k = vocab < ENG_TOK_TOP ? vocab : ENG_TOK_TOP;
    for (int j = 0; j < k; j++) { /* selection: k passes over the vocabulary */
        int best = -1;
        for (int v = 0; v < vocab; v++) {
            int taken = 0;
            for (int q = 0; q < j && !taken; q++)
                taken = t->top_id[q] == v;
            if (!taken && (best < 0 || lg[v] > lg[best]))
                best = v;
        }
        t->top_id[j] = best;
        t->top_lp[j] = (float)(lg[best] - lse);
    }
    t->n_top = k;
}

static void phase_sampling(cpu_state *st, const eng_batch *b)
{
    cpu_sample(&st->dense, st->rank[0].sum, b->n_decode, st->o.heads, st->logits, st->tokens,
               NULL);
    for (int i = 0; i < b->n_decode; i++) {
        st->slots[b->decode_slot[i]].token = st->tokens[i];
        if (b->decode_out)
            token_out(st->logits + (size_t)i * st->o.vocab, st->o.vocab, st->tokens[i],
                      &b->decode_out[i]);
    }
}

static void phase_mark(eng_phase *ph, int *np, const char *name, int64_t t0)
{
    if (*np >= ENG_MAX_PHASES)
        return;
    ph[*np] = (eng_phase){.name = name, .start_ns = t0, .dur_ns = ll_now_ns() - t0};
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
    st->t_dense = ll_now_ns();
    rc = step_prepare(st, b);
    if (rc != 0) {
        phase_mark(phases, n_phases, "dense_gemm", st->t_dense);
        return rc;
    }
    st->b = b;
    if (st->o.tp == 1)
        rank_step(st, 0, 0);
    else
        cpu_pool_run_each(st->ranks, rank_step, st);
    st->b = NULL;
    /* rank 0's phases, then each other rank's: each rank's in time order */
    for (int r = 0; r < st->o.tp; r++) {
        const cpu_rank *rk = &st->rank[r];
        for (int i = 0; i < rk->n_ph && *n_phases < ENG_MAX_PHASES; i++)
            phases[(*n_phases)++] = rk->ph[i];
        if (rk->rc != 0 && rc == 0)
            rc = rk->rc;
    }
    if (rc != 0)
        return rc;
    int64_t t0 = ll_now_ns();
    phase_sampling(st, b);
    phase_mark(phases, n_phases, "sampling", t0);
    return 0;
}

static void cpu_release(void *state, int slot)
{
    cpu_state *st = state;
    if (check_slot(st, slot) != 0)
        return;
    /* keep the rows (the pool is reused), forget the request: the rows it
     * wrote go back to the history every request starts from */
    cpu_slot *s = &st->slots[slot];
    if (s->kv && s->hi > 0)
        cpu_kv_fill(s->kv, 0, s->hi, history_seed(st));
    s->hi = 0;
    s->prefilled = 0;
    s->token = 0;
}

const float *cpu_backend_attn_out(void *state, int i, int h)
{
    const cpu_state *st = state;
    if (h < 0 || h >= st->o.heads || i < 0 || i >= st->cap_n)
        return NULL;
    const cpu_rank *rk = &st->rank[h / (st->o.heads / st->o.tp)];
    return rk->out + ((size_t)i * (size_t)(rk->h1 - rk->h0) + (size_t)(h - rk->h0)) * ATTN_DV;
}

const float *cpu_backend_logits(void *state, int i)
{
    const cpu_state *st = state;
    return i < 0 || i >= st->cap_n ? NULL : st->logits + (size_t)i * st->o.vocab;
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
    .caps = ENG_CAP_PROMPT_LOGPROBS, /* computes on the scheduler thread's pool; its step time is measured */
    .create = cpu_create,
    .step = cpu_step,
    .release = cpu_release,
    .destroy = cpu_destroy,
};
