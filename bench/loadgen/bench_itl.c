/* bench_itl.c: bench_loadgen's (3), ITL error against the bundled engine's
 * true step times at C=64 and C=1024: each chunk is matched to the latest
 * step end before its arrival; the true inter-token gap is the distance
 * between the two step ends, the measured one the distance between arrivals;
 * their difference is the client's (plus HTTP stack's) error. Chunks are read
 * back from the run's records (ll_rec_read); "measured ITL p50" is fit's
 * figure (fit.h). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "fit.h"
#include "loadgen.h"
#include "bench_loadgen.h"

/* A handoff record (the engine's handoff_sample): request id (the numeric
 * tail of X-Request-Id "loadlaw-<tag>-<id>"), token, and its times. */
typedef struct handoff {
    uint64_t id;
    int tok;
    int64_t step_end_ns, write_ns, send_ns;
} handoff;

typedef struct arrivals {
    int64_t epoch;
    LL_VEC(double) err_ms;   /* measured gap - true gap, per consecutive chunk pair */
    const int64_t *ends;
    size_t n_ends;
    LL_VEC(double) late_ms;
    LL_VEC(handoff) ho;      /* sorted by (id, tok) before the requests are read */
    LL_VEC(double) fanout_ms, lag_ms; /* step end -> write, write -> arrival */
    /* with the engine's send_ns: handed -> send() returned (MHD's pass), and
     * send() returned -> arrival (the wire and, with user stamps, the
     * client's read; a loopback packet is stamped inside the send, so a
     * kernel stamp comes microseconds before it returns: negative) */
    LL_VEC(double) pass_ms, wire_ms;
    size_t ho_matched;
    ll_rec_client client;    /* the level's level_end "client" */
} arrivals;

static int on_level_end(const ll_rec_level_end *le, void *ctx)
{
    ((arrivals *)ctx)->client = le->client;
    return 0;
}

static int on_handoff(const ll_rec_handoff *h, void *ctx)
{
    arrivals *a = ctx;
    const char *dash = strrchr(h->req, '-');
    if (strncmp(h->req, "loadlaw-", 8) != 0 || !dash)
        return 0;
    handoff x = {.id = strtoull(dash + 1, NULL, 10), .tok = h->tok, .step_end_ns = h->step_end_ns,
                 .write_ns = h->write_ns, .send_ns = h->send_ns};
    return ll_vec_push(&a->ho, x);
}

static int cmp_handoff(const void *x, const void *y)
{
    const handoff *p = x, *q = y;
    if (p->id != q->id)
        return p->id < q->id ? -1 : 1;
    return (p->tok > q->tok) - (p->tok < q->tok);
}

/* Split each sampled token's delay: server fan-out (its step's end to the
 * write) and client lag (the write to the chunk's arrival). */
static int match_handoffs(arrivals *a, const ll_rec_request *rq)
{
    handoff key = {.id = rq->id, .tok = 0};
    handoff *h = bsearch(&key, a->ho.v, a->ho.n, sizeof key, cmp_handoff);
    if (!h && a->ho.n > 0) { /* the first sample of this id need not be token 0 */
        size_t lo = 0, hi = a->ho.n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (a->ho.v[mid].id < rq->id)
                lo = mid + 1;
            else
                hi = mid;
        }
        h = lo < a->ho.n && a->ho.v[lo].id == rq->id ? &a->ho.v[lo] : NULL;
    }
    int64_t tok0 = 0; /* tokens before chunk i */
    for (size_t i = 0; h && i < rq->n_chunks; i++) {
        int64_t tok1 = tok0 + rq->chunks[i].tokens;
        while (h < a->ho.v + a->ho.n && h->id == rq->id && h->tok < tok1) {
            if (h->tok >= tok0) {
                int64_t arr = rq->chunks[i].t_ns;
                if (ll_vec_push(&a->fanout_ms, (double)(h->write_ns - h->step_end_ns) / 1e6) ||
                    ll_vec_push(&a->lag_ms, (double)(arr - h->write_ns) / 1e6))
                    return LL_ENOMEM;
                if (h->send_ns >= 0 && (ll_vec_push(&a->pass_ms, (double)(h->send_ns - h->write_ns) / 1e6) ||
                                        ll_vec_push(&a->wire_ms, (double)(arr - h->send_ns) / 1e6)))
                    return LL_ENOMEM;
                a->ho_matched++;
            }
            h++;
        }
        tok0 = tok1;
    }
    return 0;
}

/* The machine's own timer-wake lateness while the level runs: how late an
 * absolute-deadline sleep of 1 ms wakes (clock_nanosleep TIMER_ABSTIME). */
typedef struct waker {
    pthread_t th;
    atomic_int stop;
    LL_VEC(double) late_us;
} waker;

static void *waker_main(void *arg)
{
    waker *w = arg;
    int64_t next = ll_now_ns();
    while (!atomic_load(&w->stop)) {
        next += 1000000;
        struct timespec ts = {.tv_sec = next / 1000000000LL, .tv_nsec = next % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        int64_t now = ll_now_ns();
        if (ll_vec_push(&w->late_us, (double)(now - next) / 1e3))
            break;
        if (now > next + 1000000)
            next = now; /* fell behind: measure the next sleep, not the backlog */
    }
    return NULL;
}

static size_t step_of(const arrivals *a, int64_t t)
{
    size_t lo = 0, hi = a->n_ends;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (a->ends[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    arrivals *a = ctx;
    if (a->ho.n > 0 && match_handoffs(a, rq))
        return LL_ENOMEM;
    int64_t prev_t = -1;
    size_t prev_s = 0;
    for (size_t i = 0; i < rq->n_chunks; i++) {
        int64_t t = a->epoch + rq->chunks[i].t_ns;
        size_t s = step_of(a, t);
        if (ll_vec_push(&a->late_ms, (double)(t - a->ends[s]) / 1e6))
            return LL_ENOMEM;
        if (prev_t >= 0 && s > prev_s) {
            double meas = (double)(t - prev_t), truth = (double)(a->ends[s] - a->ends[prev_s]);
            if (ll_vec_push(&a->err_ms, (meas - truth) / 1e6))
                return LL_ENOMEM;
        }
        prev_t = t;
        prev_s = s;
    }
    return 0;
}

/* fit's ITL p50 of the run's first level (NAN when fit cannot say). */
static double fit_itl_p50(const char *dir)
{
    fit_run *fr = NULL;
    fit_result *res = NULL;
    fit_options o;
    char err[256];
    double p50 = NAN;
    fit_options_default(&o);
    if (fit_load_run(dir, &fr, err, sizeof err) == 0 && fit_analyze(fr, &o, &res, err, sizeof err) == 0 &&
        res->n_levels > 0)
        p50 = res->levels[0].itl.p50_ms;
    fit_result_free(res);
    fit_run_free(fr);
    return p50;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* One level of C streams on the in-process engine `spec`: the engine, the
 * scenario, the records the run writes, and the waker beside it. */
typedef struct itl_level {
    int C;
    const char *spec, *stamp; /* stamp: the client's load.arrival_stamp ("kernel" or "user") */
    eng_config ec;
    eng_engine *eng;
    scn_scenario *scn;
    scn_prompts *pr;
    ll_rec_writer *rec;
    size_t step0;  /* the engine's step count before the run */
    int64_t epoch; /* the records' time origin */
    waker wk;
    char err[512], dir[128], path[256];
} itl_level;

/* The engine, the scenario and the records file: 0, or an error (in lv->err). */
static int itl_setup(itl_level *lv, int max_tokens, int threads)
{
    char json[512];
    snprintf(lv->dir, sizeof lv->dir, "/tmp/lg_bench_%d", (int)getpid());
    snprintf(json, sizeof json,
             "{\"load\":{\"threads\":%d,\"arrival_stamp\":\"%s\"},\"levels\":[{\"concurrency\":%d,"
             "\"requests\":%d}],\"request\":{\"max_tokens\":%d}}",
             threads, lv->stamp, lv->C, lv->C, max_tokens);
    eng_config_default(&lv->ec);
    int rc = eng_parse_spec(lv->spec, &lv->ec, lv->err, sizeof lv->err);
    rc = rc ? rc : eng_start(&lv->ec, &lv->eng, lv->err, sizeof lv->err);
    rc = rc ? rc : scn_load_string(json, "bench", &lv->scn, lv->err, sizeof lv->err);
    rc = rc ? rc : scn_prompts_load(lv->scn, &lv->pr, lv->err, sizeof lv->err);
    snprintf(lv->path, sizeof lv->path, "%s/records.jsonl", lv->dir);
    rc = rc ? rc : ll_mkdir_p(lv->dir, lv->err, sizeof lv->err);
    rc = rc ? rc : ll_rec_open(lv->path, 0, &lv->rec, lv->err, sizeof lv->err);
    lv->step0 = lv->eng ? eng_step_count(lv->eng) : 0;
    return rc;
}

/* The measured run: loadgen's sweep of the level against the engine, which
 * writes its handoff records into the same file, with the waker running
 * beside it. Closes the records. rc: setup's result (nothing runs unless 0). */
static int itl_sweep(itl_level *lv, int rc)
{
    lg_run *run = NULL;
    lg_config lc = {.scn = lv->scn, .prompts = lv->pr, .url = lv->eng ? eng_url(lv->eng) : "",
                    .model = lv->ec.model, .records = lv->rec};
    rc = rc ? rc : lg_run_create(&lc, &run, lv->err, sizeof lv->err);
    if (!rc && lv->eng)
        eng_set_records(lv->eng, lv->rec);
    int wk_started = !rc && pthread_create(&lv->wk.th, NULL, waker_main, &lv->wk) == 0;
    rc = rc ? rc : lg_run_sweep(run, lv->err, sizeof lv->err);
    if (wk_started) {
        atomic_store(&lv->wk.stop, 1);
        pthread_join(lv->wk.th, NULL);
    }
    if (lv->eng)
        eng_set_records(lv->eng, NULL);
    if (lv->rec)
        lv->epoch = ll_rec_epoch_ns(lv->rec);
    lg_run_free(run);
    if (ll_rec_close(lv->rec) && rc == 0) {
        rc = LL_EIO;
        snprintf(lv->err, sizeof lv->err, "writing the records failed");
    }
    return rc;
}

/* The engine's true step times over the run. */
typedef struct itl_steps {
    int64_t *ends;   /* each step's end, sorted (a->ends points here) */
    int n_max;       /* the fullest batch: at C = 4096 on 2 cores it can stay under C */
    double mean_ms;  /* mean step of the batches within 90% of the fullest */
} itl_steps;

/* Reads the level's steps from the engine into s and a: 0, or -1 out of memory. */
static int itl_load_steps(const itl_level *lv, arrivals *a, itl_steps *s)
{
    size_t ns = eng_step_count(lv->eng) - lv->step0, got = 0, k;
    eng_step *st = calloc(ns + 1, sizeof *st);
    s->ends = calloc(ns + 1, sizeof *s->ends);
    if (!st || !s->ends) {
        free(st);
        return -1;
    }
    while (got < ns && (k = eng_steps(lv->eng, lv->step0 + got, st + got, ns - got)) > 0)
        got += k;
    double step_sum = 0;
    size_t n_full = 0;
    s->n_max = 0;
    for (size_t i = 0; i < got; i++)
        s->n_max = st[i].n_decode > s->n_max ? st[i].n_decode : s->n_max;
    for (size_t i = 0; i < got; i++) {
        s->ends[i] = st[i].start_ns + st[i].dur_ns;
        if (st[i].n_decode >= s->n_max * 9 / 10) {
            step_sum += (double)st[i].dur_ns / 1e6;
            n_full++;
        }
    }
    s->mean_ms = n_full ? step_sum / (double)n_full : NAN;
    free(st);
    qsort(s->ends, got, sizeof *s->ends, cmp_i64);
    a->ends = s->ends;
    a->n_ends = got;
    return 0;
}

/* The records read back: the handoffs first (sorted, for matching), then each
 * request's chunks against the step ends. 0 when there are gaps to report. */
static int itl_read_records(itl_level *lv, arrivals *a)
{
    ll_rec_handlers h0 = {.on_handoff = on_handoff, .on_level_end = on_level_end};
    if (ll_rec_read(lv->path, &h0, a, NULL, lv->err, sizeof lv->err) == 0 && a->ho.n > 0)
        qsort(a->ho.v, a->ho.n, sizeof *a->ho.v, cmp_handoff);
    ll_rec_handlers h = {.on_request = on_request};
    if (ll_rec_read(lv->path, &h, a, NULL, lv->err, sizeof lv->err) == 0 && a->err_ms.n > 0)
        return 0;
    return -1;
}

/* The level's first lines: the true step against fit's ITL, the ITL error and
 * the arrival delay after each step's end. */
static void print_itl_error(const itl_level *lv, arrivals *a, const itl_steps *s)
{
    size_t n = a->err_ms.n;
    double *abs_err = malloc(n * sizeof *abs_err);
    for (size_t i = 0; abs_err && i < n; i++)
        abs_err[i] = fabs(a->err_ms.v[i]);
    ll_sort_doubles(a->err_ms.v, n);
    ll_sort_doubles(a->late_ms.v, a->late_ms.n);
    if (abs_err)
        ll_sort_doubles(abs_err, n);
    printf("C=%-5d %s, %s stamps: %zu gaps; true step (N >= 0.9 x the fullest batch, %d) mean %.3f ms; "
           "measured ITL p50 %.3f ms\n", lv->C, lv->spec, lv->stamp, n, s->n_max, s->mean_ms,
           fit_itl_p50(lv->dir));
    printf("        ITL error (measured - true): p50 %+.3f ms, p99 %+.3f ms; |error| p50 %.3f ms, p99 %.3f ms\n",
           ll_quantile_sorted(a->err_ms.v, n, 0.5), ll_quantile_sorted(a->err_ms.v, n, 0.99),
           abs_err ? ll_quantile_sorted(abs_err, n, 0.5) : NAN, abs_err ? ll_quantile_sorted(abs_err, n, 0.99) : NAN);
    printf("        arrival after step end: p50 %.3f ms, p99 %.3f ms (server write + loopback + client read)\n",
           ll_quantile_sorted(a->late_ms.v, a->late_ms.n, 0.5), ll_quantile_sorted(a->late_ms.v, a->late_ms.n, 0.99));
    free(abs_err);
}

/* Where a sampled token's delay went: the engine's fan-out, then the way to
 * the stamp, and (with the engine's send time) MHD's pass and the client's lag. */
static void print_split(arrivals *a, const char *stamp)
{
    if (a->ho_matched == 0) {
        printf("        split: no handoff record matched a request (engine without handoff_sample?)\n");
        return;
    }
    int user = strcmp(stamp, "user") == 0;
    ll_sort_doubles(a->fanout_ms.v, a->fanout_ms.n);
    ll_sort_doubles(a->lag_ms.v, a->lag_ms.n);
    printf("        split (%zu sampled tokens of %zu handoff records): engine fan-out (step end -> "
           "handed to MHD) p50 %.3f ms, p99 %.3f ms; then to the stamp (MHD's next pass and send, loopback%s) "
           "p50 %.3f ms, p99 %.3f ms\n",
           a->ho_matched, a->ho.n, ll_quantile_sorted(a->fanout_ms.v, a->fanout_ms.n, 0.5),
           ll_quantile_sorted(a->fanout_ms.v, a->fanout_ms.n, 0.99), user ? ", the client's read" : "",
           ll_quantile_sorted(a->lag_ms.v, a->lag_ms.n, 0.5), ll_quantile_sorted(a->lag_ms.v, a->lag_ms.n, 0.99));
    if (a->wire_ms.n == 0)
        return;
    ll_sort_doubles(a->pass_ms.v, a->pass_ms.n);
    ll_sort_doubles(a->wire_ms.v, a->wire_ms.n);
    printf("        of which (%zu with the engine's send time): MHD's pass (handed -> its send() "
           "returned) p50 %.3f ms, p99 %.3f ms; client lag (send() returned -> arrival%s) "
           "p50 %+.4f ms, p99 %+.4f ms\n",
           a->wire_ms.n, ll_quantile_sorted(a->pass_ms.v, a->pass_ms.n, 0.5),
           ll_quantile_sorted(a->pass_ms.v, a->pass_ms.n, 0.99),
           user ? ", the client's read" : ", the kernel's stamp",
           ll_quantile_sorted(a->wire_ms.v, a->wire_ms.n, 0.5),
           ll_quantile_sorted(a->wire_ms.v, a->wire_ms.n, 0.99));
}

/* The client's own figures from the level_end record, and the machine's
 * timer-wake lateness during the run. */
static void print_client(const arrivals *a, waker *wk)
{
    const ll_rec_client *c = &a->client;
    if (c->present && c->reads > 0)
        printf("        client: %.1f%% of %llu reads kernel-stamped; read lag (stamp -> the worker's "
               "callback) p50 %.3f ms, p99 %.3f ms, max %.3f ms; worker CPU %.2f us per event\n",
               c->reads_kstamp > 0 ? 100.0 * (double)c->reads_kstamp / (double)c->reads : 0.0,
               (unsigned long long)c->reads, c->read_lag_p50_ms, c->read_lag_p99_ms, c->read_lag_max_ms,
               c->events ? c->cpu_s_sum / (double)c->events * 1e6 : NAN);
    if (wk->late_us.n > 0) {
        ll_sort_doubles(wk->late_us.v, wk->late_us.n);
        printf("        this machine's timer-wake lateness in the same run (1 ms absolute sleeps, %zu): "
               "p50 %.3f ms, p99 %.3f ms\n",
               wk->late_us.n, ll_quantile_sorted(wk->late_us.v, wk->late_us.n, 0.5) / 1e3,
               ll_quantile_sorted(wk->late_us.v, wk->late_us.n, 0.99) / 1e3);
    }
}

static void arrivals_free(arrivals *a)
{
    ll_vec_free(&a->err_ms);
    ll_vec_free(&a->late_ms);
    ll_vec_free(&a->ho);
    ll_vec_free(&a->fanout_ms);
    ll_vec_free(&a->lag_ms);
    ll_vec_free(&a->pass_ms);
    ll_vec_free(&a->wire_ms);
}

/* The engine stopped, the scenario freed and the run's folder removed. */
static void itl_teardown(itl_level *lv)
{
    char cmd[512];
    ll_vec_free(&lv->wk.late_us);
    if (lv->eng)
        eng_stop(lv->eng);
    scn_prompts_free(lv->pr);
    scn_free(lv->scn);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", lv->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup failed\n");
}

/* One level of C streams on the in-process engine `spec`; stamp: the
 * client's load.arrival_stamp ("kernel" or "user"). */
void bench_itl(int C, const char *spec, int max_tokens, int threads, const char *stamp)
{
    itl_level lv = {.C = C, .spec = spec, .stamp = stamp};
    int rc = itl_sweep(&lv, itl_setup(&lv, max_tokens, threads));
    if (rc) {
        fprintf(stderr, "bench C=%d: %s\n", C, lv.err);
        itl_teardown(&lv);
        return;
    }
    arrivals a = {.epoch = lv.epoch};
    itl_steps s = {0};
    if (itl_load_steps(&lv, &a, &s) == 0 && itl_read_records(&lv, &a) == 0) {
        print_itl_error(&lv, &a, &s);
        print_split(&a, stamp);
        print_client(&a, &lv.wk);
    }
    free(s.ends);
    arrivals_free(&a);
    itl_teardown(&lv);
}
