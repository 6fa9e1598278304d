/* cpu_model.c: the dense GEMM, projections and sampling of the cpu backend
 * (see cpu_model.h for the shapes). OpenBLAS does the two matrix products;
 * its thread count is set by the backend to match --threads. */
#include "cpu_model.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "common.h"
#include "cpu_kernels.h"
#include "engine.h"

static int fill_weights(float **out, size_t n, float scale, uint64_t seed)
{
    float *w = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    if (!w)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        w[i] = scale * ll_hash_unit(ll_splitmix64(seed + i));
    *out = w;
    return 0;
}

int cpu_dense_init(cpu_dense *d, int d_model, int d_ff, int vocab, uint64_t seed, char *err,
                   size_t errlen)
{
    d->w = d->wv = NULL;
    if (d_model < 1 || d_model > 65536 || d_ff < ATTN_DQK || d_ff > 262144 || vocab < 2 ||
        vocab > 1 << 20) {
        ll_errf(err, errlen,
                "cpu backend: need 1 <= d_model <= 65536, %d <= d_ff <= 262144, 2 <= vocab <= 1048576 "
                "(got %d, %d, %d)", ATTN_DQK, d_model, d_ff, vocab);
        return LL_EINVAL;
    }
    if ((double)d_model * d_ff > 1.5e9) {
        ll_errf(err, errlen, "cpu backend: dense weights %d x %d exceed 6 GB", d_model, d_ff);
        return LL_EINVAL;
    }
    d->d_model = d_model;
    d->d_ff = d_ff;
    openblas_set_num_threads(1); /* parallel through our pool: see cpu_model.h */
    d->vocab = vocab;
    if (fill_weights(&d->w, (size_t)d_model * d_ff, 1.0f / sqrtf((float)d_model), seed) != 0 ||
        fill_weights(&d->wv, (size_t)ATTN_DV * vocab, 1.0f / sqrtf((float)ATTN_DV),
                     ll_splitmix64(seed ^ 0x5eedull)) != 0) {
        cpu_dense_free(d);
        ll_errf(err, errlen, "cpu backend: out of memory for %d x %d dense weights", d_model, d_ff);
        return LL_ENOMEM;
    }
    return 0;
}

void cpu_dense_free(cpu_dense *d)
{
    free(d->w);
    free(d->wv);
    d->w = d->wv = NULL;
}

void cpu_embed(const cpu_dense *d, const int32_t *tokens, int n, uint64_t seed, float *x)
{
    for (int i = 0; i < n; i++) {
        uint64_t h = ll_splitmix64(seed ^ ((uint64_t)(uint32_t)tokens[i] << 20));
        for (int j = 0; j < d->d_model; j++)
            x[(size_t)i * d->d_model + j] = ll_hash_unit(ll_splitmix64(h + (uint64_t)j));
    }
}

typedef struct dense_ctx {
    const cpu_dense *d;
    const float *x;
    float *hd;
    int n, n_blocks, c0, c1;
} dense_ctx;

/* Columns [b0, b1) of Hd = X · W[:, b0:b1], block `task` of the range
 * [c0, c1); blocks are multiples of 16 columns so each starts on a cache
 * line when c0 does. With [c0, c1) = [0, d_ff) this is the tp=1 split. */
static void dense_task(void *vctx, int task, int worker)
{
    (void)worker;
    const dense_ctx *cx = vctx;
    const cpu_dense *d = cx->d;
    int units = (cx->c1 - cx->c0 + 15) / 16;
    int b0 = cx->c0 + (int)((int64_t)task * units / cx->n_blocks) * 16;
    int b1 = cx->c0 + (int)((int64_t)(task + 1) * units / cx->n_blocks) * 16;
    if (b1 > cx->c1)
        b1 = cx->c1;
    if (b1 <= b0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cx->n, b1 - b0, d->d_model, 1.0f, cx->x,
                d->d_model, d->w + b0, d->d_ff, 0.0f, cx->hd + b0, d->d_ff);
}

void cpu_dense_forward(cpu_pool *pool, const cpu_dense *d, const float *x, int n, int c0, int c1,
                       float *hd)
{
    if (n <= 0 || c1 <= c0)
        return;
    dense_ctx cx = {.d = d, .x = x, .hd = hd, .n = n, .n_blocks = cpu_pool_threads(pool),
                    .c0 = c0, .c1 = c1};
    cpu_pool_run(pool, cx.n_blocks, dense_task, &cx);
}

void cpu_project_q(const cpu_dense *d, const float *hd, int n, int h0, int h1, float *q)
{
    /* Head h's query is a window of Hd starting at a head-dependent offset,
     * so heads differ and every value comes from this step's GEMM. h is the
     * global head index: a rank's heads read the same windows at any tp. */
    int hr = h1 - h0;
    for (int i = 0; i < n; i++) {
        const float *row = hd + (size_t)i * d->d_ff;
        for (int h = h0; h < h1; h++) {
            size_t off = ((size_t)h * 97) % (size_t)d->d_ff;
            float *qh = q + ((size_t)i * hr + (h - h0)) * ATTN_DQK;
            for (int j = 0; j < ATTN_DQK; j++)
                qh[j] = row[(off + (size_t)j) % (size_t)d->d_ff];
        }
    }
}

void cpu_project_kv(const cpu_dense *d, const float *hd, int n, float *kv_new)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ATTN_DQK; j++)
            kv_new[(size_t)i * ATTN_DQK + j] = hd[(size_t)i * d->d_ff + j];
}

void cpu_head_sum(const float *attn_out, int n, int heads, float *sum)
{
    for (int i = 0; i < n; i++) {
        float *m = sum + (size_t)i * ATTN_DV;
        for (int j = 0; j < ATTN_DV; j++)
            m[j] = 0.0f;
        for (int h = 0; h < heads; h++) {
            const float *o = attn_out + ((size_t)i * heads + h) * ATTN_DV;
            for (int j = 0; j < ATTN_DV; j++)
                m[j] += o[j];
        }
    }
}

void cpu_sample(const cpu_dense *d, float *sum, int n, int heads, float *logits, int32_t *tokens,
                float *prob)
{
    if (n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        float *m = sum + (size_t)i * ATTN_DV;
        for (int j = 0; j < ATTN_DV; j++)
            m[j] *= 1.0f / (float)heads;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d->vocab, ATTN_DV, 1.0f, sum,
                ATTN_DV, d->wv, d->vocab, 0.0f, logits, d->vocab);
    for (int i = 0; i < n; i++) {
        const float *lg = logits + (size_t)i * d->vocab;
        int best = 0;
        for (int v = 1; v < d->vocab; v++)
            if (lg[v] > lg[best])
                best = v;
        double s = 0;
        for (int v = 0; v < d->vocab; v++)
            s += exp((double)(lg[v] - lg[best]));
        tokens[i] = best;
        if (prob)
            prob[i] = (float)(1.0 / s);
    }
}

/* OpenBLAS's pthreads build starts its worker threads in its library
 * constructor, before main, and each spins ~0.1 s (2^28 TSC cycles, its
 * THREAD_TIMEOUT) waiting for work: in a profile of `loadlaw sweep` on 2
 * cores, 15% of the process's samples. One thread's BLAS needs none of them,
 * so they are stopped; a later openblas_set_num_threads(N > 1) would start
 * them again. Weak: a serial OpenBLAS has no such function (its OpenMP
 * build has one, which only frees buffers: harmless). */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void eng_blas_single_thread(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_)
        (void)blas_thread_shutdown_();
}
