/* test_sweep_sessions.c: multi-turn sessions (load.sessions) as a server
 * sees them and as the records and the fit say them.
 *
 * (a) A scripted chat server that keeps every body and answers each request
 *     with text of its own ("r<k>a r<k>b r<k>c", k its arrival): three
 *     conversations of three turns at C = 2, 50 ms of think time. Nine
 *     bodies; turn k of a conversation holds 2k - 1 messages, user and
 *     assistant in turn, and its first 2k - 3 are exactly turn k-1's
 *     messages, then the assistant's answer to turn k-1 exactly as the
 *     server sent it; each user message is new; no two conversations share
 *     a first message; a turn arrives at least the think time after the
 *     previous turn's answer was sent. The records carry each (session,
 *     turn) once, turns 1..3 of sessions 0..2, and max_tokens.
 * (b) The bundled engine with its prefix cache on (scenarios/multi-turn.json:
 *     8 conversations of 4 turns at C = 4): `loadlaw fit --json` has one
 *     "turns" row per turn, 8 requests each, TTFT and TPOT figures, the
 *     cached share 0 at turn 1 and rising with every turn past one half by
 *     turn 4, the prompt growing with the turn; the sweep's summary.json
 *     and its table print the same rows.
 * (a2) --duration 0.5 on conversations of 20 turns, 100 ms of think time:
 *     no turn starts after the level's deadline (every body arrives within
 *     0.5 s of the level's start, plus 50 ms), so far fewer than the 40 turns.
 * (c) Bad load.sessions: a misspelt key, turns 0, sessions beside an open
 *     level: exit 2 and one line naming the key.
 *
 * argv: none (LOADLAW_BIN, LOADLAW_SOURCE_DIR). Real time: about 10 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define MAX_BODIES 32

typedef struct server {
    char *bodies[MAX_BODIES];
    char answers[MAX_BODIES][32];
    int64_t at_ns[MAX_BODIES], sent_ns[MAX_BODIES];
    size_t n;
} server;

static int answer(int fd, const char *head, void *ctx)
{
    server *s = ctx;
    int64_t now = ll_now_ns();
    size_t len;
    const char *b = tu_httpd_body(&len);
    if (strncmp(head, "POST /v1/chat/completions ", 26) != 0 || !b || s->n >= MAX_BODIES) {
        tu_httpd_reply(fd, "404 Not Found", "text/plain", "", 0);
        return 0;
    }
    size_t k = s->n;
    char sse[1024];
    snprintf(s->answers[k], sizeof s->answers[k], "r%zua r%zub r%zuc", k, k, k);
    snprintf(sse, sizeof sse,
             "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"r%zua \"},\"finish_reason\":null}]}\n\n"
             "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"r%zub \"},\"finish_reason\":null}]}\n\n"
             "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"r%zuc\"},\"finish_reason\":\"length\"}]}\n\n"
             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n",
             k, k, k);
    s->at_ns[k] = now;
    s->bodies[k] = strdup(b);
    tu_httpd_reply(fd, "200 OK", "text/event-stream", sse, strlen(sse));
    s->sent_ns[k] = ll_now_ns();
    s->n++;
    return 0;
}

static const cJSON *messages(const cJSON *body) { return cJSON_GetObjectItemCaseSensitive(body, "messages"); }

static const char *msg_field(const cJSON *msgs, int i, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, i), k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Body j is the turn after body i: i's messages, then the answer to i, then one more. */
static int follows(const server *s, cJSON *const *b, size_t i, size_t j)
{
    const cJSON *mi = messages(b[i]), *mj = messages(b[j]);
    int ni = cJSON_GetArraySize(mi), nj = cJSON_GetArraySize(mj);
    if (nj != ni + 2)
        return 0;
    for (int k = 0; k < ni; k++)
        if (strcmp(msg_field(mi, k, "content"), msg_field(mj, k, "content")) ||
            strcmp(msg_field(mi, k, "role"), msg_field(mj, k, "role")))
            return 0;
    return !strcmp(msg_field(mj, ni, "role"), "assistant") && !strcmp(msg_field(mj, ni, "content"), s->answers[i]) &&
           !strcmp(msg_field(mj, ni + 1, "role"), "user");
}

/* (a) what the server received */
static void check_bodies(server *s)
{
    cJSON *b[MAX_BODIES] = {0};
    size_t turns[4] = {0}, chained = 0, think_ok = 0, fresh_user = 0, firsts = 0;
    CHECK(s->n == 9, "9 requests (3 conversations x 3 turns): %zu", s->n);
    for (size_t i = 0; i < s->n; i++) {
        b[i] = cJSON_Parse(s->bodies[i]);
        int n = cJSON_GetArraySize(messages(b[i]));
        if (n == 1 || n == 3 || n == 5)
            turns[(n + 1) / 2]++;
    }
    CHECK(turns[1] == 3 && turns[2] == 3 && turns[3] == 3, "turns of 1, 3, 5 messages: %zu %zu %zu", turns[1],
          turns[2], turns[3]);
    for (size_t j = 0; j < s->n; j++) {
        int nj = cJSON_GetArraySize(messages(b[j]));
        if (nj == 1) {
            for (size_t i = 0; i < s->n; i++)
                firsts += i != j && cJSON_GetArraySize(messages(b[i])) == 1 &&
                          !strcmp(msg_field(messages(b[i]), 0, "content"), msg_field(messages(b[j]), 0, "content"));
            continue;
        }
        size_t found = 0;
        for (size_t i = 0; i < s->n; i++)
            if (follows(s, b, i, j)) {
                found++;
                think_ok += s->at_ns[j] - s->sent_ns[i] >= 50000000;
            }
        chained += found == 1;
        /* the new user message is none of the earlier ones */
        const char *last = msg_field(messages(b[j]), nj - 1, "content");
        int dup = 0;
        for (int k = 0; k < nj - 1; k++)
            dup |= !strcmp(last, msg_field(messages(b[j]), k, "content"));
        fresh_user += !dup && strlen(last) > 20;
    }
    CHECK(chained == 6, "each later turn holds the turn before it and its answer exactly: %zu of 6", chained);
    CHECK(think_ok == 6, "each later turn sent >= 50 ms (think time) after the answer before it: %zu of 6", think_ok);
    CHECK(fresh_user == 6, "each later turn ends with a new user message: %zu of 6", fresh_user);
    CHECK(firsts == 0, "no two conversations share a first message (%zu pairs do)", firsts);
    for (size_t i = 0; i < s->n; i++)
        cJSON_Delete(b[i]);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* (a) the records: every (session, turn) once, with max_tokens */
static void check_records(const char *dir)
{
    char path[512];
    int seen[3][4] = {{0}};
    size_t n = 0, mt = 0;
    snprintf(path, sizeof path, "%s/scripted/records.jsonl", dir);
    char *text = tu_slurp(path);
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "request")) {
            double s = num(o, "session"), k = num(o, "turn");
            n++;
            if (s >= 0 && s < 3 && k >= 1 && k <= 3)
                seen[(int)s][(int)k]++;
            mt += num(o, "max_tokens") == 3;
        }
        cJSON_Delete(o);
    }
    size_t once = 0;
    for (int s = 0; s < 3; s++)
        for (int k = 1; k <= 3; k++)
            once += seen[s][k] == 1;
    CHECK(n == 9 && once == 9, "records: 9 requests, each (session 0..2, turn 1..3) once: %zu of %zu", once, n);
    CHECK(mt == 9, "records: max_tokens 3 on each: %zu", mt);
    free(text);
}

static void scripted(const char *dir)
{
    server s = {0};
    tu_httpd *h = NULL;
    char scn[512], cmd[2048];
    snprintf(scn, sizeof scn, "%s/scripted.json", dir);
    tu_write_file(scn, "{\"request\":{\"max_tokens\":3},\"load\":{\"concurrency\":[2],"
                       "\"sessions\":{\"turns\":3,\"count\":3,\"think_time_ms\":50,\"user_tokens\":40}}}");
    if (tu_httpd_start(answer, &s, &h)) {
        CHECK(0, "scripted server started");
        return;
    }
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep %s --url http://127.0.0.1:%d --model m --no-metrics --no-report -q -o %s/scripted "
                         "> %s/scripted.out 2>&1",
             scn, tu_httpd_port(h), dir, dir);
    CHECK(tu_sh(cmd) == 0, "sessions against the scripted server (see %s/scripted.out)", dir);
    tu_httpd_stop(h);
    check_bodies(&s);
    check_records(dir);
    for (size_t i = 0; i < s.n; i++)
        free(s.bodies[i]);
}

/* (a2) the level's deadline ends the conversations: no turn after it */
static void deadline(const char *dir)
{
    server s = {0};
    tu_httpd *h = NULL;
    char scn[512], cmd[2048];
    snprintf(scn, sizeof scn, "%s/deadline.json", dir);
    tu_write_file(scn, "{\"request\":{\"max_tokens\":3},\"load\":{\"concurrency\":[2],"
                       "\"sessions\":{\"turns\":20,\"think_time_ms\":100,\"user_tokens\":20}}}");
    if (tu_httpd_start(answer, &s, &h)) {
        CHECK(0, "scripted server started");
        return;
    }
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep %s --url http://127.0.0.1:%d --model m --duration 0.5 --no-metrics --no-report -q "
                         "-o %s/deadline > %s/deadline.out 2>&1",
             scn, tu_httpd_port(h), dir, dir);
    int64_t t0 = ll_now_ns();
    CHECK(tu_sh(cmd) == 0, "sessions with --duration (see %s/deadline.out)", dir);
    tu_httpd_stop(h);
    int64_t last = 0;
    for (size_t i = 0; i < s.n; i++)
        last = s.at_ns[i] > last ? s.at_ns[i] : last;
    double span_s = s.n ? (double)(last - s.at_ns[0]) / 1e9 : 0;
    CHECK(s.n >= 4 && s.n <= 16 && span_s < 0.55,
          "--duration 0.5: %zu turns of 40, the last %.3f s after the first (%.2f s after the sweep started)", s.n,
          span_s, s.n ? (double)(s.at_ns[0] - t0) / 1e9 : 0.0);
    for (size_t i = 0; i < s.n; i++)
        free(s.bodies[i]);
}

/* (b) the bundled engine, prefix cache on: the per-turn figures */
static void bundled(const char *dir)
{
    char cmd[2048], path[512];
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep " LOADLAW_SOURCE_DIR "/scenarios/multi-turn.json --no-report -o %s/engine "
                         "> %s/engine.out 2>&1 && " LOADLAW_BIN " fit %s/engine --json > %s/engine.json 2>/dev/null",
             dir, dir, dir, dir);
    CHECK(tu_sh(cmd) == 0, "scenarios/multi-turn.json on the bundled engine, and fit (see %s/engine.out)", dir);
    snprintf(path, sizeof path, "%s/engine.json", dir);
    cJSON *j = tu_json_file(path);
    const cJSON *turns = cJSON_GetObjectItemCaseSensitive(j, "turns");
    CHECK(cJSON_GetArraySize(turns) == 4, "fit --json: 4 turn rows (%d)", cJSON_GetArraySize(turns));
    double prev_share = -1, prev_prompt = 0;
    size_t rising = 0, full = 0, figures = 0;
    for (int t = 0; t < cJSON_GetArraySize(turns); t++) {
        const cJSON *r = cJSON_GetArrayItem(turns, t);
        full += num(r, "turn") == t + 1 && num(r, "n") == 8 && num(r, "concurrency") == 4;
        figures += num(r, "ttft_p50_ms") > 0 && num(r, "ttft_p90_ms") >= num(r, "ttft_p50_ms") &&
                   num(r, "tpot_p50_ms") > 0;
        rising += num(r, "cache_share") > prev_share && num(r, "prompt_tok_mean") > prev_prompt;
        prev_share = num(r, "cache_share");
        prev_prompt = num(r, "prompt_tok_mean");
    }
    CHECK(full == 4 && figures == 4, "each turn: 8 requests at C=4 (%zu), TTFT p50/p90 and TPOT p50 (%zu)", full,
          figures);
    const cJSON *first = cJSON_GetArrayItem(turns, 0), *last = cJSON_GetArrayItem(turns, 3);
    CHECK(num(first, "cache_share") == 0, "turn 1: nothing cached (%g)", num(first, "cache_share"));
    CHECK(rising == 4 && num(last, "cache_share") > 0.5,
          "the cached share and the prompt rise with every turn (%zu of 4), turn 4's share %g", rising,
          num(last, "cache_share"));
    snprintf(path, sizeof path, "%s/engine/summary.json", dir);
    cJSON *sum = tu_json_file(path);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(sum, "turns");
    CHECK(cJSON_GetArraySize(st) == 4 && num(cJSON_GetArrayItem(st, 3), "cache_share") == num(last, "cache_share"),
          "summary.json: the same turn rows");
    snprintf(path, sizeof path, "%s/engine.out", dir);
    CHECK(tu_file_has(path, "by turn") && tu_file_has(path, "TTFT p90"), "the sweep's table has the turn rows");
    cJSON_Delete(sum);
    cJSON_Delete(j);
}

/* (c) bad load.sessions: exit 2, the key named */
static void bad_one(const char *dir, const char *name, const char *json, const char *needle)
{
    char scn[512], out[512], args_o[512];
    snprintf(scn, sizeof scn, "%s/%s.json", dir, name);
    snprintf(out, sizeof out, "%s/%s.err", dir, name);
    snprintf(args_o, sizeof args_o, "%s/%s", dir, name);
    tu_write_file(scn, json);
    char *args[] = {"loadlaw", "sweep", scn, "-q", "--no-report", "-o", args_o, NULL};
    int rc = tu_run(LOADLAW_BIN, args, NULL, out, 60);
    char *err = tu_slurp(out);
    CHECK(rc == 2 && err && strstr(err, needle) && tu_count(err, "\n") == 1, "%s: exit %d, one line naming %s: %s",
          name, rc, needle, err ? err : "");
    free(err);
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_sessions", dir, sizeof dir))
        return 1;
    scripted(dir);
    deadline(dir);
    bundled(dir);
    bad_one(dir, "typo", "{\"load\":{\"concurrency\":[2],\"sessions\":{\"turns\":2,\"thinktime_ms\":5}}}",
            "load.sessions.thinktime_ms: unknown key");
    bad_one(dir, "zero", "{\"load\":{\"concurrency\":[2],\"sessions\":{\"turns\":0}}}",
            "load.sessions.turns: expected");
    bad_one(dir, "open",
            "{\"levels\":[{\"rate_per_s\":5,\"concurrency\":0}],\"load\":{\"sessions\":{\"turns\":2}}}",
            "levels[0].rate_per_s: expected 0 beside load.sessions");
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
