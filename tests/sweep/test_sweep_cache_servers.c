/* test_sweep_cache_servers.c: the prefix-cache reset before each level
 * (load.cache, --cache; loadgen/cache_reset.c) in each server's spelling,
 * against a scripted server that names itself in its /metrics as vLLM,
 * SGLang, llama.cpp or nothing, logs every request it gets, and answers
 * the reset routes or not. Two levels of one request each:
 *  - vLLM: POST /reset_prefix_cache before each level, the records say
 *    reset, done, 200; without its dev mode (404) auto asks once, then
 *    keeps, and says so without a warning; --cache reset asks every level
 *    and records it as not done;
 *  - SGLang: POST /flush_cache before each level;
 *  - llama.cpp: GET /slots, then POST /slots/{id}?action=erase for each of
 *    its two slots, before each level;
 *  - a server /metrics names none: auto keeps and sends nothing; reset
 *    tries vLLM's spelling then SGLang's;
 *  - --cache keep: nothing sent, not even the GET /metrics that tells the
 *    server (--no-metrics: the scraper sends none either).
 * argv: none (LOADLAW_BIN). Real time: about 5 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

typedef enum { SRV_VLLM, SRV_VLLM_NODEV, SRV_SGLANG, SRV_LLAMACPP, SRV_NONE } srv_kind;

typedef struct srv {
    srv_kind kind;
    char log[8192]; /* "METHOD target" a line, every request but the completions */
} srv;

static void reply_json(int fd, const char *status, const char *body)
{
    tu_httpd_reply(fd, status, "application/json", body, strlen(body));
}

static int answer(int fd, const char *head, void *ctx)
{
    static const char sse[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" a\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
        "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
    static const char *const pages[] = {"vllm:num_requests_running 0\n", "vllm:num_requests_running 0\n",
                                        "sglang:num_running_reqs 0\n", "llamacpp:requests_processing 0\n", NULL};
    srv *s = ctx;
    char target[300] = "";
    sscanf(head, "%*s %299s", target);
    if (!strstr(target, "/chat/completions")) {
        size_t n = strlen(s->log);
        snprintf(s->log + n, sizeof s->log - n, "%.*s %s\n", (int)strcspn(head, " "), head, target);
    }
    int post = strncmp(head, "POST ", 5) == 0;
    if (strstr(target, "/chat/completions"))
        tu_httpd_reply(fd, "200 OK", "text/event-stream", sse, sizeof sse - 1);
    else if (!strcmp(target, "/metrics") && pages[s->kind])
        tu_httpd_reply(fd, "200 OK", "text/plain", pages[s->kind], strlen(pages[s->kind]));
    else if (post && !strcmp(target, "/reset_prefix_cache") && s->kind == SRV_VLLM)
        reply_json(fd, "200 OK", "{\"success\":true}");
    else if (post && !strcmp(target, "/flush_cache") && s->kind == SRV_SGLANG)
        tu_httpd_reply(fd, "200 OK", "text/plain", "Cache flushed.\n", 15);
    else if (!post && !strcmp(target, "/slots") && s->kind == SRV_LLAMACPP)
        reply_json(fd, "200 OK", "[{\"id\":0,\"is_processing\":false},{\"id\":1,\"is_processing\":false}]");
    else if (post && !strncmp(target, "/slots/", 7) && strstr(target, "?action=erase") && s->kind == SRV_LLAMACPP)
        reply_json(fd, "200 OK", "{\"id_slot\":0,\"n_erased\":0}");
    else
        reply_json(fd, "404 Not Found", "{\"detail\":\"Not Found\"}");
    return 0;
}

/* Lines of log that are exactly `line`. */
static int count(const char *log, const char *line)
{
    int n = 0;
    size_t ln = strlen(line);
    for (const char *p = log; (p = strstr(p, line)) != NULL; p += ln)
        n += (p == log || p[-1] == '\n') && p[ln] == '\n';
    return n;
}

/* Requests of the cache hook in log: the reset routes, and GET /metrics. */
static int cache_asks(const char *log)
{
    return count(log, "POST /reset_prefix_cache") + count(log, "POST /flush_cache") + count(log, "GET /slots") +
           count(log, "GET /metrics");
}

typedef struct run {
    srv s;
    cJSON *cache[2]; /* each level record's "cache" */
    char err[8192];  /* the sweep's stderr */
    int rc;
} run;

static void sweep(const char *tmp, const char *name, srv_kind kind, const char *mode, run *r)
{
    char url[64], dir[400], out[400], errf[400], path[420], line[8192];
    tu_httpd *h = NULL;
    memset(r, 0, sizeof *r);
    r->s.kind = kind;
    CHECK(tu_httpd_start(answer, &r->s, &h) == 0, "%s: server starts", name);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", tu_httpd_port(h));
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    snprintf(out, sizeof out, "%s/%s.out", tmp, name);
    snprintf(errf, sizeof errf, "%s/%s.err", tmp, name);
    char *args[] = {"loadlaw", "sweep", "--url", url, "--model", "m", "-c", "1,1", "-n", "1", "--warmup", "0",
                    "--max-tokens", "1", "--no-metrics", "--no-report", "-q", "-o", dir,
                    mode ? "--cache" : NULL, (char *)mode, NULL};
    r->rc = tu_run(LOADLAW_BIN, args, out, errf, 60);
    tu_httpd_stop(h);
    char *e = tu_slurp(errf);
    snprintf(r->err, sizeof r->err, "%s", e ? e : "");
    free(e);
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        int l = (int)ll_json_i64(o, "level", -1);
        if (!strcmp(ll_json_str(o, "type", ""), "level") && l >= 0 && l < 2)
            r->cache[l] = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(o, "cache"), 1);
        cJSON_Delete(o);
    }
    if (f)
        fclose(f);
    CHECK(r->rc == 0 && r->cache[0] && r->cache[1], "%s: sweep exit %d, both level records say the cache:\n%s",
          name, r->rc, r->err);
}

static void done(run *r)
{
    cJSON_Delete(r->cache[0]);
    cJSON_Delete(r->cache[1]);
}

/* Level l's record: action, done, status. */
static int said(const run *r, int l, const char *action, int done, int status)
{
    const cJSON *c = r->cache[l];
    return c && !strcmp(ll_json_str(c, "action", ""), action) &&
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "done")) == done && ll_json_i64(c, "status", 0) == status;
}

int main(void)
{
    char tmp[256];
    run r;
    if (tu_tmpdir("ll_test_sweep_cache_servers", tmp, sizeof tmp))
        return 1;

    sweep(tmp, "vllm", SRV_VLLM, NULL, &r);
    CHECK(count(r.s.log, "POST /reset_prefix_cache") == 2 && count(r.s.log, "GET /metrics") == 1,
          "vLLM: one GET /metrics, a reset before each level:\n%s", r.s.log);
    CHECK(said(&r, 0, "reset", 1, 200) && said(&r, 1, "reset", 1, 200) &&
          !strcmp(ll_json_str(r.cache[0], "server", ""), "vLLM"),
          "vLLM: both levels recorded reset, confirmed, 200");
    CHECK(strstr(r.err, "level 1: prefix cache reset (POST /reset_prefix_cache, HTTP 200)") != NULL,
          "vLLM: said per level:\n%s", r.err);
    done(&r);

    sweep(tmp, "vllm-nodev", SRV_VLLM_NODEV, NULL, &r);
    CHECK(count(r.s.log, "POST /reset_prefix_cache") == 1, "vLLM without dev mode, auto: asked once:\n%s",
          r.s.log);
    CHECK(said(&r, 0, "keep", 0, 404) && said(&r, 1, "keep", 0, 0), "vLLM without dev mode: kept, the 404 recorded");
    CHECK(strstr(r.err, "VLLM_SERVER_DEV_MODE=1") && !strstr(r.err, "warning"),
          "vLLM without dev mode: said how to get it, no warning:\n%s", r.err);
    done(&r);

    sweep(tmp, "vllm-nodev-reset", SRV_VLLM_NODEV, "reset", &r);
    CHECK(count(r.s.log, "POST /reset_prefix_cache") == 2, "--cache reset: asked every level:\n%s", r.s.log);
    CHECK(said(&r, 0, "reset", 0, 404) && said(&r, 1, "reset", 0, 404), "--cache reset: recorded as not done");
    CHECK(strstr(r.err, "may be warm") != NULL, "--cache reset refused: a warning:\n%s", r.err);
    done(&r);

    sweep(tmp, "sglang", SRV_SGLANG, NULL, &r);
    CHECK(count(r.s.log, "POST /flush_cache") == 2 && !strstr(r.s.log, "reset_prefix_cache"),
          "SGLang: POST /flush_cache before each level:\n%s", r.s.log);
    CHECK(said(&r, 0, "reset", 1, 200) && said(&r, 1, "reset", 1, 200), "SGLang: recorded");
    done(&r);

    sweep(tmp, "llamacpp", SRV_LLAMACPP, NULL, &r);
    CHECK(count(r.s.log, "GET /slots") == 2 && count(r.s.log, "POST /slots/0?action=erase") == 2 &&
          count(r.s.log, "POST /slots/1?action=erase") == 2,
          "llama.cpp: each slot erased before each level:\n%s", r.s.log);
    CHECK(said(&r, 1, "reset", 1, 200) && ll_json_i64(r.cache[1], "slots", 0) == 2, "llama.cpp: recorded, 2 slots");
    done(&r);

    sweep(tmp, "none", SRV_NONE, NULL, &r);
    CHECK(cache_asks(r.s.log) == 1, "no known server, auto: GET /metrics, then nothing asked:\n%s", r.s.log);
    CHECK(said(&r, 0, "keep", 0, 0) && said(&r, 1, "keep", 0, 0), "no known server, auto: kept");
    done(&r);

    sweep(tmp, "none-reset", SRV_NONE, "reset", &r);
    CHECK(count(r.s.log, "POST /reset_prefix_cache") == 2 && count(r.s.log, "POST /flush_cache") == 2,
          "no known server, reset: vLLM's spelling, then SGLang's:\n%s", r.s.log);
    done(&r);

    sweep(tmp, "keep", SRV_VLLM, "keep", &r);
    CHECK(cache_asks(r.s.log) == 0, "--cache keep (and --no-metrics): nothing asked, not even /metrics:\n%s",
          r.s.log);
    CHECK(said(&r, 0, "keep", 0, 0) && !strcmp(ll_json_str(r.cache[0], "asked", ""), "keep"), "keep: recorded");
    done(&r);

    if (!tu_fail)
        tu_rmtree(tmp);
    TEST_MAIN_END();
}
