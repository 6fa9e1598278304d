/* server.c: the OpenAI-compatible HTTP front of the engine (libmicrohttpd).
 *
 * DESIGN: one MHD polling thread (epoll) serves every connection and never
 * blocks. A generation response is a callback response whose reader copies the
 * bytes the scheduler queued in the request; when none are queued the reader
 * suspends the connection, and the scheduler resumes it at the end of the step
 * that produced tokens (both under eng->io_mu, see internal.h). A suspended
 * connection costs no CPU, so thousands of streams wait for free.
 * The reader also ends the scheduler's backpressure wait (sched.c, wait_drained)
 * once a held stream's unsent bytes fall to ENG_UNSENT_MAX_BYTES.
 * A client that leaves mid-stream is noticed by MHD when a write fails; the
 * "request completed" notice marks the request cancelled and the scheduler
 * drops it at its next step. A non-streaming response writes nothing until it
 * ends, so there the scheduler looks at the suspended connection's socket
 * each step instead (sched.c, client_left) and ends the response itself.
 * Two additions work around 0.9.75's loop: a wake-up thread (mhd_nudge_main)
 * so a batch of exactly 128·k ready sockets is not left asleep, and a hook
 * on netstamp's send()/sendmsg() (where the program links netstamp), which
 * times when sampled tokens really left (handoff records' send_ns).
 * A connection refused before its body was read is closed by linger.c's
 * thread (a lingering close), so its client reads the refusal, not a reset.
 * One client address holds at most max_connections_per_ip connections.
 * This file starts and stops the daemon, its wake-up thread and the
 * lingering-close thread; what each request is answered (and each
 * connection's timeouts) is routes.c's, and a generation's response body
 * (the reader, the handoff records) response.c's.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
    ll_debug("libmicrohttpd: %s", line);
}

/* libmicrohttpd 0.9.75's epoll loop (daemon.c, MHD_epoll) computes its
 * epoll_wait timeout once per pass, before draining, and calls epoll_wait
 * again with that same timeout for as long as a call returns a full batch
 * (MAX_EVENTS, 128). When exactly 128 or 256 sockets turn readable at once
 * (a burst of new requests) and nothing else is pending, the last call waits
 * with the idle timeout (up to 120 s) although the calls before it have put
 * those connections on MHD's ready list: none is read or dispatched until
 * some other event reaches the epoll set. This thread is that event every
 * ENG_MHD_NUDGE_NS while MHD has a connection: it writes an eventfd
 * registered edge-triggered in MHD's epoll set with data.ptr NULL, which
 * MHD_epoll skips ("shutdown signal"), so such a lapse lasts at most one
 * period. (A periodic timerfd would not do: it re-arms only when read.) */
#define ENG_MHD_NUDGE_NS 10000000L /* 10 ms */

static void *mhd_nudge_main(void *arg)
{
    eng_engine *e = arg;
    const uint64_t one = 1;
    const struct timespec period = {0, ENG_MHD_NUDGE_NS};
    while (!atomic_load(&e->mhd_nudge_stop)) {
        nanosleep(&period, NULL);
        /* No connection, nothing to miss: an idle server stays asleep. */
        const union MHD_DaemonInfo *ci =
            MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (ci && ci->num_connections == 0)
            continue;
        if (write(e->mhd_nudge_fd, &one, sizeof one) < 0) { /* EAGAIN after 2^64 writes */
            uint64_t n;
            if (read(e->mhd_nudge_fd, &n, sizeof n) < 0)
                break;
        }
    }
    return NULL;
}

static int mhd_nudge_start(eng_engine *e)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!info || fd < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = NULL};
    if (epoll_ctl(info->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
        goto fail;
    e->mhd_nudge_fd = fd;
    atomic_store(&e->mhd_nudge_stop, 0);
    if (pthread_create(&e->mhd_nudge_thread, NULL, mhd_nudge_main, e) != 0)
        goto fail; /* closing the fd takes it out of the set */
    e->mhd_nudge_started = 1;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    e->mhd_nudge_fd = -1;
    return -1;
}

/* Connection slots no one client address may take (max_connections_per_ip's
 * default): a load generator on loopback may hold all but these, and a
 * client that opens connections and sends nothing cannot lock every other
 * address out. */
#define ENG_CONN_SPARE 64

/* MHD's per-address limit: 0 (none) when it would not be below the total. */
static unsigned per_ip_limit(const eng_config *c)
{
    unsigned n = c->max_connections_per_ip;
    if (n == 0)
        n = c->max_connections >= 2 * ENG_CONN_SPARE ? c->max_connections - ENG_CONN_SPARE
                                                      : c->max_connections / 2;
    return n < c->max_connections ? n : 0;
}

static struct MHD_Daemon *start_daemon(eng_engine *e, const struct sockaddr_in *sa)
{
    /* MHD_USE_TURBO: libmicrohttpd reads, writes and accepts before epoll
     * says a socket is ready. 0.9.75's epoll loop can sleep with connections
     * on its ready list when exactly 128·k sockets turn readable at once
     * (mhd_nudge_main above has the mechanism and the cure); TURBO, which
     * reads a new connection in the pass that accepts it, makes that rarer
     * (25 bursts of 256 in 70 stalled without it) and costs nothing in
     * events/s. Plain poll() has no such loop but cost 60% of the events/s
     * at 4096 streams. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    /* The daemon's timeout is the answering one; a connection waiting for
     * a request is given request_timeout instead (eng_routes_on_connection),
     * so the many streams stay on MHD's cheap list of default timeouts. */
    return MHD_start_daemon(flags, (uint16_t)e->cfg.port, NULL, NULL, eng_routes_on_access, e,
                            MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)sa,
                            MHD_OPTION_CONNECTION_LIMIT, e->cfg.max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit(&e->cfg),
                            MHD_OPTION_CONNECTION_TIMEOUT, e->cfg.idle_timeout_s,
                            /* the per-stream cost: see eng_config.conn_memory_bytes */
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, e->cfg.conn_memory_bytes,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u,
                            MHD_OPTION_NOTIFY_COMPLETED, eng_routes_on_completed, e,
                            MHD_OPTION_NOTIFY_CONNECTION, eng_routes_on_connection, e,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_END);
}

int eng_server_start(eng_engine *e, char *err, size_t errlen)
{
    e->mhd_nudge_fd = -1;
    e->mhd_nudge_started = 0;
    e->linger = NULL;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)e->cfg.port);
    const char *host = e->cfg.bind_addr ? e->cfg.bind_addr : "127.0.0.1";
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        ll_errf(err, errlen, "bind address \"%s\" is not an IPv4 address", host);
        return LL_EINVAL;
    }
    /* 127.0.0.0/8 only reaches this machine; anything else, without a key,
     * hands generation and the profiler to whoever can reach the port. */
    if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127 && !e->cfg.api_key)
        ll_warn("engine: listening on %s without an API key: anyone who can reach this port can "
                "use every endpoint (set api_key / serve --api-key or LOADLAW_API_KEY)", host);
    char lerr[160];
    if (eng_linger_start(&e->linger, lerr, sizeof lerr))
        ll_warn("engine: %s: a client that writes a refused body whole before reading may see "
                "a reset instead of its 413", lerr);
    e->mhd = start_daemon(e, &sa);
    if (!e->mhd) {
        eng_linger_stop(e->linger);
        e->linger = NULL;
        ll_errf(err, errlen, "could not start the HTTP server on %s:%d (port in use, or no permission?)",
                host, e->cfg.port);
        return LL_ESYS;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_BIND_PORT);
    e->port = info ? (int)info->port : e->cfg.port;
    if (e->port <= 0) {
        MHD_stop_daemon(e->mhd);
        e->mhd = NULL;
        eng_linger_stop(e->linger);
        e->linger = NULL;
        ll_errf(err, errlen, "could not learn the HTTP server's port");
        return LL_ESYS;
    }
    snprintf(e->url, sizeof e->url, "http://%s:%d",
             strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : host, e->port);
    if (mhd_nudge_start(e))
        ll_warn("engine: could not start the HTTP loop's wake-up thread: a burst of new requests "
                "may wait for the next connection");
    return 0;
}

/* After the scheduler has stopped (every request aborted and resumed): wake a
 * waiting /start_profile too, since MHD may not be stopped with a suspended
 * connection. */
void eng_server_stop(eng_engine *e)
{
    if (!e->mhd)
        return;
    pthread_mutex_lock(&e->mu);
    if (e->prof.waiter_suspended) {
        e->prof.waiter_suspended = 0;
        MHD_resume_connection(e->prof.waiter);
    }
    pthread_mutex_unlock(&e->mu);
    if (e->mhd_nudge_started) {
        atomic_store(&e->mhd_nudge_stop, 1);
        pthread_join(e->mhd_nudge_thread, NULL);
        e->mhd_nudge_started = 0;
    }
    MHD_stop_daemon(e->mhd);
    e->mhd = NULL;
    eng_linger_stop(e->linger); /* after MHD: its last notices may hand sockets over */
    e->linger = NULL;
    if (e->mhd_nudge_fd >= 0) {
        close(e->mhd_nudge_fd);
        e->mhd_nudge_fd = -1;
    }
}
