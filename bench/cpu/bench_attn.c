/* bench_attn.c: sparse MLA decode attention on the CPU, naive vs tiled, in
 * the manner of llm.c's dev/cuda: each kernel is checked against the double
 * reference, then timed for N = 1..64 sequences, and its time is set against
 * the bytes it must move and this machine's copy bandwidth measured in the
 * same run. The dense GEMM (the law's a) is timed too.
 *
 * Usage: bench_attn [--threads T] [--heads H] [--topk K] [--ctx ROWS]
 *                   [--n 1,2,4,...] [--dense DMODELxDFF] [--min-time S]
 *
 * Bytes moved per step (the traffic model, attn_bytes_* in attn_ref.c):
 *   naive  N·H·k·1152 (every selected bf16 row once per head) + q/out fp32
 *   tiled  N·k·1152                                          + q/out fp32
 * Each sequence owns its own ctx rows, so the KV pool (N·ctx·1152 B) grows
 * past the last-level cache as N does. Times are the best of the repetitions
 * (the machine is shared; the best is the least disturbed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cpu_kernels.h"
#include "cpu_model.h"

typedef int (*kernel_fn)(cpu_pool *, attn_ws *, const attn_batch *);

static double now_s(void) { return (double)ll_now_ns() * 1e-9; }

/* Copy bandwidth, read + write bytes per second, best of a few memcpy runs of
 * a buffer much larger than the last-level cache, split over the same pool of
 * threads the kernels use (one core's memcpy would understate what T cores
 * can pull, and the kernels' %copy would overstate their efficiency). */
typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes, chunk;
} copy_job;

static void copy_task(void *ctx, int task, int worker)
{
    (void)worker;
    const copy_job *j = ctx;
    size_t off = (size_t)task * j->chunk;
    if (off < j->bytes)
        memcpy(j->dst + off, j->src + off, off + j->chunk <= j->bytes ? j->chunk : j->bytes - off);
}

static double copy_bandwidth(cpu_pool *pool, size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        free(a);
        free(b);
        return NAN;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    enum { CHUNKS = 256 };
    double best = INFINITY;
    for (int r = 0; r < 5; r++) {
        copy_job j = {.dst = r % 2 ? a : b, .src = r % 2 ? b : a, .bytes = bytes,
                      .chunk = (bytes + CHUNKS - 1) / CHUNKS};
        double t0 = now_s();
        cpu_pool_run(pool, CHUNKS, copy_task, &j);
        double t = now_s() - t0;
        if (t < best)
            best = t;
    }
    volatile char sink = a[bytes / 2] + b[bytes / 3];
    (void)sink;
    free(a);
    free(b);
    return 2.0 * (double)bytes / best;
}

static double time_kernel(kernel_fn fn, cpu_pool *pool, attn_ws *ws, const attn_batch *b,
                          double min_time_s, int *reps)
{
    fn(pool, ws, b); /* warm-up: page-in, workspace growth */
    double best = INFINITY, start = now_s();
    int r = 0;
    while (r < 3 || (now_s() - start < min_time_s && r < 200)) {
        double t0 = now_s();
        fn(pool, ws, b);
        double t = now_s() - t0;
        if (t < best)
            best = t;
        r++;
    }
    *reps = r;
    return best;
}

static double time_dense(cpu_pool *pool, const cpu_dense *d, const float *x, int n, float *hd, double min_time_s)
{
    cpu_dense_forward(pool, d, x, n, 0, d->d_ff, hd);
    double best = INFINITY, start = now_s();
    for (int r = 0; r < 3 || (now_s() - start < min_time_s && r < 200); r++) {
        double t0 = now_s();
        cpu_dense_forward(pool, d, x, n, 0, d->d_ff, hd);
        double t = now_s() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_attn [--threads T] [--heads H] [--topk K] [--ctx ROWS] [--n 1,2,4,...]\n"
               "                  [--dense DMODELxDFF] [--min-time S]\n");
}

int main(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = ncpu > 0 ? (int)ncpu : 1, heads = 64, topk = 2048, ctx = 4096;
    int d_model = 2048, d_ff = 8192;
    double min_time_s = 0.3;
    int *ns = NULL;
    size_t n_ns = 0;
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            free(ns);
            return 0;
        }
        if (!v) {
            usage(stderr);
            free(ns);
            return 2;
        }
        i++;
        if (strcmp(a, "--n") == 0) {
            free(ns);
            ns = NULL;
            if (ll_parse_int_list(v, &ns, &n_ns) != 0 || n_ns == 0) {
                fprintf(stderr, "bench_attn: bad --n '%s'\n", v);
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--dense") == 0) {
            if (sscanf(v, "%dx%d", &d_model, &d_ff) != 2) {
                fprintf(stderr, "bench_attn: bad --dense '%s' (want 2048x8192)\n", v);
                free(ns);
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--min-time") == 0) {
            if (ll_parse_duration_s(v, &min_time_s) != 0 || min_time_s < 0) {
                fprintf(stderr, "bench_attn: bad --min-time '%s'\n", v);
                free(ns);
                return 2;
            }
            continue;
        }
        if (ll_parse_int64(v, &x) != 0 || x < 1 || x > (1 << 24)) {
            fprintf(stderr, "bench_attn: bad value '%s' for %s\n", v, a);
            free(ns);
            return 2;
        }
        if (strcmp(a, "--threads") == 0) threads = (int)x;
        else if (strcmp(a, "--heads") == 0) heads = (int)x;
        else if (strcmp(a, "--topk") == 0) topk = (int)x;
        else if (strcmp(a, "--ctx") == 0) ctx = (int)x;
        else {
            fprintf(stderr, "bench_attn: unknown option %s\n", a);
            usage(stderr);
            free(ns);
            return 2;
        }
    }
    if (!ns) {
        static const int dflt[] = {1, 2, 4, 8, 16, 32, 64};
        n_ns = sizeof dflt / sizeof dflt[0];
        ns = malloc(sizeof dflt);
        if (!ns)
            return 1;
        memcpy(ns, dflt, sizeof dflt);
    }
    int nmax = 0;
    for (size_t i = 0; i < n_ns; i++)
        if (ns[i] > nmax)
            nmax = ns[i];
    if (nmax < 1 || nmax > 4096) {
        fprintf(stderr, "bench_attn: --n values must be in [1, 4096]\n");
        free(ns);
        return 2;
    }

    printf("command:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\nthreads %d  heads %d  topk %d  ctx rows/seq %d  KV pool %.0f MB  dense %dx%d fp32 (%.0f MB)\n",
           threads, heads, topk, ctx, (double)nmax * ctx * ATTN_ROW_BYTES / 1e6, d_model, d_ff,
           (double)d_model * d_ff * 4 / 1e6);

    char err[256];
    cpu_pool *pool = NULL;
    attn_ws *ws = attn_ws_new();
    uint16_t *kv = malloc((size_t)nmax * ctx * ATTN_ROW_BYTES);
    int32_t *idx = malloc((size_t)nmax * topk * sizeof(int32_t));
    attn_seq *seq = malloc((size_t)nmax * sizeof *seq);
    float *q = malloc((size_t)nmax * heads * ATTN_DQK * sizeof(float));
    float *out = malloc((size_t)nmax * heads * ATTN_DV * sizeof(float));
    float *ref = malloc((size_t)heads * ATTN_DV * sizeof(float));
    float *x = malloc((size_t)nmax * d_model * sizeof(float));
    float *hd = malloc((size_t)nmax * d_ff * sizeof(float));
    cpu_dense dense = {0};
    if (!ws || !kv || !idx || !seq || !q || !out || !ref || !x || !hd) {
        fprintf(stderr, "bench_attn: out of memory\n");
        goto done;
    }
    if (cpu_pool_create(threads, &pool, err, sizeof err) != 0 ||
        cpu_dense_init(&dense, d_model, d_ff, 1024, 7, err, sizeof err) != 0) {
        fprintf(stderr, "bench_attn: %s\n", err);
        goto done;
    }

    double bw = copy_bandwidth(pool, (size_t)512 << 20);
    printf("copy bandwidth (memcpy 512 MB on %d threads, read+write): %.1f GB/s\n\n", threads, bw / 1e9);

    ll_rng rng;
    ll_rng_seed(&rng, 1);
    for (size_t i = 0; i < (size_t)nmax * heads * ATTN_DQK; i++)
        q[i] = (float)(2.0 * ll_rng_uniform(&rng) - 1.0);
    for (size_t i = 0; i < (size_t)nmax * d_model; i++)
        x[i] = (float)(2.0 * ll_rng_uniform(&rng) - 1.0);
    cpu_kv_fill(kv, 0, (int64_t)nmax * ctx, 3);
    for (int n = 0; n < nmax; n++) {
        int32_t *ix = idx + (size_t)n * topk;
        seq[n] = (attn_seq){.kv = kv + (size_t)n * ctx * ATTN_DQK, .idx = ix,
                            .k = cpu_topk_select(ctx, topk, 11 + (uint64_t)n, ix)};
    }

    /* correctness first (one sequence, all heads) */
    attn_batch b1 = {.n_seq = 1, .heads = heads, .scale = 1.0f / sqrtf((float)ATTN_DQK), .q = q,
                     .seq = seq, .out = ref};
    if (attn_decode_ref(&b1) != 0) {
        fprintf(stderr, "bench_attn: reference: out of memory\n");
        goto done;
    }
    const char *names[2] = {"naive", "tiled"};
    kernel_fn fns[2] = {attn_decode_naive, attn_decode_tiled};
    for (int kf = 0; kf < 2; kf++) {
        b1.out = out;
        if (fns[kf](pool, ws, &b1) != 0) {
            fprintf(stderr, "bench_attn: %s: out of memory\n", names[kf]);
            goto done;
        }
        double e = 0;
        for (size_t i = 0; i < (size_t)heads * ATTN_DV; i++)
            e = fmax(e, fabs((double)out[i] - ref[i]));
        printf("check %s vs reference (N=1): max|err| %.2e %s\n", names[kf], e, e <= 2e-5 ? "ok" : "FAIL");
        if (!(e <= 2e-5))
            goto done;
    }

    printf("\n%4s | %9s %8s %7s %6s %7s | %9s %8s %7s %6s %7s | %6s | %8s\n", "N", "naive ms",
           "MB", "GB/s", "%copy", "GFLOP/s", "tiled ms", "MB", "GB/s", "%copy", "GFLOP/s", "n/t",
           "dense ms");
    double tn1 = NAN, tt1 = NAN, tnL = NAN, ttL = NAN, td1 = NAN, tdL = NAN;
    int n1 = 0, nL = 0;
    for (size_t i = 0; i < n_ns; i++) {
        int N = ns[i];
        attn_batch b = {.n_seq = N, .heads = heads, .scale = b1.scale, .q = q, .seq = seq, .out = out};
        int reps[2];
        double tn = time_kernel(fns[0], pool, ws, &b, min_time_s, &reps[0]);
        double tt = time_kernel(fns[1], pool, ws, &b, min_time_s, &reps[1]);
        double td = time_dense(pool, &dense, x, N, hd, min_time_s);
        double bn = attn_bytes_naive(&b), bt = attn_bytes_tiled(&b);
        /* both kernels do the same arithmetic: per (row, head) a 576-dim
         * dot and a 512-dim axpy */
        double fl = 0;
        for (int n = 0; n < N; n++)
            fl += 2.0 * seq[n].k * heads * (ATTN_DQK + ATTN_DV);
        printf("%4d | %9.3f %8.1f %7.1f %5.0f%% %7.1f | %9.3f %8.1f %7.1f %5.0f%% %7.1f | %6.2f | %8.3f\n",
               N, tn * 1e3, bn / 1e6, bn / tn / 1e9, 100 * bn / tn / bw, fl / tn / 1e9, tt * 1e3,
               bt / 1e6, bt / tt / 1e9, 100 * bt / tt / bw, fl / tt / 1e9, tn / tt, td * 1e3);
        fflush(stdout);
        if (i == 0) {
            tn1 = tn; tt1 = tt; td1 = td; n1 = N;
        }
        tnL = tn; ttL = tt; tdL = td; nL = N;
    }
    if (nL > n1) {
        attn_batch one = {.n_seq = 1, .heads = heads, .seq = seq};
        double bseq_n = attn_bytes_naive(&one), bseq_t = attn_bytes_tiled(&one);
        double sn = (tnL - tn1) / (nL - n1), st = (ttL - tt1) / (nL - n1), sd = (tdL - td1) / (nL - n1);
        printf("\nper-sequence slope (N=%d..%d): naive %.3f ms, tiled %.3f ms, dense %.3f ms\n", n1, nL,
               sn * 1e3, st * 1e3, sd * 1e3);
        printf("bandwidth-bound prediction (bytes/seq / copy bw): naive %.3f ms, tiled %.3f ms\n",
               bseq_n / bw * 1e3, bseq_t / bw * 1e3);
        printf("dense intercept (GEMM at N=%d): %.3f ms; weights read once: %.0f MB / copy bw = %.3f ms\n",
               n1, td1 * 1e3, (double)d_model * d_ff * 4 / 1e6, (double)d_model * d_ff * 4 / bw * 1e3);
    }
    printf("note: best of >=3 repetitions (>= %.2f s per kernel and N); the machine may be shared.\n",
           min_time_s);
    rc = 0;
done:
    cpu_dense_free(&dense);
    cpu_pool_destroy(pool);
    attn_ws_free(ws);
    free(kv); free(idx); free(seq); free(q); free(out); free(ref); free(x); free(hd); free(ns);
    return rc;
}
