/* test_mpi.c: `mpirun -np K loadlaw sweep` on one host, against
 * the bundled synthetic engine hosted by rank 0, checked from the records:
 *  - K = 2 and 4: the run line says ranks K; every level has its n_requests
 *    requests once each (ids unique), from every rank 0..K-1; the clock
 *    records are there for every rank and level; the merged D(t) reaches C
 *    (fit's ramp is finite); the law fitted on the merged records agrees with
 *    a 1-process run of the same sweep (the 95% intervals of a and b overlap).
 *  - K = 4 with LOADLAW_TEST_CLOCK_SKEW_NS: ranks > 0 read their clock 2 s
 *    ahead. On one host the true offset is 0, so each recorded offset must be
 *    the skew to within its measured round trip, and each rank's first send
 *    of a level must sit by rank 0's on the merged timeline (2 s uncorrected).
 *  - A rank that dies mid-level (LOADLAW_TEST_RANK_EXIT=1:1, with mpirun told
 *    not to kill the job itself): exit 1, stderr names rank 1 and level 1,
 *    and level 0 is complete in records.jsonl.
 *  - K = 3, rank 1 silent after its level-1 summary (LOADLAW_TEST_RANK_HANG):
 *    named, and level 1 keeps every request of ranks 0 and 2.
 * argv: loadlaw, mpirun, scratch folder. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "fit.h"
#include "testutil.h"
#include "tsupport.h"

#define MAX_LEVELS 8
#define MAX_REQ 4096
#define SKEW_NS 2000000000LL
static const char *g_loadlaw, *g_mpirun, *g_tmp;

/* The sweep every run makes: C = 2, 4, 8 with enough rounds for a law. */
#define SWEEP_ARGS "sweep", "--engine", "backend=synthetic,law=52+30n,time_scale=0.05", "-c", "2,4,8", \
                   "-n", "24", "--max-tokens", "48", "--threads", "1", "-q", "--no-report"

/* fork/exec args with stderr into errfile; exit status (128+sig if killed). */
static int run(char *const args[], const char *errfile)
{
    fflush(stdout); /* or the child's exit would print our buffer again */
    pid_t p = fork();
    if (p == 0) {
        FILE *e = freopen(errfile, "w", stderr);
        FILE *o = freopen("/dev/null", "w", stdout);
        (void)e;
        (void)o;
        execv(args[0], args);
        _exit(127);
    }
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int file_has(const char *path, const char *needle)
{
    char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* ---- what a run's records.jsonl holds -------------------------------------- */

typedef struct seen {
    int ranks;
    int n_levels;
    int planned[MAX_LEVELS], concurrency[MAX_LEVELS], ended[MAX_LEVELS], ended_ok[MAX_LEVELS];
    int64_t start_ns[MAX_LEVELS];
    int64_t agreed_ns[MAX_LEVELS]; /* the agreed start (clock records; -1 none) */
    int n_req[MAX_LEVELS], by_rank[MAX_LEVELS][8];
    int64_t first_send[MAX_LEVELS][8];
    uint64_t ids[MAX_REQ];
    size_t n_ids;
    int n_clock[MAX_LEVELS];
    int clock_bad;             /* offsets off the expected by more than their rtt */
    int64_t worst_err_ns, worst_rtt_ns;
    int64_t skew_ns;
} seen;

static int on_run(const ll_rec_run *r, void *ctx)
{
    ((seen *)ctx)->ranks = r->ranks;
    return 0;
}

static int on_level(const ll_rec_level *lv, void *ctx)
{
    seen *s = ctx;
    if (lv->level < 0 || lv->level >= MAX_LEVELS)
        return 0;
    s->planned[lv->level] = lv->n_requests;
    s->concurrency[lv->level] = lv->concurrency;
    s->start_ns[lv->level] = lv->start_ns;
    if (lv->level + 1 > s->n_levels)
        s->n_levels = lv->level + 1;
    return 0;
}

static int on_level_end(const ll_rec_level_end *le, void *ctx)
{
    seen *s = ctx;
    if (le->level >= 0 && le->level < MAX_LEVELS) {
        s->ended[le->level] = 1;
        s->ended_ok[le->level] = le->ok;
    }
    return 0;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    seen *s = ctx;
    if (rq->level < 0 || rq->level >= MAX_LEVELS || rq->rank < 0 || rq->rank >= 8 || s->n_ids == MAX_REQ)
        return 0;
    s->n_req[rq->level]++;
    s->by_rank[rq->level][rq->rank]++;
    int64_t *f = &s->first_send[rq->level][rq->rank];
    if (*f == 0 || rq->send_ns < *f)
        *f = rq->send_ns;
    s->ids[s->n_ids++] = rq->id;
    return 0;
}

static int on_clock(const ll_rec_clock *ck, void *ctx)
{
    seen *s = ctx;
    if (ck->level < 0 || ck->level >= MAX_LEVELS)
        return 0;
    s->n_clock[ck->level]++;
    s->agreed_ns[ck->level] = ck->start_ns;
    int64_t e = llabs(ck->offset_ns - s->skew_ns);
    if (e > ck->rtt_ns)
        s->clock_bad++;
    if (e > s->worst_err_ns)
        s->worst_err_ns = e;
    if (ck->rtt_ns > s->worst_rtt_ns)
        s->worst_rtt_ns = ck->rtt_ns;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int read_run(const char *dir, int64_t skew_ns, seen *s)
{
    char path[512], err[512] = "";
    ll_rec_handlers h = {.on_run = on_run, .on_level = on_level, .on_level_end = on_level_end,
                         .on_request = on_request, .on_clock = on_clock};
    memset(s, 0, sizeof *s);
    for (int L = 0; L < MAX_LEVELS; L++)
        s->agreed_ns[L] = -1;
    s->skew_ns = skew_ns;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    int rc = ll_rec_read(path, &h, s, NULL, err, sizeof err);
    CHECK(rc == 0, "%s: %s", path, err);
    return rc;
}

/* The law of a run, from fit (what `loadlaw fit` prints); ramps in ramp_s. */
static int law_of(const char *dir, fit_law *law, double *ramp_s, size_t *n_levels)
{
    char err[512] = "";
    fit_run *fr = NULL;
    fit_result *res = NULL;
    fit_options opt;
    fit_options_default(&opt);
    int rc = fit_load_run(dir, &fr, err, sizeof err);
    if (!rc)
        rc = fit_analyze(fr, &opt, &res, err, sizeof err);
    CHECK(rc == 0, "fit %s: %s", dir, err);
    if (!rc) {
        *law = res->law;
        *n_levels = res->n_levels < MAX_LEVELS ? res->n_levels : MAX_LEVELS;
        for (size_t i = 0; i < *n_levels; i++)
            ramp_s[i] = res->levels[i].ramp_s;
    }
    fit_result_free(res);
    fit_run_free(fr);
    return rc;
}

static int overlap(const double a[2], const double b[2]) { return a[0] <= b[1] && b[0] <= a[1]; }

/* ---- the runs --------------------------------------------------------------- */

/* fault: a test key that fails a rank (LOADLAW_TEST_RANK_EXIT=R:L or
 * LOADLAW_TEST_RANK_HANG=R:L); mpirun is then told not to end the job
 * itself when a process exits non-zero, so rank 0 can name the rank.
 * Otherwise mpirun's default (1) is kept and its exit status is the job's. */
static int mpirun_sweep(int k, const char *dir, const char *errfile, const char *skew, const char *fault)
{
    char np[16], skew_env[64], abort_on[4];
    snprintf(np, sizeof np, "%d", k);
    snprintf(skew_env, sizeof skew_env, "LOADLAW_TEST_CLOCK_SKEW_NS=%s", skew ? skew : "0");
    snprintf(abort_on, sizeof abort_on, "%d", fault ? 0 : 1);
    char *args[] = {(char *)g_mpirun, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", abort_on,
                    "-x", skew_env, "-x", fault ? (char *)fault : "LOADLAW_TEST_RANK_EXIT=",
                    "-x", "LOADLAW_MPI_WAIT_S=5", "-np", np, (char *)g_loadlaw, SWEEP_ARGS, "-o", (char *)dir, NULL};
    return run(args, errfile);
}

static void check_merged(const char *what, const seen *s, int k)
{
    CHECK(s->ranks == k, "%s: run line ranks %d, want %d", what, s->ranks, k);
    CHECK(s->n_levels == 3, "%s: %d levels", what, s->n_levels);
    for (int L = 0; L < s->n_levels; L++) {
        CHECK(s->ended[L], "%s: level %d has no level_end", what, L);
        CHECK(s->n_req[L] == s->planned[L], "%s: level %d: %d requests, planned %d", what, L, s->n_req[L],
              s->planned[L]);
        CHECK(s->ended_ok[L] == s->n_req[L], "%s: level %d: level_end ok %d of %d", what, L, s->ended_ok[L],
              s->n_req[L]);
        CHECK(s->n_clock[L] == k - 1, "%s: level %d: %d clock records", what, L, s->n_clock[L]);
        int want_ranks = s->concurrency[L] < k ? s->concurrency[L] : k;
        for (int r = 0; r < want_ranks; r++)
            CHECK(s->by_rank[L][r] > 0, "%s: level %d: nothing from rank %d", what, L, r);
        /* every rank started at the agreed moment on rank 0's clock: not
         * before it (the clock records' start; rank 0's own level start is
         * as late as its wake-up, which on 2 oversubscribed cores under ASan
         * was over 1 ms), and near rank 0's first send */
        if (k > 1)
            CHECK(s->agreed_ns[L] >= 0 && s->start_ns[L] >= s->agreed_ns[L] - 1000000 &&
                      s->start_ns[L] - s->agreed_ns[L] < 1000000000,
                  "%s: level %d: rank 0 started %.3f ms after the agreed start", what, L,
                  (double)(s->start_ns[L] - s->agreed_ns[L]) / 1e6);
        for (int r = 1; r < want_ranks; r++) {
            int64_t d = s->first_send[L][r] - s->first_send[L][0];
            /* 500 ms: a rank held up by the host is not a skew; an
             * uncorrected clock (SKEW_NS) is 2 s off */
            CHECK(llabs(d) < 500000000, "%s: level %d: rank %d's first send %.3f ms from rank 0's", what, L, r,
                  (double)d / 1e6);
            CHECK(s->agreed_ns[L] >= 0 && s->first_send[L][r] >= s->agreed_ns[L] - 1000000,
                  "%s: level %d: rank %d sent %.3f ms before the agreed start", what, L, r,
                  (double)(s->agreed_ns[L] - s->first_send[L][r]) / 1e6);
        }
    }
    uint64_t ids[MAX_REQ];
    memcpy(ids, s->ids, s->n_ids * sizeof *ids);
    qsort(ids, s->n_ids, sizeof *ids, cmp_u64);
    int dup = 0;
    for (size_t i = 1; i < s->n_ids; i++)
        dup += ids[i] == ids[i - 1];
    CHECK(dup == 0, "%s: %d duplicate request ids", what, dup);
    CHECK(s->clock_bad == 0, "%s: %d clock offsets off by more than their round trip (worst %lld ns, rtt %lld)",
          what, s->clock_bad, (long long)s->worst_err_ns, (long long)s->worst_rtt_ns);
}

/* The merged law against the 1-process one: their intervals overlap. That
 * is real time measured by K processes on 2 cores: on a host whose cores
 * are all busy a run's law can shift (np 2: a 2.10 [1.79, 2.41] ms against
 * 2.62 [2.59, 2.64] with three busy loops beside ctest), so a miss before
 * the last attempt is a note and the run is made again (main); a merge that
 * is wrong misses every time. 1 when it missed. */
static int check_law(const char *what, const char *dir, const fit_law *one, int last)
{
    fit_law law;
    double ramp[MAX_LEVELS];
    size_t n = 0;
    if (law_of(dir, &law, ramp, &n))
        return 0;
    for (size_t i = 0; i < n; i++)
        CHECK(isfinite(ramp[i]), "%s: level %zu: merged D(t) never reached C", what, i);
    CHECK(law.ok, "%s: no law", what);
    if (!law.ok || !one->ok)
        return 0;
    printf("%s: a = %.2f [%.2f, %.2f] ms, b = %.3f [%.3f, %.3f] ms (1 process: a = %.2f [%.2f, %.2f], "
           "b = %.3f [%.3f, %.3f])\n", what, law.a_ms, law.a_ci_ms[0], law.a_ci_ms[1], law.b_ms, law.b_ci_ms[0],
           law.b_ci_ms[1], one->a_ms, one->a_ci_ms[0], one->a_ci_ms[1], one->b_ms, one->b_ci_ms[0],
           one->b_ci_ms[1]);
    int ok = overlap(law.a_ci_ms, one->a_ci_ms) && overlap(law.b_ci_ms, one->b_ci_ms);
    if (!ok && !last) {
        printf("%s: an interval misses the 1-process one: run again\n", what);
        return 1;
    }
    CHECK(overlap(law.a_ci_ms, one->a_ci_ms), "%s: a's interval misses the 1-process one", what);
    CHECK(overlap(law.b_ci_ms, one->b_ci_ms), "%s: b's interval misses the 1-process one", what);
    return 0;
}

int main(int argc, char **argv)
{
    char dir[512], errf[512], path[600];
    seen s;
    if (argc < 4) {
        fprintf(stderr, "usage: test_mpi LOADLAW MPIRUN SCRATCH\n");
        return 2;
    }
    g_loadlaw = argv[1];
    g_mpirun = argv[2];
    g_tmp = argv[3];
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1); /* CI runs as root */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    /* a fresh scratch folder: a sweep refuses a run folder that already
     * holds records (an earlier run of this test) */
    tu_rmtree(g_tmp);
    if (mkdir(g_tmp, 0755) != 0 && access(g_tmp, W_OK) != 0) {
        fprintf(stderr, "test_mpi: cannot use %s\n", g_tmp);
        return 1;
    }

    /* 1 process: the reference law */
    fit_law one = {0};
    double ramp[MAX_LEVELS];
    size_t n = 0;
    snprintf(dir, sizeof dir, "%s/k1", g_tmp);
    snprintf(errf, sizeof errf, "%s/k1.err", g_tmp);
    char *a1[] = {(char *)g_loadlaw, SWEEP_ARGS, "-o", dir, NULL};
    int rc = run(a1, errf);
    CHECK(rc == 0, "1 process: exit %d (see %s)", rc, errf);
    if (rc == 0 && law_of(dir, &one, ramp, &n) == 0)
        CHECK(one.ok, "1 process: no law");

    /* Under the sanitizer build, Open MPI's own allocations are still live at
     * exit (in components it dlcloses in MPI_Finalize, so their frames cannot
     * be named in a suppression): leak checking stays on for the 1-process
     * run above and is off for the ranks. ASan's other checks stay on. */
    const char *asan = getenv("ASAN_OPTIONS");
    char asan_ranks[512];
    snprintf(asan_ranks, sizeof asan_ranks, "%s%sdetect_leaks=0", asan ? asan : "", asan && asan[0] ? ":" : "");
    setenv("ASAN_OPTIONS", asan_ranks, 1);

    /* K = 2, K = 4 (skewed clocks) */
    static const struct { int k; const char *skew; } runs[] = {{2, NULL}, {4, "2000000000"}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        char what[32];
        int k = runs[i].k, attempt = 0;
        const char *skew = runs[i].skew;
        snprintf(what, sizeof what, "np %d%s", k, skew ? " skewed" : "");
        do { /* again when only the law missed, up to 3 runs (check_law) */
            snprintf(dir, sizeof dir, "%s/k%d-%d", g_tmp, k, ++attempt);
            snprintf(errf, sizeof errf, "%s/k%d-%d.err", g_tmp, k, attempt);
            rc = mpirun_sweep(k, dir, errf, skew, NULL);
            CHECK(rc == 0, "%s: exit %d (see %s)", what, rc, errf);
            if (rc != 0 || read_run(dir, skew ? SKEW_NS : 0, &s))
                break;
            check_merged(what, &s, k);
            printf("%s: clock offsets within %lld ns of the truth, round trips up to %lld ns\n", what,
                   (long long)s.worst_err_ns, (long long)s.worst_rtt_ns);
            for (int r = 1; r < k; r++) {
                snprintf(path, sizeof path, "%s/rank-%d.jsonl", dir, r);
                CHECK(access(path, R_OK) == 0, "%s: no %s", what, path);
            }
        } while (check_law(what, dir, &one, attempt == 3));
    }

    /* A secret passed as a header, not --api-key: every rank sends it whole
     * (rank 0's scenario text redacts it; the job carries it as is) */
    snprintf(dir, sizeof dir, "%s/hdr", g_tmp);
    snprintf(errf, sizeof errf, "%s/hdr.err", g_tmp);
    {
        char *args[] = {(char *)g_mpirun, "--oversubscribe", "-x", "LOADLAW_MPI_WAIT_S=5", "-np", "2",
                        (char *)g_loadlaw, "sweep", "--engine",
                        "backend=synthetic,law=5+1n,time_scale=0.2,api_key=sk-mpi-test-KEY", "--header",
                        "Authorization: Bearer sk-mpi-test-KEY", "-c", "2", "-n", "8", "--max-tokens", "4",
                        "--threads", "1", "-q", "--no-report", "-o", dir, NULL};
        rc = run(args, errf);
        CHECK(rc == 0, "header key: exit %d (see %s)", rc, errf);
        if (read_run(dir, 0, &s) == 0)
            CHECK(s.n_req[0] == 8 && s.ended_ok[0] == 8 && s.by_rank[0][1] > 0,
                  "header key: %d requests, %d ok, %d from rank 1 (a redacted key gets 401)", s.n_req[0],
                  s.ended_ok[0], s.by_rank[0][1]);
    }

    /* a rank that dies in level 1 */
    snprintf(dir, sizeof dir, "%s/dead", g_tmp);
    snprintf(errf, sizeof errf, "%s/dead.err", g_tmp);
    rc = mpirun_sweep(2, dir, errf, NULL, "LOADLAW_TEST_RANK_EXIT=1:1");
    CHECK(rc == 1, "dead rank: exit %d, want 1 (see %s)", rc, errf);
    CHECK(file_has(errf, "rank 1 did not report level 1"), "dead rank: stderr does not name it (see %s)", errf);
    if (read_run(dir, 0, &s) == 0) {
        CHECK(s.ended[0] && s.n_req[0] == s.planned[0] && s.ended_ok[0] == s.planned[0],
              "dead rank: level 0 not intact (%d of %d requests, ended %d)", s.n_req[0], s.planned[0], s.ended[0]);
        CHECK(s.by_rank[0][1] > 0, "dead rank: level 0 lacks rank 1's requests");
    }

    /* of three, rank 1 cut off between its level-1 summary and its records:
     * named, and rank 2, behind it in rank 0's gathering, keeps its level */
    snprintf(dir, sizeof dir, "%s/hang", g_tmp);
    snprintf(errf, sizeof errf, "%s/hang.err", g_tmp);
    rc = mpirun_sweep(3, dir, errf, NULL, "LOADLAW_TEST_RANK_HANG=1:1");
    CHECK(rc == 1, "hung rank: exit %d, want 1 (see %s)", rc, errf);
    CHECK(file_has(errf, "rank 1 did not send the records of level 1"), "hung rank: stderr does not name it "
          "(see %s)", errf);
    if (read_run(dir, 0, &s) == 0) {
        CHECK(s.ended[0] && s.n_req[0] == s.planned[0], "hung rank: level 0 not intact (%d of %d requests)",
              s.n_req[0], s.planned[0]);
        /* C = 4 over three ranks is 2, 1, 1: ranks 0 and 2 hold 3/4 of the requests */
        CHECK(s.ended[1] && s.by_rank[1][1] == 0 && s.by_rank[1][2] > 0 &&
                  s.by_rank[1][0] + s.by_rank[1][2] == s.planned[1] * 3 / 4 &&
                  s.ended_ok[1] == s.by_rank[1][0] + s.by_rank[1][2],
              "hung rank: level 1 holds %d, %d, %d requests of ranks 0, 1, 2 (level_end: %d ok, ended %d); "
              "want rank 1's none, the others' all", s.by_rank[1][0], s.by_rank[1][1], s.by_rank[1][2],
              s.ended_ok[1], s.ended[1]);
    }
    TEST_MAIN_END();
}
