/* sse.c: what goes on the wire, in the shape vLLM and OpenAI send it.
 *
 * Streaming chat: a role chunk, then one chunk per token (the first think_tok
 * as delta.reasoning_content, the rest as delta.content), finish_reason on the
 * last token chunk, an optional usage chunk with "choices":[], then [DONE].
 * Completions carry choices[].text; their thinking tokens, if any, are sent
 * inline between <think> and </think> (attached to the first and last thinking
 * word, so every chunk is still exactly one token).
 * Token text is deterministic: word (seed, position) from a fixed list, each
 * with a leading space so the concatenation reads as words; the seed is the
 * prompt's (request.c), so the same prompt gets the same words. Asked for,
 * each token chunk also carries its id (vLLM's token_ids) and logprobs with
 * top-k alternatives in OpenAI's spelling (chat's logprobs.content[],
 * completions' tokens / token_logprobs / top_logprobs).
 * A backend that computes tokens (the cpu backend's greedy argmax, kept in
 * r->toks by sched.c) replaces the seeded words: token id i is spelled as
 * word i mod 64 followed by i / 64 when that is not 0 ("tile", "tile3"), and
 * the logprobs and alternatives are the model's. A non-streaming answer
 * carries prompt logprobs where asked (prompt_lp.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* append a string literal */
#define LIT(b, s) ll_buf_append((b), (s), sizeof(s) - 1)

static const char *const words[64] = {
    "the", "law", "of", "steps", "batch", "decode", "token", "stream",
    "kernel", "cache", "head", "tile", "query", "latent", "sparse", "dense",
    "warp", "thread", "block", "memory", "bandwidth", "compute", "queue", "prefill",
    "ramp", "steady", "slope", "intercept", "fit", "sample", "level", "rate",
    "server", "client", "socket", "event", "chunk", "usage", "think", "answer",
    "model", "weight", "layer", "expert", "router", "scale", "shard", "rank",
    "clock", "trace", "profile", "report", "window", "median", "tail", "jitter",
    "load", "sweep", "curve", "knee", "asymptote", "throughput", "latency", "done",
};

static uint64_t mix_seed(uint64_t seed, int pos)
{
    uint64_t z = seed + (uint64_t)pos * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 31)) * 0xd6e8feb86659fd93ULL;
    return z ^ (z >> 32);
}

static uint64_t mix_at(const eng_req *r, int pos) { return mix_seed(r->seed, pos); }

/* The model's token at pos, or NULL where the seeded words stand. */
static const eng_tok *model_tok(const eng_req *r, int pos)
{
    return r->toks && r->toks[pos].id >= 0 ? &r->toks[pos] : NULL;
}

static int tok_id(const eng_req *r, int pos)
{
    const eng_tok *t = model_tok(r, pos);
    return t ? t->id : (int)(mix_at(r, pos) & 63);
}

/* Token id's text (without its leading space) into buf[16]. */
static const char *id_text(int id, char *buf)
{
    if (id < 64)
        return words[id];
    snprintf(buf, 16, "%s%d", words[id & 63], id >> 6);
    return buf;
}

const char *eng_token_text(int id, char *buf) { return id_text(id, buf); }

int eng_token_id(const char *s, size_t n)
{
    size_t a = 0;
    while (a < n && s[a] >= 'a' && s[a] <= 'z')
        a++;
    int w = -1;
    for (int i = 0; i < 64 && w < 0; i++)
        if (strlen(words[i]) == a && memcmp(words[i], s, a) == 0)
            w = i;
    if (w < 0 || a == n)
        return w;
    /* a multiple of 64: digits without a leading zero, at most 7 of them */
    if (n - a > 7 || s[a] == '0')
        return -1;
    int k = 0;
    for (size_t i = a; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        k = k * 10 + (s[i] - '0');
    }
    return w + 64 * k;
}

static const char *word_at(const eng_req *r, int pos, char *buf) { return id_text(tok_id(r, pos), buf); }

/* ---- logprobs: the synthetic model's certainty, as data ----------------------
 * Position pos's chosen word is its token id (0..63, the word list's index);
 * its logprob is in (-0.7, 0], and the j-th alternative (j = 1..k-1) is word
 * id + 13j (mod 64, all distinct) at 1 + 0.5j below it: a deterministic
 * function of the prompt and the position, as a greedy model's would be. */
static double lp_seed(uint64_t seed, int pos) { return -(double)((mix_seed(seed, pos) >> 6) & 1023) / 1024.0 * 0.7; }

static double lp_at(const eng_req *r, int pos) { return lp_seed(r->seed, pos); }

static int alt_id(int id, int j) { return (id + 13 * j) & 63; }

int eng_seeded_id(uint64_t seed, int pos) { return (int)(mix_seed(seed, pos) & 63); }

/* Token id is the j-th alternative of the chosen c where id = c + 13j (mod
 * 64): j = 5 (id - c) mod 64, 5 being 13's inverse mod 64. An id past the
 * word list is not a word of this model: -9999, as vLLM clamps -inf. */
double eng_seeded_lp(uint64_t seed, int pos, int id, int *rank)
{
    if (id < 0 || id >= 64) {
        *rank = 65;
        return -9999.0;
    }
    int j = (5 * (id - eng_seeded_id(seed, pos))) & 63;
    *rank = j + 1;
    return lp_seed(seed, pos) - (j ? 1 + 0.5 * j : 0);
}

void eng_seeded_alt(uint64_t seed, int pos, int j, int *id, double *lp)
{
    *id = alt_id(eng_seeded_id(seed, pos), j);
    *lp = lp_seed(seed, pos) - (j ? 1 + 0.5 * j : 0);
}

/* The chosen token's logprob, the alternatives given (at most lp_top), and
 * the j-th alternative (j = 0 is the chosen token). */
static double tok_lp(const eng_req *r, int pos)
{
    const eng_tok *t = model_tok(r, pos);
    return t ? t->lp : lp_at(r, pos);
}

static int n_alt(const eng_req *r, int pos)
{
    const eng_tok *t = model_tok(r, pos);
    return t && t->n_top < r->lp_top ? t->n_top : r->lp_top;
}

static void alt_at(const eng_req *r, int pos, int j, int *id, double *lp)
{
    const eng_tok *t = model_tok(r, pos);
    if (t) {
        *id = t->top_id[j];
        *lp = t->top_lp[j];
    } else {
        *id = alt_id(tok_id(r, pos), j);
        *lp = lp_at(r, pos) - (j ? 1 + 0.5 * j : 0);
    }
}

/* chat: "logprobs":{"content":[{"token":" w","logprob":L,"top_logprobs":[...]}]} */
static int chat_logprobs(ll_buf *b, const eng_req *r, int pos)
{
    char tb[16];
    int rc = ll_buf_printf(b, "\"logprobs\":{\"content\":[{\"token\":\" %s\",\"logprob\":%.4f,\"top_logprobs\":[",
                           word_at(r, pos, tb), tok_lp(r, pos));
    for (int j = 0, n = n_alt(r, pos), id; j < n && !rc; j++) {
        double lp;
        alt_at(r, pos, j, &id, &lp);
        rc = ll_buf_printf(b, "%s{\"token\":\" %s\",\"logprob\":%.4f}", j ? "," : "", id_text(id, tb), lp);
    }
    return rc ? rc : LIT(b, "]}]}");
}

/* completions: "logprobs":{"tokens":[" w"],"token_logprobs":[L],"top_logprobs":[{" w":L,...}]} */
static int completion_logprobs(ll_buf *b, const eng_req *r, int pos)
{
    char tb[16];
    int rc = ll_buf_printf(b, "\"logprobs\":{\"tokens\":[\" %s\"],\"token_logprobs\":[%.4f],\"top_logprobs\":[{",
                           word_at(r, pos, tb), tok_lp(r, pos));
    for (int j = 0, n = n_alt(r, pos), id; j < n && !rc; j++) {
        double lp;
        alt_at(r, pos, j, &id, &lp);
        rc = ll_buf_printf(b, "%s\" %s\":%.4f", j ? "," : "", id_text(id, tb), lp);
    }
    return rc ? rc : LIT(b, "}]}");
}

/* What a token chunk says beside its text: token_ids when asked, then
 * logprobs (or null), then the finish reason key. */
static int token_extras(ll_buf *b, const eng_req *r, int pos)
{
    int rc = 0;
    if (r->return_ids)
        rc = ll_buf_printf(b, "\"token_ids\":[%d],", tok_id(r, pos));
    if (!rc && r->lp_top >= 0)
        rc = r->kind == ENG_REQ_CHAT ? chat_logprobs(b, r, pos) : completion_logprobs(b, r, pos);
    else if (!rc)
        rc = LIT(b, "\"logprobs\":null");
    return rc ? rc : LIT(b, ",\"finish_reason\":");
}

static const char *finish_reason(const eng_req *r) { return r->stop_early ? "stop" : "length"; }

static int head(ll_buf *b, const eng_req *r, const char *object)
{
    return ll_buf_printf(b, "{\"id\":\"%s-%016" PRIx64 "\",\"object\":\"%s\",\"created\":%" PRId64
                         ",\"model\":%s,",
                         r->kind == ENG_REQ_CHAT ? "chatcmpl" : "cmpl", r->id, object,
                         r->created_s, r->model_json);
}

static int usage(ll_buf *b, const eng_req *r, int completion, int details)
{
    int rc = ll_buf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
                           "\"total_tokens\":%d",
                           r->prompt_tok, completion, r->prompt_tok + completion);
    if (!rc && details)
        rc = ll_buf_printf(b, ",\"completion_tokens_details\":{\"reasoning_tokens\":%d}",
                           r->think_tok < completion ? r->think_tok : completion);
    if (!rc && r->eng->prefix) /* read after admission: the usage goes out with the last token */
        rc = ll_buf_printf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%d}", r->cached_tok);
    return rc ? rc : LIT(b, "}");
}

/* The part every stream chunk of a request shares, formatted once: a busy
 * step emits one chunk per running stream, so the per-token work is copies. */
static int chunk_head(ll_buf *b, eng_req *r)
{
    if (r->chunk_head_len == 0) {
        ll_buf t = {0};
        int rc = LIT(&t, "data: ");
        rc = rc ? rc : head(&t, r, r->kind == ENG_REQ_CHAT ? "chat.completion.chunk" : "text_completion");
        if (rc || t.len >= sizeof r->chunk_head) {
            ll_buf_free(&t);
            return rc ? rc : LL_ERANGE;
        }
        memcpy(r->chunk_head, t.p, t.len);
        r->chunk_head_len = (int)t.len;
        ll_buf_free(&t);
    }
    return ll_buf_append(b, r->chunk_head, (size_t)r->chunk_head_len);
}

static int append_str(ll_buf *b, const char *s) { return ll_buf_append(b, s, strlen(s)); }

/* One streamed token chunk (pos = its position). */
static int token_chunk(ll_buf *b, eng_req *r, int pos)
{
    int last = pos == r->target_tok - 1, think = pos < r->think_tok;
    char tb[16];
    int rc = chunk_head(b, r);
    if (r->kind == ENG_REQ_CHAT) {
        rc = rc ? rc : (think ? LIT(b, "\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" ")
                              : LIT(b, "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" "));
        rc = rc ? rc : append_str(b, word_at(r, pos, tb));
        rc = rc ? rc : LIT(b, "\"},");
        rc = rc ? rc : token_extras(b, r, pos);
    } else {
        rc = rc ? rc : LIT(b, "\"choices\":[{\"index\":0,\"text\":\"");
        rc = rc ? rc : (think && pos == 0 ? LIT(b, "<think>") : 0);
        rc = rc ? rc : LIT(b, " ");
        rc = rc ? rc : append_str(b, word_at(r, pos, tb));
        rc = rc ? rc : (think && pos == r->think_tok - 1 ? LIT(b, "</think>") : 0);
        rc = rc ? rc : LIT(b, "\",");
        rc = rc ? rc : token_extras(b, r, pos);
    }
    if (!rc && last)
        rc = ll_buf_printf(b, "\"%s\"}]", finish_reason(r));
    else if (!rc)
        rc = LIT(b, "null}]");
    if (!rc && r->continuous_usage) {
        rc = LIT(b, ",");
        rc = rc ? rc : usage(b, r, pos + 1, 0);
    }
    return rc ? rc : LIT(b, "}\n\n");
}

int eng_sse_tokens(eng_req *r, int from, int n)
{
    ll_buf *b = &r->out;
    int rc = 0;
    if (from == 0 && r->kind == ENG_REQ_CHAT) {
        rc = LIT(b, "data: ");
        rc = rc ? rc : head(b, r, "chat.completion.chunk");
        rc = rc ? rc : ll_buf_printf(b, "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                                     "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]");
        if (!rc && r->continuous_usage) {
            rc = LIT(b, ",");
            rc = rc ? rc : usage(b, r, 0, 0);
        }
        rc = rc ? rc : LIT(b, "}\n\n");
    }
    for (int i = from; i < from + n && !rc; i++)
        rc = token_chunk(b, r, i);
    if (!rc && from + n == r->target_tok) {
        if (r->include_usage) {
            rc = LIT(b, "data: ");
            rc = rc ? rc : head(b, r, r->kind == ENG_REQ_CHAT ? "chat.completion.chunk"
                                                              : "text_completion");
            rc = rc ? rc : LIT(b, "\"choices\":[],");
            rc = rc ? rc : usage(b, r, r->target_tok, 1);
            rc = rc ? rc : LIT(b, "}\n\n");
        }
        rc = rc ? rc : LIT(b, "data: [DONE]\n\n");
    }
    return rc;
}

static int words_into(ll_buf *b, const eng_req *r, int from, int to)
{
    char tb[16];
    int rc = 0;
    for (int i = from; i < to && !rc; i++)
        rc = ll_buf_printf(b, " %s", word_at(r, i, tb));
    return rc;
}

/* The whole answer's choice up to its logprobs: chat's message, or the
 * completion's text with its thinking between tags. */
static int full_choice(ll_buf *b, eng_req *r)
{
    int think = r->think_tok, n = r->target_tok;
    int rc;
    if (r->kind != ENG_REQ_CHAT) {
        rc = head(b, r, "text_completion");
        rc = rc ? rc : ll_buf_printf(b, "\"choices\":[{\"index\":0,\"text\":\"%s", think > 0 ? "<think>" : "");
        rc = rc ? rc : words_into(b, r, 0, think);
        rc = rc ? rc : (think > 0 ? LIT(b, "</think>") : 0);
        rc = rc ? rc : words_into(b, r, think, n);
        return rc ? rc : LIT(b, "\",");
    }
    rc = head(b, r, "chat.completion");
    rc = rc ? rc : LIT(b, "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                          "\"reasoning_content\":");
    if (!rc && think > 0) {
        rc = LIT(b, "\"");
        rc = rc ? rc : words_into(b, r, 0, think);
        rc = rc ? rc : LIT(b, "\"");
    } else if (!rc) {
        rc = LIT(b, "null");
    }
    rc = rc ? rc : LIT(b, ",\"content\":\"");
    rc = rc ? rc : words_into(b, r, think, n);
    return rc ? rc : LIT(b, "\"},");
}

int eng_json_full(eng_req *r)
{
    ll_buf *b = &r->out;
    int rc = full_choice(b, r);
    rc = rc ? rc : ll_buf_printf(b, "\"logprobs\":null,\"finish_reason\":\"%s\"", finish_reason(r));
    /* vLLM's places: a completions choice's, a chat response's top level */
    if (!rc && r->prompt_lp >= 0 && r->kind != ENG_REQ_CHAT)
        rc = eng_json_prompt_lp(b, r);
    rc = rc ? rc : LIT(b, "}],");
    rc = rc ? rc : usage(b, r, r->target_tok, 1);
    if (!rc && r->prompt_lp >= 0 && r->kind == ENG_REQ_CHAT)
        rc = eng_json_prompt_lp(b, r);
    return rc ? rc : LIT(b, "}");
}

size_t eng_clip_utf8(char *dst, size_t dstlen, const char *src, size_t max_bytes)
{
    static const char more[] = "...";
    const size_t more_len = sizeof more - 1;
    if (dstlen == 0)
        return 0;
    size_t len = strlen(src), room = dstlen - 1, cut = len;
    int clipped = len > max_bytes || len > room;
    if (clipped) {
        cut = max_bytes;
        if (cut + more_len > room) /* the mark fits within dstlen */
            cut = room > more_len ? room - more_len : 0;
        /* Back off to a character boundary: a continuation byte (10xxxxxx)
         * at the cut means the character it belongs to would be split. A
         * valid character has at most three of them; an invalid run is left
         * to the scrub below. */
        for (int k = 0; k < 3 && cut > 0 && ((unsigned char)src[cut] & 0xC0) == 0x80; k++)
            cut--;
    }
    memcpy(dst, src, cut);
    dst[cut] = '\0';
    ll_utf8_scrub(dst);
    if (clipped && cut + more_len <= room) {
        memcpy(dst + cut, more, sizeof more);
        cut += more_len;
    }
    return cut;
}

int eng_json_error(ll_buf *b, int status, const char *param, const char *msg)
{
    const char *type = status == 401 ? "AuthenticationError"
                       : status == 404 ? "NotFoundError"
                       : status == 405 ? "MethodNotAllowed"
                       : status == 413 ? "RequestTooLarge"
                       : status == 503 ? "ServiceUnavailable"
                       : status >= 500 ? "InternalServerError"
                                       : "BadRequestError";
    /* The last guard for "every body is valid UTF-8": a message may carry
     * request bytes (cJSON copies strings' bytes as they are). */
    char *text = strdup(msg);
    cJSON *root = text ? cJSON_CreateObject() : NULL;
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    int rc = LL_ENOMEM;
    if (text)
        ll_utf8_scrub(text);
    if (e && cJSON_AddStringToObject(e, "message", text) && cJSON_AddStringToObject(e, "type", type) &&
        (param ? cJSON_AddStringToObject(e, "param", param) != NULL
               : cJSON_AddNullToObject(e, "param") != NULL) &&
        cJSON_AddNumberToObject(e, "code", status)) {
        char *s = cJSON_PrintUnformatted(root);
        if (s) {
            rc = ll_buf_append(b, s, strlen(s));
            free(s);
        }
    }
    cJSON_Delete(root);
    free(text);
    return rc;
}
