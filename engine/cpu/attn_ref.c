/* attn_ref.c: the reference sparse MLA decode attention and the traffic model.
 *
 * Plain loops in the order of the math, accumulated in double, one thread:
 * the version every fast kernel (CPU and CUDA) is checked against. Softmax is
 * computed the textbook way (max, exp-sum, normalise), not online, so that an
 * error in a kernel's running-max bookkeeping cannot hide in both.
 */
#include <math.h>
#include <stdlib.h>

#include "common.h"
#include "cpu_kernels.h"

int attn_batch_check(const attn_batch *b, char *err, size_t errlen)
{
    if (!b || b->n_seq < 0 || b->heads < 1) {
        ll_errf(err, errlen, "attention batch: need n_seq >= 0 and heads >= 1");
        return LL_EINVAL;
    }
    if (b->n_seq > 0 && (!b->q || !b->seq || !b->out)) {
        ll_errf(err, errlen, "attention batch: q, seq and out must be set");
        return LL_EINVAL;
    }
    for (int n = 0; n < b->n_seq; n++) {
        const attn_seq *s = &b->seq[n];
        if (s->k < 0 || (s->k > 0 && (!s->kv || !s->idx))) {
            ll_errf(err, errlen, "attention batch: sequence %d has k=%d without kv/idx", n, s->k);
            return LL_EINVAL;
        }
    }
    return 0;
}

static double total_k(const attn_batch *b)
{
    double k = 0;
    for (int n = 0; n < b->n_seq; n++)
        k += b->seq[n].k;
    return k;
}

/* Queries in and outputs out, fp32: the same for both kernels. */
static double qo_bytes(const attn_batch *b)
{
    return (double)b->n_seq * b->heads * (ATTN_DQK + ATTN_DV) * sizeof(float);
}

double attn_bytes_naive(const attn_batch *b)
{
    return total_k(b) * b->heads * ATTN_ROW_BYTES + qo_bytes(b) + total_k(b) * b->heads * 4.0;
}

double attn_bytes_tiled(const attn_batch *b)
{
    /* + 4 bytes per selected index, read once (naive reads it per head) */
    return total_k(b) * ATTN_ROW_BYTES + qo_bytes(b) + total_k(b) * 4.0;
}

int attn_decode_ref(const attn_batch *b)
{
    int kmax = 0;
    for (int n = 0; n < b->n_seq; n++)
        if (b->seq[n].k > kmax)
            kmax = b->seq[n].k;
    double *s = malloc(((size_t)kmax + 1) * sizeof *s);
    if (!s)
        return LL_ENOMEM;
    double acc[ATTN_DV];
    for (int n = 0; n < b->n_seq; n++) {
        const attn_seq *sq = &b->seq[n];
        for (int h = 0; h < b->heads; h++) {
            const float *q = b->q + ((size_t)n * b->heads + h) * ATTN_DQK;
            float *o = b->out + ((size_t)n * b->heads + h) * ATTN_DV;
            if (sq->k == 0) {
                for (int d = 0; d < ATTN_DV; d++)
                    o[d] = 0.0f;
                continue;
            }
            double smax = -INFINITY;
            for (int j = 0; j < sq->k; j++) {
                const uint16_t *kv = sq->kv + (size_t)sq->idx[j] * ATTN_DQK;
                double dot = 0;
                for (int d = 0; d < ATTN_DQK; d++)
                    dot += (double)q[d] * (double)bf16_to_f32(kv[d]);
                s[j] = dot * (double)b->scale;
                if (s[j] > smax)
                    smax = s[j];
            }
            double sum = 0;
            for (int j = 0; j < sq->k; j++) {
                s[j] = exp(s[j] - smax);
                sum += s[j];
            }
            for (int d = 0; d < ATTN_DV; d++)
                acc[d] = 0;
            for (int j = 0; j < sq->k; j++) {
                const uint16_t *kv = sq->kv + (size_t)sq->idx[j] * ATTN_DQK;
                double p = s[j] / sum;
                for (int d = 0; d < ATTN_DV; d++)
                    acc[d] += p * (double)bf16_to_f32(kv[d]);
            }
            for (int d = 0; d < ATTN_DV; d++)
                o[d] = (float)acc[d];
        }
    }
    free(s);
    return 0;
}
