/* rescore.c: one decoded output sent back through a server's prefill
 * (loadgen.h lg_rescore, for `loadlaw check-decode`).
 *
 * chat and completions runs: the recorded prompt followed by the decoded
 * tokens, asking for prompt logprobs in vLLM's spelling and generating one
 * token:
 *   chat         {"messages":[...prompt..., {"role":"assistant","content":OUT}],
 *                 "continue_final_message":true,"add_generation_prompt":false,
 *                 "prompt_logprobs":K,"max_tokens":1,"temperature":0}
 *   completions  {"prompt":PROMPT+OUT,"logprob_start_len":W,"prompt_logprobs":K,...}
 * W is the prompt's whitespace-separated word count: where the bundled
 * engine's scored continuation starts (SGLang's name; vLLM ignores it, its
 * prompt logprobs cover every position anyway). The answer's
 * "prompt_logprobs" (a completions choice's, or a chat response's top
 * level) holds one entry per prompt position, null or {"<id>":{"logprob":L,
 * "rank":R,"decoded_token":T}, ...} with the position's own token first
 * (vLLM puts it before its top k); its last n entries are the output's.
 * A server without them (llama.cpp's llama-server has no prompt logprobs:
 * it scores only what it samples) answers without the key, or refuses.
 *
 * SGLang's /generate runs (python/sglang/srt/managers/io_struct.py
 * GenerateReqInput) score a prompt with {"return_logprob":true,
 * "logprob_start_len":L,"top_logprobs_num":K,"sampling_params":
 * {"max_new_tokens":1,"temperature":0}} and answer meta_info.
 * input_token_logprobs, one [logprob, id, text-or-null] per position from L
 * on, the first always null (the scheduler pads it), and input_top_logprobs
 * (null or K such triples per position). The decoded ids are sent back, not
 * their text: text re-tokenized after a prompt can merge across the seam or
 * differ from what the model sampled, and would score other tokens. So when
 * the run recorded output ids (SGLang's output_token_logprobs give them)
 * two requests are made: the prompt text with L = 0 gives the prompt's ids
 * as the server tokenized them (BOS included, exactly what decode saw), then
 * "input_ids" = those + the output's ids with L = prompt length − 1, whose
 * last n entries score the output. L also bounds SGLang's prefix-cache
 * match (schedule_batch.py: max_prefix_len ≤ logprob_start_len), so the
 * output's positions are computed by the prefill kernel even when the
 * radix cache still holds decode's KV for them. Without recorded ids: one
 * request, "text" = prompt + OUT with L = 0, aligned by text afterwards.
 * One blocking transfer per request (curl easy), on the caller's thread. */
#include <ctype.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen.h"
#include "sse.h"

#define RESCORE_BODY_MAX (64u << 20) /* a response past 64 MiB is not a prompt's logprobs */
#define RS_UNSUPPORTED 1           /* internal: the server cannot say (out->unsupported) */

void lg_rescore_free(lg_rescore *r)
{
    for (size_t i = 0; r->tok && i < r->n; i++)
        free(r->tok[i]);
    free(r->tok);
    free(r->lp);
    free(r->rank);
    free(r->id);
    memset(r, 0, sizeof *r);
}

static size_t sink(char *p, size_t sz, size_t nm, void *ud)
{
    ll_buf *b = ud;
    size_t n = sz * nm;
    if (b->len + n > RESCORE_BODY_MAX || ll_buf_append(b, p, n))
        return 0;
    return n;
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

/* The request body, or NULL (bad prompt JSON, or out of memory: *bad says which). */
static char *build_body(const lg_rescore_req *q, int *bad)
{
    cJSON *root = cJSON_CreateObject(), *prompt = cJSON_Parse(q->prompt_json);
    char *out = NULL;
    *bad = !prompt || (q->chat ? !cJSON_IsArray(prompt) : !cJSON_IsString(prompt));
    if (!root || *bad || (q->model && !cJSON_AddStringToObject(root, "model", q->model)))
        goto done;
    if (q->chat) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(prompt, m)) {
            cJSON_Delete(m);
            goto done;
        }
        if (!cJSON_AddStringToObject(m, "role", "assistant") || !cJSON_AddStringToObject(m, "content", q->output) ||
            !cJSON_AddItemToObject(root, "messages", prompt))
            goto done;
        prompt = NULL; /* root's now */
        if (!cJSON_AddTrueToObject(root, "continue_final_message") ||
            !cJSON_AddFalseToObject(root, "add_generation_prompt"))
            goto done;
    } else {
        size_t a = strlen(prompt->valuestring), b = strlen(q->output);
        char *s = malloc(a + b + 1);
        if (!s)
            goto done;
        memcpy(s, prompt->valuestring, a);
        memcpy(s + a, q->output, b + 1);
        cJSON *p = cJSON_AddStringToObject(root, "prompt", s);
        free(s);
        if (!p || !cJSON_AddNumberToObject(root, "logprob_start_len", count_words(prompt->valuestring)))
            goto done;
    }
    if (cJSON_AddNumberToObject(root, "prompt_logprobs", q->top_k) && cJSON_AddNumberToObject(root, "max_tokens", 1) &&
        cJSON_AddNumberToObject(root, "temperature", 0))
        out = cJSON_PrintUnformatted(root);
done:
    cJSON_Delete(prompt);
    cJSON_Delete(root);
    return out;
}

/* POST body to url; the whole answer into resp, its status into *status. */
static int post(const lg_rescore_req *q, const char *body, ll_buf *resp, long *status, char *err, size_t errlen)
{
    CURL *e = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json"), *t = NULL;
    char *auth = q->api_key ? ll_bearer_header(q->api_key) : NULL;
    char cerr[CURL_ERROR_SIZE] = "";
    int rc = LL_ENOMEM;
    if (!e || !h || (q->api_key && (!auth || !(t = curl_slist_append(h, auth)))))
        goto done;
    h = t ? t : h;
    rc = LL_EIO;
    if (curl_easy_setopt(e, CURLOPT_URL, q->url) || curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) || curl_easy_setopt(e, CURLOPT_HTTPHEADER, h) ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink) || curl_easy_setopt(e, CURLOPT_WRITEDATA, resp) ||
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr) ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(q->timeout_s > 0 ? q->timeout_s * 1000 : 600000))) {
        ll_errf(err, errlen, "cannot set up the request to %s", q->url);
        goto done;
    }
    CURLcode cr = curl_easy_perform(e);
    if (cr != CURLE_OK) {
        ll_errf(err, errlen, "%s: %s", q->url, cerr[0] ? cerr : curl_easy_strerror(cr));
        goto done;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    rc = 0;
done:
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
    curl_slist_free_all(h);
    if (e)
        curl_easy_cleanup(e);
    return rc;
}

/* POST body; 0 with a 200's body in resp, RS_UNSUPPORTED for a 4xx (the
 * server refusing what was asked: prompt logprobs), LL_EIO for another
 * status or no answer; the reason in err. */
static int exchange(const lg_rescore_req *q, const char *body, ll_buf *resp, char *err, size_t errlen)
{
    long status = 0;
    int rc = post(q, body, resp, &status, err, errlen);
    if (rc == 0 && status != 200) {
        char msg[300];
        if (!lg_error_message(resp->p ? resp->p : "", resp->len, msg, sizeof msg))
            snprintf(msg, sizeof msg, "%.200s", resp->p ? resp->p : "");
        ll_errf(err, errlen, "%s answered HTTP %ld: %s", q->url, status, msg);
        rc = status >= 400 && status < 500 ? RS_UNSUPPORTED : LL_EIO;
    }
    return rc;
}

/* n slots of each of r's arrays (lp NAN, rank 0, id -1, tok NULL). */
static int alloc_result(lg_rescore *r, size_t n)
{
    r->n = n;
    r->lp = malloc((n ? n : 1) * sizeof *r->lp);
    r->rank = calloc(n ? n : 1, sizeof *r->rank);
    r->id = malloc((n ? n : 1) * sizeof *r->id);
    r->tok = calloc(n ? n : 1, sizeof *r->tok);
    if (!r->lp || !r->rank || !r->id || !r->tok)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        r->lp[i] = NAN;
        r->id[i] = -1;
    }
    return 0;
}

/* The "prompt_logprobs" array of an answer: a completions choice's, else
 * the top level's (chat). NULL when the server sent none. */
static const cJSON *find_plp(const cJSON *root)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(ch, "prompt_logprobs");
    if (!cJSON_IsArray(a))
        a = cJSON_GetObjectItemCaseSensitive(root, "prompt_logprobs");
    return cJSON_IsArray(a) ? a : NULL;
}

/* Entry e (an object whose first member is the position's token) into slot i. */
static int take_entry(lg_rescore *r, size_t i, const cJSON *e)
{
    const cJSON *m = cJSON_IsObject(e) ? e->child : NULL;
    r->lp[i] = NAN;
    r->rank[i] = 0;
    r->id[i] = -1;
    if (!m)
        return 0;
    char *end = NULL;
    long long id = strtoll(m->string ? m->string : "", &end, 10);
    r->id[i] = end && *end == '\0' && id >= 0 ? id : -1;
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(m, "logprob");
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(m, "rank");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(m, "decoded_token");
    r->lp[i] = cJSON_IsNumber(lp) ? lp->valuedouble : cJSON_IsNumber(m) ? m->valuedouble : NAN;
    /* a server's number: cast only what an int holds */
    r->rank[i] = cJSON_IsNumber(rk) && fabs(rk->valuedouble) < 1e9 ? (int)rk->valuedouble : 0;
    if (cJSON_IsString(dt) && !(r->tok[i] = strdup(dt->valuestring)))
        return LL_ENOMEM;
    return 0;
}

static int parse_answer(const lg_rescore_req *q, const ll_buf *resp, lg_rescore *r, char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLengthOpts(resp->p ? resp->p : "", resp->len, NULL, 0);
    const cJSON *a = root ? find_plp(root) : NULL;
    int rc = 0;
    if (!a) {
        /* llama.cpp's answers carry its "timings": name it, it never will */
        int llama = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "timings"));
        ll_errf(err, errlen, "%s answered without \"prompt_logprobs\": this server does not return prompt "
                "logprobs%s", q->url, llama ? " (llama.cpp's llama-server scores only the tokens it samples)" : "");
        cJSON_Delete(root);
        return RS_UNSUPPORTED;
    }
    size_t total = (size_t)cJSON_GetArraySize(a), n = q->n_tok;
    if (total < n) {
        ll_errf(err, errlen, "%s scored %zu prompt positions, fewer than the %zu output tokens", q->url, total, n);
        cJSON_Delete(root);
        return LL_EPARSE;
    }
    rc = alloc_result(r, n);
    size_t i = 0, skip = total - n;
    for (const cJSON *e = a->child; e && rc == 0; e = e->next, i++)
        if (i >= skip)
            rc = take_entry(r, i - skip, e);
    cJSON_Delete(root);
    return rc;
}

/* ---- SGLang's /generate ---------------------------------------------------- */

/* A server's number as a token id: a whole number in [0, 2^53), else -1
 * (never cast before the check). */
static int64_t json_id(const cJSON *v)
{
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    return d >= 0 && d < 9e15 && d == floor(d) ? (int64_t)d : -1;
}

/* {"text":T} or {"input_ids":a then b}, with the logprob keys; NULL when
 * out of memory. */
static char *gen_body(const char *text, const int64_t *a, size_t na, const int64_t *b, size_t nb, size_t start,
                      int top_k, int with_text)
{
    cJSON *root = cJSON_CreateObject(), *ids = NULL, *sp = NULL;
    int ok = root != NULL;
    if (ok && text) {
        ok = cJSON_AddStringToObject(root, "text", text) != NULL;
    } else if (ok) {
        ok = (ids = cJSON_AddArrayToObject(root, "input_ids")) != NULL;
        for (size_t i = 0; ok && i < na + nb; i++) {
            cJSON *v = cJSON_CreateNumber((double)(i < na ? a[i] : b[i - na]));
            ok = v && cJSON_AddItemToArray(ids, v);
            if (!ok)
                cJSON_Delete(v);
        }
    }
    ok = ok && cJSON_AddTrueToObject(root, "return_logprob") &&
         cJSON_AddNumberToObject(root, "logprob_start_len", (double)start) &&
         cJSON_AddNumberToObject(root, "top_logprobs_num", top_k) &&
         cJSON_AddBoolToObject(root, "return_text_in_logprobs", with_text) &&
         (sp = cJSON_AddObjectToObject(root, "sampling_params")) &&
         cJSON_AddNumberToObject(sp, "max_new_tokens", 1) && cJSON_AddNumberToObject(sp, "temperature", 0);
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

/* Send body; the answer's meta_info.input_token_logprobs in *lps and
 * input_top_logprobs (NULL when absent) in *tops, both inside *root (the
 * caller deletes it). RS_UNSUPPORTED when the answer has none. */
static int gen_ask(const lg_rescore_req *q, const char *body, cJSON **root, const cJSON **lps, const cJSON **tops,
                   char *err, size_t errlen)
{
    ll_buf resp = {0};
    int rc = exchange(q, body, &resp, err, errlen);
    *root = NULL;
    if (rc == 0) {
        *root = cJSON_ParseWithLengthOpts(resp.p ? resp.p : "", resp.len, NULL, 0);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(*root, "meta_info");
        *lps = cJSON_GetObjectItemCaseSensitive(meta, "input_token_logprobs");
        *tops = cJSON_GetObjectItemCaseSensitive(meta, "input_top_logprobs");
        *tops = cJSON_IsArray(*tops) ? *tops : NULL;
        if (!cJSON_IsArray(*lps)) {
            ll_errf(err, errlen, "%s answered without meta_info.input_token_logprobs: this server does not return "
                    "prompt logprobs", q->url);
            rc = RS_UNSUPPORTED;
        }
    }
    ll_buf_free(&resp);
    return rc;
}

/* The prompt's token ids as the server tokenizes it (into *ids, n_ids). */
static int gen_prompt_ids(const lg_rescore_req *q, const char *prompt, int64_t **ids, size_t *n_ids, char *err,
                          size_t errlen)
{
    cJSON *root = NULL;
    const cJSON *lps = NULL, *tops = NULL;
    char *body = gen_body(prompt, NULL, 0, NULL, 0, 0, 0, 0);
    int rc = body ? gen_ask(q, body, &root, &lps, &tops, err, errlen) : LL_ENOMEM;
    size_t n = rc == 0 ? (size_t)cJSON_GetArraySize(lps) : 0, i = 0;
    free(body);
    *n_ids = 0;
    if (rc == 0 && !(*ids = malloc((n ? n : 1) * sizeof **ids)))
        rc = LL_ENOMEM;
    for (const cJSON *e = rc == 0 ? lps->child : NULL; e && rc == 0; e = e->next, i++)
        if (((*ids)[i] = json_id(cJSON_GetArrayItem(e, 1))) < 0) {
            ll_errf(err, errlen, "%s: prompt position %zu has no token id", q->url, i);
            rc = LL_EPARSE;
        }
    *n_ids = rc == 0 ? n : 0;
    cJSON_Delete(root);
    return rc;
}

/* The place of token id (logprob lp) in a position's top list: 1 when it
 * is first or ties the first (as vLLM ranks), k + 1 when it is not among
 * the k; 0 when unknown. */
static int gen_rank(const cJSON *row, int64_t id, double lp)
{
    int j = 1;
    for (const cJSON *a = cJSON_IsArray(row) ? row->child : NULL; a; a = a->next, j++) {
        const cJSON *alp = cJSON_GetArrayItem(a, 0);
        if (j == 1 && cJSON_IsNumber(alp) && lp >= alp->valuedouble)
            return 1;
        if (id >= 0 && json_id(cJSON_GetArrayItem(a, 1)) == id)
            return j;
    }
    return j > 1 && id >= 0 && !isnan(lp) ? j : 0;
}

/* The last q->n_tok entries of lps (and their rows of tops) into r. */
static int gen_take(const lg_rescore_req *q, const cJSON *lps, const cJSON *tops, lg_rescore *r, char *err,
                    size_t errlen)
{
    size_t total = (size_t)cJSON_GetArraySize(lps), n = q->n_tok;
    if (total < n) {
        ll_errf(err, errlen, "%s scored %zu prompt positions, fewer than the %zu output tokens", q->url, total, n);
        return LL_EPARSE;
    }
    int rc = alloc_result(r, n);
    /* the top rows run beside the entries when the server sent one per position */
    const cJSON *row = tops && (size_t)cJSON_GetArraySize(tops) == total ? tops->child : NULL;
    size_t i = 0, skip = total - n;
    for (const cJSON *e = lps->child; e && rc == 0; e = e->next, row = row ? row->next : NULL, i++) {
        if (i < skip)
            continue;
        const cJSON *lp = cJSON_GetArrayItem(e, 0), *tx = cJSON_GetArrayItem(e, 2);
        size_t k = i - skip;
        r->lp[k] = cJSON_IsNumber(lp) ? lp->valuedouble : NAN;
        r->id[k] = json_id(cJSON_GetArrayItem(e, 1));
        r->rank[k] = gen_rank(row, r->id[k], r->lp[k]);
        if (cJSON_IsString(tx) && !(r->tok[k] = strdup(tx->valuestring)))
            rc = LL_ENOMEM;
    }
    return rc;
}

/* The request that scores the output: by ids when recorded, else by text. */
static char *gen_score_body(const lg_rescore_req *q, const char *prompt, char *err, size_t errlen, int *rc)
{
    if (q->ids) {
        int64_t *pids = NULL;
        size_t np = 0;
        char *body = NULL;
        if ((*rc = gen_prompt_ids(q, prompt, &pids, &np, err, errlen)) == 0 &&
            !(body = gen_body(NULL, pids, np, q->ids, q->n_tok, np ? np - 1 : 0, q->top_k, 1)))
            *rc = LL_ENOMEM;
        free(pids);
        return body;
    }
    size_t a = strlen(prompt), b = strlen(q->output);
    char *text = malloc(a + b + 1), *body = NULL;
    if (text) {
        memcpy(text, prompt, a);
        memcpy(text + a, q->output, b + 1);
        body = gen_body(text, NULL, 0, NULL, 0, 0, q->top_k, 1);
    }
    free(text);
    *rc = body ? 0 : LL_ENOMEM;
    return body;
}

static int gen_run(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    cJSON *prompt = cJSON_Parse(q->prompt_json), *root = NULL;
    const cJSON *lps = NULL, *tops = NULL;
    int rc = LL_EINVAL;
    char *body = NULL;
    if (!cJSON_IsString(prompt)) {
        ll_errf(err, errlen, "the recorded prompt is not a JSON string");
        goto done;
    }
    if ((body = gen_score_body(q, prompt->valuestring, err, errlen, &rc)) == NULL)
        goto done;
    if ((rc = gen_ask(q, body, &root, &lps, &tops, err, errlen)) == 0)
        rc = gen_take(q, lps, tops, out, err, errlen);
done:
    if (rc == LL_ENOMEM && !err[0])
        ll_errf(err, errlen, "out of memory");
    free(body);
    cJSON_Delete(root);
    cJSON_Delete(prompt);
    return rc;
}

int lg_rescore_run(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    ll_buf resp = {0};
    int bad = 0, rc;
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = '\0';
    if (q->generate) {
        rc = gen_run(q, out, err, errlen);
    } else {
        char *body = build_body(q, &bad);
        if (!body) {
            ll_errf(err, errlen, bad ? "the recorded prompt is not %s" : "out of memory",
                    q->chat ? "a JSON array of messages" : "a JSON string");
            return bad ? LL_EINVAL : LL_ENOMEM;
        }
        rc = exchange(q, body, &resp, err, errlen);
        free(body);
        if (rc == 0)
            rc = parse_answer(q, &resp, out, err, errlen);
    }
    if (rc)
        lg_rescore_free(out);
    ll_buf_free(&resp);
    out->unsupported = rc == RS_UNSUPPORTED;
    return rc == RS_UNSUPPORTED ? LL_EINVAL : rc;
}
