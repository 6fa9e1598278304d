/* cuda_rescore.c: the cuda backend's token logprobs and a prompt's
 * continuation scored through prefill (cuda_rescore.h). Shapes for a chunk
 * of m continuation tokens c_j0..c_{j0+m-1} after P context rows, on rank 0:
 *   X (m, d_model) = embed(c_j); Hd (m, d_ff) = X · W            one GEMM
 *   for i in 0..m-1 (j = j0 + i, ctx = P + j + 1):
 *       row P+j = kv(Hd_i); q_i (H, 576) from Hd_i     project_q_kv_kernel
 *       idx_i = top-k of [0, ctx) under the request's key
 *       o_i (H, 512) = naive attention (never the tiled kernel, no fault)
 *   logits (m, vocab) = mean_h(o) · Wv; softmax and argmax     one GEMM
 * Row i of the logits is the distribution of the token at position j+1:
 * c_{j+1}'s score, and for the last position the token that follows the
 * continuation. Position 0 is the context's first token, which the model
 * gives with certainty (as decode reports it: logprob 0): c_0 scores 0 when
 * it is that token, else -9999 (vLLM's floor for -inf), as on cpu. */
#include "cuda_rescore.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "common.h"

void cuda_score_row(const float *lg, int vocab, float prob, int32_t id, eng_tok *t, int32_t *rank)
{
    int best = 0, above = 0;
    for (int v = 1; v < vocab; v++)
        if (lg[v] > lg[best])
            best = v;
    int in = id >= 0 && id < vocab; /* a prompt's id may lie outside a small vocabulary */
    for (int v = 0; v < vocab && in; v++)
        above += lg[v] > lg[id];
    double lse = (double)lg[best] - log(prob > 0.0f ? (double)prob : (double)FLT_MIN);
    *t = (eng_tok){.id = id, .lp = in ? (float)((double)lg[id] - lse) : -9999.0f};
    if (rank)
        *rank = in ? above + 1 : vocab + 1;
    /* one pass, insertion into a sorted list: a later equal logit never
     * passes an earlier one, so ties go to the lower id */
    int k = vocab < ENG_TOK_TOP ? vocab : ENG_TOK_TOP, n = 0;
    for (int v = 0; v < vocab; v++) {
        if (n == k && !(lg[v] > lg[t->top_id[k - 1]]))
            continue;
        int p = n < k ? n++ : k - 1;
        while (p > 0 && lg[v] > lg[t->top_id[p - 1]]) {
            t->top_id[p] = t->top_id[p - 1];
            p--;
        }
        t->top_id[p] = v;
    }
    for (int j = 0; j < k; j++)
        t->top_lp[j] = (float)((double)lg[t->top_id[j]] - lse);
    t->n_top = k;
}

static int rs_fail(cuda_state *st, const char *what, int code)
{
    snprintf(st->last_err, sizeof st->last_err,
             "cuda backend: scoring a prompt's continuation: %s failed: %s", what, cuda_model_errstr(code));
    st->broken = 1;
    ll_error("%s", st->last_err);
    return LL_EIO;
}

#define RS(call, what)                                                                         \
    do {                                                                                       \
        int r_ = (int)(call);                                                                  \
        if (r_ != 0)                                                                           \
            return rs_fail(st, what, r_);                                                      \
    } while (0)

/* Position i of the chunk: its KV row and query, its top-k, naive attention
 * into row i of the attention output. */
static int rs_position(cuda_state *st, cuda_rank *rk, int i)
{
    const eng_model_opts *o = &st->o;
    const cuda_upload *u = &st->up;
    const int32_t *d_slot = (const int32_t *)(rk->d_up + u->off_slot) + i;
    const int64_t *d_ctx = (const int64_t *)(rk->d_up + u->off_ctx) + i;
    const uint64_t *d_key = (const uint64_t *)(rk->d_up + u->off_key) + i;
    float *q = rk->d_q + (size_t)i * o->heads * CUDA_ATTN_DQK;
    int32_t *idx = rk->d_idx + (size_t)i * o->topk;
    RS(cuda_project(&rk->dense, rk->d_hd + (size_t)i * rk->dense.ld, 1, o->heads, d_slot, d_ctx, rk->d_pool,
                    st->layout, o->capacity, q, rk->stream),
       CUDA_K_PROJECT);
    RS(cuda_topk(d_slot, d_ctx, d_key, 1, o->topk, o->min_ctx, o->capacity, o->seed, idx, rk->stream),
       CUDA_K_TOPK);
    cuda_attn_args a = {
        .n_seq = 1, .heads = o->heads, .topk = o->topk, .scale = 1.0f / sqrtf((float)CUDA_ATTN_DQK),
        .layout = st->layout, .q = q, .kv = rk->d_pool, .kv_rows = st->pool_rows, .idx = idx,
        .out = rk->d_out + (size_t)i * o->heads * CUDA_ATTN_DV, .lse = rk->d_lse + (size_t)i * o->heads,
        .fault = CUDA_ATTN_FAULT_NONE,
    };
    RS(cuda_attn_decode(CUDA_ATTN_NAIVE, &a, rk->sm_count, rk->stream), "mla_decode_naive_kernel");
    return 0;
}

/* Positions j0..j0+m-1 (m <= max_running): the upload (and, for the first
 * chunk, the continuation's rows put back to history, as decode found
 * them), the rows and attention, the logits and probabilities into
 * h_logits / h_prob; waits for them. */
static int rs_chunk(cuda_state *st, int slot, const eng_cont *c, int j0, int m)
{
    const eng_model_opts *o = &st->o;
    cuda_rank *rk = &st->rk[0];
    const cuda_upload *u = &st->up;
    int32_t *h_slot = (int32_t *)(st->h_up + u->off_slot), *h_tok = (int32_t *)(st->h_up + u->off_tok);
    int64_t *h_ctx = (int64_t *)(st->h_up + u->off_ctx);
    uint64_t *h_key = (uint64_t *)(st->h_up + u->off_key);
    cuda_fill_item *h_item = (cuda_fill_item *)(st->h_up + u->off_items);
    for (int i = 0; i < m; i++) {
        h_slot[i] = slot;
        h_tok[i] = c->ids[j0 + i];
        h_ctx[i] = (int64_t)c->ctx_tok + j0 + i + 1;
        h_key[i] = st->key[slot];
    }
    /* history after the context up to the end of the ring only: past it a
     * row is an earlier position's, which decode overwrites only when it
     * gets there (cpu_rescore.c says why; filling modulo the capacity put
     * history over the context's first rows) */
    int64_t n_hist = c->ctx_tok < o->capacity ? o->capacity - c->ctx_tok : 0;
    n_hist = n_hist < c->n ? n_hist : c->n;
    int n_items = j0 == 0 && n_hist > 0;
    if (n_items)
        *h_item = (cuda_fill_item){.slot = slot, .n = (int)n_hist, .row0 = c->ctx_tok,
                                   .seed = cuda_history_seed(o->seed)};
    cudaStream_t s = rk->stream;
    RS(cudaSetDevice(rk->device), "cudaSetDevice");
    RS(cudaMemcpyAsync(rk->d_up, st->h_up, u->off_items + (size_t)n_items * sizeof(cuda_fill_item),
                       cudaMemcpyHostToDevice, s),
       "uploading the positions (cudaMemcpyAsync)");
    if (n_items)
        RS(cuda_kv_fill(rk->d_pool, st->layout, o->capacity, (const cuda_fill_item *)(rk->d_up + u->off_items), 1,
                        h_item->n, s),
           CUDA_K_FILL " (history after the context)");
    RS(cuda_embed(&rk->dense, (const int32_t *)(rk->d_up + u->off_tok), m, o->seed, rk->d_x, s), CUDA_K_EMBED);
    RS(cuda_dense_forward(&rk->dense, rk->d_x, m, rk->d_hd), CUDA_K_GEMM);
    for (int i = 0; i < m; i++) {
        int rc = rs_position(st, rk, i);
        if (rc != 0)
            return rc;
    }
    RS(cuda_logits(&rk->dense, rk->d_out, m, o->heads, rk->d_mean, rk->d_logits, s), CUDA_K_LOGITS);
    RS(cuda_sample(rk->d_logits, m, o->vocab, rk->d_tok_out, rk->d_prob, s), CUDA_K_SAMPLE);
    RS(cudaMemcpyAsync(st->h_logits, rk->d_logits, (size_t)m * o->vocab * sizeof(float), cudaMemcpyDeviceToHost, s),
       "copying the logits back (cudaMemcpyAsync)");
    RS(cudaMemcpyAsync(st->h_prob, rk->d_prob, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost, s),
       "copying the probabilities back (cudaMemcpyAsync)");
    RS(cudaStreamSynchronize(s), "the scoring's kernels (cudaStreamSynchronize)");
    return 0;
}

static int32_t row_argmax(const float *lg, int vocab)
{
    int best = 0;
    for (int v = 1; v < vocab; v++)
        if (lg[v] > lg[best])
            best = v;
    return best;
}

int cuda_rescore(cuda_state *st, int slot, const eng_cont *c, eng_tok *next)
{
    static int warned_tp;
    const int vocab = st->o.vocab, M = st->o.max_slots;
    const int32_t first = st->token[slot];
    *next = (eng_tok){.id = first, .n_top = 1, .top_id = {first}};
    if (c->n <= 0)
        return 0;
    if (st->o.tp > 1) { /* rank 0 holds only its heads and its shard of W */
        if (!warned_tp++)
            ll_warn("cuda backend: prompt logprobs are not computed at tp=%d (tp=1 only)", st->o.tp);
        return 0;
    }
    c->out[0] = (eng_tok){.id = c->ids[0], .lp = c->ids[0] == first ? 0.0f : -9999.0f, .n_top = 1,
                          .top_id = {first}};
    c->rank[0] = c->ids[0] == first ? 1 : 2;
    for (int j0 = 0; j0 < c->n; j0 += M) {
        int m = c->n - j0 < M ? c->n - j0 : M;
        int rc = rs_chunk(st, slot, c, j0, m);
        if (rc != 0)
            return rc;
        for (int i = 0; i < m; i++) {
            int j = j0 + i + 1; /* the position row i scores */
            const float *lg = st->h_logits + (size_t)i * vocab;
            if (j < c->n)
                cuda_score_row(lg, vocab, st->h_prob[i], c->ids[j], &c->out[j], &c->rank[j]);
            else
                cuda_score_row(lg, vocab, st->h_prob[i], row_argmax(lg, vocab), next, NULL);
        }
    }
    return 0;
}

int cuda_step_outputs(cuda_state *st, const eng_batch *b, eng_phase *phases, int *n_phases)
{
    const int vocab = st->o.vocab;
    for (int i = 0; i < b->n_decode && b->decode_out; i++)
        if (b->want_lp)
            cuda_score_row(st->h_logits + (size_t)i * vocab, vocab, st->h_prob[i], st->h_tok_out[i],
                           &b->decode_out[i], NULL);
        else /* the id alone: nobody asked for its logprob */
            b->decode_out[i] = (eng_tok){.id = st->h_tok_out[i], .n_top = 0};
    int64_t t0 = 0;
    for (int i = 0; i < b->n_prefill; i++) {
        int slot = b->prefill_slot[i];
        eng_tok first = {.id = st->token[slot], .n_top = 1, .top_id = {st->token[slot]}};
        const eng_cont *c = b->prefill_cont ? b->prefill_cont[i] : NULL;
        if (c && c->n > 0) {
            t0 = t0 ? t0 : ll_now_ns();
            int rc = cuda_rescore(st, slot, c, &first);
            if (rc != 0)
                return rc;
            st->token[slot] = first.id;
        }
        if (b->prefill_out)
            b->prefill_out[i] = first;
    }
    if (t0 && *n_phases < ENG_MAX_PHASES)
        phases[(*n_phases)++] = (eng_phase){.name = CUDA_K_SCORE, .start_ns = t0, .dur_ns = ll_now_ns() - t0};
    return 0;
}
