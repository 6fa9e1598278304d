/* xfer_record.c: a finished transfer made into its request record: classified
 * (an error class and message), its token counts reconciled, and the record
 * filled on the run clock for lg_xfer_done (xfer.c) to queue. Nothing here
 * formats JSON for the records or touches the records file.
 *
 * Counts: when the server's final usage (or, without usage, the scenario's
 * tokenizer) disagrees with what the stream counted, lg_xfer_reconcile
 * attributes it over the chunks by their text bytes and marks the record
 * "attributed" ("tokenizer"). */
#include "lg_internal.h"
#include "outputs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The response's Content-Encoding when it is one the client never asked for,
 * else NULL. The client sends no Accept-Encoding (a compressed stream would
 * reach it in bursts the size of the server's compressor flushes, not
 * tokens), so libcurl hands such a body over as sent: compressed bytes that
 * hold no event the framer can find. */
static const char *unasked_encoding(CURL *e)
{
    struct curl_header *h = NULL;
    if (curl_easy_header(e, "Content-Encoding", 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h || !h->value)
        return NULL;
    return h->value[0] && strcasecmp(h->value, "identity") != 0 ? h->value : NULL;
}

/* Events that held a raw control byte in a string (delta.h ctl_events): read
 * leniently, tokens counted, yet JSON forbids the byte (RFC 8259 section 7)
 * and strict readers (Python's json, JavaScript's JSON.parse, Go, serde)
 * refuse the event, so the request is failed with the byte named. */
static ll_err_class classify_ctl(const lg_xfer *x, char *msg, size_t msglen)
{
    int n = x->delta.ctl_events;
    snprintf(msg, msglen, "%d event%s a raw control byte (0x%02x) inside a JSON string, which JSON forbids and "
             "strict clients refuse; read as sent (a NUL as U+FFFD), %s tokens counted", n,
             n > 1 ? "s held" : " held", (unsigned)x->delta.ctl_byte, n > 1 ? "their" : "its");
    return LL_ERRC_STREAM;
}

/* A 200 whose transfer completed: what its stream was (lg_xfer_classify). */
static ll_err_class classify_stream(lg_xfer *x, char *msg, size_t msglen)
{
    if (x->delta.bad_events > 0) {
        /* tokens in them are lost: counted as ok, the request would show a
         * gap where they were and fewer tokens than the server sent */
        snprintf(msg, msglen, "%d event%s not JSON (the tokens in %s are not counted)", x->delta.bad_events,
                 x->delta.bad_events > 1 ? "s were" : " was", x->delta.bad_events > 1 ? "them" : "it");
        return LL_ERRC_STREAM;
    }
    if (!x->delta.done) {
        /* a 200 that is not an event stream at all: a server that ignored
         * "stream": true and answered in one JSON body */
        const char *ct = NULL;
        if (x->chunks.n == 0 && curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct &&
            !strstr(ct, "event-stream")) {
            snprintf(msg, msglen, "HTTP 200 with Content-Type %.80s, not an event stream (was \"stream\": true "
                     "ignored?)", ct);
            return LL_ERRC_STREAM;
        }
        snprintf(msg, msglen, "stream ended before [DONE]");
        return LL_ERRC_TRUNCATED;
    }
    if (x->delta.ctl_events > 0)
        return classify_ctl(x, msg, msglen);
    /* [DONE] after no token and no usage saying one was made: an answer in a
     * shape this client does not read, or none at all; as ok, it would be a
     * request with nothing to time */
    if (x->chunks.n == 0 && x->delta.usage_completion <= 0) {
        snprintf(msg, msglen, "the stream ended with [DONE] and no tokens (no content, text or usage this "
                 "client reads)");
        return LL_ERRC_STREAM;
    }
    return LL_ERRC_OK;
}

/* Whether a transfer failed on libcurl's limits on response headers: before
 * any body byte (the status line and some headers read). libcurl 7.88 says a
 * header line over CURL_MAX_HTTP_HEADER as CURLE_OUT_OF_MEMORY with no
 * message, and more than 300 KiB of headers in all as CURLE_RECV_ERROR "Too
 * large response headers" (classed a reset, it read as a dropped
 * connection); 8.6 and later say CURLE_TOO_LARGE for both. */
static int headers_too_large(const lg_xfer *x, CURLcode res)
{
    if (x->status_known || x->header_ns < 0)
        return 0;
#if LIBCURL_VERSION_NUM >= 0x080600
    if (res == CURLE_TOO_LARGE)
        return 1;
#endif
    return res == CURLE_OUT_OF_MEMORY || (res == CURLE_RECV_ERROR && strstr(x->curl_err, "header"));
}

static ll_err_class classify_headers(lg_xfer *x, CURLcode res, char *msg, size_t msglen)
{
    long got = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_HEADER_SIZE, &got) != CURLE_OK)
        got = 0;
    if (res == CURLE_OUT_OF_MEMORY)
        snprintf(msg, msglen, "a response header line over libcurl's limit of %d bytes (CURL_MAX_HTTP_HEADER; "
                 "libcurl says \"Out of memory\"), after %ld bytes of headers", CURL_MAX_HTTP_HEADER, got);
    else
        snprintf(msg, msglen, "response headers over libcurl's limit (%s), after %ld bytes of headers",
                 x->curl_err[0] ? x->curl_err : curl_easy_strerror(res), got);
    return LL_ERRC_HEADERS;
}

/* A transfer libcurl failed (res != CURLE_OK), by its code. */
static ll_err_class classify_curl(lg_xfer *x, CURLcode res, char *msg, size_t msglen)
{
    if (headers_too_large(x, res))
        return classify_headers(x, res, msg, msglen);
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

/* A status other than 200: the server's message from its body. */
static ll_err_class classify_http(lg_xfer *x, char *msg, size_t msglen)
{
    const char *enc = unasked_encoding(x->easy);
    if (enc)
        snprintf(msg, msglen, "HTTP %ld, its body in Content-Encoding %.40s, which the client did not ask for",
                 x->http_status, enc);
    else if (!lg_error_message(x->errbody.p ? x->errbody.p : "", x->errbody.len, msg, msglen))
        snprintf(msg, msglen, "HTTP %ld: %.200s", x->http_status, x->errbody.p ? x->errbody.p : "");
    return x->http_status >= 500 ? LL_ERRC_HTTP_5XX : x->http_status >= 400 ? LL_ERRC_HTTP_4XX : LL_ERRC_OTHER;
}

ll_err_class lg_xfer_classify(lg_xfer *x, CURLcode res, char *msg, size_t msglen)
{
    msg[0] = '\0';
    if (x->aborted) {
        snprintf(msg, msglen, "aborted at the interrupt deadline");
        return LL_ERRC_OTHER;
    }
    /* A compressed 200 that yielded nothing: whatever ended it, no event
     * could have been read. One that streamed well anyway (a server that
     * names an encoding it did not apply) is judged as any other. */
    const char *enc = x->http_status == 200 && x->chunks.n == 0 && !x->delta.done ? unasked_encoding(x->easy) : NULL;
    if (enc) {
        snprintf(msg, msglen, "HTTP 200 with Content-Encoding %.40s, which the client did not ask for (it sends "
                 "no Accept-Encoding): the stream came compressed, no event could be read", enc);
        return LL_ERRC_ENCODING;
    }
    if (x->delta.error) {
        snprintf(msg, msglen, "%s", lg_delta_errmsg(&x->delta));
        return LL_ERRC_STREAM;
    }
    if (res != CURLE_OK)
        return classify_curl(x, res, msg, msglen);
    if (x->http_status != 200)
        return classify_http(x, msg, msglen);
    return classify_stream(x, msg, msglen);
}

static int64_t rel(const lg_run *r, int64_t t) { return t < 0 ? -1 : t - r->epoch_ns; }

/* Where the request sits in its workload (records.h ll_rec_work). */
static ll_rec_work work_of(const lg_xfer *x)
{
    const lg_run *r = x->w->run;
    if (x->sess)
        return (ll_rec_work){LL_WORK_SESSION, x->sess->session, x->sess->turn};
    if (r->scn->trace)
        return (ll_rec_work){LL_WORK_TRACE, (int64_t)x->prompt_index, 0};
    int g = scn_prompt_prefix_group(r->prompts, x->prompt_index);
    if (g >= 0)
        return (ll_rec_work){LL_WORK_PREFIX, g, 0};
    return (ll_rec_work){LL_WORK_NONE, 0, 0};
}

/* The request's outputs under its prompt key: the prompt set's item (the
 * index modulo the set's size, whatever head the prompt carried) and the
 * scenario's seed, so that an A and a B run name the same prompt alike. */
static ll_rec_outputs *take_outputs(lg_xfer *x)
{
    const lg_run *r = x->w->run;
    size_t n = r->prompts ? scn_prompts_count(r->prompts) : 0;
    char key[48];
    snprintf(key, sizeof key, "p%zu-s%" PRIu64, n ? x->prompt_index % n : x->prompt_index, r->scn->seed);
    return lg_out_take(x->delta.out, key);
}

/* The record of a finished transfer, on the run clock. Takes the chunk array
 * (its times rebased in place) and gives the message a heap copy. */
void lg_xfer_fill_record(lg_xfer *x, ll_err_class cls, const char *msg, ll_counts counts, int64_t st_think,
                         int64_t st_answer, ll_rec_request *rq)
{
    int target = scn_prompt_target_tokens(x->w->run->prompts, x->prompt_index);
    if (target > 0 && x->head_tok > 0)
        target += x->head_tok;
    const lg_run *r = x->w->run;
    const lg_delta *d = &x->delta;
    for (size_t i = 0; i < x->chunks.n; i++)
        x->chunks.v[i].t_ns -= r->epoch_ns;
    *rq = (ll_rec_request){
        .level = x->w->lvl->index,
        .rank = r->rank,
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
        .prompt_tok = d->usage_prompt >= 0 ? d->usage_prompt : target > 0 ? target : (int64_t)x->prompt_words,
        .think_tok = x->think_tok,
        .answer_tok = x->answer_tok,
        .usage_prompt = d->usage_prompt,
        .usage_completion = d->usage_completion,
        .usage_reasoning = d->usage_reasoning,
        .counts = counts,
        .stream_think_tok = counts == LL_COUNTS_STREAM ? -1 : st_think,
        .stream_answer_tok = counts == LL_COUNTS_STREAM ? -1 : st_answer,
        .prompt_tok_target = target > 0 ? target : 0,
        .cached_tok = d->usage_cached,
        .srv = d->srv,
        .work = work_of(x),
        .max_tokens = x->max_tokens,
        .n_chunks = x->chunks.n,
        .chunks = x->chunks.v,
    };
    memcpy(rq->finish, d->finish, sizeof rq->finish);
    if (d->out)
        rq->outputs = take_outputs(x);
    x->chunks.v = NULL;
    x->chunks.n = x->chunks.cap = 0;
}

typedef struct share {
    double rem;
    size_t i;
} share;

/* Largest remainder first; ties in arrival order (deterministic). */
static int by_rem(const void *a, const void *b)
{
    const share *p = a, *q = b;
    if (p->rem != q->rem)
        return p->rem < q->rem ? 1 : -1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* Split `total` tokens over the chunks of `kind` (0: all), in proportion to
 * their text bytes, in whole tokens by largest remainder; each chunk gets at
 * least 1 when total allows (a chunk arrived, so it carried a token). */
static void attribute(ll_rec_chunk *c, const uint32_t *bytes, size_t n, char kind, int64_t total)
{
    size_t m = 0;
    double wsum = 0;
    for (size_t i = 0; i < n; i++)
        if (!kind || c[i].kind == kind) {
            m++;
            wsum += bytes[i];
        }
    if (m == 0)
        return;
    int64_t base = total >= (int64_t)m ? 1 : 0, rest = total - base * (int64_t)m, given = 0;
    share *sh = malloc(m * sizeof *sh);
    size_t k = 0, last = 0;
    for (size_t i = 0; i < n; i++) {
        if (kind && c[i].kind != kind)
            continue;
        /* text-less chunks everywhere (wsum 0): equal weights */
        double want = (double)rest * (wsum > 0 ? bytes[i] / wsum : 1.0 / (double)m);
        int64_t fl = (int64_t)want;
        c[i].tokens = (int32_t)(base + fl);
        given += fl;
        last = i;
        if (sh)
            sh[k++] = (share){want - (double)fl, i};
    }
    int64_t left = rest - given;
    if (!sh) {
        c[last].tokens += (int32_t)left; /* out of memory: exact total, rougher split */
        return;
    }
    qsort(sh, m, sizeof *sh, by_rem);
    for (size_t j = 0; left > 0; j = (j + 1) % m, left--)
        c[sh[j].i].tokens++;
    free(sh);
}

/* What the chunks' tokens are to add up to: the server's final usage when it
 * disagrees with the stream, else, without usage, the tokenizer's count of
 * the kept text. *think and *answer get the split by kind where it is known
 * (-1 otherwise). LL_COUNTS_STREAM: nothing to reconcile, the stream's own
 * counts stand. */
static ll_counts target_counts(const lg_xfer *x, int64_t *think, int64_t *answer, int64_t *total)
{
    const lg_delta *d = &x->delta;
    const scn_tokenizer *tok = x->w->run->prompts ? scn_prompts_tokenizer(x->w->run->prompts) : NULL;
    *think = *answer = -1;
    /* usage of 0 beside streamed tokens cannot be true: the stream stands */
    if (d->usage_completion > 0 || (d->usage_completion == 0 && x->chunks.n == 0)) {
        if (d->usage_completion == (int64_t)x->think_tok + x->answer_tok)
            return LL_COUNTS_STREAM;
        *total = d->usage_completion;
        if (d->usage_reasoning >= 0 && d->usage_reasoning <= *total) {
            *think = d->usage_reasoning;
            *answer = *total - *think;
        }
        return LL_COUNTS_ATTRIBUTED;
    }
    if (!tok || !d->keep_text)
        return LL_COUNTS_STREAM;
    *think = scn_tokenizer_count(tok, d->think_text.p ? d->think_text.p : "", d->think_text.len);
    *answer = scn_tokenizer_count(tok, d->answer_text.p ? d->answer_text.p : "", d->answer_text.len);
    if (*think < 0 || *answer < 0)
        return LL_COUNTS_STREAM;
    *total = *think + *answer;
    return LL_COUNTS_TOKENIZER;
}

/* Give the chunks think + answer tokens (total when the kind split is not
 * usable) and count the transfer's tokens again from them. */
static void spread_counts(lg_xfer *x, int64_t think, int64_t answer, int64_t total)
{
    size_t nt = 0, na = 0;
    for (size_t i = 0; i < x->chunks.n; i++)
        *(x->chunks.v[i].kind == LL_CHUNK_THINK ? &nt : &na) += 1;
    /* Hidden reasoning (reasoning_tokens with no thinking streamed, as
     * OpenAI's reasoning models and servers told not to stream it do): the
     * reasoning happened before the first visible token; the answer chunks
     * carry the answer's tokens only, and think_tok the hidden ones with no
     * chunks. Spread over the answer chunks, they made its per-token gaps
     * (total / answer) times too short. */
    int hidden = think > 0 && nt == 0 && na > 0 && answer > 0;
    /* Otherwise a kind with tokens but no chunks, or chunks but no tokens (a
     * server that reports reasoning_tokens 0): the kind split is not usable,
     * the total still is. */
    if (!hidden && think >= 0 && ((think > 0) != (nt > 0) || (answer > 0) != (na > 0)))
        think = answer = -1;
    if (hidden) {
        attribute(x->chunks.v, x->chunk_bytes.v, x->chunks.n, LL_CHUNK_ANSWER, answer);
    } else if (think >= 0) {
        attribute(x->chunks.v, x->chunk_bytes.v, x->chunks.n, LL_CHUNK_THINK, think);
        attribute(x->chunks.v, x->chunk_bytes.v, x->chunks.n, LL_CHUNK_ANSWER, answer);
    } else {
        attribute(x->chunks.v, x->chunk_bytes.v, x->chunks.n, 0, total);
    }
    x->think_tok = x->answer_tok = 0;
    for (size_t i = 0; i < x->chunks.n; i++)
        *(x->chunks.v[i].kind == LL_CHUNK_THINK ? &x->think_tok : &x->answer_tok) += x->chunks.v[i].tokens;
    if (hidden)
        x->think_tok = (int)think;
}

/* Make the chunks' tokens agree with what the server says it produced (its
 * final usage), or, without usage, with the tokenizer's count of the text:
 * the fit's per-token gaps divide by these counts, so a server packing k
 * tokens per chunk without per-chunk usage must not read as k times slower.
 * Returns where the counts came from; *st_* get what the stream counted. */
ll_counts lg_xfer_reconcile(lg_xfer *x, int64_t *st_think, int64_t *st_answer)
{
    int64_t think, answer, total = 0;
    ll_counts how;
    *st_think = x->think_tok;
    *st_answer = x->answer_tok;
    if (x->chunks.n == 0 || x->chunk_bytes.n != x->chunks.n)
        return LL_COUNTS_STREAM;
    how = target_counts(x, &think, &answer, &total);
    if (how == LL_COUNTS_STREAM || total > INT32_MAX)
        return LL_COUNTS_STREAM;
    spread_counts(x, think, answer, total);
    return how;
}
