/* test_gpu_diag.c: the GPU figures and the diagnosis per level (fit/gpu.c "GPU
 * figures and diagnosis") on a simulated run (sim.h) with metric records
 * written at chosen times inside each level's steady windows: DCGM for some
 * levels, loadlaw's NVML names for others, two GPUs each.
 *  level 0: SM 0.95, tensor 0.1, DRAM 0.2, 340 of 600 W   -> latency-bound
 *  level 1: tensor 0.8 at 590 of 600 W (NVML names)        -> compute-bound
 *  level 2: DRAM 0.85                                      -> bandwidth-bound
 *  level 3: no GPU data, the server's waiting gauge grows  -> admission-bound
 *  level 4: energy counters (one resets), power samples that disagree with
 *           them: J/token exact from the counters          -> "-" (no rule held)
 *  level 5: nothing                                        -> "-" (no GPU data)
 * And the law against the server's N (fit.h; fit --n server): a server that
 * reports twice the client's D fits b / 2, with the client's law beside it.
 * Deterministic: no real time. */
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

#define N_LEVELS 6
#define N_SCRAPES 10

typedef struct line {
    int64_t t_ns;
    char text[256];
} line;

static line lines[4096];
static size_t n_lines;

static void put(int64_t t, const char *src, const char *name, int gpu, double v)
{
    line *l = &lines[n_lines++];
    l->t_ns = t;
    char labels[32] = "";
    if (gpu >= 0)
        snprintf(labels, sizeof labels, "gpu=\\\"%d\\\"", gpu);
    snprintf(l->text, sizeof l->text,
             "{\"type\":\"metric\",\"t_ns\":%lld,\"src\":\"%s\",\"name\":\"%s\",\"labels\":\"%s\",\"value\":%.17g}\n",
             (long long)t, src, name, labels, v);
}

static int cmp_line(const void *a, const void *b)
{
    const line *x = a, *y = b;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

/* Two GPUs' gauges at one scrape: per GPU values a and b. */
static void gauge2(int64_t t, const char *src, const char *name, double a, double b)
{
    put(t, src, name, 0, a);
    put(t, src, name, 1, b);
}

static const char DCGM[] = "http://127.0.0.1:9400/metrics", NVML[] = "nvml";

/* Scrape k of N_SCRAPES inside [t0, t1]. */
static int64_t at(int64_t t0, int64_t t1, int k) { return t0 + (int64_t)((k + 0.5) * (double)(t1 - t0) / N_SCRAPES); }

static double tokens_between(const fit_run *run, int64_t t0, int64_t t1)
{
    double tok = 0;
    fit_chunks ch = {0};
    for (size_t i = 0; i < fit_run_n_requests(run); i++) {
        CHECK(fit_chunks_of(run, fit_run_request(run, i), &ch) == 0, "chunks of request %zu", i);
        for (size_t c = 0; c < ch.n; c++)
            if (ch.v[c].t_ns > t0 && ch.v[c].t_ns <= t1)
                tok += ch.v[c].tokens;
    }
    fit_chunks_free(&ch);
    return tok;
}

/* Levels C = 2..16 without jitter; the server's running gauge says 2C
 * from each level's start: against the server's N the slope halves. */
static void test_n_server(const char *path)
{
    sim_cfg c;
    sim_default(&c);
    int cs[] = {2, 4, 8, 16};
    sim_set_levels(&c, cs, 4, 4);
    c.max_tokens = 40;
    sim_stats st;
    char err[512] = "";
    fit_run *run = NULL;
    fit_result *r = NULL;
    int rc = sim_fit(path, &c, NULL, &st, &run, &r, err, sizeof err);
    CHECK(rc == 0 && r->n_levels == 4, "analyze: %s", err);
    if (rc || r->n_levels != 4)
        return;
    CHECK(!r->law_other.ok && !strcmp(r->law_n, "client"), "no server metrics: no second law");
    n_lines = 0;
    for (size_t l = 0; l < 4; l++)
        for (int k = 0; k <= N_SCRAPES; k++) {
            const fit_level *L = &r->levels[l];
            put(L->start_ns + (int64_t)((double)k * (double)(L->end_ns - L->start_ns) / N_SCRAPES),
                "http://127.0.0.1:8000/metrics", "vllm:num_requests_running", -1, 2.0 * L->concurrency);
        }
    fit_result_free(r);
    fit_run_free(run);
    FILE *f = fopen(path, "a");
    for (size_t i = 0; f && i < n_lines; i++)
        fputs(lines[i].text, f);
    CHECK(f && fclose(f) == 0, "append");
    for (int srv = 0; srv < 2; srv++) {
        fit_options o;
        fit_options_default(&o);
        o.n_server = srv;
        rc = sim_load_fit(path, &o, &run, &r, err, sizeof err);
        CHECK(rc == 0, "analyze with server N: %s", err);
        if (rc == 0) {
            const fit_law *client = srv ? &r->law_other : &r->law, *server = srv ? &r->law : &r->law_other;
            CHECK(!strcmp(r->law_n, srv ? "server" : "client") && fit_law_n_is_server(r) == srv, "law_n %s",
                  r->law_n);
            CHECK(client->ok && server->ok, "both laws");
            CHECK_REL(client->b_ms, c.b_ms, 1e-6, "b against the client's D");
            CHECK_REL(server->b_ms, c.b_ms / 2, 1e-6, "b against the server's N (2D)");
            CHECK_REL(server->a_ms, c.a_ms, 1e-6, "a is the same");
            CHECK(server->n_points == client->n_points, "every step between agreeing scrapes (%zu, %zu)",
                  server->n_points, client->n_points);
        }
        fit_result_free(r);
        fit_run_free(run);
    }
}

int main(void)
{
    gsl_set_error_handler_off();
    char path[64], err[512] = "";
    snprintf(path, sizeof path, "gpu_diag_%ld.jsonl", (long)getpid());
    sim_cfg c;
    sim_default(&c);
    int cs[N_LEVELS] = {2, 4, 6, 8, 10, 12};
    sim_set_levels(&c, cs, N_LEVELS, 4);
    c.max_tokens = 60;
    sim_stats st;
    fit_run *run = NULL;
    fit_result *r = NULL;
    /* The windows first, from the run without metrics. */
    int rc = sim_fit(path, &c, NULL, &st, &run, &r, err, sizeof err);
    CHECK(rc == 0 && r->n_levels == N_LEVELS, "analyze: %s", err);
    if (rc || r->n_levels != N_LEVELS)
        return 1;
    int64_t w0[N_LEVELS], w1[N_LEVELS], s0[N_LEVELS], s1[N_LEVELS];
    size_t in_win0 = 0; /* level 0's scrapes that fall inside a steady window */
    for (int l = 0; l < N_LEVELS; l++) {
        const fit_level *L = &r->levels[l];
        CHECK(L->n_windows > 0 && L->start_ns < L->windows[0].t0_ns, "level %d: steady windows after a ramp", l);
        w0[l] = L->windows[0].t0_ns;
        w1[l] = L->windows[L->n_windows - 1].t1_ns;
        s0[l] = L->start_ns;
        s1[l] = L->end_ns;
        for (int k = 0; k < N_SCRAPES && l == 0; k++)
            for (size_t w = 0; w < L->n_windows; w++)
                in_win0 += at(w0[0], w1[0], k) >= L->windows[w].t0_ns && at(w0[0], w1[0], k) <= L->windows[w].t1_ns;
        CHECK(L->diagnosis == FIT_DIAG_NONE && !strcmp(L->diagnosis_why, "no GPU data"),
              "level %d without metrics: %s (%s)", l, fit_diag_name(L->diagnosis), L->diagnosis_why);
    }
    fit_result_free(r);
    fit_run_free(run);
    r = NULL;
    run = NULL;

    /* A ramp scrape with wild values in every GPU level: outside the steady
     * windows, so it must not move a mean. */
    for (int l = 0; l < 3; l++) {
        gauge2(s0[l], DCGM, "DCGM_FI_PROF_SM_ACTIVE", 0, 0);
        gauge2(s0[l], DCGM, "DCGM_FI_DEV_POWER_USAGE", 600, 600);
    }
    for (int k = 0; k < N_SCRAPES; k++) {
        int64_t t = at(w0[0], w1[0], k);
        /* latency-bound: averages over the GPUs, power and limit summed */
        gauge2(t, DCGM, "DCGM_FI_PROF_SM_ACTIVE", 0.9, 1.0);
        gauge2(t, DCGM, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.05, 0.15);
        gauge2(t, DCGM, "DCGM_FI_PROF_DRAM_ACTIVE", 0.2, 0.2);
        gauge2(t, DCGM, "DCGM_FI_DEV_POWER_USAGE", 160, 180);
        gauge2(t, DCGM, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 300, 300);
        t = at(w0[1], w1[1], k);
        gauge2(t, NVML, "nvml_sm_active_ratio", 0.9, 0.9);
        gauge2(t, NVML, "nvml_tensor_active_ratio", 0.8, 0.8);
        gauge2(t, NVML, "nvml_dram_active_ratio", 0.4, 0.4);
        gauge2(t, NVML, "nvml_power_w", 295, 295);
        gauge2(t, NVML, "nvml_power_limit_w", 300, 300);
        t = at(w0[2], w1[2], k);
        gauge2(t, DCGM, "DCGM_FI_PROF_SM_ACTIVE", 0.9, 0.9);
        gauge2(t, DCGM, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.3, 0.3);
        gauge2(t, DCGM, "DCGM_FI_PROF_DRAM_ACTIVE", 0.8, 0.9);
        gauge2(t, DCGM, "DCGM_FI_DEV_POWER_USAGE", 225, 225);
        gauge2(t, DCGM, "DCGM_FI_DEV_POWER_MGMT_LIMIT", 300, 300);
        /* admission-bound: waiting 0, 1, ..., 9 across the whole level */
        t = s0[3] + (int64_t)((k + 0.5) * (double)(s1[3] - s0[3]) / N_SCRAPES);
        put(t, "http://127.0.0.1:8000/metrics", "loadlaw_waiting_requests", -1, k);
        put(t, "http://127.0.0.1:8000/metrics", "loadlaw_running_requests", -1, cs[3]);
    }
    /* Energy (level 4): GPU 0 climbs 1000 mJ a scrape, GPU 1 resets to 300
     * after scrape 4 (a restart: its new value is the increase). Power
     * samples say 1 W, far from what the counters give. A counter sample
     * before the windows does not count. */
    put(s0[4], NVML, "nvml_energy_mj", 0, 1);
    put(s0[4], NVML, "nvml_energy_mj", 1, 1);
    double want_mj = 0, e1 = 5e6;
    int64_t e_first = at(w0[4], w1[4], 0), e_last = at(w0[4], w1[4], N_SCRAPES - 1);
    for (int k = 0; k < N_SCRAPES; k++) {
        int64_t t = at(w0[4], w1[4], k);
        put(t, NVML, "nvml_energy_mj", 0, 1e6 + 1000.0 * k);
        double prev = e1;
        e1 = k == 5 ? 300 : e1 + 700;
        put(t, NVML, "nvml_energy_mj", 1, e1);
        if (k)
            want_mj += 1000 + (k == 5 ? 300 : e1 - prev);
        gauge2(t, NVML, "nvml_power_w", 0.5, 0.5);
        gauge2(t, NVML, "nvml_power_limit_w", 300, 300);
    }
    qsort(lines, n_lines, sizeof lines[0], cmp_line);
    FILE *f = fopen(path, "a");
    CHECK(f != NULL, "append");
    if (!f)
        return 1;
    for (size_t i = 0; i < n_lines; i++)
        fputs(lines[i].text, f);
    fclose(f);

    rc = sim_load_fit(path, NULL, &run, &r, err, sizeof err);
    CHECK(rc == 0 && r->n_levels == N_LEVELS, "reanalyze: %s", err);
    if (rc || r->n_levels != N_LEVELS)
        return 1;
    const fit_level *L = r->levels;
    CHECK(L[0].diagnosis == FIT_DIAG_LATENCY, "level 0: %s (%s)", fit_diag_name(L[0].diagnosis), L[0].diagnosis_why);
    CHECK_NEAR(L[0].gpu_sm_active, 0.95, 1e-12, "level 0 SM, mean over GPUs");
    CHECK_NEAR(L[0].gpu_tensor_active, 0.10, 1e-12, "level 0 tensor");
    CHECK_NEAR(L[0].gpu_power_w, 340, 1e-9, "level 0 power, summed over GPUs");
    CHECK_NEAR(L[0].gpu_power_limit_w, 600, 1e-9, "level 0 limit");
    CHECK_NEAR(L[0].gpu_power_frac, 340.0 / 600, 1e-12, "level 0 of cap");
    CHECK(in_win0 >= 3 && L[0].gpu_scrapes == in_win0, "level 0: %zu scrapes in the windows, want %zu",
          L[0].gpu_scrapes, in_win0);
    CHECK(!isfinite(L[0].gpu_j_per_tok), "level 0: no energy counter, no J/token (not from power)");
    CHECK(L[1].diagnosis == FIT_DIAG_COMPUTE, "level 1: %s (%s)", fit_diag_name(L[1].diagnosis), L[1].diagnosis_why);
    CHECK_NEAR(L[1].gpu_power_w, 590, 1e-9, "level 1 power (NVML)");
    CHECK(L[2].diagnosis == FIT_DIAG_BANDWIDTH, "level 2: %s (%s)", fit_diag_name(L[2].diagnosis),
          L[2].diagnosis_why);
    CHECK_NEAR(L[2].gpu_dram_active, 0.85, 1e-12, "level 2 DRAM");
    CHECK_NEAR(L[2].gpu_power_limit_w, 600, 1e-9, "level 2 limit from POWER_MGMT_LIMIT");
    CHECK(L[3].diagnosis == FIT_DIAG_ADMISSION, "level 3: %s (%s)", fit_diag_name(L[3].diagnosis),
          L[3].diagnosis_why);
    /* thirds of 10 scrapes: 0,1,2 and 7,8,9 */
    CHECK_NEAR(L[3].server_waiting_growth, 7, 1e-12, "level 3 waiting growth");
    CHECK(L[3].gpu_scrapes == 0 && !isfinite(L[3].gpu_power_w), "level 3: no GPU figures");
    double tok = tokens_between(run, e_first, e_last);
    CHECK(tok > 0, "level 4: tokens over the counter's span");
    CHECK_NEAR(L[4].gpu_energy_j, want_mj / 1000, 1e-9, "level 4 energy (reset handled)");
    CHECK(want_mj == 9 * 1000 + 8 * 700 + 300, "the test's own sum");
    CHECK(L[4].gpu_j_per_tok == want_mj / 1000 / tok, "level 4 J/token exact: got %.17g want %.17g",
          L[4].gpu_j_per_tok, want_mj / 1000 / tok);
    CHECK(L[4].diagnosis == FIT_DIAG_NONE && strstr(L[4].diagnosis_why, "no rule held"), "level 4: %s (%s)",
          fit_diag_name(L[4].diagnosis), L[4].diagnosis_why);
    CHECK(L[5].diagnosis == FIT_DIAG_NONE && !strcmp(L[5].diagnosis_why, "no GPU data"), "level 5: %s (%s)",
          fit_diag_name(L[5].diagnosis), L[5].diagnosis_why);

    /* The JSON and the printed table carry the same. */
    cJSON *j = rpt_fit_to_json(r);
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "levels");
    const cJSON *d0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(lv, 0), "diagnosis");
    const cJSON *e4 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(lv, 4), "gpu_j_per_tok");
    CHECK(cJSON_IsString(d0) && !strcmp(d0->valuestring, "latency-bound"), "json level 0 diagnosis");
    CHECK(cJSON_IsNumber(e4) && e4->valuedouble == L[4].gpu_j_per_tok, "json level 4 J/token");
    cJSON_Delete(j);
    char *text = NULL;
    size_t text_len = 0;
    FILE *mf = open_memstream(&text, &text_len);
    CHECK(mf != NULL, "memstream");
    if (mf) {
        rpt_fit_print(mf, r);
        fclose(mf);
        CHECK(strstr(text, "gpu / diagnosis") && strstr(text, "latency-bound (SM 0.95, tensor 0.10, DRAM 0.20, 340 of 600 W)") &&
                  strstr(text, "compute-bound") && strstr(text, "bandwidth-bound") && strstr(text, "admission-bound") &&
                  strstr(text, fit_diag_rule()),
              "rpt_fit_print's gpu table:\n%s", text);
        free(text);
    }
    fit_result_free(r);
    fit_run_free(run);
    test_n_server(path);
    unlink(path);
    TEST_MAIN_END();
}
