/* test_sweep_trace.c: trace replay (--trace) and shared prefixes
 * (load.shared_prefix), seen from a scripted chat server on loopback that
 * keeps every request body and when it came.
 *
 * (a) The Mooncake sample (tests/sweep/data/trace-mooncake.jsonl) at
 *     --trace-speed 10: ten requests, each row's max_tokens its
 *     output_length (the rows' output lengths differ, so a body names its
 *     row); each arrives at the row's timestamp / 10 after the first (within
 *     15 ms at the server; the records' intended times exact to 0.01 ms and
 *     every send within 5 ms of its intended time); each prompt's words are
 *     its input_length / 1.33 (no tokenizer) within 3; rows whose hash_ids
 *     start alike share exactly the text of those blocks, and rows that do
 *     not differ from the first words; the run line names the trace.
 * (b) The Azure and BurstGPT samples are recognised by their columns (the
 *     run line's format), every row sent with its output length (BurstGPT's
 *     0 asks for 1); --trace-window 1:3 keeps the rows of that window only.
 * (c) Malformed traces: an unknown header, a negative time, a missing
 *     column, a time earlier than the row before: exit 2, a line naming the
 *     file's line and the column, nothing sent.
 * (d) load.shared_prefix {"groups":3,"tokens":64}: nine prompts, three
 *     distinct leading texts of 64/1.33 words taken round robin, each then
 *     followed by the request's own head and text (all nine differ).
 *
 * argv: none (LOADLAW_BIN, LOADLAW_SOURCE_DIR). Real time: about 3 s. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define MAX_BODIES 64
#define DATA LOADLAW_SOURCE_DIR "/tests/sweep/data"

typedef struct server {
    char *bodies[MAX_BODIES];
    int64_t at_ns[MAX_BODIES]; /* when each came (the handler's clock) */
    size_t n;
} server;

static int answer(int fd, const char *head, void *ctx)
{
    server *s = ctx;
    int64_t now = ll_now_ns();
    if (strncmp(head, "POST /v1/chat/completions ", 26) != 0) {
        tu_httpd_reply(fd, "404 Not Found", "text/plain", "", 0);
        return 0;
    }
    size_t len;
    const char *b = tu_httpd_body(&len);
    if (s->n < MAX_BODIES && b) {
        s->at_ns[s->n] = now;
        s->bodies[s->n++] = strdup(b);
    }
    static const char sse[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a \"},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"length\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
    tu_httpd_reply(fd, "200 OK", "text/event-stream", sse, sizeof sse - 1);
    return 0;
}

static void forget(server *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->bodies[i]);
    s->n = 0;
}

static int sweep(const char *dir, int port, const char *name, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "rm -rf %s/%s && " LOADLAW_BIN " sweep --url http://127.0.0.1:%d --model m %s --no-metrics "
             "--no-report -q -o %s/%s > %s/%s.out 2> %s/%s.err",
             dir, name, port, args, dir, name, dir, name, dir, name);
    return tu_sh(cmd);
}

/* A body's user message and max_tokens. */
static char *prompt_of(const char *body, int *max_tokens)
{
    cJSON *j = cJSON_Parse(body);
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "messages"), 0);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "max_tokens");
    *max_tokens = cJSON_IsNumber(mt) ? mt->valueint : -1;
    char *out = strdup(cJSON_IsString(c) ? c->valuestring : "");
    cJSON_Delete(j);
    return out;
}

/* The prompt without its per-request head ("[id-tag] "): the vocabulary
 * has no '[', so the head is the one bracket. In place. */
static char *strip_head(char *p)
{
    char *o = strchr(p, '['), *c = o ? strchr(o, ']') : NULL;
    if (o && c) {
        char *end = c[1] == ' ' ? c + 2 : c + 1;
        memmove(o, end, strlen(end) + 1);
    }
    return p;
}

static size_t words(const char *s)
{
    size_t n = 0;
    for (const char *c = s; *c; c++)
        n += *c != ' ' && (c == s || c[-1] == ' ');
    return n;
}

static size_t common_len(const char *a, const char *b)
{
    size_t k = 0;
    while (a[k] && a[k] == b[k])
        k++;
    return k;
}

/* The Mooncake sample's rows (tests/sweep/data/trace-mooncake.jsonl). */
static const struct {
    int ts_ms, in, out;
} k_moon[10] = {{0, 1100, 12},  {120, 700, 8},  {200, 1300, 20}, {350, 300, 5},  {400, 1024, 16},
                {650, 800, 10}, {700, 1536, 4}, {900, 520, 30},  {1000, 1200, 6}, {1200, 256, 9}};

/* The records' intended send times against the trace, and each send's lag. */
static void check_records(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/moon/records.jsonl", dir);
    char *text = tu_slurp(path);
    int64_t intended[10], first = -1;
    double worst_lag_ms = 0;
    size_t n = 0, exact = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "request") && n < 10) {
            double in = cJSON_GetObjectItemCaseSensitive(o, "intended_ns")->valuedouble;
            double sent = cJSON_GetObjectItemCaseSensitive(o, "send_ns")->valuedouble;
            intended[n++] = (int64_t)in;
            worst_lag_ms = (sent - in) / 1e6 > worst_lag_ms ? (sent - in) / 1e6 : worst_lag_ms;
        }
        cJSON_Delete(o);
    }
    for (size_t i = 0; i < n; i++)
        first = first < 0 || intended[i] < first ? intended[i] : first;
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < 10; r++)
            exact += llabs(intended[i] - first - (int64_t)k_moon[r].ts_ms * 100000) < 10000;
    CHECK(n == 10 && exact == 10, "records: 10 requests, intended at ts/10 (%zu exact)", exact);
    /* A sender that ignored --trace-speed would lag by up to 1,080 ms; a busy
     * machine (a sanitizer build beside other builds: 8.4 ms) only delays a
     * wake-up. 25 ms tells the two apart. */
    CHECK(worst_lag_ms < 25, "every send within 25 ms of its intended time (worst %.3f ms)", worst_lag_ms);
    free(text);
}

/* (a) the Mooncake sample at --trace-speed 10 */
static void check_mooncake(server *s, const char *dir, int port)
{
    char path[512], *p[10] = {0};
    CHECK(sweep(dir, port, "moon", "--trace " DATA "/trace-mooncake.jsonl --trace-speed 10") == 0,
          "the Mooncake sample replayed (see %s/moon.err)", dir);
    CHECK(s->n == 10, "10 requests: %zu", s->n);
    int64_t t0 = -1;
    size_t on_time = 0, lengths = 0;
    for (size_t i = 0; i < s->n && s->n == 10; i++) {
        int mt, r = -1;
        char *text = prompt_of(s->bodies[i], &mt);
        for (int k = 0; k < 10; k++)
            r = k_moon[k].out == mt ? k : r;
        if (r < 0 || p[r]) {
            CHECK(0, "body %zu: max_tokens %d names no row, or a row twice", i, mt);
            free(text);
            continue;
        }
        p[r] = strip_head(text);
        if (r == 0)
            t0 = s->at_ns[i];
        double want = k_moon[r].in / 1.33, got = (double)words(p[r]);
        lengths += got > want - 3 && got < want + 3;
    }
    for (size_t i = 0; i < s->n && t0 >= 0; i++) {
        int mt;
        free(prompt_of(s->bodies[i], &mt));
        for (int k = 0; k < 10; k++)
            if (k_moon[k].out == mt)
                on_time += llabs(s->at_ns[i] - t0 - (int64_t)k_moon[k].ts_ms * 100000) < 15000000;
    }
    CHECK(on_time == 10, "each row at its timestamp / 10 within 15 ms: %zu of 10", on_time);
    CHECK(lengths == 10, "each prompt input_length / 1.33 words within 3: %zu of 10", lengths);
    if (p[0] && p[2] && p[4] && p[6] && p[8] && p[1] && p[5]) {
        /* row 4 is blocks 0 and 1 alone: 1024 tokens, all shared */
        size_t two = strlen(p[4]);
        CHECK(two > 500 && common_len(p[0], p[4]) == two && common_len(p[2], p[4]) == two &&
                  common_len(p[8], p[4]) == two,
              "rows 0, 2, 8 open with row 4's text exactly (blocks 0, 1: %zu bytes)", two);
        size_t one = common_len(p[6], p[0]);
        CHECK(one > two / 3 && one < two, "row 6 (blocks 0, 8, 9) shares block 0 only: %zu of %zu bytes", one, two);
        CHECK(common_len(p[1], p[5]) > 500 && common_len(p[1], p[5]) < strlen(p[1]),
              "rows 1 and 5 share block 3: %zu bytes", common_len(p[1], p[5]));
        CHECK(common_len(p[0], p[1]) < 40 && common_len(p[0], p[3]) < 40 && common_len(p[0], p[7]) < 40,
              "rows of other first blocks differ from the start");
    }
    for (int k = 0; k < 10; k++)
        free(p[k]);
    forget(s);
    snprintf(path, sizeof path, "%s/moon/records.jsonl", dir);
    CHECK(tu_file_has(path, "\"trace\":{\"path\":\"" DATA "/trace-mooncake.jsonl\",\"speed\":10,"
                            "\"format\":\"mooncake\",\"rows\":10"),
          "the run line names the trace, its speed and format");
    check_records(dir);
}

/* (b) one CSV sample: its format named, its output lengths asked. */
static void check_csv(server *s, const char *dir, int port, const char *name, const char *args, const char *format,
                      const int *outs, size_t n_outs)
{
    char path[512], want[64];
    CHECK(sweep(dir, port, name, args) == 0, "%s replayed (see %s/%s.err)", name, dir, name);
    size_t found = 0;
    for (size_t i = 0; i < s->n; i++) {
        int mt;
        free(prompt_of(s->bodies[i], &mt));
        for (size_t k = 0; k < n_outs; k++)
            found += outs[k] == mt;
    }
    CHECK(s->n == n_outs && found == n_outs, "%s: %zu requests, %zu with a row's output length (want %zu)", name,
          s->n, found, n_outs);
    forget(s);
    snprintf(path, sizeof path, "%s/%s/records.jsonl", dir, name);
    snprintf(want, sizeof want, "\"format\":\"%s\"", format);
    CHECK(tu_file_has(path, want), "%s: the run line says %s", name, want);
}

/* (c) a malformed trace: exit 2, the line and column named, nothing sent. */
static void check_bad(server *s, const char *dir, int port, const char *name, const char *text, const char *said)
{
    char path[512], args[600];
    snprintf(path, sizeof path, "%s/%s.trace", dir, name);
    tu_write_file(path, text);
    snprintf(args, sizeof args, "--trace %s", path);
    CHECK(sweep(dir, port, name, args) == 2, "%s: exit 2", name);
    snprintf(path, sizeof path, "%s/%s.err", dir, name);
    CHECK(tu_file_has(path, said), "%s: the error says '%s'", name, said);
    CHECK(s->n == 0, "%s: nothing sent (%zu)", name, s->n);
    forget(s);
}

/* (d) load.shared_prefix */
static void check_prefix(server *s, const char *dir, int port)
{
    char path[512], args[600], *pre[9] = {0};
    snprintf(path, sizeof path, "%s/prefix.json", dir);
    tu_write_file(path, "{\"load\":{\"concurrency\":[2],\"requests\":9,\"shared_prefix\":{\"groups\":3,\"tokens\":64}},"
                        "\"prompts\":{\"words\":{\"dist\":\"fixed\",\"value\":20}},\"request\":{\"max_tokens\":2}}");
    snprintf(args, sizeof args, "%s", path);
    CHECK(sweep(dir, port, "prefix", args) == 0, "a shared-prefix sweep (see %s/prefix.err)", dir);
    CHECK(s->n == 9, "9 requests: %zu", s->n);
    /* by request id (the head's number): prompt k takes group k mod 3 */
    size_t heads = 0, sized = 0, whole_distinct = 1;
    char *texts[9] = {0};
    for (size_t i = 0; i < s->n && i < 9; i++) {
        int mt;
        char *t = prompt_of(s->bodies[i], &mt), *b = strchr(t, '[');
        long id = b ? strtol(b + 1, NULL, 10) : -1;
        if (id < 0 || id > 8 || texts[id]) {
            CHECK(0, "body %zu: no head, or its id (%ld) out of 0..8 or seen twice", i, id);
            free(t);
            continue;
        }
        texts[id] = t;
        heads += b > t;
        pre[id] = strndup(t, (size_t)(b - t));
        sized += words(pre[id]) == 48; /* 64 tokens / 1.33 */
    }
    size_t distinct = 0, rr = 0;
    for (size_t i = 0; i < 9; i++) {
        size_t same = 0;
        for (size_t j = 0; j < i && pre[i] && pre[j]; j++) {
            same += strcmp(pre[i], pre[j]) == 0;
            whole_distinct &= strcmp(texts[i], texts[j]) != 0;
            rr += j + 3 == i && strcmp(pre[i], pre[j]) == 0;
        }
        distinct += pre[i] && same == 0;
    }
    CHECK(heads == 9 && sized == 9, "every head after a 48-word prefix (%zu heads, %zu sized)", heads, sized);
    CHECK(distinct == 3, "three distinct prefixes: %zu", distinct);
    CHECK(rr == 6 && whole_distinct, "round robin (%zu of 6 like the one 3 before), every prompt its own", rr);
    for (size_t i = 0; i < 9; i++) {
        free(pre[i]);
        free(texts[i]);
    }
    forget(s);
    snprintf(path, sizeof path, "%s/prefix/records.jsonl", dir);
    CHECK(tu_file_has(path, "\"shared_prefix\":{\"groups\":3,\"tokens\":64,\"pick\":\"round-robin\"}"),
          "the run line names the shared prefix");
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_trace", dir, sizeof dir))
        return 1;
    server s = {0};
    tu_httpd *h = NULL;
    if (tu_httpd_start(answer, &s, &h))
        return 1;
    int port = tu_httpd_port(h);

    check_mooncake(&s, dir, port);
    static const int azure[] = {44, 109, 21, 7, 25, 13, 250, 3, 31, 17};
    check_csv(&s, dir, port, "azure", "--trace " DATA "/trace-azure.csv --trace-speed 20", "azure", azure, 10);
    static const int burst[] = {18, 99, 1, 41, 210, 12, 55, 27, 130, 6};
    check_csv(&s, dir, port, "burst", "--trace " DATA "/trace-burstgpt.csv --trace-speed 20", "burstgpt", burst, 10);
    static const int burst_window[] = {1, 41, 210, 12};
    check_csv(&s, dir, port, "window", "--trace " DATA "/trace-burstgpt.csv --trace-speed 20 --trace-window 1:3",
              "burstgpt", burst_window, 4);

    check_bad(&s, dir, port, "header", "time,in,out\n1,2,3\n", ":1: header: not a known trace");
    check_bad(&s, dir, port, "negative", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                         "-1,ChatGPT,10,5,15,API log\n",
              ":2: Timestamp: expected a time >= 0");
    check_bad(&s, dir, port, "missing", "{\"timestamp\":0,\"input_length\":10,\"output_length\":2}\n"
                                        "{\"timestamp\":5,\"output_length\":2}\n",
              ":2: input_length: missing");
    check_bad(&s, dir, port, "order", "TIMESTAMP,ContextTokens,GeneratedTokens\n2.5,10,2\n1.0,10,2\n",
              ":3: TIMESTAMP: earlier than the row before");
    check_bad(&s, dir, port, "length", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,-4,2\n",
              ":2: ContextTokens: expected an integer token count");

    check_prefix(&s, dir, port);

    tu_httpd_stop(h);
    forget(&s);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
