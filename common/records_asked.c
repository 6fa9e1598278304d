/* records_asked.c: what a run asked of the server (records.h ll_rec_asked),
 * read from its run line's config once, where the reader parses the line, so
 * that fit (the cut-short requests, the prompt-length estimate) and compare
 * (did two runs ask for the same work?) read typed fields instead of looking
 * keys up in the line's JSON text again.
 *
 * The fingerprints stand for "these two sections are equal" as cJSON_Compare
 * judges them (same keys in any order, same values, arrays in order): each
 * object member is hashed on its own and the members' hashes summed, so the
 * order in which a writer put the keys does not matter and nothing is
 * allocated. Depth is bounded by cJSON's nesting limit. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "records.h"

static uint64_t fp_item(const cJSON *it, const char *skip);

static uint64_t fp_bytes(uint64_t h, const void *p, size_t n) { return ll_fnv64(h, p, n); }

/* An object: its members' hashes summed (order-free), then their count;
 * skip names a top-level member left out (NULL: none). */
static uint64_t fp_object(uint64_t h, const cJSON *o, const char *skip)
{
    uint64_t sum = 0, n = 0;
    for (const cJSON *c = o->child; c; c = c->next) {
        if (!c->string || (skip && strcmp(c->string, skip) == 0))
            continue;
        uint64_t m = fp_bytes(LL_FNV64_INIT, c->string, strlen(c->string) + 1);
        uint64_t v = fp_item(c, NULL);
        sum += fp_bytes(m, &v, sizeof v);
        n++;
    }
    h = fp_bytes(h, &sum, sizeof sum);
    return fp_bytes(h, &n, sizeof n);
}

static uint64_t fp_item(const cJSON *it, const char *skip)
{
    unsigned char tag = (unsigned char)(it->type & 0xFF);
    uint64_t h = fp_bytes(LL_FNV64_INIT, &tag, 1);
    if (cJSON_IsNumber(it)) {
        double v = it->valuedouble == 0 ? 0.0 : it->valuedouble; /* -0 == 0 */
        return fp_bytes(h, &v, sizeof v);
    }
    if ((cJSON_IsString(it) || cJSON_IsRaw(it)) && it->valuestring)
        return fp_bytes(h, it->valuestring, strlen(it->valuestring) + 1);
    if (cJSON_IsObject(it))
        return fp_object(h, it, skip);
    if (cJSON_IsArray(it))
        for (const cJSON *c = it->child; c; c = c->next) {
            uint64_t v = fp_item(c, NULL);
            h = fp_bytes(h, &v, sizeof v);
        }
    return h;
}

/* config.<key> without its timeout_s; 0 when absent (never 0 when present). */
static uint64_t section_fp(const cJSON *config, const char *key)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(config, key);
    if (!s)
        return 0;
    uint64_t h = fp_item(s, "timeout_s");
    return h ? h : 1;
}

/* prompts.tokens' value (fixed) or mean, when synthetic prompts were built
 * to it without a tokenizer; else NAN. */
static double prompt_tokens(const cJSON *config)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(config, "prompts");
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(p, "tokens");
    if (!cJSON_IsObject(tk) || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "tokenizer")) ||
        strcmp(ll_json_str(p, "source", ""), "synthetic") != 0)
        return NAN;
    const char *dist = ll_json_str(tk, "dist", "");
    double v = ll_json_num(tk, strcmp(dist, "fixed") == 0 ? "value" : "mean", NAN);
    return v > 0 ? v : NAN;
}

void ll_rec_asked_of(const cJSON *config, ll_rec_asked *out)
{
    memset(out, 0, sizeof *out);
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(config, "request");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(req, "extra_body");
    const cJSON *trace = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(config, "load"), "trace");
    if (cJSON_IsNumber(mt) && mt->valuedouble >= 1 && mt->valuedouble <= INT32_MAX)
        out->max_tokens = (int)mt->valuedouble;
    out->ignore_eos = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "ignore_eos")) ||
                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(extra, "ignore_eos"));
    out->trace = trace && !cJSON_IsNull(trace);
    out->prompt_tok = prompt_tokens(config);
    out->prompts_fp = section_fp(config, "prompts");
    out->request_fp = section_fp(config, "request");
}
