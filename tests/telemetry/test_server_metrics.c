/* test_server_metrics.c: `sweep` scrapes servers' /metrics, end to end
 * through the real binary, then the fit reads the metric records.
 *
 * (a) The bundled engine: its own /metrics, scraped at the default URL,
 *     gives server N = C in every closed-loop level's steady windows, and a
 *     server step time (its histogram) within 15% of the same engine's step
 *     records over the steady windows; its own latency histograms
 *     (fit/server_own.c) agree with the client's figures: ITL mean within
 *     ITL_REL, TTFT mean not above the client's by more than TTFT_REL +
 *     TTFT_ABS_MS (the client's holds it), a TTFT p90 from its
 *     buckets, and a queue time under 1.5 of its steps.
 * (b) Recorded exposition texts of vLLM, SGLang and a DCGM exporter, served
 *     by this test over HTTP on raw sockets with values that move with time
 *     (--metrics-url, repeatable, --no-metrics for the engine's own): the
 *     iteration counter is differenced across a counter reset (tokens per
 *     step exact, step time within 10%), vLLM's N summed over its two
 *     engines disagrees with the client's D (a note), SGLang's constant
 *     gen_throughput is noted as stale, DCGM samples are recorded and
 *     unknown families are not; a 404 endpoint and a refused one are said
 *     once each and never fail the sweep.
 *
 * argv: none (LOADLAW_BIN). Real time: about 8 s. */
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "fit.h"
#include "fit_tuning.h"
#include "testutil.h"
#include "tsupport.h"

/* ---- a /metrics server with recorded texts that move with time ---------- */

#define T_RESET_S 1.8   /* vLLM "restarts": its counters begin again from 0 */
#define STEPS_PER_S 100 /* vLLM iterations per second: a 10 ms step */
#define TOK_PER_STEP 5

static void vllm_text(ll_buf *b, double t)
{
    double count = t < T_RESET_S ? floor(STEPS_PER_S * t) : floor(STEPS_PER_S * (t - T_RESET_S));
    ll_buf_printf(b,
                  "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                  "# TYPE vllm:num_requests_running gauge\n"
                  "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 3.0\n"
                  "vllm:num_requests_running{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 2.0\n"
                  "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
                  "# TYPE vllm:num_requests_waiting gauge\n"
                  "vllm:num_requests_waiting{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 1.0\n"
                  "vllm:num_requests_waiting{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 0.0\n"
                  "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
                  "# TYPE vllm:kv_cache_usage_perc gauge\n"
                  "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 0.25\n"
                  "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n"
                  "# TYPE vllm:num_preemptions_total counter\n"
                  "vllm:num_preemptions_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 0.0\n"
                  "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                  "# TYPE vllm:request_success_total counter\n"
                  "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"Qwen/Qwen3-8B\"} 7.0\n"
                  "# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.\n"
                  "# TYPE vllm:iteration_tokens_total histogram\n"
                  "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"1.0\",model_name=\"Qwen/Qwen3-8B\"} 0.0\n"
                  "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"8.0\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"+Inf\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:iteration_tokens_total_sum{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  /* a second data-parallel engine stepping at the same rate:
                   * the step is still 10 ms, not 5 */
                  "vllm:iteration_tokens_total_bucket{engine=\"1\",le=\"8.0\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:iteration_tokens_total_bucket{engine=\"1\",le=\"+Inf\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:iteration_tokens_total_count{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:iteration_tokens_total_sum{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.\n"
                  "# TYPE vllm:inter_token_latency_seconds histogram\n"
                  "vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.01\",model_name=\"Qwen/Qwen3-8B\"} 0.0\n"
                  "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} %.1f\n"
                  "vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} %.4f\n",
                  count, count, count, TOK_PER_STEP * count, count, count, count, TOK_PER_STEP * count,
                  TOK_PER_STEP * count, 0.01 * TOK_PER_STEP * count);
}

static void sglang_text(ll_buf *b, double t)
{
    (void)t; /* every gauge held still: what --decode-log-interval 40 looks like between refreshes */
    ll_buf_printf(b, "# HELP sglang:num_running_reqs The number of running requests.\n"
                     "# TYPE sglang:num_running_reqs gauge\n"
                     "sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 2.0\n"
                     "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
                     "# TYPE sglang:num_queue_reqs gauge\n"
                     "sglang:num_queue_reqs{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 0.0\n"
                     "# HELP sglang:gen_throughput The generation throughput (token/s).\n"
                     "# TYPE sglang:gen_throughput gauge\n"
                     "sglang:gen_throughput{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 812.5\n"
                     "# HELP sglang:token_usage The token usage.\n"
                     "# TYPE sglang:token_usage gauge\n"
                     "sglang:token_usage{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 0.01\n");
}

static void dcgm_text(ll_buf *b, double t)
{
    static const char lab[] = "{gpu=\"0\",UUID=\"GPU-9d2b0e1c\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\","
                              "modelName=\"NVIDIA H200\",Hostname=\"gpu-node\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"}";
    ll_buf_printf(b, "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
                     "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\nDCGM_FI_DEV_SM_CLOCK%s 1980\n"
                     "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
                     "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE%s %.3f\n"
                     "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
                     "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
                     "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION%s %.0f\n"
                     "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
                     "# TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED%s 130000\n"
                     "# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.\n"
                     "# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\nDCGM_FI_PROF_SM_ACTIVE%s 0.930000\n"
                     "# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge\nDCGM_FI_PROF_PIPE_TENSOR_ACTIVE%s 0.120000\n"
                     "# TYPE DCGM_FI_PROF_DRAM_ACTIVE gauge\nDCGM_FI_PROF_DRAM_ACTIVE%s 0.200000\n",
                  lab, lab, 340 + t, lab, 1e9 + 340e3 * t, lab, lab, lab, lab);
}

/* The recorded text of the path asked for, as it reads t0_ns + t seconds on;
 * 404 for any other path. */
static int recorded_answer(int fd, const char *head, void *ctx)
{
    const int64_t *t0_ns = ctx;
    char path[256] = "";
    ll_buf body = {0};
    sscanf(head, "%*s %255s", path);
    double t = (ll_now_ns() - *t0_ns) / 1e9;
    int found = 1;
    if (!strcmp(path, "/vllm/metrics"))
        vllm_text(&body, t);
    else if (!strcmp(path, "/sglang/metrics"))
        sglang_text(&body, t);
    else if (!strcmp(path, "/dcgm/metrics"))
        dcgm_text(&body, t);
    else
        found = 0;
    tu_httpd_reply(fd, found ? "200 OK" : "404 Not Found", "text/plain; version=0.0.4", body.p,
                   found ? body.len : 0);
    ll_buf_free(&body);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static int has_note(const fit_result *res, const char *a, const char *b)
{
    for (size_t i = 0; i < res->n_notes; i++)
        if (strstr(res->notes[i], a) && strstr(res->notes[i], b))
            return 1;
    return 0;
}

static int fit_dir(const char *dir, fit_run **fr, fit_result **res)
{
    char err[512] = "";
    fit_options opt;
    fit_options_default(&opt);
    if (fit_load_run(dir, fr, err, sizeof err) || fit_analyze(*fr, &opt, res, err, sizeof err)) {
        fprintf(stderr, "fit %s: %s\n", dir, err);
        return -1;
    }
    return 0;
}

/* ---- (a) the bundled engine --------------------------------------------------- */

/* The engine's histograms against the client's figures. The histograms are
 * differenced between the level's first and last scrapes, so the requests
 * observed before the first or after the last fall out: with 12 requests a
 * level, ITL within 0.2%, 0.1%, 2.7% and TTFT -4%, +6%, +18% at C = 1, 4, 8
 * (48 requests at C = 8: 0.2% and 2%); under other builds the client's TTFT
 * grew to 1.7 times the server's (its accept and first read wait for a core). */
#define ITL_REL 0.10
#define TTFT_REL 0.30
#define TTFT_ABS_MS 2.0

static void check_engine_latencies(const fit_level *L)
{
    CHECK(fabs(L->server_itl_mean_ms / L->itl.mean_ms - 1) < ITL_REL,
          "level %d: server ITL mean %.4g ms vs the client's %.4g", L->level, L->server_itl_mean_ms, L->itl.mean_ms);
    /* the client's TTFT holds the server's; on a loaded machine its own part
     * (accept, the first read) grows, so only an upper bound */
    CHECK(L->server_ttft_mean_ms > 0 && L->server_ttft_mean_ms < (1 + TTFT_REL) * L->ttft.mean_ms + TTFT_ABS_MS,
          "level %d: server TTFT mean %.4g ms vs the client's %.4g", L->level, L->server_ttft_mean_ms,
          L->ttft.mean_ms);
    CHECK(L->server_ttft_p90_ms > 0, "level %d: a TTFT p90 from the buckets (%.4g)", L->level, L->server_ttft_p90_ms);
    /* admission waits for the running step to end, at most one step */
    CHECK(L->server_queue_mean_ms >= 0 && L->server_queue_mean_ms < 1.5 * L->server_step_ms,
          "level %d: queue %.4g ms, step %.4g ms", L->level, L->server_queue_mean_ms, L->server_step_ms);
    CHECK(isnan(L->server_kv_usage_mean) && isnan(L->server_preemptions), "level %d: no KV or preemption figures",
          L->level);
}

static void test_bundled(const char *tmp)
{
    char out[512], errf[512];
    snprintf(out, sizeof out, "%s/bundled", tmp);
    snprintf(errf, sizeof errf, "%s/bundled.err", tmp);
    char *args[] = {"loadlaw", "sweep", "-c", "1,4,8", "-n", "12", "--max-tokens", "48", "--engine",
                    "backend=synthetic,law=52+30n,time_scale=0.1", "--metrics-interval", "0.2", "-q",
                    "--no-report", "-o", out, NULL};
    int rc = tu_run(LOADLAW_BIN, args, NULL, errf, 0);
    CHECK(rc == 0, "bundled sweep exit %d (see %s)", rc, errf);
    fit_run *fr = NULL;
    fit_result *res = NULL;
    if (rc || fit_dir(out, &fr, &res))
        goto out;
    CHECK(res->n_levels == 3, "3 levels, got %zu", res->n_levels);
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        CHECK(L->server_scrapes >= 2, "level %d: %zu scrapes in the steady windows", L->level, L->server_scrapes);
        /* A scrape inside a closed-loop steady window sees the C admitted, or
         * C - 1 in the instant between a completion and its replacement's
         * arrival (more of those on a loaded machine): within one of C. */
        CHECK(fabs(L->server_n - L->concurrency) <= 1.0, "level %d: server N %.3f vs C %d", L->level, L->server_n,
              L->concurrency);
        CHECK(!L->server_n_disagrees, "level %d: no N-vs-D warning", L->level);
        CHECK(L->server_waiting == 0, "level %d: nothing waiting (%.3g)", L->level, L->server_waiting);
        /* The server's step time from its histogram against the same engine's
         * own step records in the level's steady windows: two readings of one
         * clock, so they agree however slow the machine makes the steps (the
         * windows' edges differ by a step or two; the law is not the yardstick
         * here, a loaded machine stretches every step past it). */
        double sum_ms = 0;
        size_t n = 0;
        for (size_t k = 0; k < fit_run_n_steps(fr); k++) {
            const ll_rec_step *st = fit_run_step(fr, k);
            for (size_t w = 0; w < L->n_windows; w++)
                if (st->start_ns >= L->windows[w].t0_ns && st->start_ns + st->dur_ns <= L->windows[w].t1_ns &&
                    st->n_decode > 0) {
                    sum_ms += (double)st->dur_ns / 1e6;
                    n++;
                    break;
                }
        }
        double own_ms = n ? sum_ms / (double)n : NAN;
        CHECK(n >= 10 && fabs(L->server_step_ms / own_ms - 1) < 0.15,
              "level %d: server step %.4g ms (histogram) vs %.4g ms (the engine's %zu step records)", L->level,
              L->server_step_ms, own_ms, n);
        check_engine_latencies(L);
    }
out:
    fit_result_free(res);
    fit_run_free(fr);
}

/* ---- (b) recorded vLLM, SGLang, DCGM texts ------------------------------------ */

static void test_recorded(const char *tmp)
{
    tu_httpd *srv = NULL;
    int64_t t0_ns = ll_now_ns(); /* the recorded texts' time 0 */
    char out[512], errf[512], rec[600], u_vllm[128], u_sgl[128], u_dcgm[128], u_404[128], u_refused[64];
    if (tu_httpd_start(recorded_answer, &t0_ns, &srv)) {
        CHECK(0, "metrics server did not start");
        return;
    }
    snprintf(out, sizeof out, "%s/recorded", tmp);
    snprintf(errf, sizeof errf, "%s/recorded.err", tmp);
    snprintf(rec, sizeof rec, "%s/records.jsonl", out);
    snprintf(u_vllm, sizeof u_vllm, "http://127.0.0.1:%d/vllm/metrics", tu_httpd_port(srv));
    snprintf(u_sgl, sizeof u_sgl, "http://127.0.0.1:%d/sglang/metrics", tu_httpd_port(srv));
    snprintf(u_dcgm, sizeof u_dcgm, "http://127.0.0.1:%d/dcgm/metrics", tu_httpd_port(srv));
    snprintf(u_404, sizeof u_404, "http://127.0.0.1:%d/none/metrics", tu_httpd_port(srv));
    snprintf(u_refused, sizeof u_refused, "http://127.0.0.1:1/metrics"); /* port 1: nobody listens */
    /* One closed level of C = 2 for ~3.5 s: long enough that the counter reset
     * at 1.8 s falls inside its steady windows and SGLang's frozen gauge spans
     * more than FIT_SGLANG_STALE_S. The requests go to the bundled engine; its
     * own /metrics is off, so the fit reads the recorded servers. */
    char *args[] = {"loadlaw", "sweep", "-c", "2", "--duration", "3.5s", "--max-tokens", "40", "--engine",
                    "backend=synthetic,law=52+30n,time_scale=0.2", "--no-metrics", "--metrics-interval", "0.1",
                    "--metrics-url", u_vllm, "--metrics-url", u_sgl, "--metrics-url", u_dcgm, "--metrics-url", u_404,
                    "--metrics-url", u_refused, "-q", "--no-report", "-o", out, NULL};
    int rc = tu_run(LOADLAW_BIN, args, NULL, errf, 0);
    tu_httpd_stop(srv);
    CHECK(rc == 0, "recorded sweep exit %d (see %s): a failing endpoint never fails the sweep", rc, errf);
    CHECK(tu_count_in(errf, u_404) == 1 && tu_count_in(errf, "HTTP 404") == 1, "the 404 endpoint said once");
    CHECK(tu_count_in(errf, u_refused) == 1, "the refused endpoint said once");
    CHECK(tu_count_in(rec, "\"name\":\"DCGM_FI_DEV_POWER_USAGE\"") >= 10, "DCGM power recorded");
    CHECK(tu_count_in(rec, "\"name\":\"DCGM_FI_PROF_SM_ACTIVE\"") >= 10, "DCGM SM activity recorded");
    CHECK(tu_count_in(rec, "DCGM_FI_DEV_FB_USED") == 0 && tu_count_in(rec, "vllm:request_success_total") == 0 &&
              tu_count_in(rec, "_bucket") == 0,
          "unknown families and buckets are not recorded");
    CHECK(tu_count_in(rec, "\"labels\":\"engine=\\\"1\\\",model_name=\\\"Qwen/Qwen3-8B\\\"\"") >= 10,
          "labels kept in exposition form");
    fit_run *fr = NULL;
    fit_result *res = NULL;
    if (rc || fit_dir(out, &fr, &res))
        goto out;
    CHECK(res->n_levels == 1, "1 level, got %zu", res->n_levels);
    if (res->n_levels < 1)
        goto out;
    const fit_level *L = &res->levels[0];
    CHECK(L->n_windows > 0 && L->windows[0].t0_ns < (int64_t)(T_RESET_S * 1e9) &&
              L->windows[L->n_windows - 1].t1_ns > (int64_t)((T_RESET_S + 0.3) * 1e9),
          "the reset at %.1f s falls inside the steady span", T_RESET_S);
    CHECK(L->server_n == 5, "vLLM's N summed over its engines: %.3g", L->server_n);
    CHECK(L->server_waiting == 1, "vLLM's waiting summed: %.3g", L->server_waiting);
    CHECK(L->server_n_disagrees && has_note(res, "level 0 (C=2)", "the server ran N = 5"),
          "server N 5 vs client D 2: warned");
    CHECK(fabs(L->server_tok_per_step - TOK_PER_STEP) < 1e-9, "tokens per step across the reset: %.6g",
          L->server_tok_per_step);
    CHECK(fabs(L->server_step_ms / (1000.0 / STEPS_PER_S) - 1) < 0.10,
          "vLLM step %.4g ms across a counter reset, two engines (10 ms)", L->server_step_ms);
    CHECK(L->server_stale_s > FIT_SGLANG_STALE_S && has_note(res, "SGLang", "--decode-log-interval 1"),
          "SGLang's frozen gauge noted (%.3g s)", L->server_stale_s);
out:
    fit_result_free(res);
    fit_run_free(fr);
}

int main(void)
{
    char tmp[256], err[256];
    gsl_set_error_handler_off(); /* the fit checks each GSL status (STYLE.md) */
    snprintf(tmp, sizeof tmp, "%s/ll_server_metrics_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    if (ll_mkdir_p(tmp, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_bundled(tmp);
    test_recorded(tmp);
    TEST_MAIN_END();
}
