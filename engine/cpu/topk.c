/* topk.c: the deterministic stand-in for DeepSeek's indexer, and the seeded
 * fill of the synthetic KV cache.
 *
 * The real indexer scores every past token and keeps the top k; what matters
 * for a decode kernel is only that k rows are chosen, distinct, scattered
 * over the context with a dense recent window, and different from step to
 * step. That is what cpu_topk_select produces, in O(k), without scoring.
 */
#include "cpu_kernels.h"

int cpu_topk_select(int64_t ctx, int k, uint64_t seed, int32_t *idx)
{
    if (ctx <= 0 || k <= 0)
        return 0;
    int64_t n = ctx < k ? ctx : k;
    int64_t recent = n / 4;
    int64_t m = n - recent;      /* spread over [0, range) */
    int64_t range = ctx - recent;
    /* bucket i = [i*range/m, (i+1)*range/m): range >= m so each bucket holds
     * at least one row, and one row per bucket keeps them distinct and sorted */
    uint64_t h0 = ll_splitmix64(seed ^ ll_splitmix64((uint64_t)ctx));
    for (int64_t i = 0; i < m; i++) {
        int64_t lo = i * range / m, hi = (i + 1) * range / m;
        uint64_t r = ll_splitmix64(h0 + (uint64_t)i);
        idx[i] = (int32_t)(lo + (int64_t)(r % (uint64_t)(hi - lo)));
    }
    for (int64_t i = 0; i < recent; i++)
        idx[m + i] = (int32_t)(range + i);
    return (int)n;
}

void cpu_kv_fill(uint16_t *kv, int64_t row0, int64_t n, uint64_t seed)
{
    for (int64_t r = row0; r < row0 + n; r++) {
        uint64_t h = ll_splitmix64(seed ^ ((uint64_t)r * 0x2545f4914f6cdd1dull));
        uint16_t *row = kv + r * ATTN_DQK;
        for (int d = 0; d < ATTN_DQK; d += 4) {
            h = ll_splitmix64(h);
            for (int l = 0; l < 4; l++) {
                /* 16 bits -> [-1, 1) */
                float v = (float)(int16_t)(h >> (16 * l)) * (1.0f / 32768.0f);
                row[d + l] = f32_to_bf16(v);
            }
        }
    }
}
