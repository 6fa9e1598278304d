/* test_engine_api.c: the OpenAI-compatible protocol on a real socket, driven
 * with libcurl: chunk format and order, exact thinking/answer counts and
 * usage (chat and completions, streaming and not), continuous usage, finish
 * reasons, every bad input answered while a stream is in flight, /metrics,
 * /v1/models and /health. (Queue, disconnect, stop and profiler:
 * test_engine_control.c.) */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"

static char base[128];
static long g_gen_tokens; /* tokens the main engine must have generated */

static void url_of(char *out, size_t n, const char *path) { snprintf(out, n, "%s%s", base, path); }

static int post(const char *path, const char *body, tc_resp *r)
{
    char u[256];
    url_of(u, sizeof u, path);
    return tc_request("POST", u, body, -1, r);
}

static const cJSON *choice0(const cJSON *o)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

/* ---- streaming chat: order, kinds, finish, usage --------------------------- */
static void test_chat_stream(void)
{
    tc_resp r;
    tc_events ev;
    post("/v1/chat/completions",
         "{\"model\":\"m-test\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
         "{\"role\":\"user\",\"content\":\"hello  big\\nworld\"}],\"max_tokens\":7,\"think_tokens\":3,"
         "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"temperature\":0.7}",
         &r);
    CHECK(r.status == 200, "chat stream status %ld", r.status);
    CHECK(tc_sse_split(r.body.p, &ev) == 0, "SSE framing: %s", r.body.p);
    CHECK(ev.n == 10, "events: got %zu want role + 7 tokens + usage + [DONE]", ev.n);
    if (ev.n == 10) {
        char id[64] = "";
        for (size_t i = 0; i < 9; i++) {
            cJSON *o = cJSON_Parse(ev.data[i]);
            CHECK(o != NULL, "event %zu is JSON: %s", i, ev.data[i]);
            if (!o)
                continue;
            const char *oid = ll_json_str(o, "id", "");
            if (i == 0)
                snprintf(id, sizeof id, "%s", oid);
            CHECK(strcmp(oid, id) == 0 && strncmp(id, "chatcmpl-", 9) == 0, "one id: %s vs %s", oid, id);
            CHECK(strcmp(ll_json_str(o, "object", ""), "chat.completion.chunk") == 0, "object");
            CHECK(strcmp(ll_json_str(o, "model", ""), "m-test") == 0, "model");
            const cJSON *c = choice0(o), *d = at(c, "delta", NULL);
            const cJSON *fr = at(c, "finish_reason", NULL);
            if (i == 0) {
                CHECK(strcmp(ll_json_str(d, "role", ""), "assistant") == 0, "first chunk has the role");
            } else if (i <= 7) {
                const char *rc = ll_json_str(d, "reasoning_content", NULL);
                const char *ct = ll_json_str(d, "content", NULL);
                if (i <= 3)
                    CHECK(rc && !ct && rc[0] == ' ' && tc_count_words(rc) == 1,
                          "chunk %zu is one thinking token", i);
                else
                    CHECK(ct && !rc && ct[0] == ' ' && tc_count_words(ct) == 1,
                          "chunk %zu is one answer token", i);
                if (i < 7)
                    CHECK(cJSON_IsNull(fr), "no finish_reason before the last token (%zu)", i);
                else
                    CHECK(cJSON_IsString(fr) && strcmp(fr->valuestring, "length") == 0,
                          "finish_reason length on the last token chunk");
                CHECK(!at(o, "usage", NULL), "no usage without continuous_usage_stats");
            } else {
                const cJSON *ch = at(o, "choices", NULL);
                CHECK(cJSON_IsArray(ch) && cJSON_GetArraySize(ch) == 0, "usage chunk has choices []");
                const cJSON *u = at(o, "usage", NULL);
                CHECK(ll_json_i64(u, "prompt_tokens", -1) == 5, "prompt_tokens %lld (5 words)",
                      (long long)ll_json_i64(u, "prompt_tokens", -1));
                CHECK(ll_json_i64(u, "completion_tokens", -1) == 7, "completion_tokens");
                CHECK(ll_json_i64(u, "total_tokens", -1) == 12, "total_tokens");
                CHECK(ll_json_i64(at(u, "completion_tokens_details", NULL), "reasoning_tokens", -1) == 3,
                      "reasoning_tokens");
            }
            cJSON_Delete(o);
        }
        CHECK(strcmp(ev.data[9], "[DONE]") == 0, "ends with [DONE]: %s", ev.data[9]);
    }
    g_gen_tokens += 7;
    tc_events_free(&ev);
    tc_resp_free(&r);
}

static void test_continuous_usage(void)
{
    tc_resp r;
    tc_events ev;
    post("/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a b c\"}]}],"
         "\"max_completion_tokens\":4,\"think_tokens\":1,\"stream\":true,"
         "\"stream_options\":{\"continuous_usage_stats\":true}}",
         &r);
    CHECK(r.status == 200, "status %ld", r.status);
    tc_sse_split(r.body.p, &ev);
    CHECK(ev.n == 6, "role + 4 tokens + [DONE], got %zu", ev.n);
    for (size_t i = 0; i + 1 < ev.n && ev.n == 6; i++) {
        cJSON *o = cJSON_Parse(ev.data[i]);
        const cJSON *u = at(o, "usage", NULL);
        CHECK(ll_json_i64(u, "completion_tokens", -1) == (int64_t)i && ll_json_i64(u, "prompt_tokens", -1) == 3 &&
                  ll_json_i64(u, "total_tokens", -1) == 3 + (int64_t)i,
              "chunk %zu carries running usage", i);
        cJSON_Delete(o);
    }
    g_gen_tokens += 4;
    tc_events_free(&ev);
    tc_resp_free(&r);
}

static void test_chat_nonstream(void)
{
    tc_resp r;
    post("/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"one two three four five\"}],"
         "\"max_tokens\":6,\"think_tokens\":2}",
         &r);
    CHECK(r.status == 200, "status %ld", r.status);
    cJSON *o = cJSON_Parse(r.body.p);
    const cJSON *m = at(choice0(o), "message", NULL);
    CHECK(strcmp(ll_json_str(o, "object", ""), "chat.completion") == 0, "object chat.completion");
    CHECK(tc_count_words(ll_json_str(m, "reasoning_content", "")) == 2, "2 thinking words");
    CHECK(tc_count_words(ll_json_str(m, "content", "")) == 4, "4 answer words");
    CHECK(strcmp(ll_json_str(choice0(o), "finish_reason", ""), "length") == 0, "finish length");
    const cJSON *u = at(o, "usage", NULL);
    CHECK(ll_json_i64(u, "prompt_tokens", -1) == 5 && ll_json_i64(u, "completion_tokens", -1) == 6 &&
              ll_json_i64(u, "total_tokens", -1) == 11 &&
              ll_json_i64(at(u, "completion_tokens_details", NULL), "reasoning_tokens", -1) == 2,
          "usage: %s", r.body.p);
    g_gen_tokens += 6;
    cJSON_Delete(o);
    tc_resp_free(&r);
}

static void test_completions(void)
{
    tc_resp r;
    tc_events ev;
    post("/v1/completions",
         "{\"prompt\":\"one two three four\",\"max_tokens\":5,\"stream\":true,"
         "\"stream_options\":{\"include_usage\":true}}",
         &r);
    CHECK(r.status == 200, "status %ld", r.status);
    tc_sse_split(r.body.p, &ev);
    CHECK(ev.n == 7, "5 tokens + usage + [DONE], got %zu", ev.n);
    for (size_t i = 0; i < 5 && ev.n == 7; i++) {
        cJSON *o = cJSON_Parse(ev.data[i]);
        const char *t = ll_json_str(choice0(o), "text", "");
        CHECK(strcmp(ll_json_str(o, "object", ""), "text_completion") == 0, "object");
        CHECK(t[0] == ' ' && tc_count_words(t) == 1, "chunk %zu is one token", i);
        const cJSON *fr = at(choice0(o), "finish_reason", NULL);
        CHECK(i < 4 ? cJSON_IsNull(fr) : (cJSON_IsString(fr) && strcmp(fr->valuestring, "length") == 0),
              "finish on the last token only (%zu)", i);
        cJSON_Delete(o);
    }
    if (ev.n == 7) {
        cJSON *o = cJSON_Parse(ev.data[5]);
        const cJSON *u = at(o, "usage", NULL);
        CHECK(ll_json_i64(u, "prompt_tokens", -1) == 4 && ll_json_i64(u, "completion_tokens", -1) == 5,
              "completions usage: %s", ev.data[5]);
        cJSON_Delete(o);
        CHECK(strcmp(ev.data[6], "[DONE]") == 0, "[DONE]");
    }
    tc_events_free(&ev);
    tc_resp_free(&r);

    /* thinking inline between <think> tags, one token per chunk */
    post("/v1/completions", "{\"prompt\":[\"a b\",\"c\"],\"max_tokens\":4,\"think_tokens\":2,\"stream\":true}", &r);
    tc_sse_split(r.body.p, &ev);
    CHECK(ev.n == 5, "4 tokens + [DONE], got %zu", ev.n);
    if (ev.n == 5) {
        cJSON *o0 = cJSON_Parse(ev.data[0]), *o1 = cJSON_Parse(ev.data[1]), *o2 = cJSON_Parse(ev.data[2]);
        const char *t0 = ll_json_str(choice0(o0), "text", ""), *t1 = ll_json_str(choice0(o1), "text", "");
        const char *t2 = ll_json_str(choice0(o2), "text", "");
        CHECK(strncmp(t0, "<think> ", 8) == 0, "first thinking token opens <think>: %s", t0);
        size_t l1 = strlen(t1);
        CHECK(l1 > 8 && strcmp(t1 + l1 - 8, "</think>") == 0, "last thinking token closes: %s", t1);
        CHECK(!strchr(t2, '<') && t2[0] == ' ', "answer token plain: %s", t2);
        cJSON_Delete(o0);
        cJSON_Delete(o1);
        cJSON_Delete(o2);
    }
    tc_events_free(&ev);
    tc_resp_free(&r);

    post("/v1/completions", "{\"prompt\":\"x y\",\"max_tokens\":3}", &r);
    cJSON *o = cJSON_Parse(r.body.p);
    CHECK(tc_count_words(ll_json_str(choice0(o), "text", "")) == 3, "non-stream text: %s", r.body.p);
    CHECK(ll_json_i64(at(o, "usage", NULL), "completion_tokens", -1) == 3 &&
              ll_json_i64(at(o, "usage", NULL), "prompt_tokens", -1) == 2,
          "non-stream completions usage");
    cJSON_Delete(o);
    tc_resp_free(&r);
    g_gen_tokens += 5 + 4 + 3;
}

/* ---- outputs: a function of the prompt, with ids and logprobs -------------- */

/* The streamed chat tokens of one request: their texts joined, and whether
 * every chunk's logprobs and token id agree with its text. */
static void chat_tokens(const char *prompt, ll_buf *text, int *consistent)
{
    char body[512];
    tc_resp r;
    tc_events ev;
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":6,\"stream\":true,"
             "\"logprobs\":true,\"top_logprobs\":3,\"return_token_ids\":true}",
             prompt);
    post("/v1/chat/completions", body, &r);
    CHECK(r.status == 200, "status %ld", r.status);
    tc_sse_split(r.body.p ? r.body.p : "", &ev);
    *consistent = ev.n == 8; /* role + 6 tokens + [DONE] */
    for (size_t i = 1; i + 1 < ev.n; i++) {
        cJSON *o = cJSON_Parse(ev.data[i]);
        const cJSON *c = choice0(o);
        const char *t = ll_json_str(at(c, "delta", NULL), "content", "");
        const cJSON *lp = cJSON_GetArrayItem(at(at(c, "logprobs", NULL), "content", NULL), 0);
        const cJSON *top = at(lp, "top_logprobs", NULL), *ids = at(c, "token_ids", NULL);
        double chosen = ll_json_num(lp, "logprob", 1);
        *consistent &= strcmp(ll_json_str(lp, "token", ""), t) == 0 && chosen <= 0 && chosen > -0.7 &&
                       cJSON_GetArraySize(top) == 3 &&
                       strcmp(ll_json_str(cJSON_GetArrayItem(top, 0), "token", ""), t) == 0 &&
                       ll_json_num(cJSON_GetArrayItem(top, 1), "logprob", 0) < chosen &&
                       cJSON_GetArraySize(ids) == 1 && cJSON_GetArrayItem(ids, 0)->valuedouble >= 0;
        ll_buf_append(text, t, strlen(t));
        cJSON_Delete(o);
    }
    tc_events_free(&ev);
    tc_resp_free(&r);
    g_gen_tokens += 6;
}

/* The same prompt gives the same tokens, whatever the request's id; each
 * chunk names its token, logprob, top-k (chosen first) and id. */
static void test_outputs(void)
{
    ll_buf a = {0}, b = {0}, c = {0};
    int ca = 0, cb = 0, cc = 0;
    chat_tokens("the same prompt", &a, &ca);
    chat_tokens("another prompt", &c, &cc);
    chat_tokens("the same prompt", &b, &cb);
    CHECK(ca && cb && cc, "every chunk's logprobs, top-k and id agree with its text");
    CHECK(a.len && a.len == b.len && memcmp(a.p, b.p, a.len) == 0, "same prompt, same tokens: '%.*s' vs '%.*s'",
          (int)a.len, a.p ? a.p : "", (int)b.len, b.p ? b.p : "");
    CHECK(c.len && (c.len != a.len || memcmp(a.p, c.p, a.len) != 0), "another prompt, other tokens");
    ll_buf_free(&a);
    ll_buf_free(&b);
    ll_buf_free(&c);
}

/* The engine runs with stop_after=50: without ignore_eos a request ends early
 * with "stop" (not before min_tokens); with it, at max_tokens with "length". */
static void test_finish_reasons(void)
{
    static const struct { const char *extra; int want; const char *fr; } cases[] = {
        {"", 50, "stop"},
        {",\"min_tokens\":60", 60, "stop"},
        {",\"ignore_eos\":true", 80, "length"},
    };
    for (size_t i = 0; i < 3; i++) {
        char body[256];
        tc_resp r;
        snprintf(body, sizeof body, "{\"prompt\":\"p\",\"max_tokens\":80%s}", cases[i].extra);
        post("/v1/completions", body, &r);
        cJSON *o = cJSON_Parse(r.body.p);
        CHECK(tc_count_words(ll_json_str(choice0(o), "text", "")) == cases[i].want &&
                  ll_json_i64(at(o, "usage", NULL), "completion_tokens", -1) == cases[i].want,
              "case %zu: %d tokens", i, cases[i].want);
        CHECK(strcmp(ll_json_str(choice0(o), "finish_reason", ""), cases[i].fr) == 0, "case %zu: %s", i,
              cases[i].fr);
        g_gen_tokens += cases[i].want;
        cJSON_Delete(o);
        tc_resp_free(&r);
    }
}

/* ---- bad input while a stream is in flight ---------------------------------- */
static void expect_error(const char *method, const char *path, const char *body, long body_len,
                         long status, const char *param, const char *what)
{
    char u[256];
    tc_resp r;
    url_of(u, sizeof u, path);
    tc_request(method, u, body, body_len, &r);
    CHECK(r.status == status, "%s: status %ld want %ld (%s)", what, r.status, status, r.body.p);
    cJSON *o = cJSON_Parse(r.body.p);
    const cJSON *e = at(o, "error", NULL);
    const char *msg = ll_json_str(e, "message", "");
    const cJSON *p = at(e, "param", NULL);
    CHECK(*msg && cJSON_IsString(at(e, "type", NULL)) && ll_json_i64(e, "code", 0) == status,
          "%s: OpenAI-style error body: %s", what, r.body.p);
    if (param)
        CHECK(cJSON_IsString(p) && strcmp(p->valuestring, param) == 0, "%s: param %s: %s", what, param, r.body.p);
    else
        CHECK(cJSON_IsNull(p), "%s: param null: %s", what, r.body.p);
    if (status == 405)
        CHECK(r.allow[0] != '\0', "%s: Allow header", what);
    cJSON_Delete(o);
    tc_resp_free(&r);
}

/* A chunked upload declares no length: the limit holds as the body arrives. */
typedef struct up_src {
    size_t left;
} up_src;

static size_t up_read(char *buf, size_t sz, size_t n, void *ud)
{
    up_src *u = ud;
    size_t k = sz * n < u->left ? sz * n : u->left;
    memset(buf, 'w', k);
    u->left -= k;
    return k;
}

static size_t up_sink(char *p, size_t sz, size_t n, void *ud)
{
    return ll_buf_append(ud, p, sz * n) == 0 ? sz * n : 0;
}

static void test_chunked_too_big(void)
{
    char u[256];
    url_of(u, sizeof u, "/v1/completions");
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Transfer-Encoding: chunked");
    up_src src = {20000}; /* the engine's limit is 4096 bytes */
    ll_buf body = {0};
    long status = 0;
    curl_easy_setopt(h, CURLOPT_URL, u);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, up_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &src);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, up_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    cJSON *o = body.p ? cJSON_Parse(body.p) : NULL;
    CHECK(rc == CURLE_OK && status == 413 && ll_json_i64(at(o, "error", NULL), "code", 0) == 413,
          "chunked body over the limit: rc %d status %ld: %s", (int)rc, status, body.p ? body.p : "");
    cJSON_Delete(o);
    ll_buf_free(&body);
}

static void test_bad_input(void)
{
    char u[256], mu[256]; /* bg keeps u */
    tc_bg bg;
    url_of(u, sizeof u, "/v1/chat/completions");
    url_of(mu, sizeof mu, "/metrics");
    tc_bg_start(&bg, u, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1000,"
                     "\"ignore_eos\":true,\"stream\":true}");
    /* wait until the stream is decoding (1000 steps of about 3 ms follow:
     * time for the requests below under the sanitizers on a busy host) */
    tc_wait_metric(mu, "loadlaw_running_requests", 1, 10);
    tc_resp m;
    const char *chat = "/v1/chat/completions";
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",", -1, 400, NULL, "malformed JSON");
    expect_error("POST", chat, "[1,2]", -1, 400, NULL, "not an object");
    expect_error("POST", chat, "", -1, 400, NULL, "empty body");
    expect_error("POST", chat, "{\"max_tokens\":3}", -1, 400, "messages", "missing messages");
    expect_error("POST", chat, "{\"messages\":\"hi\"}", -1, 400, "messages", "messages wrong type");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", -1, 400, "messages",
                 "content wrong type");
    expect_error("POST", "/v1/completions", "{\"max_tokens\":3}", -1, 400, "prompt", "missing prompt");
    expect_error("POST", "/v1/completions", "{\"prompt\":5}", -1, 400, "prompt", "prompt wrong type");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", -1,
                 400, "max_tokens", "max_tokens 0");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-3}", -1,
                 400, "max_tokens", "max_tokens negative");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1001}", -1,
                 400, "max_tokens", "max_tokens over the limit");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"ten\"}",
                 -1, 400, "max_tokens", "max_tokens wrong type");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2.5}", -1,
                 400, "max_tokens", "max_tokens not an integer");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}", -1,
                 400, "stream", "stream wrong type");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":9}", -1,
                 400, "temperature", "temperature out of range");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
                 "\"top_logprobs\":21}", -1, 400, "top_logprobs", "top_logprobs over 20");
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"logprobs\":true}", -1, 400, "logprobs",
                 "completions logprobs not a count");
    /* what the engine does not do is refused, never answered as if it were */
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":2}", -1, 400, "n", "n of 2");
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"best_of\":3}", -1, 400, "best_of", "best_of");
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":[\"warp\"]}", -1, 400, "stop",
                 "stop sequences");
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"echo\":true}", -1, 400, "echo", "echo");
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"suffix\":\"y\"}", -1, 400, "suffix", "suffix");
    expect_error("POST", "/v1/completions", "{\"prompt\":\"x\",\"logprobs\":3}", -1, 400, "logprobs",
                 "logprobs without a stream");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"return_token_ids\":true}",
                 -1, 400, "return_token_ids", "token ids without a stream");
    expect_error("POST", chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":3}",
                 -1, 400, "stream_options", "stream_options wrong type");
    expect_error("POST", chat, "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", -1,
                 404, "model", "unknown model");
    expect_error("POST", chat, "{\"model\":3,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", -1, 400,
                 "model", "model wrong type");
    char big[6000];
    memset(big, 'w', sizeof big);
    memcpy(big, "{\"prompt\":\"", 11);
    memcpy(big + sizeof big - 3, "\"}", 3);
    expect_error("POST", "/v1/completions", big, -1, 413, NULL, "body over the limit");
    test_chunked_too_big();
    expect_error("GET", chat, NULL, 0, 405, NULL, "GET on a POST route");
    expect_error("POST", "/v1/models", "{}", -1, 405, NULL, "POST on a GET route");
    expect_error("GET", "/v2/nothing", NULL, 0, 404, NULL, "unknown path");
    /* The errors above were answered while the stream was decoding: it is
     * still running now (a server that queued them behind it would not be). */
    tc_request("GET", mu, NULL, 0, &m);
    CHECK(tc_metric(m.body.p, "loadlaw_running_requests") == 1,
          "the stream was still in flight while bad input was answered (running %g)",
          tc_metric(m.body.p, "loadlaw_running_requests"));
    tc_resp_free(&m);

    tc_bg_join(&bg);
    CHECK(bg.resp.status == 200 && tc_stream_tokens(bg.resp.body.p) == 1000,
          "the stream in flight completed all 1000 tokens (status %ld, %d tokens)", bg.resp.status,
          tc_stream_tokens(bg.resp.body.p));
    tc_resp_free(&bg.resp);
    g_gen_tokens += 1000;

    tc_resp r;
    post("/v1/completions", "{\"prompt\":\"still here\",\"max_tokens\":2}", &r);
    CHECK(r.status == 200, "server keeps serving after bad input");
    g_gen_tokens += 2;
    tc_resp_free(&r);
}

static void test_models_health(const char *model)
{
    char u[256];
    tc_resp r;
    url_of(u, sizeof u, "/v1/models");
    tc_request("GET", u, NULL, 0, &r);
    cJSON *o = cJSON_Parse(r.body.p);
    const cJSON *m = cJSON_GetArrayItem(at(o, "data", NULL), 0);
    CHECK(r.status == 200 && strcmp(ll_json_str(o, "object", ""), "list") == 0 &&
              strcmp(ll_json_str(m, "id", ""), model) == 0,
          "models: %s", r.body.p);
    cJSON_Delete(o);
    tc_resp_free(&r);
    url_of(u, sizeof u, "/health");
    tc_request("GET", u, NULL, 0, &r);
    CHECK(r.status == 200, "health %ld", r.status);
    tc_resp_free(&r);
}

/* ---- /metrics: Prometheus text that parses and agrees with the step log ---- */
static void test_metrics(eng_engine *e)
{
    char u[256];
    tc_resp r;
    url_of(u, sizeof u, "/metrics");
    /* finished requests leave the running gauge just after their last tokens */
    tc_wait_metric(u, "loadlaw_running_requests", 0, 10);
    tc_request("GET", u, NULL, 0, &r);
    CHECK(r.status == 200, "metrics status");
    /* Prometheus text format 0.0.4: every sample line is name{labels} value
     * with a numeric value, and its family was announced by a # HELP and a
     * # TYPE line before its first sample (a histogram's family owns its
     * _bucket, _sum and _count samples); buckets are cumulative, their le
     * bounds increase and the last is +Inf. */
    int lines = 0, bad = 0, untyped = 0;
    double prev_bucket = -1, prev_le = -1;
    int buckets_ok = 1, n_buckets = 0, inf_last = 0;
    char family[128] = "", first_untyped[128] = "";
    int family_help = 0;
    char *copy = strdup(r.body.p);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        char nm[128];
        if (sscanf(line, "# HELP %127s", nm) == 1) {
            snprintf(family, sizeof family, "%s", nm);
            family_help = 1;
            continue;
        }
        if (sscanf(line, "# TYPE %127s", nm) == 1) {
            if (strcmp(nm, family) != 0 || !family_help)
                untyped++; /* TYPE without its HELP just before */
            family_help = 2;
            continue;
        }
        if (line[0] == '#')
            continue;
        lines++;
        size_t nl = strcspn(line, "{ ");
        size_t fl = strlen(family);
        int in_family = family_help == 2 && nl >= fl && strncmp(line, family, fl) == 0 &&
                        (nl == fl || strncmp(line + fl, "_bucket{", 8) == 0 ||
                         strncmp(line + fl, "_sum ", 5) == 0 || strncmp(line + fl, "_count ", 7) == 0);
        if (!in_family && !untyped++)
            snprintf(first_untyped, sizeof first_untyped, "%.100s", line);
        char *sp = strrchr(line, ' ');
        char *end = NULL;
        if (!sp || (strtod(sp + 1, &end), end == sp + 1 || *end))
            bad++;
        if (strncmp(line, "loadlaw_step_duration_seconds_bucket{le=\"", 41) == 0 && sp) {
            double v = strtod(sp + 1, NULL);
            const char *le = line + 41;
            double lv = strncmp(le, "+Inf\"", 5) == 0 ? INFINITY : strtod(le, NULL);
            if (v < prev_bucket || !(lv > prev_le))
                buckets_ok = 0;
            prev_bucket = v;
            prev_le = lv;
            inf_last = isinf(lv);
            n_buckets++;
        }
    }
    free(copy);
    CHECK(lines >= 20 && bad == 0, "%d sample lines, %d malformed", lines, bad);
    CHECK(untyped == 0, "%d samples or TYPE lines without their # HELP/# TYPE family (first: %s)", untyped,
          first_untyped);
    CHECK(buckets_ok && n_buckets >= 2 && inf_last,
          "histogram buckets are cumulative with rising le, ending at +Inf (%d buckets)", n_buckets);
    size_t n = eng_step_count(e);
    eng_step *log = calloc(n ? n : 1, sizeof *log);
    size_t got = eng_steps(e, 0, log, n);
    double prompt = 0;
    for (size_t i = 0; i < got; i++)
        prompt += log[i].prefill_tok;
    const char *t = r.body.p;
    CHECK(tc_metric(t, "loadlaw_steps_total") == (double)got && got > 0, "steps_total %g vs log %zu",
          tc_metric(t, "loadlaw_steps_total"), got);
    CHECK(tc_metric(t, "loadlaw_step_duration_seconds_count") == (double)got, "histogram count");
    CHECK(tc_metric(t, "loadlaw_step_duration_seconds_bucket{le=\"+Inf\"}") == (double)got, "+Inf bucket");
    CHECK(tc_metric(t, "loadlaw_prompt_tokens_total") == prompt, "prompt tokens %g vs log %g",
          tc_metric(t, "loadlaw_prompt_tokens_total"), prompt);
    CHECK(tc_metric(t, "loadlaw_generation_tokens_total") == (double)g_gen_tokens,
          "generation tokens %g want %ld", tc_metric(t, "loadlaw_generation_tokens_total"), g_gen_tokens);
    CHECK(tc_metric(t, "loadlaw_running_requests") == 0 && tc_metric(t, "loadlaw_waiting_requests") == 0,
          "idle engine: nothing running or waiting");
    CHECK(tc_metric(t, "loadlaw_phase_seconds_total{phase=\"decode\"}") > 0, "decode phase time");
    free(log);
    tc_resp_free(&r);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    char dir[] = "/tmp/loadlaw-engtest-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char spec[256];
    snprintf(spec, sizeof spec,
             "law=3+0.05n,stop_after=50,max_tokens_limit=1000,max_body=4096,model=m-test,profile_dir=%s", dir);
    eng_engine *e = tc_start(spec);
    snprintf(base, sizeof base, "%s", eng_url(e));

    test_chat_stream();
    test_continuous_usage();
    test_chat_nonstream();
    test_completions();
    test_finish_reasons();
    test_outputs();
    test_bad_input();
    test_models_health("m-test");
    test_metrics(e);
    eng_stop(e);
    rmdir(dir);
    curl_global_cleanup();
    TEST_MAIN_END();
}
