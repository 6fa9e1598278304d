/* signals.h (internal to cli/): SIGINT/SIGTERM for the long-running commands.
 *
 * Why not sigwait: libraries such as OpenBLAS (linked through engine/cpu)
 * start threads before main with every signal unblocked, so masking SIGINT in
 * main cannot route it to one thread; with the default disposition any thread
 * that takes it kills the process. Instead a handler, which any thread may
 * run, writes one byte into a self-pipe, and a thread of ours reads it and
 * calls back outside signal context.
 *
 * Threads: the callbacks run on that signal thread, one at a time, never in a
 * signal handler, so they may lock, print and call into the engine or loadgen.
 * One user at a time in a process (the state is global, as signal handlers are).
 * Signals ignored when the command started (a background job's SIGINT) stay
 * ignored. Errors: 0 or LL_ESYS / LL_EINVAL with a message in err. */
#ifndef LOADLAW_CLI_SIGNALS_H
#define LOADLAW_CLI_SIGNALS_H

#include <stddef.h>

/* sig: SIGINT or SIGTERM; ctx: as given to cli_signals_start. */
typedef void cli_signal_fn(int sig, void *ctx);

/* Install the handlers and start the signal thread. The first signal calls
 * on_first; every later one calls on_second, or, when on_second is NULL,
 * prints "interrupted" to stderr and _exits with CLI_INTERRUPTED (130) so a
 * second Ctrl-C always ends a stuck shutdown. */
int cli_signals_start(cli_signal_fn *on_first, cli_signal_fn *on_second, void *ctx,
                      char *err, size_t errlen);

/* Restore the previous handlers and join the signal thread (a callback that
 * is running finishes first). Safe to call when start failed or never ran;
 * not from a callback (it would join its own thread). */
void cli_signals_stop(void);

#endif
