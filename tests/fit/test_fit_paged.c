/* A paged run (fit/load_paged.c: one level read back at a time) against the
 * same run held whole: on a simulated multi-level run (fixed seed; failed
 * and warmup requests, a level-0 request written after every other level, a
 * request the load drops for its times, a truncated last line), in the list
 * form and packed (chunks_packed), with levels walked whole or streamed,
 * `fit --json`, `plan --json` and `compare --json` are byte-identical; the counts of what was left out the
 * same; a paged run's indices grouped level by level; a request pointer
 * kept past another level refused; the file cut after the load an LL_EIO
 * with a message, not a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "fit_internal.h"
#include "report.h"
#include "sim.h"
#include "testutil.h"

typedef struct loaded {
    fit_run *run;
    fit_result *res;
} loaded;

/* Levels past this many chunks are analysed as one time-ordered stream
 * (fit/stream.c), which holds a chunk buffer per open request: 0, the
 * default bound. */
static size_t stream_events;

static int load(const char *path, size_t bound, loaded *l)
{
    char err[512] = "";
    fit_options o;
    fit_options_default(&o);
    if (stream_events)
        o.stream_events = stream_events;
    memset(l, 0, sizeof *l);
    int rc = fit_load_run_opts(path, &(fit_load_opts){.resident_events = bound}, &l->run, err, sizeof err);
    if (rc == 0)
        rc = fit_analyze(l->run, &o, &l->res, err, sizeof err);
    CHECK(rc == 0, "%s (bound %zu): %s", path, bound, err);
    return rc;
}

static void unload(loaded *l)
{
    fit_result_free(l->res);
    fit_run_free(l->run);
}

/* The JSON text of o (taken), or NULL. */
static char *text_of(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *plan_text(const loaded *l)
{
    fit_plan_options o = {.slo = {.ttft_ms = 40, .tpot_ms = 8, .e2e_ms = 0}};
    fit_plan *p = NULL;
    char err[256];
    CHECK(fit_plan_compute(l->run, l->res, &o, &p, err, sizeof err) == 0, "plan: %s", err);
    char *s = p ? text_of(rpt_plan_to_json(p)) : NULL;
    fit_plan_free(p);
    return s;
}

static char *compare_text(const loaded *a, const loaded *b)
{
    fit_compare_options o;
    fit_compare *c = NULL;
    char err[256];
    fit_compare_options_default(&o);
    o.n_resamples = 200;
    CHECK(fit_compare_runs(a->run, a->res, b->run, b->res, &o, &c, err, sizeof err) == 0, "compare: %s", err);
    char *s = c ? text_of(rpt_compare_to_json(c)) : NULL;
    fit_compare_free(c);
    return s;
}

static void same_text(const char *what, char *x, char *y)
{
    CHECK(x && y && strcmp(x, y) == 0, "%s: held whole and paged differ", what);
    free(x);
    free(y);
}

/* The first level-0 request line of path, into buf. */
static int first_request_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && !found && fgets(buf, (int)cap, f))
        found = strstr(buf, "\"type\":\"request\"") && strstr(buf, "\"level\":0,") && strchr(buf, '\n');
    if (f)
        fclose(f);
    return found ? 0 : -1;
}

static int append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    int rc = f && fputs(text, f) >= 0 ? 0 : -1;
    if (f && fclose(f))
        rc = -1;
    return rc;
}

/* A run of 4 closed levels with failures and warmup; after every level, a
 * copy of a level-0 request and a request that ends before it is sent. */
static int write_run(const char *path, double b_ms, uint64_t seed)
{
    static char line[1 << 16];
    sim_cfg c;
    sim_stats st;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8};
    sim_set_levels(&c, cs, 4, 8);
    c.b_ms = b_ms;
    c.seed = seed;
    c.max_tokens = 40;
    c.jitter_frac = 0.1;
    c.fail_every = 9;
    c.warmup[1] = 1;
    if (sim_write(path, &c, &st) || first_request_line(path, line, sizeof line))
        return -1;
    return append(path, line) ||
           append(path, "{\"type\":\"request\",\"level\":2,\"status\":\"ok\",\"send_ns\":500,\"end_ns\":400}\n");
}

static void check_counts(const loaded *a, const loaded *b)
{
    const fit_run_info *x = fit_run_get_info(a->run), *y = fit_run_get_info(b->run);
    CHECK(x->n_truncated == 1 && y->n_truncated == 1, "truncated last line: %zu, %zu", x->n_truncated,
          y->n_truncated);
    CHECK(x->n_bad_requests == 1 && y->n_bad_requests == 1, "dropped request: %zu, %zu", x->n_bad_requests,
          y->n_bad_requests);
    CHECK(x->n_clamped == y->n_clamped, "clamped: %zu, %zu", x->n_clamped, y->n_clamped);
    CHECK(fit_run_n_requests(a->run) == fit_run_n_requests(b->run) && fit_run_n_requests(a->run) > 100,
          "requests: %zu, %zu", fit_run_n_requests(a->run), fit_run_n_requests(b->run));
    CHECK(a->res->n_failed == b->res->n_failed && a->res->n_failed > 0 && a->res->n_warmup == b->res->n_warmup &&
              a->res->n_warmup > 0,
          "failed %zu/%zu, warmup %zu/%zu", a->res->n_failed, b->res->n_failed, a->res->n_warmup, b->res->n_warmup);
}

/* A paged run's indices run level by level (the level-0 request written last
 * among level 0's); one held whole keeps file order (it is last). */
static void check_order(const loaded *whole, const loaded *paged)
{
    size_t n = fit_run_n_requests(paged->run), l = 0, breaks = 0;
    for (size_t i = 0; i < n; i++) {
        int level = fit_run_request(paged->run, i)->level;
        while (l < fit_run_n_levels(paged->run) && fit_run_level(paged->run, l)->level != level) {
            l++;
            breaks++;
        }
        CHECK(l < fit_run_n_levels(paged->run), "request %zu (level %d) out of the levels' order", i, level);
    }
    CHECK(breaks == 3, "4 levels, one range each: %zu breaks", breaks);
    CHECK(fit_run_request(whole->run, fit_run_n_requests(whole->run) - 1)->level == 0, "file order held whole");
    /* a pointer of level 3 kept while level 0 is read back is refused */
    const ll_rec_request *late = fit_run_request(paged->run, n - 1);
    fit_chunks ch = {0};
    CHECK(late->level == 3 && fit_chunks_of(paged->run, late, &ch) == 0 && ch.n == late->n_chunks && ch.n > 0,
          "last level's chunks");
    (void)fit_run_request(paged->run, 0);
    CHECK(fit_chunks_of(paged->run, late, &ch) == LL_EINVAL, "a pointer kept past another level is refused");
    fit_chunks_free(&ch);
}

/* Held whole and paged (bound 0), A and B: every output the same. */
static void compare_loads(const char *pa, const char *pb)
{
    loaded wa, wb, ga, gb;
    if (load(pa, FIT_RESIDENT_EVENTS, &wa) | load(pa, 0, &ga) | load(pb, FIT_RESIDENT_EVENTS, &wb) |
        load(pb, 0, &gb))
        return;
    CHECK(wa.run && ga.run && fit_run_request(wa.run, 0)->chunks && !fit_run_request(ga.run, 0)->chunks,
          "one held whole, one paged");
    CHECK(wa.res->law.ok && wa.res->n_levels == 4, "a law over 4 levels");
    check_counts(&wa, &ga);
    same_text("fit --json", text_of(rpt_fit_to_json(wa.res)), text_of(rpt_fit_to_json(ga.res)));
    same_text("plan --json", plan_text(&wa), plan_text(&ga));
    same_text("compare --json", compare_text(&wa, &wb), compare_text(&ga, &gb));
    check_order(&wa, &ga);
    unload(&wa);
    unload(&wb);
    unload(&ga);
    unload(&gb);
}

/* The file cut after a paged load: the analysis fails with LL_EIO and says
 * why. */
static void check_cut(const char *path)
{
    fit_run *run = NULL;
    fit_result *res = NULL;
    char err[512] = "";
    CHECK(fit_load_run_opts(path, &(fit_load_opts){0}, &run, err, sizeof err) == 0, "load: %s", err);
    if (!run)
        return;
    FILE *f = fopen(path, "r+");
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    CHECK(size > 0 && ftruncate(fileno(f), size / 2) == 0, "cut %s", path);
    if (f)
        fclose(f);
    err[0] = '\0';
    int rc = fit_analyze(run, NULL, &res, err, sizeof err);
    CHECK(rc == LL_EIO && !res && strstr(err, "changed after it was read") && strstr(err, "read the run again"),
          "cut file: rc %d, %s", rc, err);
    fit_result_free(res);
    fit_run_free(run);
}

int main(void)
{
    gsl_set_error_handler_off();
    char dir[] = "fit_paged_XXXXXX", a[64], b[64], ap[64], bp[64], cut[64];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(a, sizeof a, "%s/a.jsonl", dir);
    snprintf(b, sizeof b, "%s/b.jsonl", dir);
    snprintf(ap, sizeof ap, "%s/a_packed.jsonl", dir);
    snprintf(bp, sizeof bp, "%s/b_packed.jsonl", dir);
    snprintf(cut, sizeof cut, "%s/cut.jsonl", dir);
    char err[512] = "";
    ll_rec_convert_stats cs;
    CHECK(write_run(a, 0.75, 7) == 0 && write_run(b, 0.25, 8) == 0, "write runs");
    CHECK(ll_rec_convert(a, ap, 1, &cs, err, sizeof err) == 0 && cs.n_converted > 100 &&
              ll_rec_convert(b, bp, 1, &cs, err, sizeof err) == 0 && ll_rec_convert(a, cut, 1, &cs, err, sizeof err) == 0,
          "packed: %s", err);
    const char *tail = "{\"type\":\"request\",\"level\":1,\"sta";
    CHECK(append(a, tail) == 0 && append(b, tail) == 0 && append(ap, tail) == 0 && append(bp, tail) == 0,
          "truncated tails");
    compare_loads(a, b);
    compare_loads(ap, bp);
    stream_events = 200; /* every level streamed: each has more chunks */
    compare_loads(ap, bp);
    check_cut(cut);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (tu_fail == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
