/* response.c: a generation's response body, on MHD's thread (server.c has
 * the threads). eng_response_read_cb hands MHD the bytes the scheduler queued
 * in the request, suspends the connection when none are (the scheduler
 * resumes it, both under io_mu), and ends the scheduler's backpressure wait
 * once a held stream's backlog falls to ENG_UNSENT_MAX_BYTES;
 * eng_response_free_cb drops the response's reference. Beside them, the
 * handoff records: when a sampled token's bytes reached MHD and left. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "internal.h"
#include "netstamp.h"

/* ---- handoff records -----------------------------------------------------------
 * A sampled token (cfg.handoff_sample) is timed three times: its step's end
 * (sched.c), when eng_response_read_cb hands its last byte to MHD
 * (write_ns), and when the socket write carrying that byte returns
 * (send_ns). The last two differ: libmicrohttpd 0.9.75 calls the content
 * callbacks of all the ready connections in one pass and send()s what they
 * gave in the next, so at C = 1024 the bytes wait milliseconds in MHD's
 * buffer.
 *
 * MHD writes with send() (sendmsg() when headers and body go out together)
 * and has no hook after a write; netstamp/ (netstamp.h) defines both in the
 * programs that link it and calls sent_all, registered here, for the writes
 * of MHD's thread (ns_tx_attach). A write that took every byte it was asked
 * to -- MHD always asks for all it holds for the connection -- stamps the
 * samples eng_response_read_cb handed on that socket. Where netstamp is not
 * linked, ns_tx_hook refuses, no socket is registered and send_ns is -1.
 * Streams with samples register their socket in a table by descriptor
 * (MHD's thread sets, reads and clears an entry; the response's free
 * callback, which MHD runs before it closes the socket, clears it). Every
 * other thread, and every unregistered socket, goes straight to the kernel. */
static eng_req **fd_req;            /* (fd_cap) the stream registered on each socket */
static size_t fd_cap;
static pthread_once_t fd_once = PTHREAD_ONCE_INIT;

static void sent_all(int fd);

static void fd_table_alloc(void)
{
    if (ns_tx_hook(sent_all))
        return; /* no send stamps in this program: fd_cap stays 0 */
    /* as many entries as descriptors may exist (untouched pages cost no memory) */
    struct rlimit rl;
    size_t cap = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > cap)
        cap = (size_t)rl.rlim_max;
    if (cap > (size_t)1 << 20)
        cap = (size_t)1 << 20;
    if ((fd_req = calloc(cap, sizeof *fd_req)))
        fd_cap = cap;
}

/* Hand samples to the records writer (rebased to the run clock), or count
 * them dropped. Takes rec_mu: never with io_mu held. */
static void put_handoffs(eng_engine *e, ll_rec_handoff *h, int n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&e->rec_mu);
    for (int i = 0; i < n; i++) {
        if (!e->rec || h[i].step_end_ns < e->rec_epoch_ns) {
            atomic_fetch_add(&e->handoff_dropped, 1);
            continue;
        }
        h[i].step_end_ns -= e->rec_epoch_ns;
        h[i].write_ns -= e->rec_epoch_ns;
        if (h[i].send_ns >= 0)
            h[i].send_ns -= e->rec_epoch_ns;
        if (ll_rec_put_handoff(e->rec, &h[i]))
            atomic_fetch_add(&e->handoff_dropped, 1);
    }
    pthread_mutex_unlock(&e->rec_mu);
}

/* The samples eng_response_read_cb handed on r's socket, now out (send_ns) or never to
 * be (-1: the response ended first). MHD's thread. */
static void flush_handed(eng_req *r, int64_t send_ns)
{
    ll_rec_handoff h[ENG_HANDOFF_PENDING];
    int n = r->hh_n;
    for (int i = 0; i < n; i++)
        h[i] = (ll_rec_handoff){.req = r->rid, .tok = r->hh[i].tok, .step_end_ns = r->hh[i].step_end_ns,
                                .write_ns = r->hh[i].write_ns, .send_ns = send_ns};
    r->hh_n = 0;
    put_handoffs(r->eng, h, n);
}

/* A write on fd took every byte asked: the samples handed for it are out
 * (netstamp's send()/sendmsg() on MHD's thread; errno is theirs to keep). */
static void sent_all(int fd)
{
    if (fd < 0 || (size_t)fd >= fd_cap)
        return;
    eng_req *r = fd_req[fd];
    if (r && r->hh_n > 0)
        flush_handed(r, ll_now_ns());
}

/* Register r's socket for send_ns (MHD's thread, before MHD writes for r). */
void eng_response_track_sends(eng_req *r)
{
    ns_tx_attach(1);
    pthread_once(&fd_once, fd_table_alloc);
    if (r->fd >= 0 && (size_t)r->fd < fd_cap) {
        fd_req[r->fd] = r;
        r->send_fd = r->fd;
    }
}

/* Record the handoff samples whose bytes have now all been handed to MHD:
 * held for their send() when r's socket is tracked, else recorded now
 * (caller holds io_mu, which is released before the records writer is
 * taken: io_mu is never held with rec_mu). */
static void handoffs_due(eng_engine *e, eng_req *r)
{
    ll_rec_handoff h[ENG_HANDOFF_PENDING];
    int n = 0;
    int64_t now = ll_now_ns();
    while (r->hs_n > 0 && r->hs[r->hs_head].end_off <= r->sent_total) {
        int tok = r->hs[r->hs_head].tok;
        int64_t step_end = r->hs[r->hs_head].step_end_ns;
        r->hs_head = (r->hs_head + 1) % ENG_HANDOFF_PENDING;
        r->hs_n--;
        if (r->send_fd >= 0 && r->hh_n < ENG_HANDOFF_PENDING) {
            r->hh[r->hh_n].tok = tok;
            r->hh[r->hh_n].step_end_ns = step_end;
            r->hh[r->hh_n++].write_ns = now;
        } else {
            h[n++] = (ll_rec_handoff){.req = r->rid, .tok = tok, .step_end_ns = step_end, .write_ns = now,
                                      .send_ns = -1};
        }
    }
    pthread_mutex_unlock(&e->io_mu);
    put_handoffs(e, h, n);
}

ssize_t eng_response_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    eng_req *r = cls;
    eng_engine *e = r->eng;
    ssize_t n;
    pthread_mutex_lock(&e->io_mu);
    size_t avail = r->out.len - r->out_off;
    if (avail > 0) {
        n = (ssize_t)(avail < max ? avail : max);
        memcpy(buf, r->out.p + r->out_off, (size_t)n);
        r->out_off += (size_t)n;
        r->sent_total += n;
        if (r->out_off == r->out.len) {
            ll_buf_reset(&r->out);
            r->out_off = 0;
        }
        /* The scheduler may be waiting for this backlog to shrink (sched.c). */
        if (r->held && r->out.len - r->out_off <= ENG_UNSENT_MAX_BYTES) {
            r->held = 0;
            if (--e->n_held == 0)
                pthread_cond_signal(&e->drain_cv);
        }
    } else if (r->finished) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (r->aborted) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        r->suspended = 1;
        MHD_suspend_connection(r->conn);
        n = 0;
    }
    if (r->hs_n > 0) {
        handoffs_due(e, r); /* unlocks io_mu */
        return n;
    }
    pthread_mutex_unlock(&e->io_mu);
    return n;
}

/* The response is gone (MHD runs this before it closes the socket): the
 * socket's entry goes with it. */
void eng_response_free_cb(void *cls)
{
    eng_req *r = cls;
    if (r->send_fd >= 0) {
        if (fd_req[r->send_fd] == r)
            fd_req[r->send_fd] = NULL;
        r->send_fd = -1;
        flush_handed(r, -1);
    }
    eng_req_unref(r);
}
