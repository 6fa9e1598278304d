/* request.c: a generation request's life (reference counts) and the checks
 * that turn an OpenAI-style JSON body into one, or into a 4xx naming the
 * offending parameter. Prompt tokens are counted as whitespace-separated words
 * so usage is exact and reproducible without a tokenizer. */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
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
    eng_cont_free(&r->cont);
    free(r->prefix_keys);
    free(r->toks);
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

/* Where a refused request's answer goes: the HTTP status, the offending
 * parameter (NULL: none) and the message (eng_req_parse's out-parameters). */
typedef struct req_error {
    int *status;
    const char **param;
    char *msg;
    size_t msglen;
} req_error;

/* Fill the answer for a refused request; returns LL_EINVAL for LL_TRY. */
__attribute__((format(printf, 4, 5)))
static int refuse(const req_error *er, int status, const char *param, const char *fmt, ...)
{
    va_list ap;
    *er->status = status;
    *er->param = param;
    va_start(ap, fmt);
    if (er->msglen > 0)
        vsnprintf(er->msg, er->msglen, fmt, ap);
    va_end(ap);
    return LL_EINVAL;
}

/* What a request asked for besides its prompt (defaults from the config). */
typedef struct req_opts {
    int max_tok, min_tok, think_tok;
    int stream, ignore_eos, include_usage, continuous_usage;
    int lp_top, return_ids;       /* eng_req's */
    int prompt_lp;                /* eng_req's; with cont (moved into it) */
    eng_cont cont;
    uint64_t prompt_hash;         /* the token words' seed comes from it */
} req_opts;

/* The body as a JSON object in *root (caller deletes). */
static int parse_body(const char *body, size_t len, cJSON **root, const req_error *er)
{
    const char *end = NULL;
    if (len == 0 || memchr(body, '\0', len))
        return refuse(er, 400, NULL, "request body must be a JSON object");
    *root = cJSON_ParseWithOpts(body, &end, 1);
    if (!*root)
        return refuse(er, 400, NULL, "malformed JSON in request body (near byte %zu)",
                      end && end >= body ? (size_t)(end - body) : (size_t)0);
    if (!cJSON_IsObject(*root))
        return refuse(er, 400, NULL, "request body must be a JSON object");
    char where[128];
    int dup = eng_json_dup_key(*root, where, sizeof where);
    if (dup < 0)
        return refuse(er, 500, NULL, "out of memory");
    if (dup)
        return refuse(er, 400, NULL, "duplicate key \"%s\" in the request body: each key may appear "
                      "once (JSON readers disagree on which of two counts)", where);
    return 0;
}

/* "model", when named, must be the one this server serves. */
static int check_model(const cJSON *root, const eng_config *cfg, const req_error *er)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!model || cJSON_IsNull(model))
        return 0;
    if (!cJSON_IsString(model))
        return refuse(er, 400, "model", "'model' must be a string");
    if (strcmp(model->valuestring, cfg->model) != 0) {
        char name[112]; /* 100 bytes, whole characters, plus "..." */
        eng_clip_utf8(name, sizeof name, model->valuestring, 100);
        return refuse(er, 404, "model", "The model `%s` does not exist (this server serves `%s`).",
                      name, cfg->model);
    }
    return 0;
}

/* The OpenAI API's message roles (it refuses others, 400). */
static int known_role(const char *role)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role, roles[i]) == 0)
            return 1;
    return 0;
}

/* Chat: the words of every message's content. */
static int chat_prompt_tok(const cJSON *root, int *prompt, const req_error *er)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages"), *m;
    int i = 0;
    if (!msgs)
        return refuse(er, 400, "messages", "'messages' is required");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return refuse(er, 400, "messages", "'messages' must be a non-empty array");
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role))
            return refuse(er, 400, "messages", "messages[%d] must be an object with a string 'role'", i);
        if (!known_role(role->valuestring))
            return refuse(er, 400, "messages", "messages[%d].role must be one of system, developer, "
                          "user, assistant, tool or function", i);
        int w = content_words(cJSON_GetObjectItemCaseSensitive(m, "content"));
        if (w < 0)
            return refuse(er, 400, "messages",
                          "messages[%d].content must be a string or an array of text parts", i);
        *prompt += w;
        i++;
    }
    return 0;
}

/* Completions: the words of the prompt string or strings. */
static int completion_prompt_tok(const cJSON *root, int *prompt, const req_error *er)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt"), *s;
    if (!p)
        return refuse(er, 400, "prompt", "'prompt' is required");
    if (cJSON_IsString(p)) {
        *prompt = count_words(p->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
        return refuse(er, 400, "prompt", "'prompt' must be a string or an array of strings");
    cJSON_ArrayForEach(s, p) {
        if (!cJSON_IsString(s))
            return refuse(er, 400, "prompt", "'prompt' must be a string or an array of strings");
        *prompt += count_words(s->valuestring);
    }
    return 0;
}

/* max_completion_tokens (or max_tokens), min_tokens and think_tokens. */
static int read_token_counts(const cJSON *root, const eng_config *cfg, req_opts *o,
                             const req_error *er)
{
    const char *mt_key = "max_completion_tokens";
    int got = opt_int(root, mt_key, &o->max_tok);
    if (got == 0) {
        mt_key = "max_tokens";
        got = opt_int(root, mt_key, &o->max_tok);
    }
    if (got < 0)
        return refuse(er, 400, mt_key, "'%s' must be an integer", mt_key);
    if (o->max_tok <= 0)
        return refuse(er, 400, mt_key, "'%s' must be at least 1, got %d", mt_key, o->max_tok);
    if (o->max_tok > cfg->max_tokens_limit)
        return refuse(er, 400, mt_key, "'%s' is %d, over this server's limit of %d", mt_key,
                      o->max_tok, cfg->max_tokens_limit);
    if (opt_int(root, "min_tokens", &o->min_tok) < 0 || o->min_tok < 0)
        return refuse(er, 400, "min_tokens", "'min_tokens' must be a non-negative integer");
    if (o->min_tok > o->max_tok)
        return refuse(er, 400, "min_tokens", "'min_tokens' (%d) must not exceed max_tokens (%d)",
                      o->min_tok, o->max_tok);
    if (opt_int(root, "think_tokens", &o->think_tok) < 0 || o->think_tok < 0)
        return refuse(er, 400, "think_tokens", "'think_tokens' must be a non-negative integer");
    return 0;
}

/* The sampling parameters: checked as the OpenAI API (and, for its own
 * ones, vLLM) defines them, so a request a real server refuses is refused
 * here too rather than answered as if honoured, and otherwise unused: the
 * engine decodes greedily and its words come from its own seed and the
 * prompt (docs/engine.md). One row each: the range, its open ends, whether
 * only integers fit, and the message's words. */
typedef struct num_param {
    const char *name;
    double lo, hi;
    int lo_open, hi_open, integer;
    const char *range;
} num_param;

static const num_param num_params[] = {
    {"temperature", 0, 2, 0, 0, 0, "a number in [0, 2]"},
    {"top_p", 0, 1, 1, 0, 0, "a number in (0, 1]"},
    {"frequency_penalty", -2, 2, 0, 0, 0, "a number in [-2, 2]"},
    {"presence_penalty", -2, 2, 0, 0, 0, "a number in [-2, 2]"},
    /* vLLM's: above 0, no upper bound (a finite number) */
    {"repetition_penalty", 0, DBL_MAX, 1, 0, 0, "a number above 0"},
    {"min_p", 0, 1, 0, 0, 0, "a number in [0, 1]"},
    /* vLLM's: -1 or 0 turn it off */
    {"top_k", -1, 2147483647.0, 0, 0, 1, "an integer, -1 or 0 (off) or a count up to 2^31 - 1"},
    /* vLLM's bound: a signed 64-bit integer. JSON numbers arrive as doubles,
     * so one past 2^53 is read to the nearest double, as Python's float
     * would and its int would not; the engine does not use the value. */
    {"seed", -9223372036854775808.0, 9223372036854775808.0, 0, 1, 1,
     "an integer in [-2^63, 2^63 - 1]"},
};

static int num_param_ok(const num_param *p, double v)
{
    if (!(v >= p->lo && v <= p->hi) || (p->lo_open && v == p->lo) || (p->hi_open && v == p->hi))
        return 0;
    return !p->integer || v == floor(v);
}

/* A token id as a JSON key: 1 to 10 digits, at most 2^31 - 1. */
static int token_id_key(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
        return 0;
    return strtoull(s, NULL, 10) <= 2147483647u;
}

/* logit_bias: an object of token ids ("42") to biases in [-100, 100]. */
static int read_logit_bias(const cJSON *root, const req_error *er)
{
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias"), *m;
    if (!lb || cJSON_IsNull(lb))
        return 0;
    if (!cJSON_IsObject(lb))
        return refuse(er, 400, "logit_bias", "'logit_bias' must be an object of token ids to numbers");
    cJSON_ArrayForEach(m, lb) {
        if (!token_id_key(m->string) || !cJSON_IsNumber(m) ||
            !(m->valuedouble >= -100 && m->valuedouble <= 100))
            return refuse(er, 400, "logit_bias", "'logit_bias' must map token ids (\"42\") to numbers "
                          "in [-100, 100]");
    }
    return 0;
}

static int read_sampling(const cJSON *root, const req_error *er)
{
    for (size_t i = 0; i < sizeof num_params / sizeof num_params[0]; i++) {
        const num_param *p = &num_params[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, p->name);
        if (v && !cJSON_IsNull(v) && (!cJSON_IsNumber(v) || !num_param_ok(p, v->valuedouble)))
            return refuse(er, 400, p->name, "'%s' must be %s", p->name, p->range);
    }
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (user && !cJSON_IsNull(user) && !cJSON_IsString(user))
        return refuse(er, 400, "user", "'user' must be a string");
    return read_logit_bias(root, er);
}

/* stream, ignore_eos and stream_options. */
static int read_stream_opts(const cJSON *root, req_opts *o, const req_error *er)
{
    if (opt_bool(root, "stream", &o->stream) < 0)
        return refuse(er, 400, "stream", "'stream' must be a boolean");
    if (opt_bool(root, "ignore_eos", &o->ignore_eos) < 0)
        return refuse(er, 400, "ignore_eos", "'ignore_eos' must be a boolean");
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!so || cJSON_IsNull(so))
        return 0;
    if (!cJSON_IsObject(so))
        return refuse(er, 400, "stream_options", "'stream_options' must be an object");
    if (opt_bool(so, "include_usage", &o->include_usage) < 0)
        return refuse(er, 400, "stream_options.include_usage",
                      "'stream_options.include_usage' must be a boolean");
    if (opt_bool(so, "continuous_usage_stats", &o->continuous_usage) < 0)
        return refuse(er, 400, "stream_options.continuous_usage_stats",
                      "'stream_options.continuous_usage_stats' must be a boolean");
    return 0;
}

/* What to say about each token: chat "logprobs": true with "top_logprobs"
 * 0..20, completions "logprobs": 0..20 alternatives; vLLM's
 * "return_token_ids". */
static int read_output_opts(const cJSON *root, int kind, req_opts *o, const req_error *er)
{
    int lp = 0, top = 0;
    o->lp_top = -1;
    if (opt_bool(root, "return_token_ids", &o->return_ids) < 0)
        return refuse(er, 400, "return_token_ids", "'return_token_ids' must be a boolean");
    if (kind == ENG_REQ_CHAT) {
        if (opt_bool(root, "logprobs", &lp) < 0)
            return refuse(er, 400, "logprobs", "'logprobs' must be a boolean");
        if (opt_int(root, "top_logprobs", &top) < 0 || top < 0 || top > 20)
            return refuse(er, 400, "top_logprobs", "'top_logprobs' must be an integer from 0 to 20");
        o->lp_top = lp ? top : -1;
    } else {
        int got = opt_int(root, "logprobs", &top);
        if (got < 0 || top < 0 || top > 20)
            return refuse(er, 400, "logprobs", "'logprobs' must be an integer from 0 to 20");
        o->lp_top = got ? top : -1;
    }
    return 0;
}

/* What this engine does not do, refused rather than ignored (a 200 would
 * answer another question than the one asked): several choices (n,
 * best_of), stop sequences and echo/suffix (its words are synthetic: only
 * max_tokens, ignore_eos and the engine's stop_after end an answer), and
 * token logprobs or ids outside a stream (they are computed step by step
 * into the stream's events). */
static int read_unsupported(const cJSON *root, const req_opts *o, const req_error *er)
{
    static const char *const one[] = {"n", "best_of"};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        int v = 1, got = opt_int(root, one[i], &v);
        if (got < 0 || v != 1)
            return refuse(er, 400, one[i], "'%s' must be 1: this server returns one choice", one[i]);
    }
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (stop && !cJSON_IsNull(stop) && !(cJSON_IsArray(stop) && cJSON_GetArraySize(stop) == 0) &&
        !(cJSON_IsString(stop) && stop->valuestring[0] == '\0'))
        return refuse(er, 400, "stop", "'stop' sequences are not supported: this server's words are synthetic "
                      "(max_tokens and ignore_eos end an answer)");
    int echo = 0;
    if (opt_bool(root, "echo", &echo) < 0 || echo)
        return refuse(er, 400, "echo", "'echo' is not supported");
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (suffix && !cJSON_IsNull(suffix))
        return refuse(er, 400, "suffix", "'suffix' is not supported");
    if (!o->stream && (o->lp_top >= 0 || o->return_ids))
        return refuse(er, 400, o->lp_top >= 0 ? "logprobs" : "return_token_ids",
                      "'%s' is given with \"stream\": true only (this server writes them into each token's event)",
                      o->lp_top >= 0 ? "logprobs" : "return_token_ids");
    return 0;
}

/* The prompt as the engine read it ("messages" or "prompt", printed
 * compactly), hashed (FNV-1a 64): the same prompt gives the same tokens,
 * whatever the request's id, arrival or batch. 0 when out of memory. */
static uint64_t prompt_hash(const cJSON *root, int kind)
{
    char *s = cJSON_PrintUnformatted(
        cJSON_GetObjectItemCaseSensitive(root, kind == ENG_REQ_CHAT ? "messages" : "prompt"));
    uint64_t h = s ? ll_fnv64(LL_FNV64_INIT, s, strlen(s)) : 0;
    free(s);
    return h;
}

/* prompt_logprobs and the scored continuation (prompt_lp.c), and the seed's
 * hash: the context's when there is a continuation. With a backend that can
 * neither score a continuation nor leave it to the seeded words, prompt
 * logprobs are refused and a continuation is read as context. */
static int read_prompt_lp(const eng_engine *e, const cJSON *root, int kind, req_opts *o,
                          const req_error *er)
{
    char *ctx_json = NULL;
    int rc = eng_prompt_lp_parse(root, kind, e->cfg.vocab > 64 ? e->cfg.vocab : 64, &o->prompt_lp,
                                 &o->cont, &ctx_json, er->param, er->msg, er->msglen);
    if (rc == LL_EINVAL)
        *er->status = 400;
    if (rc)
        return rc == LL_EINVAL ? rc : refuse(er, 500, NULL, "out of memory");
    if (!(e->be->caps & ENG_CAP_PROMPT_LOGPROBS)) {
        /* a continuation is then context like the rest, as before */
        free(ctx_json);
        ctx_json = NULL;
        eng_cont_free(&o->cont);
        if (o->prompt_lp >= 0)
            return refuse(er, 400, "prompt_logprobs", "prompt logprobs are not available with the %s backend",
                          e->be->name);
    }
    o->prompt_hash = ctx_json ? ll_fnv64(LL_FNV64_INIT, ctx_json, strlen(ctx_json)) : prompt_hash(root, kind);
    free(ctx_json);
    return 0;
}

/* How many tokens the request will produce: max_tokens, or with the
 * engine's stop_after (and no ignore_eos) fewer, ending with "stop". */
static void plan_output(eng_req *r, const eng_config *cfg, const req_opts *o)
{
    r->think_tok = o->think_tok < o->max_tok ? o->think_tok : o->max_tok;
    r->target_tok = o->max_tok;
    if (o->ignore_eos || cfg->stop_after_tok <= 0)
        return;
    int natural = cfg->stop_after_tok > o->min_tok ? cfg->stop_after_tok : o->min_tok;
    if (natural < o->max_tok) {
        r->target_tok = natural;
        r->stop_early = 1;
        if (r->think_tok > natural)
            r->think_tok = natural;
    }
}

/* The served model name as a JSON string literal, built once per request. */
static int set_model_json(eng_req *r, const char *model)
{
    cJSON *mj = cJSON_CreateString(model);
    char *ms = mj ? cJSON_PrintUnformatted(mj) : NULL;
    cJSON_Delete(mj);
    int rc = ms && strlen(ms) < sizeof r->model_json ? 0 : LL_ENOMEM;
    if (!rc)
        strcpy(r->model_json, ms);
    free(ms);
    return rc;
}

/* A new request (one reference, the caller's) for a checked body. */
static eng_req *new_req(eng_engine *e, int kind, int prompt, const req_opts *o)
{
    const eng_config *cfg = &e->cfg;
    eng_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    atomic_init(&r->refs, 1);
    atomic_init(&r->cancelled, 0);
    r->eng = e;
    r->fd = -1;
    r->send_fd = -1;
    r->slot = -1;
    r->id = atomic_fetch_add(&e->next_id, 1);
    /* splitmix-style mix of the engine's seed and the prompt: the words are
     * a function of the prompt (an A/B of two engines answers alike) */
    uint64_t z = cfg->seed * 0x9e3779b97f4a7c15ULL + o->prompt_hash;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    r->seed = z ^ (z >> 27);
    r->created_s = ll_wall_ns() / 1000000000LL;
    r->kind = kind;
    r->stream = o->stream;
    r->include_usage = o->stream && o->include_usage;
    r->continuous_usage = o->stream && o->continuous_usage;
    r->prompt_tok = prompt;
    r->max_tok = o->max_tok;
    r->min_tok = o->min_tok;
    r->lp_top = o->lp_top;
    r->return_ids = o->return_ids;
    r->prompt_lp = o->prompt_lp;
    plan_output(r, cfg, o);
    if (set_model_json(r, cfg->model)) {
        free(r);
        return NULL;
    }
    return r;
}

int eng_req_count(const eng_engine *e, const char *body, size_t len, int *count, int *status, const char **param,
                  char *msg, size_t msglen)
{
    const req_error er = {status, param, msg, msglen};
    cJSON *root = NULL;
    int rc;
    *param = NULL;
    *count = 0;
    LL_TRY(parse_body(body, len, &root, &er));
    LL_TRY(check_model(root, &e->cfg, &er));
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content"); /* llama.cpp's spelling */
    if (cJSON_GetObjectItemCaseSensitive(root, "messages"))
        LL_TRY(chat_prompt_tok(root, count, &er));
    else if (cJSON_IsString(content))
        *count = count_words(content->valuestring);
    else
        LL_TRY(completion_prompt_tok(root, count, &er));
fail:
    cJSON_Delete(root);
    return rc;
}

eng_req *eng_req_parse(eng_engine *e, int kind, const char *body, size_t len,
                       int *status, const char **param, char *msg, size_t msglen)
{
    const eng_config *cfg = &e->cfg;
    const req_error er = {status, param, msg, msglen};
    req_opts o = {.max_tok = cfg->default_max_tokens, .think_tok = cfg->think_tokens};
    cJSON *root = NULL;
    eng_req *r = NULL;
    int prompt = 0, rc;

    *param = NULL;
    LL_TRY(parse_body(body, len, &root, &er));
    LL_TRY(check_model(root, cfg, &er));
    LL_TRY(kind == ENG_REQ_CHAT ? chat_prompt_tok(root, &prompt, &er)
                                : completion_prompt_tok(root, &prompt, &er));
    LL_TRY(read_token_counts(root, cfg, &o, &er));
    LL_TRY(read_stream_opts(root, &o, &er));
    LL_TRY(read_sampling(root, &er));
    LL_TRY(read_output_opts(root, kind, &o, &er));
    LL_TRY(read_unsupported(root, &o, &er));
    LL_TRY(read_prompt_lp(e, root, kind, &o, &er));
    if ((int64_t)prompt + o.max_tok > cfg->max_context_tok)
        LL_TRY(refuse(&er, 400, "max_tokens",
                      "prompt (%d tokens) plus max_tokens (%d) exceeds the context limit of %d",
                      prompt, o.max_tok, cfg->max_context_tok));
    r = new_req(e, kind, prompt, &o);
    if (r) { /* the continuation is the request's now */
        r->cont = o.cont;
        r->cont.ctx_tok = prompt - o.cont.n;
        memset(&o.cont, 0, sizeof o.cont);
    }
    if (!r || (cfg->prefix_cache && eng_prefix_keys(root, kind == ENG_REQ_CHAT, &r->prefix_keys, &r->n_prefix_keys))) {
        eng_req_unref(r);
        r = NULL;
        LL_TRY(refuse(&er, 500, NULL, "out of memory"));
    }
    cJSON_Delete(root);
    return r;
fail:
    eng_cont_free(&o.cont);
    cJSON_Delete(root);
    return NULL;
}
