/* prompt_len.c: prompts of the length asked, as the target counts them.
 * Before the first level, synthetic prompts asked in tokens (--prompt-tokens)
 * are fitted so that each, with the head its request carries, counts its
 * length (scenario.h scn_prompts_fit): by the scenario's tokenizer when one
 * is named, else by the server's own /tokenize when it has one (vLLM,
 * SGLang, llama.cpp, the bundled engine), else not at all (words at ~1.33
 * tokens each, as before, and said).
 *
 * What "counts" means follows the endpoint: on /v1/completions (and
 * /generate) the prompt is what the server counts, special tokens (BOS)
 * included, so its usage.prompt_tokens is the length asked; on chat (and
 * responses) the prompt is a message's body, counted without special
 * tokens, and the chat template's tokens are the server's count less the
 * body's (fit reports them apart).
 *
 * DESIGN: blocking requests on the sweep's thread before any worker runs,
 * one connection (common's http1.h) with the requests' credentials; two
 * spellings: vLLM's and SGLang's {"model","prompt","add_special_tokens"}
 * answered by {"count","tokens"}, and llama.cpp's {"content","add_special"}
 * answered by {"tokens"}. The first count finds which one the server takes. */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "http1.h"
#include "internal.h"

#define TOKENIZE_MAX_BYTES (1u << 20)
#define TOKENIZE_TIMEOUT_MS 10000L

enum { SPELL_OPENAI = 1, SPELL_LLAMACPP = 2 };

typedef struct remote {
    ll_http1 *h;
    const char *model;
    int special; /* count special tokens as the endpoint's server does */
    int spell;   /* SPELL_*; 0 while unknown */
    ll_buf body, resp;
    char why[320];
} remote;

/* The request body for text in spelling sp. */
static int put_body(remote *t, int sp, const char *text)
{
    const char *b = t->special ? "true" : "false";
    int rc = 0;
    ll_buf_reset(&t->body);
    if (sp == SPELL_OPENAI) {
        LL_TRY(ll_buf_printf(&t->body, "{\"model\":"));
        LL_TRY(ll_json_escape(&t->body, t->model));
        LL_TRY(ll_buf_printf(&t->body, ",\"add_special_tokens\":%s,\"prompt\":", b));
    } else {
        LL_TRY(ll_buf_printf(&t->body, "{\"add_special\":%s,\"content\":", b));
    }
    LL_TRY(ll_json_escape(&t->body, text));
    LL_TRY(ll_buf_append(&t->body, "}", 1));
fail:
    return rc;
}

/* text's count in spelling sp: >= 0, LL_EINVAL when the server does not
 * answer that spelling, LL_EIO when no answer came. */
static int64_t count_as(remote *t, int sp, const char *text)
{
    long status = 0;
    int rc = put_body(t, sp, text);
    if (rc == 0)
        rc = ll_http1_do(t->h, t->body.p, &t->resp, &status, t->why, sizeof t->why);
    if (rc)
        return rc;
    cJSON *o = cJSON_ParseWithLength(t->resp.p ? t->resp.p : "", t->resp.len);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "count");
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    int64_t n = status != 200 ? LL_EINVAL
                : cJSON_IsNumber(c) && c->valuedouble >= 0 ? (int64_t)c->valuedouble
                : cJSON_IsArray(toks)                      ? (int64_t)cJSON_GetArraySize(toks)
                                                           : LL_EINVAL;
    if (n == LL_EINVAL && status == 200)
        snprintf(t->why, sizeof t->why, "HTTP 200 without a count or tokens");
    else if (n == LL_EINVAL)
        snprintf(t->why, sizeof t->why, "HTTP %ld", status);
    cJSON_Delete(o);
    return n;
}

static int64_t remote_count(void *ctx, const char *text, size_t len)
{
    remote *t = ctx;
    (void)len;
    return count_as(t, t->spell, text);
}

/* Open /tokenize under url and find its spelling: 0, or an error with why. */
static int remote_open(remote *t, const sweep_job *j, const char *url)
{
    char tk_url[2048];
    if (ll_url_join(url, "/v1", "/tokenize", tk_url, sizeof tk_url)) {
        snprintf(t->why, sizeof t->why, "the URL is too long");
        return LL_ERANGE;
    }
    ll_http1_opts o = {.url = tk_url, .content_type = "application/json", .api_key = j->api_key,
                       .headers = j->scn->headers, .n_headers = j->scn->n_headers,
                       .max_bytes = TOKENIZE_MAX_BYTES, .timeout_ms = TOKENIZE_TIMEOUT_MS};
    int rc = ll_http1_open(&o, &t->h, t->why, sizeof t->why);
    /* "the" is a token in every vocabulary: a count of 0 is a server that
     * ignored the spelling (llama.cpp answers {"tokens":[]} without "content") */
    for (int sp = SPELL_OPENAI; rc == 0 && sp <= SPELL_LLAMACPP; sp++) {
        int64_t n = count_as(t, sp, "the");
        if (n > 0) {
            t->spell = sp;
            return 0;
        }
        if (n == 0)
            snprintf(t->why, sizeof t->why, "it counted no token in \"the\"");
        rc = n == LL_EINVAL || n == 0 ? 0 : (int)n;
    }
    return rc ? rc : LL_EINVAL;
}

static int64_t local_count(void *ctx, const char *text, size_t len) { return scn_tokenizer_count(ctx, text, len); }

/* The line that says what was done, on stderr. */
static void say(const scn_fit_stats *st, const char *by, const remote *t, double s)
{
    fprintf(stderr, "loadlaw sweep: %zu prompts fitted to their token lengths (the request's head inside) by %s%s: "
                    "%zu exact",
            st->n_fitted, by, t && !t->special ? " (the message body, without the chat template)" : "",
            st->n_exact);
    if (st->n_exact < st->n_fitted)
        fprintf(stderr, ", the rest within %d token%s", st->max_off_tok, st->max_off_tok == 1 ? "" : "s");
    fprintf(stderr, "; %zu counts in %.2f s\n", st->n_counts, s);
}

int sweep_fit_prompts(const sweep_job *j, lg_run *run, const char *url, const char *model, int rank)
{
    const scn_tokenizer *tok = scn_prompts_tokenizer(j->prompts);
    remote t = {.model = model};
    scn_fit_stats st;
    char err[512] = "";
    int rc = 0;
    if (!scn_prompts_fittable(j->prompts))
        return SWEEP_OK;
    int64_t t0 = ll_now_ns();
    size_t n_use = lg_run_prompts_sent(run);
    if (tok) {
        rc = scn_prompts_fit(j->prompts, n_use, lg_run_prompt_head, run, local_count, (void *)tok, &st, err,
                             sizeof err);
    } else {
        scn_endpoint ep = j->scn->endpoint;
        t.special = ep == SCN_ENDPOINT_COMPLETIONS || ep == SCN_ENDPOINT_GENERATE;
        if (remote_open(&t, j, url)) {
            if (rank == 0)
                fprintf(stderr, "loadlaw sweep: the server has no /tokenize that loadlaw reads (%s): prompts are "
                                "%.2f tokens a word, an estimate; give --tokenizer for exact lengths\n",
                        t.why, SCN_TOKENS_PER_WORD);
            goto out;
        }
        rc = scn_prompts_fit(j->prompts, n_use, lg_run_prompt_head, run, remote_count, &t, &st, err,
                             sizeof err);
        if (rc)
            snprintf(err + strlen(err), sizeof err - strlen(err), " (%s)", t.why);
    }
    if (rc)
        fprintf(stderr, "loadlaw sweep: %s\n", err);
    else if (rank == 0)
        say(&st, tok ? "the tokenizer" : "the server's /tokenize", tok ? NULL : &t, (ll_now_ns() - t0) / 1e9);
out:
    ll_http1_close(t.h);
    ll_buf_free(&t.body);
    ll_buf_free(&t.resp);
    return rc ? SWEEP_FAIL : SWEEP_OK;
}
