/* test_sweep_samples.c: the workload scenarios shipped in scenarios/ run as
 * a user runs them (`loadlaw sweep scenarios/X.json`, the bundled engine)
 * and their records say the workload:
 *  - multi-turn.json: 32 requests, all ok: conversations 0..7 each with
 *    turns 1..4 once; turn 1 has nothing cached, and every later turn has
 *    more prompt tokens than the turn before in its conversation;
 *  - shared-prefix.json: 48 requests, all ok, each naming group id mod 4;
 *    the engine's prefix cache is reset before each level (load.cache
 *    auto), so in each level one request of each group has nothing cached
 *    and every other one at least the shared 512 tokens' 384 words less a
 *    block;
 *  - trace-mooncake-sample.json: 80 requests, all ok, rows 0..79 once, each
 *    asking its row's output_length (read from the trace file here), and
 *    some served from the cache (rows naming the same leading blocks).
 * Each sample must also finish in under a minute (its ctest TIMEOUT bounds
 * the three together).
 *
 * argv: none (LOADLAW_BIN, LOADLAW_SOURCE_DIR). Real time: about 30 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

#define MAXREQ 128

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int is_ok(const cJSON *o)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "status");
    return cJSON_IsString(s) && !strcmp(s->valuestring, "ok");
}

/* Run scenarios/NAME.json; its request records into rq (at most MAXREQ);
 * how many; *secs the run's wall time. */
static size_t run_sample(const char *dir, const char *name, cJSON **rq, double *secs)
{
    char cmd[2048], path[512];
    int64_t t0 = ll_now_ns();
    snprintf(cmd, sizeof cmd,
             LOADLAW_BIN " sweep " LOADLAW_SOURCE_DIR "/scenarios/%s.json -q --no-report -o %s/%s > %s/%s.out 2>&1",
             name, dir, name, dir, name);
    CHECK(tu_sh(cmd) == 0, "scenarios/%s.json ran (see %s/%s.out)", name, dir, name);
    *secs = (double)(ll_now_ns() - t0) / 1e9;
    CHECK(*secs < 60, "scenarios/%s.json in under a minute: %.1f s", name, *secs);
    snprintf(path, sizeof path, "%s/%s/records.jsonl", dir, name);
    char *text = tu_slurp(path);
    size_t n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "request") && n < MAXREQ)
            rq[n++] = o;
        else
            cJSON_Delete(o);
    }
    free(text);
    return n;
}

static void free_all(cJSON **rq, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(rq[i]);
}

static void multi_turn(const char *dir)
{
    cJSON *rq[MAXREQ];
    double secs, prompt[8][5] = {{0}};
    int seen[8][5] = {{0}};
    size_t n = run_sample(dir, "multi-turn", rq, &secs), ok = 0, once = 0, growing = 0, first_cold = 0;
    for (size_t i = 0; i < n; i++) {
        double s = num(rq[i], "session"), t = num(rq[i], "turn");
        ok += is_ok(rq[i]);
        if (s >= 0 && s < 8 && t >= 1 && t <= 4) {
            seen[(int)s][(int)t]++;
            prompt[(int)s][(int)t] = num(rq[i], "prompt_tok");
            first_cold += t == 1 && num(rq[i], "cached_tok") == 0;
        }
    }
    for (int s = 0; s < 8; s++)
        for (int t = 1; t <= 4; t++) {
            once += seen[s][t] == 1;
            growing += t > 1 && prompt[s][t] > prompt[s][t - 1];
        }
    CHECK(n == 32 && ok == 32 && once == 32, "multi-turn: %zu requests, %zu ok, %zu (session, turn) once", n, ok,
          once);
    CHECK(first_cold == 8 && growing == 24, "multi-turn: turn 1 uncached (%zu of 8), prompts grow by turn (%zu of 24)",
          first_cold, growing);
    printf("multi-turn: %.1f s\n", secs);
    free_all(rq, n);
}

static void shared_prefix(const char *dir)
{
    cJSON *rq[MAXREQ];
    double secs;
    size_t n = run_sample(dir, "shared-prefix", rq, &secs), ok = 0, group = 0, warm = 0;
    int cold[3][4] = {{0}}, odd = 0; /* (level, group): requests with nothing cached */
    for (size_t i = 0; i < n; i++) {
        double id = num(rq[i], "id"), c = num(rq[i], "cached_tok"), l = num(rq[i], "level");
        int g = (int)fmod(id, 4);
        ok += is_ok(rq[i]);
        group += num(rq[i], "prefix_group") == g;
        if (c == 0 && l >= 0 && l < 3)
            cold[(int)l][g]++;
        else
            warm += c >= 384 - 16;
    }
    for (int l = 0; l < 3; l++)
        for (int g = 0; g < 4; g++)
            odd += cold[l][g] != 1;
    CHECK(n == 48 && ok == 48 && group == 48, "shared-prefix: %zu requests, %zu ok, %zu name group id mod 4", n, ok,
          group);
    CHECK(odd == 0 && warm == 36, "shared-prefix: in each level one of each group cold (%d (level, group) not), "
          "the rest served the prefix: %zu of 36", odd, warm);
    printf("shared-prefix: %.1f s\n", secs);
    free_all(rq, n);
}

/* The sample trace's output lengths, in row order; how many rows. */
static size_t trace_outputs(int *out, size_t cap)
{
    char *text = tu_slurp(LOADLAW_SOURCE_DIR "/scenarios/traces/mooncake-sample.jsonl");
    size_t n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < cap; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        out[n++] = (int)num(o, "output_length");
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

static void trace_sample(const char *dir)
{
    cJSON *rq[MAXREQ];
    int outs[MAXREQ], seen[MAXREQ] = {0};
    double secs;
    size_t rows = trace_outputs(outs, MAXREQ);
    size_t n = run_sample(dir, "trace-mooncake-sample", rq, &secs), ok = 0, asked = 0, once = 0, cached = 0;
    for (size_t i = 0; i < n; i++) {
        double r = num(rq[i], "trace_row");
        ok += is_ok(rq[i]);
        cached += num(rq[i], "cached_tok") > 0;
        if (r >= 0 && r < (double)rows) {
            seen[(int)r]++;
            asked += num(rq[i], "max_tokens") == outs[(int)r];
        }
    }
    for (size_t k = 0; k < rows; k++)
        once += seen[k] == 1;
    CHECK(rows == 80 && n == 80 && ok == 80 && once == 80, "trace sample: %zu rows, %zu requests, %zu ok, %zu once",
          rows, n, ok, once);
    CHECK(asked == 80, "trace sample: each asks its row's output_length: %zu of 80", asked);
    CHECK(cached >= 10, "trace sample: rows sharing leading blocks served from the cache: %zu", cached);
    printf("trace-mooncake-sample: %.1f s\n", secs);
    free_all(rq, n);
}

int main(void)
{
    char dir[256];
    if (tu_tmpdir("ll_test_sweep_samples", dir, sizeof dir))
        return 1;
    multi_turn(dir);
    shared_prefix(dir);
    trace_sample(dir);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
