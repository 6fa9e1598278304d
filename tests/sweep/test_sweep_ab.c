/* test_sweep_ab.c: `loadlaw sweep` with two targets (fork/exec of the real
 * binary): the A/B flags' usage errors (one line, exit 2), an interleaved
 * "ab" scenario on two bundled synthetic engines with --repeat 3 (the level
 * records in ABBA order: repeat, pair and seq on each side, one side loaded
 * at a time by the wall clock, and `loadlaw compare --json` pairs them), the
 * same scenario with --order sequential (repeat only, compared unpaired), and
 * two remote servers (`loadlaw serve` twice) with --url A --url B, a model
 * and an API key each (the keys appear in no file). Small and fast (time
 * scale 0.02); no timing assertions. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

static char g_tmp[256];

/* ---- usage errors ---------------------------------------------------------------- */

static void usage_case(const char *what, char *const args[], const char *needle)
{
    char errf[300];
    snprintf(errf, sizeof errf, "%s/usage.err", g_tmp);
    int rc = tu_run(LOADLAW_BIN, args, NULL, errf, 20);
    char *text = tu_slurp(errf);
    CHECK(rc == 2 && text && strstr(text, needle) && tu_count(text, "\n") == 1,
          "%s: exit 2 (got %d), one line naming '%s': %s", what, rc, needle, text ? text : "");
    free(text);
}

static void test_usage(void)
{
    char *a1[] = {"loadlaw", "sweep", "--url", "http://127.0.0.1:1", "--model", "x", "--model", "y", NULL};
    usage_case("one --url, --model twice", a1, "--model given twice but one --url");
    char *a2[] = {"loadlaw", "sweep", "--url", "http://127.0.0.1:1", "--api-key", "K1", "--api-key", "K2", NULL};
    usage_case("one --url, --api-key twice", a2, "--api-key given twice but one --url");
    char *a3[] = {"loadlaw", "sweep", "--url", "http://a:1", "--url", "http://b:1", "--url", "http://c:1", NULL};
    usage_case("three --url", a3, "--url: at most two");
    char *a4[] = {"loadlaw", "sweep", "--url", "http://a:1", "--url", "http://b:1", "--repeat", "0", NULL};
    usage_case("--repeat 0", a4, "--repeat: expected an integer in [1, 1000]");
    char *a5[] = {"loadlaw", "sweep", "--url", "http://a:1", "--model", "m", "--repeat", "2", NULL};
    usage_case("--repeat with one target", a5, "--repeat: needs two targets");
    char *a6[] = {"loadlaw", "sweep", "--url", "http://a:1", "--url", "http://b:1", "--order", "abba", NULL};
    usage_case("--order abba", a6, "--order: expected interleaved or sequential");
    char *a7[] = {"loadlaw", "sweep", "--url", "http://a:1", "--url", "http://b:1", "--engine", "law=1+1n", NULL};
    usage_case("--engine with two --url", a7, "--engine with two --url");
    char *a8[] = {"loadlaw", "sweep", "--url", "http://a:1", "--url", "ftp://b:1", "--model", "m", NULL};
    usage_case("a second --url that is not http", a8, "--url 'ftp://b:1' is not an http(s) URL");
    char *a9[] = {"loadlaw", "sweep", "--order", "sequential", "-c", "1", NULL};
    usage_case("--order without two targets", a9, "--order: needs two targets");
    char *a10[] = {"loadlaw", "sweep", "--model", "x", "--model", "y", "--model", "z", NULL};
    usage_case("--model three times", a10, "--model: at most two");
}

/* ---- records of an A/B --------------------------------------------------------- */

typedef struct lvrec {
    int c, repeat, pair, seq;
    int64_t start_wall_ns, end_wall_ns;
} lvrec;

typedef struct side_recs {
    int64_t epoch_wall_ns;
    lvrec lv[64];
    int n;
} side_recs;

static int on_line(const cJSON *o, size_t n, void *ctx)
{
    side_recs *s = ctx;
    const char *type = ll_json_str(o, "type", "");
    (void)n;
    if (!strcmp(type, "run")) {
        s->epoch_wall_ns = (int64_t)ll_json_num(o, "epoch_wall_ns", 0);
    } else if (!strcmp(type, "level") && s->n < 64) {
        lvrec *L = &s->lv[s->n++];
        L->c = (int)ll_json_num(o, "concurrency", -1);
        L->repeat = (int)ll_json_num(o, "repeat", -1);
        L->pair = (int)ll_json_num(o, "pair", -1);
        L->seq = (int)ll_json_num(o, "seq", -1);
        L->start_wall_ns = s->epoch_wall_ns + (int64_t)ll_json_num(o, "start_ns", 0);
    } else if (!strcmp(type, "level_end")) {
        int li = (int)ll_json_num(o, "level", -1);
        if (li >= 0 && li < s->n)
            s->lv[li].end_wall_ns = s->epoch_wall_ns + (int64_t)ll_json_num(o, "end_ns", 0);
    }
    return 0;
}

static void read_side(const char *dir, side_recs *s)
{
    char path[400], err[256] = "";
    size_t skipped = 0;
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    CHECK(ll_jsonl_foreach(path, on_line, s, &skipped, err, sizeof err) == 0, "%s: %s", path, err);
}

static void write_scenario(const char *path)
{
    tu_write_file(path, "{\"name\":\"ab\",\"engine\":\"backend=synthetic,time_scale=0.02,seed=1\",\n"
               " \"request\":{\"max_tokens\":16,\"think_tokens\":0,\"ignore_eos\":true,\"timeout_s\":60},\n"
               " \"prompts\":{\"source\":\"synthetic\",\"words\":{\"dist\":\"fixed\",\"value\":10},\"count\":32},\n"
               " \"load\":{\"drain_s\":2,\"requests\":4},\"levels\":[{\"concurrency\":1},{\"concurrency\":4}],\n"
               " \"ab\":{\"a\":{\"name\":\"slow\",\"engine\":\"law=52+30n\"},"
               "\"b\":{\"name\":\"fast\",\"engine\":\"law=52+10n\"}}}\n");
}

/* compare --json of dir/a_name and dir/b_name into out; its exit status. */
static int compare_json(const char *a, const char *b, const char *out)
{
    char errf[400];
    snprintf(errf, sizeof errf, "%s.err", out);
    char *args[] = {"loadlaw", "compare", (char *)a, (char *)b, "--json", "--resamples", "200", NULL};
    return tu_run(LOADLAW_BIN, args, out, errf, 60);
}

static void test_interleaved(void)
{
    char scn[300], dir[300], out[300], errf[300], da[400], db[400], cj[400];
    snprintf(scn, sizeof scn, "%s/ab.json", g_tmp);
    snprintf(dir, sizeof dir, "%s/inter", g_tmp);
    snprintf(out, sizeof out, "%s/inter.out", g_tmp);
    snprintf(errf, sizeof errf, "%s/inter.err", g_tmp);
    write_scenario(scn);
    char *args[] = {"loadlaw", "sweep", scn, "-o", dir, "-q", "--no-report", "--gpu", "off", "--repeat", "3", NULL};
    int rc = tu_run(LOADLAW_BIN, args, out, errf, 90);
    CHECK(rc == 0, "interleaved ab: exit 0, got %d (see %s)", rc, errf);
    snprintf(da, sizeof da, "%s/slow", dir);
    snprintf(db, sizeof db, "%s/fast", dir);
    side_recs s[2];
    read_side(da, &s[0]);
    read_side(db, &s[1]);
    CHECK(s[0].n == 6 && s[1].n == 6, "6 levels a side (2 levels x 3 repeats): %d %d", s[0].n, s[1].n);
    /* the order: per level, ABBAAB: A at seq 0,3,4 and B at 1,2,5 */
    static const int want_seq[2][6] = {{0, 3, 4, 6, 9, 10}, {1, 2, 5, 7, 8, 11}};
    static const int want_c[6] = {1, 1, 1, 4, 4, 4};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 6 && i < s[k].n; i++) {
            const lvrec *L = &s[k].lv[i];
            CHECK(L->c == want_c[i] && L->repeat == i % 3 && L->pair == (i / 3) * 3 + i % 3 && L->seq == want_seq[k][i],
                  "side %c level %d: C=%d repeat %d pair %d seq %d", 'a' + k, i, L->c, L->repeat, L->pair, L->seq);
        }
    /* One side loaded at a time: by the wall clock, the level at seq k+1
     * starts after the one at seq k ended (1 ms of slack for the two run
     * clocks' wall-clock labels). */
    const lvrec *by_seq[12] = {0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s[k].n; i++)
            if (s[k].lv[i].seq >= 0 && s[k].lv[i].seq < 12)
                by_seq[s[k].lv[i].seq] = &s[k].lv[i];
    int ordered = 1;
    for (int q = 0; q + 1 < 12; q++)
        ordered &= by_seq[q] && by_seq[q + 1] && by_seq[q + 1]->start_wall_ns + 1000000 >= by_seq[q]->end_wall_ns;
    CHECK(ordered, "levels ran one after the other in seq order");
    CHECK(tu_file_has(out, "paired (interleaved)") && tu_file_has(out, "(3 pairs)"),
          "the sweep's compare is paired");
    snprintf(cj, sizeof cj, "%s/inter.json", g_tmp);
    CHECK(compare_json(da, db, cj) == 0, "compare reads the run");
    CHECK(tu_file_has(cj, "\"paired\":\ttrue") && tu_file_has(cj, "\"ratio_method\":\t\"paired\"") &&
              tu_file_has(cj, "\"n_pairs\":\t3"),
          "compare --json: paired, 3 pairs a level");
    /* every command reads a side as an ordinary run */
    char fout[400];
    snprintf(fout, sizeof fout, "%s/fit.out", g_tmp);
    char *fa[] = {"loadlaw", "fit", da, "--json", NULL};
    CHECK(tu_run(LOADLAW_BIN, fa, fout, errf, 30) == 0 && tu_file_has(fout, "\"levels\""),
          "loadlaw fit reads side a");
}

static void test_sequential(void)
{
    char scn[300], dir[300], out[300], errf[300], da[400], db[400], cj[400];
    snprintf(scn, sizeof scn, "%s/ab.json", g_tmp);
    snprintf(dir, sizeof dir, "%s/seq", g_tmp);
    snprintf(out, sizeof out, "%s/seq.out", g_tmp);
    snprintf(errf, sizeof errf, "%s/seq.err", g_tmp);
    char *args[] = {"loadlaw", "sweep", scn, "-o", dir, "-q", "--no-report", "--gpu", "off", "--order", "sequential",
                    "--repeat", "2", NULL};
    int rc = tu_run(LOADLAW_BIN, args, out, errf, 90);
    CHECK(rc == 0, "sequential ab: exit 0, got %d", rc);
    snprintf(da, sizeof da, "%s/slow", dir);
    snprintf(db, sizeof db, "%s/fast", dir);
    side_recs s[2];
    read_side(da, &s[0]);
    read_side(db, &s[1]);
    CHECK(s[0].n == 4 && s[1].n == 4, "4 levels a side: %d %d", s[0].n, s[1].n);
    for (int i = 0; i < s[0].n; i++)
        CHECK(s[0].lv[i].repeat == i % 2 && s[0].lv[i].pair < 0 && s[0].lv[i].seq < 0, "sequential: repeat only");
    CHECK(s[0].n && s[1].n && s[1].lv[0].start_wall_ns >= s[0].lv[s[0].n - 1].end_wall_ns,
          "all of A before all of B");
    snprintf(cj, sizeof cj, "%s/seq.json", g_tmp);
    CHECK(compare_json(da, db, cj) == 0 && tu_file_has(cj, "\"paired\":\tfalse") &&
              tu_file_has(cj, "\"ratio_method\":\t\"bootstrap\""),
          "compare of a sequential run: unpaired, as before");
}

/* `loadlaw serve` on an ephemeral port; its URL from its stdout. */
static pid_t serve(const char *law, const char *model, const char *tag, char *url, size_t n)
{
    char outf[300], errf[300];
    snprintf(outf, sizeof outf, "%s/serve-%s.out", g_tmp, tag);
    snprintf(errf, sizeof errf, "%s/serve-%s.err", g_tmp, tag);
    pid_t p = fork();
    if (p == 0) {
        FILE *e = freopen(errf, "w", stderr);
        FILE *o = freopen(outf, "w", stdout);
        (void)e;
        (void)o;
        execl(LOADLAW_BIN, "loadlaw", "serve", "--port", "0", "--law", law, "--time-scale", "0.02", "--model", model,
              (char *)NULL);
        _exit(127);
    }
    url[0] = 0;
    for (int i = 0; i < 500 && !url[0]; i++) {
        char *text = tu_slurp(outf);
        if (text) {
            char *h = strstr(text, "http://");
            if (h && strchr(h, '\n')) {
                size_t l = strcspn(h, " \n");
                snprintf(url, n, "%.*s", (int)l, h);
            }
        }
        free(text);
        if (!url[0])
            usleep(10000);
    }
    return p;
}

static void test_two_urls(void)
{
    char ua[200], ub[200], dir[300], out[300], errf[300], path[400];
    pid_t pa = serve("52+30n", "model-a", "a", ua, sizeof ua), pb = serve("52+10n", "model-b", "b", ub, sizeof ub);
    CHECK(ua[0] && ub[0], "two servers up (%s, %s)", ua, ub);
    snprintf(dir, sizeof dir, "%s/urls", g_tmp);
    snprintf(out, sizeof out, "%s/urls.out", g_tmp);
    snprintf(errf, sizeof errf, "%s/urls.err", g_tmp);
    char *args[] = {"loadlaw", "sweep", "--url", ua, "--url", ub, "--model", "model-a", "--model", "model-b",
                    "--api-key", "sk-SECRET-AAA", "--api-key", "sk-SECRET-BBB", "-c", "1,2", "-n", "4",
                    "--max-tokens", "16", "--prompt-tokens", "16", "--repeat", "2", "-o", dir, "-q",
                    "--no-report", "--gpu", "off", NULL};
    int rc = ua[0] && ub[0] ? tu_run(LOADLAW_BIN, args, out, errf, 90) : -1;
    CHECK(rc == 0, "two --url: exit 0, got %d (see %s)", rc, errf);
    const char *files[] = {"a/records.jsonl", "b/records.jsonl", "a/summary.json", "b/summary.json"};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        CHECK(!tu_file_has(path, "SECRET"), "%s: no API key", files[k]);
    }
    CHECK(!tu_file_has(out, "SECRET") && !tu_file_has(errf, "SECRET"), "no API key on stdout or stderr");
    snprintf(path, sizeof path, "%s/a/records.jsonl", dir);
    CHECK(tu_file_has(path, "\"model\":\"model-a\"") && tu_file_has(path, ua), "side a: its URL and model");
    snprintf(path, sizeof path, "%s/b/records.jsonl", dir);
    CHECK(tu_file_has(path, "\"model\":\"model-b\"") && tu_file_has(path, ub) && tu_file_has(path, "\"pair\":"),
          "side b: its URL and model, paired levels");
    CHECK(tu_file_has(out, "(2 pairs)"), "compared by pairs");
    kill(pa, SIGTERM);
    kill(pb, SIGTERM);
    waitpid(pa, NULL, 0);
    waitpid(pb, NULL, 0);
}

int main(void)
{
    if (tu_tmpdir("test_sweep_ab", g_tmp, sizeof g_tmp))
        return 1;
    test_usage();
    test_interleaved();
    test_sequential();
    test_two_urls();
    if (!tu_fail)
        tu_rmtree(g_tmp);
    TEST_MAIN_END();
}
