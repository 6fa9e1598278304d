/* cpu_rescore.c: a prompt's continuation scored through prefill
 * (cpu_rescore.h). Shapes for n continuation tokens c_0..c_{n-1} after P
 * context rows:
 *   X (n, d_model) = embed(c_j); Hd (n, d_ff) = X · W          one GEMM
 *   for j in 0..n-1: row P+j = bf16(kv(Hd_j)); q_j (H, 576) from Hd_j;
 *       o_j (H, 512) = naive attention over top-k of [0, P+j+1);
 *       sum_j (512) = Σ_h o_j
 *   logits (n, vocab) = mean_h · Wv                            one GEMM
 * Row j of the logits is the distribution of the token at position j+1:
 * c_{j+1}'s score, and for j = n-1 the token that follows the continuation.
 * Position 0 is the context's first token, which the model gives with
 * certainty (as decode reports it: logprob 0): c_0 scores 0 when it is that
 * token, else -9999 (vLLM's floor for -inf). Cost: the GEMM of n rows plus n
 * single-sequence naive attentions, once per scored request. */
#include "cpu_rescore.h"

#include <math.h>
#include <stdlib.h>

#include "common.h"

/* t: token id's logprob under lg (log-softmax), *rank (1 = argmax) and the
 * ENG_TOK_TOP largest logits, the largest first. */
static void score(const float *lg, int vocab, int32_t id, eng_tok *t, int32_t *rank)
{
    int best = 0;
    for (int v = 1; v < vocab; v++)
        if (lg[v] > lg[best])
            best = v;
    double s = 0;
    int above = 0;
    for (int v = 0; v < vocab; v++) {
        s += exp((double)(lg[v] - lg[best]));
        above += lg[v] > lg[id];
    }
    double lse = lg[best] + log(s);
    *t = (eng_tok){.id = id, .lp = (float)(lg[id] - lse)};
    *rank = above + 1;
    int k = vocab < ENG_TOK_TOP ? vocab : ENG_TOK_TOP;
    for (int j = 0; j < k; j++) { /* selection: k passes, ties to the lower id */
        int pick = -1;
        for (int v = 0; v < vocab; v++) {
            int taken = 0;
            for (int q = 0; q < j && !taken; q++)
                taken = t->top_id[q] == v;
            if (!taken && (pick < 0 || lg[v] > lg[pick]))
                pick = v;
        }
        t->top_id[j] = pick;
        t->top_lp[j] = (float)(lg[pick] - lse);
    }
    t->n_top = k;
}

typedef struct rs_buf {
    float *x, *hd, *q, *out, *sum, *logits;
    int32_t *idx, *tokens;
} rs_buf;

static void rs_free(rs_buf *b)
{
    free(b->x); free(b->hd); free(b->q); free(b->out);
    free(b->sum); free(b->logits); free(b->idx); free(b->tokens);
}

static int rs_alloc(rs_buf *b, const cpu_rescore_in *in, size_t n)
{
    const cpu_dense *d = in->dense;
    size_t h = (size_t)in->heads;
    b->x = malloc(n * (size_t)d->d_model * sizeof *b->x);
    b->hd = malloc(n * (size_t)d->d_ff * sizeof *b->hd);
    b->q = malloc(h * ATTN_DQK * sizeof *b->q);
    b->out = malloc(h * ATTN_DV * sizeof *b->out);
    b->sum = malloc(n * ATTN_DV * sizeof *b->sum);
    b->logits = malloc(n * (size_t)d->vocab * sizeof *b->logits);
    b->idx = malloc((size_t)(in->topk > 0 ? in->topk : 1) * sizeof *b->idx);
    b->tokens = malloc(n * sizeof *b->tokens);
    return b->x && b->hd && b->q && b->out && b->sum && b->logits && b->idx && b->tokens ? 0 : LL_ENOMEM;
}

/* Position j+1's attention: row P+j written from Hd_j, then token c_j's
 * query over the selected rows of [0, P+j+1), summed over heads. */
static int attend(const cpu_rescore_in *in, const rs_buf *b, int64_t P, int j)
{
    const cpu_dense *d = in->dense;
    const float *hdj = b->hd + (size_t)j * d->d_ff;
    int64_t ctx = P + j + 1;
    uint16_t *row = in->kv + ((ctx - 1) % in->capacity) * ATTN_DQK;
    float kv_new[ATTN_DQK];
    cpu_project_kv(d, hdj, 1, kv_new);
    for (int e = 0; e < ATTN_DQK; e++)
        row[e] = f32_to_bf16(kv_new[e]);
    int64_t sel = ctx > in->min_ctx ? ctx : in->min_ctx;
    sel = sel > in->capacity ? in->capacity : sel;
    attn_seq sq = {.kv = in->kv, .idx = b->idx, .k = cpu_topk_select(sel, in->topk, ll_splitmix64(in->seq_seed), b->idx)};
    cpu_project_q(d, hdj, 1, 0, in->heads, b->q);
    attn_batch ab = {.n_seq = 1, .heads = in->heads, .scale = in->scale, .q = b->q, .seq = &sq,
                     .out = b->out, .fault = 0};
    int rc = attn_decode_naive(in->pool, in->ws, &ab);
    cpu_head_sum(b->out, 1, in->heads, b->sum + (size_t)j * ATTN_DV);
    return rc;
}

int cpu_rescore(const cpu_rescore_in *in, const eng_cont *c, eng_tok *next, int64_t *rows_hi)
{
    rs_buf b = {0};
    int n = c->n, rc = 0;
    int64_t P = c->ctx_tok;
    *rows_hi = 0;
    if (n <= 0)
        return 0;
    if ((rc = rs_alloc(&b, in, (size_t)n)) != 0)
        goto done;
    /* the rows after the context hold history, as decode found them, up to
     * the end of the ring: past it a row is an earlier position's (the
     * context's, as the prompt's prefill left it), which decode overwrites
     * only when it gets there. Filling P..P+n-1 modulo the capacity, as
     * once done, put history over the context's first rows before the
     * early positions read them. */
    for (int64_t r = P; r < P + n && r < in->capacity; r++)
        cpu_kv_fill(in->kv, r, 1, in->hist_seed);
    cpu_embed(in->dense, c->ids, n, in->model_seed, b.x);
    cpu_dense_forward(in->pool, in->dense, b.x, n, 0, in->dense->d_ff, b.hd);
    for (int j = 0; j < n && rc == 0; j++)
        rc = attend(in, &b, P, j);
    if (rc)
        goto done;
    cpu_sample(in->dense, b.sum, n, in->heads, b.logits, b.tokens, NULL);
    int first = c->ids[0] == in->first_tok;
    c->out[0] = (eng_tok){.id = c->ids[0], .lp = first ? 0.0f : -9999.0f, .n_top = 1,
                          .top_id = {in->first_tok}};
    c->rank[0] = first ? 1 : 2;
    int vocab = in->dense->vocab;
    for (int j = 1; j < n; j++)
        score(b.logits + (size_t)(j - 1) * vocab, vocab, c->ids[j], &c->out[j], &c->rank[j]);
    int32_t r1;
    score(b.logits + (size_t)(n - 1) * vocab, vocab, b.tokens[n - 1], next, &r1);
    *rows_hi = P + n < in->capacity ? P + n : in->capacity;
done:
    rs_free(&b);
    return rc;
}
