/* dialect.c: the table of dialect.h, and its lookups.
 *
 * DESIGN: one static array read by a linear scan. A page carries a few
 * hundred samples and the table ~100 rows, so a scrape costs ~20k string
 * compares at 2 Hz: nothing beside the request path, and a table a reader
 * can check row by row against a server's source. */
#include <string.h>

#include "dialect.h"

#define LLAMA_STEP "per generated token, the time each request spent generating: its first token counted, not its gap"
#define LLAMA_ITERS "llama_decode() calls, prefill calls included: the step (window / calls) only without tokens_predicted_seconds_total"
#define VLLM_STEP "inter-token latency: the gap between a request's consecutive tokens (an iteration that also prefilled counted)"
#define VLLM_ITERS "iterations, prefill ones included: the step (busy span / iterations) only without inter_token_latency"
#define SGL_STALE "updated every --decode-log-interval steps (default 40): set 1 for benchmarks"
#define TRT_LAST "the last iteration's latency only, sampled at each scrape"

static const ll_srv_metric table[] = {
    /* loadlaw's bundled engine (engine/metrics.c) */
    {"loadlaw_running_requests", LL_SRV_LOADLAW, LL_ROLE_RUNNING, NULL, NULL},
    {"loadlaw_waiting_requests", LL_SRV_LOADLAW, LL_ROLE_WAITING, NULL, NULL},
    {"loadlaw_step_duration_seconds_sum", LL_SRV_LOADLAW, LL_ROLE_STEP_SUM, NULL, NULL},
    {"loadlaw_step_duration_seconds_count", LL_SRV_LOADLAW, LL_ROLE_STEP_COUNT, NULL, NULL},
    {"loadlaw_steps_total", LL_SRV_LOADLAW, LL_ROLE_ITERS, NULL, NULL},
    {"loadlaw_generation_tokens_total", LL_SRV_LOADLAW, LL_ROLE_GEN_TOKENS, NULL, NULL},
    {"loadlaw_prompt_tokens_total", LL_SRV_LOADLAW, LL_ROLE_PROMPT_UNCACHED, NULL, NULL},
    {"loadlaw_prompt_tokens_cached_total", LL_SRV_LOADLAW, LL_ROLE_CACHED_TOKENS, NULL, NULL},
    {"loadlaw_inter_token_latency_seconds_sum", LL_SRV_LOADLAW, LL_ROLE_ITL_SUM, NULL, NULL},
    {"loadlaw_inter_token_latency_seconds_count", LL_SRV_LOADLAW, LL_ROLE_ITL_COUNT, NULL, NULL},
    {"loadlaw_time_to_first_token_seconds_sum", LL_SRV_LOADLAW, LL_ROLE_TTFT_SUM, NULL, NULL},
    {"loadlaw_time_to_first_token_seconds_count", LL_SRV_LOADLAW, LL_ROLE_TTFT_COUNT, NULL, NULL},
    {"loadlaw_time_to_first_token_seconds_bucket", LL_SRV_LOADLAW, LL_ROLE_TTFT_BUCKET, NULL, NULL},
    {"loadlaw_request_queue_time_seconds_sum", LL_SRV_LOADLAW, LL_ROLE_QUEUE_SUM, NULL, NULL},
    {"loadlaw_request_queue_time_seconds_count", LL_SRV_LOADLAW, LL_ROLE_QUEUE_COUNT, NULL, NULL},

    /* vLLM v1 (older spellings kept: an older image still reports) */
    {"vllm:num_requests_running", LL_SRV_VLLM, LL_ROLE_RUNNING, NULL, NULL},
    {"vllm:num_requests_waiting", LL_SRV_VLLM, LL_ROLE_WAITING, NULL, NULL},
    {"vllm:iteration_tokens_total_count", LL_SRV_VLLM, LL_ROLE_ITERS, NULL, VLLM_ITERS},
    {"vllm:iteration_tokens_total_sum", LL_SRV_VLLM, LL_ROLE_ITER_TOKENS, NULL,
     "tokens per iteration: N in pure decode, more while prompts prefill"},
    {"vllm:generation_tokens_total", LL_SRV_VLLM, LL_ROLE_GEN_TOKENS, NULL, NULL},
    {"vllm:prompt_tokens_total", LL_SRV_VLLM, LL_ROLE_PROMPT_TOKENS, NULL, NULL},
    {"vllm:prefix_cache_hits_total", LL_SRV_VLLM, LL_ROLE_CACHED_TOKENS, NULL, NULL},
    {"vllm:prefix_cache_queries_total", LL_SRV_VLLM, LL_ROLE_CACHE_QUERIES, NULL, NULL},
    {"vllm:gpu_prefix_cache_hits_total", LL_SRV_VLLM, LL_ROLE_CACHED_TOKENS, NULL, NULL},
    {"vllm:gpu_prefix_cache_queries_total", LL_SRV_VLLM, LL_ROLE_CACHE_QUERIES, NULL, NULL},
    {"vllm:kv_cache_usage_perc", LL_SRV_VLLM, LL_ROLE_KV_USAGE, NULL, NULL},
    {"vllm:gpu_cache_usage_perc", LL_SRV_VLLM, LL_ROLE_KV_USAGE, NULL, NULL},
    {"vllm:num_preemptions_total", LL_SRV_VLLM, LL_ROLE_PREEMPTIONS, NULL, NULL},
    {"vllm:inter_token_latency_seconds_sum", LL_SRV_VLLM, LL_ROLE_ITL_SUM, NULL, VLLM_STEP},
    {"vllm:inter_token_latency_seconds_count", LL_SRV_VLLM, LL_ROLE_ITL_COUNT, NULL, NULL},
    {"vllm:time_per_output_token_seconds_sum", LL_SRV_VLLM, LL_ROLE_ITL_SUM, NULL, NULL},
    {"vllm:time_per_output_token_seconds_count", LL_SRV_VLLM, LL_ROLE_ITL_COUNT, NULL, NULL},
    {"vllm:time_to_first_token_seconds_sum", LL_SRV_VLLM, LL_ROLE_TTFT_SUM, NULL, NULL},
    {"vllm:time_to_first_token_seconds_count", LL_SRV_VLLM, LL_ROLE_TTFT_COUNT, NULL, NULL},
    {"vllm:time_to_first_token_seconds_bucket", LL_SRV_VLLM, LL_ROLE_TTFT_BUCKET, NULL, NULL},
    {"vllm:request_queue_time_seconds_sum", LL_SRV_VLLM, LL_ROLE_QUEUE_SUM, NULL, NULL},
    {"vllm:request_queue_time_seconds_count", LL_SRV_VLLM, LL_ROLE_QUEUE_COUNT, NULL, NULL},
    {"vllm:request_prefill_time_seconds_sum", LL_SRV_VLLM, LL_ROLE_PREFILL_SUM, NULL, NULL},
    {"vllm:request_prefill_time_seconds_count", LL_SRV_VLLM, LL_ROLE_PREFILL_COUNT, NULL, NULL},
    {"vllm:request_decode_time_seconds_sum", LL_SRV_VLLM, LL_ROLE_DECODE_SUM, NULL, NULL},
    {"vllm:request_decode_time_seconds_count", LL_SRV_VLLM, LL_ROLE_DECODE_COUNT, NULL, NULL},
    {"vllm:num_requests_waiting_by_reason", LL_SRV_VLLM, LL_ROLE_WAITING_CAPACITY, "reason=\"capacity\"", NULL},
    {"vllm:num_requests_waiting_by_reason", LL_SRV_VLLM, LL_ROLE_WAITING_DEFERRED, "reason=\"deferred\"", NULL},

    /* SGLang --enable-metrics ("sglang_" matched as well) */
    {"sglang:num_running_reqs", LL_SRV_SGLANG, LL_ROLE_RUNNING, NULL, SGL_STALE},
    {"sglang:num_queue_reqs", LL_SRV_SGLANG, LL_ROLE_WAITING, NULL, SGL_STALE},
    {"sglang:gen_throughput", LL_SRV_SGLANG, LL_ROLE_GEN_THROUGHPUT, NULL, SGL_STALE},
    {"sglang:token_usage", LL_SRV_SGLANG, LL_ROLE_KV_USAGE, NULL, SGL_STALE},
    {"sglang:generation_tokens_total", LL_SRV_SGLANG, LL_ROLE_GEN_TOKENS, NULL, NULL},
    {"sglang:prompt_tokens_total", LL_SRV_SGLANG, LL_ROLE_PROMPT_TOKENS, NULL, NULL},
    {"sglang:cached_tokens_total", LL_SRV_SGLANG, LL_ROLE_CACHED_TOKENS, NULL,
     "summed over cache_source (device, host, storage)"},
    {"sglang:num_retracted_reqs", LL_SRV_SGLANG, LL_ROLE_PREEMPTIONS, NULL, NULL},
    {"sglang:inter_token_latency_seconds_sum", LL_SRV_SGLANG, LL_ROLE_ITL_SUM, NULL, NULL},
    {"sglang:inter_token_latency_seconds_count", LL_SRV_SGLANG, LL_ROLE_ITL_COUNT, NULL, NULL},
    {"sglang:time_to_first_token_seconds_sum", LL_SRV_SGLANG, LL_ROLE_TTFT_SUM, NULL, NULL},
    {"sglang:time_to_first_token_seconds_count", LL_SRV_SGLANG, LL_ROLE_TTFT_COUNT, NULL, NULL},
    {"sglang:time_to_first_token_seconds_bucket", LL_SRV_SGLANG, LL_ROLE_TTFT_BUCKET, NULL, NULL},
    {"sglang:queue_time_seconds_sum", LL_SRV_SGLANG, LL_ROLE_QUEUE_SUM, NULL, NULL},
    {"sglang:queue_time_seconds_count", LL_SRV_SGLANG, LL_ROLE_QUEUE_COUNT, NULL, NULL},

    /* llama.cpp llama-server --metrics (no labels) */
    {"llamacpp:requests_processing", LL_SRV_LLAMACPP, LL_ROLE_RUNNING, NULL, "busy slots"},
    {"llamacpp:requests_deferred", LL_SRV_LLAMACPP, LL_ROLE_WAITING, NULL, NULL},
    {"llamacpp:n_decode_total", LL_SRV_LLAMACPP, LL_ROLE_ITERS, NULL, LLAMA_ITERS},
    {"llamacpp:tokens_predicted_seconds_total", LL_SRV_LLAMACPP, LL_ROLE_GEN_SECONDS, NULL, LLAMA_STEP},
    {"llamacpp:n_busy_slots_per_decode", LL_SRV_LLAMACPP, LL_ROLE_BUSY_PER_ITER, NULL,
     "a mean since start: per window from its product with n_decode_total"},
    {"llamacpp:tokens_predicted_total", LL_SRV_LLAMACPP, LL_ROLE_GEN_TOKENS, NULL,
     "counted when a request ends (a slot's reset): gen tok/s is coarse over short levels"},
    {"llamacpp:prompt_tokens_total", LL_SRV_LLAMACPP, LL_ROLE_PROMPT_UNCACHED, NULL, NULL},
    {"llamacpp:prompt_tokens_cached_total", LL_SRV_LLAMACPP, LL_ROLE_CACHED_TOKENS, NULL, NULL},
    {"llamacpp:prompt_tokens_cache_total", LL_SRV_LLAMACPP, LL_ROLE_CACHED_TOKENS, NULL, NULL},

    /* TGI (router metrics; counters without _total) */
    {"tgi_batch_current_size", LL_SRV_TGI, LL_ROLE_RUNNING, NULL, NULL},
    {"tgi_queue_size", LL_SRV_TGI, LL_ROLE_WAITING, NULL, NULL},
    {"tgi_batch_forward_duration_sum", LL_SRV_TGI, LL_ROLE_STEP_SUM, "method=\"decode\"", NULL},
    {"tgi_batch_forward_duration_count", LL_SRV_TGI, LL_ROLE_STEP_COUNT, "method=\"decode\"", NULL},
    {"tgi_request_generated_tokens_sum", LL_SRV_TGI, LL_ROLE_GEN_TOKENS, NULL,
     "counted when a request ends"},
    {"tgi_request_input_length_sum", LL_SRV_TGI, LL_ROLE_PROMPT_TOKENS, NULL, "counted when a request ends"},
    {"tgi_request_queue_duration_sum", LL_SRV_TGI, LL_ROLE_QUEUE_SUM, NULL, NULL},
    {"tgi_request_queue_duration_count", LL_SRV_TGI, LL_ROLE_QUEUE_COUNT, NULL, NULL},

    /* TensorRT-LLM trtllm-serve, /prometheus/metrics ("trtllm:" matched as well);
     * the running/waiting/iteration gauges need enable_iter_perf_stats */
    {"trtllm_num_requests_running", LL_SRV_TRTLLM, LL_ROLE_RUNNING, NULL, NULL},
    {"trtllm_num_requests_waiting", LL_SRV_TRTLLM, LL_ROLE_WAITING, NULL, NULL},
    {"trtllm_iteration_latency_seconds", LL_SRV_TRTLLM, LL_ROLE_STEP_LAST, NULL, TRT_LAST},
    {"trtllm_generation_tokens_total", LL_SRV_TRTLLM, LL_ROLE_GEN_TOKENS, NULL, NULL},
    {"trtllm_prompt_tokens_total", LL_SRV_TRTLLM, LL_ROLE_PROMPT_TOKENS, NULL, NULL},
    {"trtllm_prompt_cached_tokens_total", LL_SRV_TRTLLM, LL_ROLE_CACHED_TOKENS, NULL, NULL},
    {"trtllm_kv_cache_utilization", LL_SRV_TRTLLM, LL_ROLE_KV_USAGE, NULL, NULL},
    {"trtllm_time_to_first_token_seconds_sum", LL_SRV_TRTLLM, LL_ROLE_TTFT_SUM, NULL, NULL},
    {"trtllm_time_to_first_token_seconds_count", LL_SRV_TRTLLM, LL_ROLE_TTFT_COUNT, NULL, NULL},
    {"trtllm_time_to_first_token_seconds_bucket", LL_SRV_TRTLLM, LL_ROLE_TTFT_BUCKET, NULL, NULL},
    {"trtllm_request_queue_time_seconds_sum", LL_SRV_TRTLLM, LL_ROLE_QUEUE_SUM, NULL, NULL},
    {"trtllm_request_queue_time_seconds_count", LL_SRV_TRTLLM, LL_ROLE_QUEUE_COUNT, NULL, NULL},

    /* NVIDIA DCGM exporter */
    {"DCGM_FI_DEV_POWER_USAGE", LL_SRV_DCGM, LL_ROLE_POWER_W, NULL, NULL},
    {"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", LL_SRV_DCGM, LL_ROLE_POWER_LIMIT_W, NULL, NULL},
    {"DCGM_FI_DEV_POWER_MGMT_LIMIT", LL_SRV_DCGM, LL_ROLE_POWER_MGMT_LIMIT_W, NULL, NULL},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", LL_SRV_DCGM, LL_ROLE_ENERGY_MJ, NULL, NULL},
    {"DCGM_FI_PROF_SM_ACTIVE", LL_SRV_DCGM, LL_ROLE_SM_ACTIVE, NULL, NULL},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", LL_SRV_DCGM, LL_ROLE_TENSOR_ACTIVE, NULL, NULL},
    {"DCGM_FI_PROF_DRAM_ACTIVE", LL_SRV_DCGM, LL_ROLE_DRAM_ACTIVE, NULL, NULL},
    {"DCGM_FI_DEV_SM_CLOCK", LL_SRV_DCGM, LL_ROLE_SM_CLOCK_MHZ, NULL, NULL},
    {"DCGM_FI_PROF_SM_OCCUPANCY", LL_SRV_DCGM, LL_ROLE_SM_OCCUPANCY, NULL, NULL},

    /* loadlaw's own NVML sampler (telemetry/gpu_sample.c) */
    {"nvml_power_w", LL_SRV_NVML, LL_ROLE_POWER_W, NULL, NULL},
    {"nvml_power_limit_w", LL_SRV_NVML, LL_ROLE_POWER_LIMIT_W, NULL, NULL},
    {"nvml_energy_mj", LL_SRV_NVML, LL_ROLE_ENERGY_MJ, NULL, NULL},
    {"nvml_sm_active_ratio", LL_SRV_NVML, LL_ROLE_SM_ACTIVE, NULL, NULL},
    {"nvml_tensor_active_ratio", LL_SRV_NVML, LL_ROLE_TENSOR_ACTIVE, NULL, NULL},
    {"nvml_dram_active_ratio", LL_SRV_NVML, LL_ROLE_DRAM_ACTIVE, NULL, NULL},
};

/* Separators a server has written two ways: the table holds the first. */
static const struct {
    const char *as_table, *also;
} spellings[] = {{"sglang:", "sglang_"}, {"trtllm_", "trtllm:"}};

static int labels_hold(const char *labels, const char *want)
{
    if (!want)
        return 1;
    if (!labels)
        return 0;
    size_t n = strlen(want);
    for (const char *p = labels; (p = strstr(p, want)); p += n)
        if ((p == labels || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

static const ll_srv_metric *find_exact(const char *name, const char *tail, size_t head_len, const char *labels)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const ll_srv_metric *m = &table[i];
        if (tail ? strncmp(m->name, name, head_len) == 0 && strcmp(m->name + head_len, tail) == 0
                 : strcmp(m->name, name) == 0)
            if (labels_hold(labels, m->label))
                return m;
    }
    return NULL;
}

const ll_srv_metric *ll_srv_metric_find(const char *name, const char *labels)
{
    const ll_srv_metric *m = find_exact(name, NULL, 0, labels);
    if (m)
        return m;
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        size_t k = strlen(spellings[i].also);
        if (strncmp(name, spellings[i].also, k) == 0)
            return find_exact(spellings[i].as_table, name + k, k, labels);
    }
    return NULL;
}

const char *ll_srv_name(ll_srv s)
{
    static const char *const names[] = {"loadlaw engine", "vLLM",         "SGLang",        "llama.cpp",
                                        "TGI",            "TensorRT-LLM", "DCGM exporter", "NVML"};
    return (unsigned)s < LL_SRV__COUNT ? names[s] : "unknown";
}

ll_srv ll_srv_of_prefix(const char *name)
{
    static const struct {
        const char *prefix;
        ll_srv s;
    } prefixes[] = {{"loadlaw_", LL_SRV_LOADLAW}, {"vllm:", LL_SRV_VLLM},     {"sglang:", LL_SRV_SGLANG},
                    {"sglang_", LL_SRV_SGLANG},   {"llamacpp:", LL_SRV_LLAMACPP}, {"tgi_", LL_SRV_TGI},
                    {"trtllm_", LL_SRV_TRTLLM},   {"trtllm:", LL_SRV_TRTLLM}, {"DCGM_", LL_SRV_DCGM},
                    {"nvml_", LL_SRV_NVML}};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i].prefix, strlen(prefixes[i].prefix)) == 0)
            return prefixes[i].s;
    return LL_SRV__COUNT;
}

const ll_srv_metric *ll_srv_metrics(size_t *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}
