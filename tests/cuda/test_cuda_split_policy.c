/* test_cuda_split_policy.c: the tiled kernel's split-k policy against its own
 * cost model (cuda_attn.h: cuda_attn_tiled_plan, cuda_attn_tiled_predict_us),
 * on the CPU. Prints, for N = 1..512 at the engine's default shape (H = 64,
 * k = 2048, bf16) on a 132-SM device (H100/H200), the grid, its waves of
 * resident block slots and the predicted time, and fails where:
 *   - predicted time per sequence rises by more than RISE_TOL from N to N+1
 *     (the step-time saw-tooth a law fit would see), at the default shape on
 *     132 and 78 SMs;
 *   - the plan is slower, under the same model, than the one-wave ceil
 *     policy it replaced (splits = ceil(2 SMs / (N groups)) while N groups <
 *     SMs), or its worst rise is no better, on any shape of a grid of
 *     (H, k, SMs).
 * RISE_TOL is what equal-length splits can reach: a grid of equal blocks
 * just past a whole wave of slots leaves a tail wave, and splits of >= 4
 * tiles cannot cut it finer than ~1/waves (the worst rise, 36 % at N = 133,
 * 4.03 waves, is that tail). A balanced scheduler (blocks over a flat list
 * of (sequence, tile) work, as FlashMLA's) removes it; this test then
 * tightens. */
#include <stdio.h>
#include <string.h>

#include "cuda_attn.h"
#include "testutil.h"

#define RISE_TOL 0.40
#define N_MAX 512

/* The policy before this one, for the comparison: one wave by ceil. */
static void ceil_plan(cuda_attn_plan *p, int n_seq, int sm_count)
{
    long base = (long)n_seq * p->head_groups;
    int splits = 1;
    if (sm_count > 0 && base > 0 && base < sm_count) {
        long want = (2L * sm_count + base - 1) / base;
        int cap = p->tiles / 4 > 1 ? p->tiles / 4 : 1;
        splits = want < cap ? (int)want : cap;
    }
    p->tiles_per_split = (p->tiles + splits - 1) / splits;
    p->splits = (p->tiles + p->tiles_per_split - 1) / p->tiles_per_split;
}

typedef struct sweep {
    double worst_rise, worst_rise_ceil;
    int worst_n, worst_n_ceil;
    int slower_n; /* first N where the plan is slower than the ceil policy, 0 if none */
    double sum_us, sum_us_ceil;
} sweep;

static void run_sweep(int heads, int topk, int sm, int print, sweep *sw)
{
    memset(sw, 0, sizeof *sw);
    double prev = 0, prev_ceil = 0;
    if (print)
        printf("H=%d k=%d bf16 on %d SMs (%d resident slots), tolerance %.0f %%:\n"
               "    N  splits tiles/split  grid (groups x splits x N)  blocks  waves  pred_us  us/seq  rise%%   ceil-policy us\n",
               heads, topk, sm, sm * CUDA_ATTN_TILED_SLOTS_PER_SM, RISE_TOL * 100);
    for (int n = 1; n <= N_MAX; n++) {
        cuda_attn_plan p, c;
        if (cuda_attn_tiled_plan(n, heads, topk, sm, CUDA_KV_BF16, &p) != 0) {
            CHECK(0, "plan N=%d", n);
            return;
        }
        c = p;
        ceil_plan(&c, n, sm);
        double us_ceil = cuda_attn_tiled_predict_us(&c, n, heads, sm);
        double per = p.predicted_us / n, per_ceil = us_ceil / n;
        double rise = prev > 0 ? per / prev - 1 : 0, rise_ceil = prev_ceil > 0 ? per_ceil / prev_ceil - 1 : 0;
        if (rise > sw->worst_rise) {
            sw->worst_rise = rise;
            sw->worst_n = n;
        }
        if (rise_ceil > sw->worst_rise_ceil) {
            sw->worst_rise_ceil = rise_ceil;
            sw->worst_n_ceil = n;
        }
        if (p.predicted_us > us_ceil * (1 + 1e-9) && !sw->slower_n)
            sw->slower_n = n;
        sw->sum_us += per;
        sw->sum_us_ceil += per_ceil;
        if (print)
            printf("  %3d  %6d  %11d  %3d x %3d x %3d  %14ld  %5.2f  %7.1f  %6.3f  %5.1f  %8.1f\n", n, p.splits,
                   p.tiles_per_split, p.head_groups, p.splits, n, p.blocks, p.waves, p.predicted_us, per,
                   rise * 100, us_ceil);
        prev = per;
        prev_ceil = per_ceil;
    }
}

int main(void)
{
    sweep sw;
    run_sweep(64, 2048, 132, 1, &sw);
    printf("summary H=64 k=2048 132 SMs: worst rise %.1f %% at N=%d (ceil policy %.1f %% at N=%d); "
           "mean us/seq %.3f (ceil policy %.3f)\n",
           sw.worst_rise * 100, sw.worst_n, sw.worst_rise_ceil * 100, sw.worst_n_ceil, sw.sum_us / N_MAX,
           sw.sum_us_ceil / N_MAX);
    CHECK(sw.worst_rise <= RISE_TOL, "132 SMs: us/seq rises %.1f %% from N=%d to %d (tolerance %.0f %%)",
          sw.worst_rise * 100, sw.worst_n - 1, sw.worst_n, RISE_TOL * 100);
    run_sweep(64, 2048, 78, 0, &sw);
    CHECK(sw.worst_rise <= RISE_TOL, "78 SMs: us/seq rises %.1f %% from N=%d to %d (tolerance %.0f %%)",
          sw.worst_rise * 100, sw.worst_n - 1, sw.worst_n, RISE_TOL * 100);

    static const int Hs[] = {1, 16, 48, 64, 128}, Ks[] = {100, 512, 2048}, SMs[] = {16, 78, 132, 170, 188};
    for (size_t a = 0; a < sizeof Hs / sizeof *Hs; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof *Ks; b++)
            for (size_t c = 0; c < sizeof SMs / sizeof *SMs; c++) {
                run_sweep(Hs[a], Ks[b], SMs[c], 0, &sw);
                printf("H=%3d k=%4d %3d SMs: worst rise %5.1f %% at N=%3d (ceil policy %5.1f %% at N=%3d), "
                       "mean us/seq %.3f (ceil %.3f)\n",
                       Hs[a], Ks[b], SMs[c], sw.worst_rise * 100, sw.worst_n, sw.worst_rise_ceil * 100,
                       sw.worst_n_ceil, sw.sum_us / N_MAX, sw.sum_us_ceil / N_MAX);
                CHECK(sw.slower_n == 0, "H=%d k=%d %d SMs: slower than the ceil policy at N=%d", Hs[a], Ks[b],
                      SMs[c], sw.slower_n);
                CHECK(sw.worst_rise <= sw.worst_rise_ceil + 1e-12, "H=%d k=%d %d SMs: worst rise %.1f %% > ceil's %.1f %%",
                      Hs[a], Ks[b], SMs[c], sw.worst_rise * 100, sw.worst_rise_ceil * 100);
            }
    /* the model itself: more tiles per block cost more; nothing to run costs 0 */
    cuda_attn_plan p;
    cuda_attn_tiled_plan(64, 64, 2048, 132, CUDA_KV_BF16, &p);
    cuda_attn_plan q = p;
    q.tiles_per_split = p.tiles_per_split + 1;
    CHECK(cuda_attn_tiled_predict_us(&q, 64, 64, 132) > p.predicted_us, "more tiles per block cost more");
    CHECK(cuda_attn_tiled_predict_us(&p, 0, 64, 132) == 0 && cuda_attn_tiled_predict_us(&p, 64, 64, 0) == 0,
          "no sequences or no SMs: 0");
    TEST_MAIN_END();
}
