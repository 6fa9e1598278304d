/* test_sweep_profile.c: `loadlaw sweep --profile C[:STEPS] --profile-dir DIR`
 * on the bundled engine (fork/exec of the real binary, a synthetic law,
 * fixed seeds): the profiled level's level_end is marked, its profile record
 * names the trace files that exist (with their sizes) and says the server
 * came back to its pace; the next level starts only after that wait (by
 * the records' timestamps); `loadlaw trace RUN` reads the traces the record
 * names; `loadlaw fit` leaves the profiled level out of
 * the law and still recovers the engine's law from the others, and
 * --include-profiled puts it back. Bad --profile values are usage errors. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"

static char g_tmp[256];

/* Run loadlaw with args, stdout to out (NULL: /dev/null), stderr to err;
 * its exit status (128 + signal; -1 after timeout_s, the child killed). */
static int run(char *const args[], const char *out, const char *err, double timeout_s)
{
    pid_t p = fork();
    if (p == 0) {
        FILE *o = freopen(out ? out : "/dev/null", "w", stdout);
        FILE *e = freopen(err, "w", stderr);
        (void)o;
        (void)e;
        execv(LOADLAW_BIN, args);
        _exit(127);
    }
    int st = 0;
    int64_t end = ll_now_ns() + (int64_t)(timeout_s * 1e9);
    while (ll_now_ns() < end) {
        if (waitpid(p, &st, WNOHANG) == p)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(20000);
    }
    kill(p, SIGKILL);
    waitpid(p, &st, 0);
    return -1;
}

typedef struct seen {
    int profiles, profiled_ends, profiled_level, n_files, files_ok, settled;
    int64_t done_ns, next_start_ns, profiled_end_ns;
    double probe_ref_ms;
} seen;

static int on_line(const cJSON *o, size_t n, void *ctx)
{
    seen *s = ctx;
    const char *type = ll_json_str(o, "type", "");
    (void)n;
    if (!strcmp(type, "level_end") && cJSON_IsTrue(cJSON_GetObjectItem(o, "profiled"))) {
        s->profiled_ends++;
        s->profiled_end_ns = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "end_ns"));
    } else if (!strcmp(type, "profile")) {
        s->profiles++;
        s->profiled_level = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "level"));
        s->done_ns = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "done_ns"));
        s->settled = cJSON_IsTrue(cJSON_GetObjectItem(o, "settled"));
        s->probe_ref_ms = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "probe_ref_ms"));
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(o, "files")) {
            struct stat st;
            const char *path = ll_json_str(f, "path", "");
            s->n_files++;
            s->files_ok += stat(path, &st) == 0 && st.st_size > 0 &&
                           (double)st.st_size == cJSON_GetNumberValue(cJSON_GetObjectItem(f, "bytes"));
        }
    } else if (!strcmp(type, "level") && s->profiles &&
               (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "level")) == s->profiled_level + 1) {
        s->next_start_ns = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "start_ns"));
    }
    return 0;
}

/* `loadlaw fit DIR --json [--include-profiled]`: the law's a and b (ms),
 * its point count, and whether the C=4 level was marked out of the law. */
static int fit_json(const char *dir, int include, double *a, double *b, double *points, int *out_of_law)
{
    char outf[400], errf[400], err[128];
    char *text = NULL;
    size_t len;
    snprintf(outf, sizeof outf, "%s/fit%d.json", g_tmp, include);
    snprintf(errf, sizeof errf, "%s/fit%d.err", g_tmp, include);
    char *args[] = {"loadlaw", "fit", (char *)dir, "--json", include ? "--include-profiled" : NULL, NULL};
    int rc = run(args, outf, errf, 60);
    if (rc || ll_read_file(outf, &text, &len, err, sizeof err))
        return rc ? rc : -1;
    cJSON *d = cJSON_Parse(text), *law = cJSON_GetObjectItem(d, "law"), *l;
    *a = cJSON_GetNumberValue(cJSON_GetObjectItem(law, "a_ms"));
    *b = cJSON_GetNumberValue(cJSON_GetObjectItem(law, "b_ms"));
    *points = cJSON_GetNumberValue(cJSON_GetObjectItem(law, "n_points"));
    *out_of_law = -1;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(d, "levels"))
        if (cJSON_GetNumberValue(cJSON_GetObjectItem(l, "concurrency")) == 4)
            *out_of_law = cJSON_IsTrue(cJSON_GetObjectItem(l, "profiled_out_of_law"));
    cJSON_Delete(d);
    free(text);
    return 0;
}

static void test_profiled_sweep(void)
{
    char dir[300], traces[300], errf[300], err[128];
    snprintf(dir, sizeof dir, "%s/run", g_tmp);
    snprintf(traces, sizeof traces, "%s/traces", g_tmp);
    snprintf(errf, sizeof errf, "%s/sweep.err", g_tmp);
    CHECK(ll_mkdir_p(traces, err, sizeof err) == 0, "mkdir %s: %s", traces, err);
    /* 1 + 0.5 N ms played (20 + 10 N at time scale 0.05) */
    char *args[] = {"loadlaw", "sweep", "--engine", "backend=synthetic,law=20+10n,time_scale=0.05,seed=1",
                    "-c", "1,2,4,8", "-n", "24,24,24,32", "--max-tokens", "64", "--profile", "4:6",
                    "--profile-dir", traces, "-o", dir, "-q", "--no-report", NULL};
    int rc = run(args, NULL, errf, 120);
    CHECK(rc == 0, "profiled sweep exit %d (see %s)", rc, errf);
    char path[400];
    seen s = {0};
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    CHECK(ll_jsonl_foreach(path, on_line, &s, NULL, err, sizeof err) == 0, "records: %s", err);
    CHECK(s.profiles == 1 && s.profiled_ends == 1 && s.profiled_level == 2,
          "one profile record (%d) for level 2 (%d), its level_end marked (%d)", s.profiles, s.profiled_level,
          s.profiled_ends);
    CHECK(s.n_files >= 1 && s.files_ok == s.n_files, "the profile record names %d trace file(s), %d there with "
          "the size it says", s.n_files, s.files_ok);
    CHECK(s.settled && s.probe_ref_ms > 0, "the server came back to its pace (settled %d, probe %.1f ms before)",
          s.settled, s.probe_ref_ms);
    CHECK(s.profiled_end_ns > 0 && s.done_ns >= s.profiled_end_ns && s.next_start_ns >= s.done_ns,
          "the wait after the level's end (%lld) ends (%lld) before the next level starts (%lld)",
          (long long)s.profiled_end_ns, (long long)s.done_ns, (long long)s.next_start_ns);
    /* `loadlaw trace RUN`: the traces the profile record names */
    char tout[300], terr[300];
    snprintf(tout, sizeof tout, "%s/trace.json", g_tmp);
    snprintf(terr, sizeof terr, "%s/trace.err", g_tmp);
    char *targs[] = {"loadlaw", "trace", dir, "--json", NULL};
    rc = run(targs, tout, terr, 60);
    char *tj = NULL, *te = NULL;
    ll_read_file(tout, &tj, NULL, err, sizeof err);
    ll_read_file(terr, &te, NULL, err, sizeof err);
    CHECK(rc == 0 && tj && te && strstr(tj, traces) && strstr(te, "named by the run's profile records"),
          "loadlaw trace RUN: exit %d, the record's trace read (%s)", rc, te ? te : "-");
    free(tj);
    free(te);
    double a, b, n, a1, b1, n1;
    int out, out1;
    CHECK(fit_json(dir, 0, &a, &b, &n, &out) == 0, "fit --json");
    CHECK(out == 1, "fit: the profiled level is out of the law (%d)", out);
    CHECK(fabs(b / 0.5 - 1) < 0.3 && a > 0.5 && a < 2, "fit: the law from the other levels, 1 + 0.5 N: a %.3f, "
          "b %.3f", a, b);
    CHECK(fit_json(dir, 1, &a1, &b1, &n1, &out1) == 0, "fit --json --include-profiled");
    CHECK(out1 == 0 && n1 > n, "--include-profiled: the level makes law points (%d; points %.0f > %.0f)", out1, n1,
          n);
}

/* Bad values: one line, exit 2. */
static void test_profile_usage(void)
{
    const char *bad[] = {"3", "4:0", "x", "4:", "4:5y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char errf[300], dir[300];
        snprintf(errf, sizeof errf, "%s/usage%zu.err", g_tmp, i);
        snprintf(dir, sizeof dir, "%s/usage%zu", g_tmp, i);
        char *args[] = {"loadlaw", "sweep", "-c", "1,4", "--profile", (char *)bad[i], "-o", dir, "-q", NULL};
        int rc = run(args, NULL, errf, 30);
        CHECK(rc == 2, "--profile %s: exit 2, got %d", bad[i], rc);
    }
}

int main(void)
{
    char err[128];
    snprintf(g_tmp, sizeof g_tmp, "/tmp/lg_prof_%d", (int)getpid());
    if (ll_mkdir_p(g_tmp, err, sizeof err))
        return 1;
    test_profile_usage();
    test_profiled_sweep();
    if (!tu_fail) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    TEST_MAIN_END();
}
