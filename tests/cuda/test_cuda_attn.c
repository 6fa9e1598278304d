/* test_cuda_attn.c: the CUDA attention kernels (naive, tiled with and
 * without split-k) against engine/cpu/attn_ref.c on random inputs over many
 * shapes, both KV layouts, ragged -1 entries (see cuda_attn_check.h for the
 * tolerances). Outputs are poisoned with NaN before every launch, so an
 * element a kernel forgot to write fails. Without a device: "SKIP: <reason>"
 * and exit 77 (ctest SKIP_RETURN_CODE). Plain C on the CUDA runtime API, so
 * the same test also links against cuemu (tools/cuemu), which runs the
 * kernels' source on the CPU: `--emu` picks the cases sized for it.
 *
 * The tiled kernel accepts every H >= 1 (heads padded up to 16 or 32 per
 * block; padded rows are computed on zero queries and never written); v2
 * likewise (16, 32 or 64 per block), each case run unsplit, with the
 * balanced plan for the device and for a 3-SM device (tail shares that
 * cross units). */
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

static int g_sm;

typedef struct dev_case {
    float *q, *out, *lse;
    uint8_t *kv;
    int32_t *idx;
    void *ws;
    size_t ws_bytes;
} dev_case;

/* Run `kind` with this sm_count (1: the tiled kernel never splits; g_sm: it
 * splits for small N) and check. */
static void run_check(const char *what, cac_data *d, dev_case *g, cuda_attn_kind kind, int sm_count)
{
    size_t rows = (size_t)d->c.n_seq * d->c.heads;
    float *out = malloc(rows * CUDA_ATTN_DV * sizeof(float) + 1), *lse = malloc(rows * sizeof(float) + 1);
    if (!out || !lse) {
        CHECK(0, "malloc");
        goto done;
    }
    CK(cudaMemset(g->out, 0xff, rows * CUDA_ATTN_DV * sizeof(float))); /* 0xffffffff is a NaN */
    CK(cudaMemset(g->lse, 0xff, rows * sizeof(float)));
    cuda_attn_args a = {.n_seq = d->c.n_seq, .heads = d->c.heads, .topk = d->c.topk, .scale = d->scale,
                        .layout = d->c.layout, .q = g->q, .kv = g->kv, .kv_rows = d->kv_rows, .idx = g->idx,
                        .out = g->out, .lse = g->lse, .ws = g->ws, .ws_bytes = g->ws_bytes};
    int rc = cuda_attn_decode(kind, &a, sm_count, NULL);
    CHECK(rc == 0, "%s: launch: %s", what, cudaGetErrorString((cudaError_t)rc));
    if (rc != 0)
        goto done;
    cudaError_t e = cudaDeviceSynchronize(); /* a kernel's own fault shows here */
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: kernel failed: %s (the CUDA context is lost; stopping)\n", what, cudaGetErrorString(e));
        exit(1);
    }
    CK(cudaMemcpy(out, g->out, rows * CUDA_ATTN_DV * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse, g->lse, rows * sizeof(float), cudaMemcpyDeviceToHost));
    char msg[512];
    long bad = cac_compare(d, out, lse, NULL, 0, msg, sizeof msg);
    CHECK(bad == 0, "%s: %ld bad elements: %s", what, bad, msg);
    if (bad == 0)
        printf("  ok  %-58s %s\n", what, msg);
done:
    free(out);
    free(lse);
}

/* v2 unsplit (sm_count 1: a block per unit), with the balanced plan for
 * split_sm SMs, and for V2_FEW_SMS SMs (few blocks: whole units per block
 * and tail shares that cross units), each where the plan differs. */
#define V2_FEW_SMS 3
static void run_v2(cac_data *d, dev_case *g, const char *label, int split_sm)
{
    const cac_case *c = &d->c;
    char what[240];
    snprintf(what, sizeof what, "v2 %s", label);
    run_check(what, d, g, CUDA_ATTN_V2, 1);
    const int sms[2] = {split_sm, V2_FEW_SMS};
    for (int i = 0; i < 2; i++) {
        cuda_attn_v2_plan p;
        cuda_attn_v2_plan_make(c->n_seq, c->heads, c->topk, sms[i], c->layout, &p);
        if (p.tail_blocks == 0 || (i == 1 && sms[1] == split_sm))
            continue;
        snprintf(what, sizeof what, "v2 %d SMs (%d blocks: %d whole + tail of %ld tiles in %d, %ld pieces) %s",
                 sms[i], p.blocks, p.whole_per_block, p.tail_tiles, p.tail_blocks, p.pieces, label);
        run_check(what, d, g, CUDA_ATTN_V2, sms[i]);
    }
}

/* Upload d and check naive, tiled without split-k (sm_count 1) and, where
 * the plan for split_sm SMs splits, tiled with split-k. The sm_count only
 * plans the grid, so a case plans the same on every device. */
static void run_data(cac_data *d, const char *label, int split_sm)
{
    const cac_case *c = &d->c;
    dev_case g = {0};
    size_t rows = (size_t)c->n_seq * c->heads;
    CK(cudaMalloc((void **)&g.q, (rows ? rows : 1) * CUDA_ATTN_DQK * sizeof(float)));
    CK(cudaMalloc((void **)&g.out, (rows ? rows : 1) * CUDA_ATTN_DV * sizeof(float)));
    CK(cudaMalloc((void **)&g.lse, (rows ? rows : 1) * sizeof(float)));
    CK(cudaMalloc((void **)&g.kv, (size_t)d->kv_rows * d->row_bytes));
    CK(cudaMalloc((void **)&g.idx, ((size_t)c->n_seq * c->topk + 1) * sizeof(int32_t)));
    g.ws_bytes = cuda_attn_ws_bytes(CUDA_ATTN_TILED, c->n_seq, c->heads, c->topk, split_sm);
    size_t v2_ws = cuda_attn_ws_bytes(CUDA_ATTN_V2, c->n_seq, c->heads, c->topk, split_sm);
    size_t v2_ws3 = cuda_attn_ws_bytes(CUDA_ATTN_V2, c->n_seq, c->heads, c->topk, V2_FEW_SMS);
    g.ws_bytes = g.ws_bytes > v2_ws ? g.ws_bytes : v2_ws;
    g.ws_bytes = g.ws_bytes > v2_ws3 ? g.ws_bytes : v2_ws3;
    if (g.ws_bytes)
        CK(cudaMalloc(&g.ws, g.ws_bytes));
    CK(cudaMemcpy(g.q, d->q, rows * CUDA_ATTN_DQK * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.kv, d->kv, (size_t)d->kv_rows * d->row_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.idx, d->idx, (size_t)c->n_seq * c->topk * sizeof(int32_t), cudaMemcpyHostToDevice));

    cuda_attn_plan p;
    cuda_attn_tiled_plan(c->n_seq, c->heads, c->topk, split_sm, c->layout, &p);
    char what[240];
    snprintf(what, sizeof what, "naive %s", label);
    run_check(what, d, &g, CUDA_ATTN_NAIVE, split_sm);
    snprintf(what, sizeof what, "tiled %s", label);
    run_check(what, d, &g, CUDA_ATTN_TILED, 1);
    if (p.splits > 1) {
        snprintf(what, sizeof what, "tiled split%d %s", p.splits, label);
        run_check(what, d, &g, CUDA_ATTN_TILED, split_sm);
    }
    run_v2(d, &g, label, split_sm);
    cudaFree(g.q);
    cudaFree(g.out);
    cudaFree(g.lse);
    cudaFree(g.kv);
    cudaFree(g.idx);
    cudaFree(g.ws);
}

static void one_case(const cac_case *c)
{
    cac_data d;
    if (cac_make(c, &d) != 0 || cac_reference(&d, NULL, 0) != 0) {
        CHECK(0, "inputs/reference (out of memory)");
        return;
    }
    char base[160];
    snprintf(base, sizeof base, "N=%d H=%d k=%d %s%s%s%s", c->n_seq, c->heads, c->topk,
             cuda_kv_layout_name(c->layout), c->ragged ? " ragged" : "", c->all_invalid ? " all-invalid" : "",
             c->q_fp32 ? " q-fp32" : c->q_amp > 0 ? " sharp" : "");
    run_data(&d, base, g_sm);
    cac_free(&d);
}

/* Hand-made holes, which random ragged inputs almost never produce: whole
 * invalid tiles after valid ones and at the start of a split, a split with
 * no valid row (its partial lse is -inf in the combine), a sequence valid
 * only in its last, partial tile, entries >= kv_rows and INT32_MAX; H = 20
 * (32-head blocks, 12 padded heads), both layouts. Planned for 132 SMs on
 * any device: 4 splits of 5 tiles. */
static void test_holes(void)
{
    for (int l = 0; l < 2; l++) {
        cac_case c = {.n_seq = 3, .heads = 20, .topk = 300, .layout = (cuda_kv_layout)l, .seed = 900 + l};
        cac_data d;
        if (cac_make(&c, &d) != 0) {
            CHECK(0, "cac_make");
            return;
        }
        int32_t *i0 = d.idx, *i1 = d.idx + c.topk, *i2 = d.idx + 2 * c.topk;
        for (int j = 16; j < 48; j++) /* seq 0: tiles 1, 2 (after valid tile 0) */
            i0[j] = -1;
        for (int j = 160; j < 176; j++) /* seq 0: tile 10, the first of split 2 */
            i0[j] = j & 1 ? (int32_t)d.kv_rows : INT32_MAX;
        for (int j = 80; j < 160; j++) /* seq 1: all of split 1 (tiles 5..9) */
            i1[j] = -1;
        for (int j = 0; j < 288; j++) /* seq 2: only the last, partial tile (288..299) */
            i2[j] = -1;
        i2[295] = -1;
        cuda_attn_plan p;
        cuda_attn_tiled_plan(c.n_seq, c.heads, c.topk, 132, c.layout, &p);
        CHECK(p.splits == 4 && p.tiles_per_split == 5, "holes plan: splits %d tiles/split %d", p.splits,
              p.tiles_per_split);
        if (cac_reference(&d, NULL, 0) != 0) {
            CHECK(0, "reference");
        } else {
            char base[80];
            snprintf(base, sizeof base, "holes N=3 H=20 k=300 %s", cuda_kv_layout_name(c.layout));
            run_data(&d, base, 132);
        }
        cac_free(&d);
    }
}

/* The split policy's edges (cuda_attn.h): planned for a 4-SM device (8
 * resident slots) so every boundary sits at a small N: H = 32 (one head
 * group), k = 256 (16 tiles), N = 1..9 crosses one SM-wave (N = 4), one
 * slot-wave (N = 8) and the policy's changes of split count (1 to 4);
 * layouts alternate by N. Each N also runs unsplit (sm_count 1). */
static void test_wave_edges(void)
{
    for (int n = 1; n <= 9; n++) {
        cac_case c = {.n_seq = n, .heads = 32, .topk = 256, .layout = (cuda_kv_layout)(n & 1), .ragged = 1,
                      .seed = 700 + (uint64_t)n};
        cac_data d;
        if (cac_make(&c, &d) != 0) {
            CHECK(0, "inputs (out of memory)");
            return;
        }
        if (cac_reference(&d, NULL, 0) != 0) {
            CHECK(0, "reference (out of memory)");
            cac_free(&d);
            return;
        }
        cuda_attn_plan p;
        cuda_attn_tiled_plan(n, c.heads, c.topk, 4, c.layout, &p);
        char base[120];
        snprintf(base, sizeof base, "wave edge N=%d H=32 k=256 %s (4 SMs: %ld blocks, %.2f waves)", n,
                 cuda_kv_layout_name(c.layout), p.blocks, p.waves);
        run_data(&d, base, 4);
        cac_free(&d);
    }
}

static void test_bad_args(void)
{
    float *dummy;
    CK(cudaMalloc((void **)&dummy, 4096));
    cuda_attn_args a = {.n_seq = 2, .heads = 0, .topk = 8, .scale = 1, .layout = CUDA_KV_BF16,
                        .q = dummy, .kv = (const uint8_t *)dummy, .kv_rows = 1, .idx = (const int32_t *)dummy,
                        .out = dummy};
    CHECK(cuda_attn_decode(CUDA_ATTN_TILED, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "heads 0");
    CHECK(cuda_attn_decode(CUDA_ATTN_NAIVE, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "heads 0 naive");
    a.heads = 64;
    a.topk = 0;
    CHECK(cuda_attn_decode(CUDA_ATTN_TILED, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "topk 0");
    a.topk = 2048;
    a.ws = NULL;
    a.ws_bytes = 0; /* N=2 splits on any real GPU: needs ws */
    if (g_sm > 4) {
        CHECK(cuda_attn_decode(CUDA_ATTN_TILED, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "missing ws");
        CHECK(cuda_attn_decode(CUDA_ATTN_V2, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "v2: missing ws");
    }
    a.heads = 0;
    CHECK(cuda_attn_decode(CUDA_ATTN_V2, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "v2: heads 0");
    a.heads = 64;
    a.layout = (cuda_kv_layout)9;
    CHECK(cuda_attn_decode(CUDA_ATTN_NAIVE, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "bad layout");
    a.layout = CUDA_KV_BF16;
    a.out = NULL;
    CHECK(cuda_attn_decode(CUDA_ATTN_NAIVE, &a, g_sm, NULL) == (int)cudaErrorInvalidValue, "NULL out");
    CK(cudaGetLastError());
    cudaFree(dummy);
}

int main(int argc, char **argv)
{
    /* --quick: three small cases (split and not, both layouts, ragged), for
     * compute-sanitizer --tool memcheck|racecheck|synccheck|initcheck;
     * --emu: the cases sized for the CPU emulation (tools/cuemu), which
     * runs the kernels ~10^5 times slower than a GPU; --emu-small: one of
     * them (16-head blocks; the holes case adds split-k), for the
     * emulator's slower ucontext build */
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0, emu = argc > 1 && strcmp(argv[1], "--emu") == 0;
    int emu_small = argc > 1 && strcmp(argv[1], "--emu-small") == 0;
    if (argc > 2 || (argc > 1 && !quick && !emu && !emu_small)) {
        fprintf(stderr, "usage: test_cuda_attn [--quick | --emu | --emu-small]\n");
        return 2;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device: %s (error %d)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0", (int)e);
        return TEST_SKIP;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaDeviceGetAttribute(&g_sm, cudaDevAttrMultiProcessorCount, 0));
    printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, g_sm);

    test_bad_args();
    /* shapes: the brief's grid, sampled so the double reference stays ~10 s */
    static const struct { int N, H, K, ragged, all_invalid, q_fp32; float q_amp; } cs[] = {
        {1, 1, 1, 0, 0, 0, 0},       {2, 16, 17, 1, 0, 0, 0},   {3, 64, 64, 1, 0, 0, 0},
        {7, 128, 100, 1, 0, 0, 0},   {16, 64, 2048, 1, 0, 0, 0}, {64, 64, 100, 1, 0, 0, 0},
        {130, 16, 64, 1, 0, 0, 0},   {1, 128, 2048, 0, 0, 0, 0}, {2, 64, 2048, 0, 0, 0, 0},
        {7, 1, 2048, 1, 0, 0, 0},    {64, 128, 17, 1, 0, 0, 0},  {3, 48, 100, 1, 0, 0, 0},
        {130, 64, 64, 0, 0, 0, 0},   {1, 16, 1, 1, 0, 0, 0},    {3, 64, 64, 0, 1, 0, 0},
        {4, 64, 2048, 1, 0, 1, 0},   {2, 64, 2048, 0, 0, 0, 30}, {16, 17, 1000, 1, 0, 0, 0},
        {2, 64, 300, 1, 0, 1, 0},    {2, 32, 600, 0, 0, 0, 30},
    };
    /* (2,16,17): 16-head blocks; (64,64,100): 32-head blocks; (16,17,1000): split-k; all ragged;
     * the last two: fp32 and sharp q at a top-k the emulation can afford */
    static const size_t quick_cases[] = {1, 5, 17};
    /* emu: every block size, split-k, padded heads, all-invalid, fp32 and sharp q, both layouts */
    static const size_t emu_cases[] = {0, 1, 2, 11, 13, 14, 17, 18, 19};
    static const size_t emu_small_cases[] = {1};
    const size_t *pick = quick ? quick_cases : emu ? emu_cases : emu_small ? emu_small_cases : NULL;
    size_t ncase = quick       ? sizeof quick_cases / sizeof *quick_cases
                   : emu       ? sizeof emu_cases / sizeof *emu_cases
                   : emu_small ? sizeof emu_small_cases / sizeof *emu_small_cases
                               : sizeof cs / sizeof *cs;
    for (size_t ci = 0; ci < ncase; ci++)
        for (int l = 0; l < 2; l++) {
            size_t i = pick ? pick[ci] : ci;
            cac_case c = {.n_seq = cs[i].N, .heads = cs[i].H, .topk = cs[i].K, .layout = (cuda_kv_layout)l,
                          .ragged = cs[i].ragged, .all_invalid = cs[i].all_invalid, .q_fp32 = cs[i].q_fp32,
                          .q_amp = cs[i].q_amp, .seed = 1 + 2 * i + (uint64_t)l};
            one_case(&c);
        }
    if (!quick)
        test_holes();
    if (!quick && !emu_small)
        test_wave_edges();
    TEST_MAIN_END();
}
