/* request.c: a generation request's life (reference counts) and the checks
 * that turn an OpenAI-style JSON body into one, or into a 4xx naming the
 * offending parameter. Prompt tokens are counted as whitespace-separated words
 * so usage is exact and reproducible without a tokenizer. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void eng_req_ref(eng_req *r) { atomic_fetch_add(&r->refs, 1); }

void eng_req_unref(eng_req *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    ll_buf_free(&r->out);
    free(r);
}

static int count_words(const char *s)
{
    int n = 0, in = 0;
    for (; *s; s++) {
        int sp = isspace((unsigned char)*s);
        if (!sp && !in)
            n++;
        in = !sp;
    }
    return n;
}

/* Words of a message content: a string, null, or an array of parts of which
 * the {"type":"text","text":...} ones count. -1 = wrong type. */
static int content_words(const cJSON *c)
{
    if (!c || cJSON_IsNull(c))
        return 0;
    if (cJSON_IsString(c))
        return count_words(c->valuestring);
    if (!cJSON_IsArray(c))
        return -1;
    int n = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        if (!cJSON_IsObject(part))
            return -1;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (t && !cJSON_IsString(t))
            return -1;
        if (t)
            n += count_words(t->valuestring);
    }
    return n;
}

/* An optional integer field: 0 absent, 1 present (in *out), -1 wrong type. */
static int opt_int(const cJSON *o, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > 2e9)
        return -1;
    *out = (int)v->valuedouble;
    return 1;
}

static int opt_bool(const cJSON *o, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsBool(v))
        return -1;
    *out = cJSON_IsTrue(v);
    return 1;
}

#define BAD(st, p, ...)                                                        \
    do {                                                                       \
        *status = (st);                                                        \
        *param = (p);                                                          \
        ll_errf(msg, msglen, __VA_ARGS__);                                     \
        goto fail;                                                             \
    } while (0)

eng_req *eng_req_parse(eng_engine *e, int kind, const char *body, size_t len,
                       int *status, const char **param, char *msg, size_t msglen)
{
    const eng_config *cfg = &e->cfg;
    eng_req *r = NULL;
    const char *end = NULL;
    cJSON *root = NULL;
    int prompt = 0;

    *param = NULL;
    if (len == 0 || memchr(body, '\0', len))
        BAD(400, NULL, "request body must be a JSON object");
    root = cJSON_ParseWithOpts(body, &end, 1);
    if (!root)
        BAD(400, NULL, "malformed JSON in request body (near byte %zu)",
            end && end >= body ? (size_t)(end - body) : (size_t)0);
    if (!cJSON_IsObject(root))
        BAD(400, NULL, "request body must be a JSON object");

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model))
            BAD(400, "model", "'model' must be a string");
        if (strcmp(model->valuestring, cfg->model) != 0)
            BAD(404, "model", "The model `%.100s` does not exist (this server serves `%s`).",
                model->valuestring, cfg->model);
    }

    if (kind == ENG_REQ_CHAT) {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!msgs)
            BAD(400, "messages", "'messages' is required");
        if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
            BAD(400, "messages", "'messages' must be a non-empty array");
        const cJSON *m;
        int i = 0;
        cJSON_ArrayForEach(m, msgs) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            if (!cJSON_IsObject(m) || !cJSON_IsString(role))
                BAD(400, "messages", "messages[%d] must be an object with a string 'role'", i);
            int w = content_words(cJSON_GetObjectItemCaseSensitive(m, "content"));
            if (w < 0)
                BAD(400, "messages", "messages[%d].content must be a string or an array of text parts", i);
            prompt += w;
            i++;
        }
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (!p)
            BAD(400, "prompt", "'prompt' is required");
        if (cJSON_IsString(p)) {
            prompt = count_words(p->valuestring);
        } else if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) {
            const cJSON *s;
            cJSON_ArrayForEach(s, p) {
                if (!cJSON_IsString(s))
                    BAD(400, "prompt", "'prompt' must be a string or an array of strings");
                prompt += count_words(s->valuestring);
            }
        } else {
            BAD(400, "prompt", "'prompt' must be a string or an array of strings");
        }
    }

    int max_tok = cfg->default_max_tokens, min_tok = 0, think = cfg->think_tokens;
    int stream = 0, ignore_eos = 0, inc_usage = 0, cont_usage = 0, got;
    const char *mt_key = "max_completion_tokens";
    got = opt_int(root, mt_key, &max_tok);
    if (got == 0) {
        mt_key = "max_tokens";
        got = opt_int(root, mt_key, &max_tok);
    }
    if (got < 0)
        BAD(400, mt_key, "'%s' must be an integer", mt_key);
    if (max_tok <= 0)
        BAD(400, mt_key, "'%s' must be at least 1, got %d", mt_key, max_tok);
    if (max_tok > cfg->max_tokens_limit)
        BAD(400, mt_key, "'%s' is %d, over this server's limit of %d", mt_key, max_tok,
            cfg->max_tokens_limit);
    if (opt_int(root, "min_tokens", &min_tok) < 0 || min_tok < 0)
        BAD(400, "min_tokens", "'min_tokens' must be a non-negative integer");
    if (min_tok > max_tok)
        BAD(400, "min_tokens", "'min_tokens' (%d) must not exceed max_tokens (%d)", min_tok, max_tok);
    if (opt_int(root, "think_tokens", &think) < 0 || think < 0)
        BAD(400, "think_tokens", "'think_tokens' must be a non-negative integer");
    if (opt_bool(root, "stream", &stream) < 0)
        BAD(400, "stream", "'stream' must be a boolean");
    if (opt_bool(root, "ignore_eos", &ignore_eos) < 0)
        BAD(400, "ignore_eos", "'ignore_eos' must be a boolean");
    const cJSON *temp = cJSON_GetObjectItemCaseSensitive(root, "temperature");
    if (temp && !cJSON_IsNull(temp) &&
        (!cJSON_IsNumber(temp) || temp->valuedouble < 0 || temp->valuedouble > 2))
        BAD(400, "temperature", "'temperature' must be a number in [0, 2]");
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so))
            BAD(400, "stream_options", "'stream_options' must be an object");
        if (opt_bool(so, "include_usage", &inc_usage) < 0)
            BAD(400, "stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        if (opt_bool(so, "continuous_usage_stats", &cont_usage) < 0)
            BAD(400, "stream_options.continuous_usage_stats",
                "'stream_options.continuous_usage_stats' must be a boolean");
    }
    if ((int64_t)prompt + max_tok > cfg->max_context_tok)
        BAD(400, "max_tokens", "prompt (%d tokens) plus max_tokens (%d) exceeds the context limit of %d",
            prompt, max_tok, cfg->max_context_tok);

    r = calloc(1, sizeof *r);
    if (!r)
        BAD(500, NULL, "out of memory");
    atomic_init(&r->refs, 1);
    atomic_init(&r->cancelled, 0);
    r->eng = e;
    r->fd = -1;
    r->id = atomic_fetch_add(&e->next_id, 1);
    /* splitmix-style mix so neighbouring ids give unrelated word sequences */
    uint64_t z = cfg->seed * 0x9e3779b97f4a7c15ULL + r->id;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    r->seed = z ^ (z >> 27);
    r->created_s = ll_wall_ns() / 1000000000LL;
    r->kind = kind;
    r->stream = stream;
    r->include_usage = stream && inc_usage;
    r->continuous_usage = stream && cont_usage;
    r->prompt_tok = prompt;
    r->max_tok = max_tok;
    r->min_tok = min_tok;
    r->think_tok = think < max_tok ? think : max_tok;
    r->target_tok = max_tok;
    if (!ignore_eos && cfg->stop_after_tok > 0) {
        int natural = cfg->stop_after_tok > min_tok ? cfg->stop_after_tok : min_tok;
        if (natural < max_tok) {
            r->target_tok = natural;
            r->stop_early = 1;
            if (r->think_tok > natural)
                r->think_tok = natural;
        }
    }
    r->slot = -1;
    cJSON *mj = cJSON_CreateString(cfg->model);
    char *ms = mj ? cJSON_PrintUnformatted(mj) : NULL;
    cJSON_Delete(mj);
    if (!ms || strlen(ms) >= sizeof r->model_json) {
        free(ms);
        BAD(500, NULL, "out of memory");
    }
    strcpy(r->model_json, ms);
    free(ms);
    cJSON_Delete(root);
    return r;
fail:
    free(r);
    cJSON_Delete(root);
    return NULL;
}
