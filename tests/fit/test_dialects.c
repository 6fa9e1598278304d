/* test_dialects.c: every server's /metrics page, read through the dialect
 * table (common/dialect.h) into the fit's server figures.
 *
 * (a) For each server, a recorded page written as that server writes it
 *     (names, labels, HELP/TYPE lines, number format), with counters that
 *     move at known rates, is parsed at 2 Hz over a 6 s level
 *     (tel_prom_parse), kept by the table (fit_server_kind) and read by
 *     fit_server_level: the server recognised, N, waiting, step time,
 *     tokens per step, generated tok/s and the prefix-cache share are the
 *     rates the page was written with; so are the server's own latencies
 *     (ITL, TTFT mean and p90 from buckets, queue / prefill / decode, KV
 *     usage, preemptions, waiting by reason: fit/server_own.c). Sources of each page:
 *       llama.cpp  tools/server/server-task.cpp (to_metrics), llama-cpp-python 0.3.36's tree
 *       vLLM       vllm/v1/metrics/loggers.py (v1 names, prefix_cache_* of 2025-26)
 *       SGLang     python/sglang/srt/metrics/collector.py, "sglang_" spelling
 *       TGI        router/src/server.rs metrics (histograms labelled by method)
 *       TensorRT-LLM  tensorrt_llm/metrics (trtllm-serve /prometheus/metrics),
 *                  relayed "trtllm:" spelling
 * (c) Two pages captured from vLLM 0.32.0 (CPU backend, a 24.6 M-param
 *     Llama; fixtures/vllm-0.32-metrics-before.txt idle after a sweep,
 *     -during.txt 5 s into a C = 8 level; only the vllm: lines kept), read as
 *     a level's scrapes: each role the table gives vLLM is read from its
 *     real name with the value a separate reader (Python, over the two
 *     files) computed.
 * (b) A page of families no server of the table writes keeps nothing, and
 *     the scraper says so once with the first families it saw; a llama.cpp
 *     page is said as "llama.cpp"; a JSON /metrics (TensorRT-LLM) moves the
 *     scraper to /prometheus/metrics.
 *
 * argv: the fixtures folder. Real time: about 1 s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "dialect.h"
#include "fit_internal.h"
#include "telemetry.h"
#include "testutil.h"
#include "tsupport.h"

#define LEVEL_S 6.0
#define SCRAPE_S 0.5

typedef void page_fn(ll_buf *b, double t);

/* ---- recorded pages --------------------------------------------------------- */

/* llama.cpp: 4 busy slots, 2 deferred; 50 llama_decode() calls a second (a
 * 20 ms step); 1,000 earlier calls of 1 slot each weigh on the lifetime
 * mean; 200 generated tok/s; 300 prompt tok/s computed and 100 from the
 * cache (a 25% share). Its numbers go through a C++ stream: %g. */
static void llamacpp_page(ll_buf *b, double t)
{
    double dec = 1000 + 50 * t, busy_mean = (1000 * 1.0 + 50 * t * 4) / dec;
    struct {
        const char *name, *type, *help;
        double v;
    } items[] = {
        {"prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens", 5000 + 300 * t},
        {"prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache", 40 + 100 * t},
        {"prompt_seconds_total", "counter", "Total time spent processing prompts", 3.5 + 0.2 * t},
        {"tokens_predicted_total", "counter", "Number of generation tokens processed", 123456 + 200 * t},
        {"tokens_predicted_seconds_total", "counter", "Total time spent generating tokens", 60 + 4 * t},
        {"n_decode_total", "counter", "Total number of llama_decode() calls", dec},
        {"n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)", 1234},
        {"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s", 0},
        {"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s", 199.7},
        {"requests_processing", "gauge", "Number of requests processing", 4},
        {"requests_deferred", "gauge", "Number of requests deferred", 2},
        {"n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call", busy_mean},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
        ll_buf_printf(b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %g\n", items[i].name,
                      items[i].help, items[i].name, items[i].type, items[i].name, items[i].v);
}

/* vLLM's own latencies, engine 0: 200 gaps a second of 10 ms; 4 first
 * tokens a second, 3 of them under 0.1 s and one in (0.25, 0.5]: the mean
 * is 0.1 s by its sum; the p90 is 60% into the (0.25, 0.5] bucket
 * (0.4 s); queue 5 ms, prefill 50 ms, decode 1 s per request (4 a
 * second); a preemption every 2 s; 1 waiting for capacity, 0 deferred;
 * KV usage 0.3. */
static void vllm_page_latencies(ll_buf *b, double t, const char *lab)
{
    static const double le[] = {0.1, 0.25, 0.5};
    double n = 4 * t;
    ll_buf_printf(b, "# TYPE vllm:inter_token_latency_seconds histogram\n"
                     "vllm:inter_token_latency_seconds_sum{engine=\"0\",%s} %.6f\n"
                     "vllm:inter_token_latency_seconds_count{engine=\"0\",%s} %.1f\n"
                     "# TYPE vllm:time_to_first_token_seconds histogram\n",
                  lab, 0.010 * 200 * t, lab, 200 * t);
    for (size_t i = 0; i < 3; i++)
        ll_buf_printf(b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"%g\",%s} %.1f\n", le[i], lab,
                      i < 2 ? 0.75 * n : n);
    ll_buf_printf(b,
                  "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",%s} %.1f\n"
                  "vllm:time_to_first_token_seconds_sum{engine=\"0\",%s} %.6f\n"
                  "vllm:time_to_first_token_seconds_count{engine=\"0\",%s} %.1f\n",
                  lab, n, lab, 0.1 * n, lab, n);
    static const char *const h[] = {"request_queue_time", "request_prefill_time", "request_decode_time"};
    static const double per[] = {0.005, 0.050, 1.0};
    for (size_t i = 0; i < 3; i++)
        ll_buf_printf(b,
                      "# TYPE vllm:%s_seconds histogram\nvllm:%s_seconds_sum{engine=\"0\",%s} %.6f\n"
                      "vllm:%s_seconds_count{engine=\"0\",%s} %.1f\n",
                      h[i], h[i], lab, per[i] * n, h[i], lab, n);
    ll_buf_printf(b,
                  "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{engine=\"0\",%s} %.1f\n"
                  "# TYPE vllm:num_requests_waiting_by_reason gauge\n"
                  "vllm:num_requests_waiting_by_reason{engine=\"0\",%s,reason=\"capacity\"} 1.0\n"
                  "vllm:num_requests_waiting_by_reason{engine=\"0\",%s,reason=\"deferred\"} 0.0\n",
                  lab, floor(t / 2), lab, lab);
}

/* vLLM, two data-parallel engines of 3 and 2 running requests, each 100
 * iterations a second (10 ms, not 5) of 2.5 tokens; prefix cache: 1,000
 * tokens queried a second, 400 hit (40%); 250 generated tok/s in all. */
static void vllm_page(ll_buf *b, double t)
{
    static const char lab[] = "model_name=\"Qwen/Qwen3-8B\"";
    ll_buf_printf(b, "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                     "# TYPE vllm:num_requests_running gauge\n");
    for (int e = 0; e < 2; e++)
        ll_buf_printf(b, "vllm:num_requests_running{engine=\"%d\",%s} %.1f\n", e, lab, e ? 2.0 : 3.0);
    ll_buf_printf(b, "# TYPE vllm:num_requests_waiting gauge\n");
    for (int e = 0; e < 2; e++)
        ll_buf_printf(b, "vllm:num_requests_waiting{engine=\"%d\",%s} %.1f\n", e, lab, e ? 0.0 : 1.0);
    ll_buf_printf(b, "# TYPE vllm:iteration_tokens_total histogram\n");
    for (int e = 0; e < 2; e++)
        ll_buf_printf(b,
                      "vllm:iteration_tokens_total_bucket{engine=\"%d\",le=\"+Inf\",%s} %.1f\n"
                      "vllm:iteration_tokens_total_count{engine=\"%d\",%s} %.1f\n"
                      "vllm:iteration_tokens_total_sum{engine=\"%d\",%s} %.1f\n",
                      e, lab, floor(100 * t), e, lab, floor(100 * t), e, lab, 2.5 * floor(100 * t));
    ll_buf_printf(b,
                  "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine=\"0\",%s} %.1f\n"
                  "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\",%s} %.1f\n"
                  "# TYPE vllm:prefix_cache_queries_total counter\n"
                  "vllm:prefix_cache_queries_total{engine=\"0\",%s} %.1f\n"
                  "# TYPE vllm:prefix_cache_hits_total counter\n"
                  "vllm:prefix_cache_hits_total{engine=\"0\",%s} %.1f\n"
                  "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",%s} 0.3\n",
                  lab, 250 * t, lab, 1000 * t, lab, 1000 * t, lab, 400 * t, lab);
    vllm_page_latencies(b, t, lab);
}

/* SGLang, written "sglang_": 3 running, 1 queued; 500 prompt tok/s of
 * which 150 from the device cache and 50 from the host's (40%). */
static void sglang_page(ll_buf *b, double t)
{
    static const char lab[] = "engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"";
    ll_buf_printf(b,
                  "# HELP sglang_num_running_reqs The number of running requests.\n"
                  "# TYPE sglang_num_running_reqs gauge\nsglang_num_running_reqs{%s} 3.0\n"
                  "# TYPE sglang_num_queue_reqs gauge\nsglang_num_queue_reqs{%s} 1.0\n"
                  "# TYPE sglang_gen_throughput gauge\nsglang_gen_throughput{%s} %.1f\n"
                  "# TYPE sglang_prompt_tokens_total counter\nsglang_prompt_tokens_total{%s} %.1f\n"
                  "# TYPE sglang_generation_tokens_total counter\nsglang_generation_tokens_total{%s} %.1f\n"
                  "# TYPE sglang_cached_tokens_total counter\n"
                  "sglang_cached_tokens_total{cache_source=\"device\",%s} %.1f\n"
                  "sglang_cached_tokens_total{cache_source=\"host\",%s} %.1f\n",
                  lab, lab, lab, 300 + 10 * floor(t), lab, 500 * t, lab, 300 * t, lab, 150 * t, lab, 50 * t);
}

/* TGI: 6 in the batch, none queued; decode forwards of 30 ms at 30 a
 * second, prefill forwards of 400 ms beside them (not a decode step). */
static void tgi_page(ll_buf *b, double t)
{
    ll_buf_printf(b,
                  "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 6\n"
                  "# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n"
                  "# TYPE tgi_batch_forward_duration histogram\n"
                  "tgi_batch_forward_duration_bucket{method=\"decode\",le=\"+Inf\"} %.0f\n"
                  "tgi_batch_forward_duration_sum{method=\"decode\"} %.6f\n"
                  "tgi_batch_forward_duration_count{method=\"decode\"} %.0f\n"
                  "tgi_batch_forward_duration_bucket{method=\"prefill\",le=\"+Inf\"} %.0f\n"
                  "tgi_batch_forward_duration_sum{method=\"prefill\"} %.6f\n"
                  "tgi_batch_forward_duration_count{method=\"prefill\"} %.0f\n"
                  "# TYPE tgi_request_generated_tokens histogram\n"
                  "tgi_request_generated_tokens_sum %.0f\ntgi_request_generated_tokens_count %.0f\n",
                  30 * t, 0.030 * 30 * t, 30 * t, 2 * t, 0.4 * 2 * t, 2 * t, 180 * t, t);
}

/* TensorRT-LLM relayed as "trtllm:": 5 running, 12 ms last iteration;
 * 800 prompt tok/s of which 200 cached (25%). */
static void trtllm_page(ll_buf *b, double t)
{
    ll_buf_printf(b,
                  "# TYPE trtllm:num_requests_running gauge\ntrtllm:num_requests_running{model_name=\"m\"} 5\n"
                  "# TYPE trtllm:num_requests_waiting gauge\ntrtllm:num_requests_waiting{model_name=\"m\"} 0\n"
                  "# TYPE trtllm:iteration_latency_seconds gauge\n"
                  "trtllm:iteration_latency_seconds{model_name=\"m\"} 0.012\n"
                  "# TYPE trtllm:prompt_tokens_total counter\ntrtllm:prompt_tokens_total{model_name=\"m\"} %.0f\n"
                  "# TYPE trtllm:prompt_cached_tokens_total counter\n"
                  "trtllm:prompt_cached_tokens_total{model_name=\"m\"} %.0f\n",
                  800 * t, 200 * t);
}

/* An exporter no table row names: a Go process's own figures. */
static void unknown_page(ll_buf *b, double t)
{
    ll_buf_printf(b,
                  "# HELP go_goroutines Number of goroutines that currently exist.\n"
                  "# TYPE go_goroutines gauge\ngo_goroutines 12\n"
                  "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n"
                  "# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\"} %.0f\n",
                  0.5 * t, 10 * t);
}

/* ---- (a) the page through the table into the fit ------------------------------ */

typedef struct feed {
    fit_run *run;
    int64_t t_ns;
    ll_buf labels;
} feed;

static int on_sample(const tel_prom_sample *s, void *ctx)
{
    feed *f = ctx;
    ll_buf_reset(&f->labels);
    if (tel_prom_format_labels(&f->labels, s))
        return LL_ENOMEM;
    int kind = fit_server_kind(s->name, f->labels.p ? f->labels.p : "");
    if (kind == FIT_SMK_NONE)
        return 0;
    char key[1024];
    snprintf(key, sizeof key, "src\x1f%s\x1f%s", s->name, f->labels.p ? f->labels.p : "");
    size_t i = 0;
    while (i < f->run->series.n && strcmp(f->run->series.v[i], key) != 0)
        i++;
    if (i == f->run->series.n) {
        char *k = strdup(key);
        if (!k || ll_vec_push(&f->run->series, k))
            return LL_ENOMEM;
    }
    fit_server_sample smp = {.t_ns = f->t_ns, .kind = kind, .series = (uint32_t)i, .value = s->value};
    return ll_vec_push(&f->run->server, smp);
}

/* Lines a page may hold that the parser skips: vLLM 0.32's
 * cache_config_info carries 37 labels, over TEL_PROM_MAX_LABELS. */
static size_t bad_lines_allowed;

/* A level of LEVEL_S seconds scraped every SCRAPE_S: its server figures. */
static fit_level level_of(page_fn *page, size_t *n_samples)
{
    fit_level L;
    memset(&L, 0, sizeof L);
    L.start_ns = 0;
    L.end_ns = (int64_t)(LEVEL_S * 1e9);
    L.concurrency = 4;
    feed f = {.run = calloc(1, sizeof(fit_run))};
    ll_buf page_text = {0};
    for (double t = 0; t <= LEVEL_S + 1e-9; t += SCRAPE_S) {
        ll_buf_reset(&page_text);
        page(&page_text, t);
        f.t_ns = (int64_t)(t * 1e9);
        tel_prom_stats st = {0};
        CHECK(tel_prom_parse(page_text.p, page_text.len, on_sample, &f, &st) == 0 && st.n_bad <= bad_lines_allowed,
              "page parses (%zu bad lines)", st.n_bad);
    }
    *n_samples = f.run->server.n;
    fit_server_level(f.run, &L);
    ll_buf_free(&page_text);
    ll_buf_free(&f.labels);
    fit_run_free(f.run);
    return L;
}

static void test_llamacpp(void)
{
    size_t n;
    fit_level L = level_of(llamacpp_page, &n);
    CHECK(L.server == LL_SRV_LLAMACPP, "llama.cpp recognised: %d", L.server);
    CHECK_NEAR(L.server_n, 4, 1e-9, "llama.cpp N (requests_processing)");
    CHECK_NEAR(L.server_waiting, 2, 1e-9, "llama.cpp waiting (requests_deferred)");
    CHECK_REL(L.server_step_ms, 20, 1e-3, "llama.cpp step: window / n_decode_total");
    /* the lifetime mean is ~1.6 by the end; the window's own batch is 4 */
    CHECK_REL(L.server_tok_per_step, 4, 1e-3, "llama.cpp slots per decode, differenced");
    CHECK_REL(L.server_gen_tok_s, 200, 1e-3, "llama.cpp generated tok/s");
    CHECK_REL(L.server_cache_share, 0.25, 1e-3, "llama.cpp cached / (prompt + cached)");
    CHECK(n > 0, "samples kept");
}

static void test_vllm(void)
{
    size_t n;
    fit_level L = level_of(vllm_page, &n);
    CHECK(L.server == LL_SRV_VLLM, "vLLM recognised: %d", L.server);
    CHECK_NEAR(L.server_n, 5, 1e-9, "vLLM N summed over engines");
    CHECK_NEAR(L.server_waiting, 1, 1e-9, "vLLM waiting");
    CHECK_REL(L.server_step_ms, 10, 1e-6, "vLLM step: its inter-token latency, 10 ms");
    CHECK_REL(L.server_tok_per_step, 2.5, 1e-3, "vLLM tokens per iteration");
    CHECK_REL(L.server_gen_tok_s, 250, 1e-3, "vLLM generated tok/s");
    CHECK_REL(L.server_cache_share, 0.4, 1e-3, "vLLM prefix cache hits / queries");
    CHECK_REL(L.server_itl_mean_ms, 10, 1e-6, "vLLM ITL mean");
    CHECK_REL(L.server_ttft_mean_ms, 100, 1e-6, "vLLM TTFT mean");
    CHECK_REL(L.server_ttft_p90_ms, 400, 1e-6, "vLLM TTFT p90, inside the (0.25, 0.5] bucket");
    CHECK_REL(L.server_queue_mean_ms, 5, 1e-6, "vLLM queue mean");
    CHECK_REL(L.server_prefill_mean_ms, 50, 1e-6, "vLLM prefill mean");
    CHECK_REL(L.server_decode_mean_ms, 1000, 1e-6, "vLLM decode mean");
    CHECK_REL(L.server_kv_usage_mean, 0.3, 1e-9, "vLLM KV usage mean");
    CHECK_REL(L.server_kv_usage_max, 0.3, 1e-9, "vLLM KV usage max");
    CHECK_NEAR(L.server_preemptions, 3, 1e-9, "vLLM preemptions over 6 s, one every 2 s");
    CHECK_NEAR(L.server_waiting_capacity, 1, 1e-9, "vLLM waiting for capacity");
    CHECK_NEAR(L.server_waiting_deferred, 0, 1e-9, "vLLM waiting, deferred");
}

/* ---- (c) a real vLLM 0.32 page, before and during a level ------------------------- */

static char *fixture_text[2];

/* The first half of the level scrapes the idle page, the second the busy one. */
static void vllm_fixture_page(ll_buf *b, double t)
{
    ll_buf_printf(b, "%s", fixture_text[t >= LEVEL_S / 2]);
}

static void test_vllm_fixture(const char *dir)
{
    static const char *const names[2] = {"vllm-0.32-metrics-before.txt", "vllm-0.32-metrics-during.txt"};
    for (int i = 0; i < 2; i++) {
        char path[1024], err[256];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (ll_read_file(path, &fixture_text[i], &len, err, sizeof err)) {
            CHECK(0, "fixture %s: %s", path, err);
            return;
        }
    }
    size_t n;
    bad_lines_allowed = 1;
    fit_level L = level_of(vllm_fixture_page, &n);
    bad_lines_allowed = 0;
    /* 13 scrapes: 6 of the idle page (t < 3 s), 7 of the busy one */
    CHECK(L.server == LL_SRV_VLLM, "vLLM 0.32 recognised: %d", L.server);
    CHECK_REL(L.server_n, 8.0 * 7 / 13, 1e-9, "running: 0 then 8");
    CHECK_REL(L.server_itl_mean_ms, 29.61256024328295, 1e-9, "ITL: 30.9155 s over 1044 gaps");
    CHECK_REL(L.server_step_ms, 29.61256024328295, 1e-9, "server step: the ITL");
    CHECK_REL(L.server_ttft_mean_ms, 389.35094078381854, 1e-9, "TTFT mean: 9.3444 s over 24");
    CHECK_REL(L.server_ttft_p90_ms, 480.55555555555554, 1e-9, "TTFT p90: in the (0.25, 0.5] bucket");
    CHECK_REL(L.server_queue_mean_ms, 0.03287268771146046, 1e-9, "queue mean over 16 requests");
    CHECK_REL(L.server_prefill_mean_ms, 316.63380187535495, 1e-9, "prefill mean over 16 requests");
    CHECK_REL(L.server_decode_mean_ms, 1812.9431331867636, 1e-9, "decode mean over 16 requests");
    CHECK_REL(L.server_kv_usage_mean, 0.012669683257918566, 1e-9, "KV usage: 0, then 0.0235");
    CHECK_REL(L.server_kv_usage_max, 0.02352941176470591, 1e-9, "KV usage max");
    CHECK_NEAR(L.server_preemptions, 0, 1e-12, "no preemptions");
    CHECK_NEAR(L.server_waiting_capacity, 0, 1e-12, "none waiting for capacity");
    CHECK_NEAR(L.server_waiting_deferred, 0, 1e-12, "none deferred");
    CHECK_REL(L.server_gen_tok_s, (9260.0 - 8192) / 6, 1e-9, "generated tokens over the level");
    free(fixture_text[0]);
    free(fixture_text[1]);
}

static void test_sglang(void)
{
    size_t n;
    fit_level L = level_of(sglang_page, &n);
    CHECK(L.server == LL_SRV_SGLANG, "SGLang (sglang_ spelling) recognised: %d", L.server);
    CHECK_NEAR(L.server_n, 3, 1e-9, "SGLang N");
    CHECK_NEAR(L.server_waiting, 1, 1e-9, "SGLang waiting");
    CHECK(isnan(L.server_step_ms), "SGLang: no step time on its page: %g", L.server_step_ms);
    CHECK_REL(L.server_cache_share, 0.4, 1e-3, "SGLang cached (device + host) / prompt");
    CHECK_REL(L.server_gen_tok_s, 300, 1e-3, "SGLang generated tok/s");
    CHECK(L.server_stale_s >= 0.5 && L.server_stale_s < 1.01, "gen_throughput held for %.2f s", L.server_stale_s);
}

static void test_tgi(void)
{
    size_t n;
    fit_level L = level_of(tgi_page, &n);
    CHECK(L.server == LL_SRV_TGI, "TGI recognised: %d", L.server);
    CHECK_NEAR(L.server_n, 6, 1e-9, "TGI N (batch_current_size)");
    CHECK_NEAR(L.server_waiting, 0, 1e-9, "TGI waiting (queue_size)");
    CHECK_REL(L.server_step_ms, 30, 1e-3, "TGI decode forward, prefill excluded");
    CHECK(isnan(L.server_cache_share), "TGI: no cache figures: %g", L.server_cache_share);
}

static void test_trtllm(void)
{
    size_t n;
    fit_level L = level_of(trtllm_page, &n);
    CHECK(L.server == LL_SRV_TRTLLM, "TensorRT-LLM (trtllm: spelling) recognised: %d", L.server);
    CHECK_NEAR(L.server_n, 5, 1e-9, "TensorRT-LLM N");
    CHECK_REL(L.server_step_ms, 12, 1e-6, "TensorRT-LLM last-iteration gauge");
    CHECK_REL(L.server_cache_share, 0.25, 1e-3, "TensorRT-LLM cached / prompt");
}

static void test_unknown(void)
{
    size_t n;
    fit_level L = level_of(unknown_page, &n);
    CHECK(n == 0 && L.server == -1 && isnan(L.server_n), "nothing kept from an unknown page: %zu, %d", n, L.server);
}

static void test_table(void)
{
    /* both spellings, and a label filter that must match a whole pair */
    const ll_srv_metric *a = ll_srv_metric_find("sglang:num_running_reqs", NULL);
    const ll_srv_metric *b = ll_srv_metric_find("sglang_num_running_reqs", "tp_rank=\"0\"");
    CHECK(a && a == b && a->role == LL_ROLE_RUNNING, "SGLang's two spellings, one row");
    CHECK(ll_srv_metric_find("trtllm:num_requests_running", NULL) ==
              ll_srv_metric_find("trtllm_num_requests_running", NULL),
          "TensorRT-LLM's two spellings, one row");
    CHECK(ll_srv_metric_find("tgi_batch_forward_duration_sum", "method=\"decode\"") != NULL &&
              ll_srv_metric_find("tgi_batch_forward_duration_sum", "method=\"prefill\"") == NULL &&
              ll_srv_metric_find("tgi_batch_forward_duration_sum", "xmethod=\"decode\"") == NULL,
          "TGI: decode forwards only");
    CHECK(ll_srv_metric_find("vllm:num_requests_runnin", NULL) == NULL &&
              ll_srv_metric_find("sglang_", NULL) == NULL && ll_srv_metric_find("", NULL) == NULL,
          "near names are not rows");
    CHECK(ll_srv_of_prefix("vllm:new_family_2027") == LL_SRV_VLLM && ll_srv_of_prefix("go_goroutines") == LL_SRV__COUNT,
          "server by prefix");
    size_t n;
    const ll_srv_metric *t = ll_srv_metrics(&n);
    for (size_t i = 0; i < n; i++)
        CHECK(ll_srv_metric_find(t[i].name, t[i].label) != NULL && ll_srv_of_prefix(t[i].name) == t[i].server,
              "row %s: found by its own name, prefix names its server", t[i].name);
}

/* ---- (b) what the scraper says ---------------------------------------------- */

typedef struct pages {
    int64_t t0_ns;
} pages;

static int answer(int fd, const char *head, void *ctx)
{
    pages *p = ctx;
    double t = (ll_now_ns() - p->t0_ns) / 1e9;
    ll_buf b = {0};
    if (strncmp(head, "GET /llama/metrics ", 19) == 0)
        llamacpp_page(&b, t);
    else if (strncmp(head, "GET /other/metrics ", 19) == 0)
        unknown_page(&b, t);
    else if (strncmp(head, "GET /trt/metrics ", 17) == 0)
        ll_buf_printf(&b, "[{\"iterLatencyMS\": 12.0, \"numActiveRequests\": 5}]");
    else if (strncmp(head, "GET /trt/prometheus/metrics ", 28) == 0)
        trtllm_page(&b, t);
    tu_httpd_reply(fd, b.len ? "200 OK" : "404 Not Found", "text/plain", b.p ? b.p : "", b.len);
    ll_buf_free(&b);
    return 0;
}

static void test_scraper_says(void)
{
    char dir[256], rec[300], errf[300], err[256] = "";
    if (tu_tmpdir("ll_test_dialects", dir, sizeof dir))
        return;
    snprintf(rec, sizeof rec, "%s/records.jsonl", dir);
    snprintf(errf, sizeof errf, "%s/stderr.txt", dir);
    pages p = {.t0_ns = ll_now_ns()};
    tu_httpd *h = NULL;
    CHECK(tu_httpd_start(answer, &p, &h) == 0, "server");
    if (!h)
        return;
    char u1[128], u2[128], u3[128];
    snprintf(u1, sizeof u1, "http://127.0.0.1:%d/llama/metrics", tu_httpd_port(h));
    snprintf(u2, sizeof u2, "http://127.0.0.1:%d/other/metrics", tu_httpd_port(h));
    snprintf(u3, sizeof u3, "http://127.0.0.1:%d/trt/metrics", tu_httpd_port(h));
    tel_scrape_target tg[] = {{u1}, {u2}, {u3}};
    ll_rec_writer *w = NULL;
    CHECK(ll_rec_open(rec, 0, &w, err, sizeof err) == 0, "records: %s", err);
    /* the scraper's lines go to stderr: kept in a file for the checks */
    fflush(stderr);
    int saved = dup(2);
    FILE *ef = fopen(errf, "w");
    if (!ef || saved < 0 || dup2(fileno(ef), 2) < 0)
        return;
    tel_scrape *sc = NULL;
    int rc = tel_scrape_start(tg, 3, NULL, 0.1, w, &sc, err, sizeof err);
    usleep(600 * 1000);
    tel_scrape_stop(sc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(ef);
    CHECK(rc == 0, "scraper: %s", err);
    CHECK(ll_rec_close(w) == 0, "close");
    tu_httpd_stop(h);
    char *said = tu_slurp(errf);
    CHECK(tu_count(said, "/llama/metrics: llama.cpp (8 of 12 series kept)") == 1, "llama.cpp said once:\n%s",
          said ? said : "");
    CHECK(tu_count(said, "/other/metrics: 3 series, none a figure loadlaw reads (first families: go_goroutines, "
                         "process_cpu_seconds_total, http_requests_total)") == 1,
          "unknown page said once with its families:\n%s", said ? said : "");
    CHECK(tu_count(said, "/trt/metrics answered JSON; scraping http://127.0.0.1:") == 1 &&
              tu_count(said, "/trt/prometheus/metrics: TensorRT-LLM (") == 1,
          "TensorRT-LLM's JSON /metrics moved to /prometheus/metrics:\n%s", said ? said : "");
    CHECK(tu_count_in(rec, "llamacpp:n_decode_total") >= 2 && tu_count_in(rec, "trtllm:num_requests_running") >= 1 &&
              tu_count_in(rec, "go_goroutines") == 0,
          "known samples recorded, unknown ones not");
    free(said);
    if (!tu_fail)
        tu_rmtree(dir);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_dialects FIXTURES_DIR\n");
        return 2;
    }
    test_table();
    test_llamacpp();
    test_vllm();
    test_vllm_fixture(argv[1]);
    test_sglang();
    test_tgi();
    test_trtllm();
    test_unknown();
    test_scraper_says();
    TEST_MAIN_END();
}
