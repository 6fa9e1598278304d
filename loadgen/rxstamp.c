/* rxstamp.c: recv() with the kernel's receive stamp, and poll() that knows
 * what the last read emptied (rxstamp.h says why and how). This file defines
 * the process's recv() and poll(): keep them plain, reentrant and
 * errno-preserving, and never call either from here. */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* glibc's fortified recv() is an inline of its own */
#include "rxstamp.h"

#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static _Thread_local lg_rx *tls_rx;

static int64_t ts_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

void lg_rx_attach(lg_rx *rx)
{
    if (rx) {
        rx->fd = rx->drained_fd = -1;
        rx->t_ns = -1;
        lg_rx_clock(rx);
    }
    tls_rx = rx;
}

void lg_rx_clock(lg_rx *rx)
{
    struct timespec m0, rt, m1;
    clock_gettime(CLOCK_MONOTONIC, &m0);
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &m1);
    rx->rt_minus_mono = ts_ns(&rt) - (ts_ns(&m0) + ts_ns(&m1)) / 2;
}

int lg_rx_enable(int fd)
{
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
}

int lg_rx_keep_on(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && lg_rx_enable(fd) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    lg_rx *rx = tls_rx;
    if (!rx)
        return recvfrom(fd, buf, len, flags, NULL, NULL);
    union {
        char b[CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(64)];
        struct cmsghdr align;
    } cb;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof cb.b};
    ssize_t n = recvmsg(fd, &m, flags);
    if (n <= 0 || (flags & MSG_PEEK))
        return n; /* errno as recvmsg left it; a peek consumes nothing */
    rx->fd = fd;
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
    lg_rx *rx = tls_rx;
    if (rx && nfds == 1 && timeout_ms == 0 && fds[0].fd >= 0 && fds[0].fd == rx->drained_fd &&
        !(fds[0].events & ~(POLLIN | POLLRDNORM | POLLRDBAND | POLLPRI))) {
        fds[0].revents = 0;
        return 0; /* emptied by the read just made (see rxstamp.h) */
    }
    struct timespec ts = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    return ppoll(fds, nfds, timeout_ms < 0 ? NULL : &ts, NULL);
}
#pragma GCC diagnostic pop
