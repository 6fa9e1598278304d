/* attn_prims.c: the vector primitives both fast kernels share, so that the
 * naive/tiled comparison measures data reuse and not unequal arithmetic, and
 * the kernels' grow-only scratch workspace.
 *
 * Each dot keeps 16 independent partial sums: the compiler can then vectorize
 * the loop exactly (no -ffast-math needed to reassociate a reduction), and
 * the result does not depend on the vector width.
 */
#include <stdlib.h>

#include "common.h"
#include "cpu_kernels.h"

float attn_dot_f32(const float *a, const float *b, int n)
{
    float acc[16] = {0};
    for (int i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += a[i + l] * b[i + l];
    float s = 0;
    for (int l = 0; l < 16; l++)
        s += acc[l];
    return s;
}

float attn_dot_bf16(const float *a, const uint16_t *b, int n)
{
    float acc[16] = {0};
    for (int i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += a[i + l] * bf16_to_f32(b[i + l]);
    float s = 0;
    for (int l = 0; l < 16; l++)
        s += acc[l];
    return s;
}

/* ---- workspace ------------------------------------------------------------ */

struct attn_ws {
    float *worker;        /* (workers, stride) */
    size_t worker_cap;    /* floats */
    size_t stride;        /* floats per worker, multiple of 16 */
    float *shared;
    size_t shared_cap;
};

attn_ws *attn_ws_new(void) { return calloc(1, sizeof(attn_ws)); }

void attn_ws_free(attn_ws *ws)
{
    if (!ws)
        return;
    free(ws->worker);
    free(ws->shared);
    free(ws);
}

/* Grow-only: a steady engine reaches its largest batch once and then never
 * allocates again inside a step. */
static int ws_grow(float **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t bytes = (need * sizeof(float) + 63) & ~(size_t)63;
    float *np = aligned_alloc(64, bytes);
    if (!np)
        return LL_ENOMEM;
    free(*p);
    *p = np;
    *cap = need;
    return 0;
}

int attn_ws_reserve(attn_ws *ws, int workers, size_t worker_floats, size_t shared_floats)
{
    size_t stride = (worker_floats + 15) & ~(size_t)15;
    int rc = ws_grow(&ws->worker, &ws->worker_cap, stride * (size_t)workers);
    if (rc == 0)
        rc = ws_grow(&ws->shared, &ws->shared_cap, shared_floats);
    if (rc == 0)
        ws->stride = stride;
    return rc;
}

float *attn_ws_worker(attn_ws *ws, int worker) { return ws->worker + ws->stride * (size_t)worker; }
float *attn_ws_shared(attn_ws *ws) { return ws->shared; }
