/* test_records_chunks.c: the packed chunk list (common/records_chunks.c):
 * exact round trips of the edge cases (one chunk, many, equal times, huge
 * gaps, several tokens, mixed kinds, times at +/- 2^62), the bytes pinned
 * against docs/records.md's example, malformed text refused rather than
 * cast, the reader taking packed and list forms alike (and counting what it
 * drops), where each line lies and one line read back (ll_rec_read_line),
 * and `loadlaw records` conversion both ways losing nothing. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"

#define T62 (INT64_C(1) << 62)

static char g_dir[256];

/* Pack c[0..n), unpack it, and compare chunk by chunk. */
static int round_trip(const ll_rec_chunk *c, size_t n, const char *what)
{
    ll_buf b = {0};
    ll_rec_chunk *v = NULL;
    size_t got = 0, cap = 0;
    int rc = ll_rec_chunks_pack(&b, c, n);
    if (rc == 0)
        rc = ll_rec_chunks_unpack(b.p ? b.p : "", b.len, &v, &got, &cap);
    int same = rc == 0 && got == n;
    for (size_t i = 0; same && i < n; i++)
        same = v[i].t_ns == c[i].t_ns && v[i].tokens == c[i].tokens && v[i].kind == c[i].kind;
    CHECK(same, "%s: rc %d, %zu of %zu chunks back, all equal: %d", what, rc, got, n, same);
    ll_buf_free(&b);
    free(v);
    return same;
}

static void test_edges(void)
{
    ll_rec_chunk one = {52000000, 1, 't'};
    round_trip(&one, 1, "one chunk");
    round_trip(NULL, 0, "no chunk");
    ll_rec_chunk eq[] = {{7, 1, 'a'}, {7, 1, 'a'}, {7, 3, 'a'}, {7, 3, 't'}, {7, 1, 'a'}};
    round_trip(eq, 5, "equal times, token counts and kinds changing");
    ll_rec_chunk big[] = {{0, 1, 'a'}, {T62, 1, 'a'}, {-T62, 2, 't'}, {T62, INT32_MAX, 'a'},
                          {-T62, 0, 'a'}, {-T62 + 1, 1, 't'}, {T62 - 1, 1, 't'}};
    round_trip(big, 7, "times at +/- 2^62 (a gap of 2^63 each way), 2^31 - 1 tokens, none");
    ll_rec_chunk back[] = {{1000, 1, 'a'}, {999, 1, 'a'}, {-5, 1, 'a'}};
    round_trip(back, 3, "times going back");

    /* many: a fixed-seed stream of thinking then answer, bursts and gaps */
    enum { N = 20000 };
    ll_rec_chunk *many = malloc(N * sizeof *many);
    uint64_t s = 42;
    int64_t t = 123456789;
    for (size_t i = 0; i < N && many; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int r = (int)(s >> 33);
        t += r % 4 == 0 ? 0 : r % 4 == 1 ? r % 1000 : r % 4 == 2 ? r % 50000000 : (int64_t)(r % 1000000) << 20;
        many[i] = (ll_rec_chunk){t, r % 7 == 0 ? 1 + r % 5 : 1, i < N / 3 ? 't' : 'a'};
    }
    if (many)
        round_trip(many, N, "20,000 chunks, seeded");
    free(many);
}

/* The bytes are the format: docs/records.md's example, and the sizes that
 * make the format worth having. */
static void test_bytes(void)
{
    ll_rec_chunk ex[] = {{52000000, 1, 't'}, {54000000, 1, 't'}, {900000000, 2, 'a'}};
    ll_buf b = {0};
    CHECK(ll_rec_chunks_pack(&b, ex, 3) == 0 && strcmp(b.p, "gaiXYwOApOgDgfzOzQwE") == 0,
          "docs/records.md's example packs to gaiXYwOApOgDgfzOzQwE: %s", b.p);
    ll_buf_reset(&b);
    ll_rec_chunk z = {0, 1, 'a'};
    CHECK(ll_rec_chunks_pack(&b, &z, 1) == 0 && strcmp(b.p, "AA==") == 0, "one event at 0: %s", b.p);
    /* 999 events after the first, one per microsecond: 2 bytes each, 4/3 in base64 */
    ll_rec_chunk us[1000];
    for (int i = 0; i < 1000; i++)
        us[i] = (ll_rec_chunk){INT64_C(5000000000) + i * 1000, 1, 'a'};
    ll_buf_reset(&b);
    CHECK(ll_rec_chunks_pack(&b, us, 1000) == 0 && b.len <= 2700, "1,000 events 1 us apart: %zu bytes", b.len);
    ll_buf_free(&b);
}

static int unpack_rc(const char *s)
{
    ll_rec_chunk *v = NULL;
    size_t n = 0, cap = 0;
    int rc = ll_rec_chunks_unpack(s, strlen(s), &v, &n, &cap);
    free(v);
    return rc;
}

static void test_malformed(void)
{
    CHECK(unpack_rc("A*A=") == LL_EPARSE, "a character outside base64");
    CHECK(unpack_rc("AA==AA==") == LL_EPARSE, "text after the padding");
    CHECK(unpack_rc("gA==") == LL_EPARSE, "a varint cut short (0x80 at the end)");
    CHECK(unpack_rc("AQ==") == LL_EPARSE, "a flag with no token count after it");
    CHECK(unpack_rc("/////////////w==") == LL_EPARSE, "a head longer than 65 bits");
    CHECK(unpack_rc("gICAgICAgICABA==") == LL_EPARSE, "a head's 10th byte with bits beyond 65");
    /* head x=1 dt=0, then tokens 2^31 (varint of 2^32) */
    CHECK(unpack_rc("AYCAgIAQ") == LL_ERANGE, "2^31 tokens");
    /* 2^62 + 1: head = 2*zigzag + 0 = 4*(2^62+1) */
    ll_rec_chunk far = {T62, 1, 'a'};
    ll_buf b = {0};
    CHECK(ll_rec_chunks_pack(&b, &far, 1) == 0 && unpack_rc(b.p) == 0, "2^62 itself reads");
    CHECK(unpack_rc("hICAgICAgICAAg==") == LL_ERANGE, "a time of 2^62 + 1 ns");
    ll_buf_free(&b);
    CHECK(unpack_rc("") == 0, "the empty list");
}

typedef struct seen {
    int n;
    size_t chunks[8];
    int64_t last_t[8];
} seen;

static int on_request(const ll_rec_request *rq, void *ctx)
{
    seen *s = ctx;
    if (s->n < 8) {
        s->chunks[s->n] = rq->n_chunks;
        s->last_t[s->n] = rq->n_chunks ? rq->chunks[rq->n_chunks - 1].t_ns : -1;
    }
    s->n++;
    return 0;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) < 0;
    return fclose(f) != 0 || bad ? -1 : 0;
}

#define RUN_LINE "{\"type\":\"run\",\"schema\":1,\"target\":{\"url\":\"u\"}}\n"
#define RQ(chunks) "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":1,\"end_ns\":2," chunks "}\n"

/* The reader: packed and list forms alike; malformed packed text, both
 * members, or a time out of range drop the record, counted. */
static void test_reader(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/mixed.jsonl", g_dir);
    CHECK(write_text(path, RUN_LINE RQ("\"chunks_packed\":\"gaiXYwOApOgDgfzOzQwE\"")
                               RQ("\"chunks\":[[52000000,1,\"t\"],[54000000,1,\"t\"],[900000000,2,\"a\"]]")
                               RQ("\"chunks_packed\":\"gA==\"")
                               RQ("\"chunks_packed\":\"AA==\",\"chunks\":[]")
                               RQ("\"chunks_packed\":\"hICAgICAgICAAg==\"")
                               RQ("\"chunks_packed\":7")
                               RQ("\"chunks_packed\":\"\"")) == 0,
          "write %s", path);
    seen s = {0};
    ll_rec_handlers h = {.on_request = on_request};
    ll_rec_read_stats st;
    char err[256];
    int rc = ll_rec_read(path, &h, &s, &st, err, sizeof err);
    CHECK(rc == 0 && s.n == 3 && s.chunks[0] == 3 && s.chunks[1] == 3 && s.last_t[0] == 900000000 &&
              s.last_t[1] == 900000000 && s.chunks[2] == 0,
          "packed, list and empty read alike: rc %d, %d requests, chunks %zu %zu %zu", rc, s.n, s.chunks[0],
          s.chunks[1], s.chunks[2]);
    CHECK(st.n_rejected == 4 && st.n_out_of_range == 1,
          "cut short, both members, 2^62 + 1, a number: 4 rejected (1 out of range): %zu, %zu", st.n_rejected,
          st.n_out_of_range);
}

/* Where each record's line lies (on_line), for a reader that comes back. */
typedef struct where {
    int n;
    uint64_t off[8];
    size_t len[8];
} where;

static int on_line(uint64_t off, size_t len, void *ctx)
{
    where *w = ((where **)ctx)[1];
    if (w->n < 8) {
        w->off[w->n] = off;
        w->len[w->n] = len;
    }
    w->n++;
    return 0;
}

static int on_request_at(const ll_rec_request *rq, void *ctx)
{
    return on_request(rq, ((seen **)ctx)[0]);
}

/* on_line gives each line's offset and length (a blank line and a CRLF
 * ending in between), and ll_rec_read_line reads the line found there as
 * the reader did; a malformed line or text after the object is LL_EPARSE,
 * a run line is rejected as a second one. */
static void test_lines(void)
{
    static const char *const lines[] = {RUN_LINE, "\n", RQ("\"chunks_packed\":\"gaiXYwOApOgDgfzOzQwE\""),
                                        "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":1,"
                                        "\"end_ns\":2,\"chunks\":[[5,1,\"t\"]]}\r\n"};
    char path[300], text[1024] = "", err[256];
    snprintf(path, sizeof path, "%s/lines.jsonl", g_dir);
    for (size_t i = 0; i < 4; i++)
        strcat(text, lines[i]);
    CHECK(write_text(path, text) == 0, "write %s", path);
    seen s = {0}, again = {0};
    where w = {0};
    void *ctx[2] = {&s, &w};
    ll_rec_handlers h = {.on_request = on_request_at, .on_line = on_line};
    CHECK(ll_rec_read(path, &h, ctx, NULL, err, sizeof err) == 0 && s.n == 2 && w.n == 3, "read: %s", err);
    size_t at[3] = {0, strlen(lines[0]) + 1, strlen(lines[0]) + 1 + strlen(lines[2])};
    size_t len[3] = {strlen(lines[0]) - 1, strlen(lines[2]) - 1, strlen(lines[3]) - 2};
    for (int i = 0; i < 3 && w.n == 3; i++)
        CHECK(w.off[i] == at[i] && w.len[i] == len[i], "line %d at %llu, %zu bytes (want %zu, %zu)", i,
              (unsigned long long)w.off[i], w.len[i], at[i], len[i]);
    ll_rec_handlers h1 = {.on_request = on_request};
    ll_rec_read_stats st = {0};
    for (int i = 1; i < 3 && w.n == 3; i++)
        CHECK(ll_rec_read_line(text + w.off[i], w.len[i], &h1, &again, &st, err, sizeof err) == 0, "line %d: %s",
              i, err);
    CHECK(again.n == 2 && again.chunks[0] == 3 && again.last_t[0] == s.last_t[0] && again.chunks[1] == 1 &&
              again.last_t[1] == 5,
          "the lines read back: %d requests", again.n);
    CHECK(ll_rec_read_line(text, strlen(lines[0]) - 1, &h1, &again, &st, err, sizeof err) == 0 && again.n == 2 &&
              st.n_rejected == 1,
          "a run line read back is a second one: rejected");
    CHECK(ll_rec_read_line("{\"type\":", 9, &h1, &again, NULL, err, sizeof err) == LL_EPARSE &&
              ll_rec_read_line("{} x", 4, &h1, &again, NULL, err, sizeof err) == LL_EPARSE &&
              ll_rec_read_line("{}  ", 4, &h1, &again, NULL, err, sizeof err) == 0,
          "malformed, text after the object, blanks after it");
}

/* compact then expand: the reader sees the same chunks in all three files,
 * and lines other than requests are copied byte for byte. */
static void test_convert(void)
{
    char a[300], b[300], c[300];
    snprintf(a, sizeof a, "%s/list.jsonl", g_dir);
    snprintf(b, sizeof b, "%s/packed.jsonl", g_dir);
    snprintf(c, sizeof c, "%s/expanded.jsonl", g_dir);
    const char *level = "{\"type\":\"level\",\"level\":0,\"concurrency\":1,\"start_ns\":0,\"x\":1.25e-7}\n";
    char text[2048];
    snprintf(text, sizeof text, "%s%s%s%s%s", RUN_LINE, level,
             RQ("\"error\":\"a \\\"chunks\\\":[ in text\",\"chunks\":[[4611686018427387904,3,\"t\"],[-4611686018427387904,1,\"a\"]]"),
             RQ("\"chunks\":[[1,1,\"x\"]]"), "{\"type\":\"request\",\"chunks\":[[1,1");
    CHECK(write_text(a, text) == 0, "write %s", a);
    ll_rec_convert_stats st;
    char err[256];
    int rc = ll_rec_convert(a, b, 1, &st, err, sizeof err);
    CHECK(rc == 0 && st.n_converted == 1 && st.n_chunks == 2 && st.n_kept_bad == 1 && st.n_truncated == 1,
          "compact: rc %d (%s), %zu converted, %zu chunks, %zu kept bad, %zu truncated", rc, err, st.n_converted,
          st.n_chunks, st.n_kept_bad, st.n_truncated);
    CHECK(ll_rec_convert(b, c, 0, &st, err, sizeof err) == 0 && st.n_converted == 1, "expand: %s", err);
    CHECK(ll_rec_convert(a, a, 1, &st, err, sizeof err) == LL_EINVAL, "refuses to write over its input");
    size_t lens[3];
    char *txt[3] = {NULL, NULL, NULL};
    const char *files[3] = {a, b, c};
    for (int k = 0; k < 3; k++)
        if (ll_read_file(files[k], &txt[k], &lens[k], err, sizeof err))
            txt[k] = NULL;
    for (int k = 1; k < 3; k++) {
        size_t head = strlen(RUN_LINE) + strlen(level);
        CHECK(txt[k] && lens[k] > head && memcmp(txt[k], text, head) == 0, "file %d: other lines as they were", k);
    }
    CHECK(txt[1] && strstr(txt[1], "\"chunks_packed\":\"") && strstr(txt[1], "[[1,1,\"x\"]]"),
          "packed, and the unreadable list kept as it was");
    CHECK(txt[2] && strstr(txt[2], "\"chunks\":[[4611686018427387904,3,\"t\"],[-4611686018427387904,1,\"a\"]]"),
          "expanded back to the list, digits exact");
    for (int k = 0; k < 3; k++) {
        seen s = {0};
        ll_rec_handlers h = {.on_request = on_request};
        ll_rec_read_stats rs;
        rc = ll_rec_read(files[k], &h, &s, &rs, err, sizeof err);
        CHECK(rc == 0 && s.n == 1 && s.chunks[0] == 2 && s.last_t[0] == -T62 && rs.n_rejected == 1,
              "file %d reads the same: rc %d, %d requests, %zu chunks, last %" PRId64 ", %zu rejected", k, rc, s.n,
              s.chunks[0], s.last_t[0], rs.n_rejected);
    }
    for (int k = 0; k < 3; k++)
        free(txt[k]);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s/ll_rchunks_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    char err[256];
    if (ll_mkdir_p(g_dir, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_edges();
    test_bytes();
    test_malformed();
    test_reader();
    test_lines();
    test_convert();
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_MAIN_END();
}
