/* test_sweep_trace_timing.c: how closely a replayed trace is sent on time,
 * and the workload keys of the request records, on the bundled engine.
 *
 * (a) A 200-row Mooncake trace (written here from a fixed seed: gaps of
 *     0-200 ms, inputs of 64-320 tokens, outputs of 2-9 tokens, rows sharing
 *     leading hash blocks) replayed at --trace-speed 10: every row sent once,
 *     its record naming its row ("trace_row") and asking the row's output
 *     length ("max_tokens"); the intended times are the trace's / 10 to
 *     0.01 ms, and the send-time error (send - intended) has p99 <= 1 ms
 *     (5 ms under the sanitizers, which slow every call). The test is
 *     RUN_SERIAL; other work on the machine can still delay a thread's
 *     wake-up by more than the bound, so the replay is tried up to three
 *     times, and before each try the host's own oversleep is measured (200
 *     sleeps of 1 ms): when every try missed the bound and the host itself
 *     overslept by more than half of it at p99, the machine, not the
 *     sender, is what missed it, and the test says so and is skipped (77).
 * (b) --shared-prefix 3:64 -n 9: each record names its prefix group, prompt
 *     i taking group i mod 3 (round robin by request id).
 *
 * argv: none (LOADLAW_BIN). Real time: about 4 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define ROWS 200

#ifdef LOADLAW_SANITIZED
#define SEND_P99_MS 5.0
#else
#define SEND_P99_MS 1.0
#endif

typedef struct row {
    int64_t ts_ms;
    int in, out;
} row;

/* The trace, from a fixed seed; its rows into rows[]. 0 or -1. */
static int write_trace(const char *path, row *rows)
{
    ll_rng r;
    ll_buf b = {0};
    int64_t t = 1700000000000; /* a wall-clock-like first stamp: only differences count */
    ll_rng_seed(&r, 7);
    for (int i = 0; i < ROWS; i++) {
        rows[i].ts_ms = t;
        rows[i].in = 64 + (int)(ll_rng_u64(&r) % 257);
        rows[i].out = 2 + (int)(ll_rng_u64(&r) % 8);
        int shared = (int)(ll_rng_u64(&r) % 3); /* 0-2 leading blocks of a common family */
        ll_buf_printf(&b, "{\"timestamp\":%lld,\"input_length\":%d,\"output_length\":%d,\"hash_ids\":[",
                      (long long)t, rows[i].in, rows[i].out);
        for (int k = 0; k < shared; k++)
            ll_buf_printf(&b, "%s%d", k ? "," : "", k);
        ll_buf_printf(&b, "]}\n");
        t += (int64_t)(ll_rng_u64(&r) % 200);
    }
    int rc = b.p ? tu_write_file(path, b.p) : -1;
    ll_buf_free(&b);
    return rc;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The request records of a run, parsed, into out (at most cap); how many. */
static size_t requests(const char *run, cJSON **out, size_t cap)
{
    char path[512];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/records.jsonl", run);
    char *text = tu_slurp(path);
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "request") && n < cap)
            out[n++] = o;
        else
            cJSON_Delete(o);
    }
    free(text);
    return n;
}

/* The host's own wake-up lateness: p99 of 200 sleeps of 1 ms, ms late. */
static double host_oversleep_p99_ms(void)
{
    double late[200];
    for (int i = 0; i < 200; i++) {
        int64_t want = ll_now_ns() + 1000000;
        ll_sleep_until_ns(want);
        late[i] = (double)(ll_now_ns() - want) / 1e6;
    }
    qsort(late, 200, sizeof *late, cmp_double);
    return late[197];
}

/* One replay; its checks, and the send-time error's p99 (ms) into *p99. */
static void replay(const char *dir, int attempt, double *p99_out)
{
    static row rows[ROWS];
    static cJSON *rq[ROWS + 8];
    char trace[512], run[512], cmd[2048];
    snprintf(trace, sizeof trace, "%s/trace.jsonl", dir);
    snprintf(run, sizeof run, "%s/replay%d", dir, attempt);
    CHECK(write_trace(trace, rows) == 0, "trace written");
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep --engine backend=synthetic,law=52+30n,time_scale=0.02 --trace %s --trace-speed 10 "
                         "-q --no-report -o %s > %s.out 2>&1",
             trace, run, run);
    CHECK(tu_sh(cmd) == 0, "200 rows replayed on the bundled engine (see %s.out)", run);
    size_t n = requests(run, rq, ROWS + 8), once = 0, exact = 0, asked = 0, ok = 0;
    if (n > ROWS)
        n = ROWS; /* more is a failure below; the arrays hold ROWS + 8 */
    int seen[ROWS] = {0};
    double err_ms[ROWS + 8];
    for (size_t i = 0; i < n; i++) {
        double r = num(rq[i], "trace_row");
        err_ms[i] = (num(rq[i], "send_ns") - num(rq[i], "intended_ns")) / 1e6;
        ok += cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rq[i], "status")) &&
              !strcmp(cJSON_GetObjectItemCaseSensitive(rq[i], "status")->valuestring, "ok");
        if (!(r >= 0 && r < ROWS))
            continue;
        int k = (int)r;
        seen[k]++;
        asked += num(rq[i], "max_tokens") == rows[k].out;
    }
    for (int k = 0; k < ROWS; k++)
        once += seen[k] == 1;
    CHECK(n == ROWS && once == ROWS && ok == ROWS, "%zu records, %zu rows once, %zu ok", n, once, ok);
    CHECK(asked == ROWS, "each record asks its row's output length: %zu of %d", asked, ROWS);
    /* intended times against the trace, from row 0's (sent at the level's start) */
    double t0 = NAN;
    for (size_t i = 0; i < n; i++)
        if (num(rq[i], "trace_row") == 0)
            t0 = num(rq[i], "intended_ns");
    for (size_t i = 0; i < n; i++) {
        double r = num(rq[i], "trace_row");
        if (r >= 0 && r < ROWS)
            exact += fabs(num(rq[i], "intended_ns") - t0 - (double)(rows[(int)r].ts_ms - rows[0].ts_ms) * 1e5) < 1e4;
    }
    CHECK(exact == ROWS, "intended times are the trace's / 10 to 0.01 ms: %zu of %d", exact, ROWS);
    qsort(err_ms, n, sizeof *err_ms, cmp_double);
    double p50 = n ? err_ms[n / 2] : NAN, p99 = n ? err_ms[(size_t)ceil(0.99 * (double)n) - 1] : NAN;
    CHECK(n && err_ms[0] >= 0, "no send before its intended time (min %.3f ms)", n ? err_ms[0] : NAN);
    *p99_out = p99;
    printf("send-time error against intended: p50 %.3f ms, p99 %.3f ms, max %.3f ms over %zu rows\n", p50, p99,
           n ? err_ms[n - 1] : NAN, n);
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(rq[i]);
}

static void prefix_groups(const char *dir)
{
    cJSON *rq[16];
    char run[512], cmd[2048];
    snprintf(run, sizeof run, "%s/prefix", dir);
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep --engine backend=synthetic,law=52+30n,time_scale=0.02 --shared-prefix 3:64 "
                         "-c 2 -n 9 --max-tokens 4 -q --no-report -o %s > %s.out 2>&1",
             run, run);
    CHECK(tu_sh(cmd) == 0, "shared prefix on the bundled engine (see %s.out)", run);
    size_t n = requests(run, rq, 16), right = 0;
    for (size_t i = 0; i < n; i++) {
        right += num(rq[i], "prefix_group") == fmod(num(rq[i], "id"), 3) && num(rq[i], "max_tokens") == 4 &&
                 !cJSON_GetObjectItemCaseSensitive(rq[i], "trace_row") &&
                 !cJSON_GetObjectItemCaseSensitive(rq[i], "session");
        cJSON_Delete(rq[i]);
    }
    CHECK(n == 9 && right == 9, "each record names its group (id mod 3), and no other workload key: %zu of %zu",
          right, n);
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_trace_timing", dir, sizeof dir))
        return 1;
    prefix_groups(dir);
    double p99 = NAN, noise = NAN;
    for (int attempt = 0; attempt < 3 && !(p99 <= SEND_P99_MS); attempt++) {
        noise = host_oversleep_p99_ms();
        printf("try %d: the host oversleeps 1 ms by %.3f ms at p99\n", attempt + 1, noise);
        replay(dir, attempt, &p99);
    }
    if (!tu_fail && !(p99 <= SEND_P99_MS) && noise > SEND_P99_MS / 2) {
        printf("SKIP: send-time error p99 %.3f ms over %.1f ms on a host that itself oversleeps by %.3f ms: "
               "the machine is too busy to hold the bound\n",
               p99, SEND_P99_MS, noise);
        tu_rmtree(dir);
        return 77;
    }
    CHECK(p99 <= SEND_P99_MS, "send-time error p99 %.3f ms <= %.1f ms", p99, SEND_P99_MS);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
