/* test_fit_burst.c: fit_analyze flags a level whose client read in bursts
 * (sim.h burst_every), in the level's field, its note and the JSON, and
 * leaves the clean levels of the same run unflagged. Also the client's own
 * pace (fit.h FIT_CLIENT_*: a saturated worker thread in level_end "client"),
 * the reason given when there is no law (one concurrency swept), and the
 * per-level notes on prompt drift and attributed token counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common.h"
#include "fit.h"
#include "fit_internal.h"
#include "report.h"
#include "sim.h"
#include "testutil.h"

static const char *note_for(const fit_result *r, int conc)
{
    char key[32];
    snprintf(key, sizeof key, "(C=%d)", conc);
    for (size_t i = 0; i < r->n_notes; i++)
        if (strstr(r->notes[i], key) && strstr(r->notes[i], "read in bursts"))
            return r->notes[i];
    return NULL;
}

/* Levels C = 1..16 with prefill interleaved and jitter; level 3 (C=8) read
 * three chunks at a time: two gaps in three are 20 us, the third three steps. */
static void test_burst_level(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8, 16};
    sim_set_levels(&c, cs, 5, 4);
    c.prefill_per_step = 2;
    c.jitter_frac = 0.05;
    c.burst_every = 3;
    c.burst_level = 3;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    int rc = sim_fit(path, &c, NULL, &st, &run, &r, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc)
        return;
    CHECK(r->n_levels == 5, "5 levels (%zu)", r->n_levels);
    for (size_t i = 0; i < r->n_levels && r->n_levels == 5; i++) {
        const fit_level *L = &r->levels[i];
        if (i == 3) {
            /* 20 chunks after the first token in reads of 3: 12 of 19 gaps short
             * per stream; the bound is a tenth of a multi-step gap, far above 20 us. */
            CHECK_REL(L->burst_gap_frac, 12.0 / 19.0, 0.02, "C=8 burst_gap_frac");
            CHECK(L->burst_gap_ms > 0.02 && L->burst_gap_ms < sim_law(&c, 8),
                  "C=8 bound %g ms between 20 us and a step", L->burst_gap_ms);
            const char *n = note_for(r, 8);
            CHECK(n && strstr(n, "63% of gaps under") && strstr(n, "unreliable"),
                  "C=8 note: %s", n ? n : "(none)");
        } else {
            CHECK(L->burst_gap_frac == 0, "C=%d clean: burst_gap_frac %g", L->concurrency,
                  L->burst_gap_frac);
            CHECK(note_for(r, L->concurrency) == NULL, "C=%d: no burst note", L->concurrency);
        }
    }
    cJSON *j = rpt_fit_to_json(r);
    CHECK(j != NULL, "json");
    if (j) {
        cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "levels");
        cJSON *l3 = cJSON_GetArrayItem(lv, 3), *l0 = cJSON_GetArrayItem(lv, 0);
        cJSON *f3 = cJSON_GetObjectItemCaseSensitive(l3, "burst_gap_frac");
        cJSON *f0 = cJSON_GetObjectItemCaseSensitive(l0, "burst_gap_frac");
        CHECK(cJSON_IsNumber(f3) && fabs(f3->valuedouble - 12.0 / 19.0) < 0.02,
              "json C=8 burst_gap_frac");
        CHECK(cJSON_IsNumber(f0) && f0->valuedouble == 0, "json C=1 burst_gap_frac 0");
        cJSON_Delete(j);
    }
    fit_result_free(r);
    fit_run_free(run);
}

/* Too few samples to judge: NAN, no note. */
static void test_burst_few(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1};
    sim_set_levels(&c, cs, 1, 1);
    c.max_tokens = 5;
    c.burst_every = 2;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    CHECK(sim_fit(path, &c, NULL, &st, &run, &r, err, sizeof err) == 0, "%s", err);
    if (r) {
        CHECK(r->n_levels == 1 && isnan(r->levels[0].burst_gap_frac), "4 samples: NAN");
        CHECK(note_for(r, 1) == NULL, "no burst note on 4 samples");
    }
    fit_result_free(r);
    fit_run_free(run);
}

static const char *note_with(const fit_result *r, const char *a, const char *b)
{
    for (size_t i = 0; i < r->n_notes; i++)
        if (strstr(r->notes[i], a) && (!b || strstr(r->notes[i], b)))
            return r->notes[i];
    return NULL;
}

static fit_result *analyze_sim(const char *path, const sim_cfg *c, fit_run **run)
{
    sim_stats st;
    char err[512] = "";
    fit_result *r;
    CHECK(sim_fit(path, c, NULL, &st, run, &r, err, sizeof err) == 0, "%s", err);
    return r;
}

/* What rpt_print_law_line / rpt_fit_print write, as a string (caller frees). */
static char *printed(const fit_result *r, int whole)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (whole)
        rpt_fit_print(f, r);
    else
        rpt_print_law_line(f, r);
    fclose(f);
    return buf;
}

/* Level C=8's only worker thread was 97% busy: the level is client-bound,
 * said in its field, a note, the table, the JSON and, since its steps made
 * the law, on the law line. The same run with a client at 30% everywhere (and one without the client
 * object) is not flagged. */
static void test_client_saturated(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8};
    sim_set_levels(&c, cs, 4, 4);
    c.jitter_frac = 0.05;
    c.write_client = 1;
    for (int i = 0; i < 4; i++)
        c.client_busy[i] = i == 3 ? 0.97 : 0.3;
    fit_run *run;
    fit_result *r = analyze_sim(path, &c, &run);
    if (r && r->n_levels == 4) {
        for (size_t i = 0; i < 4; i++)
            CHECK(r->levels[i].client_bound == (i == 3), "C=%d client_bound %d (busy %.2f)",
                  r->levels[i].concurrency, r->levels[i].client_bound, r->levels[i].client_busy_frac);
        CHECK_REL(r->levels[3].client_busy_frac, 0.97, 1e-6, "C=8 busy fraction");
        CHECK_REL(r->levels[0].client_events_per_read, 1.0, 1e-9, "C=1 one chunk per read");
        const char *n = note_with(r, "level 3 (C=8): the client set the pace", "97% busy");
        CHECK(n && strstr(n, "the law is not the server's"), "C=8 note: %s", n ? n : "(none)");
        CHECK(note_with(r, "(C=1): the client set the pace", NULL) == NULL, "C=1: no client note");
        CHECK(r->law.ok && r->law_client_bound, "law made with a client-bound level");
        char *line = printed(r, 0), *all = printed(r, 1);
        CHECK(line && strstr(line, "NOT THE SERVER'S LAW: the client set the pace at C=8"),
              "law line: %s", line ? line : "");
        CHECK(all && strstr(all, "BOUND") && strstr(all, " client  model %   held %\n"), "table flag column");
        free(line);
        free(all);
        cJSON *j = rpt_fit_to_json(r);
        cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "levels");
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(lv, 3), "client_bound")),
              "json C=8 client_bound");
        CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(lv, 0), "client_bound")),
              "json C=1 not client_bound");
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "law_client_bound")), "json law_client_bound");
        cJSON_Delete(j);
    } else {
        CHECK(0, "4 levels");
    }
    fit_result_free(r);
    fit_run_free(run);

    for (int with_client = 0; with_client < 2; with_client++) {
        c.write_client = with_client;
        c.client_busy[3] = 0.3;
        r = analyze_sim(path, &c, &run);
        for (size_t i = 0; r && i < r->n_levels; i++)
            CHECK(!r->levels[i].client_bound, "client %d: C=%d not client-bound", with_client,
                  r->levels[i].concurrency);
        CHECK(r && !r->law_client_bound && !note_with(r, "the client set the pace", NULL),
              "client %d: no client note", with_client);
        char *line = r ? printed(r, 0) : NULL;
        CHECK(line && !strstr(line, "NOT THE SERVER"), "clean law line: %s", line ? line : "");
        free(line);
        fit_result_free(r);
        fit_run_free(run);
    }
}

/* Chunks read three at a time AND three chunks per socket read: the level's
 * gaps against the engine's step (the run has step records) flag it too. */
static void test_client_bursts(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 2, 4, 8};
    sim_set_levels(&c, cs, 4, 4);
    c.write_client = 1;
    c.burst_every = 3;
    c.burst_level = 2;
    c.client_events_per_read[2] = 3;
    fit_run *run;
    fit_result *r = analyze_sim(path, &c, &run);
    if (r && r->n_levels == 4) {
        CHECK(r->levels[2].client_bound, "burst level client-bound");
        CHECK(r->levels[2].client_gap_vs_step < FIT_CLIENT_GAP_FRAC, "gap vs step %g",
              r->levels[2].client_gap_vs_step);
        const char *n = note_with(r, "level 2 (C=4): the client set the pace", "token chunks per read");
        CHECK(n && strstr(n, "engine's step"), "burst note: %s", n ? n : "(none)");
        CHECK(!r->levels[1].client_bound && !r->levels[3].client_bound, "clean levels not bound");
    }
    fit_result_free(r);
    fit_run_free(run);
}

/* One concurrency swept gives the real reason, not "not enough steady
 * samples" (which the sweep would print as "law: law: ..."). */
static void test_one_n(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {8};
    sim_set_levels(&c, cs, 1, 4);
    fit_run *run;
    fit_result *r = analyze_sim(path, &c, &run);
    if (r) {
        CHECK(!r->law.ok, "no law from one N");
        char *line = printed(r, 0);
        CHECK(line && strcmp(line, "step(N) not fitted: one concurrency swept (C=8): a line needs at "
                                   "least two distinct N\n") == 0,
              "one-N line: %s", line ? line : "");
        CHECK(line && !strstr(line, "law:") && !strstr(line, "not enough"), "no old text");
        free(line);
        CHECK(note_with(r, "no law: one concurrency swept (C=8)", NULL) != NULL, "one-N note");
        cJSON *j = rpt_fit_to_json(r);
        cJSON *nl = cJSON_GetObjectItemCaseSensitive(j, "no_law");
        CHECK(cJSON_IsString(nl) && strstr(nl->valuestring, "one concurrency"), "json no_law");
        cJSON_Delete(j);
    }
    fit_result_free(r);
    fit_run_free(run);
}

/* Prompts built to 100 tokens that the server counted
 * as 110 (+10%) are noted, 101 (+1%) is not, on a completions endpoint (as
 * the tokenizer's difference); on chat the 10 are the chat template's,
 * said once for the run and per level in the JSON; attributed counts are
 * noted per level with the stream's count and the usage. */
static void test_prompt_drift_counts(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {1, 4};
    sim_set_levels(&c, cs, 2, 4);
    c.prompt_tok_target = 100;
    c.usage_prompt_tok = 110;
    c.attributed_every = 4;
    c.endpoint = "completions";
    fit_run *run;
    fit_result *r = analyze_sim(path, &c, &run);
    if (r && r->n_levels == 2) {
        const fit_level *L = &r->levels[1];
        CHECK(L->prompt_tok_target_mean == 100 && L->prompt_tok_server_mean == 110, "means %g %g",
              L->prompt_tok_target_mean, L->prompt_tok_server_mean);
        const char *n = note_with(r, "level 1 (C=4): prompts built to 100.0 tokens", "server counted 110.0");
        CHECK(n && strstr(n, "+10.0%") && strstr(n, "its tokenizer differs") && !strstr(n, "template"),
              "drift note: %s", n ? n : "(none)");
        /* ids 0..19 over the two levels; every 4th attributed: ids 3 (C=1), 7..19 (C=4) */
        CHECK(r->levels[0].n_counts_attributed == 1 && L->n_counts_attributed == 4,
              "attributed %zu %zu", r->levels[0].n_counts_attributed, L->n_counts_attributed);
        /* 20 tokens each (5 thinking): the stream counted 2 + 7 of them */
        CHECK(L->counts_stream_tok == 4 * 9 && L->counts_recorded_tok == 4 * 20, "counts %lld %lld",
              (long long)L->counts_stream_tok, (long long)L->counts_recorded_tok);
        n = note_with(r, "level 1 (C=4): 4 requests' final usage disagreed", "stream 36 tokens, usage 80");
        CHECK(n != NULL, "counts note");
        cJSON *j = rpt_fit_to_json(r);
        cJSON *l1 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "levels"), 1);
        cJSON *tm = cJSON_GetObjectItemCaseSensitive(l1, "prompt_tok_target_mean");
        cJSON *sm = cJSON_GetObjectItemCaseSensitive(l1, "prompt_tok_server_mean");
        CHECK(cJSON_IsNumber(tm) && tm->valuedouble == 100 && cJSON_IsNumber(sm) && sm->valuedouble == 110,
              "json prompt means");
        cJSON_Delete(j);
    } else {
        CHECK(0, "2 levels");
    }
    fit_result_free(r);
    fit_run_free(run);
    /* chat: the difference is the template's */
    c.endpoint = "chat";
    r = analyze_sim(path, &c, &run);
    if (r && r->n_levels == 2) {
        const char *n = note_with(r, "the chat template: 10.0 tokens per request", "at every level");
        CHECK(n != NULL && !note_with(r, "prompts built to", "its tokenizer differs"), "template note: %s",
              n ? n : "(none)");
        CHECK(r->levels[0].prompt_tok_template == 10 && r->levels[1].prompt_tok_template == 10,
              "template per level %g %g", r->levels[0].prompt_tok_template, r->levels[1].prompt_tok_template);
    }
    fit_result_free(r);
    fit_run_free(run);
    c.endpoint = "completions";
    c.usage_prompt_tok = 101;
    c.attributed_every = 0;
    r = analyze_sim(path, &c, &run);
    CHECK(r && !note_with(r, "prompts built to", NULL) && !note_with(r, "final usage disagreed", NULL),
          "1%% drift and stream counts: no notes");
    fit_result_free(r);
    fit_run_free(run);
    c.prompt_tok_target = 0;
    c.usage_prompt_tok = 0;
    r = analyze_sim(path, &c, &run);
    CHECK(r && isnan(r->levels[0].prompt_tok_target_mean) && isnan(r->levels[0].prompt_tok_server_mean),
          "no target, no usage: NAN");
    fit_result_free(r);
    fit_run_free(run);
}

/* The trim rule on points built by hand: 10 + 0.5 N ms, N = 1..8, 40
 * steps each with a small spread; at N = 2 a sixth of the steps are 3 ms
 * slower (a lossy link's waits: real time the mean must keep) and one step
 * is a 1,028 ms stall (a partition). The far share of N = 2 is over a tenth,
 * and a rule that then kept all of that N's far points kept the stall: the
 * law came out of it. Judged against N = 2's own spread, the slow steps
 * stay, the stall goes, and the law is the one fitted without the stall. */
static void test_stall_in_noisy_level(void)
{
    enum { PER = 40, NX = 8 };
    double x[NX * PER + 1], y[NX * PER + 1];
    size_t n = 0;
    for (int N = 1; N <= NX; N++)
        for (int k = 0; k < PER; k++) {
            x[n] = N;
            y[n] = 10 + 0.5 * N + 0.05 * ((k * 7919) % 11 - 5) / 5.0;
            if (N == 2 && k % 6 == 0)
                y[n] += 3;
            n++;
        }
    fit_law clean, L;
    char err[256];
    CHECK(fit_line(x, y, n, 1, &clean, err, sizeof err) == 0, "fit without the stall: %s", err);
    x[n] = 2;
    y[n++] = 1028;
    CHECK(fit_line(x, y, n, 1, &L, err, sizeof err) == 0, "fit with it: %s", err);
    CHECK(L.n_trimmed == 1, "the stall alone is left out: %zu trimmed", L.n_trimmed);
    /* (the points' weights come from each N's spread, which the stall moves a little) */
    CHECK(fabs(L.a_ms / clean.a_ms - 1) < 0.002 && fabs(L.b_ms / clean.b_ms - 1) < 0.005,
          "the law is the one without the stall: %.6f + %.6f N against %.6f + %.6f N", L.a_ms, L.b_ms, clean.a_ms,
          clean.b_ms);
    CHECK(clean.n_trimmed == 0, "the slow steps stay (real time): %zu trimmed", clean.n_trimmed);
}

/* The same through the records: 10 + 0.5 N ms at C = 2, 4, 8, 16, 2% of
 * chunks lost and resent 220 ms later, and the link down 3 s in level 0
 * (sim.h partition_ms): the stall leaves the law, the note counts the
 * points that went, and level 0, whose throughput the stall really cut, is
 * the level the headline names. */
static void test_lossy_partition(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {2, 4, 8, 16};
    sim_set_levels(&c, cs, 4, 6);
    c.a_ms = 10;
    c.b_ms = 0.5;
    c.max_tokens = 64;
    c.think_tok = 0;
    c.jitter_frac = 0.02;
    c.prefill_per_step = 2;
    c.loss_share = 0.02;
    c.loss_delay_ms = 220;
    c.partition_ms = 3000;
    c.partition_at_ms = 1000;
    c.partition_level = 0;
    c.write_steps = 0; /* a remote server: the client's gaps are all there is */
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    int rc = sim_fit(path, &c, NULL, &st, &run, &r, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc)
        return;
    const fit_law *L = &r->law;
    CHECK(fabs(L->a_ms / 10 - 1) < 0.03 && fabs(L->b_ms / 0.5 - 1) < 0.03, "law %.4f + %.4f N against 10 + 0.5 N",
          L->a_ms, L->b_ms);
    CHECK(L->n_trimmed >= 1 && L->n_trimmed < L->n_points / 10, "%zu of %zu points left out", L->n_trimmed,
          L->n_points);
    char want[64];
    snprintf(want, sizeof want, "%zu of %zu step points", L->n_trimmed, L->n_points);
    int said = 0;
    for (size_t i = 0; i < r->n_notes; i++)
        said |= strstr(r->notes[i], want) != NULL;
    CHECK(said, "the note counts them: '%s'", want);
    CHECK(r->model_worst_level == 0 && r->levels[0].model_error_rel < -0.3,
          "the stalled level is the worst: level %d, %.3f", r->model_worst_level,
          r->n_levels ? r->levels[0].model_error_rel : NAN);
    for (size_t i = 1; i < r->n_levels; i++)
        CHECK(fabs(r->levels[i].model_error_rel) < 0.03, "C=%d within 3%%: %.4f", r->levels[i].concurrency,
              r->levels[i].model_error_rel);
    fit_result_free(r);
    fit_run_free(run);
}

int main(void)
{
    gsl_set_error_handler_off();
    char path[64];
    snprintf(path, sizeof path, "fit_burst_%ld.jsonl", (long)getpid());
    test_burst_level(path);
    test_burst_few(path);
    test_client_saturated(path);
    test_client_bursts(path);
    test_one_n(path);
    test_prompt_drift_counts(path);
    test_stall_in_noisy_level();
    test_lossy_partition(path);
    unlink(path);
    TEST_MAIN_END();
}
