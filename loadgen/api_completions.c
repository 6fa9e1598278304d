/* api_completions.c: OpenAI's (legacy) completions, /v1/completions: the
 * prompt as one string, the rest as the OpenAI family shares it
 * (api_openai.c).
 *
 * Re-scoring (check-decode) sends the prompt with the decoded text after it:
 *   {"prompt":PROMPT+OUT,"logprob_start_len":W,"prompt_logprobs":K,
 *    "max_tokens":1,"temperature":0}
 * W is the prompt's whitespace-separated word count: where the bundled
 * engine's scored continuation starts (SGLang's name; vLLM ignores it, its
 * prompt logprobs cover every position anyway). */
#include "api.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int completions_prompt(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt,
                              size_t head_at)
{
    return lg_body_prompt(b, s, "prompt", head, prompt, head_at);
}

static int completions_limits(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage)
{
    return lg_openai_limits(b, s, max_tokens, cont_usage, 0);
}

static int count_words(const char *s)
{
    int n = 0, in = 0;
    for (; *s; s++) {
        int sp = isspace((unsigned char)*s);
        n += !sp && !in;
        in = !sp;
    }
    return n;
}

/* The prompt string with the output after it, and where the output starts. */
static int completions_fill(cJSON *root, cJSON **prompt, const lg_rescore_req *q)
{
    if (!cJSON_IsString(*prompt))
        return LL_EINVAL;
    const char *p = (*prompt)->valuestring;
    size_t a = strlen(p), b = strlen(q->output);
    char *s = malloc(a + b + 1);
    if (!s)
        return LL_ENOMEM;
    memcpy(s, p, a);
    memcpy(s + a, q->output, b + 1);
    const cJSON *added = cJSON_AddStringToObject(root, "prompt", s);
    free(s);
    return added && cJSON_AddNumberToObject(root, "logprob_start_len", count_words(p)) ? 0 : LL_ENOMEM;
}

static int completions_rescore(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    return lg_openai_rescore(q, completions_fill, "a JSON string", out, err, errlen);
}

const lg_api lg_api_completions = {
    .sends_model = 1,
    .cont_usage = 1,
    .put_prompt = completions_prompt,
    .put_limits = completions_limits,
    .event = lg_openai_event,
    .prompt_key = "prompt",
    .rescore = completions_rescore,
};
