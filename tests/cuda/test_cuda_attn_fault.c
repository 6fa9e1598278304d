/* test_cuda_attn_fault.c: the tiled kernel's testing faults (cuda_attn.h
 * CUDA_ATTN_FAULT_*) are wrong in exactly the documented way, and only when
 * asked for. On one seeded case (N = 2, H = 20: 32-head blocks with padded
 * heads, k = 192: 12 tiles, all entries valid), both KV layouts, unsplit and
 * split-k:
 *   - healthy tiled passes the reference check (cuda_attn_check.h) and stays
 *     within it of naive;
 *   - skip_last_tile fails the check, and matches the reference over the
 *     entries before the last tile (j < 176) far better than the whole one;
 *   - swap_heads fails the check; unsplit it matches its own closed form,
 *     out[h] = ref[h^1] * l[h^1] / l[h] (h's output from h^1's accumulator
 *     over h's own sum, l[h] = exp(lse[h] - max score of h));
 *   - naive and v2 refuse a fault (cudaErrorInvalidValue): the reference
 *     path cannot be made faulty.
 * Without a device: "SKIP: <reason>", exit 77; under cuemu it runs on the
 * CPU (test_cuda_attn_fault_cuemu). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_attn.h"
#include "cuda_attn_check.h"
#include "testutil.h"

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#define F_N 2
#define F_H 20
#define F_K 192
#define F_SPLIT_SMS 132 /* plans 3 splits of 4 tiles at this shape */

typedef struct dev_bufs {
    float *q, *out, *lse;
    uint8_t *kv;
    int32_t *idx;
    void *ws;
    size_t ws_bytes;
} dev_bufs;

/* Run kind with fault on sm_count's plan; out (N, H, 512) back on the host.
 * The launch's return code. */
static int run(const cac_data *d, const dev_bufs *g, cuda_attn_kind kind, int fault, int sm_count,
               float *out, float *lse)
{
    size_t rows = (size_t)F_N * F_H;
    CK(cudaMemset(g->out, 0xff, rows * CUDA_ATTN_DV * sizeof(float)));
    cuda_attn_args a = {.n_seq = F_N, .heads = F_H, .topk = F_K, .scale = d->scale, .layout = d->c.layout,
                        .q = g->q, .kv = g->kv, .kv_rows = d->kv_rows, .idx = g->idx, .out = g->out,
                        .lse = g->lse, .ws = g->ws, .ws_bytes = g->ws_bytes, .fault = fault};
    int rc = cuda_attn_decode(kind, &a, sm_count, NULL);
    if (rc != 0)
        return rc;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out, g->out, rows * CUDA_ATTN_DV * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse, g->lse, rows * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        m = x > m || isnan(x) ? x : m;
    }
    return m;
}

/* max_j scale * q_h . k_j over sequence n's entries: the running max the
 * kernel's softmax ends with (its l is relative to it). */
static double max_score(const cac_data *d, int n, int h)
{
    const float *q = d->q + ((size_t)n * F_H + h) * CUDA_ATTN_DQK;
    double best = -INFINITY;
    for (int j = 0; j < F_K; j++) {
        const uint16_t *row = d->kv_bf16 + (size_t)d->idx[(size_t)n * F_K + j] * CUDA_ATTN_DQK;
        double s = 0;
        for (int e = 0; e < CUDA_ATTN_DQK; e++) {
            uint32_t bits = (uint32_t)row[e] << 16;
            float v;
            memcpy(&v, &bits, sizeof v);
            s += (double)q[e] * v;
        }
        best = s * d->scale > best ? s * d->scale : best;
    }
    return best;
}

/* The expected output of each fault from the double reference: skip is the
 * reference over the entries before the last tile; swap (unsplit) is
 * acc[h^1] / l[h] = ref[h^1] * l[h^1] / l[h], with l[h] = exp(lse[h] - m[h]). */
static void expected(const cac_data *d, int fault, float *want)
{
    const size_t hv = (size_t)F_H * CUDA_ATTN_DV;
    float lse_h[F_H];
    for (int n = 0; n < F_N; n++) {
        float *w = want + (size_t)n * hv;
        if (fault == CUDA_ATTN_FAULT_SKIP_LAST_TILE) {
            CHECK(cac_ref_range(d, n, 0, F_K - CUDA_ATTN_TILE_ROWS, w, lse_h) == 0, "reference range");
            continue;
        }
        for (int h = 0; h < F_H; h++) {
            int src = (h ^ 1) < F_H ? h ^ 1 : h;
            const float *lse = d->ref_lse + (size_t)n * F_H;
            double s = exp(((double)lse[src] - max_score(d, n, src)) - ((double)lse[h] - max_score(d, n, h)));
            for (int e = 0; e < CUDA_ATTN_DV; e++)
                w[(size_t)h * CUDA_ATTN_DV + e] = (float)(d->ref_out[((size_t)n * F_H + src) * CUDA_ATTN_DV + e] * s);
        }
    }
}

/* Healthy and both faults on one plan (sm_count); naive's output given. */
static void check_plan(const cac_data *d, const dev_bufs *g, int sm_count, const float *naive, float *out,
                       float *lse, float *want, const char *tag)
{
    const size_t total = (size_t)F_N * F_H * CUDA_ATTN_DV;
    char msg[512];
    CHECK(run(d, g, CUDA_ATTN_TILED, CUDA_ATTN_FAULT_NONE, sm_count, out, lse) == 0, "%s: healthy launch", tag);
    long bad = cac_compare(d, out, lse, NULL, 0, msg, sizeof msg);
    double healthy_vs_naive = max_abs_diff(out, naive, total);
    CHECK(bad == 0, "%s: healthy tiled: %ld bad elements: %s", tag, bad, msg);
    printf("  %-26s healthy: 0 bad elements, max |tiled - naive| %.3g\n", tag, healthy_vs_naive);
    static const char *const names[] = {"", "skip_last_tile", "swap_heads"};
    for (int f = CUDA_ATTN_FAULT_SKIP_LAST_TILE; f <= CUDA_ATTN_FAULT_SWAP_HEADS; f++) {
        CHECK(run(d, g, CUDA_ATTN_TILED, f, sm_count, out, lse) == 0, "%s %s: launch", tag, names[f]);
        bad = cac_compare(d, out, lse, NULL, 0, msg, sizeof msg);
        double vs_naive = max_abs_diff(out, naive, total);
        CHECK(bad > 0, "%s %s: the faulty kernel passed the reference check", tag, names[f]);
        CHECK(vs_naive > 10 * healthy_vs_naive && vs_naive > 1e-2,
              "%s %s: max |faulty - naive| %.3g, not 10x healthy's %.3g", tag, names[f], vs_naive,
              healthy_vs_naive);
        double vs_bug = -1;
        if (f == CUDA_ATTN_FAULT_SKIP_LAST_TILE || sm_count == 1) {
            expected(d, f, want);
            vs_bug = max_abs_diff(out, want, total);
            CHECK(vs_bug < 0.1 * vs_naive, "%s %s: max |faulty - its closed form| %.3g vs %.3g from naive", tag,
                  names[f], vs_bug, vs_naive);
        }
        printf("  %-26s %-14s %ld bad elements, max |faulty - naive| %.3g, max |faulty - closed form| %.3g\n",
               tag, names[f], bad, vs_naive, vs_bug);
    }
}

static void one_layout(cuda_kv_layout layout)
{
    cac_case c = {.n_seq = F_N, .heads = F_H, .topk = F_K, .layout = layout, .seed = 41 + (uint64_t)layout};
    cac_data d;
    if (cac_make(&c, &d) != 0 || cac_reference(&d, NULL, 0) != 0) {
        CHECK(0, "inputs/reference (out of memory)");
        return;
    }
    const size_t rows = (size_t)F_N * F_H, total = rows * CUDA_ATTN_DV;
    dev_bufs g = {0};
    CK(cudaMalloc((void **)&g.q, rows * CUDA_ATTN_DQK * sizeof(float)));
    CK(cudaMalloc((void **)&g.out, total * sizeof(float)));
    CK(cudaMalloc((void **)&g.lse, rows * sizeof(float)));
    CK(cudaMalloc((void **)&g.kv, (size_t)d.kv_rows * d.row_bytes));
    CK(cudaMalloc((void **)&g.idx, (size_t)F_N * F_K * sizeof(int32_t)));
    g.ws_bytes = cuda_attn_ws_bytes(CUDA_ATTN_TILED, F_N, F_H, F_K, F_SPLIT_SMS);
    if (g.ws_bytes)
        CK(cudaMalloc(&g.ws, g.ws_bytes));
    CK(cudaMemcpy(g.q, d.q, rows * CUDA_ATTN_DQK * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.kv, d.kv, (size_t)d.kv_rows * d.row_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.idx, d.idx, (size_t)F_N * F_K * sizeof(int32_t), cudaMemcpyHostToDevice));
    float *naive = malloc(total * sizeof *naive), *out = malloc(total * sizeof *out);
    float *want = malloc(total * sizeof *want), *lse = malloc(rows * sizeof *lse);
    if (!naive || !out || !want || !lse) {
        CHECK(0, "malloc");
        goto done;
    }
    CHECK(run(&d, &g, CUDA_ATTN_NAIVE, CUDA_ATTN_FAULT_NONE, 1, naive, lse) == 0, "naive launch");
    CHECK(run(&d, &g, CUDA_ATTN_NAIVE, CUDA_ATTN_FAULT_SWAP_HEADS, 1, out, lse) == (int)cudaErrorInvalidValue,
          "naive refuses a fault");
    CHECK(run(&d, &g, CUDA_ATTN_V2, CUDA_ATTN_FAULT_SKIP_LAST_TILE, 1, out, lse) == (int)cudaErrorInvalidValue,
          "v2 refuses a fault");
    CHECK(run(&d, &g, CUDA_ATTN_TILED, 3, 1, out, lse) == (int)cudaErrorInvalidValue, "an unknown fault");
    cuda_attn_plan p;
    cuda_attn_tiled_plan(F_N, F_H, F_K, F_SPLIT_SMS, layout, &p);
    CHECK(p.splits > 1, "the split plan splits (%d)", p.splits);
    char tag[64];
    snprintf(tag, sizeof tag, "%s unsplit", cuda_kv_layout_name(layout));
    check_plan(&d, &g, 1, naive, out, lse, want, tag);
    snprintf(tag, sizeof tag, "%s split%d", cuda_kv_layout_name(layout), p.splits);
    check_plan(&d, &g, F_SPLIT_SMS, naive, out, lse, want, tag);
done:
    free(naive);
    free(out);
    free(want);
    free(lse);
    cudaFree(g.q);
    cudaFree(g.out);
    cudaFree(g.lse);
    cudaFree(g.kv);
    cudaFree(g.idx);
    cudaFree(g.ws);
    cac_free(&d);
}

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device: %s (error %d)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0", (int)e);
        return TEST_SKIP;
    }
    one_layout(CUDA_KV_BF16);
    one_layout(CUDA_KV_FP8_V32);
    TEST_MAIN_END();
}
