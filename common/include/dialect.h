/* dialect.h: what each server's /metrics names mean, as one table.
 *
 * Every inference server publishes the same few facts about its own steps
 * under its own names: how many requests run and wait, how many engine
 * iterations it made and how long they took, how many tokens it generated
 * and prefilled, and how many prompt tokens its prefix cache served. The
 * scraper (telemetry/scrape.c) keeps the samples this table names and says
 * which server it recognised; the fit (fit/server.c) turns them into server
 * N, waiting, step time, tokens and cache share per level by role, so a new
 * server is a few rows here, not code in two modules.
 *
 * Sources of the names (checked against each server's code or docs):
 * loadlaw's engine (engine/metrics.c); vLLM v1 (vllm/v1/metrics/loggers.py,
 * with the 2025-26 renames: kv_cache_usage_perc, prefix_cache_*,
 * inter_token_latency); SGLang (python/sglang/srt/metrics/collector.py: its
 * releases and routers have written both "sglang:" and "sglang_", so both
 * are matched); llama.cpp's llama-server --metrics (tools/server/
 * server-task.cpp, to_metrics: "llamacpp:", no labels); TGI (router
 * metrics, "tgi_"); TensorRT-LLM's trtllm-serve (/prometheus/metrics,
 * "trtllm_", relayed as "trtllm:"); NVIDIA's DCGM exporter; loadlaw's own
 * NVML sampler (telemetry/gpu_sample.c, nvml_*). */
#ifndef LOADLAW_DIALECT_H
#define LOADLAW_DIALECT_H

#include <stddef.h>

/* The servers, in the order the fit prefers when a page holds two (an
 * engine that also serves another's names counts once). */
typedef enum ll_srv {
    LL_SRV_LOADLAW,
    LL_SRV_VLLM,
    LL_SRV_SGLANG,
    LL_SRV_LLAMACPP,
    LL_SRV_TGI,
    LL_SRV_TRTLLM,
    LL_SRV_DCGM,  /* GPU exporters: never "the server" */
    LL_SRV_NVML,
    LL_SRV__COUNT
} ll_srv;

/* What a sample says. Units: requests, tokens, seconds, watts, millijoules,
 * 0..1 ratios. */
typedef enum ll_srv_role {
    LL_ROLE_RUNNING,          /* gauge: requests in the running batch */
    LL_ROLE_WAITING,          /* gauge: requests queued, not yet running */
    LL_ROLE_STEP_SUM,         /* counter: seconds over decode steps (histogram _sum) */
    LL_ROLE_STEP_COUNT,       /* counter: decode steps (the same histogram's _count) */
    LL_ROLE_ITERS,            /* counter: engine iterations (busy span / its delta = step) */
    LL_ROLE_ITER_TOKENS,      /* counter: tokens over those iterations (per step = N in decode) */
    LL_ROLE_BUSY_PER_ITER,    /* gauge: lifetime mean requests per iteration (llama.cpp) */
    LL_ROLE_STEP_LAST,        /* gauge: seconds of the last iteration only (TensorRT-LLM) */
    LL_ROLE_GEN_TOKENS,       /* counter: generated tokens */
    LL_ROLE_PROMPT_TOKENS,    /* counter: prompt tokens, cached ones included */
    LL_ROLE_PROMPT_UNCACHED,  /* counter: prompt tokens computed, cached ones excluded */
    LL_ROLE_CACHED_TOKENS,    /* counter: prompt tokens served from the prefix cache */
    LL_ROLE_CACHE_QUERIES,    /* counter: prompt tokens looked up in the prefix cache */
    LL_ROLE_GEN_THROUGHPUT,   /* gauge: tokens/s as the server last logged it */
    LL_ROLE_KV_USAGE,         /* gauge: KV cache in use, 0..1 */
    LL_ROLE_PREEMPTIONS,      /* counter */
    LL_ROLE_ITL_SUM,          /* counter: seconds between tokens (histogram _sum) */
    LL_ROLE_ITL_COUNT,        /* counter */
    LL_ROLE_GEN_SECONDS,      /* counter: seconds requests spent generating, summed over
                               * requests: per generated token, the gap each saw (llama.cpp) */
    LL_ROLE_TTFT_SUM,         /* counter: seconds to first token (histogram _sum) */
    LL_ROLE_TTFT_COUNT,       /* counter */
    LL_ROLE_TTFT_BUCKET,      /* counter: the same histogram's _bucket (label le) */
    LL_ROLE_QUEUE_SUM,        /* counter: seconds requests waited before running (_sum) */
    LL_ROLE_QUEUE_COUNT,      /* counter */
    LL_ROLE_PREFILL_SUM,      /* counter: seconds from scheduled to first token (_sum) */
    LL_ROLE_PREFILL_COUNT,    /* counter */
    LL_ROLE_DECODE_SUM,       /* counter: seconds from first to last token (_sum) */
    LL_ROLE_DECODE_COUNT,     /* counter */
    LL_ROLE_WAITING_CAPACITY, /* gauge: waiting for batch or KV capacity */
    LL_ROLE_WAITING_DEFERRED, /* gauge: waiting on something else (LoRA budget, KV transfer) */
    LL_ROLE_POWER_W,          /* GPU (fit/gpu.c) */
    LL_ROLE_POWER_LIMIT_W,
    LL_ROLE_POWER_MGMT_LIMIT_W,
    LL_ROLE_ENERGY_MJ,
    LL_ROLE_SM_ACTIVE,
    LL_ROLE_TENSOR_ACTIVE,
    LL_ROLE_DRAM_ACTIVE,
    LL_ROLE_SM_CLOCK_MHZ,
    LL_ROLE_SM_OCCUPANCY,
    LL_ROLE__COUNT
} ll_srv_role;

typedef struct ll_srv_metric {
    const char *name;      /* as the server writes it (SGLang: the "sglang:" spelling) */
    ll_srv server;
    ll_srv_role role;
    const char *label;     /* NULL, or one `k="v"` the sample's labels must hold */
    const char *caveat;    /* NULL, or what the figure does not mean, said where it is used */
} ll_srv_metric;

/* The row for a sample: its name (either SGLang or TensorRT-LLM separator)
 * and its labels in exposition form (k="v",k2="v2"; NULL: none). NULL when
 * the table has no row: the sample is not kept. */
const ll_srv_metric *ll_srv_metric_find(const char *name, const char *labels);

/* "loadlaw engine", "vLLM", "SGLang", "llama.cpp", "TGI", "TensorRT-LLM",
 * "DCGM exporter", "NVML". */
const char *ll_srv_name(ll_srv s);

/* The server whose prefix a family name carries (LL_SRV__COUNT: none
 * known), from the name alone: a page with none of the table's rows but
 * "vllm:" names is still a vLLM the table is behind on. */
ll_srv ll_srv_of_prefix(const char *name);

/* The table, for docs and tests. */
const ll_srv_metric *ll_srv_metrics(size_t *n);

#endif
