/* xfer.c: one streaming request: build it, time its bytes, classify it when
 * it ends and hand it to the records writer.
 *
 * Timing: every chunk is stamped with ll_now_ns() taken once per libcurl write
 * callback, on the worker thread, before parsing, so parse cost never shifts a
 * timestamp and all events of one read share its arrival time. Nothing here
 * formats JSON for the records or touches the records file: lg_xfer_done fills
 * an ll_rec_request and queues it (common/records.h). */
#include "lg_internal.h"

#include <stdlib.h>
#include <string.h>

#define ERRBODY_MAX 65536

static int build_body(lg_xfer *x)
{
    lg_run *r = x->w->run;
    const scn_scenario *s = r->scn;
    const char *prompt = scn_prompt(r->prompts, (size_t)x->req_index, &x->prompt_words);
    ll_buf *b = &x->body;
    int rc;
    LL_TRY(ll_buf_append(b, "{\"model\":", 9));
    LL_TRY(ll_json_escape(b, r->model));
    if (s->endpoint == SCN_ENDPOINT_CHAT) {
        LL_TRY(ll_buf_printf(b, ",\"messages\":[{\"role\":\"user\",\"content\":"));
        LL_TRY(ll_json_escape(b, prompt));
        LL_TRY(ll_buf_append(b, "}]", 2));
    } else {
        LL_TRY(ll_buf_printf(b, ",\"prompt\":"));
        LL_TRY(ll_json_escape(b, prompt));
    }
    LL_TRY(ll_buf_printf(b, ",\"max_tokens\":%d,\"stream\":true,\"stream_options\":"
                            "{\"include_usage\":true,\"continuous_usage_stats\":true}",
                         s->max_tokens));
    if (s->ignore_eos)
        LL_TRY(ll_buf_printf(b, ",\"ignore_eos\":true"));
    if (s->think_tokens >= 0)
        LL_TRY(ll_buf_printf(b, ",\"think_tokens\":%d", s->think_tokens));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

static int add_chunk(lg_xfer *x, int tok, char kind)
{
    ll_rec_chunk c = {x->now_ns, tok, kind};
    if (ll_vec_push(&x->chunks, c))
        return LL_ENOMEM;
    if (x->first_tok_ns < 0) {
        lg_run *r = x->w->run;
        x->first_tok_ns = x->now_ns;
        atomic_fetch_add(&r->decoding, 1);
        if (atomic_load(&r->watch))
            lg_run_notify(r);
    }
    if (kind == LL_CHUNK_THINK && x->first_think_ns < 0)
        x->first_think_ns = x->now_ns;
    if (kind == LL_CHUNK_ANSWER && x->first_answer_ns < 0)
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
        for (size_t i = 0; i < x->chunks.n; i++)
            if (x->chunks.v[i].kind == LL_CHUNK_ANSWER) {
                x->chunks.v[i].kind = LL_CHUNK_THINK;
                if (x->first_think_ns < 0 || x->chunks.v[i].t_ns < x->first_think_ns)
                    x->first_think_ns = x->chunks.v[i].t_ns;
            }
        x->think_tok += x->answer_tok;
        x->answer_tok = 0;
        x->first_answer_ns = -1;
    }
    if (o.think_tok) {
        x->think_tok += o.think_tok;
        if (add_chunk(x, o.think_tok, LL_CHUNK_THINK))
            return LL_ENOMEM;
    }
    if (o.answer_tok) {
        x->answer_tok += o.answer_tok;
        if (add_chunk(x, o.answer_tok, LL_CHUNK_ANSWER))
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

/* The easy handle of one request: LL_EINVAL when curl refused an option. */
static int setup_easy(lg_xfer *x)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
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
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1))
        return LL_EINVAL;
    return 0;
}

int lg_xfer_start(lg_worker *w, int req_index, int64_t intended_ns)
{
    lg_run *r = w->run;
    lg_xfer *x = calloc(1, sizeof *x);
    int rc;
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
    LL_TRY(build_body(x));
    LL_TRY((x->easy = curl_easy_init()) ? 0 : LL_ENOMEM);
    LL_TRY(setup_easy(x));
    x->send_ns = ll_now_ns();
    LL_TRY(curl_multi_add_handle(w->multi, x->easy) == CURLM_OK ? 0 : LL_EIO);
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

static ll_err_class classify(lg_xfer *x, CURLcode res, char *msg, size_t msglen)
{
    msg[0] = '\0';
    if (x->aborted) {
        snprintf(msg, msglen, "aborted at the interrupt deadline");
        return LL_ERRC_OTHER;
    }
    if (x->delta.error) {
        snprintf(msg, msglen, "%s", x->delta.errmsg);
        return LL_ERRC_STREAM;
    }
    if (res != CURLE_OK) {
        snprintf(msg, msglen, "%s", x->curl_err[0] ? x->curl_err : curl_easy_strerror(res));
        switch (res) {
        case CURLE_OPERATION_TIMEDOUT:
            return LL_ERRC_TIMEOUT;
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
            return LL_ERRC_CONNECT;
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
            return LL_ERRC_RESET;
        case CURLE_PARTIAL_FILE:
            return LL_ERRC_TRUNCATED;
        default:
            return LL_ERRC_OTHER;
        }
    }
    if (x->http_status != 200) {
        if (!lg_error_message(x->errbody.p ? x->errbody.p : "", x->errbody.len, msg, msglen))
            snprintf(msg, msglen, "HTTP %ld: %.200s", x->http_status, x->errbody.p ? x->errbody.p : "");
        return x->http_status >= 500 ? LL_ERRC_HTTP_5XX : x->http_status >= 400 ? LL_ERRC_HTTP_4XX : LL_ERRC_OTHER;
    }
    if (!x->delta.done) {
        snprintf(msg, msglen, "stream ended before [DONE]");
        return LL_ERRC_TRUNCATED;
    }
    return LL_ERRC_OK;
}

static int64_t rel(const lg_run *r, int64_t t) { return t < 0 ? -1 : t - r->epoch_ns; }

/* The record of a finished transfer, on the run clock. Takes the chunk array
 * (its times rebased in place) and gives the message a heap copy. */
static void fill_record(lg_xfer *x, ll_err_class cls, const char *msg, ll_rec_request *rq)
{
    const lg_run *r = x->w->run;
    const lg_delta *d = &x->delta;
    for (size_t i = 0; i < x->chunks.n; i++)
        x->chunks.v[i].t_ns -= r->epoch_ns;
    *rq = (ll_rec_request){
        .level = x->w->lvl->index,
        .rank = 0,
        .id = x->id,
        .warmup = x->warmup,
        .cls = cls,
        .http_status = (int)x->http_status,
        .error = msg[0] ? strdup(msg) : NULL,
        .intended_ns = rel(r, x->intended_ns),
        .send_ns = rel(r, x->send_ns),
        .header_ns = rel(r, x->header_ns),
        .first_token_ns = rel(r, x->first_tok_ns),
        .first_think_ns = rel(r, x->first_think_ns),
        .first_answer_ns = rel(r, x->first_answer_ns),
        .end_ns = rel(r, x->end_ns),
        .prompt_tok = d->usage_prompt >= 0 ? d->usage_prompt : (int64_t)x->prompt_words,
        .think_tok = x->think_tok,
        .answer_tok = x->answer_tok,
        .usage_prompt = d->usage_prompt,
        .usage_completion = d->usage_completion,
        .usage_reasoning = d->usage_reasoning,
        .n_chunks = x->chunks.n,
        .chunks = x->chunks.v,
    };
    x->chunks.v = NULL;
    x->chunks.n = x->chunks.cap = 0;
}

/* Counters for level_end, lg_run_counts and the progress line. */
static void count_finished(lg_xfer *x, ll_err_class cls)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    if (!x->warmup) {
        if (cls == LL_ERRC_OK)
            w->n_ok++;
        else
            w->n_failed++;
        atomic_fetch_add(cls == LL_ERRC_OK ? &r->total_ok : &r->total_failed, 1);
    }
    atomic_fetch_add(&r->done, 1);
    atomic_fetch_add(&r->tokens, x->think_tok + x->answer_tok);
    if (cls != LL_ERRC_OK)
        atomic_fetch_add(&r->errors, 1);
    if (x->first_tok_ns >= 0)
        atomic_fetch_sub(&r->decoding, 1);
    atomic_fetch_sub(&r->inflight, 1);
    if (atomic_load(&r->watch))
        lg_run_notify(r);
}

static void unlink_and_free(lg_xfer *x)
{
    lg_worker *w = x->w;
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
    ll_vec_free(&x->chunks);
    free(x);
}

void lg_xfer_done(lg_xfer *x, CURLcode res)
{
    lg_worker *w = x->w;
    char msg[512];
    ll_rec_request rq;
    x->end_ns = ll_now_ns();
    if (!x->status_known && curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->http_status) != CURLE_OK)
        x->http_status = 0;
    if (x->http_status == 200)
        lg_sse_finish(&x->sse);
    ll_err_class cls = classify(x, res, msg, sizeof msg);
    fill_record(x, cls, msg, &rq);
    int prc = ll_rec_put_request(w->run->rec, &rq);
    if (prc && w->rc == 0) {
        w->rc = prc;
        snprintf(w->err, sizeof w->err, "queueing a request record: %s", ll_strerror(prc));
    }
    count_finished(x, cls);
    unlink_and_free(x);
}
