/* backend_cpu_missing.c: stands in for engine/cpu/ when that folder is not in
 * the tree, so `--backend cpu` fails with a clear message instead of a link
 * error. CMake compiles this file or links ll_engine_cpu, never both. */
#include "backend.h"
#include "common.h"

static int cpu_missing_create(const eng_config *cfg, void **state, char *err, size_t errlen)
{
    (void)cfg;
    *state = NULL;
    ll_errf(err, errlen, "cpu backend not built (engine/cpu/ is missing from this tree)");
    return LL_EINVAL;
}

static int cpu_missing_step(void *state, const eng_batch *b, int64_t start_ns, eng_phase *ph, int *n_ph)
{
    (void)state; (void)b; (void)start_ns; (void)ph;
    *n_ph = 0;
    return LL_EINVAL;
}

static void cpu_missing_release(void *state, int slot) { (void)state; (void)slot; }
static void cpu_missing_destroy(void *state) { (void)state; }

const eng_backend_ops eng_backend_cpu = {
    .name = "cpu",
    .caps = 0, /* a stand-in: it never steps */
    .create = cpu_missing_create,
    .step = cpu_missing_step,
    .release = cpu_missing_release,
    .destroy = cpu_missing_destroy,
};

void eng_blas_single_thread(void) {}
