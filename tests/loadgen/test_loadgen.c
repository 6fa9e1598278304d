/* test_loadgen.c: real libcurl workers against the test SSE server on
 * loopback: token counts and kinds, every error class, the run going on past
 * failures, 1024 concurrent streams with the profile hook, interruption that
 * keeps the records, and open-loop schedules. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common.h"
#include "loadgen.h"
#include "sse_server.h"
#include "testutil.h"

/* What the records say, tallied. */
typedef struct tally {
    int runs, levels, level_ends, requests, ok, profiles, interrupted_ends, bad_lines;
    int cls[LG_ERR__COUNT];
    long cls_tok[LG_ERR__COUNT]; /* chunk tokens recorded for failed requests, by class */
    int failed_no_msg;           /* failed records without an "error" message */
    long think, answer, chunk_tok, usage_completion;
    int order_bad;          /* send <= first token <= end violated */
    int kinds_bad;          /* a thinking chunk after the first answer chunk */
    int profile_status;
    long long intended[64];
    int n_intended;
} tally;

static int on_line(const cJSON *o, size_t line_no, void *ctx)
{
    tally *t = ctx;
    const char *type = ll_json_str(o, "type", "");
    if (strcmp(type, "run") == 0) {
        t->runs++;
        if (ll_json_i64(o, "schema", 0) != LL_RECORDS_SCHEMA)
            t->bad_lines++;
    } else if (strcmp(type, "level") == 0) {
        t->levels++;
    } else if (strcmp(type, "level_end") == 0) {
        t->level_ends++;
        t->interrupted_ends += cJSON_IsTrue(cJSON_GetObjectItem(o, "interrupted"));
    } else if (strcmp(type, "profile") == 0) {
        t->profiles++;
        t->profile_status = (int)ll_json_i64(o, "http_status", 0);
    } else if (strcmp(type, "request") == 0) {
        t->requests++;
        const cJSON *ec = cJSON_GetObjectItem(o, "error_class");
        const char *st = ll_json_str(o, "status", "");
        if (strcmp(st, "ok") == 0) {
            t->ok++;
            if (!cJSON_IsNull(ec))
                t->bad_lines++;
        } else {
            int found = 0;
            for (int c = 1; c < LG_ERR__COUNT; c++)
                if (cJSON_IsString(ec) && strcmp(ec->valuestring, lg_err_class_name((lg_err_class)c)) == 0) {
                    t->cls[c]++;
                    found = 1;
                }
            if (!found)
                t->bad_lines++;
            if (!cJSON_IsString(cJSON_GetObjectItem(o, "error")))
                t->failed_no_msg++;
        }
        t->think += ll_json_i64(o, "think_tok", 0);
        t->answer += ll_json_i64(o, "answer_tok", 0);
        const cJSON *u = cJSON_GetObjectItem(o, "usage");
        if (cJSON_IsObject(u))
            t->usage_completion += ll_json_i64(u, "completion_tokens", 0);
        long long send = ll_json_i64(o, "send_ns", -1), ft = ll_json_i64(o, "first_token_ns", -1),
                  end = ll_json_i64(o, "end_ns", -1);
        if (send < 0 || end < send || (ft >= 0 && (ft < send || ft > end)))
            t->order_bad++;
        long long in = ll_json_i64(o, "intended_ns", -1);
        if (in >= 0 && t->n_intended < 64)
            t->intended[t->n_intended++] = in;
        const cJSON *ch = cJSON_GetObjectItem(o, "chunks");
        int seen_answer = 0;
        long long prev = -1;
        for (const cJSON *c = ch ? ch->child : NULL; c; c = c->next) {
            long long at = (long long)cJSON_GetArrayItem(c, 0)->valuedouble;
            const char *k = cJSON_GetArrayItem(c, 2)->valuestring;
            t->chunk_tok += (long)cJSON_GetArrayItem(c, 1)->valuedouble;
            for (int k2 = 1; k2 < LG_ERR__COUNT; k2++)
                if (cJSON_IsString(ec) && strcmp(ec->valuestring, lg_err_class_name((lg_err_class)k2)) == 0)
                    t->cls_tok[k2] += (long)cJSON_GetArrayItem(c, 1)->valuedouble;
            if (at < prev)
                t->order_bad++;
            prev = at;
            if (k[0] == 'a')
                seen_answer = 1;
            else if (seen_answer)
                t->kinds_bad++;
        }
    }
    return 0;
}

static void read_records(const char *dir, tally *t)
{
    char path[512], err[256];
    size_t skipped = 0;
    memset(t, 0, sizeof *t);
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    int rc = ll_jsonl_foreach(path, on_line, t, &skipped, err, sizeof err);
    CHECK(rc == 0 && skipped == 0, "records parse: %s (skipped %zu)", rc ? err : "ok", skipped);
}

typedef struct sweep {
    scn_scenario *scn;
    scn_prompts *prompts;
    lg_run *run;
    char dir[256];
} sweep;

static int sweep_open_cb(sweep *s, const char *url, const char *scenario_json, const char *tag, lg_level_cb cb,
                         void *cb_ctx)
{
    char err[512];
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s/lg_%s_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag, (int)getpid());
    int rc = scn_load_string(scenario_json, tag, &s->scn, err, sizeof err);
    if (rc == 0)
        rc = scn_prompts_load(s->scn, &s->prompts, err, sizeof err);
    lg_config c = {.scn = s->scn, .prompts = s->prompts, .url = url, .model = "test-model",
                   .api_key = "sk-secret-never-written", .run_dir = s->dir, .scenario_name = tag,
                   .on_level_end = cb, .cb_ctx = cb_ctx};
    if (rc == 0)
        rc = lg_run_create(&c, &s->run, err, sizeof err);
    CHECK(rc == 0, "%s: setup: %s", tag, err);
    return rc;
}

static int sweep_open(sweep *s, const char *url, const char *scenario_json, const char *tag)
{
    return sweep_open_cb(s, url, scenario_json, tag, NULL, NULL);
}

/* lg_level_cb: hold the next level's first tokens until its C streams are open. */
typedef struct barriers {
    ts_server *srv;
    const int *c;
    int n;
} barriers;

static void next_barrier(lg_run *r, int level, void *ctx)
{
    barriers *b = ctx;
    (void)r;
    if (level + 1 < b->n)
        ts_set_barrier(b->srv, b->c[level + 1]);
}

static void sweep_close(sweep *s)
{
    char cmd[300];
    lg_run_free(s->run);
    scn_prompts_free(s->prompts);
    scn_free(s->scn);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
}

static int file_contains(const char *path, const char *needle)
{
    char *text = NULL, err[128];
    size_t len;
    if (ll_read_file(path, &text, &len, err, sizeof err))
        return -1;
    int found = strstr(text, needle) != NULL;
    free(text);
    return found;
}

/* 1 when some file in dir contains needle, 0 when none does, -1 when the
 * folder cannot be read. */
static int dir_contains(const char *dir, const char *needle)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "grep -rqF -- '%s' '%s'", needle, dir);
    int st = system(cmd);
    return st == 0 ? 1 : (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1) ? 0 : -1;
}

static void test_counts(int per_chunk)
{
    /* The barrier makes each level's C streams decode together, so D reaches
     * C (a finite ramp) even where connecting them is slower than a stream. */
    static const int levels[] = {1, 4, 16};
    ts_config c = {TS_OK, 4, 6, 2000, per_chunk, levels[0]};
    ts_server *srv;
    sweep s;
    char err[512], path[400];
    CHECK(ts_start(&c, &srv) == 0, "server start");
    barriers bar = {srv, levels, 3};
    if (sweep_open_cb(&s, ts_url(srv),
                      "{\"load\":{\"threads\":2,\"concurrency\":[1,4,16]},\"request\":{\"max_tokens\":10,\"think_tokens\":4}}",
                      per_chunk > 1 ? "counts_multi" : "counts", next_barrier, &bar) == 0) {
        int rc = lg_run_sweep(s.run, err, sizeof err);
        CHECK(rc == 0, "sweep: %s", err);
        size_t n;
        const lg_level_summary *L = lg_run_levels(s.run, &n);
        CHECK(n == 3, "3 levels, got %zu", n);
        int want_n[3] = {8, 8, 24};
        for (size_t i = 0; i < n && i < 3; i++) {
            CHECK(L[i].ok == want_n[i] && L[i].failed == 0, "level %zu ok %d failed %d", i, L[i].ok, L[i].failed);
            CHECK(L[i].think_tok == 4L * want_n[i] && L[i].answer_tok == 6L * want_n[i],
                  "level %zu think %lld answer %lld", i, (long long)L[i].think_tok, (long long)L[i].answer_tok);
            CHECK(L[i].usage_completion_tok == 10L * want_n[i], "level %zu usage", i);
            /* The server sleeps gap_us before each chunk; on loopback the measured
             * per-token gap is that sleep plus scheduling noise (bounded here at 15 ms). */
            double want_itl = 2.0 / per_chunk; /* most chunks carry per_chunk tokens */
            CHECK(L[i].itl_ms.p50 >= want_itl * 0.9 && L[i].itl_ms.p50 < want_itl + 15,
                  "level %zu itl p50 %.3f ms vs %.3f", i, L[i].itl_ms.p50, want_itl);
            CHECK(L[i].ttft_ms.p50 >= 2.0 && L[i].ttfa_ms.p50 > L[i].ttft_ms.p50,
                  "level %zu ttft %.3f < ttfa %.3f", i, L[i].ttft_ms.p50, L[i].ttfa_ms.p50);
            CHECK(isfinite(L[i].ramp_s) && L[i].ramp_s > 0, "level %zu ramp %.4f", i, L[i].ramp_s);
        }
        CHECK(lg_run_write_summary(s.run, err, sizeof err) == 0, "summary: %s", err);
        tally t;
        read_records(s.dir, &t);
        CHECK(t.runs == 1 && t.levels == 3 && t.level_ends == 3 && t.requests == 40 && t.ok == 40,
              "records: runs %d levels %d ends %d requests %d ok %d", t.runs, t.levels, t.level_ends, t.requests, t.ok);
        CHECK(t.think == 160 && t.answer == 240 && t.chunk_tok == 400 && t.usage_completion == 400,
              "record tokens think %ld answer %ld chunks %ld usage %ld", t.think, t.answer, t.chunk_tok,
              t.usage_completion);
        CHECK(t.order_bad == 0 && t.kinds_bad == 0 && t.bad_lines == 0, "order %d kinds %d bad %d", t.order_bad,
              t.kinds_bad, t.bad_lines);
        /* The key was sent (so the check below can fail) and is nowhere in the run dir. */
        CHECK(strcmp(ts_last_auth(srv), "Bearer sk-secret-never-written") == 0, "Authorization header '%s'",
              ts_last_auth(srv));
        CHECK(dir_contains(s.dir, "sk-secret") == 0, "the API key is in no file of the run dir");
        snprintf(path, sizeof path, "%s/summary.json", s.dir);
        CHECK(file_contains(path, "\"itl_ms\"") == 1, "summary.json written");
        sweep_close(&s);
    }
    ts_stop(srv);
}

static void test_classes(void)
{
    ts_config c = {TS_MIX, 2, 3, 1000, 1, 0};
    ts_server *srv;
    sweep s;
    char err[512];
    CHECK(ts_start(&c, &srv) == 0, "server start");
    /* 32 requests: the server cycles 8 behaviours, so 4 of each. */
    if (sweep_open(&s, ts_url(srv),
                   "{\"load\":{\"threads\":2,\"concurrency\":[4],\"requests\":32},\"request\":{\"timeout_s\":1}}",
                   "classes") == 0) {
        int rc = lg_run_sweep(s.run, err, sizeof err);
        CHECK(rc == 0, "sweep with failures still completes: %s", err);
        size_t n;
        const lg_level_summary *L = lg_run_levels(s.run, &n);
        CHECK(n == 1 && L[0].ok == 4 && L[0].failed == 28, "ok %d failed %d", L[0].ok, L[0].failed);
        const int *f = L[0].failed_by_class;
        CHECK(f[LG_ERR_HTTP_5XX] == 4 && f[LG_ERR_HTTP_4XX] == 4 && f[LG_ERR_STREAM] == 8 &&
                  f[LG_ERR_TRUNCATED] == 4 && f[LG_ERR_TIMEOUT] == 4 && f[LG_ERR_RESET] == 4 && f[LG_ERR_OTHER] == 0,
              "classes 5xx %d 4xx %d stream %d truncated %d timeout %d reset %d other %d", f[LG_ERR_HTTP_5XX],
              f[LG_ERR_HTTP_4XX], f[LG_ERR_STREAM], f[LG_ERR_TRUNCATED], f[LG_ERR_TIMEOUT], f[LG_ERR_RESET],
              f[LG_ERR_OTHER]);
        tally t;
        read_records(s.dir, &t);
        CHECK(t.requests == 32 && t.cls[LG_ERR_STREAM] == 8 && t.bad_lines == 0, "records requests %d stream %d",
              t.requests, t.cls[LG_ERR_STREAM]);
        char path[400];
        snprintf(path, sizeof path, "%s/records.jsonl", s.dir);
        CHECK(file_contains(path, "\"error\":\"internal failure\"") == 1, "5xx message recorded");
        CHECK(file_contains(path, "\"error\":\"rate limited\"") == 1, "flat 4xx message recorded");
        CHECK(file_contains(path, "\"error\":\"KV cache exhausted\"") == 1, "nested stream error recorded");
        CHECK(file_contains(path, "\"error\":\"worker died\"") == 1, "flat stream error recorded");
        CHECK(file_contains(path, "\"http_status\":429") == 1 && file_contains(path, "\"http_status\":500") == 1,
              "HTTP statuses recorded");
        /* What was received before the failure is kept: 2 tokens before each
         * error event and each cut, 1 before each stall; a reset may race
         * its one token. Every failed record says why. */
        CHECK(t.cls_tok[LG_ERR_STREAM] == 16 && t.cls_tok[LG_ERR_TRUNCATED] == 8 && t.cls_tok[LG_ERR_TIMEOUT] == 4 &&
                  t.cls_tok[LG_ERR_RESET] <= 4 && t.cls_tok[LG_ERR_HTTP_5XX] == 0,
              "tokens kept: stream %ld truncated %ld timeout %ld reset %ld", t.cls_tok[LG_ERR_STREAM],
              t.cls_tok[LG_ERR_TRUNCATED], t.cls_tok[LG_ERR_TIMEOUT], t.cls_tok[LG_ERR_RESET]);
        CHECK(t.failed_no_msg == 0, "%d failed records without a message", t.failed_no_msg);
        sweep_close(&s);
    }
    ts_stop(srv);
}

/* A server whose SSE line never ends: the client stops at LG_SSE_MAX_BYTES
 * and records a stream error that says why, instead of growing without bound. */
static void test_endless_line(void)
{
    ts_config c = {TS_ENDLESS, 0, 0, 0, 1, 0};
    ts_server *srv;
    sweep s;
    char err[512];
    CHECK(ts_start(&c, &srv) == 0, "server start");
    if (sweep_open(&s, ts_url(srv),
                   "{\"load\":{\"threads\":1,\"concurrency\":[1],\"requests\":1},\"request\":{\"timeout_s\":20}}",
                   "endless") == 0) {
        int rc = lg_run_sweep(s.run, err, sizeof err);
        CHECK(rc == 0, "sweep completes: %s", err);
        size_t n;
        const lg_level_summary *L = lg_run_levels(s.run, &n);
        CHECK(n == 1 && L[0].failed == 1 && L[0].failed_by_class[LG_ERR_STREAM] == 1,
              "endless line: failed %d stream %d", n ? L[0].failed : -1, n ? L[0].failed_by_class[LG_ERR_STREAM] : -1);
        char path[400];
        snprintf(path, sizeof path, "%s/records.jsonl", s.dir);
        CHECK(file_contains(path, "SSE line or event over") == 1, "endless line: reason recorded");
        sweep_close(&s);
    }
    ts_stop(srv);
}

static void test_refused(void)
{
    sweep s;
    char err[512];
    /* A port that was just free: nothing listens there. */
    if (sweep_open(&s, "http://127.0.0.1:1", "{\"load\":{\"threads\":1,\"concurrency\":[2],\"requests\":3}}",
                   "refused") == 0) {
        CHECK(lg_run_sweep(s.run, err, sizeof err) == 0, "sweep: %s", err);
        size_t n;
        const lg_level_summary *L = lg_run_levels(s.run, &n);
        CHECK(n == 1 && L[0].failed_by_class[LG_ERR_CONNECT] == 3, "connect errors %d",
              L[0].failed_by_class[LG_ERR_CONNECT]);
        sweep_close(&s);
    }
}

static void test_1024(void)
{
    /* barrier: all 1024 decode together however long connecting them takes */
    ts_config c = {TS_OK, 8, 8, 40000, 1, 1024};
    ts_server *srv;
    sweep s;
    char err[512];
    CHECK(ts_start(&c, &srv) == 0, "server start");
    if (sweep_open(&s, ts_url(srv),
                   "{\"load\":{\"threads\":2},\"levels\":[{\"concurrency\":1024,\"requests\":1024,"
                   "\"profile\":{\"when\":\"steady\",\"num_steps\":12,\"style\":\"sglang\"}}]}",
                   "c1024") == 0) {
        int rc = lg_run_sweep(s.run, err, sizeof err);
        CHECK(rc == 0, "sweep: %s", err);
        size_t n;
        const lg_level_summary *L = lg_run_levels(s.run, &n);
        CHECK(n == 1 && L[0].ok == 1024, "1024 streams ok: %d (failed %d)", L[0].ok, L[0].failed);
        CHECK(ts_peak_streams(srv) == 1024, "server saw 1024 streams at once (peak %d)", ts_peak_streams(srv));
        CHECK(ts_profile_calls(srv) == 1, "profile asked once (%d)", ts_profile_calls(srv));
        CHECK(ts_profile_streams(srv) == 1024, "profile asked with all 1024 decoding (%d)", ts_profile_streams(srv));
        CHECK(strcmp(ts_profile_body(srv), "{\"num_steps\":12}") == 0, "sglang body '%s'", ts_profile_body(srv));
        CHECK(L[0].think_tok == 8 * 1024 && L[0].answer_tok == 8 * 1024, "tokens");
        tally t;
        read_records(s.dir, &t);
        CHECK(t.profiles == 1 && t.profile_status == 200, "profile record: %d status %d", t.profiles, t.profile_status);
        sweep_close(&s);
    }
    ts_stop(srv);
}

typedef struct intr {
    lg_run *run;
    int delay_ms;
} intr;

static void *interrupter(void *arg)
{
    intr *i = arg;
    usleep((useconds_t)i->delay_ms * 1000);
    lg_run_interrupt(i->run, 0.2);
    return NULL;
}

static void test_interrupt(void)
{
    ts_config c = {TS_OK, 0, 40, 50000, 1, 0}; /* 2 s streams */
    ts_server *srv;
    sweep s;
    char err[512];
    CHECK(ts_start(&c, &srv) == 0, "server start");
    if (sweep_open(&s, ts_url(srv), "{\"load\":{\"threads\":2,\"concurrency\":[8,16],\"requests\":16}}", "intr") == 0) {
        intr i = {s.run, 300};
        pthread_t th;
        int64_t t0 = ll_now_ns();
        CHECK(pthread_create(&th, NULL, interrupter, &i) == 0, "thread");
        int rc = lg_run_sweep(s.run, err, sizeof err);
        pthread_join(th, NULL);
        double took = (double)(ll_now_ns() - t0) / 1e9;
        CHECK(rc == LL_EINTR, "interrupted sweep returns LL_EINTR (%d)", rc);
        CHECK(took < 1.8, "stopped at the drain deadline (%.2f s)", took);
        CHECK(lg_run_write_summary(s.run, err, sizeof err) == 0, "summary");
        tally t;
        read_records(s.dir, &t);
        CHECK(t.levels == 1 && t.level_ends == 1 && t.interrupted_ends == 1, "one interrupted level (%d/%d/%d)",
              t.levels, t.level_ends, t.interrupted_ends);
        CHECK(t.requests == 8 && t.cls[LG_ERR_OTHER] == 8, "8 in-flight aborted and recorded (%d, other %d)",
              t.requests, t.cls[LG_ERR_OTHER]);
        CHECK(t.answer > 0 && t.chunk_tok == t.answer, "partial tokens kept (%ld)", t.answer);
        char path[400];
        snprintf(path, sizeof path, "%s/summary.json", s.dir);
        CHECK(file_contains(path, "\"interrupted\":\ttrue") == 1, "summary marked interrupted");
        sweep_close(&s);
    }
    ts_stop(srv);
}

static void test_open_loop(void)
{
    ts_config c = {TS_OK, 1, 2, 1000, 1, 0};
    ts_server *srv;
    sweep s;
    char err[512];
    CHECK(ts_start(&c, &srv) == 0, "server start");
    if (sweep_open(&s, ts_url(srv),
                   "{\"load\":{\"threads\":2},\"levels\":[{\"concurrency\":0,\"rate_per_s\":200,"
                   "\"arrival\":\"constant\",\"requests\":40}]}",
                   "open") == 0) {
        CHECK(lg_run_sweep(s.run, err, sizeof err) == 0, "sweep: %s", err);
        size_t n;
        const lg_level_summary *L = lg_run_levels(s.run, &n);
        CHECK(n == 1 && L[0].ok == 40, "open loop ok %d", L[0].ok);
        CHECK(L[0].lag_ms.n == 40 && L[0].lag_ms.p50 >= 0 && L[0].lag_ms.p50 < 20, "client lag p50 %.3f ms",
              L[0].lag_ms.p50);
        CHECK(L[0].e2e_intended_ms.p50 >= L[0].e2e_ms.p50, "e2e from intended >= e2e from send");
        tally t;
        read_records(s.dir, &t);
        CHECK(t.n_intended == 40, "intended times recorded (%d)", t.n_intended);
        /* constant arrivals at 200/s: intended times are 5 ms apart exactly */
        long long *v = t.intended;
        for (int i = 0; i < t.n_intended; i++)
            for (int j = i + 1; j < t.n_intended; j++)
                if (v[j] < v[i]) {
                    long long x = v[i];
                    v[i] = v[j];
                    v[j] = x;
                }
        int bad = 0;
        for (int i = 1; i < t.n_intended; i++)
            bad += llabs(v[i] - v[i - 1] - 5000000) > 1;
        CHECK(bad == 0, "intended spacing 5 ms (%d off)", bad);
        sweep_close(&s);
    }
    ts_stop(srv);
}

int main(void)
{
    struct rlimit rl;
    /* 1024 client + 1024 server sockets in one process. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    test_counts(1);
    test_counts(3);
    test_classes();
    test_refused();
    test_endless_line();
    test_open_loop();
    test_interrupt();
    test_1024();
    curl_global_cleanup();
    TEST_MAIN_END();
}
