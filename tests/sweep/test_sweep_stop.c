/* test_sweep_stop.c: a server that dies mid-sweep (--max-failed), end to end
 * through the real binary.
 *
 * The server here answers its first 5 chat requests with a short stream,
 * then closes its listening socket: every later connection is refused at
 * once. The sweep's levels are C = 1, 2, 4 of 4, 8, 8 requests: level 0 is
 * all ok, level 1 gets 1 of 8 through (7/8 failed, over the default 0.1),
 * level 2 would fail all 8 (the worst level, were it sent).
 *
 * (a) By default the sweep stops after level 1: no request of level 2 is
 *     recorded (nor its level line), levels 0 and 1 are whole, summary.json
 *     and the report are written, the message names level 1, the first over
 *     the threshold (not the worst), and the levels it did not send; exit 1.
 * (b) --keep-going sends level 2 anyway (8 more records, all failed); the
 *     message still names level 1; exit 1. The scenario key
 *     load.keep_going does the same.
 *
 * argv: none (LOADLAW_BIN). Real time: about 4 s. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define LIVES_FOR 5 /* chat requests answered before the server dies */

static char g_tmp[256];

/* ---- a server that dies after LIVES_FOR requests --------------------------- */

static const char k_stream[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a0 \"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a1 \"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a2 \"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a3 \"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
    "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":4}}\n\n"
    "data: [DONE]\n\n";

/* One request at a time (the client sends each whole): answer LIVES_FOR
 * chat requests with a short stream, then die (tu_httpd_fn's 1: the
 * listening socket closes, so connections waiting in its queue are reset
 * and new ones refused); anything else (the sweep's /tokenize) is a 404
 * that costs no life. ctx: the count served. */
static int dying_answer(int fd, const char *head, void *ctx)
{
    int *served = ctx;
    if (strncmp(head, "POST /v1/chat/completions ", 26) != 0) {
        tu_httpd_reply(fd, "404 Not Found", "text/plain", "", 0);
        return 0;
    }
    if (write(fd, k_stream, sizeof k_stream - 1) < 0) {
        /* the client gave up: it records that */
    }
    return ++*served >= LIVES_FOR;
}

/* ---- helpers ------------------------------------------------------------------ */

/* Per level: request records, ok ones, level and level_end lines. */
typedef struct per_level {
    int requests[4], ok[4], levels[4], ends[4];
} per_level;

static int on_line(const cJSON *o, size_t n, void *ctx)
{
    per_level *t = ctx;
    const char *type = ll_json_str(o, "type", "");
    int lv = (int)ll_json_num(o, "level", -1);
    (void)n;
    if (lv < 0 || lv > 3)
        return 0;
    if (!strcmp(type, "request")) {
        t->requests[lv]++;
        t->ok[lv] += !strcmp(ll_json_str(o, "status", ""), "ok");
    } else if (!strcmp(type, "level")) {
        t->levels[lv]++;
    } else if (!strcmp(type, "level_end")) {
        t->ends[lv]++;
    }
    return 0;
}

static int read_levels(const char *dir, per_level *t)
{
    char path[400], err[256];
    size_t skipped = 0;
    memset(t, 0, sizeof *t);
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    return ll_jsonl_foreach(path, on_line, t, &skipped, err, sizeof err) || skipped ? -1 : 0;
}

/* Levels in summary.json (-1 when unreadable). */
static int summary_levels(const char *dir)
{
    char path[400];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    cJSON *s = tu_json_file(path);
    int n = s ? cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s, "levels")) : -1;
    cJSON_Delete(s);
    return n;
}

/* One sweep against a fresh dying server. extra: more arguments (NULL-ended). */
static int sweep_dying(const char *name, char *const extra[], char *dir, char *errf, size_t n)
{
    tu_httpd *srv = NULL;
    int served = 0;
    char url[64];
    if (tu_httpd_start(dying_answer, &served, &srv)) {
        CHECK(0, "%s: test server starts", name);
        return -1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d", tu_httpd_port(srv));
    snprintf(dir, n, "%s/%s", g_tmp, name);
    snprintf(errf, n, "%s/%s.err", g_tmp, name);
    char *args[40] = {"loadlaw", "sweep", "--url", url, "--model", "m", "-c", "1,2,4", "-n", "4,8,8",
                      "--max-tokens", "4", "--timeout", "5s", "--no-metrics", "--gpu", "off", "-q", "-o", dir};
    size_t k = 20;
    for (size_t i = 0; extra && extra[i] && k < 39; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    int rc = tu_run(LOADLAW_BIN, args, NULL, errf, 0);
    tu_httpd_stop(srv);
    CHECK(served == LIVES_FOR, "%s: the server answered %d before it died", name, served);
    return rc;
}

/* ---- the tests ---------------------------------------------------------------- */

static void test_stop(void)
{
    char dir[300], errf[300], path[400];
    per_level t;
    int rc = sweep_dying("stop", NULL, dir, errf, sizeof dir);
    CHECK(rc == 1, "a level over --max-failed: exit 1, got %d (see %s)", rc, errf);
    CHECK(tu_file_has(errf, "7 of 8 requests failed at level 1 (C=2), over --max-failed 0.1:") &&
              tu_file_has(errf, "; stopped before levels 2 (C=4) (--keep-going sends them)"),
          "the message names level 1, the first over the threshold, and the level not sent (see %s)", errf);
    CHECK(!tu_file_has(errf, "at level 2"), "not the worst level, which was never sent");
    CHECK(!tu_file_has(errf, "timeout="), "the dead server refused at once (no request ran into --timeout)");
    CHECK(read_levels(dir, &t) == 0, "records readable");
    CHECK(t.levels[0] == 1 && t.ends[0] == 1 && t.requests[0] == 4 && t.ok[0] == 4,
          "level 0 whole: %d requests, %d ok", t.requests[0], t.ok[0]);
    CHECK(t.levels[1] == 1 && t.ends[1] == 1 && t.requests[1] == 8 && t.ok[1] == 1,
          "level 1 whole: %d requests, %d ok", t.requests[1], t.ok[1]);
    CHECK(t.levels[2] == 0 && t.requests[2] == 0, "level 2 not sent: %d level lines, %d requests", t.levels[2],
          t.requests[2]);
    CHECK(summary_levels(dir) == 2, "summary.json written with the 2 levels measured (%d)", summary_levels(dir));
    snprintf(path, sizeof path, "%s/report.html", dir);
    CHECK(access(path, R_OK) == 0, "the report written too");
    snprintf(path, sizeof path, "%s/summary.json", dir);
    CHECK(tu_file_has(path, "\"interrupted\":\tfalse"), "not marked interrupted: no signal came");
}

static void test_keep_going(void)
{
    char dir[300], errf[300], scn[300];
    per_level t;
    char *flag[] = {"--keep-going", "--no-report", NULL};
    int rc = sweep_dying("keep", flag, dir, errf, sizeof dir);
    CHECK(rc == 1, "--keep-going: still exit 1, got %d", rc);
    CHECK(read_levels(dir, &t) == 0 && t.requests[0] == 4 && t.requests[1] == 8 && t.requests[2] == 8 &&
              t.ok[2] == 0 && t.ends[2] == 1,
          "--keep-going sends level 2: %d, %d, %d requests", t.requests[0], t.requests[1], t.requests[2]);
    CHECK(tu_file_has(errf, "7 of 8 requests failed at level 1 (C=2), over --max-failed 0.1:") &&
              !tu_file_has(errf, "stopped before"),
          "the first level over the threshold named, nothing said stopped (see %s)", errf);

    /* the scenario key */
    snprintf(scn, sizeof scn, "%s/keep.json", g_tmp);
    tu_write_file(scn, "{\"load\":{\"keep_going\":true}}\n");
    char *sc[] = {scn, "--no-report", NULL};
    rc = sweep_dying("keep-scn", sc, dir, errf, sizeof dir);
    CHECK(rc == 1 && read_levels(dir, &t) == 0 && t.requests[2] == 8,
          "load.keep_going in the scenario: exit %d, %d requests at level 2", rc, t.requests[2]);
    char bad[300];
    snprintf(bad, sizeof bad, "%s/keep-bad.json", g_tmp);
    tu_write_file(bad, "{\"load\":{\"keep_going\":1}}\n");
    char *a[] = {"loadlaw", "sweep", bad, "-o", dir, NULL};
    rc = tu_run(LOADLAW_BIN, a, NULL, errf, 0);
    CHECK(rc == 2 && tu_file_has(errf, "load.keep_going"), "load.keep_going: 1 is a usage error, got %d", rc);
}

int main(void)
{
    if (tu_tmpdir("ll_sweep_stop", g_tmp, sizeof g_tmp))
        return 1;
    test_stop();
    test_keep_going();
    if (tu_fail == 0) /* a failed run's files stay, to be read */
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
