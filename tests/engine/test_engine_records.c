/* test_engine_records.c: the engine's steps reach the records through the
 * records module (eng_set_records), and the run line carries the engine's
 * law as data (eng_law, eng_backend_name).
 *
 * While a slow request runs, a writer is opened and attached, more requests
 * run, the writer is detached once the engine is idle, one more request runs,
 * and the writer is closed. Read back with ll_rec_read, the step records must
 * be exactly the step log's entries logged while attached whose start is at
 * or after the writer's epoch (count, every field, times on the run clock),
 * and nothing logged after the detach. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

#define MAX_READ 4096

typedef struct read_back {
    ll_rec_step steps[MAX_READ];
    size_t n_steps;
    int n_runs;
    ll_rec_engine_law law;
    char backend[32];
} read_back;

static int on_run(const ll_rec_run *run, void *ctx)
{
    read_back *rb = ctx;
    rb->n_runs++;
    rb->law = run->law;
    snprintf(rb->backend, sizeof rb->backend, "%s", run->backend ? run->backend : "");
    return 0;
}

static int on_step(const ll_rec_step *st, void *ctx)
{
    read_back *rb = ctx;
    if (rb->n_steps < MAX_READ)
        rb->steps[rb->n_steps] = *st;
    rb->n_steps++;
    return 0;
}

static void sleep_ms(int ms) { ll_sleep_until_ns(ll_now_ns() + (int64_t)ms * 1000000); }

/* eng_law on the synthetic backend: the law as played, in scaled ms. */
static void check_law(eng_engine *e)
{
    ll_rec_engine_law law;
    CHECK(strcmp(eng_backend_name(e), "synthetic") == 0, "backend name %s", eng_backend_name(e));
    CHECK(eng_law(e, &law) == 1 && law.present == 1, "synthetic engine has a law");
    CHECK_NEAR(law.time_scale, 0.5, 0, "time_scale as configured");
    CHECK_NEAR(law.a_ms, 10, 1e-12, "a in played ms (20 * 0.5)");
    CHECK_NEAR(law.b_ms, 0.5, 1e-12, "b in played ms (1 * 0.5)");
    CHECK_NEAR(law.c_ms_per_ktok, 0, 0, "no c term");
    CHECK_NEAR(law.p_ms_per_tok, 0.005, 1e-12, "p in played ms (0.01 * 0.5)");
}

int main(void)
{
    char path[] = "/tmp/test_engine_records-XXXXXX", err[256] = "";
    int fd = mkstemp(path);
    if (fd < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    close(fd);
    /* 10 ms steps: long enough that the writer's open and the attach fall
     * inside one step. */
    eng_engine *e = tc_start("backend=synthetic,law=20+1n+0.01p,time_scale=0.5");
    check_law(e);
    char url[160];
    snprintf(url, sizeof url, "%s/v1/completions", eng_url(e));

    /* A request that is running when the writer opens, so a step straddles
     * the epoch (it started before the run and must not be in it). */
    tc_bg slow;
    tc_bg_start(&slow, url, "{\"prompt\":\"a b c\",\"max_tokens\":40,\"ignore_eos\":true}");
    sleep_ms(50);

    size_t n0 = eng_step_count(e);
    ll_rec_writer *w = NULL;
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "ll_rec_open: %s", err);
    if (!w)
        return 1;
    int64_t epoch = ll_rec_epoch_ns(w);
    ll_rec_run run = {.threads = 1, .url = eng_url(e), .model = eng_model(e), .bundled = 1,
                      .backend = eng_backend_name(e)};
    eng_law(e, &run.law);
    CHECK(ll_rec_put_run(w, &run) == 0, "run line");
    eng_set_records(e, w);
    /* steps published between the epoch and the attach (a test thread the
     * host held up for a step or more) started after the epoch but were
     * published unrecorded: from n0b on, every one is recorded */
    size_t n0b = eng_step_count(e);

    /* Several sequences at once, so steps have n_decode > 1 and prefill. */
    tc_stream st[4];
    memset(st, 0, sizeof st);
    CHECK(tc_streams(url, "{\"prompt\":\"one two three four\",\"max_tokens\":12,\"stream\":true,"
                          "\"ignore_eos\":true}", 4, st) == 0, "streams");
    for (int i = 0; i < 4; i++) {
        CHECK(st[i].status == 200 && st[i].done && st[i].tokens == 12, "stream %d: %ld, %d tokens",
              i, st[i].status, st[i].tokens);
        ll_buf_free(&st[i].pending);
    }
    tc_bg_join(&slow);
    CHECK(slow.resp.status == 200, "slow request: %ld", slow.resp.status);
    tc_resp_free(&slow.resp);

    /* Idle now: every step of those requests is logged (the log never trails
     * the streams), so n1 is where the attached span ends. */
    size_t n1 = eng_step_count(e);
    eng_set_records(e, NULL);
    tc_resp after;
    CHECK(tc_request("POST", url, "{\"prompt\":\"x\",\"max_tokens\":3}", -1, &after) == 0 &&
              after.status == 200, "a request after the detach");
    tc_resp_free(&after);
    size_t n2 = eng_step_count(e);
    CHECK(n2 > n1, "steps after the detach (%zu > %zu)", n2, n1);
    CHECK(ll_rec_close(w) == 0, "ll_rec_close");

    eng_step *log = calloc(n1, sizeof *log);
    size_t got = log ? eng_steps(e, 0, log, n1) : 0;
    CHECK(got == n1, "step log read (%zu of %zu)", got, n1);
    /* What the records must hold: the attached span, minus steps that started
     * before the epoch. */
    size_t want = 0, want_min = 0, before_epoch = 0, batched = 0, prefilled = 0;
    for (size_t i = n0; i < got; i++) {
        if (log[i].start_ns < epoch)
            before_epoch++;
        else {
            want++;
            want_min += i >= n0b;
        }
    }

    static read_back rb;
    ll_rec_handlers h = {.on_run = on_run, .on_step = on_step};
    ll_rec_read_stats rs;
    CHECK(ll_rec_read(path, &h, &rb, &rs, err, sizeof err) == 0, "ll_rec_read: %s", err);
    CHECK(rb.n_runs == 1 && rs.n_rejected == 0 && rs.n_unknown == 0, "one run line, nothing rejected");
    CHECK(rb.law.present && rb.law.a_ms == 10 && rb.law.time_scale == 0.5 &&
              strcmp(rb.backend, "synthetic") == 0, "run line carries the law and the backend");
    CHECK(want_min > 10 && rb.n_steps >= want_min && rb.n_steps <= want,
          "step records %zu, want %zu (%zu published before the attach; log %zu..%zu, %zu before the "
          "epoch)", rb.n_steps, want, want - want_min, n0, n1, before_epoch);
    /* the records are the last rb.n_steps of the steps after the epoch */
    size_t skip = rb.n_steps <= want ? want - rb.n_steps : 0, k = 0, mismatch = 0;
    for (size_t i = n0; i < got && k < rb.n_steps && k < MAX_READ; i++) {
        if (log[i].start_ns < epoch || (skip > 0 && skip--))
            continue;
        const ll_rec_step *r = &rb.steps[k++];
        if (r->start_ns != log[i].start_ns - epoch || r->dur_ns != log[i].dur_ns ||
            r->n_decode != log[i].n_decode || r->n_running != log[i].n_running ||
            r->prefill_tok != log[i].prefill_tok || r->ctx_tok != log[i].ctx_tok) {
            if (mismatch++ == 0)
                fprintf(stderr, "step %zu: record start %lld dur %lld n %d, log start %lld dur %lld n %d\n",
                        i, (long long)r->start_ns, (long long)r->dur_ns, r->n_decode,
                        (long long)(log[i].start_ns - epoch), (long long)log[i].dur_ns,
                        log[i].n_decode);
        }
        batched += log[i].n_decode > 1;
        prefilled += log[i].prefill_tok > 0;
    }
    CHECK(mismatch == 0, "%zu step records differ from the log", mismatch);
    CHECK(batched > 0 && prefilled > 0, "recorded steps decode several sequences (%zu) and prefill "
          "(%zu)", batched, prefilled);
    printf("# %zu steps recorded, %zu logged while attached but started before the epoch\n", want,
           before_epoch);
    free(log);
    eng_stop(e);
    unlink(path);
    curl_global_cleanup();
    TEST_MAIN_END();
}
