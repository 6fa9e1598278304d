/* test_engine_control.c: the engine's control paths on a real socket: the
 * profiler trace (/start_profile with num_steps, gzip, until /stop_profile),
 * a full queue answering 503, a client that disconnects freeing its slot,
 * eng_stop with streams running, queued and a capture waiting, and POST
 * /reset_prefix_cache emptying the prefix cache. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <zlib.h>

#include "tclient.h"
#include "testutil.h"

static char base[128];

static int post(const char *path, const char *body, tc_resp *r)
{
    char u[256];
    snprintf(u, sizeof u, "%s%s", base, path);
    return tc_request("POST", u, body, -1, r);
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

/* ---- profiler trace ------------------------------------------------------- */
static cJSON *read_trace(const char *path)
{
    ll_buf b = {0};
    gzFile f = gzopen(path, "rb"); /* reads plain files too */
    if (!f)
        return NULL;
    char chunk[65536];
    int n;
    while ((n = gzread(f, chunk, sizeof chunk)) > 0)
        ll_buf_append(&b, chunk, (size_t)n);
    gzclose(f);
    cJSON *o = b.p ? cJSON_Parse(b.p) : NULL;
    ll_buf_free(&b);
    return o;
}

static void check_trace(const char *path, int want_steps, const char *what)
{
    cJSON *o = read_trace(path);
    CHECK(o != NULL, "%s: trace %s parses", what, path);
    int steps = 0, kernels = 0, good = 1;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, at(o, "traceEvents", NULL)) {
        const char *cat = ll_json_str(ev, "cat", "");
        if (strcmp(cat, "user_annotation") == 0) {
            steps++;
            good &= ll_json_i64(at(ev, "args", NULL), "n_decode", -1) >= 0 && ll_json_num(ev, "dur", -1) > 0;
        } else if (strcmp(cat, "kernel") == 0) {
            kernels++;
            good &= strcmp(ll_json_str(ev, "ph", ""), "X") == 0 && ll_json_i64(ev, "pid", -1) == 0 &&
                    ll_json_i64(ev, "tid", -1) == 7 && ll_json_i64(at(ev, "args", NULL), "stream", -1) == 7 &&
                    ll_json_num(ev, "dur", -1) >= 0 && ll_json_num(ev, "ts", -1) > 0 &&
                    (!strcmp(ll_json_str(ev, "name", ""), "decode") ||
                     !strcmp(ll_json_str(ev, "name", ""), "prefill"));
        }
    }
    if (want_steps > 0)
        CHECK(steps == want_steps, "%s: %d step events want %d", what, steps, want_steps);
    else
        CHECK(steps > 0, "%s: some step events", what);
    CHECK(kernels >= steps && good, "%s: %d kernel events laid out like PyTorch's", what, kernels);
    cJSON_Delete(o);
}

static void test_profile(const char *dir)
{
    char u[256], body[512];
    tc_bg bg;
    tc_resp r;
    snprintf(u, sizeof u, "%s/v1/completions", base);
    /* ~1 s of steps: what follows needs ~0.13 s, more under the sanitizers */
    tc_bg_start(&bg, u, "{\"prompt\":\"p q r\",\"max_tokens\":1000,\"ignore_eos\":true,\"stream\":true}");
    usleep(10000);
    /* output_dir: a plain subdirectory of --profile-dir (dir) */
    snprintf(body, sizeof body, "{\"num_steps\":5,\"output_dir\":\"caps\"}");
    post("/start_profile", body, &r);
    cJSON *o = cJSON_Parse(r.body.p);
    const char *path = ll_json_str(o, "path", "");
    CHECK(r.status == 200 && strstr(path, dir) == path && strstr(path, "/caps/loadlaw-") &&
          ll_json_i64(o, "num_steps", -1) == 5, "start_profile num_steps answers with the file: %s",
          r.body.p);
    check_trace(path, 5, "num_steps trace");
    unlink(path);
    cJSON_Delete(o);
    tc_resp_free(&r);

    snprintf(body, sizeof body, "{\"num_steps\":3,\"output_dir\":\"caps\",\"gzip\":true}");
    post("/start_profile", body, &r);
    o = cJSON_Parse(r.body.p);
    path = ll_json_str(o, "path", "");
    size_t pl = strlen(path);
    CHECK(r.status == 200 && pl > 3 && strcmp(path + pl - 3, ".gz") == 0, "gzip trace: %s", r.body.p);
    check_trace(path, 3, "gzip trace");
    unlink(path);
    cJSON_Delete(o);
    tc_resp_free(&r);

    /* until /stop_profile (empty body; output_dir from --profile-dir) */
    post("/start_profile", "", &r);
    CHECK(r.status == 200 && strstr(r.body.p, "started"), "start_profile with empty body: %s", r.body.p);
    tc_resp_free(&r);
    post("/start_profile", "", &r);
    CHECK(r.status == 400, "a second capture is refused: %ld", r.status);
    tc_resp_free(&r);
    usleep(30000);
    post("/stop_profile", "", &r);
    o = cJSON_Parse(r.body.p);
    path = ll_json_str(o, "path", "");
    CHECK(r.status == 200 && strstr(path, dir) == path && ll_json_i64(o, "num_steps", 0) > 0,
          "stop_profile writes: %s", r.body.p);
    check_trace(path, 0, "stop_profile trace");
    unlink(path);
    cJSON_Delete(o);
    tc_resp_free(&r);
    post("/stop_profile", "", &r);
    CHECK(r.status == 400, "stop without a capture: %ld", r.status);
    tc_resp_free(&r);
    post("/start_profile", "{\"num_steps\":0}", &r);
    CHECK(r.status == 400, "num_steps 0 refused: %ld", r.status);
    tc_resp_free(&r);

    tc_bg_join(&bg);
    CHECK(tc_stream_tokens(bg.resp.body.p) == 1000, "stream during profiling complete");

    /* on an idle engine a num_steps capture answers at its timeout, empty */
    snprintf(body, sizeof body, "{\"num_steps\":3,\"output_dir\":\"caps\",\"timeout_s\":0.2}");
    int64_t t0 = ll_now_ns();
    post("/start_profile", body, &r);
    double waited = (double)(ll_now_ns() - t0) * 1e-9;
    o = cJSON_Parse(r.body.p);
    path = ll_json_str(o, "path", "");
    cJSON *t = read_trace(path);
    CHECK(r.status == 200 && ll_json_i64(o, "num_steps", -1) == 0 && waited >= 0.15 && waited < 10 &&
              cJSON_IsArray(at(t, "traceEvents", NULL)),
          "idle capture ends at its timeout (%.3f s): %s", waited, r.body.p);
    cJSON_Delete(t);
    unlink(path);
    cJSON_Delete(o);
    tc_resp_free(&r);
    post("/start_profile", "{\"num_steps\":3,\"timeout_s\":-1}", &r);
    CHECK(r.status == 400 && strstr(r.body.p, "timeout_s"), "bad timeout_s: %s", r.body.p);
    tc_resp_free(&r);
    tc_resp_free(&bg.resp);
}

/* ---- a full queue answers 503; a client that leaves frees its slot --------- */
typedef struct abort_ctx {
    int events;
    int after;
} abort_ctx;

static size_t abort_write(char *p, size_t sz, size_t n, void *ud)
{
    abort_ctx *a = ud;
    for (size_t i = 0; i + 1 < sz * n; i++)
        if (p[i] == '\n' && p[i + 1] == '\n')
            a->events++;
    return a->events >= a->after ? 0 : sz * n; /* 0 aborts the transfer */
}

/* Ends the transfer at the blank line after the response headers. */
static size_t leave_after_headers(char *p, size_t sz, size_t n, void *ud)
{
    (void)ud;
    return sz * n == 2 && p[0] == '\r' && p[1] == '\n' ? 0 : sz * n;
}

static void test_queue_and_disconnect(void)
{
    /* 10 ms steps: a's 100 tokens (1 s) outlast b's and c's arrival on a busy host */
    eng_engine *e = tc_start("law=10,max_running=1,max_waiting=1");
    char u[256];
    snprintf(u, sizeof u, "%s/v1/completions", eng_url(e));
    const char *body = "{\"prompt\":\"x\",\"max_tokens\":100,\"stream\":true}";
    char mu[256];
    snprintf(mu, sizeof mu, "%s/metrics", eng_url(e));
    tc_bg a, b;
    tc_bg_start(&a, u, body);
    double running = tc_wait_metric(mu, "loadlaw_running_requests", 1, 10);
    tc_bg_start(&b, u, body);
    double waiting = tc_wait_metric(mu, "loadlaw_waiting_requests", 1, 10);
    CHECK(running == 1 && waiting == 1, "a runs (%g), b waits (%g): the queue (1) is full", running, waiting);
    tc_resp r;
    tc_request("POST", u, body, -1, &r);
    CHECK(r.status == 503, "full queue answers 503, got %ld: %s", r.status, r.body.p);
    CHECK(strstr(r.body.p, "queue") != NULL, "503 says why: %s", r.body.p);
    tc_resp_free(&r);
    tc_bg_join(&a);
    tc_bg_join(&b);
    CHECK(tc_stream_tokens(a.resp.body.p) == 100 && tc_stream_tokens(b.resp.body.p) == 100,
          "both admitted streams complete");
    tc_resp_free(&a.resp);
    tc_resp_free(&b.resp);

    /* A 5000-token stream (50 s at 10 ms a step) holds the only slot; its client
     * leaves after 3 events. The next request must get the slot at once: the
     * steps run until it is served are a handful, not the 5000 the stream
     * would have taken. The bound, 500 (5 s), leaves the shared machine
     * room: 115 were seen there when the HTTP thread noticed the close late. */
    size_t steps0 = eng_step_count(e);
    CURL *h = curl_easy_init();
    abort_ctx ac = {0, 3};
    curl_easy_setopt(h, CURLOPT_URL, u);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"prompt\":\"x\",\"max_tokens\":5000,\"stream\":true}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, abort_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &ac);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    CHECK(rc == CURLE_WRITE_ERROR && ac.events >= 3, "client left mid-stream (rc %d)", (int)rc);
    int64_t t0 = ll_now_ns();
    tc_request("POST", u, "{\"prompt\":\"y\",\"max_tokens\":5}", -1, &r);
    double s = (double)(ll_now_ns() - t0) * 1e-9;
    size_t used = eng_step_count(e) - steps0;
    CHECK(r.status == 200 && used < 500, "next request served %zu steps (%.3f s) after the disconnect",
          used, s);
    tc_resp_free(&r);

    /* The same for a non-streaming request, whose response sends nothing
     * until its end, so no failing write tells the server: its client leaves
     * as soon as the headers arrive. */
    steps0 = eng_step_count(e);
    h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, u);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"prompt\":\"x\",\"max_tokens\":5000}");
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, leave_after_headers);
    long hstatus = 0;
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &hstatus);
    curl_easy_cleanup(h);
    CHECK(rc == CURLE_WRITE_ERROR && hstatus == 200, "non-streaming client left (rc %d, status %ld)",
          (int)rc, hstatus);
    t0 = ll_now_ns();
    tc_request("POST", u, "{\"prompt\":\"z\",\"max_tokens\":5}", -1, &r);
    s = (double)(ll_now_ns() - t0) * 1e-9;
    used = eng_step_count(e) - steps0;
    CHECK(r.status == 200 && used < 500,
          "next request served %zu steps (%.3f s) after a non-streaming client left", used, s);
    tc_resp_free(&r);

    snprintf(u, sizeof u, "%s/metrics", eng_url(e));
    tc_wait_metric(u, "loadlaw_running_requests", 0, 10); /* the gauge drops just after the last tokens */
    tc_request("GET", u, NULL, 0, &r);
    CHECK(tc_metric(r.body.p, "loadlaw_requests_total{outcome=\"cancelled\"}") == 2 &&
              tc_metric(r.body.p, "loadlaw_requests_total{outcome=\"rejected\"}") == 1 &&
              tc_metric(r.body.p, "loadlaw_running_requests") == 0,
          "metrics count two cancelled, one rejected, none running: %s", r.body.p);
    tc_resp_free(&r);
    eng_stop(e);
}

/* eng_stop with streams running, streams queued and a profile capture
 * waiting: it returns promptly, every client sees its request cut short,
 * and a stream's client reads why (an error event, then [DONE]). */
static void test_stop_in_flight(const char *dir)
{
    char spec[300];
    snprintf(spec, sizeof spec, "law=1,max_running=4,profile_dir=%s", dir);
    eng_engine *e = tc_start(spec);
    char u[256], up[256];
    snprintf(u, sizeof u, "%s/v1/completions", eng_url(e));
    snprintf(up, sizeof up, "%s/start_profile", eng_url(e));
    enum { NB = 6 };
    tc_bg bg[NB], prof;
    for (int i = 0; i < NB; i++)
        tc_bg_start(&bg[i], u, i % 2 ? "{\"prompt\":\"a\",\"max_tokens\":5000,\"stream\":true}"
                                  : "{\"prompt\":\"a\",\"max_tokens\":5000}");
    usleep(50000);
    tc_bg_start(&prof, up, "{\"num_steps\":100000}"); /* the bound without a key */
    usleep(50000);
    int64_t t0 = ll_now_ns();
    eng_stop(e);
    double s = (double)(ll_now_ns() - t0) * 1e-9;
    CHECK(s < 3.0, "eng_stop with work in flight took %.3f s", s);
    int cut = 0, said = 0;
    for (int i = 0; i < NB; i++) {
        tc_bg_join(&bg[i]);
        const char *body = bg[i].resp.body.p ? bg[i].resp.body.p : "";
        /* a stream ends with an error event that says why, then [DONE]; a
         * plain request's connection ends in error, its body unfinished */
        if (i % 2) {
            int why = strstr(body, "the server is shutting down") && strstr(body, "\"code\":503") &&
                      strstr(body, "[DONE]");
            cut += why;
            said += why;
        } else {
            cut += bg[i].resp.curl_rc != 0 || bg[i].resp.status != 200 || !strstr(body, "finish_reason");
        }
        tc_resp_free(&bg[i].resp);
    }
    CHECK(cut == NB, "all %d requests were cut short by the stop (%d)", NB, cut);
    CHECK(said == NB / 2, "every stream's end says why: an error event, then [DONE] (%d of %d)", said, NB / 2);
    tc_bg_join(&prof);
    cJSON *o = cJSON_Parse(prof.resp.body.p);
    const char *path = ll_json_str(o, "path", NULL);
    if (path)
        unlink(path); /* the capture so far may be written; either way no hang */
    cJSON_Delete(o);
    tc_resp_free(&prof.resp);
}

/* ---- prefix cache reset ---------------------------------------------------- */

/* One completion of prompt p: its usage's cached tokens (-1: no answer). */
static int cached_of(const char *p)
{
    char u[256], body[1024];
    tc_resp r;
    snprintf(u, sizeof u, "%s/v1/completions", base);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":2}", p);
    tc_request("POST", u, body, -1, &r);
    cJSON *o = r.status == 200 ? cJSON_Parse(r.body.p) : NULL;
    const cJSON *d = at(at(o, "usage", NULL), "prompt_tokens_details", NULL);
    int n = o ? (int)ll_json_i64(d, "cached_tokens", 0) : -1;
    cJSON_Delete(o);
    tc_resp_free(&r);
    return n;
}

static double cached_total(void)
{
    char u[256];
    snprintf(u, sizeof u, "%s/metrics", base);
    ll_buf page = {0};
    double v = tc_http("GET", u, NULL, &page) == 200 ? tc_metric(page.p, "loadlaw_prompt_tokens_cached_total") : -1;
    ll_buf_free(&page);
    return v;
}

/* A prompt of 80 words (5 blocks) served twice is cached the second time;
 * after the reset (vLLM's answer, with the blocks forgotten) it is not, and
 * the cached-tokens counter does not move; a second reset forgets nothing. */
static void test_prefix_reset(void)
{
    char p[1024] = "", *w = p;
    for (int i = 0; i < 80; i++)
        w += sprintf(w, "w%d ", i);
    eng_engine *e = tc_start("law=0.2,prefix_cache=1");
    snprintf(base, sizeof base, "%s", eng_url(e));
    CHECK(cached_of(p) == 0 && cached_of(p) > 0, "the same prompt again is served from the cache");
    double before = cached_total();
    tc_resp r;
    post("/reset_prefix_cache", "", &r);
    cJSON *o = cJSON_Parse(r.body.p ? r.body.p : "");
    CHECK(r.status == 200 && cJSON_IsTrue(at(o, "success", NULL)) && ll_json_i64(o, "blocks", 0) == 5,
          "reset answers {\"success\":true} with the 5 blocks it forgot: %s", r.body.p);
    cJSON_Delete(o);
    tc_resp_free(&r);
    CHECK(cached_of(p) == 0, "after the reset the prompt is prefilled whole");
    CHECK(cached_total() == before, "loadlaw_prompt_tokens_cached_total unchanged: %g vs %g", cached_total(),
          before);
    post("/reset_prefix_cache", "", &r);
    CHECK(r.status == 200 && strstr(r.body.p, "\"blocks\":5"), "the prompt's blocks went back in: %s", r.body.p);
    tc_resp_free(&r);
    post("/reset_prefix_cache", "", &r);
    CHECK(r.status == 200 && strstr(r.body.p, "\"blocks\":0"), "a reset of an empty cache: %s", r.body.p);
    tc_resp_free(&r);
    eng_stop(e);
    e = tc_start("law=0.2");
    snprintf(base, sizeof base, "%s", eng_url(e));
    post("/reset_prefix_cache", "", &r);
    CHECK(r.status == 200 && strstr(r.body.p, "\"success\":true"), "no prefix cache: nothing to forget: %s",
          r.body.p);
    tc_resp_free(&r);
    eng_stop(e);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    char dir[] = "/tmp/loadlaw-engctl-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char spec[256];
    snprintf(spec, sizeof spec, "law=1+0.05n,profile_dir=%s", dir);
    eng_engine *e = tc_start(spec);
    snprintf(base, sizeof base, "%s", eng_url(e));
    test_profile(dir);
    eng_stop(e);

    test_queue_and_disconnect();
    test_stop_in_flight(dir);
    test_prefix_reset();
    char sub[sizeof dir + 8];
    snprintf(sub, sizeof sub, "%s/caps", dir);
    rmdir(sub);
    rmdir(dir);
    curl_global_cleanup();
    TEST_MAIN_END();
}
