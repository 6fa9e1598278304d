/* xfer.c: one streaming request: build it, time its bytes, classify and
 * record it when it ends.
 *
 * Timing: every chunk is stamped with ll_now_ns() taken once per libcurl write
 * callback, on the worker thread, before parsing, so parse cost never shifts a
 * timestamp and all events of one read share its arrival time. */
#include "lg_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define ERRBODY_MAX 65536

/* Bytes in a well-formed UTF-8 sequence starting at s (1..4), or 0 when the
 * byte at s does not start one (RFC 3629: no overlongs, no surrogates). The
 * NUL terminator fails every continuation test, so s is never read past it. */
static int utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    int n;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

/* Records are read by any JSON tool, so the output is valid UTF-8 whatever
 * the input: a server's stray bytes, or a message cut inside a character,
 * become U+FFFD, one per bad byte. */
int lg_json_escape(ll_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = ll_buf_append(b, "\"", 1);
    const char *run = s;
    for (; rc == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;
        int ul = c >= 0x80 ? utf8_len((const unsigned char *)s) : 1;
        if (ul > 1) {
            s += ul - 1;
            continue;
        }
        if (ul == 1 && c >= 0x20 && c != '"' && c != '\\')
            continue;
        rc = ll_buf_append(b, run, (size_t)(s - run));
        char e[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
        if (ul == 0)
            memcpy(e, "\\ufffd", 7);
        else if (c == '"' || c == '\\') {
            e[1] = (char)c;
            e[2] = 0;
        } else if (c == '\n') {
            e[1] = 'n';
            e[2] = 0;
        }
        if (rc == 0)
            rc = ll_buf_append(b, e, strlen(e));
        run = s + 1;
    }
    if (rc == 0)
        rc = ll_buf_append(b, run, (size_t)(s - run));
    return rc ? rc : ll_buf_append(b, "\"", 1);
}

static int build_body(lg_xfer *x)
{
    lg_run *r = x->w->run;
    const scn_scenario *s = r->scn;
    const char *prompt = scn_prompt(r->prompts, (size_t)x->req_index, &x->prompt_words);
    ll_buf *b = &x->body;
    int rc = ll_buf_append(b, "{\"model\":", 9) || lg_json_escape(b, r->model);
    if (s->endpoint == SCN_ENDPOINT_CHAT)
        rc = rc || ll_buf_printf(b, ",\"messages\":[{\"role\":\"user\",\"content\":") ||
             lg_json_escape(b, prompt) || ll_buf_append(b, "}]", 2);
    else
        rc = rc || ll_buf_printf(b, ",\"prompt\":") || lg_json_escape(b, prompt);
    rc = rc || ll_buf_printf(b, ",\"max_tokens\":%d,\"stream\":true,\"stream_options\":"
                                "{\"include_usage\":true,\"continuous_usage_stats\":true}",
                             s->max_tokens);
    if (s->ignore_eos)
        rc = rc || ll_buf_printf(b, ",\"ignore_eos\":true");
    if (s->think_tokens >= 0)
        rc = rc || ll_buf_printf(b, ",\"think_tokens\":%d", s->think_tokens);
    return rc || ll_buf_append(b, "}", 1) ? LL_ENOMEM : 0;
}

static int add_chunk(lg_xfer *x, int tok, char kind)
{
    if (x->n_chunks == x->cap_chunks) {
        size_t nc = x->cap_chunks ? x->cap_chunks * 2 : 64;
        lg_chunk *c = realloc(x->chunks, nc * sizeof *c);
        if (!c)
            return LL_ENOMEM;
        x->chunks = c;
        x->cap_chunks = nc;
    }
    x->chunks[x->n_chunks++] = (lg_chunk){x->now_ns, tok, kind};
    if (x->first_tok_ns < 0) {
        x->first_tok_ns = x->now_ns;
        atomic_fetch_add(&x->w->run->decoding, 1);
    }
    if (kind == LG_KIND_THINK && x->first_think_ns < 0)
        x->first_think_ns = x->now_ns;
    if (kind == LG_KIND_ANSWER && x->first_answer_ns < 0)
        x->first_answer_ns = x->now_ns;
    return 0;
}

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    lg_xfer *x = ctx;
    lg_delta_out o;
    lg_delta_event(&x->delta, event, data, len, &o);
    if (o.reclassify) {
        /* DeepSeek-R1 templates open <think> in the prompt: what came before a
         * bare </think> was thinking, not answer. */
        for (size_t i = 0; i < x->n_chunks; i++)
            if (x->chunks[i].kind == LG_KIND_ANSWER) {
                x->chunks[i].kind = LG_KIND_THINK;
                if (x->first_think_ns < 0 || x->chunks[i].t_ns < x->first_think_ns)
                    x->first_think_ns = x->chunks[i].t_ns;
            }
        x->think_tok += x->answer_tok;
        x->answer_tok = 0;
        x->first_answer_ns = -1;
    }
    if (o.think_tok) {
        x->think_tok += o.think_tok;
        if (add_chunk(x, o.think_tok, LG_KIND_THINK))
            return LL_ENOMEM;
    }
    if (o.answer_tok) {
        x->answer_tok += o.answer_tok;
        if (add_chunk(x, o.answer_tok, LG_KIND_ANSWER))
            return LL_ENOMEM;
    }
    return 0;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    lg_xfer *x = ud;
    if (x->header_ns < 0)
        x->header_ns = ll_now_ns();
    return sz * nm;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    lg_xfer *x = ud;
    size_t n = sz * nm;
    x->now_ns = ll_now_ns();
    if (!x->status_known) {
        if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->http_status) != CURLE_OK)
            x->http_status = 0;
        x->status_known = 1;
    }
    if (x->http_status != 200) {
        /* An error body is kept (bounded) for its message, not parsed as SSE. */
        size_t room = x->errbody.len < ERRBODY_MAX ? ERRBODY_MAX - x->errbody.len : 0;
        if (room && ll_buf_append(&x->errbody, p, n < room ? n : room))
            return 0;
        return n;
    }
    int rc = lg_sse_feed(&x->sse, p, n);
    if (rc == LL_ERANGE && !x->delta.error) {
        /* Say why curl's "write error" happened: classified as a stream error. */
        x->delta.error = 1;
        snprintf(x->delta.errmsg, sizeof x->delta.errmsg, "SSE line or event over %u bytes", LG_SSE_MAX_BYTES);
    }
    return rc ? 0 : n; /* 0 aborts: out of memory or an endless line */
}

int lg_xfer_start(lg_worker *w, int req_index, int64_t intended_ns)
{
    lg_run *r = w->run;
    lg_xfer *x = calloc(1, sizeof *x);
    int rc = LL_ENOMEM;
    if (!x)
        return LL_ENOMEM;
    x->w = w;
    x->req_index = req_index;
    x->warmup = req_index < w->lvl->warmup;
    x->id = atomic_fetch_add(&r->next_id, 1);
    x->intended_ns = intended_ns;
    x->header_ns = x->first_tok_ns = x->first_think_ns = x->first_answer_ns = x->end_ns = -1;
    lg_sse_init(&x->sse, on_event, x);
    lg_delta_init(&x->delta);
    if (build_body(x) || !(x->easy = curl_easy_init()))
        goto fail;
    CURL *e = x->easy;
    long timeout_ms = (long)(r->scn->timeout_s * 1000.0);
    if (curl_easy_setopt(e, CURLOPT_URL, r->url_full) || curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
        curl_easy_setopt(e, CURLOPT_PRIVATE, x) || curl_easy_setopt(e, CURLOPT_HTTPHEADER, w->headers) ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body.p) ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body.len) ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data) || curl_easy_setopt(e, CURLOPT_WRITEDATA, x) ||
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) ||
        curl_easy_setopt(e, CURLOPT_HEADERDATA, x) || curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curl_err) ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L) ||
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L) ||
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) ||
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1)) {
        rc = LL_EINVAL;
        goto fail;
    }
    x->send_ns = ll_now_ns();
    if (curl_multi_add_handle(w->multi, e) != CURLM_OK) {
        rc = LL_EIO;
        goto fail;
    }
    x->next = w->head;
    if (w->head)
        w->head->prev = x;
    w->head = x;
    w->inflight++;
    atomic_fetch_add(&r->inflight, 1);
    return 0;
fail:
    if (x->easy)
        curl_easy_cleanup(x->easy);
    ll_buf_free(&x->body);
    lg_sse_free(&x->sse);
    free(x);
    return rc;
}

static lg_err_class classify(lg_xfer *x, CURLcode res, char *msg, size_t msglen)
{
    msg[0] = '\0';
    if (x->aborted) {
        snprintf(msg, msglen, "aborted at the interrupt deadline");
        return LG_ERR_OTHER;
    }
    if (x->delta.error) {
        snprintf(msg, msglen, "%s", x->delta.errmsg);
        return LG_ERR_STREAM;
    }
    if (res != CURLE_OK) {
        snprintf(msg, msglen, "%s", x->curl_err[0] ? x->curl_err : curl_easy_strerror(res));
        switch (res) {
        case CURLE_OPERATION_TIMEDOUT:
            return LG_ERR_TIMEOUT;
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
            return LG_ERR_CONNECT;
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
            return LG_ERR_RESET;
        case CURLE_PARTIAL_FILE:
            return LG_ERR_TRUNCATED;
        default:
            return LG_ERR_OTHER;
        }
    }
    if (x->http_status != 200) {
        if (!lg_error_message(x->errbody.p ? x->errbody.p : "", x->errbody.len, msg, msglen))
            snprintf(msg, msglen, "HTTP %ld: %.200s", x->http_status, x->errbody.p ? x->errbody.p : "");
        return x->http_status >= 500 ? LG_ERR_HTTP_5XX : x->http_status >= 400 ? LG_ERR_HTTP_4XX : LG_ERR_OTHER;
    }
    if (!x->delta.done) {
        snprintf(msg, msglen, "stream ended before [DONE]");
        return LG_ERR_TRUNCATED;
    }
    return LG_OK;
}

static int64_t rel(const lg_run *r, int64_t t) { return t < 0 ? -1 : t - r->epoch_ns; }

static int put_time(ll_buf *b, const char *key, const lg_run *r, int64_t t)
{
    return t < 0 ? ll_buf_printf(b, ",\"%s\":null", key) : ll_buf_printf(b, ",\"%s\":%" PRId64, key, rel(r, t));
}

static int write_record(lg_xfer *x, lg_err_class cls, const char *msg)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    ll_buf *b = &w->line;
    const lg_delta *d = &x->delta;
    int rc;
    ll_buf_reset(b);
    rc = ll_buf_printf(b, "{\"type\":\"request\",\"level\":%d,\"rank\":0,\"id\":%" PRIu64
                          ",\"warmup\":%s,\"status\":\"%s\",\"error_class\":",
                       w->lvl->index, x->id, x->warmup ? "true" : "false", cls == LG_OK ? "ok" : "error");
    rc = rc || (cls == LG_OK ? ll_buf_printf(b, "null") : ll_buf_printf(b, "\"%s\"", lg_err_class_name(cls)));
    rc = rc || (x->http_status ? ll_buf_printf(b, ",\"http_status\":%ld", x->http_status)
                               : ll_buf_printf(b, ",\"http_status\":null"));
    rc = rc || ll_buf_printf(b, ",\"error\":") || (msg[0] ? lg_json_escape(b, msg) : ll_buf_printf(b, "null"));
    rc = rc || put_time(b, "intended_ns", r, x->intended_ns) || put_time(b, "send_ns", r, x->send_ns) ||
         put_time(b, "header_ns", r, x->header_ns) || put_time(b, "first_token_ns", r, x->first_tok_ns) ||
         put_time(b, "first_think_ns", r, x->first_think_ns) ||
         put_time(b, "first_answer_ns", r, x->first_answer_ns) || put_time(b, "end_ns", r, x->end_ns);
    rc = rc || ll_buf_printf(b, ",\"prompt_tok\":%" PRId64 ",\"think_tok\":%d,\"answer_tok\":%d,\"usage\":",
                             d->usage_prompt >= 0 ? d->usage_prompt : (int64_t)x->prompt_words,
                             x->think_tok, x->answer_tok);
    if (d->usage_completion >= 0) {
        rc = rc || ll_buf_printf(b, "{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64,
                                 d->usage_prompt, d->usage_completion);
        rc = rc || (d->usage_reasoning >= 0 ? ll_buf_printf(b, ",\"reasoning_tokens\":%" PRId64 "}",
                                                            d->usage_reasoning)
                                            : ll_buf_printf(b, "}"));
    } else {
        rc = rc || ll_buf_printf(b, "null");
    }
    rc = rc || ll_buf_printf(b, ",\"chunks\":[");
    for (size_t i = 0; i < x->n_chunks && !rc; i++)
        rc = ll_buf_printf(b, "%s[%" PRId64 ",%d,\"%c\"]", i ? "," : "", rel(r, x->chunks[i].t_ns),
                           x->chunks[i].tok, x->chunks[i].kind);
    rc = rc || ll_buf_printf(b, "]}");
    if (rc)
        return LL_ENOMEM;
    return ll_jsonl_write_raw(r->rec, b->p);
}

/* Keep what the level statistics need; ITL samples go to the worker's ll_pct. */
static void keep_result(lg_xfer *x, lg_err_class cls)
{
    lg_worker *w = x->w;
    if (w->n_res == w->cap_res) {
        size_t nc = w->cap_res ? w->cap_res * 2 : 256;
        lg_result *n = realloc(w->res, nc * sizeof *n);
        if (!n) {
            w->rc = LL_ENOMEM;
            return;
        }
        w->res = n;
        w->cap_res = nc;
    }
    lg_result *o = &w->res[w->n_res++];
    o->warmup = x->warmup;
    o->cls = cls;
    o->intended_ns = x->intended_ns;
    o->send_ns = x->send_ns;
    o->first_tok_ns = x->first_tok_ns;
    o->first_answer_ns = x->first_answer_ns;
    o->last_tok_ns = x->n_chunks ? x->chunks[x->n_chunks - 1].t_ns : -1;
    o->end_ns = x->end_ns;
    o->think_tok = x->think_tok;
    o->answer_tok = x->answer_tok;
    o->usage_completion = x->delta.usage_completion;
    if (cls != LG_OK || x->warmup)
        return;
    /* A gap between two chunk arrivals, divided by the tokens of the later
     * chunk; two entries of one arrival (a split think/answer chunk) are one. */
    for (size_t i = 1, prev = 0; i < x->n_chunks; i++) {
        if (x->chunks[i].t_ns == x->chunks[prev].t_ns)
            continue;
        int tok = x->chunks[i].tok;
        for (size_t j = i + 1; j < x->n_chunks && x->chunks[j].t_ns == x->chunks[i].t_ns; j++)
            tok += x->chunks[j].tok;
        double gap_ms = (double)(x->chunks[i].t_ns - x->chunks[prev].t_ns) / 1e6;
        if (ll_pct_add(w->itl_ms, gap_ms / (tok > 0 ? tok : 1)))
            w->rc = LL_ENOMEM;
        prev = i;
    }
}

void lg_xfer_done(lg_xfer *x, CURLcode res)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    char msg[512];
    x->end_ns = ll_now_ns();
    if (!x->status_known && curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->http_status) != CURLE_OK)
        x->http_status = 0;
    if (x->http_status == 200)
        lg_sse_finish(&x->sse);
    lg_err_class cls = classify(x, res, msg, sizeof msg);
    keep_result(x, cls);
    if (write_record(x, cls, msg) && w->rc == 0)
        w->rc = LL_EIO;
    atomic_fetch_add(&r->done, 1);
    atomic_fetch_add(&r->tokens, x->think_tok + x->answer_tok);
    if (cls != LG_OK)
        atomic_fetch_add(&r->errors, 1);
    if (x->first_tok_ns >= 0)
        atomic_fetch_sub(&r->decoding, 1);
    atomic_fetch_sub(&r->inflight, 1);
    /* unlink and free */
    if (x->prev)
        x->prev->next = x->next;
    else
        w->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    w->inflight--;
    if (curl_multi_remove_handle(w->multi, x->easy) != CURLM_OK)
        ll_warn("curl_multi_remove_handle failed for request %llu", (unsigned long long)x->id);
    curl_easy_cleanup(x->easy);
    ll_buf_free(&x->body);
    ll_buf_free(&x->errbody);
    lg_sse_free(&x->sse);
    free(x->chunks);
    free(x);
}
