/* test_cuda_model_host.c: the cuda backend's own per-element arithmetic,
 * run on the CPU (no GPU needed: the __host__ __device__ code the kernels
 * call, through cuda_model.h's host mirrors), against the cpu backend's:
 *   - a seeded KV row (kv_cache_fill_kernel) is cpu_kv_fill's, bit for bit,
 *     and its fp8 form is exactly cuda_kv_quantize_fp8 of those values;
 *   - a new KV row (project_q_kv_kernel) is f32_to_bf16 / the kernels' FP8
 *     quantiser of the same values;
 *   - the top-k rows (mla_topk_select_kernel) are cpu_topk_select's, offset
 *     to the slot's global rows, -1 after them, over contexts shorter and
 *     longer than k, min_ctx and capacity clamps;
 *   - the embedding is in [-1, 1), seeded, different per token.
 * What this cannot check (launch shapes, cuBLAS, events) the GPU tests do. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "cpu_kernels.h"
#include "cuda_attn.h"
#include "cuda_model.h"
#include "testutil.h"

static void test_fill_rows(void)
{
    uint16_t want[CUDA_ATTN_DQK];
    uint8_t got[1152], fp8[656], ref8[656];
    float vals[CUDA_ATTN_DQK];
    int bad16 = 0, bad8 = 0;
    for (int s = 0; s < 4; s++) {
        uint64_t seed = ll_splitmix64(1000 + (uint64_t)s);
        for (int64_t r = 0; r < 300; r += 7) {
            /* cpu_kv_fill writes row r of a (rows, 576) cache */
            uint16_t *cache = calloc((size_t)(r + 1) * CUDA_ATTN_DQK, 2);
            if (!cache) {
                CHECK(0, "out of memory");
                return;
            }
            cpu_kv_fill(cache, r, 1, seed);
            memcpy(want, cache + r * CUDA_ATTN_DQK, sizeof want);
            free(cache);
            cuda_model_host_fill_row(seed, r, CUDA_KV_BF16, got);
            bad16 += memcmp(got, want, sizeof want) != 0;
            cuda_model_host_fill_row(seed, r, CUDA_KV_FP8_V32, fp8);
            for (int j = 0; j < CUDA_ATTN_DQK; j++)
                vals[j] = bf16_to_f32(want[j]);
            cuda_kv_quantize_fp8(vals, 1, ref8);
            bad8 += memcmp(fp8, ref8, sizeof ref8) != 0;
        }
    }
    CHECK(bad16 == 0, "%d bf16 rows differ from cpu_kv_fill", bad16);
    CHECK(bad8 == 0, "%d fp8 rows differ from cuda_kv_quantize_fp8 of cpu_kv_fill's values", bad8);
}

static void test_store_row(void)
{
    float vals[CUDA_ATTN_DQK], rounded[CUDA_ATTN_DQK];
    uint8_t got[1152], ref8[656];
    uint16_t back[CUDA_ATTN_DQK];
    int bad16 = 0, bad8 = 0, badq = 0;
    uint64_t h = 7;
    for (int t = 0; t < 50; t++) {
        /* activations of assorted scales, one group all zero now and then */
        float scale = (float)(1 << (t % 9)) / 16.0f;
        for (int j = 0; j < CUDA_ATTN_DQK; j++) {
            h = ll_splitmix64(h);
            vals[j] = (t % 10 == 3 && j < 128) ? 0.0f : scale * ((float)(int32_t)(h >> 32) / 2147483648.0f);
            rounded[j] = bf16_to_f32(f32_to_bf16(vals[j]));
        }
        cuda_model_host_store_row(vals, CUDA_KV_BF16, got);
        for (int j = 0; j < CUDA_ATTN_DQK; j++) {
            uint16_t w = f32_to_bf16(vals[j]);
            bad16 += memcmp(got + 2 * j, &w, 2) != 0;
        }
        cuda_model_host_store_row(vals, CUDA_KV_FP8_V32, got);
        cuda_kv_quantize_fp8(rounded, 1, ref8);
        bad8 += memcmp(got, ref8, sizeof ref8) != 0;
        /* and what the kernels will read back is within e4m3's half step */
        cuda_kv_dequantize_fp8(got, 1, back);
        for (int j = 0; j < CUDA_ATTN_DV; j++) {
            double err = fabs((double)bf16_to_f32(back[j]) - rounded[j]);
            badq += err > fabs(rounded[j]) / 16 + scale * 1e-3;
        }
    }
    CHECK(bad16 == 0, "%d bf16 values of new KV rows differ from f32_to_bf16", bad16);
    CHECK(bad8 == 0, "%d fp8 new KV rows differ from cuda_kv_quantize_fp8", bad8);
    CHECK(badq == 0, "%d dequantised values off by more than e4m3's half step", badq);
}

static void test_topk(void)
{
    static const int64_t ctxs[] = {0, 1, 3, 50, 95, 96, 97, 300, 511, 512, 700, 5000};
    static const int ks[] = {1, 4, 96, 2048};
    static const int64_t mins[] = {0, 96};
    int32_t want[2048];
    int64_t cap = 512;
    int bad = 0, cases = 0;
    for (size_t a = 0; a < sizeof ctxs / sizeof ctxs[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
            for (size_t m = 0; m < 2; m++)
                for (int32_t slot = 0; slot < 3; slot++) {
                    uint64_t seed = 5;
                    int k = ks[b];
                    int64_t c = ctxs[a] > mins[m] ? ctxs[a] : mins[m];
                    if (c > cap)
                        c = cap;
                    int n = cpu_topk_select(c, k, ll_splitmix64(seed ^ (uint64_t)slot), want);
                    for (int j = 0; j < k; j++) {
                        int32_t w = j < n ? (int32_t)(slot * cap + want[j]) : -1;
                        bad += cuda_model_host_topk_entry(slot, ctxs[a], k, mins[m], cap, seed, j) != w;
                    }
                    cases++;
                }
    CHECK(bad == 0, "%d top-k entries differ from cpu_topk_select over %d cases", bad, cases);
}

static void test_embed(void)
{
    int in_range = 1, differ = 0, same_again = 1;
    for (int j = 0; j < 256; j++) {
        float a = bf16_to_f32(cuda_model_host_embed(3, 1, j)), b = bf16_to_f32(cuda_model_host_embed(4, 1, j));
        in_range &= a >= -1.0f && a <= 1.0f && b >= -1.0f && b <= 1.0f;
        differ += a != b;
        same_again &= cuda_model_host_embed(3, 1, j) == cuda_model_host_embed(3, 1, j);
    }
    CHECK(in_range && differ > 200 && same_again, "embedding: in [-1, 1], per token, seeded (%d differ)", differ);
}

/* cuBLAS is opened at run time (cuda_dense.cu): in a child each, since the
 * load happens once per process. A missing file is an error that names it
 * and how to point at the right one; the toolkit's file loads. */
static int cublas_child(const char *lib, char *err, size_t errlen)
{
    int fd[2];
    if (pipe(fd))
        return -2;
    pid_t pid = fork();
    if (pid == 0) {
        char e[512] = "";
        setenv("LOADLAW_CUBLAS_LIB", lib, 1);
        int rc = cuda_cublas_load(e, sizeof e);
        if (write(fd[1], e, strlen(e)) < 0)
            _exit(3);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], err, errlen - 1);
    err[n > 0 ? n : 0] = '\0';
    close(fd[0]);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -2;
    return WEXITSTATUS(st);
}

static void test_cublas_load(void)
{
    char err[512];
    int rc = cublas_child("/nonexistent/libcublas.so.99", err, sizeof err);
    CHECK(rc == 1 && strstr(err, "/nonexistent/libcublas.so.99") && strstr(err, "LOADLAW_CUBLAS_LIB") &&
              strstr(err, "LD_LIBRARY_PATH"),
          "a missing cuBLAS: %d, '%s'", rc, err);
    rc = cublas_child("libm.so.6", err, sizeof err); /* a library, but not cuBLAS */
    CHECK(rc == 1 && strstr(err, "has no cublasCreate_v2"), "not cuBLAS: %d, '%s'", rc, err);
#ifdef LOADLAW_TOOLKIT_CUBLAS
    rc = cublas_child(LOADLAW_TOOLKIT_CUBLAS, err, sizeof err);
    CHECK(rc == 0 && !err[0], "the toolkit's cuBLAS (%s) loads: %d, '%s'", LOADLAW_TOOLKIT_CUBLAS, rc, err);
#endif
}

int main(void)
{
    test_cublas_load();
    test_fill_rows();
    test_store_row();
    test_topk();
    test_embed();
    TEST_MAIN_END();
}
