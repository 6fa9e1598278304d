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

#include "bench_args.h"
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

/* The command line; ns is malloc'd (freed by attn_opts_free). */
typedef struct attn_opts {
    int threads, heads, topk, ctx, d_model, d_ff;
    double min_time_s;
    int *ns;
    size_t n_ns;
    int nmax; /* the largest of ns */
} attn_opts;

static void attn_opts_free(attn_opts *o)
{
    free(o->ns);
    o->ns = NULL;
}

/* One option with its value: 0, or 2 (a usage error, already reported). */
static int parse_option(attn_opts *o, const char *a, const char *v)
{
    int64_t x = 0;
    if (strcmp(a, "--n") == 0) {
        free(o->ns);
        o->ns = NULL;
        if (ll_parse_int_list(v, &o->ns, &o->n_ns) != 0 || o->n_ns == 0) {
            fprintf(stderr, "bench_attn: bad --n '%s'\n", v);
            return 2;
        }
        return 0;
    }
    if (strcmp(a, "--dense") == 0) {
        if (sscanf(v, "%dx%d", &o->d_model, &o->d_ff) != 2) {
            fprintf(stderr, "bench_attn: bad --dense '%s' (want 2048x8192)\n", v);
            return 2;
        }
        return 0;
    }
    if (strcmp(a, "--min-time") == 0) {
        if (ll_parse_duration_s(v, &o->min_time_s) != 0 || o->min_time_s < 0) {
            fprintf(stderr, "bench_attn: bad --min-time '%s'\n", v);
            return 2;
        }
        return 0;
    }
    if (ll_parse_int64(v, &x) != 0 || x < 1 || x > (1 << 24)) {
        fprintf(stderr, "bench_attn: bad value '%s' for %s\n", v, a);
        return 2;
    }
    if (strcmp(a, "--threads") == 0) o->threads = (int)x;
    else if (strcmp(a, "--heads") == 0) o->heads = (int)x;
    else if (strcmp(a, "--topk") == 0) o->topk = (int)x;
    else if (strcmp(a, "--ctx") == 0) o->ctx = (int)x;
    else {
        fprintf(stderr, "bench_attn: unknown option %s\n", a);
        usage(stderr);
        return 2;
    }
    return 0;
}

/* The default N list when --n was not given, then nmax: 0, or an exit code. */
static int parse_option_any(void *o, const char *a, const char *v)
{
    return parse_option(o, a, v);
}

static int settle_ns(attn_opts *o)
{
    if (!o->ns) {
        static const int dflt[] = {1, 2, 4, 8, 16, 32, 64};
        o->n_ns = sizeof dflt / sizeof dflt[0];
        o->ns = malloc(sizeof dflt);
        if (!o->ns)
            return 1;
        memcpy(o->ns, dflt, sizeof dflt);
    }
    o->nmax = 0;
    for (size_t i = 0; i < o->n_ns; i++)
        if (o->ns[i] > o->nmax)
            o->nmax = o->ns[i];
    if (o->nmax < 1 || o->nmax > 4096) {
        fprintf(stderr, "bench_attn: --n values must be in [1, 4096]\n");
        return 2;
    }
    return 0;
}

/* -1 to go on, else the exit code (0 after --help); o is freed on exit. */
static int parse_args(int argc, char **argv, attn_opts *o)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (attn_opts){.threads = ncpu > 0 ? (int)ncpu : 1, .heads = 64, .topk = 2048, .ctx = 4096,
                     .d_model = 2048, .d_ff = 8192, .min_time_s = 0.3};
    int rc = bench_parse_pairs(argc, argv, usage, parse_option_any, o);
    if (rc < 0) {
        int s = settle_ns(o);
        if (s != 0)
            rc = s;
    }
    if (rc >= 0)
        attn_opts_free(o);
    return rc;
}

static void print_header(int argc, char **argv, const attn_opts *o)
{
    printf("command:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\nthreads %d  heads %d  topk %d  ctx rows/seq %d  KV pool %.0f MB  dense %dx%d fp32 (%.0f MB)\n",
           o->threads, o->heads, o->topk, o->ctx, (double)o->nmax * o->ctx * ATTN_ROW_BYTES / 1e6,
           o->d_model, o->d_ff, (double)o->d_model * o->d_ff * 4 / 1e6);
}

/* Everything the kernels read and write, sized for nmax sequences. */
typedef struct attn_bench {
    cpu_pool *pool;
    attn_ws *ws;
    uint16_t *kv;
    int32_t *idx;
    attn_seq *seq;
    float *q, *out, *ref, *x, *hd;
    cpu_dense dense;
} attn_bench;

/* 0, or -1 with the reason on stderr; attn_bench_free either way. */
static int attn_bench_init(attn_bench *ab, const attn_opts *o)
{
    char err[256];
    size_t nmax = (size_t)o->nmax;
    *ab = (attn_bench){0};
    ab->ws = attn_ws_new();
    ab->kv = malloc(nmax * o->ctx * ATTN_ROW_BYTES);
    ab->idx = malloc(nmax * o->topk * sizeof(int32_t));
    ab->seq = malloc(nmax * sizeof *ab->seq);
    ab->q = malloc(nmax * o->heads * ATTN_DQK * sizeof(float));
    ab->out = malloc(nmax * o->heads * ATTN_DV * sizeof(float));
    ab->ref = malloc((size_t)o->heads * ATTN_DV * sizeof(float));
    ab->x = malloc(nmax * o->d_model * sizeof(float));
    ab->hd = malloc(nmax * o->d_ff * sizeof(float));
    if (!ab->ws || !ab->kv || !ab->idx || !ab->seq || !ab->q || !ab->out || !ab->ref || !ab->x || !ab->hd) {
        fprintf(stderr, "bench_attn: out of memory\n");
        return -1;
    }
    if (cpu_pool_create(o->threads, &ab->pool, err, sizeof err) != 0 ||
        cpu_dense_init(&ab->dense, o->d_model, o->d_ff, 1024, 7, err, sizeof err) != 0) {
        fprintf(stderr, "bench_attn: %s\n", err);
        return -1;
    }
    return 0;
}

static void attn_bench_free(attn_bench *ab)
{
    cpu_dense_free(&ab->dense);
    cpu_pool_destroy(ab->pool);
    attn_ws_free(ab->ws);
    free(ab->kv); free(ab->idx); free(ab->seq); free(ab->q); free(ab->out); free(ab->ref);
    free(ab->x); free(ab->hd);
}

/* Seeded queries, dense inputs, KV rows and each sequence's top-k rows. */
static void fill_inputs(attn_bench *ab, const attn_opts *o)
{
    int nmax = o->nmax;
    ll_rng rng;
    ll_rng_seed(&rng, 1);
    for (size_t i = 0; i < (size_t)nmax * o->heads * ATTN_DQK; i++)
        ab->q[i] = (float)(2.0 * ll_rng_uniform(&rng) - 1.0);
    for (size_t i = 0; i < (size_t)nmax * o->d_model; i++)
        ab->x[i] = (float)(2.0 * ll_rng_uniform(&rng) - 1.0);
    cpu_kv_fill(ab->kv, 0, (int64_t)nmax * o->ctx, 3);
    for (int n = 0; n < nmax; n++) {
        int32_t *ix = ab->idx + (size_t)n * o->topk;
        ab->seq[n] = (attn_seq){.kv = ab->kv + (size_t)n * o->ctx * ATTN_DQK, .idx = ix,
                                .k = cpu_topk_select(o->ctx, o->topk, 11 + (uint64_t)n, ix)};
    }
}

static const char *const kernel_names[2] = {"naive", "tiled"};
static const kernel_fn kernel_fns[2] = {attn_decode_naive, attn_decode_tiled};

/* Correctness first (one sequence, all heads): 0 when both kernels match the
 * reference, -1 otherwise (reported). */
static int check_kernels(attn_bench *ab, const attn_opts *o)
{
    attn_batch b1 = {.n_seq = 1, .heads = o->heads, .scale = 1.0f / sqrtf((float)ATTN_DQK), .q = ab->q,
                     .seq = ab->seq, .out = ab->ref};
    if (attn_decode_ref(&b1) != 0) {
        fprintf(stderr, "bench_attn: reference: out of memory\n");
        return -1;
    }
    for (int kf = 0; kf < 2; kf++) {
        b1.out = ab->out;
        if (kernel_fns[kf](ab->pool, ab->ws, &b1) != 0) {
            fprintf(stderr, "bench_attn: %s: out of memory\n", kernel_names[kf]);
            return -1;
        }
        double e = 0;
        for (size_t i = 0; i < (size_t)o->heads * ATTN_DV; i++)
            e = fmax(e, fabs((double)ab->out[i] - ab->ref[i]));
        printf("check %s vs reference (N=1): max|err| %.2e %s\n", kernel_names[kf], e,
               e <= 2e-5 ? "ok" : "FAIL");
        if (!(e <= 2e-5))
            return -1;
    }
    return 0;
}

/* The first and last rows of the table, for the per-sequence slopes. */
typedef struct attn_ends {
    double tn1, tt1, tnL, ttL, td1, tdL;
    int n1, nL;
} attn_ends;

/* One row of the table: both kernels and the dense GEMM timed at N. */
static void time_row(attn_bench *ab, const attn_opts *o, int N, double bw, double t[3])
{
    attn_batch b = {.n_seq = N, .heads = o->heads, .scale = 1.0f / sqrtf((float)ATTN_DQK), .q = ab->q,
                    .seq = ab->seq, .out = ab->out};
    int reps[2];
    double tn = time_kernel(kernel_fns[0], ab->pool, ab->ws, &b, o->min_time_s, &reps[0]);
    double tt = time_kernel(kernel_fns[1], ab->pool, ab->ws, &b, o->min_time_s, &reps[1]);
    double td = time_dense(ab->pool, &ab->dense, ab->x, N, ab->hd, o->min_time_s);
    double bn = attn_bytes_naive(&b), bt = attn_bytes_tiled(&b);
    /* both kernels do the same arithmetic: per (row, head) a 576-dim
     * dot and a 512-dim axpy */
    double fl = 0;
    for (int n = 0; n < N; n++)
        fl += 2.0 * ab->seq[n].k * o->heads * (ATTN_DQK + ATTN_DV);
    printf("%4d | %9.3f %8.1f %7.1f %5.0f%% %7.1f | %9.3f %8.1f %7.1f %5.0f%% %7.1f | %6.2f | %8.3f\n",
           N, tn * 1e3, bn / 1e6, bn / tn / 1e9, 100 * bn / tn / bw, fl / tn / 1e9, tt * 1e3,
           bt / 1e6, bt / tt / 1e9, 100 * bt / tt / bw, fl / tt / 1e9, tn / tt, td * 1e3);
    fflush(stdout);
    t[0] = tn;
    t[1] = tt;
    t[2] = td;
}

static attn_ends run_table(attn_bench *ab, const attn_opts *o, double bw)
{
    printf("\n%4s | %9s %8s %7s %6s %7s | %9s %8s %7s %6s %7s | %6s | %8s\n", "N", "naive ms",
           "MB", "GB/s", "%copy", "GFLOP/s", "tiled ms", "MB", "GB/s", "%copy", "GFLOP/s", "n/t",
           "dense ms");
    attn_ends e = {NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};
    for (size_t i = 0; i < o->n_ns; i++) {
        int N = o->ns[i];
        double t[3];
        time_row(ab, o, N, bw, t);
        if (i == 0) {
            e.tn1 = t[0]; e.tt1 = t[1]; e.td1 = t[2]; e.n1 = N;
        }
        e.tnL = t[0]; e.ttL = t[1]; e.tdL = t[2]; e.nL = N;
    }
    return e;
}

static void print_slopes(const attn_bench *ab, const attn_opts *o, const attn_ends *e, double bw)
{
    if (e->nL > e->n1) {
        attn_batch one = {.n_seq = 1, .heads = o->heads, .seq = ab->seq};
        double bseq_n = attn_bytes_naive(&one), bseq_t = attn_bytes_tiled(&one);
        int dn = e->nL - e->n1;
        double sn = (e->tnL - e->tn1) / dn, st = (e->ttL - e->tt1) / dn, sd = (e->tdL - e->td1) / dn;
        printf("\nper-sequence slope (N=%d..%d): naive %.3f ms, tiled %.3f ms, dense %.3f ms\n", e->n1,
               e->nL, sn * 1e3, st * 1e3, sd * 1e3);
        printf("bandwidth-bound prediction (bytes/seq / copy bw): naive %.3f ms, tiled %.3f ms\n",
               bseq_n / bw * 1e3, bseq_t / bw * 1e3);
        printf("dense intercept (GEMM at N=%d): %.3f ms; weights read once: %.0f MB / copy bw = %.3f ms\n",
               e->n1, e->td1 * 1e3, (double)o->d_model * o->d_ff * 4 / 1e6,
               (double)o->d_model * o->d_ff * 4 / bw * 1e3);
    }
    printf("note: best of >=3 repetitions (>= %.2f s per kernel and N); the machine may be shared.\n",
           o->min_time_s);
}

int main(int argc, char **argv)
{
    attn_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    rc = 1;
    print_header(argc, argv, &o);
    attn_bench ab;
    if (attn_bench_init(&ab, &o) != 0)
        goto done;
    double bw = copy_bandwidth(ab.pool, (size_t)512 << 20);
    printf("copy bandwidth (memcpy 512 MB on %d threads, read+write): %.1f GB/s\n\n", o.threads, bw / 1e9);
    fill_inputs(&ab, &o);
    if (check_kernels(&ab, &o) != 0)
        goto done;
    attn_ends e = run_table(&ab, &o, bw);
    print_slopes(&ab, &o, &e, bw);
    rc = 0;
done:
    attn_bench_free(&ab);
    attn_opts_free(&o);
    return rc;
}
