/* test_engine_serve.c: the real `loadlaw serve` binary (argv[1]) stops cleanly
 * on a signal. It is started with fork/exec, its URL read from its stdout,
 * one request served, then SIGINT or SIGTERM sent: it must exit 0 and print
 * "stopped on SIG... after N steps" with N the steps that request took. A
 * failed backend step must end it on its own with exit 1.
 *
 * The cpu case is the one that matters: OpenBLAS starts threads before main
 * with signals unblocked, so a serve that masked SIGINT and sigwait-ed in
 * main would be killed by the signal (exit by signal, no stop line).
 * The 30 s bounds only keep a broken binary from hanging the suite; a
 * healthy one answers in milliseconds. */
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tclient.h"
#include "testutil.h"

#define BOUND_NS (30LL * 1000000000LL)

static const char *g_bin;

typedef struct served {
    pid_t pid;
    int out_fd, err_fd;
    char url[128];
} served;

/* Read from fd until a newline or the deadline; 0 when a line came. */
static int read_line(int fd, char *buf, size_t n, int64_t deadline_ns)
{
    size_t len = 0;
    while (len + 1 < n) {
        int64_t left_ms = (deadline_ns - ll_now_ns()) / 1000000;
        if (left_ms <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)left_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return -1;
        ssize_t k = read(fd, buf + len, 1);
        if (k <= 0)
            return -1;
        if (buf[len] == '\n') {
            buf[len] = '\0';
            return 0;
        }
        len++;
    }
    return -1;
}

/* Start `loadlaw serve --port 0 ARGS...`; ignore_int: start it with SIGINT
 * ignored, as a shell does for a background job. 0 once its URL is read. */
static int serve_start(served *s, char *const *args, int ignore_int)
{
    int out[2], errp[2];
    memset(s, 0, sizeof *s);
    s->pid = -1;
    if (pipe(out) != 0 || pipe(errp) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return -1;
    }
    char *argv[32] = {(char *)g_bin, "serve", "--port", "0"};
    int argc = 4;
    for (int i = 0; args[i] && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    s->pid = fork();
    if (s->pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(errp[1], STDERR_FILENO);
        close(out[0]); close(out[1]); close(errp[0]); close(errp[1]);
        signal(SIGINT, ignore_int ? SIG_IGN : SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(g_bin, argv);
        _exit(127);
    }
    close(out[1]);
    close(errp[1]);
    s->out_fd = out[0];
    s->err_fd = errp[0];
    CHECK(s->pid > 0, "fork: %s", strerror(errno));
    if (s->pid <= 0)
        return -1;
    int rc = read_line(s->out_fd, s->url, sizeof s->url, ll_now_ns() + BOUND_NS);
    CHECK(rc == 0 && strncmp(s->url, "http://127.0.0.1:", 17) == 0, "URL on stdout: '%s'", s->url);
    if (rc != 0) {
        /* Started but never said where it listens: do not leave it running. */
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    return rc;
}

/* Send sig, wait (bounded) for the exit; returns the wait status and the
 * stderr text in errbuf, or -1 if it had to be killed. */
static int serve_signal(served *s, int sig, char *errbuf, size_t n)
{
    int status = -1;
    kill(s->pid, sig);
    int64_t deadline = ll_now_ns() + BOUND_NS;
    pid_t w = 0;
    while ((w = waitpid(s->pid, &status, WNOHANG)) == 0 && ll_now_ns() < deadline)
        ll_sleep_until_ns(ll_now_ns() + 2000000);
    if (w != s->pid) {
        CHECK(0, "serve did not exit within 30 s of signal %d", sig);
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &status, 0);
        status = -1;
    }
    size_t len = 0;
    ssize_t k;
    while (len + 1 < n && (k = read(s->err_fd, errbuf + len, n - 1 - len)) > 0)
        len += (size_t)k;
    errbuf[len] = '\0';
    close(s->out_fd);
    close(s->err_fd);
    return status;
}

/* One non-streaming chat request of max_tokens; returns completion tokens. */
static int one_request(const served *s, int max_tokens)
{
    char url[192], body[256];
    snprintf(url, sizeof url, "%s/v1/chat/completions", s->url);
    snprintf(body, sizeof body,
             "{\"model\":\"loadlaw-synthetic\",\"max_tokens\":%d,\"ignore_eos\":true,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"one two three\"}]}", max_tokens);
    tc_resp r;
    tc_request("POST", url, body, -1, &r);
    CHECK(r.status == 200, "POST status %ld (curl %d)", r.status, r.curl_rc);
    int got = -1;
    const char *u = r.body.p ? strstr(r.body.p, "\"completion_tokens\":") : NULL;
    if (u)
        got = atoi(u + 20);
    tc_resp_free(&r);
    return got;
}

static void expect_clean_stop(const char *what, int status, const char *errtext, const char *sig_name,
                              int steps)
{
    char want[96];
    snprintf(want, sizeof want, "loadlaw serve: stopped on %s after %d steps", sig_name, steps);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s: exit %s %d", what, status != -1 && WIFSIGNALED(status) ? "by signal" : "status",
          status == -1 ? -1 : WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CHECK(strstr(errtext, want) != NULL, "%s: stderr has \"%s\":\n%s", what, want, errtext);
}

static void run_case(const char *what, char *const *args, int max_tokens, int sig)
{
    served s;
    char errtext[8192];
    if (serve_start(&s, args, 0) != 0)
        return;
    int got = one_request(&s, max_tokens);
    CHECK(got == max_tokens, "%s: %d completion tokens, want %d", what, got, max_tokens);
    /* one request alone: its first token ends the prefill step, then one
     * decode step per further token */
    int status = serve_signal(&s, sig, errtext, sizeof errtext);
    expect_clean_stop(what, status, errtext, sig == SIGINT ? "SIGINT" : "SIGTERM", max_tokens);
}

/* Started with SIGINT ignored (a background job), serve keeps ignoring it
 * and still stops on SIGTERM. */
static void ignored_sigint(void)
{
    char *args[] = {"--time-scale", "0.01", NULL};
    served s;
    char errtext[8192];
    if (serve_start(&s, args, 1) != 0)
        return;
    kill(s.pid, SIGINT);
    /* A request after the SIGINT was sent: served, so the SIGINT did nothing
     * (kill() makes the signal pending before it returns). */
    int got = one_request(&s, 4);
    CHECK(got == 4, "ignored SIGINT: still serving (%d tokens)", got);
    int status = serve_signal(&s, SIGTERM, errtext, sizeof errtext);
    expect_clean_stop("ignored SIGINT", status, errtext, "SIGTERM", 4);
}

/* A backend step that fails (fault_fail_step, a testing aid) ends serve on
 * its own: no signal, the reason on stderr, exit 1. */
static void failed_step(void)
{
    char *args[] = {"--time-scale", "0.01", "--fault-fail-step", "2", NULL};
    served s;
    char errtext[8192];
    if (serve_start(&s, args, 0) != 0)
        return;
    char url[192];
    snprintf(url, sizeof url, "%s/v1/chat/completions", s.url);
    tc_resp r;
    tc_request("POST", url, "{\"max_tokens\":5,\"ignore_eos\":true,"
                            "\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", -1, &r);
    CHECK(r.status != 200 || !r.body.p || !strstr(r.body.p, "\"completion_tokens\":5"),
          "failed step: request cut (%ld)", r.status);
    tc_resp_free(&r);
    /* signal 0 checks nothing and sends nothing: serve must exit by itself */
    int status = serve_signal(&s, 0, errtext, sizeof errtext);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1,
          "failed step: exit status 1 (%d)", status == -1 ? -1 : WEXITSTATUS(status));
    CHECK(strstr(errtext, "loadlaw serve: engine failed after 1 steps: backend synthetic step "
                          "failed") != NULL,
          "failed step: stderr names it:\n%s", errtext);
}

/* Usage errors name the key and exit 2 before anything starts. */
static void usage_errors(void)
{
    static const char *bad[][2] = {{"--capacity", "0"}, {"--threads", "-1"}, {"--d-ff", "100"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int errp[2];
        if (pipe(errp) != 0)
            continue;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(errp[1], STDERR_FILENO);
            close(errp[0]);
            close(errp[1]);
            execl(g_bin, g_bin, "serve", "--port", "0", bad[i][0], bad[i][1], (char *)NULL);
            _exit(127);
        }
        close(errp[1]);
        char buf[512];
        ssize_t k = read(errp[0], buf, sizeof buf - 1);
        buf[k > 0 ? k : 0] = '\0';
        close(errp[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2, "%s %s: exit 2", bad[i][0], bad[i][1]);
        CHECK(strstr(buf, bad[i][0]) != NULL, "%s %s: message names the flag: %s", bad[i][0],
              bad[i][1], buf);
    }
}

static long status_of(const served *s, const char *method, const char *path, const char *auth)
{
    char url[256];
    tc_resp r;
    snprintf(url, sizeof url, "%s%s", s->url, path);
    tc_request_hdr(method, url, method[0] == 'P' ? "" : NULL, 0, auth, &r);
    tc_resp_free(&r);
    return r.status;
}

/* The key from LOADLAW_API_KEY, --no-control as a flag, the bind warning,
 * and no key in anything serve prints. */
static void access_flags(void)
{
    served s;
    char errtext[8192];
    char *args[] = {"--time-scale", "0.01", "--host", "0.0.0.0", "--no-control", "-v", NULL};
    setenv("LOADLAW_API_KEY", "env-k3y-value", 1);
    int rc = serve_start(&s, args, 0);
    unsetenv("LOADLAW_API_KEY");
    if (rc != 0)
        return;
    CHECK(status_of(&s, "GET", "/v1/models", NULL) == 401, "env key: 401 without it");
    CHECK(status_of(&s, "GET", "/v1/models", "Authorization: Bearer env-k3y-value") == 200,
          "env key: 200 with it");
    CHECK(status_of(&s, "GET", "/health", NULL) == 200, "health open");
    CHECK(status_of(&s, "POST", "/stop_profile", "Authorization: Bearer env-k3y-value") == 404,
          "--no-control is a flag that turns control off");
    int status = serve_signal(&s, SIGTERM, errtext, sizeof errtext);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "keyed serve stops cleanly");
    CHECK(!strstr(errtext, "env-k3y") && !strstr(errtext, "without an API key"),
          "no key and no warning on stderr:\n%s", errtext);

    char *open_args[] = {"--time-scale", "0.01", "--host", "0.0.0.0", NULL};
    if (serve_start(&s, open_args, 0) != 0)
        return;
    status = serve_signal(&s, SIGTERM, errtext, sizeof errtext);
    CHECK(strstr(errtext, "without an API key") != NULL, "0.0.0.0 without a key warns:\n%s", errtext);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_engine_serve PATH/TO/loadlaw\n");
        return 2;
    }
    g_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;

    char *syn[] = {"--time-scale", "0.01", NULL};
    run_case("synthetic SIGINT", syn, 6, SIGINT);
    run_case("synthetic SIGTERM", syn, 3, SIGTERM);
    /* tiny cpu model: links and starts OpenBLAS, steps take well under 1 ms */
    char *cpu[] = {"--backend", "cpu", "--d-model", "256", "--d-ff", "1024", "--vocab", "64",
                   "--capacity", "512", "--heads", "8", "--topk", "96", "--threads", "2",
                   "--max-running", "4", NULL};
    run_case("cpu SIGINT", cpu, 5, SIGINT);
    ignored_sigint();
    failed_step();
    usage_errors();
    access_flags();

    curl_global_cleanup();
    TEST_MAIN_END();
}
