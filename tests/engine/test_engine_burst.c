/* test_engine_burst.c: a burst of new streams on a fresh engine is served.
 *
 * 256 raw sockets connect to a just-started engine, then each sends one
 * streaming request at once (Connection: close), as a load generator's first
 * level does. With libmicrohttpd 0.9.75's epoll loop (no MHD_USE_TURBO) about
 * one such burst in three was never handed to the access handler: no step
 * ran and nothing was sent until some other connection woke the loop, or the
 * 120 s idle timeout. Here, up to 10
 * fresh engines; each burst must finish (every stream ends with [DONE] after
 * its 16 tokens) inside a bound that only a stall reaches: the streams take
 * about 0.1 s, the bound is 20 s.
 *
 * The cause (server.c, mhd_nudge_main): when exactly 128·k sockets turn
 * readable at once, MHD's epoll loop calls epoll_wait again after a full
 * batch with the timeout it computed before the batch, and sleeps with those
 * connections on its ready list. exact_batch makes that happen every time:
 * 128 idle connections, then 128 requests written while no engine thread can
 * run (engine and client on one CPU, the engine's threads SCHED_IDLE for the
 * writes: an idle-policy thread never preempts a normal one, and lowering a
 * policy needs no privilege), so the engine's next epoll_wait finds exactly
 * 128 ready sockets. Without the engine's wake-up it stalled every time;
 * with it, every request is served within a step or two. */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tclient.h"
#include "testutil.h"

#define N_CONN 256
#define N_TOK 16
#define BOUND_S 20

typedef struct conn {
    int fd;
    size_t sent;
    int done;
    int tokens;      /* "data: {" events seen (role, tokens, usage) */
    int got_done;    /* "data: [DONE]" seen */
    char tail[16];   /* the last bytes of the previous read, to find markers cut across reads */
} conn;

static int port_of(const char *url)
{
    const char *c = strrchr(url, ':');
    return c ? atoi(c + 1) : -1;
}

/* Count "data: {" events and see "data: [DONE]" in buf, with the previous
 * read's tail in front so a marker cut across two reads counts once (a match
 * counts only if it ends inside the new bytes). */
static void scan(conn *c, const char *buf, size_t n)
{
    static const char ev[] = "data: {";
    char tmp[16 + 65536];
    size_t t = strlen(c->tail);
    memcpy(tmp, c->tail, t);
    memcpy(tmp + t, buf, n);
    tmp[t + n] = '\0';
    for (const char *p = tmp; (p = strstr(p, ev)); p++)
        if (p + sizeof ev - 1 > tmp + t)
            c->tokens++;
    if (strstr(tmp, "data: [DONE]"))
        c->got_done = 1;
    size_t keep = t + n < sizeof c->tail - 1 ? t + n : sizeof c->tail - 1;
    memmove(c->tail, tmp + t + n - keep, keep);
    c->tail[keep] = '\0';
}

/* Read the n connections until each has ended (or BOUND_S after t0), each
 * read scanned; *first_s (may be NULL): seconds from t0 to the first byte. */
static void drain(conn *c, struct pollfd *pf, int n_conn, int64_t t0, double *first_s)
{
    int64_t end = t0 + (int64_t)BOUND_S * 1000000000LL;
    static char buf[65536];
    int open = 0;
    for (int i = 0; i < n_conn; i++)
        open += !c[i].done;
    while (open > 0 && ll_now_ns() < end) {
        int np = 0;
        for (int i = 0; i < n_conn; i++)
            if (!c[i].done)
                pf[np++] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        if (poll(pf, (nfds_t)np, 200) < 0 && errno != EINTR)
            break;
        for (int k = 0, i = 0; k < np; k++) {
            while (c[i].done || c[i].fd != pf[k].fd)
                i++;
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(c[i].fd, buf, sizeof buf);
            if (n > 0) {
                if (first_s && *first_s < 0)
                    *first_s = (double)(ll_now_ns() - t0) / 1e9;
                scan(&c[i], buf, (size_t)n);
            } else if (n == 0 || errno != EAGAIN) {
                c[i].done = 1;
                open--;
            }
        }
    }
}

/* The client side of one burst, in its own process (as a load generator
 * is): streams that ended with [DONE] and carried their tokens. */
static int client(int port, int round)
{
    /* a prompt of 190 words, as `loadlaw sweep --url` sends by default */
    char req[4096], body[2048], words[1600] = "";
    for (int w = 0; w < 190; w++)
        strcat(words, "word ");
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"burst %d %s\"}],\"max_tokens\":%d,"
             "\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true,"
             "\"continuous_usage_stats\":true}}",
             round, words, N_TOK);
    int rlen = snprintf(req, sizeof req,
                        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                        strlen(body), body);
    conn *c = calloc(N_CONN, sizeof *c);
    struct pollfd *pf = calloc(N_CONN, sizeof *pf);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    /* every connection first (the engine accepts them from its backlog while
     * this goes on), then every request: they arrive together */
    for (int i = 0; i < N_CONN; i++) {
        int one = 1;
        c[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c[i].fd < 0 || setsockopt(c[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
            connect(c[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            c[i].done = 1;
    }
    for (int i = 0; i < N_CONN; i++)
        if (!c[i].done && write(c[i].fd, req, (size_t)rlen) != rlen)
            c[i].done = 1;
    drain(c, pf, N_CONN, ll_now_ns(), NULL);
    int ok = 0, tok_ok = 0;
    for (int i = 0; i < N_CONN; i++) {
        ok += c[i].got_done;
        tok_ok += c[i].got_done && c[i].tokens >= N_TOK;
        if (c[i].fd >= 0)
            close(c[i].fd);
    }
    free(pf);
    free(c);
    return tok_ok;
}

/* One burst against a fresh engine. The client is a forked child: in one
 * process with the engine, its threads never raced the engine's accept loop
 * the way a separate client's do, and the stall did not show. */
static int burst(int round)
{
    eng_engine *e = tc_start("law=4+0n,max_running=256");
    int port = port_of(eng_url(e)), pfd[2], ok = -1;
    if (pipe(pfd) != 0) {
        eng_stop(e);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        int n = client(port, round);
        _exit(write(pfd[1], &n, sizeof n) == (ssize_t)sizeof n ? 0 : 1);
    }
    close(pfd[1]);
    if (pid > 0 && read(pfd[0], &ok, sizeof ok) != (ssize_t)sizeof ok)
        ok = -1;
    close(pfd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    eng_stop(e);
    return ok;
}

/* Every thread of process pid to policy (SCHED_IDLE or SCHED_OTHER): how
 * many were set. */
static int set_policy(pid_t pid, int policy)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    struct dirent *de;
    struct sched_param sp = {.sched_priority = 0};
    int n = 0;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            n += sched_setscheduler((pid_t)atoi(de->d_name), policy, &sp) == 0;
    if (d)
        closedir(d);
    return n;
}

/* The client of exact_batch, in a forked child on the engine's CPU: 128
 * connections, the engine idle, then 128 requests written while the
 * engine's threads cannot run. */
#define N_EXACT 128
static int exact_client(int port, pid_t engine_pid, double *first_s)
{
    char req[512];
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"exact\"}],\"max_tokens\":4,"
                       "\"ignore_eos\":true,\"stream\":true}";
    int rlen = snprintf(req, sizeof req,
                        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                        strlen(body), body);
    conn c[N_EXACT];
    struct pollfd pf[N_EXACT];
    memset(c, 0, sizeof c);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    for (int i = 0; i < N_EXACT; i++) {
        int one = 1;
        c[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c[i].fd < 0 || setsockopt(c[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
            connect(c[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            return -1;
    }
    usleep(300000); /* accepted, read once (nothing yet), in MHD's epoll set; the loop asleep */
    int idled = set_policy(engine_pid, SCHED_IDLE);
    int64_t t0 = ll_now_ns();
    int wrote = 0;
    for (int i = 0; i < N_EXACT; i++)
        wrote += write(c[i].fd, req, (size_t)rlen) == rlen;
    set_policy(engine_pid, SCHED_OTHER);
    if (wrote != N_EXACT)
        return -1;
    if (idled < 2)
        return -2; /* the policy could not be lowered (a seccomp filter): no exact batch */
    *first_s = -1;
    drain(c, pf, N_EXACT, t0, first_s);
    int ok = 0;
    for (int i = 0; i < N_EXACT; i++) {
        ok += c[i].got_done;
        close(c[i].fd);
    }
    return ok;
}

static void exact_batch(void)
{
    /* one CPU for the engine and (inherited by fork) its client */
    cpu_set_t was, one;
    int pinned = sched_getaffinity(0, sizeof was, &was) == 0;
    if (pinned) {
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &was)) {
                CPU_SET(c, &one);
                break;
            }
        pinned = sched_setaffinity(0, sizeof one, &one) == 0;
    }
    eng_engine *e = tc_start("law=1+0n,max_running=256");
    int port = port_of(eng_url(e)), pfd[2];
    struct { int ok; double first_s; } res = {-1, -1};
    CHECK(pipe(pfd) == 0, "pipe");
    pid_t me = getpid(), pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        res.ok = exact_client(port, me, &res.first_s);
        _exit(write(pfd[1], &res, sizeof res) == (ssize_t)sizeof res ? 0 : 1);
    }
    close(pfd[1]);
    if (pid > 0 && read(pfd[0], &res, sizeof res) != (ssize_t)sizeof res)
        res.ok = -1;
    close(pfd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    eng_stop(e);
    if (pinned)
        sched_setaffinity(0, sizeof was, &was);
    if (res.ok == -2) {
        printf("exact batch of %d: not run: sched_setscheduler(SCHED_IDLE) refused here, so the requests "
               "could not be made to arrive together (the random bursts below still run)\n", N_EXACT);
        return;
    }
    CHECK(res.ok == N_EXACT, "exactly %d requests arriving at once on idle connections: %d finished within %d s "
          "(first byte after %.3f s)", N_EXACT, res.ok, BOUND_S, res.first_s);
    if (res.ok == N_EXACT)
        printf("exact batch of %d: all served, first byte after %.3f s\n", N_EXACT, res.first_s);
}

int main(void)
{
    exact_batch();
    /* A stall came about once in 15 bursts of this test before MHD_USE_TURBO,
     * about once in 300 with it; exact_batch is the deterministic case of the
     * same lapse (docs/benchmarks.md, "A burst on a fresh server"). */
    for (int round = 0; round < 10 && tu_fail == 0; round++) {
        int64_t t0 = ll_now_ns();
        int ok = burst(round);
        CHECK(ok == N_CONN, "round %d: %d of %d streams of a burst on a fresh engine finished with their tokens "
              "within %d s (took %.2f s)",
              round, ok, N_CONN, BOUND_S, (double)(ll_now_ns() - t0) / 1e9);
    }
    TEST_MAIN_END();
}
