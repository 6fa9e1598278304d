/* test_sweep_prompt_len.c: --prompt-tokens N is N tokens as the server
 * counts the prompt, the request's head inside, against the bundled engine
 * (a real server: it counts a prompt's words, and answers POST /tokenize
 * with that count).
 *
 * (a) No --tokenizer, /v1/completions and chat: the prompts are fitted by
 *     the server's /tokenize before the first level (said on stderr, every
 *     one exact), and every request's usage.prompt_tokens equals the length
 *     its prompt was built to (prompt_tok_target); the fit says nothing
 *     about prompt lengths (the engine has no chat template: no template
 *     note on chat either).
 * (b) --tokenizer: the prompt as sent (head included, recorded with
 *     --record-outputs) counts exactly its target under that tokenizer. The
 *     engine counts words, not that tokenizer's tokens, so the fit notes the
 *     difference: on completions as the tokenizer's, never naming a chat
 *     template; on chat as the template's tokens, apart from the length.
 * (c) Prompts not asked in tokens (--prompt-words), or behind a shared
 *     prefix: nothing is fitted, nothing said.
 *
 * argv: none (LOADLAW_BIN, TOKENIZER_JSON). Real time: about 3 s. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scenario.h"
#include "testutil.h"
#include "tsupport.h"

#define ENGINE "--engine backend=synthetic,law=52+30n,time_scale=0.02 "

/* Sweep into dir/name (extra flags appended); stderr in dir/name.err and
 * the fit's text in dir/name.fit. */
static void sweep(const char *dir, const char *name, const char *extra)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep " ENGINE "-c 1,2 -n 6 --max-tokens 4 -q --no-report -o %s/%s %s > /dev/null "
                         "2> %s/%s.err && " LOADLAW_BIN " fit %s/%s > %s/%s.fit 2>&1",
             dir, name, extra, dir, name, dir, name, dir, name);
    CHECK(tu_sh(cmd) == 0, "%s: sweep and fit (%s)", name, dir);
}

/* Per request record of a run: n counted, k those whose prompt length (as
 * the server's usage says, or as t counts the prompt sent when t is set)
 * equals its prompt_tok_target. */
typedef struct exact {
    const scn_tokenizer *t;
    size_t n, k;
} exact;

static int on_request(const cJSON *o, size_t line_no, void *ctx)
{
    exact *x = ctx;
    (void)line_no;
    if (strcmp(ll_json_str(o, "type", ""), "request") != 0)
        return 0;
    double want = ll_json_num(o, "prompt_tok_target", -2);
    if (!x->t) {
        x->n++;
        x->k += ll_json_num(cJSON_GetObjectItemCaseSensitive(o, "usage"), "prompt_tokens", -1) == want;
        return 0;
    }
    /* the prompt as JSON: a string, or chat's messages (the user's content) */
    cJSON *sent = cJSON_Parse(ll_json_str(cJSON_GetObjectItemCaseSensitive(o, "outputs"), "prompt", "null"));
    const char *s = cJSON_IsString(sent) ? sent->valuestring
                                          : ll_json_str(cJSON_GetArrayItem(sent, 0), "content", NULL);
    if (s) {
        x->n++;
        x->k += (double)scn_tokenizer_count(x->t, s, strlen(s)) == want;
    }
    cJSON_Delete(sent);
    return 0;
}

/* Run name's requests counted exact, of *n: by the server's usage (t NULL)
 * or by t on the prompt sent. */
static size_t exact_prompts(const char *dir, const char *name, const scn_tokenizer *t, size_t *n)
{
    char path[512], err[256];
    exact x = {.t = t};
    snprintf(path, sizeof path, "%s/%s/records.jsonl", dir, name);
    CHECK(ll_jsonl_foreach(path, on_request, &x, NULL, err, sizeof err) == 0, "records: %s", err);
    *n = x.n;
    return x.k;
}

static void fitted_by_server(const char *dir)
{
    const char *eps[] = {"completions", "chat"};
    for (int e = 0; e < 2; e++) {
        char extra[128], path[512];
        size_t n = 0;
        snprintf(extra, sizeof extra, "--prompt-tokens 40 --endpoint %s", eps[e]);
        sweep(dir, eps[e], extra);
        snprintf(path, sizeof path, "%s/%s.err", dir, eps[e]);
        CHECK(tu_file_has(path, "12 prompts fitted to their token lengths (the request's head inside) by the "
                                "server's /tokenize") && tu_file_has(path, ": 12 exact;"),
              "%s: the 12 prompts fitted by /tokenize, each exact, and said", eps[e]);
        size_t k = exact_prompts(dir, eps[e], NULL, &n);
        CHECK(n == 12 && k == 12, "%s: usage.prompt_tokens is the built length in %zu of %zu requests", eps[e], k, n);
        snprintf(path, sizeof path, "%s/%s.fit", dir, eps[e]);
        CHECK(!tu_file_has(path, "prompts built to") && !tu_file_has(path, "chat template") &&
                  !tu_file_has(path, "prompts asked for"),
              "%s: no note on prompt lengths", eps[e]);
    }
}

static void fitted_by_tokenizer(const char *dir)
{
    scn_tokenizer *t = NULL;
    char err[256] = "", extra[512], path[512];
    CHECK(scn_tokenizer_load(TOKENIZER_JSON, &t, err, sizeof err) == 0, "tokenizer: %s", err);
    if (!t)
        return;
    const char *eps[] = {"completions", "chat"};
    for (int e = 0; e < 2; e++) {
        char name[32];
        size_t n = 0;
        snprintf(name, sizeof name, "tok-%s", eps[e]);
        snprintf(extra, sizeof extra, "--prompt-tokens 40 --endpoint %s --record-outputs --tokenizer %s", eps[e],
                 TOKENIZER_JSON);
        sweep(dir, name, extra);
        size_t k = exact_prompts(dir, name, t, &n);
        CHECK(n == 12 && k == 12, "%s: the prompt as sent, head inside, counts its target in %zu of %zu", name, k, n);
        snprintf(path, sizeof path, "%s/%s.err", dir, name);
        CHECK(tu_file_has(path, "by the tokenizer: 12 exact;"), "%s: fitted by the tokenizer, said", name);
        snprintf(path, sizeof path, "%s/%s.fit", dir, name);
        if (e == 0)
            CHECK(tu_file_has(path, "its tokenizer differs from the one used") && !tu_file_has(path, "template"),
                  "completions: the engine's word count noted as the tokenizer's, no template named");
        else
            CHECK(tu_file_has(path, "the chat template: ") && !tu_file_has(path, "its tokenizer differs"),
                  "chat: the difference noted as the chat template's tokens");
    }
    scn_tokenizer_free(t);
}

static void not_fitted(const char *dir)
{
    char path[512];
    sweep(dir, "words", "--prompt-words 30 --endpoint completions");
    sweep(dir, "prefix", "--prompt-tokens 40 --shared-prefix 2:16 --endpoint completions");
    snprintf(path, sizeof path, "%s/words.err", dir);
    CHECK(!tu_file_has(path, "prompts fitted"), "--prompt-words: nothing fitted");
    snprintf(path, sizeof path, "%s/prefix.err", dir);
    CHECK(!tu_file_has(path, "prompts fitted"), "--shared-prefix: nothing fitted");
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_prompt_len", dir, sizeof dir))
        return 1;
    fitted_by_server(dir);
    fitted_by_tokenizer(dir);
    not_fitted(dir);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
