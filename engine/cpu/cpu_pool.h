/* cpu_pool.h (internal to engine/cpu/): a persistent pthread pool that runs
 * one parallel-for at a time.
 *
 * DESIGN: the pool has threads-1 workers; the calling thread is the last
 * worker, so threads=1 runs everything inline with no thread at all. Tasks
 * are handed out by an atomic counter (dynamic scheduling: ragged sequences
 * finish at different times). Workers sleep on a condition variable between
 * runs instead of spinning, because OpenBLAS's own threads share the same
 * cores during the dense phase and a spinning pool would steal from them.
 * Only one thread may call cpu_pool_run at a time (the engine's scheduler).
 */
#ifndef LOADLAW_CPU_POOL_H
#define LOADLAW_CPU_POOL_H

#include <stddef.h>

typedef struct cpu_pool cpu_pool;

/* fn(ctx, task, worker): task in [0, n_tasks), worker in [0, threads) (use
 * it to pick per-thread scratch). */
typedef void (*cpu_pool_fn)(void *ctx, int task, int worker);

/* threads >= 1. *out freed with cpu_pool_destroy. 0 or LL_ENOMEM / LL_ESYS. */
int cpu_pool_create(int threads, cpu_pool **out, char *err, size_t errlen);
int cpu_pool_threads(const cpu_pool *p);
/* Run fn for every task and return when all are done. */
void cpu_pool_run(cpu_pool *p, int n_tasks, cpu_pool_fn fn, void *ctx);
/* Run fn(ctx, w, w) exactly once on every thread w in [0, threads) (the
 * caller is w = 0) and return when all are done: for work that must not
 * share a thread, such as the tensor-parallel ranks that wait for each other
 * in a barrier (dynamic tasks could queue two ranks on one thread). */
void cpu_pool_run_each(cpu_pool *p, cpu_pool_fn fn, void *ctx);
void cpu_pool_destroy(cpu_pool *p);

#endif
