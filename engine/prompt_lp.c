/* prompt_lp.c: prompt logprobs, the prefill side of a decode self-check
 * (docs/engine.md, "Prompt logprobs"; `loadlaw check-decode`).
 *
 * A request asks "prompt_logprobs": k (vLLM's name, 0..20, not with
 * "stream": vLLM refuses that too) and gets, per prompt position, the
 * logprob of the prompt's token there, its rank and the top k, in vLLM's
 * spelling: [null, ..., {"<id>":{"logprob":L,"rank":R,"decoded_token":" w"},
 * ...}] (a completions choice's "prompt_logprobs", a chat response's
 * top-level one).
 *
 * The engine's prompts are context (counted words, a seeded stand-in that no
 * model reads token by token) followed, when the request says so, by a
 * continuation of model tokens: chat, the last message when it is the
 * assistant's and "continue_final_message" is true (vLLM's name);
 * completions, the words from "logprob_start_len" on (SGLang's name). The
 * request's seed is its context's, so a prompt made of a request's prompt and
 * the tokens it decoded lands on the same seed, and the continuation is scored
 * through prefill (the backend's eng_cont) the way decode produced it. Context
 * positions are null: they have no token of the model to score. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void eng_cont_free(eng_cont *c)
{
    free((void *)c->ids);
    free(c->out);
    free(c->rank);
    memset(c, 0, sizeof *c);
}

typedef struct lp_err {
    const char **param;
    char *msg;
    size_t msglen;
} lp_err;

__attribute__((format(printf, 3, 4)))
static int bad(const lp_err *er, const char *param, const char *fmt, ...)
{
    va_list ap;
    *er->param = param;
    va_start(ap, fmt);
    vsnprintf(er->msg, er->msglen, fmt, ap);
    va_end(ap);
    return LL_EINVAL;
}

/* The continuation's words as token ids into c (ids, out, rank). */
static int cont_ids(const char *s, int vocab, eng_cont *c, const char *param, const lp_err *er)
{
    size_t len = strlen(s), n = 0;
    int32_t *ids = malloc((len / 2 + 1) * sizeof *ids); /* a word and its space: >= 2 bytes */
    if (!ids)
        return LL_ENOMEM;
    for (size_t i = 0; i < len;) {
        while (i < len && isspace((unsigned char)s[i]))
            i++;
        size_t w = i;
        while (i < len && !isspace((unsigned char)s[i]))
            i++;
        if (i == w)
            break;
        int id = eng_token_id(s + w, i - w);
        if (id < 0 || id >= vocab) {
            free(ids);
            char raw[33], word[40];
            size_t wl = i - w < 32 ? i - w : 32;
            memcpy(raw, s + w, wl);
            raw[wl] = '\0';
            eng_clip_utf8(word, sizeof word, raw, 24);
            return bad(er, param, "continuation word %zu ('%s') is not a token of this model "
                       "(its tokens are the words it answers with)", n + 1, word);
        }
        ids[n++] = id;
    }
    c->n = (int)n;
    c->ids = ids;
    c->out = calloc(n ? n : 1, sizeof *c->out);
    c->rank = calloc(n ? n : 1, sizeof *c->rank);
    if (!c->out || !c->rank)
        return LL_ENOMEM;
    for (size_t j = 0; j < n; j++)
        c->out[j].id = -1;
    return 0;
}

/* Chat: a last assistant message with continue_final_message. */
static int chat_cont(const cJSON *root, int vocab, eng_cont *c, char **ctx_json, const lp_err *er)
{
    const cJSON *cf = cJSON_GetObjectItemCaseSensitive(root, "continue_final_message");
    if (!cf || cJSON_IsNull(cf))
        return 0;
    if (!cJSON_IsBool(cf))
        return bad(er, "continue_final_message", "'continue_final_message' must be a boolean");
    if (!cJSON_IsTrue(cf))
        return 0;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    int n = cJSON_GetArraySize(msgs);
    const cJSON *last = cJSON_GetArrayItem(msgs, n - 1);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(last, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(last, "content");
    if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant") != 0 || !cJSON_IsString(content))
        return bad(er, "continue_final_message", "'continue_final_message' needs a last message with "
                   "role 'assistant' and string content");
    int rc = cont_ids(content->valuestring, vocab, c, "messages", er);
    if (rc)
        return rc;
    cJSON *ctx = cJSON_Duplicate(msgs, 1);
    if (ctx)
        cJSON_DeleteItemFromArray(ctx, n - 1);
    *ctx_json = ctx ? cJSON_PrintUnformatted(ctx) : NULL;
    cJSON_Delete(ctx);
    return *ctx_json ? 0 : LL_ENOMEM;
}

/* Completions: the words of the prompt string from logprob_start_len on; the
 * context ends where they start, less the one space before them. */
static int completion_cont(const cJSON *root, int vocab, eng_cont *c, char **ctx_json, const lp_err *er)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "logprob_start_len");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e9 || v->valuedouble != (int)v->valuedouble)
        return bad(er, "logprob_start_len", "'logprob_start_len' must be a non-negative integer");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!cJSON_IsString(p))
        return bad(er, "logprob_start_len", "'logprob_start_len' needs 'prompt' as one string");
    const char *s = p->valuestring;
    int want = (int)v->valuedouble, words = 0;
    size_t at = strlen(s);
    for (size_t i = 0; s[i]; i++)
        if (!isspace((unsigned char)s[i]) && (i == 0 || isspace((unsigned char)s[i - 1])) && words++ == want) {
            at = i;
            break;
        }
    if (!s[at])
        return 0; /* nothing after the start: all context */
    int rc = cont_ids(s + at, vocab, c, "prompt", er);
    if (rc)
        return rc;
    size_t cut = at > 0 ? at - 1 : 0;
    char *head = malloc(cut + 1);
    if (!head)
        return LL_ENOMEM;
    memcpy(head, s, cut);
    head[cut] = '\0';
    cJSON *hj = cJSON_CreateString(head);
    free(head);
    *ctx_json = hj ? cJSON_PrintUnformatted(hj) : NULL;
    cJSON_Delete(hj);
    return *ctx_json ? 0 : LL_ENOMEM;
}

int eng_prompt_lp_parse(const cJSON *root, int kind, int vocab, int *prompt_lp, eng_cont *cont,
                        char **ctx_json, const char **param, char *msg, size_t msglen)
{
    const lp_err er = {param, msg, msglen};
    *prompt_lp = -1;
    *ctx_json = NULL;
    memset(cont, 0, sizeof *cont);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "prompt_logprobs");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 20 ||
            v->valuedouble != (int)v->valuedouble)
            return bad(&er, "prompt_logprobs", "'prompt_logprobs' must be an integer from 0 to 20");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream")))
            return bad(&er, "prompt_logprobs", "'prompt_logprobs' is not available when 'stream' is true");
        *prompt_lp = (int)v->valuedouble;
    }
    int rc = kind == ENG_REQ_CHAT ? chat_cont(root, vocab, cont, ctx_json, &er)
                                  : completion_cont(root, vocab, cont, ctx_json, &er);
    if (rc) {
        eng_cont_free(cont);
        free(*ctx_json);
        *ctx_json = NULL;
    }
    return rc;
}

/* {"<id>":{"logprob":L,"rank":R,"decoded_token":" w"}} member for one token. */
static int put_tok(ll_buf *b, int first, int id, double lp, int rank)
{
    char tb[16];
    int rc = ll_buf_printf(b, "%s\"%d\":{\"logprob\":%.6f,", first ? "" : ",", id, lp < -9999 ? -9999 : lp);
    if (!rc && rank > 0)
        rc = ll_buf_printf(b, "\"rank\":%d,", rank);
    return rc ? rc : ll_buf_printf(b, "\"decoded_token\":\" %s\"}", eng_token_text(id, tb));
}

/* Continuation position j: the token, then the top k that are not it. A
 * backend's scores where it wrote them, else the seeded words' model. */
static int put_entry(ll_buf *b, const eng_req *r, int j)
{
    const eng_cont *c = &r->cont;
    const eng_tok *t = &c->out[j];
    int id = c->ids[j], rank = 0, rc;
    double lp = t->id >= 0 ? t->lp : eng_seeded_lp(r->seed, j, id, &rank);
    rc = ll_buf_append(b, "{", 1);
    rc = rc ? rc : put_tok(b, 1, id, lp, t->id >= 0 ? c->rank[j] : rank);
    int k = t->id >= 0 ? (t->n_top < r->prompt_lp ? t->n_top : r->prompt_lp) : r->prompt_lp;
    for (int q = 0; q < k && !rc; q++) {
        int aid;
        double alp;
        if (t->id >= 0) {
            aid = t->top_id[q];
            alp = t->top_lp[q];
        } else {
            eng_seeded_alt(r->seed, j, q, &aid, &alp);
        }
        if (aid != id)
            rc = put_tok(b, 0, aid, alp, q + 1);
    }
    return rc ? rc : ll_buf_append(b, "}", 1);
}

int eng_json_prompt_lp(ll_buf *b, eng_req *r)
{
    int ctx = r->prompt_tok - r->cont.n;
    int rc = ll_buf_printf(b, ",\"prompt_logprobs\":[");
    for (int p = 0; p < r->prompt_tok && !rc; p++) {
        if (p)
            rc = ll_buf_append(b, ",", 1);
        if (!rc)
            rc = p < ctx ? ll_buf_append(b, "null", 4) : put_entry(b, r, p - ctx);
    }
    return rc ? rc : ll_buf_append(b, "]", 1);
}
