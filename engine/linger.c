/* linger.c: a lingering close, as nginx's lingering_close and Apache's
 * lingering close do it, for a connection answered before its request body
 * was read (a declared body over max_body: 413; a missing key: 401).
 *
 * Why: libmicrohttpd stops reading a request it was given an early answer
 * for, sends the answer and closes the socket. Closing a TCP socket with
 * unread bytes in its receive queue makes the kernel send a reset, and a
 * client still writing its body then fails on its next write: a client that
 * writes the whole body before it reads (Python's http.client and requests,
 * most simple clients) never sees the 413 that explains why. Here the
 * connection's descriptor is duplicated when its answer is out (routes.c,
 * "request completed"), so MHD's close does not end the socket; the write
 * side is shut down (the client reads the answer, then end-of-file) and what
 * the client still sends is read and dropped until it closes or a deadline.
 *
 * Bounds: at most ENG_LINGER_MAX sockets linger at once (a further one is
 * closed at once, as MHD closes it) and each for at most ENG_LINGER_NS, so
 * a client cannot make the server read for it forever; a loopback client's
 * 100 MB takes well under a second.
 *
 * DESIGN: one thread waits in epoll on the lingering sockets and an eventfd
 * that eng_linger_add writes (MHD's thread), so a socket added while the
 * thread sleeps with nothing to do still gets its deadline. The slots are
 * guarded by mu; only this thread reads and closes the sockets. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

#define ENG_LINGER_MAX 16
#define ENG_LINGER_NS 5000000000LL /* 5 s a socket at most */
#define ENG_LINGER_WAKE ENG_LINGER_MAX /* epoll data of the eventfd */
/* Bytes read from one socket per wake-up, so one fast sender does not keep
 * the thread from the others' deadlines. */
#define ENG_LINGER_READ_BYTES (1 << 20)

struct eng_linger {
    pthread_mutex_t mu;
    int epfd, wake_fd;
    int fd[ENG_LINGER_MAX];        /* -1: free (under mu) */
    int64_t until_ns[ENG_LINGER_MAX];
    int n;                         /* slots in use (under mu) */
    atomic_int stop;
    pthread_t thread;
};

/* Close slot i's socket; caller holds mu. */
static void release_locked(eng_linger *l, int i)
{
    if (l->fd[i] < 0)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->fd[i], NULL);
    close(l->fd[i]);
    l->fd[i] = -1;
    l->n--;
}

/* Read and drop what slot i's client sent; release it at end-of-file or an
 * error. Only this thread closes a slot, so its socket stays open while it
 * is read without mu. */
static void drain(eng_linger *l, int i)
{
    char buf[64 * 1024];
    size_t got = 0;
    pthread_mutex_lock(&l->mu);
    int fd = l->fd[i];
    pthread_mutex_unlock(&l->mu);
    if (fd < 0)
        return;
    while (got < ENG_LINGER_READ_BYTES) {
        ssize_t k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k > 0) {
            got += (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        break; /* end-of-file (the client has all it needs) or an error */
    }
    if (got < ENG_LINGER_READ_BYTES) {
        pthread_mutex_lock(&l->mu);
        release_locked(l, i);
        pthread_mutex_unlock(&l->mu);
    }
}

/* Release the sockets past their deadline (all of them with everything):
 * 1 when some still linger. */
static int expire(eng_linger *l, int everything)
{
    int64_t now = ll_now_ns();
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < ENG_LINGER_MAX; i++)
        if (l->fd[i] >= 0 && (everything || now >= l->until_ns[i]))
            release_locked(l, i);
    int busy = l->n > 0;
    pthread_mutex_unlock(&l->mu);
    return busy;
}

static void *linger_main(void *arg)
{
    eng_linger *l = arg;
    struct epoll_event ev[ENG_LINGER_MAX + 1];
    int busy = 0;
    while (!atomic_load(&l->stop)) {
        /* with a deadline to watch, wake at least every 100 ms */
        int k = epoll_wait(l->epfd, ev, ENG_LINGER_MAX + 1, busy ? 100 : -1);
        if (k < 0 && errno != EINTR)
            break;
        for (int j = 0; j < k; j++) {
            uint64_t v;
            if (ev[j].data.u32 != ENG_LINGER_WAKE)
                drain(l, (int)ev[j].data.u32);
            else if (read(l->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN)
                return NULL;
        }
        busy = expire(l, 0);
    }
    return NULL;
}

int eng_linger_start(eng_linger **out, char *err, size_t errlen)
{
    eng_linger *l = calloc(1, sizeof *l);
    *out = NULL;
    if (!l) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    for (int i = 0; i < ENG_LINGER_MAX; i++)
        l->fd[i] = -1;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wake = {.events = EPOLLIN, .data.u32 = ENG_LINGER_WAKE};
    atomic_init(&l->stop, 0);
    if (l->epfd < 0 || l->wake_fd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake_fd, &wake) != 0)
        goto fail;
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        goto fail;
    if (pthread_create(&l->thread, NULL, linger_main, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        goto fail;
    }
    *out = l;
    return 0;
fail:
    ll_errf(err, errlen, "could not start the lingering-close thread: %s", strerror(errno));
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    if (l->epfd >= 0)
        close(l->epfd);
    free(l);
    return LL_ESYS;
}

static void wake(eng_linger *l)
{
    const uint64_t one = 1;
    /* a failed write is EAGAIN: a wake-up is pending already, all this asks */
    ssize_t w = write(l->wake_fd, &one, sizeof one);
    (void)w;
}

void eng_linger_add(eng_linger *l, int fd)
{
    if (!l || fd < 0)
        return;
    pthread_mutex_lock(&l->mu);
    int i = 0;
    while (i < ENG_LINGER_MAX && l->fd[i] >= 0)
        i++;
    int d = i < ENG_LINGER_MAX ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
    if (d >= 0 && (shutdown(d, SHUT_WR) != 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, d, &ev) != 0)) {
        close(d); /* the client has gone already: MHD's close is all it needs */
        d = -1;
    }
    if (d >= 0) {
        l->fd[i] = d;
        l->until_ns[i] = ll_now_ns() + ENG_LINGER_NS;
        l->n++;
    }
    pthread_mutex_unlock(&l->mu);
    if (d >= 0)
        wake(l);
}

void eng_linger_stop(eng_linger *l)
{
    if (!l)
        return;
    atomic_store(&l->stop, 1);
    wake(l);
    pthread_join(l->thread, NULL);
    expire(l, 1);
    pthread_mutex_destroy(&l->mu);
    close(l->wake_fd);
    close(l->epfd);
    free(l);
}
