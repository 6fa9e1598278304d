/* test_cuda_backend.c: eng_backend_cuda on a small configuration, through the
 * ops table the scheduler uses, on a GPU (skipped with the reason, exit 77,
 * where none answers):
 *   - phases in order, named after their kernels, inside the step;
 *   - the device's seeded KV rows and top-k rows are the cpu backend's
 *     (cpu_kv_fill, cpu_topk_select: bit-exact for kv=bf16);
 *   - one step's attention output equals attn_decode_ref (the cpu's double
 *     reference) on the same q, indices and pool copied back, naive and
 *     tiled, kv=bf16 and kv=fp8 (pool dequantised exactly);
 *   - tokens in range, the same on a rerun (seeded), mostly the same for
 *     naive and tiled (bf16 tensor-core rounding may flip a near tie);
 *   - clean errors: a bad slot, a pool that does not fit, a missing device,
 *     a refused launch (the step fails naming the CUDA error). */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "backend_cuda.h"
#include "common.h"
#include "cpu_kernels.h"
#include "cuda_attn.h"
#include "cuda_model.h"
#include "backend_script.h"
#include "testutil.h"

static void small_config(eng_config *cfg, const char *attn, const char *kv)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->attn = attn;
    cfg->kv = kv;
    cfg->heads = 16;
    cfg->topk = 96; /* not a multiple of a 64-row tile */
    cfg->max_running = 8;
    cfg->seed = 5;
    cfg->d_model = 256;
    cfg->d_ff = 1024;
    cfg->vocab = 64;
    cfg->capacity_tok = 512;
    cfg->min_ctx_tok = -1;
}

/* Copy the last step's attention inputs back and run the cpu reference on
 * them; the largest |out - ref| - tol (<= 0 passes). */
static void check_attention(void *st, const char *what)
{
    cuda_backend_view v;
    cuda_backend_view_get(st, &v);
    size_t nq = (size_t)v.n_seq * v.heads * CUDA_ATTN_DQK, no = (size_t)v.n_seq * v.heads * CUDA_ATTN_DV;
    size_t ni = (size_t)v.n_seq * v.topk, pool_b = (size_t)v.pool_rows * v.row_bytes;
    float *q = malloc(nq * 4), *out = malloc(no * 4), *ref = malloc(no * 4);
    int32_t *idx = malloc(ni * 4);
    uint8_t *pool = malloc(pool_b);
    uint16_t *bf = v.layout == CUDA_KV_BF16 ? (uint16_t *)pool : malloc((size_t)v.pool_rows * CUDA_ATTN_DQK * 2);
    attn_seq *seq = calloc((size_t)v.n_seq, sizeof *seq);
    if (!q || !out || !ref || !idx || !pool || !bf || !seq) {
        CHECK(0, "out of host memory");
        goto out;
    }
    cudaError_t e = cudaMemcpy(q, v.d_q, nq * 4, cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(out, v.d_out, no * 4, cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(idx, v.d_idx, ni * 4, cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(pool, v.d_pool, pool_b, cudaMemcpyDeviceToHost);
    CHECK(e == cudaSuccess, "%s: copy back: %s", what, cudaGetErrorString(e));
    if (e)
        goto out;
    if (v.layout == CUDA_KV_FP8_V32)
        cuda_kv_dequantize_fp8(pool, v.pool_rows, bf);
    int bad_idx = 0;
    for (int i = 0; i < v.n_seq; i++) {
        const int32_t *ix = idx + (size_t)i * v.topk;
        int k = 0;
        while (k < v.topk && ix[k] >= 0)
            k++;
        for (int j = k; j < v.topk; j++)
            bad_idx += ix[j] != -1; /* -1 pads the tail only */
        for (int j = 0; j < k; j++)
            bad_idx += ix[j] >= v.pool_rows;
        seq[i] = (attn_seq){.kv = bf, .idx = ix, .k = k}; /* global rows of the whole pool */
    }
    CHECK(bad_idx == 0, "%s: %d malformed indices", what, bad_idx);
    attn_batch ab = {.n_seq = v.n_seq, .heads = v.heads, .scale = v.scale, .q = q, .seq = seq, .out = ref};
    CHECK(attn_decode_ref(&ab) == 0, "reference");
    /* FlashMLA's bf16 tolerance: atol 1e-3 + rtol 2.01/128 */
    double worst = -1, max_err = 0;
    for (size_t j = 0; j < no; j++) {
        double err = fabs((double)out[j] - ref[j]);
        double excess = err - (1e-3 + 2.01 / 128 * fabs(ref[j]));
        if (excess > worst)
            worst = excess;
        if (err > max_err)
            max_err = err;
    }
    CHECK(worst <= 0, "%s: attention output vs attn_decode_ref: max |err| %.3g over tolerance", what, max_err);
    printf("%s: attention vs reference, %d sequences x %d heads: max |err| %.3g\n", what, v.n_seq,
           v.heads, max_err);
out:
    free(q); free(out); free(ref); free(idx); free(seq);
    if (bf != (uint16_t *)pool)
        free(bf);
    free(pool);
}

/* The pool's rows for slot 0 (history, never prefilled or decoded into past
 * row 300) and the top-k rows of the last step are the cpu backend's. */
static void check_rows_and_topk(void *st, const int *slots, const int64_t *ctx, int n)
{
    cuda_backend_view v;
    cuda_backend_view_get(st, &v);
    int64_t cap = v.pool_rows / 8;
    uint16_t *dev = malloc((size_t)cap * CUDA_ATTN_DQK * 2), *host = malloc((size_t)cap * ATTN_ROW_BYTES);
    int32_t *idx = malloc((size_t)n * v.topk * 4), *want = malloc((size_t)v.topk * 4);
    if (!dev || !host || !idx || !want) {
        CHECK(0, "out of host memory");
        goto out;
    }
    cudaError_t e = cudaMemcpy(dev, v.d_pool, (size_t)cap * v.row_bytes, cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(idx, v.d_idx, (size_t)n * v.topk * 4, cudaMemcpyDeviceToHost);
    CHECK(e == cudaSuccess, "copy back: %s", cudaGetErrorString(e));
    if (e)
        goto out;
    cpu_kv_fill(host, 0, cap, ll_splitmix64(5 ^ 0ull));
    int diff = 0;
    for (int64_t r = 400; r < cap; r++) /* rows 0..~60 were prefilled, ~40..50 decoded */
        diff += memcmp(dev + r * CUDA_ATTN_DQK, host + r * ATTN_DQK, ATTN_ROW_BYTES) != 0;
    CHECK(diff == 0, "slot 0 history rows 400..%lld: %d differ from cpu_kv_fill", (long long)cap - 1, diff);
    int tdiff = 0;
    for (int i = 0; i < n; i++) {
        int64_t c = ctx[i] > v.topk ? ctx[i] : v.topk; /* min_ctx = topk */
        if (c > cap)
            c = cap;
        int k = cpu_topk_select(c, v.topk, ll_splitmix64(5 ^ (uint64_t)slots[i]), want);
        for (int j = 0; j < v.topk; j++) {
            int32_t w = j < k ? (int32_t)(slots[i] * cap + want[j]) : -1;
            tdiff += idx[(size_t)i * v.topk + j] != w;
        }
    }
    CHECK(tdiff == 0, "top-k rows: %d differ from cpu_topk_select", tdiff);
out:
    free(dev); free(host); free(idx); free(want);
}

#define STEPS SCRIPT_STEPS
#define SLOTS SCRIPT_SLOTS
static int run_script(const char *attn, const char *kv, int tokens[STEPS][SLOTS], int checks)
{
    eng_config cfg;
    small_config(&cfg, attn, kv);
    void *st = NULL;
    char err[512] = "";
    char what[64];
    snprintf(what, sizeof what, "attn=%s kv=%s", attn, kv);
    int rc = eng_backend_cuda.create(&cfg, &st, err, sizeof err);
    CHECK(rc == 0, "create %s: %s", what, err);
    if (rc != 0)
        return rc;
    for (int s = 0; s < STEPS; s++) {
        script_step sk;
        eng_batch b;
        script_batch(s, &sk, &b);
        eng_phase ph[ENG_MAX_PHASES];
        int nph = -1;
        int64_t t0 = ll_now_ns();
        rc = eng_backend_cuda.step(st, &b, t0, ph, &nph);
        int64_t t1 = ll_now_ns();
        CHECK(rc == 0, "%s step %d rc %d (%s)", what, s, rc,
              eng_backend_cuda.last_error ? eng_backend_cuda.last_error(st) : "");
        if (checks) {
            const char *an = strcmp(attn, "tiled") == 0 ? "mla_decode_tiled_kernel"
                             : strcmp(attn, "v2") == 0  ? "mla_decode_v2_kernel"
                                                        : "mla_decode_naive_kernel";
            const char *dec[] = {CUDA_K_EMBED, CUDA_K_GEMM, CUDA_K_PROJECT, CUDA_K_TOPK, an,
                                 CUDA_K_LOGITS, CUDA_K_SAMPLE};
            int off = (s == 0 || s == 3) ? 1 : 0, nw = s == 0 ? 1 : 7 + off;
            CHECK(nph == nw, "%s step %d: %d phases, want %d", what, s, nph, nw);
            for (int i = 0; i < nph && i < nw; i++) {
                const char *w = (off && i == 0) ? CUDA_K_FILL : dec[i - off];
                CHECK(strcmp(ph[i].name, w) == 0, "step %d phase %d is %s, want %s", s, i, ph[i].name, w);
                CHECK(ph[i].start_ns >= t0 && ph[i].dur_ns >= 0 && ph[i].start_ns + ph[i].dur_ns <= t1,
                      "step %d phase %s inside the step", s, ph[i].name);
                CHECK(i == 0 || ph[i].start_ns >= ph[i - 1].start_ns + ph[i - 1].dur_ns,
                      "step %d phase %s after the previous one", s, ph[i].name);
            }
            if (s == 2)
                check_attention(st, what);
            if (s == 2 && strcmp(kv, "bf16") == 0)
                check_rows_and_topk(st, sk.dslot, sk.dctx, SLOTS);
        }
        for (int k = 0; k < SLOTS; k++)
            tokens[s][k] = cuda_backend_token(st, k);
    }
    eng_backend_cuda.release(st, 1);
    CHECK(cuda_backend_token(st, 1) == 0, "released slot reset");
    CHECK(cuda_backend_token(st, 99) == -1, "slot out of range");
    int bad_slot = 8;
    int64_t bad_ctx = 10;
    eng_batch bad = {.n_decode = 1, .decode_slot = &bad_slot, .decode_ctx = &bad_ctx};
    eng_phase ph[ENG_MAX_PHASES];
    int nph = 0;
    CHECK(eng_backend_cuda.step(st, &bad, ll_now_ns(), ph, &nph) == LL_ERANGE, "slot 8 of 8 rejected");
    /* a refused batch is not a device failure: the backend still steps */
    int ok_slot = 0;
    int64_t ok_ctx = 60;
    eng_batch ok = {.n_decode = 1, .decode_slot = &ok_slot, .decode_ctx = &ok_ctx};
    CHECK(eng_backend_cuda.step(st, &ok, ll_now_ns(), ph, &nph) == 0 && nph == 7, "steps after a refused batch");
    eng_backend_cuda.destroy(st);
    return 0;
}

static void test_errors(void)
{
    eng_config cfg;
    void *st = NULL;
    char err[512] = "";
    small_config(&cfg, "fast", "bf16");
    CHECK(eng_backend_cuda.create(&cfg, &st, err, sizeof err) == LL_EINVAL && st == NULL &&
          strstr(err, "naive or tiled"), "attn=fast rejected: %s", err);
    small_config(&cfg, "tiled", "fp4");
    CHECK(eng_backend_cuda.create(&cfg, &st, err, sizeof err) == LL_EINVAL && strstr(err, "bf16 or fp8"),
          "kv=fp4 rejected: %s", err);
    small_config(&cfg, "tiled", "bf16");
    cfg.device = 99;
    CHECK(eng_backend_cuda.create(&cfg, &st, err, sizeof err) != 0 && st == NULL && strstr(err, "device=99"),
          "device 99 rejected: %s", err);
    /* a refused launch (fault_fail_step) fails the step with the CUDA error,
     * and every later step at once; destroy still cleans up */
    small_config(&cfg, "tiled", "bf16");
    cfg.fault_fail_step = 1;
    st = NULL;
    if (eng_backend_cuda.create(&cfg, &st, err, sizeof err) == 0) {
        int slot = 0, tok = 5, nph = 0;
        eng_phase ph[ENG_MAX_PHASES];
        eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &tok, .prefill_tok_total = 5};
        CHECK(eng_backend_cuda.step(st, &b, ll_now_ns(), ph, &nph) == LL_EIO, "the faulty step fails");
        const char *why = eng_backend_cuda.last_error(st);
        CHECK(why && strstr(why, "cudaErrorInvalidConfiguration"), "last_error: %s", why ? why : "(none)");
        CHECK(eng_backend_cuda.step(st, &b, ll_now_ns(), ph, &nph) == LL_EIO, "and every later one");
        eng_backend_cuda.destroy(st);
    } else {
        CHECK(0, "create with fault_fail_step: %s", err);
    }
    /* 65535 slots x 32768 rows x 1152 B = 2.4 TB: refused before any allocation */
    small_config(&cfg, "tiled", "bf16");
    cfg.max_running = 65535;
    cfg.capacity_tok = 32768;
    err[0] = '\0';
    CHECK(eng_backend_cuda.create(&cfg, &st, err, sizeof err) == LL_ENOMEM && st == NULL &&
          strstr(err, "MiB") && strstr(err, "max_running"), "a pool that does not fit: %s", err);
}

int main(void)
{
    char why[400];
    if (cuda_backend_probe(0, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return TEST_SKIP;
    }
    int tn[STEPS][SLOTS], tt[STEPS][SLOTS], tt2[STEPS][SLOTS], tf[STEPS][SLOTS], tfn[STEPS][SLOTS];
    int tv[STEPS][SLOTS], tvf[STEPS][SLOTS];
    run_script("naive", "bf16", tn, 1);
    run_script("tiled", "bf16", tt, 1);
    run_script("tiled", "bf16", tt2, 0);
    run_script("tiled", "fp8", tf, 1);
    run_script("naive", "fp8", tfn, 1);
    run_script("v2", "bf16", tv, 1);
    run_script("v2", "fp8", tvf, 1);
    int same2 = 1, agree = 0, total = 0, in_range = 1, varied = 0;
    for (int s = 1; s < STEPS; s++)
        for (int k = 0; k < SLOTS; k++) {
            same2 &= tt[s][k] == tt2[s][k];
            agree += tn[s][k] == tt[s][k];
            total++;
            in_range &= tt[s][k] >= 0 && tt[s][k] < 64 && tf[s][k] >= 0 && tf[s][k] < 64 &&
                        tn[s][k] >= 0 && tn[s][k] < 64;
            varied |= tt[s][k] != tt[1][0];
        }
    CHECK(in_range, "tokens in vocab");
    CHECK(same2, "a rerun samples the same tokens (seeded)");
    CHECK(varied, "tokens vary across slots and steps");
    CHECK(agree * 10 >= total * 8, "naive and tiled agree on %d of %d tokens", agree, total);
    int agree_v2 = 0, agree_v2f = 0;
    for (int s = 1; s < STEPS; s++)
        for (int k = 0; k < SLOTS; k++) {
            agree_v2 += tv[s][k] == tt[s][k];
            agree_v2f += tvf[s][k] == tf[s][k];
        }
    CHECK(agree_v2 * 10 >= total * 8 && agree_v2f * 10 >= total * 8,
          "v2 agrees with tiled on %d (bf16) and %d (fp8) of %d tokens", agree_v2, agree_v2f, total);
    test_errors();
    TEST_MAIN_END();
}
