/* test_sweep_outputs.c: `sweep --record-outputs --greedy` keeps what each
 * request produced, and `compare` tells whether two runs produced the same,
 * against a scripted chat server on loopback whose tokens are a function of
 * the prompt (the text after the per-request head) and which answers with
 * logprobs in the OpenAI spelling (choices[].logprobs.content[] with token,
 * logprob and top_logprobs; choices[].token_ids as vLLM's return_token_ids).
 *
 * (a) The body asks for temperature 0, a seed, logprobs with top 5; the
 *     records carry outputs (prompt key, ids, tokens, logprobs, top-k, text).
 *     Without the flags, neither the body nor the records change.
 * (b) Two runs that agree (B's logprobs 0.002 off): 100% identical, mean
 *     |delta logprob| 0.0020, --expect-same-outputs 0.99 exits 0.
 * (c) B diverges at token 5 to A's second choice, and A's token is B's
 *     second: 0% identical, divergence p10 = p50 = 5, every pair passes the
 *     top-k check, the gate exits 0.
 * (d) B diverges at token 3 to a token outside A's top-k: the gate exits 3
 *     naming the worst level and an example (prompt key, position, tokens).
 * (e) A server that sends no logprobs: the outputs are compared by text, and
 *     the section says what it could not compare.
 * (f) Two bundled synthetic engines (chat, then completions): their tokens
 *     are a function of the prompt, sent with token ids and logprobs with the
 *     top 5, so the two runs' outputs are identical by construction.
 *
 * argv: none (LOADLAW_BIN). Real time: a few seconds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

enum { M_AGREE, M_JITTER, M_DIVERGE_IN, M_DIVERGE_OUT, M_NO_LOGPROBS };

#define N_TOK 8
#define MAX_BODIES 64

typedef struct server {
    int mode;
    char *bodies[MAX_BODIES];
    size_t n;
} server;

/* A hash of the prompt after its head "[id-tag] ": the tokens' seed. */
static unsigned prompt_hash(const char *body)
{
    const char *c = strstr(body, "\"content\":\"");
    if (!c)
        return 0;
    c += 11;
    if (*c == '[' && strstr(c, "] "))
        c = strstr(c, "] ") + 2;
    const char *e = strchr(c, '"');
    return (unsigned)(ll_fnv64(LL_FNV64_INIT, c, e ? (size_t)(e - c) : strlen(c)) % 1000);
}

/* Position i's chosen token and its top 3 (chosen first) in this mode. */
static void token_at(int mode, unsigned h, int i, char tok[3][32], double lp[3])
{
    snprintf(tok[0], 32, "w%u_%d", h, i);
    snprintf(tok[1], 32, "alt_%d", i);
    snprintf(tok[2], 32, "z_%d", i);
    lp[0] = -0.05 - 0.01 * i, lp[1] = -3.0, lp[2] = -4.0;
    if (mode == M_JITTER)
        lp[0] += 0.002;
    if (mode == M_DIVERGE_IN && i >= 5) {
        /* a near tie broken the other way: A's second choice, A's token second */
        snprintf(tok[0], 32, "alt_%d", i);
        snprintf(tok[1], 32, "w%u_%d", h, i);
        lp[0] = -0.7, lp[1] = -0.75;
    }
    if (mode == M_DIVERGE_OUT && i >= 3) {
        snprintf(tok[0], 32, "bad_%d", i);
        snprintf(tok[1], 32, "q_%d", i);
        snprintf(tok[2], 32, "r_%d", i);
    }
}

static void chunk(ll_buf *sse, int mode, unsigned h, int i)
{
    char tok[3][32];
    double lp[3];
    token_at(mode, h, i, tok, lp);
    ll_buf_printf(sse, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s \"}", tok[0]);
    if (mode != M_NO_LOGPROBS) {
        ll_buf_printf(sse, ",\"token_ids\":[%u],\"logprobs\":{\"content\":[{\"token\":\"%s\",\"logprob\":%.4f,"
                           "\"top_logprobs\":[",
                      (unsigned)(ll_fnv64(LL_FNV64_INIT, tok[0], strlen(tok[0])) % 50000), tok[0], lp[0]);
        for (int k = 0; k < 3; k++)
            ll_buf_printf(sse, "%s{\"token\":\"%s\",\"logprob\":%.4f}", k ? "," : "", tok[k], lp[k]);
        ll_buf_printf(sse, "]}]}");
    }
    ll_buf_printf(sse, ",\"finish_reason\":%s}]}\n\n", i == N_TOK - 1 ? "\"length\"" : "null");
}

static int answer(int fd, const char *head, void *ctx)
{
    server *s = ctx;
    if (strncmp(head, "POST /v1/chat/completions ", 26) != 0) {
        tu_httpd_reply(fd, "404 Not Found", "text/plain", "", 0);
        return 0;
    }
    size_t len;
    const char *b = tu_httpd_body(&len);
    if (s->n < MAX_BODIES && b)
        s->bodies[s->n++] = strdup(b);
    unsigned h = b ? prompt_hash(b) : 0;
    ll_buf sse = {0};
    for (int i = 0; i < N_TOK; i++)
        chunk(&sse, s->mode, h, i);
    ll_buf_printf(&sse, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":%d}}\n\n"
                        "data: [DONE]\n\n",
                  N_TOK);
    tu_httpd_reply(fd, "200 OK", "text/event-stream", sse.p, sse.len);
    ll_buf_free(&sse);
    return 0;
}

static void forget(server *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->bodies[i]);
    s->n = 0;
}

static int sweep(const char *dir, server *s, int port, int mode, const char *name, const char *flags)
{
    char cmd[2048];
    forget(s);
    s->mode = mode;
    snprintf(cmd, sizeof cmd,
             "rm -rf %s/%s && " LOADLAW_BIN " sweep --url http://127.0.0.1:%d --model m -c 1,2 -n 4 --max-tokens %d "
             "--seed 7 --no-metrics --no-report -q %s -o %s/%s > %s/%s.out 2> %s/%s.err",
             dir, name, port, N_TOK, flags, dir, name, dir, name, dir, name);
    return tu_sh(cmd);
}

/* compare A B [extra] into NAME.out/.err; its exit status. */
static int compare(const char *dir, const char *a, const char *b, const char *extra, const char *name)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, LOADLAW_BIN " compare %s/%s %s/%s %s > %s/%s.out 2> %s/%s.err", dir, a, dir, b, extra,
             dir, name, dir, name);
    return tu_sh(cmd);
}

/* compare --json's "outputs" -> "all" member `key` (NAN when absent). */
static double all_num(const char *dir, const char *a, const char *b, const char *key)
{
    char cmd[2048], path[512];
    snprintf(cmd, sizeof cmd, LOADLAW_BIN " compare %s/%s %s/%s --json > %s/j.json 2>/dev/null", dir, a, dir, b, dir);
    if (tu_sh(cmd) != 0)
        return NAN;
    snprintf(path, sizeof path, "%s/j.json", dir);
    cJSON *j = tu_json_file(path);
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "outputs"), "all");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(all, key);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    cJSON_Delete(j);
    return x;
}

static void check_records(const char *dir, server *s, int port)
{
    char path[512];
    const char *rec = "--record-outputs --greedy";
    CHECK(sweep(dir, s, port, M_AGREE, "a", rec) == 0, "sweep a (see %s/a.err)", dir);
    CHECK(s->n == 8 && strstr(s->bodies[0], "\"temperature\":0,\"seed\":7,\"logprobs\":true,\"top_logprobs\":5"),
          "greedy and logprobs asked: %.300s", s->n ? s->bodies[0] : "");
    snprintf(path, sizeof path, "%s/a/records.jsonl", dir);
    CHECK(tu_count_in(path, "\"outputs\":{\"key\":\"p") == 8, "8 request lines carry outputs");
    CHECK(tu_count_in(path, "\"n\":8,\"ids\":[") == 8 && tu_count_in(path, "\"top\":[[[\"w") == 8 &&
              tu_count_in(path, "\"lp\":[-0.05,-0.06,") == 8 && tu_count_in(path, "\"text_hash\":\"") == 8,
          "ids, tokens, logprobs, top-k, text and its hash");
    CHECK(tu_count_in(path, "\"record_outputs\":true,\"greedy\":true") == 1, "the run line's config says so");
    /* off: the body and the records as before */
    CHECK(sweep(dir, s, port, M_AGREE, "off", "") == 0, "sweep without the flags");
    snprintf(path, sizeof path, "%s/off/records.jsonl", dir);
    CHECK(s->n == 8 && !strstr(s->bodies[0], "logprobs") && !strstr(s->bodies[0], "temperature"),
          "no logprobs nor temperature asked: %.300s", s->n ? s->bodies[0] : "");
    CHECK(tu_count_in(path, "\"outputs\"") == 0 && tu_count_in(path, "\"greedy\"") == 0 &&
              tu_count_in(path, "record_outputs") == 0,
          "no outputs in the records");
}

int main(void)
{
    char dir[256], path[512];
    if (tu_tmpdir("ll_test_sweep_outputs", dir, sizeof dir))
        return 1;
    server s = {0};
    tu_httpd *h = NULL;
    if (tu_httpd_start(answer, &s, &h))
        return 1;
    int port = tu_httpd_port(h);
    const char *rec = "--record-outputs --greedy";

    /* (a) */
    check_records(dir, &s, port);

    /* (b) agree, B's logprobs 0.002 off */
    CHECK(sweep(dir, &s, port, M_JITTER, "b_same", rec) == 0, "sweep b_same");
    CHECK(compare(dir, "a", "b_same", "--expect-same-outputs 0.99", "same") == 0, "agreeing runs pass the gate");
    snprintf(path, sizeof path, "%s/same.out", dir);
    CHECK(tu_file_has(path, "outputs: B against A"), "an outputs section");
    double ident = all_num(dir, "a", "b_same", "share_identical"),
           dlp = all_num(dir, "a", "b_same", "mean_abs_dlogprob");
    CHECK(ident == 1 && fabs(dlp - 0.002) < 1e-6, "100%% identical (%g), mean |dlp| 0.002 (%g)", ident, dlp);
    CHECK(all_num(dir, "a", "b_same", "pairs") == 8, "8 pairs matched by prompt key");

    /* (c) a near tie at token 5, within each other's top-k */
    CHECK(sweep(dir, &s, port, M_DIVERGE_IN, "b_tie", rec) == 0, "sweep b_tie");
    CHECK(compare(dir, "a", "b_tie", "--expect-same-outputs 0.99", "tie") == 0, "a top-k-consistent divergence passes");
    double p10 = all_num(dir, "a", "b_tie", "divergence_pos_p10"),
           p50 = all_num(dir, "a", "b_tie", "divergence_pos_p50");
    double ok = all_num(dir, "a", "b_tie", "topk_ok"), sh = all_num(dir, "a", "b_tie", "share_identical");
    CHECK(p10 == 5 && p50 == 5 && ok == 8 && sh == 0,
          "diverged at 5 (p10 %g, p50 %g), 8 top-k ok (%g), 0 identical (%g)", p10, p50, ok, sh);
    dlp = all_num(dir, "a", "b_tie", "mean_abs_dlogprob");
    CHECK(dlp == 0, "identical logprobs over the common prefix: %g", dlp);

    /* (d) outside the top-k at token 3 */
    CHECK(sweep(dir, &s, port, M_DIVERGE_OUT, "b_bad", rec) == 0, "sweep b_bad");
    CHECK(compare(dir, "a", "b_bad", "--expect-same-outputs 0.99", "bad") == 3, "a wrong divergence: exit 3");
    snprintf(path, sizeof path, "%s/bad.err", dir);
    CHECK(tu_file_has(path, "gate: expected same outputs >= 0.99; worst level C=1: 0.000 of 4 pairs: MISSED"),
          "the gate names the worst level (see %s)", path);
    CHECK(tu_file_has(path, ", token 3: A \"w") && tu_file_has(path, "\", B \"bad_3\""), "and an example");
    CHECK(all_num(dir, "a", "b_bad", "divergence_pos_p50") == 3 && all_num(dir, "a", "b_bad", "a_in_top_b") == 0,
          "diverged at 3, A's token not in B's top-k");
    CHECK(compare(dir, "a", "b_bad", "", "bad_nogate") == 0, "without the gate: exit 0");

    /* (e) no logprobs: text only */
    CHECK(sweep(dir, &s, port, M_NO_LOGPROBS, "t1", rec) == 0 && sweep(dir, &s, port, M_NO_LOGPROBS, "t2", rec) == 0,
          "two sweeps of a server without logprobs");
    CHECK(compare(dir, "t1", "t2", "--expect-same-outputs 1", "text") == 0, "same texts pass");
    snprintf(path, sizeof path, "%s/text.out", dir);
    CHECK(tu_file_has(path, "A's server sent no logprobs: no top-k check and no logprob difference; its tokens are "
                            "known only as text"),
          "the section says what it could not compare (see %s)", path);
    CHECK(tu_file_has(path, "8 pairs compared by text only"), "and how it compared");
    CHECK(compare(dir, "off", "a", "", "none") == 0, "one run without outputs");
    snprintf(path, sizeof path, "%s/none.out", dir);
    CHECK(tu_file_has(path, "A recorded no outputs (sweep --record-outputs): nothing to compare"),
          "said (see %s)", path);

    /* (f) the bundled engine, twice, for each endpoint */
    static const char *const eps[2] = {"chat", "completions"};
    for (int e = 0; e < 2; e++) {
        char cmd[2048], a[32], b[32];
        int rc = 0;
        snprintf(a, sizeof a, "eng_%s_a", eps[e]);
        snprintf(b, sizeof b, "eng_%s_b", eps[e]);
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd,
                     LOADLAW_BIN " sweep --engine backend=synthetic,law=52+30n,time_scale=0.01 --endpoint %s "
                                 "-c 1,4 -n 8 --max-tokens 16 --extra-body '{\"return_token_ids\":true}' %s "
                                 "--no-report -q -o %s/%s > /dev/null 2> %s/%s.err",
                     eps[e], rec, dir, k ? b : a, dir, k ? b : a);
            rc |= tu_sh(cmd);
        }
        CHECK(rc == 0, "two bundled-engine sweeps (%s)", eps[e]);
        snprintf(path, sizeof path, "%s/%s/records.jsonl", dir, a);
        CHECK(tu_count_in(path, "\"outputs\":{\"key\":\"p") == 16 && tu_count_in(path, "\"n\":16,\"ids\":[") == 16 &&
                  tu_count_in(path, "\"top\":[[[\" ") == 16,
              "%s: 16 requests with ids, tokens and top-k", eps[e]);
        CHECK(compare(dir, a, b, "--expect-same-outputs 1", "eng") == 0, "%s: the gate at 1 passes", eps[e]);
        double id = all_num(dir, a, b, "share_identical"), pairs = all_num(dir, a, b, "pairs");
        CHECK(id == 1 && pairs == 16, "%s: 16 pairs, all identical (%g, %g)", eps[e], pairs, id);
    }

    tu_httpd_stop(h);
    forget(&s);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
