/* signals.c: the self-pipe behind cli_signals_start (see signals.h for why).
 *
 * DESIGN: the handler does the only async-signal-safe thing it needs, one
 * write() of the signal number into a non-blocking pipe (a full pipe already
 * holds a pending wake-up, so a dropped byte loses nothing that matters). The
 * signal thread blocks in read(); a 0 byte written by cli_signals_stop tells
 * it to return. Handlers are restored before the pipe closes, and the handler
 * reads the write end from an atomic that is cleared first, so a late signal
 * writes nowhere rather than into a reused descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "signals.h"

static const int g_sigs[2] = {SIGINT, SIGTERM};

static atomic_int g_wfd = -1;      /* write end, read by the handler */
static int g_pipe[2] = {-1, -1};
static pthread_t g_thread;
static int g_started;
static struct sigaction g_old[2];
static int g_installed[2];
static cli_signal_fn *g_first, *g_second;
static void *g_ctx;

static void on_signal(int sig)
{
    int saved = errno;
    int fd = atomic_load(&g_wfd);
    char c = (char)sig;
    if (fd >= 0 && write(fd, &c, 1) < 0) {
        /* EAGAIN: the pipe is full, the thread already has wake-ups queued */
    }
    errno = saved;
}

static void *signal_main(void *arg)
{
    (void)arg;
    int n = 0;
    for (;;) {
        char c;
        ssize_t k = read(g_pipe[0], &c, 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || c == 0)
            return NULL; /* 0: cli_signals_stop */
        n++;
        if (n == 1) {
            g_first(c, g_ctx);
        } else if (g_second) {
            g_second(c, g_ctx);
        } else {
            static const char m[] = "\nloadlaw: interrupted\n";
            if (write(STDERR_FILENO, m, sizeof m - 1) < 0) {
                /* exiting anyway */
            }
            _exit(CLI_INTERRUPTED);
        }
    }
}

static void close_pipe(void)
{
    atomic_store(&g_wfd, -1);
    for (int i = 0; i < 2; i++)
        if (g_pipe[i] >= 0) {
            close(g_pipe[i]);
            g_pipe[i] = -1;
        }
}

int cli_signals_start(cli_signal_fn *on_first, cli_signal_fn *on_second, void *ctx,
                      char *err, size_t errlen)
{
    if (!on_first || g_started) {
        ll_errf(err, errlen, "signals: %s", g_started ? "already started" : "no callback");
        return LL_EINVAL;
    }
    g_first = on_first;
    g_second = on_second;
    g_ctx = ctx;
    /* CLOEXEC: children (none today) must not inherit the pipe. The write end
     * is non-blocking so a signal storm can never block a handler. */
    if (pipe(g_pipe) != 0) {
        ll_errf(err, errlen, "signals: pipe: %s", strerror(errno));
        return LL_ESYS;
    }
    int fl = fcntl(g_pipe[1], F_GETFL);
    if (fl < 0 || fcntl(g_pipe[1], F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(g_pipe[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(g_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
        ll_errf(err, errlen, "signals: fcntl: %s", strerror(errno));
        close_pipe();
        return LL_ESYS;
    }
    int rc = pthread_create(&g_thread, NULL, signal_main, NULL);
    if (rc != 0) {
        ll_errf(err, errlen, "signals: pthread_create: %s", strerror(rc));
        close_pipe();
        return LL_ESYS;
    }
    g_started = 1;
    atomic_store(&g_wfd, g_pipe[1]);
    for (int i = 0; i < 2; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        g_installed[i] = 0;
        if (sigaction(g_sigs[i], NULL, &g_old[i]) != 0) {
            ll_errf(err, errlen, "signals: sigaction: %s", strerror(errno));
            cli_signals_stop();
            return LL_ESYS;
        }
        if (g_old[i].sa_handler == SIG_IGN)
            continue; /* a background job keeps ignoring the terminal's Ctrl-C */
        if (sigaction(g_sigs[i], &sa, NULL) != 0) {
            ll_errf(err, errlen, "signals: sigaction: %s", strerror(errno));
            cli_signals_stop();
            return LL_ESYS;
        }
        g_installed[i] = 1;
    }
    return 0;
}

void cli_signals_stop(void)
{
    if (!g_started)
        return;
    for (int i = 0; i < 2; i++)
        if (g_installed[i]) {
            sigaction(g_sigs[i], &g_old[i], NULL);
            g_installed[i] = 0;
        }
    /* The write end is non-blocking, but the pipe holds at most a few bytes
     * here, so the stop byte always fits; if it somehow does not, detach
     * rather than wait forever on a thread we cannot wake. */
    char zero = 0;
    ssize_t k;
    do
        k = write(g_pipe[1], &zero, 1);
    while (k < 0 && errno == EINTR);
    if (k == 1)
        pthread_join(g_thread, NULL);
    else
        pthread_detach(g_thread);
    close_pipe();
    g_started = 0;
}
