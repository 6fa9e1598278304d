/* fuzz_engine_request.c: the engine's request parser (engine/request.c,
 * eng_req_parse), which turns an OpenAI-style body into a request or a 4xx.
 *
 * Input: byte 0 picks the route (chat / completions) and a config variant
 * (stop_after, default think tokens, a small context, a non-ASCII model
 * name), the rest is the body, as the server hands it over (NUL-terminated).
 * Properties: an accepted request is within the limits the config states
 * (tokens planned <= max_tokens <= max_tokens_limit, prompt + max_tokens <=
 * context, thinking <= planned output) and its model name is a JSON string
 * literal; a refused one has a 4xx/5xx status and a message, and the error
 * body the server would send for it is valid UTF-8 and valid JSON carrying
 * that status. A streamed one's first token chunks (logprobs, top-k and
 * token ids included when asked) are JSON events.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "internal.h"

static void check_accepted(const eng_engine *e, const eng_req *r)
{
    const eng_config *cfg = &e->cfg;
    FUZZ_CHECK(r->prompt_tok >= 0);
    FUZZ_CHECK(r->max_tok >= 1 && r->max_tok <= cfg->max_tokens_limit);
    FUZZ_CHECK(r->min_tok >= 0 && r->min_tok <= r->max_tok);
    FUZZ_CHECK((int64_t)r->prompt_tok + r->max_tok <= cfg->max_context_tok);
    FUZZ_CHECK(r->target_tok >= 1 && r->target_tok <= r->max_tok);
    FUZZ_CHECK(r->think_tok >= 0 && r->think_tok <= r->target_tok);
    FUZZ_CHECK(r->stop_early == (r->target_tok < r->max_tok));
    FUZZ_CHECK(r->include_usage <= r->stream && r->continuous_usage <= r->stream);
    FUZZ_CHECK(r->lp_top >= -1 && r->lp_top <= 20);
    cJSON *m = cJSON_Parse(r->model_json);
    FUZZ_CHECK(m && cJSON_IsString(m) && strcmp(m->valuestring, cfg->model) == 0);
    cJSON_Delete(m);
}

/* A streamed request's first tokens (with logprobs and ids when asked):
 * every event's data is JSON. */
static void check_stream(eng_req *r)
{
    int n = r->target_tok < 3 ? r->target_tok : 3;
    if (!r->stream || eng_sse_tokens(r, 0, n) != 0)
        return;
    for (const char *p = r->out.p; p && (p = strstr(p, "data: ")) != NULL;) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        FUZZ_CHECK(end != NULL);
        if (strncmp(p, "[DONE]", 6) != 0) {
            cJSON *j = cJSON_ParseWithLength(p, (size_t)(end - p));
            FUZZ_CHECK(j != NULL);
            cJSON_Delete(j);
        }
        p = end;
    }
}

static void check_refused(int status, const char *param, const char *msg, size_t msglen)
{
    FUZZ_CHECK(status >= 400 && status < 600);
    FUZZ_CHECK(memchr(msg, '\0', msglen) != NULL && msg[0] != '\0');
    ll_buf b = {0};
    if (eng_json_error(&b, status, param, msg) == 0) {
        FUZZ_CHECK(fuzz_utf8_valid(b.p, b.len));
        cJSON *root = cJSON_ParseWithLength(b.p, b.len);
        FUZZ_CHECK(root != NULL);
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
        FUZZ_CHECK(cJSON_IsNumber(code) && code->valueint == status);
        cJSON_Delete(root);
    }
    ll_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    eng_engine *e = calloc(1, sizeof *e);
    char *body = fuzz_strdup(data + 1, size - 1);
    if (!e || !body)
        goto out;
    eng_config_default(&e->cfg);
    /* what a request may ask depends on the backend's caps (prompt
     * logprobs): the synthetic one, the engine's default */
    e->be = &eng_backend_synthetic;
    if (mode & 2)
        e->cfg.stop_after_tok = 16;
    if (mode & 4)
        e->cfg.think_tokens = 8;
    if (mode & 8)
        e->cfg.max_context_tok = 4096;
    if (mode & 16)
        e->cfg.model = "m\xc3\xbc-\xe6\xa8\xa1\xe5\x9e\x8b"; /* "mü-模型" */
    atomic_init(&e->next_id, 1);

    int status = 0;
    const char *param = NULL;
    char msg[256]; /* the size server.c gives it */
    memset(msg, 'x', sizeof msg);
    int kind = (mode & 1) ? ENG_REQ_COMPLETION : ENG_REQ_CHAT;
    eng_req *r = eng_req_parse(e, kind, body, size - 1, &status, &param, msg, sizeof msg);
    if (r) {
        check_accepted(e, r);
        check_stream(r);
        eng_req_unref(r);
    } else {
        check_refused(status, param, msg, sizeof msg);
    }
out:
    free(body);
    free(e);
    return 0;
}
