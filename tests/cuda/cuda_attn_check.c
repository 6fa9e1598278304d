/* cuda_attn_check.c: inputs and reference check for the CUDA attention
 * kernels (see cuda_attn_check.h for the tolerances and why). */
#include "cuda_attn_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h" /* attn_decode_ref, bf16 helpers, ll_splitmix64 */

static uint64_t rng_next(uint64_t *s)
{
    *s += 1;
    return ll_splitmix64(*s);
}

/* uniform in [-1, 1) */
static float rng_sym(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

void cac_free(cac_data *d)
{
    free(d->q);
    free(d->kv);
    free(d->kv_bf16);
    free(d->idx);
    free(d->ref_out);
    free(d->ref_lse);
    free(d->ref_pabs);
    free(d->ref_done);
    memset(d, 0, sizeof *d);
}

int cac_make(const cac_case *c, cac_data *d)
{
    memset(d, 0, sizeof *d);
    d->c = *c;
    if (d->c.q_amp == 0)
        d->c.q_amp = 3.0f;
    int64_t ctx = c->ctx_rows > 0 ? c->ctx_rows : (c->topk + c->topk / 4 > 256 ? c->topk + c->topk / 4 : 256);
    if (ctx < c->topk)
        ctx = c->topk;
    d->c.ctx_rows = ctx;
    d->scale = 1.0f / sqrtf((float)CUDA_ATTN_DQK);
    d->kv_rows = ctx * (c->n_seq > 0 ? c->n_seq : 1);
    d->row_bytes = cuda_kv_row_bytes(c->layout);
    size_t nq = (size_t)c->n_seq * c->heads;
    uint64_t rs = c->seed * 0x9e3779b97f4a7c15ull + 12345;
    float *rows = NULL;
    int32_t *perm = NULL;

    d->q = malloc((nq ? nq : 1) * CUDA_ATTN_DQK * sizeof(float));
    d->kv = malloc((size_t)d->kv_rows * d->row_bytes);
    d->kv_bf16 = malloc((size_t)d->kv_rows * CUDA_ATTN_DQK * 2);
    d->idx = malloc(((size_t)c->n_seq * c->topk + 1) * sizeof(int32_t));
    d->ref_out = calloc((nq ? nq : 1) * CUDA_ATTN_DV, sizeof(float));
    d->ref_lse = calloc(nq ? nq : 1, sizeof(float));
    d->ref_pabs = calloc((nq ? nq : 1) * CUDA_ATTN_DV, sizeof(float));
    d->ref_done = calloc((size_t)c->n_seq + 1, 1);
    rows = malloc((size_t)d->kv_rows * CUDA_ATTN_DQK * sizeof(float));
    perm = malloc((size_t)ctx * sizeof(int32_t));
    if (!d->q || !d->kv || !d->kv_bf16 || !d->idx || !d->ref_out || !d->ref_lse || !d->ref_pabs || !d->ref_done || !rows || !perm)
        goto fail;

    /* q (N, H, 576) */
    for (size_t i = 0; i < nq * CUDA_ATTN_DQK; i++) {
        float x = rng_sym(&rs);
        d->q[i] = c->q_fp32 ? x : bf16_to_f32(f32_to_bf16(d->c.q_amp * x));
    }
    /* pool rows: U[-1, 1), then the layout's exact values */
    for (size_t i = 0; i < (size_t)d->kv_rows * CUDA_ATTN_DQK; i++)
        rows[i] = rng_sym(&rs);
    if (c->layout == CUDA_KV_BF16) {
        for (size_t i = 0; i < (size_t)d->kv_rows * CUDA_ATTN_DQK; i++)
            d->kv_bf16[i] = f32_to_bf16(rows[i]);
        memcpy(d->kv, d->kv_bf16, (size_t)d->kv_rows * CUDA_ATTN_DQK * 2);
    } else {
        /* per (row, 128-dim group) a different power-of-two range, so the four
         * scales of a row differ (with U[-1, 1) in every group they would all be
         * 2^-8 and a kernel reading the wrong group's scale would still pass) */
        for (int64_t r = 0; r < d->kv_rows; r++)
            for (int e = 0; e < CUDA_ATTN_DV; e++)
                rows[(size_t)r * CUDA_ATTN_DQK + e] *= ldexpf(1.0f, -(int)((e / 128 + r) % 4));
        cuda_kv_quantize_fp8(rows, d->kv_rows, d->kv);
        cuda_kv_dequantize_fp8(d->kv, d->kv_rows, d->kv_bf16);
    }
    /* idx: sequence n picks distinct rows of its own region [n*ctx, (n+1)*ctx) */
    for (int n = 0; n < c->n_seq; n++) {
        int32_t *row = d->idx + (size_t)n * c->topk;
        for (int64_t i = 0; i < ctx; i++)
            perm[i] = (int32_t)(n * ctx + i);
        for (int j = 0; j < c->topk; j++) { /* partial Fisher-Yates */
            int64_t k = j + (int64_t)(rng_next(&rs) % (uint64_t)(ctx - j));
            int32_t tmp = perm[j];
            perm[j] = perm[k];
            perm[k] = tmp;
            row[j] = perm[j];
        }
        if (c->all_invalid) {
            for (int j = 0; j < c->topk; j++)
                row[j] = -1;
        } else if (c->ragged) {
            /* valid count: some sequences none, some full, the rest random */
            uint64_t r = rng_next(&rs) % 8;
            int valid = r == 0 ? 0 : r == 1 ? c->topk : (int)(rng_next(&rs) % (uint64_t)(c->topk + 1));
            int invalid = c->topk - valid;
            for (int k = 0; k < invalid; k++) { /* invalidate random positions */
                int j;
                do
                    j = (int)(rng_next(&rs) % (uint64_t)c->topk);
                while (row[j] < 0 || row[j] >= d->kv_rows);
                row[j] = (rng_next(&rs) % 16 == 0) ? (int32_t)d->kv_rows : -1; /* out of range: skipped too */
            }
        }
    }
    for (size_t i = 0; i < (size_t)d->kv_rows * CUDA_ATTN_DQK; i++)
        d->kv_absmax = fmaxf(d->kv_absmax, fabsf(bf16_to_f32(d->kv_bf16[i])));
    free(rows);
    free(perm);
    return 0;
fail:
    free(rows);
    free(perm);
    cac_free(d);
    return -1;
}

static int entry_valid(const cac_data *d, int32_t r)
{
    return r >= 0 && r < d->kv_rows;
}

/* cac_ref_range, and when pabs_h is not NULL also pabs_h (H, 512):
 * sum_j p_j |v_j[e]| (p the softmax weights), the scale of what rounding P
 * to bf16 can move out[e] (cac_compare's perr). */
static int ref_range(const cac_data *d, int n, int j0, int j1, float *out_h, float *lse_h, float *pabs_h)
{
    const int H = d->c.heads;
    int32_t *cidx = malloc(((size_t)(j1 > j0 ? j1 - j0 : 0) + 1) * sizeof(int32_t));
    if (!cidx)
        return -1;
    int k = 0;
    for (int j = j0; j < j1; j++) {
        int32_t r = d->idx[(size_t)n * d->c.topk + j];
        if (entry_valid(d, r))
            cidx[k++] = r;
    }
    attn_seq sq = {.kv = d->kv_bf16, .idx = cidx, .k = k};
    attn_batch b = {.n_seq = 1, .heads = H, .scale = d->scale,
                    .q = d->q + (size_t)n * H * CUDA_ATTN_DQK, .seq = &sq, .out = out_h};
    int rc = attn_decode_ref(&b);
    /* LSE, double: log sum_j exp(s_j) = smax + log sum_j exp(s_j - smax) */
    for (int h = 0; rc == 0 && h < H; h++) {
        const float *q = d->q + ((size_t)n * H + h) * CUDA_ATTN_DQK;
        double smax = -INFINITY, sum = 0;
        double *s = malloc(((size_t)k + 1) * sizeof *s);
        if (!s) {
            rc = -1;
            break;
        }
        for (int j = 0; j < k; j++) {
            const uint16_t *kv = d->kv_bf16 + (size_t)cidx[j] * CUDA_ATTN_DQK;
            double dot = 0;
            for (int e = 0; e < CUDA_ATTN_DQK; e++)
                dot += (double)q[e] * (double)bf16_to_f32(kv[e]);
            s[j] = dot * (double)d->scale;
            if (s[j] > smax)
                smax = s[j];
        }
        for (int j = 0; j < k; j++)
            sum += exp(s[j] - smax);
        lse_h[h] = k ? (float)(smax + log(sum)) : -INFINITY;
        if (pabs_h) {
            double acc[CUDA_ATTN_DV] = {0};
            for (int j = 0; j < k; j++) {
                const uint16_t *kv = d->kv_bf16 + (size_t)cidx[j] * CUDA_ATTN_DQK;
                double p = exp(s[j] - smax) / sum;
                for (int e = 0; e < CUDA_ATTN_DV; e++)
                    acc[e] += p * fabs((double)bf16_to_f32(kv[e]));
            }
            for (int e = 0; e < CUDA_ATTN_DV; e++)
                pabs_h[(size_t)h * CUDA_ATTN_DV + e] = (float)acc[e];
        }
        free(s);
    }
    free(cidx);
    return rc ? -1 : 0;
}

int cac_ref_range(const cac_data *d, int n, int j0, int j1, float *out_h, float *lse_h)
{
    return ref_range(d, n, j0, j1, out_h, lse_h, NULL);
}

int cac_reference(cac_data *d, const int *seqs, int n_seqs)
{
    int cnt = seqs ? n_seqs : d->c.n_seq;
    for (int i = 0; i < cnt; i++) {
        int n = seqs ? seqs[i] : i;
        if (d->ref_done[n])
            continue;
        size_t o = (size_t)n * d->c.heads;
        if (ref_range(d, n, 0, d->c.topk, d->ref_out + o * CUDA_ATTN_DV, d->ref_lse + o,
                      d->ref_pabs + o * CUDA_ATTN_DV) != 0)
            return -1;
        d->ref_done[n] = 1;
    }
    return 0;
}

long cac_compare(const cac_data *d, const float *got, const float *got_lse, const int *seqs, int n_seqs,
                 char *msg, size_t msglen)
{
    const int H = d->c.heads;
    const double rtol = 2.01 / 128, atol = 1e-3, lse_rtol = 8.0 / 65536, lse_atol = 1e-5;
    const double p_unit = 1.0 / 256; /* bf16 unit roundoff 2^-8: the tiled kernel's P */
    int cnt = seqs ? n_seqs : d->c.n_seq;
    long bad = 0;
    double worst_out = 0, worst_lse = 0; /* error / tolerance */
    if (msg && msglen)
        msg[0] = 0;
    const float kmax = d->kv_absmax;
    for (int i = 0; i < cnt; i++) {
        int n = seqs ? seqs[i] : i;
        if (!d->ref_done[n]) {
            bad++;
            if (msg && !msg[0])
                snprintf(msg, msglen, "seq %d: no reference computed", n);
            continue;
        }
        int any_valid = 0;
        for (int j = 0; j < d->c.topk; j++)
            any_valid |= entry_valid(d, d->idx[(size_t)n * d->c.topk + j]);
        for (int h = 0; h < H; h++) {
            size_t r = (size_t)n * H + h;
            const float *g = got + r * CUDA_ATTN_DV, *w = d->ref_out + r * CUDA_ATTN_DV;
            const float *pa = d->ref_pabs + r * CUDA_ATTN_DV;
            for (int e = 0; e < CUDA_ATTN_DV; e++) {
                double tol = any_valid ? atol + rtol * fabs((double)w[e]) + p_unit * (double)pa[e] : 0.0;
                double err = fabs((double)g[e] - (double)w[e]);
                int ok = !isnan(g[e]) && err <= tol; /* NaN never passes */
                if (tol > 0 && err / tol > worst_out)
                    worst_out = err / tol;
                if (!ok) {
                    if (msg && !msg[0])
                        snprintf(msg, msglen, "out[n=%d][h=%d][%d] = %.9g, ref %.9g (tol %.3g)", n, h, e,
                                 (double)g[e], (double)w[e], tol);
                    bad++;
                }
            }
            if (!got_lse)
                continue;
            const float *q = d->q + r * CUDA_ATTN_DQK;
            double qerr = 0;
            for (int e = 0; e < CUDA_ATTN_DQK; e++)
                qerr += fabs((double)q[e] - (double)bf16_to_f32(f32_to_bf16(q[e])));
            qerr *= (double)d->scale * kmax;
            double gl = got_lse[r], wl = d->ref_lse[r];
            int ok;
            if (!any_valid) {
                ok = isinf(gl) && gl < 0;
            } else {
                double tol = lse_rtol * fabs(wl) + lse_atol + qerr;
                double err = fabs(gl - wl);
                ok = !isnan(gl) && err <= tol;
                if (err / tol > worst_lse)
                    worst_lse = err / tol;
            }
            if (!ok) {
                if (msg && !msg[0])
                    snprintf(msg, msglen, "lse[n=%d][h=%d] = %.9g, ref %.9g", n, h, gl, wl);
                bad++;
            }
        }
    }
    if (msg && msglen) {
        size_t len = strlen(msg);
        snprintf(msg + len, msglen - len, "%sworst err/tol: out %.3f, lse %.3f", len ? "; " : "", worst_out,
                 worst_lse);
    }
    return bad;
}
