/* test_sweep_prompts.c: what a sweep sends as prompts, and the model it asks
 * for when none is given, against a scripted chat server on loopback that
 * keeps every request body.
 *
 * (a) Fresh prompts (the default): two levels, then a second identical run:
 *     no two requests of either run carry the same prompt, and every prompt
 *     opens with a head of its own (a prefix cache matches from the first
 *     token), so no run's prompt repeats an earlier run's.
 * (b) --reuse-prompts: each level sends the set from its first prompt, as
 *     before: level 1's prompts are level 0's, with no head.
 * (c) No --model: the server's only model from GET /v1/models is asked
 *     for, and said; a server listing two models is a usage error (exit 2)
 *     naming both; one listing none likewise.
 * (d) What the server said per request reaches the records: a finish
 *     reason "stop" at 3 of 8 tokens while ignore_eos was asked is counted
 *     as cut short in the fit, and named.
 *
 * argv: none (LOADLAW_BIN). Real time: about 3 s. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define MAX_BODIES 256

typedef struct server {
    int n_models;              /* what GET /v1/models lists: 0, 1 or 2 */
    int stop_early;            /* answer 3 tokens with finish_reason "stop" */
    char *bodies[MAX_BODIES];  /* the chat requests' bodies */
    size_t n;
} server;

static int answer(int fd, const char *head, void *ctx)
{
    server *s = ctx;
    if (strncmp(head, "GET /v1/models ", 15) == 0) {
        const char *body = s->n_models == 1   ? "{\"object\":\"list\",\"data\":[{\"id\":\"tiny-7b\",\"object\":\"model\"}]}"
                           : s->n_models == 2 ? "{\"object\":\"list\",\"data\":[{\"id\":\"a-model\"},{\"id\":\"b-model\"}]}"
                                              : "{\"object\":\"list\",\"data\":[]}";
        tu_httpd_reply(fd, "200 OK", "application/json", body, strlen(body));
        return 0;
    }
    if (strncmp(head, "POST /v1/chat/completions ", 26) != 0) {
        tu_httpd_reply(fd, "404 Not Found", "text/plain", "", 0);
        return 0;
    }
    size_t len;
    const char *b = tu_httpd_body(&len);
    if (s->n < MAX_BODIES && b)
        s->bodies[s->n++] = strdup(b);
    ll_buf sse = {0};
    int n_tok = s->stop_early ? 3 : 8;
    for (int i = 0; i < n_tok; i++)
        ll_buf_printf(&sse, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":%s}]}\n\n",
                      i, i == n_tok - 1 ? (s->stop_early ? "\"stop\"" : "\"length\"") : "null");
    ll_buf_printf(&sse,
                  "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":%d,"
                  "\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\ndata: [DONE]\n\n",
                  n_tok);
    tu_httpd_reply(fd, "200 OK", "text/event-stream", sse.p, sse.len);
    ll_buf_free(&sse);
    return 0;
}

/* The user message of a chat body ("" when none). */
static char *prompt_of(const char *body)
{
    cJSON *j = cJSON_Parse(body);
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "messages"), 0);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    char *out = strdup(cJSON_IsString(c) ? c->valuestring : "");
    cJSON_Delete(j);
    return out;
}

static void forget(server *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->bodies[i]);
    s->n = 0;
}

static int sweep(const char *dir, int port, const char *name, const char *extra, const char *errname)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "rm -rf %s/%s && " LOADLAW_BIN " sweep --url http://127.0.0.1:%d -c 1,2 -n 4 --max-tokens 8 "
             "--extra-body '{\"ignore_eos\":true}' --no-metrics --no-report -q -o %s/%s %s > %s/%s.out 2> %s/%s",
             dir, name, port, dir, name, extra, dir, name, dir, errname);
    return tu_sh(cmd);
}

/* Every prompt of the first n differs from every other; *heads counts those
 * opening with "[". */
static int all_distinct(char **p, size_t n, size_t *heads)
{
    *heads = 0;
    for (size_t i = 0; i < n; i++) {
        *heads += p[i][0] == '[';
        for (size_t j = 0; j < i; j++)
            if (strcmp(p[i], p[j]) == 0)
                return 0;
    }
    return 1;
}

int main(void)
{
    char dir[256], path[512];
    if (tu_tmpdir("ll_test_sweep_prompts", dir, sizeof dir))
        return 1;
    server s = {.n_models = 1};
    tu_httpd *h = NULL;
    if (tu_httpd_start(answer, &s, &h))
        return 1;
    int port = tu_httpd_port(h);

    /* (a) + (c): fresh prompts, the model found */
    char *p[2 * MAX_BODIES];
    size_t np = 0, heads = 0;
    CHECK(sweep(dir, port, "run1", "", "run1.err") == 0, "a sweep without --model (see %s/run1.err)", dir);
    snprintf(path, sizeof path, "%s/run1.err", dir);
    CHECK(tu_file_has(path, "model: tiny-7b, the only one the server lists"), "the model found is said");
    CHECK(s.n == 8 && tu_count(s.bodies[0], "\"model\":\"tiny-7b\"") == 1, "8 requests asking for tiny-7b: %zu",
          s.n);
    for (size_t i = 0; i < s.n; i++)
        p[np++] = prompt_of(s.bodies[i]);
    forget(&s);
    CHECK(sweep(dir, port, "run2", "--model tiny-7b", "run2.err") == 0, "the same sweep again");
    for (size_t i = 0; i < s.n; i++)
        p[np++] = prompt_of(s.bodies[i]);
    forget(&s);
    CHECK(np == 16 && all_distinct(p, np, &heads) && heads == np,
          "16 prompts over two runs, all distinct, each with its head (%zu heads)", heads);
    CHECK(np == 16 && strncmp(p[0], "[0-", 3) == 0 && strncmp(p[8], "[0-", 3) == 0 && strchr(p[0], ']') &&
              strchr(p[8], ']') && strcmp(strchr(p[0], ']'), strchr(p[8], ']')) == 0 && strcmp(p[0], p[8]) != 0,
          "the same set behind heads that differ, run to run: '%.40s' vs '%.40s'", np ? p[0] : "",
          np > 8 ? p[8] : "");
    for (size_t i = 0; i < np; i++)
        free(p[i]);
    np = 0;

    /* (b) --reuse-prompts: level 1 repeats level 0's first prompts, no head */
    CHECK(sweep(dir, port, "reuse", "--reuse-prompts", "reuse.err") == 0, "a sweep with --reuse-prompts");
    for (size_t i = 0; i < s.n; i++)
        p[np++] = prompt_of(s.bodies[i]);
    forget(&s);
    size_t lvl0_first = 0, lvl1_same = 0;
    for (size_t i = 0; i < np; i++)
        lvl0_first += p[i][0] == '[';
    for (size_t i = 4; i < np; i++)
        for (size_t j = 0; j < 4; j++)
            lvl1_same += strcmp(p[i], p[j]) == 0;
    CHECK(np == 8 && lvl0_first == 0 && lvl1_same == 4, "reuse: no heads (%zu), level 1 repeats level 0 (%zu)",
          lvl0_first, lvl1_same);
    for (size_t i = 0; i < np; i++)
        free(p[i]);

    /* (c) several models, or none: usage errors naming them */
    s.n_models = 2;
    CHECK(sweep(dir, port, "two", "", "two.err") == 2, "two models and no --model: exit 2");
    snprintf(path, sizeof path, "%s/two.err", dir);
    CHECK(tu_file_has(path, "--model is required with a remote --url: the server lists 2 models (a-model, b-model)"),
          "both models named");
    s.n_models = 0;
    CHECK(sweep(dir, port, "none", "", "none.err") == 2, "no model listed and no --model: exit 2");
    snprintf(path, sizeof path, "%s/none.err", dir);
    CHECK(tu_file_has(path, "GET /v1/models listed no model"), "said");
    forget(&s);

    /* (d) stopped early despite ignore_eos: counted, named */
    s.n_models = 1;
    s.stop_early = 1;
    CHECK(sweep(dir, port, "short", "", "short.err") == 0, "a sweep whose requests stop at 3 of 8 tokens");
    forget(&s);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, LOADLAW_BIN " fit %s/short --json > %s/short.json 2>/dev/null", dir, dir);
    CHECK(tu_sh(cmd) == 0, "fit");
    snprintf(path, sizeof path, "%s/short.json", dir);
    cJSON *j = tu_json_file(path);
    const cJSON *L = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "levels"), 0);
    const cJSON *ncut = cJSON_GetObjectItemCaseSensitive(L, "n_cut_short");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(L, "cut_short");
    CHECK(cJSON_IsNumber(ncut) && ncut->valuedouble == 4 && cJSON_IsString(why) &&
              strcmp(why->valuestring, "stop x4") == 0,
          "level 0: 4 cut short, 'stop x4'");
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(L, "cache_share");
    CHECK(cJSON_IsNumber(cs) && cs->valuedouble == 0, "the responses' cached tokens: a share of 0");
    snprintf(path, sizeof path, "%s/short/records.jsonl", dir);
    CHECK(tu_count_in(path, "\"cached_tok\":0,\"finish\":\"stop\"") == 8, "the records keep cached_tok and finish");
    cJSON_Delete(j);

    tu_httpd_stop(h);
    forget(&s);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
