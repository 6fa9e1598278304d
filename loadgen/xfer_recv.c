/* xfer_recv.c: a transfer's bytes as they arrive: the easy handle's options
 * and the libcurl callbacks that time each read, keep an error body, feed the
 * SSE framer (sse.h) and the API's interpreter (delta.h) and turn its token
 * events into the transfer's chunks.
 *
 * Timing: every chunk is stamped once per libcurl write callback, before
 * parsing, so parse cost never shifts a timestamp and all events of one read
 * share its arrival time: the kernel's receive stamp of the socket read that
 * brought the bytes (netstamp.h; load.arrival_stamp "kernel", the default),
 * else ll_now_ns() on the worker thread. A read's stamp is its last packet's,
 * so bytes that waited in the socket for a later packet are stamped late;
 * early only in the one case netstamp.h describes (TCP holding packets back
 * after a loss), which is caught where it can be without a system call. All of
 * it runs on the worker thread that owns the transfer. */
#include "lg_internal.h"
#include "outputs.h"

#include <stdio.h>
#include <string.h>

#define ERRBODY_MAX 65536

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
    /* Each count is at most 1e9 (delta.c lg_jcount) and a running total that
     * goes back moves nothing (lg_delta_count), so a stream's tokens stay within
     * its largest count; past 1e9 in one request (none has that many) the
     * stream is wrong, and the int sums must not overflow. */
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
int lg_xfer_setup_easy(lg_xfer *x)
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

void lg_xfer_init_parsers(lg_xfer *x)
{
    const lg_run *r = x->w->run;
    lg_sse_init(&x->sse, on_event, x);
    lg_delta_init(&x->delta);
    x->delta.api = r->api;
    /* The text is kept for a tokenizer to count (when usage is absent) and
     * for a conversation's next turn (the answer it sends back). */
    x->delta.keep_text = (r->prompts && scn_prompts_tokenizer(r->prompts) != NULL) || x->sess;
    /* Out of memory here records no outputs for this request, nothing worse. */
    if (r->scn->record_outputs)
        x->delta.out = lg_out_new();
}
