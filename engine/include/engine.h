/* engine.h: the bundled decode engine behind an OpenAI-compatible HTTP server.
 *
 * A program starts the engine in its own process on a loopback port (port 0
 * picks an ephemeral one), reads its URL, drives it over HTTP like any server,
 * reads the engine's own step log (or has its steps put into a records
 * writer, eng_set_records), and stops it. `loadlaw serve` is a thin
 * wrapper over this header.
 *
 * HTTP surface: POST /v1/chat/completions and /v1/completions (streaming SSE
 * or not; chat thinking tokens as delta.reasoning_content, completions'
 * thinking inline between <think> and </think>; the request extension
 * "think_tokens" overrides cfg.think_tokens), GET /v1/models, /health,
 * /metrics (Prometheus text), POST /start_profile {"num_steps","output_dir",
 * "gzip","timeout_s"} (with num_steps it answers once the trace is written,
 * with its "path": after num_steps steps, when the engine goes idle, or after
 * timeout_s (default 30) on an idle engine; with an empty body it captures until POST /stop_profile, which
 * answers with the path; a step is in /metrics and in a running capture
 * before its tokens are released; output_dir is a plain subdirectory name of
 * cfg.profile_dir, nothing else). With cfg.api_key every path but /health
 * needs "Authorization: Bearer KEY" (401); cfg.control_key, cfg.no_control
 * govern the control routes (the two profile routes and POST
 * /reset_prefix_cache, which empties the prefix cache: vLLM's spelling). Every JSON body is valid UTF-8 (request
 * bytes echoed into errors are scrubbed and cut between characters).
 * A body holding a key twice (in any object) is a 400 naming it; every
 * sampling parameter is checked and, decoding being greedy, unused
 * (docs/engine.md, "What a request may say").
 * Prompt tokens are whitespace-separated words of all
 * message contents (or the prompt); usage is exact. Errors are OpenAI-style
 * {"error":{"message","type","param","code"}} with a 4xx (503: queue full).
 *
 * Threads: eng_start creates the scheduler thread and the HTTP server threads;
 * all functions here may be called from any thread. eng_stop joins them.
 * With the synthetic backend the scheduler thread, which only sleeps, asks
 * for SCHED_FIFO priority 1 so it wakes on its deadlines on a busy machine.
 * Without CAP_SYS_NICE or an RLIMIT_RTPRIO that is refused: the engine then
 * runs at normal priority (an info log line says so; serve -v shows it), otherwise
 * unchanged. Backends that compute on the scheduler thread never ask.
 * The engine installs no signal handlers and changes no signal mask.
 * Errors: 0 or a negative LL_E* code (common.h) with a message in err.
 */
#ifndef LOADLAW_ENGINE_H
#define LOADLAW_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "records.h"

typedef enum eng_backend_kind {
    ENG_BACKEND_SYNTHETIC = 0, /* step time played from a law */
    ENG_BACKEND_CPU = 1,       /* real arithmetic (engine/cpu/) */
    ENG_BACKEND_CUDA = 2,      /* GPU kernels (when built with CUDA) */
} eng_backend_kind;

/* Most batch buckets a synthetic law takes (eng_config.law_buckets). */
#define ENG_LAW_MAX_BUCKETS LL_REC_LAW_MAX_BUCKETS

/* The engine's configuration: a plain struct the caller fills.
 *
 * Strings: a config owns the strings that eng_config_set / eng_parse_spec /
 * eng_config_copy stored in it (copies), and eng_config_free releases them;
 * a string field the caller assigns directly is borrowed and must outlive the
 * config's use (eng_start takes its own copy of everything, so only until
 * eng_start returns). Copy a config with eng_config_copy, not `=`, once it
 * owns strings: a plain assignment shares them. NULL string fields mean the
 * default. */
/* eng_config.attn_fault: a deliberate bug in the cpu and cuda backends' tiled
 * kernels, for testing that an A/B catches a wrong kernel (docs/engine.md). */
enum { ENG_ATTN_FAULT_NONE = 0, ENG_ATTN_FAULT_SKIP_LAST_TILE = 1, ENG_ATTN_FAULT_SWAP_HEADS = 2 };

typedef struct eng_config {
    /* server */
    const char *bind_addr;     /* default "127.0.0.1" */
    int port;                  /* 0 = ephemeral */
    const char *model;         /* served model name, default "loadlaw-synthetic" */
    unsigned max_connections;  /* default 8192 */
    size_t max_body_bytes;     /* default 1 MiB */
    unsigned idle_timeout_s;   /* [idle_timeout] a connection whose request is being answered
                                * is closed after this long without a byte moving (a
                                * suspended stream waiting for tokens never times out);
                                * default 120 */
    unsigned request_timeout_s; /* [request_timeout] a connection waiting for a request (from
                                * its accept, or the end of the previous answer, until the
                                * whole request is in) is closed after this long without a
                                * byte arriving; default 10 */
    unsigned max_connections_per_ip; /* [max_connections_per_ip] connections one client IPv4
                                * address may hold at once (more are closed on accept);
                                * 0 (default): max_connections - 64, or half of
                                * max_connections below 128, so one address cannot take
                                * every slot while one load generator can take nearly all */
    size_t conn_memory_bytes;  /* [conn_memory] libmicrohttpd's memory pool per connection
                                * (request line and headers, upload read buffer, response
                                * headers; bodies accumulate outside it): the server's
                                * memory per stream is this plus ~0.5 KB, since MHD touches
                                * the whole pool. Headers that do not fit get 431.
                                * Default 8 KiB (MHD's own default, 32 KiB, cost 32.6 KB a
                                * stream; 8 KiB takes ~7 KB of headers) */
    /* scheduler */
    int max_running;           /* sequences decoding at once, default 256 */
    int max_waiting;           /* queue bound beyond free batch slots; a full queue answers
                                * 503; default 8192 */
    int prefill_budget_tok;    /* prompt tokens prefilled per step, default 2048 */
    int max_tokens_limit;      /* largest max_tokens accepted, default 32768 */
    int think_tokens;          /* default thinking tokens per request, default 0 */
    int max_context_tok;       /* prompt + output bound, default 131072 */
    /* backend */
    eng_backend_kind backend;
    /* synthetic law, in milliseconds before time_scale:
     * step = a + b*N + c*(total context tokens / 1000) + p*(prefill tokens in step) */
    double law_a_ms, law_b_ms, law_c_ms_per_ktok, law_p_ms_per_tok;
    /* [buckets] the law's shape in N (b*N above): a step with N decoding
     * sequences costs the law at the smallest bucket >= N, as servers that
     * pad the batch to captured sizes do; N above the largest bucket is N
     * itself. Strictly increasing, 1..ENG_LAW_MAX_BUCKETS of them; 0 = none */
    int law_buckets[ENG_LAW_MAX_BUCKETS];
    int law_n_buckets;
    /* [knee] for N above law_knee_n the per-sequence slope is law_knee_b_ms
     * instead of b, continuous at the knee: b*k + knee_b*(N - k). Applied
     * after the bucket; law_knee_n = 0: no knee (default) */
    int law_knee_n;
    double law_knee_b_ms;
    double time_scale;         /* multiplies every step time; default 1 */
    double jitter_frac;        /* relative std-dev of seeded gaussian jitter, default 0 */
    uint64_t seed;             /* default 1 */
    /* cpu/cuda backends (engine/cpu/README.md); spec keys in brackets */
    const char *attn;          /* [attn] "naive" | "tiled" | "v2" (cuda), default "tiled" */
    int heads;                 /* [heads] query heads, default 64 (cpu: at most 1024) */
    int topk;                  /* [topk] KV rows selected per decode, default 2048 */
    int threads;               /* [threads] compute threads, 0 = all online cores, default 1 */
    int tp;                    /* [tp] tensor-parallel ranks, 1..64, default 1: heads and the
                                * dense weights sharded K ways, an all-reduce per step (cpu:
                                * K thread groups sharing `threads`; cuda: rank r on GPU
                                * device+r, NCCL all-reduce, engine/cuda/README.md) */
    int d_model, d_ff, vocab;  /* [d_model] [d_ff] [vocab] dense sizes: 1..65536, 576..262144,
                                * 2..1048576, default 2048, 8192, 1024 */
    int capacity_tok;          /* [capacity] KV rows each sequence slot owns, 1..16777216,
                                * default 4096 */
    int min_ctx_tok;           /* [min_ctx] rows a decode attends over at least (clamped to
                                * capacity), so short prompts still select topk rows;
                                * -1 = topk (default; the spec value "topk"), 0 = the real
                                * context only */
    const char *kv;            /* [kv] cuda: KV cache layout, "bf16" (576 x 2 B rows, default)
                                * | "fp8" (DeepSeek-V3.2's 656 B rows, engine/cuda/README.md) */
    int device;                /* [device] cuda: CUDA device index, default 0 */
    int attn_fault;            /* [attn_fault] testing: ENG_ATTN_FAULT_*, a deliberate bug in
                                * the cpu and cuda tiled kernels (fast and wrong), default none */
    /* added fields (spec keys in brackets) */
    int stop_after_tok;        /* [stop_after] a request without ignore_eos ends with
                                * finish_reason "stop" after max(min_tokens, this) tokens
                                * when that is below its max_tokens; 0 = never (default) */
    int default_max_tokens;    /* [default_max_tokens] when a request names none, default 256 */
    int prefix_cache;          /* [prefix_cache] 1: a prompt's leading blocks of 16 words
                                * that an earlier prompt had are not prefilled again, and
                                * are said as cached_tokens (engine/prefix_cache.c); 0 default */
    int prefix_cache_blocks;   /* [prefix_cache_blocks] blocks kept, oldest evicted first
                                * (default 65536) */
    const char *profile_dir;   /* [profile_dir] where /start_profile writes traces; NULL
                                * (default): "$TMPDIR/loadlaw-profile-<uid>" ($TMPDIR unset:
                                * /tmp), made mode 0700, refused when it is a symlink, not
                                * ours or open to group/others. A request's "output_dir" may
                                * only name a plain subdirectory of it (no '/', not "." or
                                * ".."), never a symlink; traces are new files, mode 0600 */
    /* access control (docs/security.md, "The bundled server") */
    const char *api_key;       /* [api_key] when set, every endpoint but /health needs
                                * "Authorization: Bearer KEY" (401 otherwise); NULL = open */
    const char *control_key;   /* [control_key] the key the control routes need
                                * instead of api_key; NULL = api_key's rule */
    int no_control;            /* [no_control] 1: the control routes answer 404 */
    int metrics_vllm_names;    /* [metrics_vllm_names] 1: /metrics also has vLLM's
                                * "vllm:..." gauges (colons: not lint-clean), default 0 */
    int handoff_sample;        /* [handoff_sample] every K-th token of each stream (K = this)
                                * gets a "handoff" record: when its step ended and when its
                                * bytes were handed to the socket (docs/records.md); written
                                * only while a records writer is attached; 0 = off (default) */
    int profile_max_steps_open; /* [profile_max_steps_open] the most steps a /start_profile
                                * may capture (num_steps, or until /stop_profile) when no key
                                * guards it (neither control_key nor api_key set); with a key
                                * the bound is 10,000,000; default 100000 (~20 MB of memory,
                                * ~36 MB of trace) */
    size_t step_log_max;       /* [step_log_max] steps the log keeps (the newest); older ones
                                * are dropped and counted, default 1000000 (56 MB: one
                                * eng_step, 56 B, a step) */
    /* A failed backend step stops the scheduler for good (eng_failed). When
     * set, on_failure(on_failure_arg, message) is called once, from the
     * scheduler thread, after every request has been ended; it must not call
     * eng_stop (which joins that thread): post a semaphore instead. */
    void (*on_failure)(void *arg, const char *msg);
    void *on_failure_arg;
    int fault_fail_step;       /* [fault_fail_step] TESTING AID, synthetic and cuda backends:
                                * the k-th step (1-based) fails with LL_EIO (cuda: through a
                                * kernel launch the runtime refuses), so tests can reach the
                                * failed-engine path; 0 = never (default) */
    /* private (config.c): the strings this config owns, one slot per string
     * field; only eng_config_* touch it */
    char *owned_str_[7];
} eng_config;

/* Defaults, on a fresh config or one released by eng_config_free (a config
 * that still owns strings would leak them). Allocates nothing. */
void eng_config_default(eng_config *cfg);
/* Make dst a copy of src that owns every non-NULL string (dst is overwritten,
 * not freed first). 0 or LL_ENOMEM (dst then owns nothing). */
int eng_config_copy(eng_config *dst, const eng_config *src);
/* Release the strings cfg owns; the string fields that pointed to them
 * become NULL (the defaults), every other field keeps its value. Borrowed
 * strings are left alone. Safe on a config that owns nothing, and twice. */
void eng_config_free(eng_config *cfg);

/* Parse a law such as "52+30n", "52+30n+0.5c+0.01p" (c: per 1000 context
 * tokens, p: per prefill token) into cfg's law fields (a, b, c, p; the
 * buckets and the knee are keys of their own and keep their values). */
int eng_parse_law(const char *law, eng_config *cfg, char *err, size_t errlen);

/* Parse an engine spec, the form `loadlaw sweep --engine` takes:
 * "backend=synthetic,law=52+30n,time_scale=0.05,jitter=0.02,think=64,max_running=256,
 *  prefill_budget=2048,seed=1,attn=tiled,heads=64,topk=2048,threads=2".
 * Also: d_model, d_ff, vocab, capacity, min_ctx (cpu sizes, see eng_config),
 * a, b, c, p (law terms alone), buckets (a list: "buckets=1,2,4,8": the items
 * after it that hold no '=' continue its value), knee ("knee=8:5"), max_waiting, max_tokens_limit, max_context,
 * stop_after, default_max_tokens, model, host, port, profile_dir, max_connections,
 * max_body (bytes, k/m suffixes), conn_memory (bytes), idle_timeout and
 * request_timeout (durations), max_connections_per_ip, profile_max_steps_open,
 * think_tokens (= think),
 * api_key, control_key, no_control, metrics_vllm_names (switches: 0|1),
 * step_log_max,
 * fault_fail_step (a testing aid, see eng_config).
 * String values are copied into cfg, which owns them (eng_config_free).
 * Unknown keys are an error naming the key. Fields not named keep their value;
 * a key that fails leaves its field as it was (keys before it stay applied). */
int eng_parse_spec(const char *spec, eng_config *cfg, char *err, size_t errlen);

/* Apply one serve-style key (the same keys as eng_parse_spec). An unknown key
 * fails with LL_EINVAL and the message "unknown engine key \"KEY\""; a bad
 * value with LL_EINVAL and a message naming the key and its allowed values. */
int eng_config_set(eng_config *cfg, const char *key, const char *value, char *err, size_t errlen);

/* The spec keys, in the order `--help` lists them: the i-th key's name (NULL
 * past the end), the form of its value ("N", "MS", "naive|tiled", ...) and
 * a one-line help text (static strings). Aliases (think_tokens) are listed. */
const char *eng_config_key(size_t i, const char **value_form, const char **help);
/* 1 when eng_config_set knows key, else 0. */
int eng_config_has_key(const char *key);

typedef struct eng_engine eng_engine;

/* Start scheduler and server. *out owned by the caller, released by eng_stop. */
int eng_start(const eng_config *cfg, eng_engine **out, char *err, size_t errlen);

/* "http://127.0.0.1:PORT" (valid until eng_stop). */
const char *eng_url(const eng_engine *e);
int eng_port(const eng_engine *e);
/* The served model name (valid until eng_stop). */
const char *eng_model(const eng_engine *e);
/* The backend's name: "synthetic" | "cpu" | "cuda" (static). */
const char *eng_backend_name(const eng_engine *e);

/* The BLAS this program links for the cpu backend (OpenBLAS) also serves
 * GSL's fits: make it single-threaded, so a client process's fit does not
 * leave BLAS threads spinning on cores the measurement needs (the cpu
 * backend runs its GEMM on its own pool anyway), and stop the threads
 * OpenBLAS started before main (engine/cpu/cpu_model.c). A no-op without the
 * cpu backend. Call at start, before other threads use BLAS. */
void eng_blas_single_thread(void);

/* The law the engine plays, as data for the records' run line. Only a
 * backend that plays a law (synthetic) has one: then out->present = 1, a_ms..
 * are in played milliseconds (the law as written times time_scale) and
 * time_scale is the configured factor; otherwise *out is zeroed. Returns
 * out->present. */
int eng_law(const eng_engine *e, ll_rec_engine_law *out);

/* Send the engine's steps to a records writer (records.h). From the call on,
 * the scheduler puts one ll_rec_step per finished step whose start is at or
 * after ll_rec_epoch_ns(w), with times on the run clock (start_ns minus the
 * epoch; the other fields as eng_steps has them). The put happens when the
 * step is logged, before its tokens are released, so a step that made a
 * token a client has read is already queued. A put may wait while the
 * writer's queue is full; a failed put is logged and the engine goes on.
 * NULL detaches: once it returns no put happens any more, so the caller may
 * then ll_rec_close(w). Any thread; the writer must outlive its attachment. */
void eng_set_records(eng_engine *e, ll_rec_writer *w);

/* One engine step, CLOCK_MONOTONIC nanoseconds (ll_now_ns()). */
typedef struct eng_step {
    int64_t start_ns, dur_ns;  /* start: when the previous step ended (or the wake-up
                                * after idling); dur: until this step's work ended, the
                                * moment just before its tokens are released. Deadlines
                                * chain, so busy steps average exactly the law. */
    int n_decode;              /* sequences that decoded a token this step (the law's N);
                                * a sequence whose prefill completes in this step also
                                * emits its first token at its end but is not counted */
    int n_running;             /* sequences admitted (prefilling or decoding) */
    int prefill_tok;           /* prompt tokens prefilled this step */
    int64_t ctx_tok;           /* total context tokens of decoding sequences */
    int64_t plan_ns;           /* what the backend planned the step to take (the synthetic
                                * law with its jitter: the deadline minus the planned start),
                                * whatever the machine made of it; 0 when the backend plans
                                * nothing (a computing backend's step is its work) */
    int64_t comm_ns;           /* time rank 0 spent in communication phases (tp all-reduce,
                                * eng_phase_is_comm), waiting for the other ranks included;
                                * 0 without tensor parallelism */
} eng_step;

/* Copy steps [from, from+max) of the step log into out; returns how many were
 * copied (0 at the end). Indices count every step of the engine's life; the
 * log keeps the newest cfg.step_log_max of them, so a read from an index
 * below eng_step_first copies nothing (0) rather than other steps.
 * A step is logged before its tokens are released, so once a client has
 * received a token (or a whole response), the step that made it is already
 * here: the log never trails the streams. (A step whose log entry could not
 * be allocated is missing, never late.) */
size_t eng_steps(eng_engine *e, size_t from, eng_step *out, size_t max);
/* Steps logged so far (the index one past the newest). */
size_t eng_step_count(eng_engine *e);
/* The oldest index the log still holds: the number of steps dropped to keep
 * it within step_log_max (also /metrics' loadlaw_step_log_dropped_total). */
size_t eng_step_first(eng_engine *e);

/* 0 while the scheduler runs. Once a backend step has failed (the scheduler
 * then ends every request and stops; new requests get 503, /health answers
 * 503 with the reason): the step's negative LL_E* code, with the reason in
 * err. Any thread, lock-free. */
int eng_failed(const eng_engine *e, char *err, size_t errlen);

/* Stop accepting, cancel in-flight requests, join threads, free everything. */
void eng_stop(eng_engine *e);

#endif
