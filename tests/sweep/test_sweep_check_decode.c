/* test_sweep_check_decode.c: `loadlaw check-decode` over real HTTP (fork/exec
 * of the real binary, the bundled engine restarted from each run's spec).
 *   - a healthy cpu-backend run (chat, greedy, recorded outputs, fixed seeds):
 *     decode and prefill agree within 1e-3 nat at every position, every
 *     decoded token is prefill's argmax, exit 0;
 *   - the same run with the tiled kernel's testing faults (skip_last_tile,
 *     swap_heads): most positions over the bound, exit 3 (judged as fp32,
 *     the bundled engine's arithmetic); skip_last_tile passes a bf16 bound
 *     (--dtype bf16: the fault is smaller than bf16 rounds);
 *   - a completions run on the synthetic backend (think tags in the text):
 *     agreement, exit 0;
 *   - a run without recorded outputs: exit 2 and the reason;
 *   - a scripted server that answers without "prompt_logprobs", and one that
 *     refuses them with a 400: exit 2 saying the server cannot return them;
 *     what it was sent is the recorded prompt, the decoded text as a final
 *     assistant message and vLLM's keys; a llama.cpp answer (its "timings")
 *     is named as such;
 *   - SGLang's /generate, a scripted server answering in its spelling: a
 *     sweep recorded through /generate, re-scored with the prompt's ids (a
 *     first request, logprob_start_len 0) followed by the decoded ids, from
 *     prompt length - 1: the figures are those of the scripted logprobs
 *     (mean |delta| 0.0255, max 0.05, half the tokens prefill's first), exit
 *     3 under the bf16 bound a remote server gets, still 3 with --tolerance
 *     0.1 (prefill ranks another token 0.2 nat higher), 0 with 0.2; a
 *     server answering without
 *     input_token_logprobs, and one refusing with a 400: exit 2.
 * About 6 s on 2 cores. */
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
    /* The bound's rounding part: this fault moves logprobs near -6.9 by less
     * than bf16 rounds there (4 * 2^-8 * 7.9 = 0.12 nat), so a bf16 bound
     * cannot see it; the bundled engine computes in fp32 and is judged so. */
    const char *bf16[] = {"--dtype", "bf16", NULL};
    rc = check("fault", bf16, &j, &e);
    CHECK(rc == 0 && num(j, "all", "share_disagree") == 0, "faulty with --dtype bf16: within bf16 rounding, exit 0 "
          "(got %d, %g disagree)", rc, num(j, "all", "share_disagree"));
    cJSON_Delete(j);
    free(e);

    CHECK(sweep("swap", CPU ",attn_fault=swap_heads", "chat", 1) == 0, "swap_heads cpu sweep");
    rc = check("swap", NULL, &j, &e);
    CHECK(rc == 3 && num(j, "all", "share_disagree") > 0.5, "swap_heads: exit 3 (got %d), most positions disagree "
          "(%g): %s", rc, num(j, "all", "share_disagree"), e);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    CHECK(cJSON_IsString(dt) && strcmp(dt->valuestring, "fp32") == 0 &&
              cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "dtype_assumed")),
          "the bundled engine is judged as fp32, not assumed");
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
    /* llama.cpp llama-server (llama-cpp-python 0.3.36's tree, tests/interop's
     * model) answering check-decode's own request to /v1/chat/completions,
     * recorded: prompt_logprobs ignored, no prompt scores, its timings */
    static const char llama[] =
        "{\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"message\":{\"role\":\"assistant\",\"conten"
        "t\":\"n womaqo\"}}],\"created\":1796208146,\"model\":\"tiny.gguf\",\"system_fingerprint\":\"b1-0c1e5"
        "70\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":44,\"total_"
        "tokens\":45,\"prompt_tokens_details\":{\"cached_tokens\":43}},\"id\":\"chatcmpl-O8HlYSS5OrU04iPsQhhX"
        "okcP86OiNIpW\",\"timings\":{\"cache_n\":43,\"prompt_n\":1,\"prompt_ms\":16.618,\"prompt_per_token_ms"
        "\":16.618,\"prompt_per_second\":60.175713082200026,\"predicted_n\":1,\"predicted_ms\":0.001,\"predic"
        "ted_per_token_ms\":0.0,\"predicted_per_second\":0.0}}\nHTTP 200";
    if (s->refuse == 2)
        tu_httpd_reply(fd, "200 OK", "application/json", llama, sizeof llama - 1);
    else if (s->refuse)
        tu_httpd_reply(fd, "400 Bad Request", "application/json", refused, sizeof refused - 1);
    else
        tu_httpd_reply(fd, "200 OK", "application/json", no_plp, sizeof no_plp - 1);
    return 0;
}

static void test_unsupported(void)
{
    for (int refuse = 0; refuse < 3; refuse++) {
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
        CHECK(refuse != 2 || strstr(e, "llama.cpp's llama-server scores only the tokens it samples"),
              "llama.cpp: named: %s", e);
        CHECK(s.n == 1, "one request, then it stops (%d)", s.n);
        CHECK(strstr(s.body, "\"prompt_logprobs\":1") && strstr(s.body, "\"continue_final_message\":true") &&
                  strstr(s.body, "{\"role\":\"assistant\",\"content\":\" ") && strstr(s.body, "\"messages\":[{\"role\":\"user\""),
              "sent: the recorded prompt, the output as the final assistant message, vLLM's keys: %.300s", s.body);
        cJSON_Delete(j);
        free(e);
    }
}

/* ---- SGLang's /generate ------------------------------------------------------
 * No SGLang server runs here: the answers are written from its source
 * (sgl-project/sglang, python/sglang/srt/): entrypoints/http_server.py
 * sends orjson, compact, streamed as "data: ...\n\n" events ending in
 * "data: [DONE]"; managers/tokenizer_manager.py builds meta_info, with
 * output_token_logprobs / output_top_logprobs as [logprob, id, text]
 * triples, cumulative; a non-streamed answer's meta_info.
 * input_token_logprobs holds one triple per position from logprob_start_len
 * on, the first with a null logprob (managers/
 * scheduler_output_processor_mixin.py: "Always pad the first one with
 * None"), input_top_logprobs beside it (null first) only when
 * top_logprobs_num > 0; a bad request is a 400 {"error":{"message"}}. The
 * scripted model: prompt ids [1, 40, 41] whatever
 * the text; decode says " a" (7) -0.125 and " cat" (12) -0.75; prefill says
 * " a" -0.126 (first) and " cat" -0.7 below " dog" (13) -0.5. */
typedef struct sg_script {
    int mode;                 /* 0 healthy, 1 without input logprobs, 2 refuses */
    int n_gen, n_ids, n_score, n_other;
    char score_body[2048];
} sg_script;

static const char k_sg_stream[] =
    "data: {\"text\":\" a\",\"output_ids\":[7],\"meta_info\":{\"id\":\"9f1c\",\"finish_reason\":null,"
    "\"prompt_tokens\":3,\"weight_version\":\"default\",\"completion_tokens\":1,\"cached_tokens\":0,"
    "\"input_token_logprobs\":[[null,41,\"y\"]],\"output_token_logprobs\":[[-0.125,7,\" a\"]],"
    "\"input_top_logprobs\":[null],\"output_top_logprobs\":[[[-0.125,7,\" a\"]]],\"e2e_latency\":0.004}}\n\n"
    "data: {\"text\":\" a cat\",\"output_ids\":[7,12],\"meta_info\":{\"id\":\"9f1c\",\"finish_reason\":"
    "{\"type\":\"length\",\"length\":2},\"prompt_tokens\":3,\"weight_version\":\"default\",\"completion_tokens\":2,"
    "\"cached_tokens\":0,\"input_token_logprobs\":[[null,41,\"y\"]],\"output_token_logprobs\":[[-0.125,7,\" a\"],"
    "[-0.75,12,\" cat\"]],\"input_top_logprobs\":[null],\"output_top_logprobs\":[[[-0.125,7,\" a\"]],[[-0.5,13,"
    "\" dog\"]]],\"e2e_latency\":0.007}}\n\n"
    "data: [DONE]\n\n";

/* text = the prompt, logprob_start_len 0, no top logprobs, no text */
static const char k_sg_ids[] =
    "{\"text\":\" a\",\"output_ids\":[7],\"meta_info\":{\"id\":\"b20e\",\"finish_reason\":{\"type\":\"length\","
    "\"length\":1},\"prompt_tokens\":3,\"weight_version\":\"default\",\"completion_tokens\":1,\"cached_tokens\":0,"
    "\"input_token_logprobs\":[[null,1,null],[-7.25,40,null],[-3.5,41,null]],\"output_token_logprobs\":"
    "[[-0.126,7,null]],\"e2e_latency\":0.003}}";
/* input_ids = [1,40,41,7,12], logprob_start_len 2, top 1, with text */
static const char k_sg_score[] =
    "{\"text\":\" dog\",\"output_ids\":[13],\"meta_info\":{\"id\":\"c31f\",\"finish_reason\":{\"type\":\"length\","
    "\"length\":1},\"prompt_tokens\":5,\"weight_version\":\"default\",\"completion_tokens\":1,\"cached_tokens\":2,"
    "\"input_token_logprobs\":[[null,41,\"y\"],[-0.126,7,\" a\"],[-0.7,12,\" cat\"]],\"output_token_logprobs\":"
    "[[-0.5,13,\" dog\"]],\"input_top_logprobs\":[null,[[-0.126,7,\" a\"]],[[-0.5,13,\" dog\"]]],"
    "\"output_top_logprobs\":[[[-0.5,13,\" dog\"]]],\"e2e_latency\":0.003}}";
/* a server that ignores return_logprob */
static const char k_sg_plain[] =
    "{\"text\":\" a\",\"output_ids\":[7],\"meta_info\":{\"id\":\"d4a0\",\"finish_reason\":{\"type\":\"length\","
    "\"length\":1},\"prompt_tokens\":3,\"completion_tokens\":1,\"cached_tokens\":0,\"e2e_latency\":0.003}}";
static const char k_sg_refused[] = "{\"error\":{\"message\":\"logprob_start_len (2) is out of range\"}}";

static int sg_answer(int fd, const char *head, void *ctx)
{
    sg_script *s = ctx;
    size_t len = 0;
    const char *b = tu_httpd_body(&len);
    if (strncmp(head, "POST /generate ", 15) != 0 || !b) {
        s->n_other++;
        tu_httpd_reply(fd, "404 Not Found", "text/plain", "not here", 8);
    } else if (strstr(b, "\"stream\":true")) {
        s->n_gen++;
        tu_httpd_reply(fd, "200 OK", "text/event-stream", k_sg_stream, sizeof k_sg_stream - 1);
    } else if (s->mode == 2) {
        s->n_ids++;
        tu_httpd_reply(fd, "400 Bad Request", "application/json", k_sg_refused, sizeof k_sg_refused - 1);
    } else if (strstr(b, "\"input_ids\":")) {
        if (s->n_score++ == 0)
            snprintf(s->score_body, sizeof s->score_body, "%s", b);
        tu_httpd_reply(fd, "200 OK", "application/json", k_sg_score, sizeof k_sg_score - 1);
    } else {
        const char *a = s->mode == 1 ? k_sg_plain : k_sg_ids;
        s->n_ids += strstr(b, "\"logprob_start_len\":0") != NULL;
        tu_httpd_reply(fd, "200 OK", "application/json", a, strlen(a));
    }
    return 0;
}

/* check-decode of g_tmp/sg against a fresh scripted server in *s's mode
 * (--url, and --tolerance tol when given); the server stopped before it
 * returns, so *s may be read. */
static int sg_check(sg_script *s, const char *tol, cJSON **j, char **e)
{
    tu_httpd *h = NULL;
    *j = NULL;
    *e = NULL;
    if (tu_httpd_start(sg_answer, s, &h) != 0)
        return -1;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", tu_httpd_port(h));
    const char *extra[] = {"--url", url, tol ? "--tolerance" : NULL, tol, NULL};
    int rc = check("sg", extra, j, e);
    tu_httpd_stop(h);
    return rc;
}

static void test_sglang(void)
{
    static sg_script s;
    tu_httpd *h = NULL;
    CHECK(tu_httpd_start(sg_answer, &s, &h) == 0, "scripted SGLang server");
    if (!h)
        return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, LOADLAW_BIN " sweep --url http://127.0.0.1:%d --endpoint generate --model tiny -c 1 "
             "-n 3 --max-tokens 2 --record-outputs --greedy --no-metrics --no-report --gpu off -q -o %s/sg > "
             "%s/sg.sweep 2>&1", tu_httpd_port(h), g_tmp, g_tmp);
    int rc = tu_sh(cmd);
    CHECK(rc == 0 && s.n_gen == 3, "a sweep through /generate (exit %d, %d streams)", rc, s.n_gen);

    /* No --url: the run's recorded target, the server still up. */
    cJSON *j = NULL;
    char *e = NULL;
    const char *none[] = {NULL};
    s = (sg_script){0};
    rc = check("sg", none, &j, &e);
    CHECK(rc == 3 && s.n_ids == 3 && s.n_score == 3,
          "no --url: the run's own target re-scores its 3 requests (exit %d, %d ids, %d scores): %s", rc, s.n_ids,
          s.n_score, e ? e : "");
    cJSON_Delete(j);
    free(e);
    /* A target with credentials is recorded with them hidden: no address to
     * send to, said as such, nothing sent. */
    snprintf(cmd, sizeof cmd, LOADLAW_BIN " sweep --url http://u:sekret@127.0.0.1:%d --endpoint generate --model tiny "
             "-c 1 -n 1 --max-tokens 2 --record-outputs --greedy --no-metrics --no-report --gpu off -q -o %s/sgcred > "
             "%s/sgcred.sweep 2>&1", tu_httpd_port(h), g_tmp, g_tmp);
    rc = tu_sh(cmd);
    s = (sg_script){0};
    int rc2 = check("sgcred", none, &j, &e);
    tu_httpd_stop(h);
    CHECK(rc == 0 && rc2 == 2 && strstr(e, "held credentials") && !strstr(e, "sekret") && s.n_ids == 0,
          "recorded URL with credentials: exit 2 and why, nothing sent (sweep %d, check %d, %d sent): %s", rc, rc2,
          s.n_ids, e ? e : "");
    cJSON_Delete(j);
    free(e);

    s = (sg_script){0};
    rc = sg_check(&s, NULL, &j, &e);
    CHECK(rc == 3, "SGLang: decode and prefill disagree past the bf16 bound: exit 3 (got %d): %s", rc, e);
    CHECK(s.n_ids == 3 && s.n_score == 3, "per request: the prompt's ids, then the score (%d, %d)", s.n_ids,
          s.n_score);
    CHECK(strstr(s.score_body, "\"input_ids\":[1,40,41,7,12]") && strstr(s.score_body, "\"logprob_start_len\":2") &&
              strstr(s.score_body, "\"return_logprob\":true") && strstr(s.score_body, "\"top_logprobs_num\":1") &&
              strstr(s.score_body, "\"max_new_tokens\":1") && !strstr(s.score_body, "\"text\""),
          "sent: the prompt's ids and the decoded ids, scored from the last prompt position: %s", s.score_body);
    CHECK(num(j, "all", "positions") == 6 && fabs(num(j, "all", "mean_abs_delta") - 0.0255) < 1e-9 &&
              fabs(num(j, "all", "max_abs_delta") - 0.05) < 1e-9,
          "SGLang: 6 positions, mean |delta| %.6g (0.0255), max %.6g (0.05)", num(j, "all", "mean_abs_delta"),
          num(j, "all", "max_abs_delta"));
    CHECK(num(j, "all", "share_rank1") == 0.5 && num(j, "all", "share_over") == 0.5 &&
              num(j, "all", "share_disagree") == 0.5,
          "SGLang: half the tokens first in prefill (%g), half over the bound (%g) and disagreeing (%g)",
          num(j, "all", "share_rank1"), num(j, "all", "share_over"), num(j, "all", "share_disagree"));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    CHECK(cJSON_IsString(dt) && strcmp(dt->valuestring, "bf16") == 0 &&
              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "dtype_assumed")),
          "a remote server is judged as bf16, said to be assumed");
    cJSON_Delete(j);
    free(e);

    /* |delta| 0.05 is within 0.1 nat, but prefill ranks " dog" 0.2 nat above
     * decode's " cat" (input_top_logprobs): a rank miss beyond the bound */
    s = (sg_script){0};
    rc = sg_check(&s, "0.1", &j, &e);
    CHECK(rc == 3 && num(j, "all", "share_over") == 0 && num(j, "all", "rank_misses") == 3,
          "SGLang with --tolerance 0.1: nothing over, a rank miss per request, exit 3 (got %d, %g over, %g misses): %s",
          rc, num(j, "all", "share_over"), num(j, "all", "rank_misses"), e);
    cJSON_Delete(j);
    free(e);
    s = (sg_script){0};
    rc = sg_check(&s, "0.2", &j, &e);
    CHECK(rc == 0, "SGLang with --tolerance 0.2: exit 0 (got %d): %s", rc, e);
    cJSON_Delete(j);
    free(e);

    for (int mode = 1; mode <= 2; mode++) {
        s = (sg_script){.mode = mode};
        rc = sg_check(&s, NULL, &j, &e);
        CHECK(rc == 2 && e && strstr(e, "the server cannot return prompt logprobs") &&
                  strstr(e, mode == 1 ? "without meta_info.input_token_logprobs" : "HTTP 400"),
              "SGLang %s: exit 2 and why (got %d): %s", mode == 1 ? "without input logprobs" : "refusing", rc,
              e ? e : "");
        CHECK(s.n_ids == 1 && s.n_score == 0 && s.n_other == 0, "one request, then it stops (%d, %d, %d)", s.n_ids,
              s.n_score, s.n_other);
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
    test_sglang();
    if (tu_fail == 0)
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
