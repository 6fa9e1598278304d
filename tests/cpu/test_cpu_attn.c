/* test_cpu_attn.c: the cpu attention kernels against the double-precision
 * reference, plus bf16 rounding and the top-k stand-in.
 *
 * Tolerance: outputs are softmax-weighted means of values in [-1, 1], so
 * their scale is 1; fp32 accumulation over k <= 2048 rows stays within about
 * 1e-6 of the double reference, and we require max |err| <= 2e-5 (a wrong
 * index, a missed rescale or a dropped tile shows up as >= 1e-3). The
 * "sharp" case has scores of tens of units: an fp32 score error grows with
 * the score's magnitude and passes straight into the softmax weights, so
 * there the bound is ATTN_TOL_SHARP = 1e-4.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu_kernels.h"
#include "testutil.h"

#define ATTN_TOL 2e-5
#define ATTN_TOL_SHARP 1e-4

static void test_bf16(void)
{
    CHECK(f32_to_bf16(1.0f) == 0x3f80, "1.0 -> 0x%04x", f32_to_bf16(1.0f));
    CHECK(f32_to_bf16(-2.0f) == 0xc000, "-2.0 -> 0x%04x", f32_to_bf16(-2.0f));
    /* ties go to even: 0x3f808000 is halfway between 0x3f80 and 0x3f81 */
    uint32_t u = 0x3f808000u, v = 0x3f818000u, w = 0x3f808001u;
    float fu, fv, fw;
    memcpy(&fu, &u, 4);
    memcpy(&fv, &v, 4);
    memcpy(&fw, &w, 4);
    CHECK(f32_to_bf16(fu) == 0x3f80, "tie down to even: 0x%04x", f32_to_bf16(fu));
    CHECK(f32_to_bf16(fv) == 0x3f82, "tie up to even: 0x%04x", f32_to_bf16(fv));
    CHECK(f32_to_bf16(fw) == 0x3f81, "above half rounds up: 0x%04x", f32_to_bf16(fw));
    CHECK(isnan(bf16_to_f32(f32_to_bf16(NAN))), "NaN stays NaN");
    CHECK(bf16_to_f32(f32_to_bf16(INFINITY)) == INFINITY, "inf stays inf");
    CHECK(bf16_to_f32(0x4049) == 3.140625f, "0x4049 -> %g", bf16_to_f32(0x4049));
    /* round trip error <= half an ulp of an 8-bit significand: 2^-8 relative */
    float worst = 0;
    for (int i = 1; i < 10000; i++) {
        float x = (float)i * 0.0137f - 60.0f;
        float e = fabsf(bf16_to_f32(f32_to_bf16(x)) - x) / fabsf(x);
        if (e > worst)
            worst = e;
    }
    CHECK(worst <= 1.0f / 256.0f && worst > 1.0f / 1024.0f, "bf16 round trip rel err %g", worst);
}

static void test_topk(void)
{
    int32_t idx[4096];
    int64_t ctxs[] = {1, 5, 100, 2048, 2049, 3000, 100000};
    int ks[] = {1, 7, 64, 2048};
    for (size_t c = 0; c < sizeof ctxs / sizeof ctxs[0]; c++)
        for (size_t kk = 0; kk < sizeof ks / sizeof ks[0]; kk++) {
            int64_t ctx = ctxs[c];
            int k = ks[kk];
            int n = cpu_topk_select(ctx, k, 42, idx);
            int want = ctx < k ? (int)ctx : k;
            CHECK(n == want, "ctx %lld k %d: n %d want %d", (long long)ctx, k, n, want);
            int ok = 1;
            for (int i = 0; i < n; i++) {
                if (idx[i] < 0 || idx[i] >= ctx || (i > 0 && idx[i] <= idx[i - 1]))
                    ok = 0;
            }
            CHECK(ok, "ctx %lld k %d: rows distinct, sorted, in range", (long long)ctx, k);
            /* the most recent n/4 rows are always selected */
            int recent = n / 4;
            CHECK(recent == 0 || idx[n - 1] == ctx - 1, "newest row selected (ctx %lld)", (long long)ctx);
            CHECK(recent == 0 || idx[n - recent] == ctx - recent, "recent window (ctx %lld k %d)",
                  (long long)ctx, k);
        }
    /* the spread part changes as the context grows, and with the seed */
    int32_t a[64], b[64], c2[64];
    cpu_topk_select(10000, 64, 42, a);
    cpu_topk_select(10001, 64, 42, b);
    cpu_topk_select(10000, 64, 43, c2);
    CHECK(memcmp(a, b, 48 * sizeof(int32_t)) != 0, "selection moves with context");
    CHECK(memcmp(a, c2, 48 * sizeof(int32_t)) != 0, "selection depends on the seed");
    cpu_topk_select(10000, 64, 42, b);
    CHECK(memcmp(a, b, sizeof a) == 0, "selection is deterministic");
    CHECK(cpu_topk_select(0, 64, 1, a) == 0 && cpu_topk_select(10, 0, 1, a) == 0, "empty cases");
}

/* One batch: N sequences with per-sequence k[n] (ragged), contexts of
 * ctx[n] rows; returns max |kernel - ref| over both kernels via *err_naive
 * and *err_tiled. shuffle != 0 hands the kernels unsorted indices. */
typedef struct case_data {
    int n, heads;
    uint16_t **kv;
    int32_t **idx;
    attn_seq *seq;
    float *q, *ref, *out;
} case_data;

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) /* NaN counts as infinitely wrong */
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static void run_case(cpu_pool *pool, attn_ws *ws, int N, int H, const int *ks, const int64_t *ctxs,
                     float qamp, int shuffle, uint64_t seed, double tol, const char *label)
{
    case_data c = {.n = N, .heads = H};
    ll_rng rng;
    ll_rng_seed(&rng, seed);
    c.kv = calloc((size_t)N, sizeof *c.kv);
    c.idx = calloc((size_t)N, sizeof *c.idx);
    c.seq = calloc((size_t)N, sizeof *c.seq);
    size_t qn = (size_t)N * H * ATTN_DQK, on = (size_t)N * H * ATTN_DV;
    c.q = malloc(qn * sizeof(float));
    c.ref = malloc(on * sizeof(float));
    c.out = malloc(on * sizeof(float));
    if (!c.kv || !c.idx || !c.seq || !c.q || !c.ref || !c.out) {
        CHECK(0, "%s: out of memory", label);
        goto done;
    }
    for (size_t i = 0; i < qn; i++)
        c.q[i] = qamp * (float)(2.0 * ll_rng_uniform(&rng) - 1.0);
    for (int n = 0; n < N; n++) {
        int64_t rows = ctxs[n] > 0 ? ctxs[n] : 1;
        c.kv[n] = malloc((size_t)rows * ATTN_ROW_BYTES);
        c.idx[n] = malloc(((size_t)ks[n] + 1) * sizeof(int32_t));
        if (!c.kv[n] || !c.idx[n]) {
            CHECK(0, "%s: out of memory", label);
            goto done;
        }
        cpu_kv_fill(c.kv[n], 0, rows, seed + (uint64_t)n);
        int k = cpu_topk_select(ctxs[n], ks[n], seed ^ (uint64_t)n, c.idx[n]);
        if (shuffle)
            for (int i = k - 1; i > 0; i--) {
                int j = (int)(ll_rng_u64(&rng) % (uint64_t)(i + 1));
                int32_t t = c.idx[n][i];
                c.idx[n][i] = c.idx[n][j];
                c.idx[n][j] = t;
            }
        c.seq[n] = (attn_seq){.kv = c.kv[n], .idx = c.idx[n], .k = k};
    }
    attn_batch b = {.n_seq = N, .heads = H, .scale = 1.0f / sqrtf((float)ATTN_DQK), .q = c.q,
                    .seq = c.seq, .out = c.ref};
    char err[256];
    CHECK(attn_batch_check(&b, err, sizeof err) == 0, "%s: batch check: %s", label, err);
    CHECK(attn_decode_ref(&b) == 0, "%s: ref", label);
    double ref_scale = 0;
    for (size_t i = 0; i < on; i++)
        if (fabs(c.ref[i]) > ref_scale)
            ref_scale = fabs(c.ref[i]);
    b.out = c.out;
    memset(c.out, 0xff, on * sizeof(float)); /* NaN: every output must be written */
    CHECK(attn_decode_naive(pool, ws, &b) == 0, "%s: naive", label);
    double en = max_abs_diff(c.out, c.ref, on);
    CHECK(en <= tol, "%s: naive max|err| %.3g (ref scale %.3g)", label, en, ref_scale);
    memset(c.out, 0xff, on * sizeof(float));
    CHECK(attn_decode_tiled(pool, ws, &b) == 0, "%s: tiled", label);
    double et = max_abs_diff(c.out, c.ref, on);
    CHECK(et <= tol, "%s: tiled max|err| %.3g (ref scale %.3g)", label, et, ref_scale);
    if (getenv("CPU_TEST_VERBOSE"))
        printf("%-34s naive %.2e tiled %.2e scale %.2f\n", label, en, et, ref_scale);
done:
    for (int n = 0; c.kv && n < N; n++) {
        free(c.kv[n]);
        free(c.idx[n]);
    }
    free(c.kv);
    free(c.idx);
    free(c.seq);
    free(c.q);
    free(c.ref);
    free(c.out);
}

static void test_kernels(int threads)
{
    char err[256];
    cpu_pool *pool = NULL;
    attn_ws *ws = attn_ws_new();
    if (cpu_pool_create(threads, &pool, err, sizeof err) != 0 || !ws) {
        CHECK(0, "pool/ws: %s", err);
        attn_ws_free(ws);
        return;
    }
    const int Hs[] = {1, 3, 16, 32, 48, 64}, Ks[] = {1, 7, 64, 100, 2048}, Ns[] = {1, 3, 8};
    uint64_t seed = 1000 + (uint64_t)threads;
    for (int hi = 0; hi < 6; hi++) /* 32 and 48: the tiled kernel's 32-head block (a tp rank) */
        for (int ki = 0; ki < 5; ki++)
            for (int ni = 0; ni < 3; ni++) {
                int H = Hs[hi], K = Ks[ki], N = Ns[ni];
                /* the double reference is the slow part: bound N·H·k */
                if ((long)N * H * K > 140000)
                    continue;
                int ks[8];
                int64_t ctxs[8];
                for (int n = 0; n < N; n++) {
                    ks[n] = K;
                    ctxs[n] = 2 * (int64_t)K + 5 + n; /* select k of more rows */
                }
                char label[96];
                snprintf(label, sizeof label, "t%d H%d k%d N%d", threads, H, K, N);
                run_case(pool, ws, N, H, ks, ctxs, 3.0f, 0, seed++, ATTN_TOL, label);
            }
    /* ragged: k from 0 to 2048 in one batch, contexts shorter than k for some */
    {
        int ks[8] = {0, 1, 7, 33, 64, 100, 500, 2048};
        int64_t ctxs[8] = {10, 1, 5, 200, 64, 1000, 300, 4096};
        run_case(pool, ws, 8, 16, ks, ctxs, 3.0f, 0, seed++, ATTN_TOL, "ragged H16 N8");
        run_case(pool, ws, 8, 3, ks, ctxs, 3.0f, 1, seed++, ATTN_TOL, "ragged H3 N8 unsorted idx");
        /* few sequences: tiled splits k (threads >= 2), and the short ones
         * leave empty splits (m = -inf) that the merge must ignore */
        int ks2[3] = {2048, 0, 5};
        int64_t ctxs2[3] = {4096, 10, 5};
        run_case(pool, ws, 3, 16, ks2, ctxs2, 3.0f, 0, seed++, ATTN_TOL, "ragged split-k H16 N3");
    }
    /* sharp softmax: scores spread over tens of units, so the running max
     * changes often and a missed rescale is visible */
    {
        int ks[3] = {2048, 100, 7};
        int64_t ctxs[3] = {3000, 100, 7};
        run_case(pool, ws, 3, 5, ks, ctxs, 60.0f, 1, seed++, ATTN_TOL_SHARP, "sharp H5 N3");
    }
    attn_ws_free(ws);
    cpu_pool_destroy(pool);
}

static void test_bad_batch(void)
{
    char err[256] = "";
    attn_batch b = {.n_seq = 1, .heads = 0};
    CHECK(attn_batch_check(&b, err, sizeof err) == LL_EINVAL && strstr(err, "heads"),
          "heads 0 rejected: %s", err);
    attn_seq s = {.kv = NULL, .idx = NULL, .k = 5};
    float q[ATTN_DQK], o[ATTN_DV];
    attn_batch b2 = {.n_seq = 1, .heads = 1, .q = q, .seq = &s, .out = o};
    CHECK(attn_batch_check(&b2, err, sizeof err) == LL_EINVAL, "k without kv rejected");
    CHECK(cpu_pool_create(0, &(cpu_pool *){NULL}, err, sizeof err) == LL_EINVAL, "0 threads rejected");
}

int main(void)
{
    test_bf16();
    test_topk();
    test_bad_batch();
    test_kernels(1);
    test_kernels(2);
    test_kernels(3);
    TEST_MAIN_END();
}
