/* test_cuda_kv_host.c: the CUDA attention's host side, checked on the CPU
 * (no GPU, no CUDA runtime): KV layouts, FP8 quantise/dequantise, traffic
 * and FLOP counters, the tiled kernel's split-k plan, the combine kernel's
 * host emulation against the double reference, and the reference check
 * itself (it must reject a wrong value, a NaN and a non-zero empty output). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_attn.h"
#include "cuda_attn_check.h"
#include "cuda_fp8_toolkit.h"
#include "cpu_kernels.h"
#include "testutil.h"

static void test_layouts(void)
{
    CHECK(cuda_kv_row_bytes(CUDA_KV_BF16) == 1152, "bf16 row %zu", cuda_kv_row_bytes(CUDA_KV_BF16));
    CHECK(cuda_kv_row_bytes(CUDA_KV_FP8_V32) == 656, "fp8 row %zu", cuda_kv_row_bytes(CUDA_KV_FP8_V32));
    CHECK(cuda_kv_row_bytes((cuda_kv_layout)7) == 0, "unknown layout");
    CHECK(strcmp(cuda_kv_layout_name(CUDA_KV_BF16), "bf16") == 0, "name");
    CHECK(strcmp(cuda_kv_layout_name(CUDA_KV_FP8_V32), "fp8") == 0, "name");
    CHECK(cuda_kv_layout_name((cuda_kv_layout)7) == NULL, "unknown name");
    int n = 0;
    const char *const *names = cuda_attn_kernel_names(CUDA_ATTN_TILED, &n);
    CHECK(n == 2 && strcmp(names[0], "mla_decode_tiled_kernel") == 0 &&
              strcmp(names[1], "mla_decode_combine_kernel") == 0, "tiled names");
    names = cuda_attn_kernel_names(CUDA_ATTN_NAIVE, &n);
    CHECK(n == 1 && strcmp(names[0], "mla_decode_naive_kernel") == 0, "naive names");
}

static float rd_scale(const uint8_t *row, int g)
{
    float s;
    memcpy(&s, row + 512 + 4 * g, 4);
    return s;
}

/* e4m3 values: every finite code, decoded independently of cuda_kv_host.c */
static float e4m3_value(int code)
{
    int e = (code >> 3) & 15, m = code & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
    return (code & 0x80) ? -v : v;
}

static void test_fp8(void)
{
    float row[CUDA_ATTN_DQK];
    uint8_t q[656];
    uint16_t back[CUDA_ATTN_DQK];

    /* 1. representable values round-trip exactly: group g holds e4m3 codes
     *    times 2^(g-3); each group's max is 448 * 2^(g-3), so the scale must
     *    be exactly 2^(g-3) */
    for (int d = 0; d < 512; d++) {
        int g = d / 128, code = d % 128;
        if (code == 0x7f)
            code = 0x7e; /* 0x7f is NaN */
        if (d % 128 == 5)
            code = 0x7e; /* make sure 448 is present */
        float v = e4m3_value(code | ((d & 1) ? 0x80 : 0));
        row[d] = ldexpf(v, g - 3);
    }
    for (int d = 512; d < CUDA_ATTN_DQK; d++)
        row[d] = bf16_to_f32(f32_to_bf16((float)(d - 540) / 7.0f));
    cuda_kv_quantize_fp8(row, 1, q);
    cuda_kv_dequantize_fp8(q, 1, back);
    int exact = 1;
    for (int d = 0; d < CUDA_ATTN_DQK; d++)
        if (bf16_to_f32(back[d]) != row[d]) {
            exact = 0;
            CHECK(0, "dim %d: %.9g -> %.9g", d, (double)row[d], (double)bf16_to_f32(back[d]));
            break;
        }
    CHECK(exact, "round trip of representable values");
    for (int g = 0; g < 4; g++)
        CHECK(rd_scale(q, g) == ldexpf(1.0f, g - 3), "group %d scale %.9g", g, (double)rd_scale(q, g));

    /* 2. scale choice: smallest power of two with max|x|/scale <= 448 */
    const float amax[4] = {448.0f, 449.0f, 1.0f, 0.0f};
    const float want[4] = {1.0f, 2.0f, 1.0f / 256, 1.0f};
    memset(row, 0, sizeof row);
    for (int g = 0; g < 4; g++)
        row[g * 128 + 3] = -amax[g];
    cuda_kv_quantize_fp8(row, 1, q);
    for (int g = 0; g < 4; g++)
        CHECK(rd_scale(q, g) == want[g], "amax %g: scale %.9g want %.9g", (double)amax[g],
              (double)rd_scale(q, g), (double)want[g]);
    cuda_kv_dequantize_fp8(q, 1, back);
    CHECK(bf16_to_f32(back[3]) == -448.0f, "448 exact");
    CHECK(bf16_to_f32(back[128 + 3]) == -448.0f, "449 -> 448 (scale 2, 224.5 -> 224)");
    CHECK(bf16_to_f32(back[256 + 3]) == -1.0f, "1.0 exact");
    CHECK(bf16_to_f32(back[384 + 3]) == 0.0f, "zero group");

    /* 3. random values: error <= half an e4m3 step (relative 2^-4 for normals,
     *    absolute 2^-10 * scale for subnormals), dequantised value exact in bf16
     *    (the quantiser's own decode equals an independent one) */
    uint64_t s = 99;
    int within = 1, decode_ok = 1;
    for (int rep = 0; rep < 200; rep++) {
        for (int d = 0; d < CUDA_ATTN_DQK; d++) {
            s = ll_splitmix64(s);
            row[d] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1) * (rep % 7 + 1) * 0.37f;
        }
        cuda_kv_quantize_fp8(row, 1, q);
        cuda_kv_dequantize_fp8(q, 1, back);
        for (int d = 0; d < 512; d++) {
            float sc = rd_scale(q, d / 128);
            float deq = bf16_to_f32(back[d]);
            if (deq != e4m3_value(q[d]) * sc)
                decode_ok = 0;
            double err = fabs((double)deq - row[d]);
            if (err > fmax(fabs(row[d]) / 16.0, ldexp(sc, -10)) * 1.0000001)
                within = 0;
        }
    }
    CHECK(within, "fp8 quantisation error within half a step");
    CHECK(decode_ok, "dequantised values = e4m3 value * scale exactly");

    /* 4. the device's decode (the toolkit's definition) agrees with ours on
     *    every finite code */
    int agree = 1;
    for (int code = 0; code < 256; code++) {
        if ((code & 0x7f) == 0x7f)
            continue; /* NaN */
        float tk = cuda_fp8_toolkit_e4m3_to_f32((uint8_t)code);
        if (tk != e4m3_value(code) || signbit(tk) != signbit(e4m3_value(code))) {
            agree = 0;
            fprintf(stderr, "e4m3 code 0x%02x: toolkit %.9g, ours %.9g\n", code, (double)tk, (double)e4m3_value(code));
        }
    }
    CHECK(agree, "e4m3 decode = CUDA toolkit's");

    /* 5. the encoder = the toolkit's (round to nearest even, saturating) on
     *    every code, every tie between neighbours, their neighbours in fp32,
     *    and random values: groups holding 448 get scale 1, so the bytes are
     *    the encoder's output */
    int enc_ok = 1, tested = 0;
    for (int c = 0; c < 0x7e && enc_ok; c++) {
        float lo = e4m3_value(c), hi = e4m3_value(c + 1), mid = (lo + hi) / 2; /* exact */
        float probe[6] = {lo, mid, nextafterf(mid, 0), nextafterf(mid, 1000), hi, -mid};
        for (int k = 0; k < 6; k++) {
            for (int d = 0; d < CUDA_ATTN_DQK; d++)
                row[d] = d % 128 == 0 ? 448.0f : probe[k];
            cuda_kv_quantize_fp8(row, 1, q);
            for (int g = 0; g < 4; g++)
                if (q[g * 128 + 1] != cuda_fp8_toolkit_f32_to_e4m3(probe[k])) {
                    enc_ok = 0;
                    fprintf(stderr, "encode %.9g: ours 0x%02x, toolkit 0x%02x\n", (double)probe[k], q[g * 128 + 1],
                            cuda_fp8_toolkit_f32_to_e4m3(probe[k]));
                    break;
                }
            tested++;
        }
    }
    for (int rep = 0; rep < 50 && enc_ok; rep++) {
        for (int d = 0; d < CUDA_ATTN_DQK; d++) {
            s = ll_splitmix64(s);
            double u = (double)(s >> 11) / 9007199254740992.0;
            row[d] = d % 128 == 0 ? 448.0f : (float)((u * 2 - 1) * ldexp(1.0, (int)(s % 19) - 11) * 3); /* |x| < 448 */
        }
        cuda_kv_quantize_fp8(row, 1, q);
        for (int d = 0; d < 512; d++)
            if (q[d] != cuda_fp8_toolkit_f32_to_e4m3(row[d])) {
                enc_ok = 0;
                fprintf(stderr, "encode %.9g: ours 0x%02x, toolkit 0x%02x\n", (double)row[d], q[d],
                        cuda_fp8_toolkit_f32_to_e4m3(row[d]));
                break;
            }
    }
    CHECK(enc_ok && tested > 700, "e4m3 encode = CUDA toolkit's (ties, neighbours, random)");
}

static void test_counters(void)
{
    int32_t idx[2 * 4] = {0, 5, -1, 7, -1, -1, -1, 2};
    CHECK(cuda_attn_unique_kv_bytes(idx, 2, 4, CUDA_KV_BF16) == 4 * 1152.0, "unique bf16 bytes");
    CHECK(cuda_attn_unique_kv_bytes(idx, 2, 4, CUDA_KV_FP8_V32) == 4 * 656.0, "unique fp8 bytes");
    CHECK(cuda_attn_flops(idx, 2, 64, 4) == 2.0 * 64 * 4 * 1088, "flops");
}

/* complexity: the plan's invariants are one conjunction, read as a list */
static void test_plan(void)
{
    const int Ns[] = {1, 2, 3, 7, 16, 64, 130, 256, 1000};
    const int Hs[] = {1, 16, 17, 48, 64, 128};
    const int Ks[] = {1, 17, 31, 32, 33, 64, 100, 2048};
    const int SMs[] = {0, 1, 132, 188};
    int ok = 1;
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
        for (size_t b = 0; b < sizeof Hs / sizeof *Hs; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
                for (size_t e = 0; e < sizeof SMs / sizeof *SMs; e++)
                    for (int l = 0; l < 2; l++) {
                        cuda_attn_plan p;
                        int N = Ns[a], H = Hs[b], K = Ks[c], sm = SMs[e];
                        if (cuda_attn_tiled_plan(N, H, K, sm, (cuda_kv_layout)l, &p) != 0) {
                            ok = 0;
                            continue;
                        }
                        int good = p.heads_per_block * p.head_groups >= H &&
                                   p.heads_per_block * (p.head_groups - 1) < H &&
                                   p.threads == p.heads_per_block / 16 * 128 &&
                                   p.tiles * CUDA_ATTN_TILE_ROWS >= K && (p.tiles - 1) * CUDA_ATTN_TILE_ROWS < K &&
                                   p.splits >= 1 && p.tiles_per_split >= 1 &&
                                   p.splits * p.tiles_per_split >= p.tiles &&        /* every tile covered */
                                   (p.splits - 1) * p.tiles_per_split < p.tiles &&   /* no empty split */
                                   p.smem_bytes <= 99 * 1024 &&
                                   (p.splits == 1) == (p.ws_bytes == 0) &&
                                   (p.splits == 1 || sm > 1) && /* sm_count 0 or 1: never split */
                                   p.blocks == (long)N * p.head_groups * p.splits &&
                                   (p.splits == 1 || p.tiles_per_split >= 4);
                        if (!good) {
                            ok = 0;
                            fprintf(stderr, "bad plan N=%d H=%d K=%d sm=%d: hb %d groups %d tiles %d splits %d tps %d smem %zu ws %zu\n",
                                    N, H, K, sm, p.heads_per_block, p.head_groups, p.tiles, p.splits,
                                    p.tiles_per_split, p.smem_bytes, p.ws_bytes);
                        }
                        if (p.splits > 1 && cuda_attn_ws_bytes(CUDA_ATTN_TILED, N, H, K, sm) < p.ws_bytes)
                            ok = 0; /* sized-once scratch covers this batch */
                    }
    CHECK(ok, "tiled plan invariants");
    cuda_attn_plan p;
    CHECK(cuda_attn_tiled_plan(1, 64, 2048, 132, CUDA_KV_BF16, &p) == 0 && p.splits == 32 && p.heads_per_block == 32,
          "N=1 H=64 k=2048 on 132 SMs: splits %d hb %d", p.splits, p.heads_per_block);
    CHECK(cuda_attn_tiled_plan(256, 64, 2048, 132, CUDA_KV_BF16, &p) == 0 && p.splits == 1, "N=256: no split");
    CHECK(cuda_attn_tiled_plan(1, 0, 64, 132, CUDA_KV_BF16, &p) != 0, "heads 0 refused");
    CHECK(cuda_attn_tiled_plan(1, 64, 0, 132, CUDA_KV_BF16, &p) != 0, "topk 0 refused");
    CHECK(cuda_attn_ws_bytes(CUDA_ATTN_NAIVE, 64, 64, 2048, 132) == 0, "naive needs no ws");
}

/* The split-k path on the host: per-split double references combined by
 * cuda_attn_combine_host must equal the whole-range reference. */
static void test_combine_emulation(void)
{
    const struct { int N, H, K, sm; } cs[] = {{3, 16, 300, 132}, {1, 64, 2048, 132}, {5, 17, 257, 188}};
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
        cac_case c = {.n_seq = cs[ci].N, .heads = cs[ci].H, .topk = cs[ci].K, .layout = CUDA_KV_BF16,
                      .ragged = 1, .seed = 1000 + ci};
        cac_data d;
        if (cac_make(&c, &d) != 0) {
            CHECK(0, "cac_make");
            return;
        }
        /* one sequence made entirely invalid in its first half: all -inf splits */
        for (int j = 0; j < c.topk / 2; j++)
            d.idx[j] = -1;
        cuda_attn_plan p;
        cuda_attn_tiled_plan(c.n_seq, c.heads, c.topk, cs[ci].sm, c.layout, &p);
        CHECK(p.splits > 1, "case %zu splits (%d)", ci, p.splits);
        int rows = c.n_seq * c.heads;
        float *po = malloc((size_t)p.splits * rows * CUDA_ATTN_DV * sizeof(float));
        float *pl = malloc((size_t)p.splits * rows * sizeof(float));
        float *out = malloc((size_t)rows * CUDA_ATTN_DV * sizeof(float));
        float *lse = malloc((size_t)rows * sizeof(float));
        int rc = !po || !pl || !out || !lse;
        for (int s = 0; !rc && s < p.splits; s++)
            for (int n = 0; !rc && n < c.n_seq; n++) {
                int j0 = s * p.tiles_per_split * CUDA_ATTN_TILE_ROWS;
                int j1 = j0 + p.tiles_per_split * CUDA_ATTN_TILE_ROWS;
                if (j1 > c.topk)
                    j1 = c.topk;
                size_t r = (size_t)s * rows + (size_t)n * c.heads;
                rc = cac_ref_range(&d, n, j0, j1, po + r * CUDA_ATTN_DV, pl + r);
            }
        CHECK(rc == 0, "partials");
        if (rc == 0) {
            cuda_attn_combine_host(po, pl, p.splits, rows, out, lse);
            CHECK(cac_reference(&d, NULL, 0) == 0, "reference");
            char msg[256];
            long bad = cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg);
            CHECK(bad == 0, "combine emulation case %zu: %ld bad: %s", ci, bad, msg);
        }
        free(po);
        free(pl);
        free(out);
        free(lse);
        cac_free(&d);
    }
}

/* The check must be able to fail. */
static void test_compare_rejects(void)
{
    cac_case c = {.n_seq = 2, .heads = 16, .topk = 40, .layout = CUDA_KV_FP8_V32, .ragged = 0, .seed = 7};
    cac_data d;
    if (cac_make(&c, &d) != 0) {
        CHECK(0, "cac_make");
        return;
    }
    for (int j = 0; j < c.topk; j++)
        d.idx[c.topk + j] = -1; /* sequence 1: nothing valid */
    CHECK(cac_reference(&d, NULL, 0) == 0, "reference");
    size_t rows = (size_t)c.n_seq * c.heads;
    float *out = malloc(rows * CUDA_ATTN_DV * sizeof(float)), *lse = malloc(rows * sizeof(float));
    if (!out || !lse) {
        CHECK(0, "malloc");
        goto done;
    }
    char msg[256];
    memcpy(out, d.ref_out, rows * CUDA_ATTN_DV * sizeof(float));
    memcpy(lse, d.ref_lse, rows * sizeof(float));
    CHECK(cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg) == 0, "reference passes itself: %s", msg);
    CHECK(isinf(lse[c.heads]) && lse[c.heads] < 0 && out[c.heads * CUDA_ATTN_DV] == 0, "empty sequence: 0 and -inf");
    out[5] = NAN;
    CHECK(cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg) == 1, "NaN out rejected");
    out[5] = d.ref_out[5] + 0.01f + 0.02f * fabsf(d.ref_out[5]);
    CHECK(cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg) == 1, "off out rejected");
    out[5] = d.ref_out[5];
    lse[3] *= 1.001f;
    CHECK(cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg) == 1, "off lse rejected");
    lse[3] = d.ref_lse[3];
    out[c.heads * CUDA_ATTN_DV + 9] = 1e-6f;
    CHECK(cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg) == 1, "non-zero empty output rejected");
    out[c.heads * CUDA_ATTN_DV + 9] = 0;
    lse[c.heads] = NAN;
    CHECK(cac_compare(&d, out, lse, NULL, 0, msg, sizeof msg) == 1, "NaN lse of an empty sequence rejected");
done:
    free(out);
    free(lse);
    cac_free(&d);
}

int main(void)
{
    test_layouts();
    test_fp8();
    test_counters();
    test_plan();
    test_combine_emulation();
    test_compare_rejects();
    TEST_MAIN_END();
}
