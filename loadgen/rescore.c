/* rescore.c: one decoded output sent back through a server's prefill
 * (loadgen.h lg_rescore, for `loadlaw check-decode`).
 *
 * The request is the recorded prompt followed by the decoded tokens, asking
 * for prompt logprobs in vLLM's spelling and generating one token:
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
 * One blocking transfer per call (curl easy), on the caller's thread. */
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
        ll_errf(err, errlen, "%s answered without \"prompt_logprobs\": this server does not return prompt "
                "logprobs", q->url);
        cJSON_Delete(root);
        return RS_UNSUPPORTED;
    }
    size_t total = (size_t)cJSON_GetArraySize(a), n = q->n_tok;
    if (total < n) {
        ll_errf(err, errlen, "%s scored %zu prompt positions, fewer than the %zu output tokens", q->url, total, n);
        cJSON_Delete(root);
        return LL_EPARSE;
    }
    r->n = n;
    r->lp = malloc((n ? n : 1) * sizeof *r->lp);
    r->rank = malloc((n ? n : 1) * sizeof *r->rank);
    r->id = malloc((n ? n : 1) * sizeof *r->id);
    r->tok = calloc(n ? n : 1, sizeof *r->tok);
    rc = r->lp && r->rank && r->id && r->tok ? 0 : LL_ENOMEM;
    size_t i = 0, skip = total - n;
    for (const cJSON *e = a->child; e && rc == 0; e = e->next, i++)
        if (i >= skip)
            rc = take_entry(r, i - skip, e);
    cJSON_Delete(root);
    return rc;
}

int lg_rescore_run(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    ll_buf resp = {0};
    long status = 0;
    int bad = 0, rc;
    memset(out, 0, sizeof *out);
    char *body = build_body(q, &bad);
    if (!body) {
        ll_errf(err, errlen, bad ? "the recorded prompt is not %s" : "out of memory",
                q->chat ? "a JSON array of messages" : "a JSON string");
        return bad ? LL_EINVAL : LL_ENOMEM;
    }
    rc = post(q, body, &resp, &status, err, errlen);
    free(body);
    if (rc == 0 && status != 200) {
        char msg[300];
        if (!lg_error_message(resp.p ? resp.p : "", resp.len, msg, sizeof msg))
            snprintf(msg, sizeof msg, "%.200s", resp.p ? resp.p : "");
        ll_errf(err, errlen, "%s answered HTTP %ld: %s", q->url, status, msg);
        /* a 4xx is the server refusing what was asked: prompt logprobs */
        rc = status >= 400 && status < 500 ? RS_UNSUPPORTED : LL_EIO;
    }
    if (rc == 0)
        rc = parse_answer(q, &resp, out, err, errlen);
    if (rc)
        lg_rescore_free(out);
    ll_buf_free(&resp);
    out->unsupported = rc == RS_UNSUPPORTED;
    return rc == RS_UNSUPPORTED ? LL_EINVAL : rc;
}
