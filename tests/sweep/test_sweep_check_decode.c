/* test_sweep_check_decode.c: `loadlaw check-decode` over real HTTP (fork/exec
 * of the real binary, the bundled engine restarted from each run's spec).
 *   - a healthy cpu-backend run (chat, greedy, recorded outputs, fixed seeds):
 *     decode and prefill agree within 1e-3 nat at every position, every
 *     decoded token is prefill's argmax, exit 0;
 *   - the same run with the tiled kernel's testing fault (skip_last_tile):
 *     most positions over the tolerance, exit 3;
 *   - a completions run on the synthetic backend (think tags in the text):
 *     agreement, exit 0;
 *   - a run without recorded outputs: exit 2 and the reason;
 *   - a scripted server that answers without "prompt_logprobs", and one that
 *     refuses them with a 400: exit 2 saying the server cannot return them;
 *     what it was sent is the recorded prompt, the decoded text as a final
 *     assistant message and vLLM's keys.
 * About 5 s on 2 cores. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

static char g_tmp[256];

#define CPU "backend=cpu,heads=32,topk=256,d_model=512,d_ff=2048,capacity=1024,threads=2,seed=3"

/* A sweep into g_tmp/name; its exit status. */
static int sweep(const char *name, const char *engine, const char *endpoint, int record)
{
    char dir[400], out[400];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    snprintf(out, sizeof out, "%s/%s.sweep", g_tmp, name);
    char *args[] = {"loadlaw", "sweep", "--engine", (char *)engine, "--endpoint", (char *)endpoint, "-c", "1,2",
                    "-n", "6", "--max-tokens", "16", "--think-tokens", "4", "--seed", "7", "-o", dir,
                    "--no-report", "--gpu", "off", "--greedy", record ? "--record-outputs" : NULL, NULL};
    return tu_run(LOADLAW_BIN, args, out, out, 120);
}

/* check-decode on g_tmp/name with extra (NULL-ended, at most 4); its exit
 * status, stdout parsed as JSON in *json (NULL: not JSON), stderr in *err. */
static int check(const char *name, const char *const *extra, cJSON **json, char **err)
{
    char dir[400], out[400], errf[400];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    snprintf(out, sizeof out, "%s/%s.check", g_tmp, name);
    snprintf(errf, sizeof errf, "%s/%s.check-err", g_tmp, name);
    char *args[10] = {"loadlaw", "check-decode", dir, "--json"};
    for (int i = 0; extra && extra[i] && i < 4; i++)
        args[4 + i] = (char *)extra[i];
    int rc = tu_run(LOADLAW_BIN, args, out, errf, 120);
    *json = tu_json_file(out);
    *err = tu_slurp(errf);
    if (!*err)
        *err = strdup("");
    return rc;
}

static double num(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_cpu(void)
{
    cJSON *j = NULL;
    char *e = NULL;
    CHECK(sweep("cpu", CPU, "chat", 1) == 0, "healthy cpu sweep");
    int rc = check("cpu", NULL, &j, &e);
    CHECK(rc == 0, "healthy: exit 0 (got %d): %s", rc, e);
    CHECK(num(j, "all", "positions") == 12 * 16, "healthy: every position compared (%g)", num(j, "all", "positions"));
    CHECK(num(j, "all", "max_abs_delta") <= 1e-3, "healthy: max |delta| %.3g <= 1e-3 nat", num(j, "all", "max_abs_delta"));
    CHECK(num(j, "all", "share_rank1") == 1.0, "healthy: every greedy token is prefill's argmax (%g)",
          num(j, "all", "share_rank1"));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "levels")) == 2, "healthy: two levels");
    cJSON_Delete(j);
    free(e);

    CHECK(sweep("fault", CPU ",attn_fault=skip_last_tile", "chat", 1) == 0, "faulty cpu sweep");
    rc = check("fault", NULL, &j, &e);
    CHECK(rc == 3, "faulty: exit 3 (got %d): %s", rc, e);
    CHECK(num(j, "all", "share_over") > 0.5, "faulty: most positions over the tolerance (%g)", num(j, "all", "share_over"));
    CHECK(num(j, "all", "max_abs_delta") > 0.01, "faulty: max |delta| %.3g > 0.01", num(j, "all", "max_abs_delta"));
    cJSON_Delete(j);
    free(e);
    /* the gate is a flag: nothing is over a tolerance of 1 nat */
    const char *loose[] = {"--tolerance", "1", NULL};
    rc = check("fault", loose, &j, &e);
    CHECK(rc == 0, "faulty with --tolerance 1: exit 0 (got %d)", rc);
    cJSON_Delete(j);
    free(e);
}

static void test_synthetic_and_no_outputs(void)
{
    cJSON *j = NULL;
    char *e = NULL;
    CHECK(sweep("syn", "backend=synthetic,law=2+1n,time_scale=0.05", "completions", 1) == 0, "synthetic sweep");
    const char *two[] = {"--max-requests", "5", NULL};
    int rc = check("syn", two, &j, &e);
    CHECK(rc == 0, "synthetic completions: exit 0 (got %d): %s", rc, e);
    CHECK(num(j, "all", "requests") == 5 && num(j, "all", "max_abs_delta") <= 1e-4,
          "synthetic: 5 requests, max |delta| %.3g (print rounding only)", num(j, "all", "max_abs_delta"));
    cJSON_Delete(j);
    free(e);

    CHECK(sweep("plain", "backend=synthetic,law=2+1n,time_scale=0.05", "chat", 0) == 0, "sweep without outputs");
    rc = check("plain", NULL, &j, &e);
    CHECK(rc == 2 && strstr(e, "has no recorded outputs"), "no outputs: exit 2 and why (got %d): %s", rc, e);
    cJSON_Delete(j);
    free(e);
}

typedef struct script {
    int refuse;
    int n;
    char body[70000];
} script;

static int answer(int fd, const char *head, void *ctx)
{
    script *s = ctx;
    size_t len = 0;
    const char *b = tu_httpd_body(&len);
    (void)head;
    if (s->n++ == 0 && b)
        snprintf(s->body, sizeof s->body, "%s", b);
    static const char no_plp[] = "{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                                 "\"message\":{\"role\":\"assistant\",\"content\":\" a\"},\"finish_reason\":\"length\"}]}";
    static const char refused[] = "{\"error\":{\"message\":\"prompt_logprobs is not supported\",\"code\":400}}";
    if (s->refuse)
        tu_httpd_reply(fd, "400 Bad Request", "application/json", refused, sizeof refused - 1);
    else
        tu_httpd_reply(fd, "200 OK", "application/json", no_plp, sizeof no_plp - 1);
    return 0;
}

static void test_unsupported(void)
{
    for (int refuse = 0; refuse < 2; refuse++) {
        static script s;
        s = (script){.refuse = refuse};
        tu_httpd *h = NULL;
        CHECK(tu_httpd_start(answer, &s, &h) == 0, "scripted server");
        if (!h)
            return;
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", tu_httpd_port(h));
        const char *extra[] = {"--url", url, NULL};
        cJSON *j = NULL;
        char *e = NULL;
        int rc = check("cpu", extra, &j, &e);
        tu_httpd_stop(h);
        CHECK(rc == 2 && strstr(e, "the server cannot return prompt logprobs"),
              "server %s: exit 2 and why (got %d): %s", refuse ? "refusing" : "without them", rc, e);
        CHECK(s.n == 1, "one request, then it stops (%d)", s.n);
        CHECK(strstr(s.body, "\"prompt_logprobs\":1") && strstr(s.body, "\"continue_final_message\":true") &&
                  strstr(s.body, "{\"role\":\"assistant\",\"content\":\" ") && strstr(s.body, "\"messages\":[{\"role\":\"user\""),
              "sent: the recorded prompt, the output as the final assistant message, vLLM's keys: %.300s", s.body);
        cJSON_Delete(j);
        free(e);
    }
}

int main(void)
{
    if (tu_tmpdir("check_decode", g_tmp, sizeof g_tmp))
        return 1;
    test_cpu();
    test_synthetic_and_no_outputs();
    test_unsupported();
    if (tu_fail == 0)
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
