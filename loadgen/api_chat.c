/* api_chat.c: OpenAI's chat completions, /v1/chat/completions: the prompt
 * as one user message (a conversation's turns send their own messages,
 * session.c), the rest as the OpenAI family shares it (api_openai.c).
 *
 * Re-scoring (check-decode) sends the recorded messages with the decoded
 * text as the assistant's message to continue, which vLLM scores in place:
 *   {"messages":[...prompt..., {"role":"assistant","content":OUT}],
 *    "continue_final_message":true,"add_generation_prompt":false,
 *    "prompt_logprobs":K,"max_tokens":1,"temperature":0} */
#include "api.h"

static int chat_prompt(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt, size_t head_at)
{
    int rc = 0;
    if (!lg_body_keep(s, "messages"))
        return 0;
    LL_TRY(lg_body_key(b, "messages"));
    LL_TRY(ll_buf_printf(b, "[{\"role\":\"user\",\"content\":"));
    LL_TRY(lg_body_text(b, head, prompt, head_at));
    LL_TRY(ll_buf_append(b, "}]", 2));
fail:
    return rc;
}

static int chat_limits(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage)
{
    return lg_openai_limits(b, s, max_tokens, cont_usage, 1);
}

/* The messages with the output as the assistant's last, to continue. */
static int chat_fill(cJSON *root, cJSON **prompt, const lg_rescore_req *q)
{
    if (!cJSON_IsArray(*prompt))
        return LL_EINVAL;
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddItemToArray(*prompt, m)) {
        cJSON_Delete(m);
        return LL_ENOMEM;
    }
    if (!cJSON_AddStringToObject(m, "role", "assistant") || !cJSON_AddStringToObject(m, "content", q->output) ||
        !cJSON_AddItemToObject(root, "messages", *prompt))
        return LL_ENOMEM;
    *prompt = NULL; /* root's now */
    return cJSON_AddTrueToObject(root, "continue_final_message") &&
                   cJSON_AddFalseToObject(root, "add_generation_prompt")
               ? 0
               : LL_ENOMEM;
}

static int chat_rescore(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    return lg_openai_rescore(q, chat_fill, "a JSON array of messages", out, err, errlen);
}

const lg_api lg_api_chat = {
    .sends_model = 1,
    .cont_usage = 1,
    .put_prompt = chat_prompt,
    .put_limits = chat_limits,
    .event = lg_openai_event,
    .prompt_key = "messages",
    .rescore = chat_rescore,
};
