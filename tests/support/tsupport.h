/* tsupport.h: what loadlaw's end-to-end tests share (library ll_tsupport,
 * beside testutil.h's CHECK macros): running the loadlaw binary or a shell
 * command and keeping what it printed, reading and searching the files a
 * run wrote, a scratch folder per test, and a scripted HTTP server on
 * loopback for the tests that must see what a sweep sends.
 *
 * run.c holds the processes and files, httpd.c the server. Nothing here
 * exits or CHECKs: a failure is a return value (or NULL) for the test to
 * check, with a line on stderr where the reason would be lost otherwise.
 * The functions are not thread-safe, except that the server's handler runs
 * on the server's own thread. */
#ifndef LOADLAW_TSUPPORT_H
#define LOADLAW_TSUPPORT_H

#include <stddef.h>
#include <sys/types.h>

#include "common.h"

/* ---- processes ---------------------------------------------------------------- */

/* Runs bin (execv, no shell) with args (args[0] included, NULL-ended), its
 * stdout into outfile and its stderr into errfile (NULL: /dev/null). Its
 * exit status; 128 + the signal when one killed it; -1 when it ran past
 * timeout_s and was killed (timeout_s <= 0: no limit, ctest's TIMEOUT is
 * the bound). */
int tu_run(const char *bin, char *const args[], const char *outfile, const char *errfile, double timeout_s);

/* tu_run's start alone: the child's pid (-1 when fork failed), for a test
 * that signals it while it runs (SIGSTOP, SIGINT); SIGINT restored to its
 * default in the child. */
pid_t tu_spawn(const char *bin, char *const args[], const char *outfile, const char *errfile);
/* Wait for a tu_spawn child: tu_run's return values. */
int tu_wait(pid_t p, double timeout_s);

/* system(cmd): the command's exit status, -1 when it did not exit. */
int tu_sh(const char *cmd);
/* `BIN sweep SCENARIO -o DIR/NAME -q --no-report` then `BIN fit DIR/NAME
 * --json`, their output in DIR/NAME.out, .json and .err: the fit's JSON, or
 * NULL when either command failed (0 when both ran: *rc). */
cJSON *tu_sweep_fit(const char *bin, const char *scenario, const char *dir, const char *name, int *rc);

/* popen(cmd): its stdout into out (reset first; out->p NUL-terminated once
 * anything came); its exit status, -1 when it did not exit or could not start. */
int tu_sh_capture(const char *cmd, ll_buf *out);

/* ---- files -------------------------------------------------------------------- */

/* A file's text, NUL-terminated, malloc'ed (caller frees); NULL when unreadable. */
char *tu_slurp(const char *path);

/* A file parsed as JSON (caller frees with cJSON_Delete); NULL when it is
 * unreadable or not JSON. */
cJSON *tu_json_file(const char *path);

/* The data block a loadlaw page embeds (<script id="ll-data"
 * type="application/json">, escaped by reports/html_util.c so that it
 * parses as the same JSON), parsed (caller frees with cJSON_Delete); NULL
 * when the page is unreadable or has none. */
cJSON *tu_page_data(const char *path);

/* path's content replaced by text: 0, or -1 when it cannot be written. */
int tu_write_file(const char *path, const char *text);

/* Occurrences of needle in text, overlapping ones too; 0 when text is NULL. */
size_t tu_count(const char *text, const char *needle);

/* tu_count of a file's text; 0 when it is unreadable. */
size_t tu_count_in(const char *path, const char *needle);

/* 1 when path's text holds needle, 0 when it does not or is unreadable. */
int tu_file_has(const char *path, const char *needle);

/* 1 when some file under dir holds needle, 0 when none does, -1 when grep
 * failed (a needle or dir with a single quote is not supported). */
int tu_dir_has(const char *dir, const char *needle);

/* A test's scratch folder, $TMPDIR (default /tmp)/NAME_PID, created into
 * out: 0, or -1 after saying why on stderr. */
int tu_tmpdir(const char *name, char *out, size_t n);

/* rm -rf dir, a line on stderr when that fails. Tests call it only when
 * every CHECK passed, so that a failed run's files stay to be read. */
void tu_rmtree(const char *dir);

/* ---- a scripted HTTP server on loopback (httpd.c) ----------------------------- */

/* One thread accepts one connection at a time on an ephemeral loopback
 * port, reads one request (its head, then Content-Length bytes of body,
 * the first 64 KiB kept for tu_httpd_body), calls the handler with the head
 * (NUL-terminated) and
 * closes the connection; a connection that never sends a whole head is
 * closed without a call. The handler answers by writing to fd
 * (tu_httpd_reply, or raw bytes such as an SSE stream) and returns 0 to
 * serve on, or 1 to close the listening socket for good: connections
 * waiting in its queue are then reset and new ones refused at once, as
 * when a server dies. The socket is close-on-exec, so a loadlaw forked
 * meanwhile does not keep it open. */
typedef int tu_httpd_fn(int fd, const char *head, void *ctx);
typedef struct tu_httpd tu_httpd;

/* Starts serving with fn(…, ctx): 0, or -1 (nothing to stop). */
int tu_httpd_start(tu_httpd_fn *fn, void *ctx, tu_httpd **out);
int tu_httpd_port(const tu_httpd *h);
/* Stops the thread (within ~0.2 s: accept wakes to see the flag), closes
 * the socket and frees h. After it returns, what the handler wrote into
 * ctx may be read without a lock. NULL is a no-op. */
void tu_httpd_stop(tu_httpd *h);

/* Inside a handler: the body of the request it answers (its first 64 KiB,
 * NUL-terminated) and its length; NULL outside a handler's call. */
const char *tu_httpd_body(size_t *len);

/* "HTTP/1.1 STATUS" with Content-Type, Content-Length and Connection:
 * close, then body (len bytes). A client that hung up is not an error. */
void tu_httpd_reply(int fd, const char *status, const char *content_type, const char *body, size_t len);

#endif
