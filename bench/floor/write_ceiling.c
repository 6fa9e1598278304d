/* write_ceiling.c: the ceiling over the engine's token events per second. One writer thread
 * writes one event-sized SSE frame per write() to each of K loopback TCP connections in turn
 * (what a server that writes every token event on its own costs at the least: one syscall and
 * one TCP segment per event), and one reader thread drains them through epoll. Events/s is
 * frames fully received per second of wall time. Prints figures; never pass/fail.
 *
 * DESIGN: two threads, as the engine's server and a client would use on a 2-core machine. The
 * writer's sockets are blocking, so a reader that falls behind slows the writer through the
 * socket buffers rather than letting bytes pile up; TCP_NODELAY on both ends, as a streaming
 * server sets it, so each write() leaves as its own segment.
 *
 *   write_ceiling [--conns 256] [--frame-bytes 330] [--seconds 3]
 * Output: one line of key=value figures.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor_common.h"

typedef struct wc_ctx {
    int conns, frame_bytes;
    double seconds;
    int *wfd, *rfd;
    atomic_int stop;
    long written;
    unsigned long long read_bytes;
    double cpu_w_s;
} wc_ctx;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *writer_main(void *p)
{
    wc_ctx *w = p;
    char *frame = malloc((size_t)w->frame_bytes);
    if (!frame)
        return NULL;
    /* An SSE frame of the asked size: "data: {...}\n\n". */
    memset(frame, 'x', (size_t)w->frame_bytes);
    memcpy(frame, "data: {", 7);
    frame[w->frame_bytes - 3] = '}';
    frame[w->frame_bytes - 2] = '\n';
    frame[w->frame_bytes - 1] = '\n';
    double c0 = thread_cpu_s(), t_end = floor_now_s() + w->seconds;
    long n = 0;
    while (floor_now_s() < t_end) {
        for (int i = 0; i < w->conns; i++) {
            if (write(w->wfd[i], frame, (size_t)w->frame_bytes) != w->frame_bytes) {
                fprintf(stderr, "write_ceiling: write: %s\n", strerror(errno));
                goto out;
            }
            n++;
        }
    }
out:
    w->written = n;
    w->cpu_w_s = thread_cpu_s() - c0;
    for (int i = 0; i < w->conns; i++)
        shutdown(w->wfd[i], SHUT_WR);
    free(frame);
    return NULL;
}

/* Options as a table: each takes one number, checked whole with strtod. 0, or 2
 * after a message (an exit status). */
static int parse_args(int argc, char **argv, wc_ctx *w)
{
    double conns = w->conns, frame_bytes = w->frame_bytes;
    struct {
        const char *name;
        double *v;
    } opt[] = {{"--conns", &conns}, {"--frame-bytes", &frame_bytes}, {"--seconds", &w->seconds}};
    for (int i = 1; i < argc; i += 2) {
        size_t k = 0;
        while (k < sizeof opt / sizeof opt[0] && strcmp(argv[i], opt[k].name) != 0)
            k++;
        char *end = NULL;
        errno = 0;
        double v = (k < sizeof opt / sizeof opt[0] && i + 1 < argc) ? strtod(argv[i + 1], &end) : 0;
        if (!end || errno || *end || end == argv[i + 1] || v < 0 || v > 1e9) {
            fprintf(stderr, "write_ceiling: bad option or value: %s\n", argv[i]);
            return 2;
        }
        *opt[k].v = v;
    }
    w->conns = (int)conns;
    w->frame_bytes = (int)frame_bytes;
    if (w->conns <= 0 || w->frame_bytes < 16 || w->seconds <= 0) {
        fprintf(stderr, "usage: write_ceiling [--conns N] [--frame-bytes B>=16] [--seconds S]\n");
        return 2;
    }
    return 0;
}

/* C streams need C descriptors: the soft open-file limit raised to the hard one. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* K loopback connections, each a writer end (wfd) and a reader end (rfd) in
 * the epoll set *ep (created here): 0, or 1 after a message. */
static int connect_pairs(wc_ctx *w, int *ep)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (!w->wfd || !w->rfd || ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(ls, 4096) != 0 || getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "write_ceiling: listen: %s\n", strerror(errno));
        return 1;
    }
    *ep = epoll_create1(0);
    for (int i = 0; i < w->conns; i++) {
        w->rfd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (w->rfd[i] < 0 || connect(w->rfd[i], (struct sockaddr *)&sa, sizeof sa) != 0 ||
            (w->wfd[i] = accept(ls, NULL, NULL)) < 0) {
            fprintf(stderr, "write_ceiling: connection %d: %s\n", i, strerror(errno));
            return 1;
        }
        setsockopt(w->wfd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(w->rfd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(*ep, EPOLL_CTL_ADD, w->rfd[i], &ev) != 0) {
            fprintf(stderr, "write_ceiling: epoll_ctl: %s\n", strerror(errno));
            return 1;
        }
    }
    return 0;
}

/* The reader: drains every connection until the writer has shut them all, or
 * 10 s pass without data. The number of reads that returned data. */
static long drain(wc_ctx *w, int ep, char *buf)
{
    int open_n = w->conns;
    long reads = 0;
    struct epoll_event evs[256];
    while (open_n > 0) {
        int n = epoll_wait(ep, evs, 256, 10000);
        if (n <= 0)
            break;
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            ssize_t r = read(w->rfd[i], buf, 65536);
            if (r > 0) {
                w->read_bytes += (unsigned long long)r;
                reads++;
            } else if (r == 0 || errno != EAGAIN) {
                epoll_ctl(ep, EPOLL_CTL_DEL, w->rfd[i], NULL);
                open_n--;
            }
        }
    }
    return reads;
}

static void print_figures(const wc_ctx *w, long frames_read, long reads, double wall, double cpu_r)
{
    printf("conns=%d frame_bytes=%d frames_written=%ld frames_read=%ld wall_s=%.3f events_per_s=%.0f "
           "MB_per_s=%.1f writer_cpu_us_per_event=%.3f reader_cpu_us_per_event=%.3f frames_per_read=%.2f\n",
           w->conns, w->frame_bytes, w->written, frames_read, wall, (double)frames_read / wall,
           (double)w->read_bytes / wall / 1e6, w->cpu_w_s / (double)w->written * 1e6,
           cpu_r / (double)frames_read * 1e6, (double)frames_read / (double)reads);
}

int main(int argc, char **argv)
{
    wc_ctx w = {.conns = 256, .frame_bytes = 330, .seconds = 3};
    int prc = parse_args(argc, argv, &w);
    if (prc)
        return prc;
    raise_fd_limit();
    w.wfd = calloc((size_t)w.conns, sizeof *w.wfd);
    w.rfd = calloc((size_t)w.conns, sizeof *w.rfd);
    int ep = -1;
    if (connect_pairs(&w, &ep) != 0)
        return 1;
    char *buf = malloc(65536);
    pthread_t th;
    double t0 = floor_now_s();
    if (!buf || pthread_create(&th, NULL, writer_main, &w) != 0) {
        fprintf(stderr, "write_ceiling: cannot start the writer\n");
        return 1;
    }
    double c0 = thread_cpu_s();
    long reads = drain(&w, ep, buf);
    double wall = floor_now_s() - t0, cpu_r = thread_cpu_s() - c0;
    pthread_join(th, NULL);
    long frames_read = (long)(w.read_bytes / (unsigned long long)w.frame_bytes);
    print_figures(&w, frames_read, reads, wall, cpu_r);
    free(buf);
    return frames_read == w.written ? 0 : 1;
}
