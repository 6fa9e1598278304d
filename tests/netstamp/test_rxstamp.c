/* test_rxstamp.c: netstamp's recv() (netstamp/netstamp.c) on real loopback TCP
 * sockets: bytes read 100 ms after they were written carry the time of the
 * write, not of the read; a read of two writes carries the later one; a
 * thread that has not attached, a socket without stamping and an empty
 * non-blocking socket leave the stamp alone and behave as plain recv(). The
 * bounds are the clock readings around each write() (and 1 ms for the
 * estimate of the realtime-to-monotonic offset): no margin for load.
 * And netstamp's poll(): a zero-timeout poll of the socket a read has just
 * emptied answers "nothing" without the kernel; any other goes to it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "netstamp.h"
#include "testutil.h"

/* The realtime -> monotonic offset is estimated; it is good to microseconds. */
#define SLACK_NS 1000000LL

typedef struct pair {
    int rd, wr; /* client (reads, stamped when enabled) and server side */
} pair;

static int pair_open(pair *p, int stamped)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int on = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    p->rd = p->wr = -1;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &al))
        goto fail;
    p->rd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->rd < 0 || (stamped && ns_rx_enable(p->rd)) || connect(p->rd, (struct sockaddr *)&a, sizeof a))
        goto fail;
    p->wr = accept(l, NULL, NULL);
    if (p->wr < 0 || setsockopt(p->wr, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on))
        goto fail;
    close(l);
    return 0;
fail:
    CHECK(0, "loopback pair: %s", strerror(errno));
    if (l >= 0)
        close(l);
    return -1;
}

static void pair_close(pair *p)
{
    close(p->rd);
    close(p->wr);
}

/* Waits (5 s at most) until fd holds n bytes to read. The stamp is taken in
 * write(), but a busy host may defer the softirq that puts the packet in the
 * reader's socket past the sleeps below; FIONREAD is neither recv() nor
 * poll(), so it leaves the stamp and the emptied mark alone. */
static void wait_bytes(int fd, int n)
{
    int64_t end = ll_now_ns() + 5000000000LL;
    int have = 0;
    while (ioctl(fd, FIONREAD, &have) == 0 && have < n && ll_now_ns() < end)
        usleep(1000);
    CHECK(have >= n, "%d bytes arrived in 5 s, want %d", have, n);
}

/* write() s, with the clock read just before and just after it. */
static void timed_write(int fd, const char *s, int64_t *before, int64_t *after)
{
    *before = ll_now_ns();
    CHECK(write(fd, s, strlen(s)) == (ssize_t)strlen(s), "write: %s", strerror(errno));
    *after = ll_now_ns();
}

static void test_late_read(void)
{
    pair p;
    ns_rx rx;
    char buf[64];
    int64_t b0, a0, b1, a1;
    if (pair_open(&p, 1))
        return;
    ns_rx_attach(&rx);
    /* one write, read 100 ms later */
    timed_write(p.wr, "data: one\n\n", &b0, &a0);
    ll_sleep_until_ns(a0 + 100000000);
    wait_bytes(p.rd, 11);
    int64_t t_before = ll_now_ns();
    ssize_t n = recv(p.rd, buf, sizeof buf, 0);
    int64_t t_read = ll_now_ns();
    CHECK(n == 11 && memcmp(buf, "data: one\n\n", 11) == 0, "read the bytes (%zd)", n);
    CHECK(rx.fd == p.rd && rx.t_ns >= 0, "a stamp, naming its socket (fd %d, want %d; t %lld)", rx.fd, p.rd,
          (long long)rx.t_ns);
    CHECK(rx.read_at_ns >= t_before && rx.read_at_ns <= t_read, "read_at_ns is the clock at the read");
    CHECK(rx.t_ns >= b0 - SLACK_NS && rx.t_ns <= a0 + SLACK_NS,
          "stamp within the write: %+.3f ms from its start, write took %.3f ms", (double)(rx.t_ns - b0) / 1e6,
          (double)(a0 - b0) / 1e6);
    CHECK(t_read - rx.t_ns >= 90000000, "the read came %.3f ms after the stamp", (double)(t_read - rx.t_ns) / 1e6);

    /* two writes 40 ms apart, one read: the later packet's time (never the earlier) */
    timed_write(p.wr, "data: a\n\n", &b0, &a0);
    ll_sleep_until_ns(a0 + 40000000);
    timed_write(p.wr, "data: b\n\n", &b1, &a1);
    ll_sleep_until_ns(a1 + 20000000);
    wait_bytes(p.rd, 18);
    n = recv(p.rd, buf, sizeof buf, 0);
    CHECK(n == 18 && rx.t_ns >= 0, "both writes in one read (%zd), stamped", n);
    CHECK(rx.t_ns >= b1 - SLACK_NS && rx.t_ns <= a1 + SLACK_NS,
          "a read of two writes takes the later: %+.3f ms from the second write",
          (double)(rx.t_ns - b1) / 1e6);

    /* an empty non-blocking socket: plain -1/EAGAIN, the stamp kept */
    int64_t kept = rx.t_ns;
    CHECK(fcntl(p.rd, F_SETFL, fcntl(p.rd, F_GETFL) | O_NONBLOCK) == 0, "non-blocking");
    errno = 0;
    n = recv(p.rd, buf, sizeof buf, 0);
    CHECK(n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK), "empty socket: %zd, %s", n, strerror(errno));
    CHECK(rx.t_ns == kept && rx.fd == p.rd, "nothing read: the stamp is unchanged");

    /* a peek returns the bytes and consumes nothing: the stamp is left alone */
    timed_write(p.wr, "xy", &b0, &a0);
    ll_sleep_until_ns(a0 + 5000000);
    wait_bytes(p.rd, 2);
    n = recv(p.rd, buf, sizeof buf, MSG_PEEK);
    CHECK(n == 2 && rx.t_ns == kept, "peek: %zd bytes, stamp unchanged", n);
    n = recv(p.rd, buf, sizeof buf, 0);
    CHECK(n == 2 && rx.t_ns >= b0 - SLACK_NS && rx.t_ns <= a0 + SLACK_NS, "then the read stamps them");
    ns_rx_attach(NULL);
    pair_close(&p);
}

/* A socket the kernel was not asked to stamp: the data, and no stamp. */
static void test_unstamped_socket(void)
{
    pair p;
    ns_rx rx;
    char buf[16];
    int64_t b, a;
    if (pair_open(&p, 0))
        return;
    ns_rx_attach(&rx);
    timed_write(p.wr, "hello", &b, &a);
    ssize_t n = recv(p.rd, buf, sizeof buf, 0);
    CHECK(n == 5 && rx.fd == p.rd && rx.t_ns == -1, "unstamped socket: %zd bytes, t %lld", n, (long long)rx.t_ns);
    ns_rx_attach(NULL);
    pair_close(&p);
}

typedef struct other {
    int fd;
    ssize_t n;
    char buf[16];
} other;

static void *other_thread(void *arg)
{
    other *o = arg;
    o->n = recv(o->fd, o->buf, sizeof o->buf, 0); /* no ns_rx on this thread */
    return NULL;
}

/* Attached on this thread only: another thread's recv() is plain. */
static void test_other_thread(void)
{
    pair p;
    ns_rx rx;
    int64_t b, a;
    if (pair_open(&p, 1))
        return;
    ns_rx_attach(&rx);
    timed_write(p.wr, "abc", &b, &a);
    other o = {.fd = p.rd, .n = -2};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &o) == 0, "thread");
    pthread_join(th, NULL);
    CHECK(o.n == 3 && memcmp(o.buf, "abc", 3) == 0, "the other thread read the bytes (%zd)", o.n);
    CHECK(rx.fd == -1 && rx.t_ns == -1, "and left this thread's stamp alone (fd %d)", rx.fd);
    ns_rx_attach(NULL);
    pair_close(&p);
}

static int poll_in(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    return n == 1 && (p.revents & POLLIN) ? 1 : n;
}

static void test_poll_after_drain(void)
{
    pair p;
    ns_rx rx;
    char buf[64];
    int64_t b, a;
    if (pair_open(&p, 1))
        return;
    ns_rx_attach(&rx);
    timed_write(p.wr, "abc", &b, &a);
    ll_sleep_until_ns(a + 5000000);
    wait_bytes(p.rd, 3);
    CHECK(recv(p.rd, buf, sizeof buf, 0) == 3 && rx.drained_fd == p.rd, "a short read marks its socket emptied");
    timed_write(p.wr, "def", &b, &a);
    ll_sleep_until_ns(a + 5000000);
    wait_bytes(p.rd, 3);
    CHECK(poll_in(p.rd) == 0, "zero-timeout poll right after: nothing (no system call)");
    struct pollfd pw = {.fd = p.rd, .events = POLLIN | POLLOUT};
    CHECK(poll(&pw, 1, 0) == 1 && (pw.revents & POLLIN), "a poll for more than reading goes to the kernel");
    struct pollfd pt = {.fd = p.rd, .events = POLLIN};
    CHECK(poll(&pt, 1, 10) == 1 && (pt.revents & POLLIN), "a poll with a timeout goes to the kernel");
    rx.drained_fd = -1; /* the worker's next curl call (worker.c drive) */
    CHECK(poll_in(p.rd) == 1, "next call: the kernel says readable");
    /* a read that fills the buffer does not mark the socket: more may wait */
    CHECK(recv(p.rd, buf, 2, 0) == 2 && rx.drained_fd == -1 && poll_in(p.rd) == 1,
          "a full read leaves poll to the kernel");
    CHECK(recv(p.rd, buf, sizeof buf, 0) == 1 && rx.drained_fd == p.rd, "the rest, short");
    ns_rx_attach(NULL);
    timed_write(p.wr, "g", &b, &a);
    ll_sleep_until_ns(a + 5000000);
    wait_bytes(p.rd, 1);
    CHECK(poll_in(p.rd) == 1, "not attached: every poll goes to the kernel");
    pair_close(&p);
}

int main(void)
{
    /* as a run does (loadgen/run.c): stamping on, and seen to be, first */
    CHECK(ns_rx_keep_on() >= 0, "the keeper socket");
    test_late_read();
    test_unstamped_socket();
    test_other_thread();
    test_poll_after_drain();
    TEST_MAIN_END();
}
