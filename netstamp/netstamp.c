/* netstamp.c: the program's recv(), poll(), send() and sendmsg(), with the
 * kernel's receive stamp for loadgen's reads and the moment the engine's
 * writes returned (netstamp.h says why and how). This is the only file in
 * loadlaw that defines libc symbols, and only programs that link ll_netstamp
 * get it. Keep the definitions plain, reentrant and errno-preserving, and
 * never call any of them from here.
 *
 * Why interposition, not a hook: the stamp of a TCP read comes back only in
 * recvmsg()'s control data (SCM_TIMESTAMPNS). libcurl 7.88 can set the
 * socket option (CURLOPT_SOCKOPTFUNCTION, which loadgen/xfer_recv.c uses) but reads with
 * recv() itself and offers no read callback, and SIOCGSTAMPNS answers only
 * for datagram sockets (TCP never sets sk_stamp). libmicrohttpd 0.9.75 has no
 * public send hook for plain sockets (its send_cls is internal, for TLS),
 * and MHD_OPTION_NOTIFY_CONNECTION reports only a connection's start and
 * end; SO_TIMESTAMPING's transmit stamps (SOF_TIMESTAMPING_TX_SCHED) time
 * the packet's queueing, not the write's return, and come back on the error
 * queue of a socket MHD owns. So neither library gives the same stamps
 * without these definitions. */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* glibc's fortified recv() is an inline of its own */
#include "netstamp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static _Thread_local ns_rx *tls_rx;
static _Thread_local int tls_tx;     /* this thread's writes call tx_hook */
static _Atomic(ns_sent_fn) tx_hook; /* set by the engine (ns_tx_hook) */

static int64_t ts_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ts_ns(&t);
}

int ns_rx_available(void)
{
    return 1;
}

void ns_rx_attach(ns_rx *rx)
{
    if (rx) {
        ns_rx_reset(rx);
        ns_rx_clock(rx);
    }
    tls_rx = rx;
}

int ns_rx_enable(int fd)
{
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

/* Whether a datagram fd sends itself comes back stamped on arrival. A
 * datagram socket that asked for stamps always gets one: when the packet
 * came unstamped (stamping not yet on), the kernel stamps it in recvmsg()
 * instead (__sock_recv_timestamp), which TCP never does. So a stamp counts
 * only when it is older than the clock read before recvmsg(): one taken on
 * arrival is at most the clock after send(), one taken in recvmsg() at least
 * the clock before it. */
static int stamping_live(int fd)
{
    char b = 0, cb[CMSG_SPACE(sizeof(struct timespec)) + 64];
    struct iovec iov = {.iov_base = &b, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof cb};
    struct timespec before;
    if (sendto(fd, &b, 1, 0, NULL, 0) != 1)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (ppoll(&p, 1, &(struct timespec){.tv_nsec = 10000000}, NULL) != 1)
        return 0;
    clock_gettime(CLOCK_REALTIME, &before);
    if (recvmsg(fd, &m, MSG_DONTWAIT) != 1)
        return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(c), sizeof t);
            return ts_ns(&t) < ts_ns(&before);
        }
    return 0;
}

static int keeper_fd = -1;
static pthread_once_t keeper_once = PTHREAD_ONCE_INIT;

static void keeper_open(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (ns_rx_enable(fd) || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &al) || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return;
    }
    keeper_fd = fd;
    /* Linux turns stamping on a moment after the first socket asks (a
     * deferred switch, run by a kernel worker a busy host may hold up):
     * wait for it, at most ~1 s; usually the first check finds it on */
    for (int i = 0; i < 50 && !stamping_live(fd); i++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
}

int ns_rx_keep_on(void)
{
    pthread_once(&keeper_once, keeper_open);
    return keeper_fd;
}

/* Bytes from a recvmsg() that plain recv() would not have delivered: file
 * descriptors passed over a unix socket (closed, as the kernel does when
 * there is no room for them). */
static void drop_rights(struct msghdr *m)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
                close(fd);
            }
        }
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    ns_rx *rx = tls_rx;
    /* peeks, urgent and error-queue reads, and datagram truncation reports
     * are not reads of the stream: as glibc's recv() */
    if (!rx || (flags & (MSG_PEEK | MSG_OOB | MSG_ERRQUEUE | MSG_TRUNC)))
        return recvfrom(fd, buf, len, flags, NULL, NULL);
    union {
        char b[CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(64)];
        struct cmsghdr align;
    } cb;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof cb.b};
    int64_t t0 = mono_ns();
    ssize_t n = recvmsg(fd, &m, flags | MSG_CMSG_CLOEXEC);
    if (n <= 0)
        return n; /* errno as recvmsg left it */
    drop_rights(&m);
    rx->fd = fd;
    rx->read_at_ns = t0;
    /* fewer bytes than asked: the stream socket had no more (libcurl's
     * sockets are all TCP) */
    rx->drained_fd = (size_t)n < len ? fd : -1;
    rx->t_ns = -1;
    if (m.msg_flags & MSG_CTRUNC)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(c), sizeof t);
            if (t.tv_sec > 0) /* 0: a packet that came before stamping was on */
                rx->t_ns = ts_ns(&t) - rx->rt_minus_mono;
        }
    return n;
}

/* glibc declares poll()'s array write-only (access attribute), so reading
 * the caller's fd and events here looks uninitialised to GCC: it is not. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
int poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
    ns_rx *rx = tls_rx;
    if (rx && fds && nfds == 1 && timeout_ms == 0 && fds[0].fd >= 0 && fds[0].fd == rx->drained_fd &&
        !(fds[0].events & ~(POLLIN | POLLRDNORM | POLLRDBAND | POLLPRI))) {
        fds[0].revents = 0;
        return 0; /* emptied by the read just made (see rxstamp.h) */
    }
    struct timespec ts = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    return ppoll(fds, nfds, timeout_ms < 0 ? NULL : &ts, NULL);
}
#pragma GCC diagnostic pop

int ns_tx_hook(ns_sent_fn fn)
{
    atomic_store(&tx_hook, fn);
    return 0;
}

void ns_tx_attach(int on)
{
    tls_tx = on;
}

static void sent_all(int fd)
{
    ns_sent_fn fn = atomic_load(&tx_hook);
    if (fn) {
        int saved = errno;
        fn(fd);
        errno = saved;
    }
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    ssize_t n = sendto(fd, buf, len, flags, NULL, 0);
    if (tls_tx && n > 0 && (size_t)n == len)
        sent_all(fd);
    return n;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    ssize_t n = syscall(SYS_sendmsg, fd, m, flags);
    if (tls_tx && n > 0) {
        size_t want = 0;
        for (size_t i = 0; i < (size_t)m->msg_iovlen; i++)
            want += m->msg_iov[i].iov_len;
        if ((size_t)n == want)
            sent_all(fd);
    }
    return n;
}
