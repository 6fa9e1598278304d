/* test_engine_fdlimit.c: an engine whose open-file limit is below its
 * connection limit answers the connections past the limit at once (503 with
 * a JSON error and "Connection: close", then the socket closes) instead of
 * leaving them unanswered in the listen backlog while idle keep-alive
 * connections hold the descriptors; it serves new connections again once
 * descriptors come back, and its start-up warning says what happens.
 *
 * The engine runs in a child process with RLIMIT_NOFILE lowered, soft and
 * hard (eng_start raises the soft limit to the hard one). The parent speaks
 * plain HTTP/1.1 on raw sockets so that each connection stays open. Every
 * wait is bounded (ANSWER_MS, far above the milliseconds an answer takes on
 * a busy machine): before the fix the first connection past the limit got no
 * answer at all. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

#define FD_LIMIT 128
#define N_CONNS (FD_LIMIT + 40) /* more connections than the child has descriptors */
#define ANSWER_MS 10000

/* The child: an engine under FD_LIMIT descriptors, stderr into log_path;
 * writes its port to port_fd and runs until stop_fd reads end-of-file. */
static void run_child(int port_fd, int stop_fd, const char *log_path)
{
    FILE *log = freopen(log_path, "w", stderr);
    struct rlimit rl = {FD_LIMIT, FD_LIMIT};
    eng_config c;
    eng_engine *e = NULL;
    char err[256];
    eng_config_default(&c);
    if (!log || setrlimit(RLIMIT_NOFILE, &rl) != 0 ||
        eng_parse_spec("law=1,port=0,max_connections=256", &c, err, sizeof err) != 0 ||
        eng_start(&c, &e, err, sizeof err) != 0) {
        fprintf(stderr, "child: could not start the engine\n");
        _exit(3);
    }
    int port = eng_port(e);
    if (write(port_fd, &port, sizeof port) != (ssize_t)sizeof port)
        _exit(4);
    char x;
    while (read(stop_fd, &x, 1) < 0 && errno == EINTR)
        ;
    eng_stop(e);
    eng_config_free(&c);
    fclose(log);
    exit(0);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* tc_read_answer within ANSWER_MS; *closed: the peer closed with an
 * end-of-file (a reset is not counted as the engine's close). */
static size_t read_answer(int fd, char *buf, size_t cap, int *closed)
{
    size_t n = tc_read_answer(fd, buf, cap, ANSWER_MS, closed);
    *closed = *closed == 1;
    return n;
}

/* A connection to the engine with one GET /health sent: the socket, or -1. */
static int connect_health(int port)
{
    static const char req[] = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The HTTP status at the head of buf; 0 when there is none. */
static int status_of(const char *buf)
{
    int st = 0;
    return sscanf(buf, "HTTP/1.%*d %d", &st) == 1 ? st : 0;
}

int main(void)
{
    char log_path[] = "/tmp/loadlaw-fdlimit-log-XXXXXX";
    int log_fd = mkstemp(log_path);
    int port_pipe[2], stop_pipe[2];
    if (log_fd < 0 || pipe(port_pipe) != 0 || pipe(stop_pipe) != 0)
        return 1;
    close(log_fd);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(port_pipe[0]);
        close(stop_pipe[1]);
        run_child(port_pipe[1], stop_pipe[0], log_path);
    }
    close(port_pipe[1]);
    close(stop_pipe[0]);
    int port = 0;
    struct pollfd pp = {.fd = port_pipe[0], .events = POLLIN};
    if (poll(&pp, 1, 30000) != 1 || read(port_pipe[0], &port, sizeof port) != (ssize_t)sizeof port) {
        fprintf(stderr, "the engine did not start (see %s)\n", log_path);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }

    /* Open connections one at a time and keep every served one open (idle,
     * keep-alive: it holds a descriptor in the engine). */
    int kept[N_CONNS], n_kept = 0, n_503 = 0, n_silent = 0, n_bad = 0, n_open = 0;
    int64_t slowest_ms = 0;
    char buf[4096];
    for (int i = 0; i < N_CONNS; i++) {
        int fd = connect_health(port);
        if (fd < 0) {
            n_bad++;
            continue;
        }
        int closed;
        int64_t t0 = now_ms();
        read_answer(fd, buf, sizeof buf, &closed);
        int64_t dt = now_ms() - t0;
        slowest_ms = dt > slowest_ms ? dt : slowest_ms;
        int st = status_of(buf);
        if (st == 200) {
            kept[n_kept++] = fd;
            continue;
        }
        if (st == 503) {
            n_503++;
            const char *body = strstr(buf, "\r\n\r\n");
            cJSON *o = body ? cJSON_Parse(body + 4) : NULL;
            const char *msg = ll_json_str(cJSON_GetObjectItemCaseSensitive(o, "error"), "message", "");
            if (!strstr(buf, "Connection: close") || !strstr(msg, "open-file limit"))
                n_bad++;
            cJSON_Delete(o);
            /* and the engine lets the descriptor go */
            if (!closed) {
                size_t more = read_answer(fd, buf, sizeof buf, &closed);
                n_open += !closed || more > 0;
            }
        } else {
            n_silent += buf[0] == '\0';
            n_bad += buf[0] != '\0';
        }
        close(fd);
        if (n_silent > 0)
            break; /* the bug this test is for: no point waiting for the rest */
    }
    printf("served %d, 503 %d, unanswered %d, other %d, left open %d; slowest answer %lld ms\n",
           n_kept, n_503, n_silent, n_bad, n_open, (long long)slowest_ms);
    CHECK(n_silent == 0, "every connection is answered within %d ms (%d were not)", ANSWER_MS, n_silent);
    CHECK(n_bad == 0, "every refusal is a 503 with a JSON error naming the open-file limit and "
                      "Connection: close (%d were not)", n_bad);
    CHECK(n_open == 0, "every refused connection is closed by the engine (%d were not)", n_open);
    CHECK(n_kept >= FD_LIMIT / 2 && n_kept < FD_LIMIT, "the engine served %d connections, below its "
          "limit of %d descriptors", n_kept, FD_LIMIT);
    CHECK(n_503 > 0 && n_kept + n_503 == N_CONNS, "the rest were refused: %d + %d of %d", n_kept, n_503,
          N_CONNS);

    /* Descriptors come back: a new connection is served again. */
    for (int i = 0; i < 8 && n_kept > 0; i++)
        close(kept[--n_kept]);
    int served_again = 0;
    for (int64_t end = now_ms() + ANSWER_MS; !served_again && now_ms() < end;) {
        int fd = connect_health(port), closed;
        if (fd >= 0) {
            read_answer(fd, buf, sizeof buf, &closed);
            served_again = status_of(buf) == 200;
            close(fd);
        }
        if (!served_again)
            usleep(50 * 1000); /* the engine notices the closed ones on its next pass */
    }
    CHECK(served_again, "served again once connections closed");

    while (n_kept > 0)
        close(kept[--n_kept]);
    close(stop_pipe[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the engine stopped cleanly (status %d)", status);
    char *log = NULL;
    char err[256];
    if (ll_read_file(log_path, &log, NULL, err, sizeof err) != 0)
        log = NULL;
    char want[64];
    snprintf(want, sizeof want, "open-file limit (%d)", FD_LIMIT);
    CHECK(log && strstr(log, want) && strstr(log, "answered 503 and its connection closed"),
          "the start-up warning says what happens: %s", log ? log : "(no log)");
    free(log);
    unlink(log_path);
    TEST_MAIN_END();
}
