/* test_fit_cli.c: `loadlaw fit` as a user runs it: on a constructed run
 * directory (sim.h), --json and the summary, and its exit codes.
 * argv[1]: the loadlaw binary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "sim.h"
#include "testutil.h"
#include "tsupport.h"

static const char *bin;

/* The first line of `fit`, of `plan` and of the report's law section is the
 * chosen model's (fit/headline.c): want, e.g. "model (context): ". */
static void check_first_lines(const char *dir, const char *want)
{
    const char *cmds[] = {"fit '%s'", "plan '%s' --itl-slo 500ms", "report '%s' -o '%s/h.html' >/dev/null && "
                                                                   "grep -o '<div class=law>[^<]*' '%s/h.html'"};
    ll_buf out = {0};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char sub[1024], cmd[1400];
        snprintf(sub, sizeof sub, cmds[i], dir, dir, dir);
        snprintf(cmd, sizeof cmd, "'%s' %s", bin, sub);
        int rc = tu_sh_capture(cmd, &out);
        const char *p = out.p ? out.p : "";
        if (strncmp(p, "<div class=law>", 15) == 0)
            p += 15;
        CHECK(rc == 0 && strncmp(p, want, strlen(want)) == 0, "`%s`: first line \"%s...\": %.200s", sub, want, p);
    }
    ll_buf_free(&out);
}

/* 20 + 2n + 0.5c (c per 1k context tokens), prompts that vary: the context
 * model leads; the line's run leads with the line. */
static void test_first_lines(const char *dir)
{
    char sub[300], rec[400];
    snprintf(sub, sizeof sub, "%s/ctx", dir);
    snprintf(rec, sizeof rec, "%s/records.jsonl", sub);
    CHECK(mkdir(sub, 0755) == 0, "mkdir ctx");
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 12, 16};
    sim_set_levels(&c, cs, 6, 12);
    c.a_ms = 20;
    c.b_ms = 2;
    c.c_ms_per_ktok = 0.5;
    c.prompt_tok = 2000;
    c.prompt_spread = 0.9;
    c.think_tok = 0;
    c.max_tokens = 64;
    c.jitter_frac = 0.03;
    c.prefill_per_step = 1;
    c.seed = 11;
    sim_stats st;
    CHECK(sim_write(rec, &c, &st) == 0, "sim_write ctx");
    check_first_lines(sub, "model (context): step(N, K) = ");
    check_first_lines(dir, "model (linear): step(N) = ");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_fit_cli LOADLAW\n");
        return 2;
    }
    bin = argv[1];
    char dir[] = "fit_cli_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char rec[256], cmd[1024];
    snprintf(rec, sizeof rec, "%s/records.jsonl", dir);
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16};
    sim_set_levels(&c, cs, 5, 2);
    c.a_ms = 52;
    c.b_ms = 30;
    c.prefill_per_step = 3;
    c.p_ms_per_tok = 0.1;
    c.fail_every = 7;
    sim_stats st;
    CHECK(sim_write(rec, &c, &st) == 0, "sim_write");

    ll_buf out = {0};
    snprintf(cmd, sizeof cmd, "'%s' fit '%s' --json", bin, dir);
    int rc = tu_sh_capture(cmd, &out);
    CHECK(rc == 0, "fit --json exit %d", rc);
    cJSON *j = out.p ? cJSON_ParseWithOpts(out.p, NULL, 1) : NULL;
    CHECK(j != NULL, "--json prints one JSON object");
    if (j) {
        const cJSON *law = cJSON_GetObjectItemCaseSensitive(j, "law");
        const char *keys[] = {"a_ms", "b_ms", "a_ci_ms", "b_ci_ms", "r2", "n_samples", "model"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            CHECK(cJSON_GetObjectItemCaseSensitive(law, keys[k]) != NULL, "law.%s", keys[k]);
        CHECK_NEAR(ll_json_num(law, "a_ms", 0), 52, 1e-6, "a_ms");
        CHECK_NEAR(ll_json_num(law, "b_ms", 0), 30, 1e-6, "b_ms");
        CHECK_NEAR(ll_json_num(j, "asymptote_tok_per_s", 0), 1000.0 / 30, 1e-6, "asymptote");
        CHECK_NEAR(ll_json_num(j, "n_half", 0), 52.0 / 30, 1e-6, "n_half");
        const cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "levels");
        CHECK(cJSON_GetArraySize(lv) == 5, "5 levels");
        const cJSON *l;
        int i = 0;
        cJSON_ArrayForEach(l, lv) {
            CHECK(ll_json_num(l, "concurrency", 0) == cs[i], "level %d concurrency", i);
            CHECK(cJSON_GetObjectItemCaseSensitive(l, "steady_tok_per_s") &&
                      cJSON_GetObjectItemCaseSensitive(l, "predicted_tok_per_s") &&
                      cJSON_GetObjectItemCaseSensitive(l, "ramp_s"),
                  "level %d keys", i);
            CHECK_NEAR(ll_json_num(l, "ramp_s", -1),
                       (double)(st.lv[i].ramp_end_ns - st.lv[i].start_ns) / 1e9, 1e-9,
                       "ramp_s");
            /* The token-rate series, thinking and answer apart: its bins hold
             * every token of the level (5 thinking, then answer, per request). */
            const cJSON *tr = cJSON_GetObjectItemCaseSensitive(l, "token_rate");
            const cJSON *th = cJSON_GetObjectItemCaseSensitive(tr, "think_tok_per_s");
            const cJSON *an = cJSON_GetObjectItemCaseSensitive(tr, "answer_tok_per_s");
            double bin_s = ll_json_num(tr, "bin_s", NAN), sum_t = 0, sum_a = 0;
            CHECK(cJSON_GetArraySize(th) > 0 && cJSON_GetArraySize(th) == cJSON_GetArraySize(an) && bin_s > 0,
                  "level %d token_rate series", i);
            const cJSON *x;
            cJSON_ArrayForEach(x, th) sum_t += x->valuedouble * bin_s;
            cJSON_ArrayForEach(x, an) sum_a += x->valuedouble * bin_s;
            CHECK_REL(sum_t + sum_a, ll_json_num(l, "tokens", -1), 1e-9, "token_rate holds all tokens");
            CHECK(sum_t > 0 && sum_a > sum_t, "level %d: thinking %g, answer %g tokens", i, sum_t, sum_a);
            i++;
        }
        CHECK(ll_json_num(cJSON_GetObjectItemCaseSensitive(j, "excluded"), "failed", 0) > 0,
              "failed requests reported");
        cJSON_Delete(j);
    }

    snprintf(cmd, sizeof cmd, "'%s' fit '%s'", bin, dir);
    rc = tu_sh_capture(cmd, &out);
    CHECK(rc == 0, "fit exit %d", rc);
    CHECK(out.p && strstr(out.p, "step(N) = 52 + 30*N ms"), "summary law line: %s",
          out.p ? out.p : "");
    CHECK(out.p && strstr(out.p, "model check: linear"), "summary model check");
    CHECK(out.p && strstr(out.p, "failed requests"), "summary says what was left out");

    /* The law line on a quiet run: steps jitter 0.02%, so the intervals are
     * about 0.01 ms wide and "%.4g" printed "[52, 52]". The line must show
     * distinct bounds, and, with the run line's engine_law carrying the time
     * scale as data, the law in the configured units: the sim plays 52+30n,
     * which at time_scale 0.1 is the user's 520+300n. */
    char dir2[300], rec2[400];
    snprintf(dir2, sizeof dir2, "%s/quiet", dir);
    snprintf(rec2, sizeof rec2, "%s/records.jsonl", dir2);
    CHECK(mkdir(dir2, 0755) == 0, "mkdir quiet");
    c.jitter_frac = 0.0002;
    c.fail_every = 0;
    c.seed = 7;
    c.time_scale = 0.1;
    CHECK(sim_write(rec2, &c, &st) == 0, "sim_write quiet");
    snprintf(cmd, sizeof cmd, "'%s' fit '%s'", bin, dir2);
    CHECK(tu_sh_capture(cmd, &out) == 0 && out.p, "fit quiet");
    if (out.p) {
        char *nl = strchr(out.p, '\n');
        if (nl)
            *nl = '\0';
        printf("quiet law line: %s\n", out.p);
        double alo = NAN, ahi = NAN, blo = NAN, bhi = NAN;
        const char *pa = strstr(out.p, "a 95% ["), *pb = strstr(out.p, "b 95% [");
        CHECK(pa && pb && sscanf(pa, "a 95%% [%lf, %lf]", &alo, &ahi) == 2 &&
                  sscanf(pb, "b 95%% [%lf, %lf]", &blo, &bhi) == 2,
              "CIs in the law line: %s", out.p);
        CHECK(alo < 52 && 52 < ahi && ahi - alo < 0.5, "a interval [%g, %g] printed distinct, covers 52", alo, ahi);
        CHECK(blo < 30 && 30 < bhi && bhi - blo < 0.5, "b interval [%g, %g] printed distinct, covers 30", blo, bhi);
        const char *u = strstr(out.p, "]) = ");
        double ua = NAN, ub = NAN;
        CHECK(u && sscanf(u, "]) = %lf + %lf*N ms at time scale 1", &ua, &ub) == 2, "unscaled law: %s", out.p);
        CHECK(fabs(ua - 520) < 2 && fabs(ub - 300) < 2, "unscaled law %g + %g*N", ua, ub);
        CHECK(strstr(out.p, "(engine law 520+300n+1p)") != NULL, "engine law quoted, its prefill term too: %s", out.p);
    }

    test_first_lines(dir);
    snprintf(cmd, sizeof cmd, "'%s' fit 2>/dev/null", bin);
    CHECK(tu_sh_capture(cmd, &out) == 2, "no RUN_DIR: usage error 2");
    snprintf(cmd, sizeof cmd, "'%s' fit '%s' --bogus 2>/dev/null", bin, dir);
    CHECK(tu_sh_capture(cmd, &out) == 2, "unknown option: 2");
    snprintf(cmd, sizeof cmd, "'%s' fit '%s/missing' 2>&1", bin, dir);
    CHECK(tu_sh_capture(cmd, &out) == 1, "missing run dir: 1");
    CHECK(out.p && strstr(out.p, "No such file"), "missing run dir message: %s",
          out.p ? out.p : "");
    snprintf(cmd, sizeof cmd, "'%s' fit --help", bin);
    CHECK(tu_sh_capture(cmd, &out) == 0 && out.p && strstr(out.p, "usage: loadlaw fit"), "--help");

    ll_buf_free(&out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (tu_fail == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
