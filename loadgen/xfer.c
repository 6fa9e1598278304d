/* xfer.c: one streaming request: build it, time its bytes, classify it when
 * it ends and hand it to the records writer.
 *
 * Timing: every chunk is stamped once per libcurl write callback, before
 * parsing, so parse cost never shifts a timestamp and all events of one read
 * share its arrival time: the kernel's receive stamp of the socket read that
 * brought the bytes (netstamp.h; load.arrival_stamp "kernel", the default),
 * else ll_now_ns() on the worker thread. A read's stamp is its last packet's,
 * so bytes that waited in the socket for a later packet are stamped late;
 * early only in the one case netstamp.h describes (TCP holding packets back
 * after a loss), which is caught where it can be without a system call. Nothing here
 * formats JSON for the records or touches the records file: lg_xfer_done fills
 * an ll_rec_request and queues it (common/records.h).
 *
 * Counts: when the server's final usage (or, without usage, the scenario's
 * tokenizer) disagrees with what the stream counted, lg_xfer_done attributes
 * it over the chunks by their text bytes and marks the record "attributed"
 * ("tokenizer"). Bodies follow the scenario's endpoint (chat, completions,
 * responses, generate) with its extra_body merged in; a 400 naming
 * continuous_usage_stats turns that field off for the run and resends once. */
#include "lg_internal.h"
#include "outputs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERRBODY_MAX 65536

/* A default key the scenario's extra_body does not replace. */
static int keep_key(const scn_scenario *s, const char *k)
{
    return !s->extra_body || !cJSON_GetObjectItemCaseSensitive(s->extra_body, k);
}

/* `"k":` after a comma unless it is the object's first key. */
static int put_key(ll_buf *b, const char *k)
{
    int rc;
    if (b->len > 1)
        LL_TRY(ll_buf_append(b, ",", 1));
    LL_TRY(ll_json_escape(b, k));
    LL_TRY(ll_buf_append(b, ":", 1));
fail:
    return rc;
}

/* The key the endpoint reads the prompt from. */
static const char *prompt_key(scn_endpoint e)
{
    switch (e) {
    case SCN_ENDPOINT_CHAT:
        return "messages";
    case SCN_ENDPOINT_RESPONSES:
        return "input";
    case SCN_ENDPOINT_GENERATE:
        return "text";
    default:
        return "prompt";
    }
}

/* The prompt as one JSON string with the head (plain ASCII, nothing to
 * escape) inserted head_at bytes into the prompt: at 0, inside the string's
 * opening quote; further on, after the prefix other requests share, so a
 * server's prefix cache can still match that prefix. The escaped prefix's
 * length is found by escaping it alone (escaping is per character). */
static int put_text(ll_buf *b, const char *head, const char *prompt, size_t head_at)
{
    size_t at = b->len, hn = strlen(head), off = 1;
    int rc;
    LL_TRY(ll_json_escape(b, prompt));
    if (hn && head_at > 0 && head_at <= strlen(prompt)) {
        ll_buf pre = {0};
        char *cut = strndup(prompt, head_at);
        rc = cut ? ll_json_escape(&pre, cut) : LL_ENOMEM;
        off = pre.len - 1; /* the opening quote and the prefix, without its closing quote */
        free(cut);
        ll_buf_free(&pre);
        LL_TRY(rc);
    }
    if (hn) {
        LL_TRY(ll_buf_append(b, head, hn)); /* room, then move the string's body up */
        memmove(b->p + at + off + hn, b->p + at + off, b->len - hn - at - off);
        memcpy(b->p + at + off, head, hn);
    }
fail:
    return rc;
}

/* The prompt under the endpoint's key; chat sends it as one user message. */
static int put_prompt(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt, size_t head_at)
{
    const char *k = prompt_key(s->endpoint);
    int rc = 0;
    if (!keep_key(s, k))
        return 0;
    LL_TRY(put_key(b, k));
    if (s->endpoint == SCN_ENDPOINT_CHAT) {
        LL_TRY(ll_buf_printf(b, "[{\"role\":\"user\",\"content\":"));
        LL_TRY(put_text(b, head, prompt, head_at));
        LL_TRY(ll_buf_append(b, "}]", 2));
    } else {
        LL_TRY(put_text(b, head, prompt, head_at));
    }
fail:
    return rc;
}

/* What comparing outputs needs: greedy decoding (temperature 0, the
 * scenario's seed) and, when outputs are recorded, the chosen tokens'
 * logprobs with the top 5 (chat: logprobs + top_logprobs; completions: a
 * count). Nothing when neither is asked, so bodies stay as they were. */
static int put_output_keys(ll_buf *b, const scn_scenario *s)
{
    int rc = 0;
    if (s->greedy && keep_key(s, "temperature"))
        LL_TRY(put_key(b, "temperature") || ll_buf_printf(b, "0"));
    if (s->greedy && keep_key(s, "seed"))
        LL_TRY(put_key(b, "seed") || ll_buf_printf(b, "%" PRIu64, s->seed % 2147483648u));
    if (s->record_outputs && keep_key(s, "logprobs")) {
        LL_TRY(put_key(b, "logprobs"));
        LL_TRY(ll_buf_printf(b, s->endpoint == SCN_ENDPOINT_CHAT ? "true" : "5"));
    }
    if (s->record_outputs && s->endpoint == SCN_ENDPOINT_CHAT && keep_key(s, "top_logprobs"))
        LL_TRY(put_key(b, "top_logprobs") || ll_buf_printf(b, "5"));
fail:
    return rc;
}

/* chat and completions: the length cap, the usage request and loadlaw's
 * engine extensions. */
static int put_openai_limits(const lg_xfer *x, ll_buf *b, const scn_scenario *s)
{
    int rc = 0;
    if (keep_key(s, "max_tokens")) {
        LL_TRY(put_key(b, "max_tokens"));
        LL_TRY(ll_buf_printf(b, "%d", x->max_tokens));
    }
    if (keep_key(s, "stream_options")) {
        LL_TRY(put_key(b, "stream_options"));
        LL_TRY(ll_buf_printf(b, "{\"include_usage\":true%s}",
                             x->sent_cont_usage ? ",\"continuous_usage_stats\":true" : ""));
    }
    /* loadlaw's engine extensions, sent only when the scenario asks */
    if (s->ignore_eos && keep_key(s, "ignore_eos"))
        LL_TRY(put_key(b, "ignore_eos") || ll_buf_printf(b, "true"));
    if (s->think_tokens >= 0 && keep_key(s, "think_tokens"))
        LL_TRY(put_key(b, "think_tokens") || ll_buf_printf(b, "%d", s->think_tokens));
    LL_TRY(put_output_keys(b, s));
fail:
    return rc;
}

/* The length cap (and, for generate, ignore_eos) under each endpoint's own name. */
static int put_limits(const lg_xfer *x, ll_buf *b, const scn_scenario *s, int openai)
{
    int rc = 0;
    if (openai)
        return put_openai_limits(x, b, s);
    if (s->endpoint == SCN_ENDPOINT_RESPONSES) {
        if (keep_key(s, "max_output_tokens")) {
            LL_TRY(put_key(b, "max_output_tokens"));
            LL_TRY(ll_buf_printf(b, "%d", x->max_tokens));
        }
        /* outputs: each text delta's logprobs with the top 5 */
        if (s->record_outputs && keep_key(s, "top_logprobs"))
            LL_TRY(put_key(b, "top_logprobs") || ll_buf_printf(b, "5"));
        if (s->record_outputs && keep_key(s, "include"))
            LL_TRY(put_key(b, "include") || ll_buf_printf(b, "[\"message.output_text.logprobs\"]"));
    } else if (keep_key(s, "sampling_params")) {
        LL_TRY(put_key(b, "sampling_params"));
        LL_TRY(ll_buf_printf(b, "{\"max_new_tokens\":%d%s}", x->max_tokens,
                             s->ignore_eos ? ",\"ignore_eos\":true" : ""));
    }
    /* outputs from SGLang's /generate: meta_info's output token logprobs, top 5, with their text */
    if (s->endpoint == SCN_ENDPOINT_GENERATE && s->record_outputs && keep_key(s, "return_logprob"))
        LL_TRY(put_key(b, "return_logprob") || ll_buf_printf(b, "true,\"top_logprobs_num\":5,"
                                                                "\"return_text_in_logprobs\":true"));
fail:
    return rc;
}

/* Every key of the scenario's extra_body, as cJSON prints its value. */
static int put_extra_body(ll_buf *b, const scn_scenario *s)
{
    char *v = NULL;
    int rc = 0;
    for (const cJSON *c = s->extra_body ? s->extra_body->child : NULL; c; c = c->next) {
        if (!c->string)
            continue;
        LL_TRY(put_key(b, c->string));
        LL_TRY((v = cJSON_PrintUnformatted(c)) ? 0 : LL_ENOMEM);
        LL_TRY(ll_buf_append(b, v, strlen(v)));
        cJSON_free(v);
        v = NULL;
    }
fail:
    cJSON_free(v);
    return rc;
}

/* The request body for the scenario's endpoint, then every key of its
 * extra_body (which replaces a default of the same name: max_tokens,
 * stream_options, ...). Written directly: no cJSON tree per request. */
static int build_body(lg_xfer *x)
{
    lg_run *r = x->w->run;
    const scn_scenario *s = r->scn;
    const char *prompt = scn_prompt(r->prompts, x->prompt_index, &x->prompt_words);
    ll_buf *b = &x->body;
    int openai = s->endpoint == SCN_ENDPOINT_CHAT || s->endpoint == SCN_ENDPOINT_COMPLETIONS;
    int cont = s->continuous_usage && !atomic_load(&r->no_cont_usage);
    int rc;
    ll_buf_reset(b);
    x->sent_cont_usage = openai && cont && keep_key(s, "stream_options");
    LL_TRY(ll_buf_append(b, "{", 1));
    if (s->endpoint != SCN_ENDPOINT_GENERATE && keep_key(s, "model")) {
        LL_TRY(put_key(b, "model"));
        LL_TRY(ll_json_escape(b, r->model));
    }
    x->head_at = scn_prompt_head_at(r->prompts, x->prompt_index);
    int mt = scn_prompt_max_tokens(r->prompts, x->prompt_index);
    x->max_tokens = mt > 0 ? mt : s->max_tokens;
    if (x->sess) {
        /* a turn of a conversation (session.c): the messages so far */
        LL_TRY(put_key(b, "messages"));
        LL_TRY(lg_sess_put_messages(b, x->sess, &x->prompt_words));
    } else {
        LL_TRY(put_prompt(b, s, x->head, prompt, x->head_at));
    }
    if (x->head[0]) {
        const scn_tokenizer *tok = scn_prompts_tokenizer(r->prompts);
        x->prompt_words++;
        if (tok && scn_prompt_target_tokens(r->prompts, x->prompt_index) > 0)
            x->head_tok = (int)scn_tokenizer_count(tok, x->head, strlen(x->head));
    }
    LL_TRY(put_limits(x, b, s, openai));
    if (keep_key(s, "stream"))
        LL_TRY(put_key(b, "stream") || ll_buf_printf(b, "true"));
    LL_TRY(put_extra_body(b, s));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

const char *lg_request_path(const scn_scenario *s)
{
    return s->endpoint_path && s->endpoint_path[0] ? s->endpoint_path : scn_endpoint_path(s->endpoint);
}

int lg_xfer_headers(const scn_scenario *s, struct curl_slist **list)
{
    for (size_t i = 0; i < s->n_headers; i++) {
        struct curl_slist *t = curl_slist_append(*list, s->headers[i]);
        if (!t)
            return LL_ENOMEM;
        *list = t;
    }
    return 0;
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
    /* Each count is at most 1e9 (sse.c jnum), but a server whose running
     * total goes down and up again adds them without end: past 1e9 in one
     * request (none has that many) the stream is wrong, and the int sums
     * must not overflow. */
    if ((int64_t)x->think_tok + x->answer_tok + o.think_tok + o.answer_tok > 1000000000) {
        if (!x->delta.error)
            lg_delta_set_error(&x->delta, "token counts past 1e9 in one stream (the server's usage jumps)");
        return 0;
    }
    if (o.think_tok) {
        x->think_tok += o.think_tok;
        if (add_chunk(x, o.think_tok, LL_CHUNK_THINK) || ll_vec_push(&x->chunk_bytes, o.think_bytes))
            return LL_ENOMEM;
    }
    if (o.answer_tok) {
        x->answer_tok += o.answer_tok;
        if (add_chunk(x, o.answer_tok, LL_CHUNK_ANSWER) || ll_vec_push(&x->chunk_bytes, o.answer_bytes))
            return LL_ENOMEM;
    }
    return 0;
}

/* A packet is stamped as the network hands it over, a moment before TCP puts
 * it in the socket (microseconds; more when softirqs queue up on a busy
 * host): a stamp this much older than the last time the socket was found
 * empty may still be an ordinary arrival. Older than that, the packet was
 * held back after a loss (netstamp.h) and the clock is taken instead. */
#define LG_RX_HELD_SLACK_NS 1000000

/* When the bytes in hand reached this host (see the top of the file): the
 * kernel's stamp of the read that brought them, if that read was on this
 * transfer's socket and the stamp is not in the future nor before the
 * request was sent; else the clock now (*now_ns). Never earlier than the
 * transfer's previous arrival. *kernel: whether the stamp was the kernel's.
 *
 * One read often makes several callbacks (the headers, then one per HTTP
 * chunk: an engine writes an event per chunk). The first judges the read and
 * marks the socket emptied if the read drained it; the others reuse that
 * judgement. Judging them again would compare the read's stamp with the
 * empty mark the read itself just set, and a read that waited over
 * LG_RX_HELD_SLACK_NS in the socket (a lagging client: high C) would give
 * its later events the clock, a false gap the size of the lag.
 *
 * The transfer's socket is the one curl asked the worker to watch for it
 * (worker.c on_socket: curl names every transfer that joins a socket, a
 * reused connection's too). Not the socket the wake-up handed to curl: one
 * call also runs other transfers whose timers expired. Before curl has named
 * it (a response read in the transfer's first run) it is taken from the
 * read made in this call: curl hands a write callback the bytes of the read
 * it has just made on the transfer's connection, and worker.c drive forgets
 * the reads of earlier calls. */
static int64_t arrival_ns(lg_xfer *x, int64_t *now_ns, int *kernel)
{
    int64_t now = ll_now_ns(), t = now;
    const ns_rx *rx = &x->w->rx;
    *kernel = 0;
    *now_ns = now;
    if (x->fd < 0 && rx->t_ns >= 0)
        x->fd = rx->fd; /* before curl named its socket: the read just made (see above) */
    int ours = rx->read_at_ns >= 0 && rx->fd == x->fd;
    if (ours && rx->read_at_ns == x->read_ns) { /* a read already judged (see above) */
        *kernel = x->read_kernel;
        t = x->read_t_ns;
    } else {
        if (rx->t_ns >= 0 && rx->fd == x->fd && rx->t_ns <= now && rx->t_ns >= x->send_ns &&
            rx->t_ns >= x->empty_ns - LG_RX_HELD_SLACK_NS) { /* older: held back by TCP (netstamp.h) */
            t = rx->t_ns;
            *kernel = 1;
        }
        if (rx->drained_fd == x->fd && ours)
            x->empty_ns = rx->read_at_ns;
        if (ours) {
            x->read_ns = rx->read_at_ns;
            x->read_t_ns = t;
            x->read_kernel = *kernel;
        }
    }
    return t < x->now_ns ? x->now_ns : t;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    lg_xfer *x = ud;
    int64_t now;
    int kernel;
    if (x->header_ns < 0)
        x->header_ns = arrival_ns(x, &now, &kernel);
    return sz * nm;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    lg_xfer *x = ud;
    size_t n = sz * nm;
    lg_worker *w = x->w;
    int64_t now;
    int kernel;
    x->now_ns = arrival_ns(x, &now, &kernel);
    /* level_end "client": socket reads with data (lg_worker.reads), each once
     * however many callbacks it made; untimed by rx (user stamps): each callback */
    const ns_rx *rx = &w->rx;
    int new_read = rx->read_at_ns < 0 || rx->fd != x->fd || rx->read_at_ns != x->counted_ns;
    if (new_read && rx->read_at_ns >= 0 && rx->fd == x->fd)
        x->counted_ns = rx->read_at_ns;
    w->reads += new_read;
    if (kernel && new_read) {
        w->reads_kstamp++;
        /* how long the bytes waited for this thread; ENOMEM: one sample fewer */
        if (w->read_lag)
            (void)ll_pct_add(w->read_lag, (double)(now - x->now_ns) / 1e6);
    }
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
        char m[64];
        snprintf(m, sizeof m, "SSE line or event over %u bytes", LG_SSE_MAX_BYTES);
        lg_delta_set_error(&x->delta, m);
    }
    return rc ? 0 : n; /* 0 aborts: out of memory or an endless line */
}

/* libcurl's receive buffer, allocated per transfer (CURLOPT_BUFFERSIZE; its
 * minimum is 1 KiB). At the 16 KiB default the client held 18.3 KB per open
 * stream; at 4 KiB 17.8 KB, at 2 KiB 15.8 KB (bench/scale.sh 1024,4096: the
 * RSS slope; the rest is curl's 5.4 KB easy handle and its connection, and
 * the transfer's own buffers). A token event is ~250-300 B, so a read still
 * takes up to seven; a server that falls behind and sends a burst costs more
 * reads, each a write callback and one timestamp: in bench/floor/floor.sh
 * with law 0+0n (bursts of ~25 events a read) the client spent 1.7 us of CPU
 * per event at 2 KiB against 1.6 us at 16 KiB, within the run-to-run spread. */
#define LG_RECV_BUFFER_BYTES 2048L

/* A new connection's socket: the kernel is to stamp what it receives. A
 * refusal only costs the stamps (the reads are then timed by the clock,
 * and counted as such). */
static int on_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    (void)ud;
    if (purpose == CURLSOCKTYPE_IPCXN)
        (void)ns_rx_enable((int)fd);
    return CURL_SOCKOPT_OK;
}

/* The easy handle of one request: LL_EINVAL when curl refused an option. */
static int setup_easy(lg_xfer *x)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    CURL *e = x->easy;
    long timeout_ms = (long)(r->scn->timeout_s * 1000.0);
    if (curl_easy_setopt(e, CURLOPT_URL, r->url_full) || curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
        curl_easy_setopt(e, CURLOPT_PRIVATE, x) ||
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, w->user_rid ? w->headers : &x->rid_hdr) ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body.p) ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body.len) ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data) || curl_easy_setopt(e, CURLOPT_WRITEDATA, x) ||
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) ||
        curl_easy_setopt(e, CURLOPT_HEADERDATA, x) || curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curl_err) ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L) ||
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L) ||
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) ||
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, LG_RECV_BUFFER_BYTES) ||
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1))
        return LL_EINVAL;
    if (r->kstamp && curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_sockopt))
        return LL_EINVAL;
    /* the local address of a new connection (srcaddr.h: spread over several
     * on loopback at high C, where one address makes connect() slow) */
    if (w->src.n_v4 + w->src.n_v6 > 0 && (curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, lg_src_open) ||
                                           curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &w->src)))
        return LL_EINVAL;
    return 0;
}

static void init_parsers(lg_xfer *x)
{
    const lg_run *r = x->w->run;
    scn_endpoint ep = r->scn->endpoint;
    lg_sse_init(&x->sse, on_event, x);
    lg_delta_init(&x->delta);
    x->delta.dialect = ep == SCN_ENDPOINT_RESPONSES  ? LG_DIALECT_RESPONSES
                       : ep == SCN_ENDPOINT_GENERATE ? LG_DIALECT_GENERATE
                                                     : LG_DIALECT_OPENAI;
    /* The text is kept for a tokenizer to count (when usage is absent) and
     * for a conversation's next turn (the answer it sends back). */
    x->delta.keep_text = (r->prompts && scn_prompts_tokenizer(r->prompts) != NULL) || x->sess;
    /* Out of memory here records no outputs for this request, nothing worse. */
    if (r->scn->record_outputs)
        x->delta.out = lg_out_new();
}

/* The head of a fresh prompt: the request's id, then this run's tag, e.g.
 * "[17-7f3a9c21] " (the id first: what differs comes before what a run's
 * requests share). A prefix cache matches from a prompt's first token, so
 * a head no earlier request had makes the whole prompt a miss: TTFT then
 * measures prefill, whatever ran on the server before, and two identical
 * runs agree. A few tokens long; a tokenizer counts them into the target.
 * A run that records outputs for an A/B compares the same prompts on both
 * sides: its head names the prompt set's seed instead of the run ("[17-s1] "),
 * the same in A and B and still unique within each (a second run against
 * the same server may then meet its own prompts in the cache). */
static void fresh_head(const lg_run *r, uint64_t id, char *out, size_t n)
{
    if (r->scn->record_outputs)
        snprintf(out, n, "[%" PRIu64 "-s%" PRIu64 "] ", id, r->scn->seed);
    else
        snprintf(out, n, "[%" PRIu64 "-%.8s] ", id, r->run_tag);
}

int lg_xfer_start(lg_worker *w, int req_index, int64_t intended_ns, lg_sess *sess)
{
    lg_run *r = w->run;
    lg_xfer *x = calloc(1, sizeof *x);
    int rc;
    if (!x)
        return LL_ENOMEM;
    x->w = w;
    x->req_index = req_index;
    x->sess = sess;
    x->warmup = req_index < w->lvl->warmup;
    /* unique across ranks: rank r takes r, r+K, r+2K, ... */
    x->id = atomic_fetch_add(&r->next_id, 1) * (uint64_t)r->ranks + (uint64_t)r->rank;
    /* Fresh prompts: the run's n-th request takes the set's n-th prompt
     * (mod its size), behind a head no other request of any run has; a
     * scenario that reuses prompts starts each level at the set's first. */
    if (r->scn->prompts_reuse || sess) {
        /* a conversation's turns carry its own head (session.c) */
        x->prompt_index = (size_t)req_index * (size_t)r->ranks + (size_t)r->rank;
        x->head[0] = '\0';
    } else if (r->scn->trace) {
        /* a trace's request k is row k, sent at its time (worker.c) */
        x->prompt_index = (size_t)req_index * (size_t)r->ranks + (size_t)r->rank;
        fresh_head(r, x->id, x->head, sizeof x->head);
    } else {
        x->prompt_index = (size_t)x->id;
        fresh_head(r, x->id, x->head, sizeof x->head);
    }
    x->intended_ns = intended_ns;
    /* Every request names itself (vLLM and others log X-Request-Id; the
     * bundled engine's handoff records carry it): unique across runs and
     * ranks, so two clients on one server never collide. */
    snprintf(x->rid_line, sizeof x->rid_line, "X-Request-Id: loadlaw-%s-%" PRIu64, r->run_tag, x->id);
    x->rid_hdr.data = x->rid_line;
    x->rid_hdr.next = w->headers;
    x->header_ns = x->first_tok_ns = x->first_think_ns = x->first_answer_ns = x->end_ns = -1;
    x->fd = -1;
    x->empty_ns = x->read_ns = x->counted_ns = -1;
    init_parsers(x);
    LL_TRY(build_body(x));
    if (x->delta.out) /* outputs recorded: the prompt as sent, for check-decode */
        lg_out_prompt(x->delta.out, x->body.p, x->body.len, r->scn->endpoint == SCN_ENDPOINT_CHAT);
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
    lg_delta_free(&x->delta);
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
        snprintf(msg, msglen, "%s", lg_delta_errmsg(&x->delta));
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
    if (x->delta.bad_events > 0) {
        /* tokens in them are lost: counted as ok, the request would show a
         * gap where they were and fewer tokens than the server sent */
        snprintf(msg, msglen, "%d event%s not JSON (the tokens in %s are not counted)", x->delta.bad_events,
                 x->delta.bad_events > 1 ? "s were" : " was", x->delta.bad_events > 1 ? "them" : "it");
        return LL_ERRC_STREAM;
    }
    if (!x->delta.done) {
        snprintf(msg, msglen, "stream ended before [DONE]");
        return LL_ERRC_TRUNCATED;
    }
    return LL_ERRC_OK;
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
static void fill_record(lg_xfer *x, ll_err_class cls, const char *msg, ll_counts counts, int64_t st_think,
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
    if (d->usage_completion >= 0) {
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
static ll_counts reconcile(lg_xfer *x, int64_t *st_think, int64_t *st_answer)
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

/* A 400 whose message names continuous_usage_stats (or stream_options):
 * strict OpenAI-compatible servers reject the field. Turn it off for the run
 * (said once) and send this request again without it, under the same id. */
static int retry_without_cont_usage(lg_xfer *x, const char *msg)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    int rc;
    if (x->http_status != 400 || !x->sent_cont_usage || x->retried || x->aborted ||
        (!strstr(msg, "continuous_usage_stats") && !strstr(msg, "stream_options")))
        return LL_EINVAL;
    if (atomic_exchange(&r->no_cont_usage, 1) == 0)
        fprintf(stderr, "loadlaw: the server rejected stream_options.continuous_usage_stats (\"%.200s\"); "
                        "not asking for it for the rest of the run (token counts come from the final usage)\n",
                msg);
    LL_TRY(curl_multi_remove_handle(w->multi, x->easy) == CURLM_OK ? 0 : LL_EIO);
    x->retried = 1;
    ll_buf_reset(&x->errbody);
    lg_sse_free(&x->sse);
    lg_delta_free(&x->delta);
    init_parsers(x);
    x->chunks.n = x->chunk_bytes.n = 0;
    x->think_tok = x->answer_tok = 0;
    x->header_ns = x->first_tok_ns = x->first_think_ns = x->first_answer_ns = x->end_ns = -1;
    x->fd = -1; /* curl may send the retry on another connection */
    x->empty_ns = x->read_ns = x->counted_ns = -1;
    x->http_status = 0;
    x->status_known = 0;
    x->curl_err[0] = '\0';
    LL_TRY(build_body(x));
    LL_TRY(curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body.p) ||
                   curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body.len)
               ? LL_EINVAL
               : 0);
    x->send_ns = ll_now_ns();
    LL_TRY(curl_multi_add_handle(w->multi, x->easy) == CURLM_OK ? 0 : LL_EIO);
fail:
    return rc;
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
    lg_delta_free(&x->delta);
    ll_vec_free(&x->chunks);
    ll_vec_free(&x->chunk_bytes);
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
    if (cls == LL_ERRC_HTTP_4XX && x->http_status == 400 && x->sent_cont_usage && !x->retried) {
        long status = x->http_status;
        int rrc = retry_without_cont_usage(x, msg);
        if (rrc == 0)
            return; /* in flight again; recorded when the retry ends */
        if (rrc != LL_EINVAL) {
            /* The resend failed part-way: record the 400 as it was. */
            x->http_status = status;
            x->status_known = 1;
            x->end_ns = ll_now_ns();
        }
    }
    int64_t st_think, st_answer;
    ll_counts counts = reconcile(x, &st_think, &st_answer);
    fill_record(x, cls, msg, counts, st_think, st_answer, &rq);
    int prc = ll_rec_put_request(w->run->rec, &rq);
    if (prc && w->rc == 0) {
        w->rc = prc;
        snprintf(w->err, sizeof w->err, "queueing a request record: %s", ll_strerror(prc));
    }
    if (x->sess)
        lg_sess_end(w, x->sess, &x->delta.answer_text, cls == LL_ERRC_OK, ll_now_ns());
    count_finished(x, cls);
    unlink_and_free(x);
}
