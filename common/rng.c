/* rng.c: xoshiro256** seeded through splitmix64; one generator per thread. */
#include "common.h"

#include <math.h>

#include "splitmix.h"

void ll_rng_seed(ll_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++, seed += LL_SPLITMIX_GAMMA)
        r->s[i] = ll_splitmix64(seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ll_rng_u64(ll_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ll_rng_uniform(ll_rng *r) { return (double)(ll_rng_u64(r) >> 11) * 0x1.0p-53; }

double ll_rng_normal(ll_rng *r)
{
    /* Box-Muller; the second value is dropped to keep the state simple. */
    double u1 = ll_rng_uniform(r), u2 = ll_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double ll_rng_exponential(ll_rng *r, double rate)
{
    return -log1p(-ll_rng_uniform(r)) / rate;
}
