/* test_engine_fault.c: a backend step that fails (the synthetic backend's
 * fault_fail_step testing aid) makes the engine's failure visible: the
 * on_failure callback runs once with the reason, eng_failed reports it,
 * /health answers 503 with it, requests are refused, and a stream it cuts
 * ends with an error event and [DONE]. The 30 s bound only
 * keeps a broken engine from hanging the suite. */
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"

typedef struct fault_seen {
    sem_t posted;
    atomic_int calls;
    char msg[256];
} fault_seen;

static void on_failure(void *arg, const char *msg)
{
    fault_seen *f = arg;
    if (atomic_fetch_add(&f->calls, 1) == 0)
        snprintf(f->msg, sizeof f->msg, "%s", msg);
    sem_post(&f->posted);
}

static void test_step_failure(void)
{
    eng_config cfg;
    char err[256] = "";
    fault_seen f;
    atomic_init(&f.calls, 0);
    f.msg[0] = '\0';
    if (sem_init(&f.posted, 0, 0) != 0) {
        CHECK(0, "sem_init");
        return;
    }
    eng_config_default(&cfg);
    int rc = eng_parse_spec("backend=synthetic,law=1+0.1n,time_scale=0.1,fault_fail_step=3",
                            &cfg, err, sizeof err);
    CHECK(rc == 0 && cfg.fault_fail_step == 3, "spec with fault_fail_step: %s", err);
    cfg.port = 0;
    cfg.on_failure = on_failure;
    cfg.on_failure_arg = &f;
    eng_engine *e = NULL;
    rc = eng_start(&cfg, &e, err, sizeof err);
    eng_config_free(&cfg); /* the engine keeps its own copy */
    if (rc != 0) {
        CHECK(0, "eng_start: %s", err);
        sem_destroy(&f.posted);
        return;
    }
    char health[192], chat[192], why[256] = "";
    snprintf(health, sizeof health, "%s/health", eng_url(e));
    snprintf(chat, sizeof chat, "%s/v1/completions", eng_url(e));
    CHECK(eng_failed(e, why, sizeof why) == 0, "not failed before any step");
    tc_resp r;
    tc_request("GET", health, NULL, -1, &r);
    CHECK(r.status == 200, "health before: %ld", r.status);
    tc_resp_free(&r);

    /* Steps 1 (prefill) and 2 (decode) succeed, step 3 fails: the request
     * that needed 10 tokens ends without them. */
    tc_request("POST", chat, "{\"prompt\":\"a b\",\"max_tokens\":10,\"ignore_eos\":true}", -1, &r);
    CHECK(r.status != 200 || !r.body.p || !strstr(r.body.p, "\"completion_tokens\":10"),
          "request cut by the failure: %ld %s", r.status, r.body.p ? r.body.p : "");
    tc_resp_free(&r);

    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    int waited = sem_timedwait(&f.posted, &dl);
    CHECK(waited == 0, "on_failure called");
    CHECK(atomic_load(&f.calls) == 1, "on_failure called once (%d)", atomic_load(&f.calls));
    CHECK(strstr(f.msg, "backend synthetic step failed") != NULL, "callback message: %s", f.msg);
    rc = eng_failed(e, why, sizeof why);
    CHECK(rc == LL_EIO, "eng_failed -> LL_EIO (%d)", rc);
    CHECK(strcmp(why, f.msg) == 0, "eng_failed message '%s' = callback's", why);
    CHECK(eng_step_count(e) == 2, "two steps logged before the failed one (%zu)",
          eng_step_count(e));

    tc_request("GET", health, NULL, -1, &r);
    CHECK(r.status == 503, "health after failure: %ld", r.status);
    CHECK(r.body.p && strstr(r.body.p, "backend synthetic step failed"),
          "health names the reason: %s", r.body.p ? r.body.p : "");
    tc_resp_free(&r);
    tc_request("POST", chat, "{\"prompt\":\"a\",\"max_tokens\":2}", -1, &r);
    CHECK(r.status == 503, "new request after failure: %ld", r.status);
    tc_resp_free(&r);
    eng_stop(e);
    sem_destroy(&f.posted);
}

/* A stream the failure cuts ends as OpenAI-style servers end one: an error
 * event naming the failure, then [DONE], after the tokens it had. */
static void test_stream_cut(void)
{
    eng_engine *e = tc_start("backend=synthetic,law=1+0.1n,time_scale=0.1,fault_fail_step=3");
    char chat[192];
    snprintf(chat, sizeof chat, "%s/v1/completions", eng_url(e));
    tc_resp r;
    tc_request("POST", chat, "{\"prompt\":\"a b\",\"max_tokens\":10,\"ignore_eos\":true,\"stream\":true}", -1, &r);
    tc_events ev = {0};
    tc_sse_split(r.body.p ? r.body.p : "", &ev);
    int tokens = 0, error_at = -1;
    for (size_t i = 0; i < ev.n; i++) {
        if (strstr(ev.data[i], "\"text\":"))
            tokens++;
        if (error_at < 0 && strstr(ev.data[i], "\"error\"") && strstr(ev.data[i], "backend synthetic step failed"))
            error_at = (int)i;
    }
    CHECK(r.status == 200 && tokens == 2, "the stream's tokens before the failure: status %ld, %d tokens", r.status,
          tokens);
    CHECK(error_at >= 0 && strstr(ev.data[error_at], "\"code\":500"), "an error event names the failure");
    CHECK(ev.n > 0 && strcmp(ev.data[ev.n - 1], "[DONE]") == 0 && error_at == (int)ev.n - 2,
          "the error event, then [DONE], ends the stream (%zu events)", ev.n);
    tc_events_free(&ev);
    tc_resp_free(&r);
    eng_stop(e);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    test_step_failure();
    test_stream_cut();
    curl_global_cleanup();
    TEST_MAIN_END();
}
