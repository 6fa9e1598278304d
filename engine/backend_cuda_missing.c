/* backend_cuda_missing.c: stands in for engine/cuda/ when nvcc was not found
 * at configure time, so `--backend cuda` fails with a clear message instead
 * of a link error. CMake compiles this file or links ll_engine_cuda, never
 * both. */
#include "backend.h"
#include "common.h"

static int cuda_missing_create(const eng_config *cfg, void **state, char *err, size_t errlen)
{
    (void)cfg;
    *state = NULL;
    ll_errf(err, errlen, "cuda backend not built (when this loadlaw was configured, nvcc or "
                         "cuBLAS was not found, or -DLOADLAW_CUDA=OFF was given; install the CUDA "
                         "toolkit and configure again)");
    return LL_EINVAL;
}

static int cuda_missing_step(void *state, const eng_batch *b, int64_t start_ns, eng_phase *ph,
                             int *n_ph)
{
    (void)state; (void)b; (void)start_ns; (void)ph;
    *n_ph = 0;
    return LL_EINVAL;
}

static void cuda_missing_release(void *state, int slot) { (void)state; (void)slot; }
static void cuda_missing_destroy(void *state) { (void)state; }

const eng_backend_ops eng_backend_cuda = {
    .name = "cuda",
    .caps = 0, /* a stand-in: it never steps */
    .create = cuda_missing_create,
    .step = cuda_missing_step,
    .release = cuda_missing_release,
    .destroy = cuda_missing_destroy,
};
