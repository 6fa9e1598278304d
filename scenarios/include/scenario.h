/* scenario.h: what a sweep does, as one JSON file, and the prompts it sends.
 *
 * A scenario holds everything `loadlaw sweep`'s flags can say; the command line
 * loads one (scn_load_file) and then overrides fields directly. The struct is a
 * plain config: the caller reads and writes its fields; strings are owned by
 * the scenario (replace them with scn_set_str) and freed by scn_free.
 *
 * The format's keys (every one optional; unknown keys are an error) are the
 * rows of one table, scenarios/scenario_keys.c: their types, bounds,
 * defaults and flags are listed in docs/scenarios.md, written from it
 * (scenario_keys.h). For example:
 *   {"name":"default", "target":{"url":null, "endpoint":"chat"},
 *    "engine":"backend=synthetic,law=52+30n,time_scale=0.05,think=32",
 *    "request":{"max_tokens":64, "think_tokens":32},
 *    "load":{"concurrency":[1,2,4], "warmup":0}}
 *
 * Errors: 0 or a negative LL_E* code; the message names the file, the key as a
 * JSON path (e.g. "levels[2].concurrency") and what was expected.
 * Thread safety: a loaded scenario and prompt set are read-only and may be read
 * from any number of threads.
 */
#ifndef LOADLAW_SCENARIO_H
#define LOADLAW_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common.h" /* ll_buf */

/* The API a sweep calls. chat and completions: OpenAI's streaming forms;
 * responses: the OpenAI Responses API (/v1/responses, reasoning in
 * response.reasoning_text.delta events); generate: SGLang's native /generate
 * stream. */
/* One row per API: X(ID, name, standard path). A new API is a row here and
 * its file loadgen/api_<name>.c defining lg_api_<name> (docs/contributing.md);
 * the enum, the names, the paths, --endpoint's choices and loadgen's table
 * all come from the rows. */
#define SCN_ENDPOINTS(X)                           \
    X(CHAT, chat, "/v1/chat/completions")          \
    X(COMPLETIONS, completions, "/v1/completions") \
    X(RESPONSES, responses, "/v1/responses")       \
    X(GENERATE, generate, "/generate")
typedef enum scn_endpoint {
#define SCN_ENDPOINT_ENUM(id, name, path) SCN_ENDPOINT_##id,
    SCN_ENDPOINTS(SCN_ENDPOINT_ENUM)
#undef SCN_ENDPOINT_ENUM
    SCN_ENDPOINT__COUNT
} scn_endpoint;
/* "chat", "completions", "responses", "generate". */
const char *scn_endpoint_name(scn_endpoint e);
/* 0 and *out set, or LL_EINVAL for an unknown name. */
int scn_endpoint_parse(const char *name, scn_endpoint *out);
/* The standard path under the base URL: "/v1/chat/completions",
 * "/v1/completions", "/v1/responses", "/generate". */
const char *scn_endpoint_path(scn_endpoint e);
/* SCN_ARRIVAL_TRACE: the level load.trace makes (each request at its row's
 * time); not a choice for other levels. */
typedef enum scn_arrival { SCN_ARRIVAL_POISSON = 0, SCN_ARRIVAL_CONSTANT = 1, SCN_ARRIVAL_TRACE = 2 } scn_arrival;
typedef enum scn_source {
    SCN_SOURCE_SYNTHETIC = 0, /* seeded random words */
    SCN_SOURCE_SHAREGPT = 1,  /* [{"conversations":[{"from":"human","value":...}]}] */
    SCN_SOURCE_JSONL = 2,     /* one {"prompt":...} or {"text":...} object per line */
} scn_source;
typedef enum scn_dist_kind { SCN_DIST_FIXED = 0, SCN_DIST_UNIFORM = 1, SCN_DIST_NORMAL = 2 } scn_dist_kind;
/* The server's profiler API; AUTO: told from the server's /metrics when the
 * level starts (loadgen/profile_hook.c). */
typedef enum scn_profile_style {
    SCN_PROFILE_SGLANG = 0, SCN_PROFILE_VLLM = 1, SCN_PROFILE_AUTO = 2
} scn_profile_style;

/* A length distribution, in words. */
typedef struct scn_dist {
    scn_dist_kind kind;
    double value;            /* fixed */
    double min, max;         /* uniform (also clamps normal when max > 0) */
    double mean, stddev;     /* normal */
} scn_dist;

/* Level option: ask the server for a profiler trace once decode is steady
 * (every in-flight request of the level has its first token). */
typedef struct scn_profile {
    int enabled;
    int num_steps;           /* steps captured: SGLang's body {"num_steps":N},
                              * vLLM's {"max_iterations":N} (then POST
                              * /stop_profile when the level ends) */
    scn_profile_style style;
    double pace_wait_s;      /* the wait for the pre-capture pace, before the
                              * MB-scaled part (loadgen/profile_wait.c); 0: none */
} scn_profile;

typedef struct scn_level {
    int concurrency;         /* closed loop: C in flight; open loop: cap (0 = none) */
    double rate_per_s;       /* 0 = closed loop */
    scn_arrival arrival;     /* open loop only */
    int n_requests;          /* measured requests; 0 = default (see above) */
    int warmup;              /* extra requests sent first, marked warmup */
    double duration_s;       /* 0 = until n_requests are done */
    scn_profile profile;
    /* Not part of the JSON format: an A/B sweep (sweep/ab.c) sets them
     * on each side's expanded levels and loadgen copies them into the level
     * record (records.h ll_rec_level: repeat, pair, seq; -1 = not written). */
    int ab_tagged, repeat, pair, seq;
    /* Not part of the JSON format either: the role sweep --find gave the
     * level ("ladder", "probe", "sustain", "re-measure"; a static string),
     * copied into the level record's "find_role"; NULL: none. */
    const char *find_role;
} scn_level;

/* "ab": the same sweep against two targets, then compare B against the
 * baseline A (`loadlaw compare A B`). Each side is a bundled engine (its spec
 * is appended to the scenario's "engine", so the side's keys win and the
 * shared ones are written once) or, from the command line only
 * (`sweep --url A --url B`), a remote URL with its own model. Side names are
 * distinct directory names ([A-Za-z0-9._-], not "." or ".."): the runs go to
 * OUTPUT/<name>. A scenario's "ab" needs the bundled engine, so no
 * target.url beside it.
 * "order": "interleaved" (default) runs level by level, A then B, only one
 * side loaded at a time; with "repeat" R >= 2 each level runs R times per side
 * in ABBA order (AB BA AB ...), so a linear drift cancels within every two
 * pairs. "sequential" runs all of A, then all of B (each level R times in a
 * row). expect_speedup "X" or "X@C" (or a number X): the gate of compare's
 * --expect-speedup; C must be the concurrency of a closed-loop level.
 * `loadlaw sweep` refuses --engine and --url with an "ab" scenario (usage
 * error: one spec for both sides would compare a run with itself); every
 * other flag applies to both sides (--order and --repeat override the
 * scenario's). */
typedef struct scn_ab_side {
    char *name;
    char *engine;            /* bundled: spec keys; NULL for a remote side */
    char *url, *model;       /* remote side (command line only); NULL when bundled */
} scn_ab_side;

typedef enum scn_ab_order { SCN_AB_INTERLEAVED = 0, SCN_AB_SEQUENTIAL = 1 } scn_ab_order;
#define SCN_AB_MAX_REPEAT 1000

typedef struct scn_ab {
    int enabled;
    scn_ab_side side[2];     /* [0] = a (the baseline), [1] = b */
    double expect_x;         /* 0 = no gate */
    int expect_c;            /* 0 = the highest level both runs share */
    double expect_outputs;   /* ab.expect_same_outputs: at every level at least this share of
                              * B's requests produced A's outputs or passed the top-k check
                              * (needs request.record_outputs); 0 = no gate */
    scn_ab_order order;      /* default interleaved */
    int repeat;              /* runs of each level per side, 1..SCN_AB_MAX_REPEAT (default 1) */
} scn_ab;

/* The side (0 = A, 1 = B) of position k in the interleaved order of one level
 * run R times per side: ABBA blocks, so k = 0 1 2 3 4 5 ... gives
 * A B B A A B B A ...; the pair of position k is k / 2 and a pair's first
 * side alternates A, B, A, ... Pure; for tests and the sweep alike. */
int scn_ab_side_at(int k);
/* A speedup gate "X", "Xx" or "X@C" (ab.expect_speedup, compare
 * --expect-speedup): X in [0.001, 1e6], C in [1, 1e6] (0 when absent). */
int scn_parse_speedup(const char *s, double *x, int *c);

/* How the client times a chunk's arrival (load.arrival_stamp, --arrival-stamp):
 * the kernel's receive stamp of the socket read that brought it (default;
 * netstamp/include/netstamp.h), or the clock when the worker thread handles it. */
typedef enum scn_stamp { SCN_STAMP_KERNEL, SCN_STAMP_USER } scn_stamp;

/* A server's prefix cache between levels (load.cache, --cache): auto asks
 * a server that offers a reset to forget it before each level and keeps it
 * elsewhere; reset always asks (and says when the server cannot); keep never
 * asks. loadgen/cache_reset.c does it and says what was done per level. */
typedef enum scn_cache { SCN_CACHE_AUTO, SCN_CACHE_RESET, SCN_CACHE_KEEP } scn_cache;
extern const char *const scn_cache_names[]; /* "auto", "reset", "keep" */

typedef struct scn_scenario {
    char *path;              /* file it came from, or NULL */
    char *name;
    /* target */
    char *url;               /* NULL = start the bundled engine */
    char *model;             /* NULL = ask nothing; the bundled engine's name is used */
    scn_endpoint endpoint;
    char *api_key_env;       /* env var holding the key, default "OPENAI_API_KEY" */
    char *engine_spec;       /* eng_parse_spec form; NULL = engine defaults */
    char *endpoint_path;     /* NULL = scn_endpoint_path(endpoint); else this path
                              * under the base URL ("/openai/v1/chat/completions") */
    char **headers;          /* extra request headers, "Name: value" (owned) */
    size_t n_headers;
    /* request */
    cJSON *extra_body;       /* object whose keys are merged into every request
                              * body (temperature, top_p, ...); owned; NULL = none */
    int continuous_usage;    /* ask stream_options.continuous_usage_stats (default 1;
                              * a 400 that names the field turns it off, said once) */
    int max_tokens;
    int think_tokens;        /* -1 = do not send the think_tokens extension */
    int ignore_eos;
    int record_outputs;      /* request.record_outputs, --record-outputs: keep each request's
                              * output (ids or text, logprobs, top-k) in its record and ask
                              * chat/completions servers for logprobs (top 5) */
    int greedy;              /* request.greedy, --greedy: temperature 0 and a fixed seed */
    double top_p;            /* request.top_p, --top-p: nucleus sampling, in (0, 1]; 0 = not sent */
    double timeout_s;        /* whole-request bound */
    /* prompts */
    scn_source source;
    char *prompts_path;      /* sharegpt / jsonl */
    scn_dist words;          /* synthetic prompt length */
    char *tokenizer_path;    /* Hugging Face tokenizer.json; NULL = none */
    scn_dist prompt_tokens;  /* prompt length in tokens when prompt_tokens_set:
                              * exact with a tokenizer, else words ~ 0.75 tokens */
    int prompt_tokens_set;
    char *defaults;          /* which defaults applied, for the run line:
                              * "bundled" (scenarios/default.json), "remote"
                              * (--url without a scenario) or "file" */
    int prompt_count;        /* synthetic pool size */
    uint64_t seed;
    int prompts_reuse;       /* prompts.reuse, --reuse-prompts: each level from the set's
                              * first prompt, no per-run head; else every request of a
                              * run gets a prompt no earlier one had (loadgen's
                              * lg_fresh_head): a server's prefix cache serves nothing */
    /* load */
    int threads;             /* 0 = the cores in the CPU affinity mask */
    scn_stamp arrival_stamp; /* how a chunk's arrival is timed (load.arrival_stamp) */
    scn_cache cache;         /* the server's prefix cache between levels (load.cache) */
    char *source_addrs;      /* local addresses connections are bound to (load.source_addrs,
                              * --source-addrs: "auto", "off" or a list; loadgen/srcaddr.h
                              * checks it and says what each means); NULL = "auto" */
    double drain_s;          /* after the first SIGINT, how long in-flight may finish */
    double max_failed;       /* fraction of a level's measured requests that may fail
                              * before the sweep exits 1 (records kept); 1 = never */
    int vary_context;        /* load.vary_context: synthetic prompt lengths wander between
                              * SCN_VARY_CONTEXT_LO and _HI times their drawn length (a
                              * seeded walk along the run's request order, below), so
                              * that the context tokens in flight (K) do not move in step
                              * with the requests in flight (N); default 0 */
    int keep_going;          /* 1: the levels after one over max_failed are still sent
                              * (default 0: the sweep stops after it) */
    scn_level *levels;
    size_t n_levels;
    char *output;            /* run dir; NULL = runs/<timestamp> */
    scn_ab ab;               /* ab.enabled = 0: one ordinary sweep */
    /* load.trace (--trace, --trace-speed, --trace-window; docs/workloads.md):
     * replay a Mooncake JSONL, Azure LLM inference CSV or BurstGPT CSV trace.
     * scn_validate reads the file (a bad row is its error, naming the line
     * and the column) and replaces the levels by one open-loop level of
     * arrival SCN_ARRIVAL_TRACE, one request per row of the window; the
     * prompt set then holds one prompt per row (scn_prompt_send_ns,
     * scn_prompt_max_tokens). */
    char *trace_path;        /* NULL = no trace */
    double trace_speed;      /* trace time / speed = send time (default 1) */
    double trace_start_s, trace_end_s; /* rows with trace time (s after its first row)
                                        * in [start, end); end 0 = to the last row */
    struct scn_trace *trace; /* the rows, read by scn_validate (owned; internal) */
    /* load.shared_prefix: every prompt = one of prefix_groups fixed texts of
     * prefix_tokens tokens, then its own text (0 groups = off). */
    int prefix_groups, prefix_tokens;
    int prefix_seeded;       /* pick "seeded": a seeded draw per prompt; else prompt i takes i mod G */
    /* load.sessions (docs/workloads.md "Multi-turn sessions"): each closed
     * level runs conversations of session_turns turns, its C of them in
     * flight; turn k sends the turns before it (the user messages and the
     * answers received) and a new user message. scn_validate makes every
     * level's requests session_count (0: its C) x turns. */
    int session_turns;       /* 0 = no sessions */
    int session_count;       /* conversations per level; 0 = the level's concurrency */
    double session_think_ms; /* between an answer's end and the next turn's send */
    int session_user_tok;    /* a synthetic user message's tokens (words = tokens / 1.33) */
    int session_sharegpt;    /* 1: user messages are a ShareGPT conversation's human turns */
    char *session_path;      /* that file; NULL = prompts.path */
    /* find (--find, --find-budget, --find-time, --find-by, --find-precision;
     * sweep/find.c): an adaptive search for the largest C (or arrival rate)
     * that meets an objective instead of fixed levels. find_objective NULL:
     * no search. */
    char *find_objective;    /* scn_objective_parse's text */
    int find_budget_levels;  /* the most levels the search may run */
    double find_budget_s;    /* the most seconds it may take (0: no bound) */
    int find_by_rate;        /* find.by: 0 closed-loop C ("concurrency"), 1 open-loop arrival rate ("rate") */
    double find_precision;   /* find.precision: a rate search is pinned when hi <= lo * (1 + this) */
} scn_scenario;

/* A scenario with the built-in defaults (one closed level at C=1, synthetic
 * prompts of 100 words, max_tokens 64). */
int scn_new(scn_scenario **out);
int scn_load_file(const char *path, scn_scenario **out, char *err, size_t errlen);
/* `origin` names the text in messages (e.g. a file name). */
int scn_load_string(const char *json, const char *origin, scn_scenario **out,
                    char *err, size_t errlen);
void scn_free(scn_scenario *s);
/* 1 when the scenario's headers (target.headers, --header) hold one named
 * name (without regard to case: "Authorization"). */
int scn_has_header(const scn_scenario *s, const char *name);

/* Append a "Name: value" header (a token name, no line breaks; written
 * back as "Name: value"): 0, LL_EINVAL or LL_ENOMEM. */
int scn_add_header(scn_scenario *s, const char *line);
/* Replace an owned string field (NULL clears it). */
int scn_set_str(char **field, const char *value);
/* Replace the levels by closed-loop levels at these concurrencies, keeping
 * per-level options of the first old level (requests, warmup, duration). */
int scn_set_concurrency(scn_scenario *s, const int *c, size_t n);
/* Fill defaults that depend on other fields (n_requests = 0 -> default) and
 * check ranges; message as for the loader. */
int scn_validate(scn_scenario *s, char *err, size_t errlen);
/* Requests a level sends, warmup excluded, after defaults. */
int scn_level_requests(const scn_level *l);
/* The effective scenario as JSON (for the run record); caller frees with cJSON_Delete. */
cJSON *scn_to_json(const scn_scenario *s);

/* ---- find.objective (objective.c) -------------------------------------------
 * What `loadlaw sweep --find` searches for: terms joined by ',', all to be
 * met, each METRIC OP VALUE with no spaces needed:
 *   ttft|itl|tpot|e2e _ p50|p90|p99|mean|max  <= DURATION (40ms, 2s; a bare number is ms)
 *   error_rate <= SHARE    goodput >= SHARE    (0.01, or 1%)
 *   user_tps >= TOKENS/S   (per-user steady tokens/s)
 * goodput is the share of a level's measured requests whose own TTFT, TPOT
 * and E2E meet the objective's terms of those metrics (itl counts as tpot),
 * so it needs at least one of them. '<' reads as '<=' and '>' as '>='. */
typedef enum scn_obj_metric {
    SCN_OBJ_TTFT, SCN_OBJ_ITL, SCN_OBJ_TPOT, SCN_OBJ_E2E, SCN_OBJ_ERROR_RATE, SCN_OBJ_GOODPUT, SCN_OBJ_USER_TPS,
} scn_obj_metric;
typedef enum scn_obj_stat { SCN_OBJ_MEAN, SCN_OBJ_P50, SCN_OBJ_P90, SCN_OBJ_P99, SCN_OBJ_MAX } scn_obj_stat;
typedef struct scn_obj_term {
    scn_obj_metric metric;
    scn_obj_stat stat;       /* latency metrics only */
    int at_most;             /* 1: the figure must be <= value; 0: >= value */
    double value;            /* ms (latencies), a share in [0, 1], or tokens/s */
    char name[16];           /* "itl_p99", "error_rate", ... */
} scn_obj_term;
#define SCN_OBJ_MAX_TERMS 8
typedef struct scn_objective {
    size_t n;
    scn_obj_term t[SCN_OBJ_MAX_TERMS];
} scn_objective;
/* 0, or LL_EINVAL with why ("itl_p95: expected METRIC_STAT like itl_p99 ...")
 * in err. */
int scn_objective_parse(const char *text, scn_objective *out, char *err, size_t errlen);
/* The quantile of a stat (0.5, 0.9, 0.99), 1 for max, NAN for mean. */
double scn_obj_stat_q(scn_obj_stat s);

/* ---- values from a command line (overlay.c) -------------------------------- */

/* Synthetic prompts without a tokenizer: words = tokens / 1.33 (English text
 * runs ~0.75 words per token with the common BPE vocabularies). */
#define SCN_TOKENS_PER_WORD 1.33

int scn_is_file(const char *path); /* 1: a regular file */
/* A scenario file by name: as given, then the source tree's scenarios (a
 * build-tree binary), then $LOADLAW_DATADIR or the install's data folder.
 * 0 with its path in out, -1 (out = name) when none exists. */
int scn_find_file(const char *name, char *out, size_t n);
/* The scenario a sweep starts from, before its flags: the file named (found
 * by scn_find_file; defaults "file"); with none and remote, the remote
 * defaults below (defaults "remote"); else scenarios/default.json (defaults
 * "bundled"). 0, or LL_EIO (unreadable), LL_ENOMEM, or the loader's
 * LL_EINVAL/LL_EPARSE, with a message. */
int scn_load_base(const char *name, int remote, scn_scenario **out, char *err, size_t errlen);
/* A scenario-less run against a URL: C = 1..64, 256-token prompts, 256
 * tokens out, nothing a strict server would reject. 0 or LL_ENOMEM. */
int scn_remote_defaults(scn_scenario *s);
/* "MEAN[,STDDEV]" (MEAN in [1, 1e6]) -> a fixed or normal length, clamped to
 * [max(1, mean - 3 sd), mean + 3 sd] so a draw is never empty or huge. */
int scn_parse_length(const char *v, scn_dist *d);
/* Prompt lengths in tokens, with the word form for a prompt builder
 * without a tokenizer. */
void scn_set_prompt_tokens(scn_scenario *s, scn_dist d);
/* "a,b,c": one value for every level, or exactly one per level, into
 * out[0..n_levels). */
typedef enum { SCN_PER_LEVEL_REQUESTS, SCN_PER_LEVEL_DURATION } scn_per_level;
#define SCN_PER_LEVEL_WHAT(k) \
    ((k) == SCN_PER_LEVEL_REQUESTS ? "an integer in [1, 100000000]" : "a duration like 30s (at most 1e7 s)")
int scn_parse_per_level(const char *v, scn_per_level kind, size_t n_levels, double *out, char *err,
                        size_t errlen);
/* "START:END" seconds (END empty: 0, the end; else START < END). */
int scn_parse_window(const char *v, double *a, double *b);
/* "GROUPS:TOKENS" -> prefix_groups, prefix_tokens. */
int scn_parse_shared_prefix(const char *v, scn_scenario *s);

/* ---- prompts -------------------------------------------------------------- */

/* load.vary_context: prompt i's length (words, or tokens with
 * prompts.tokens) is its length as drawn from the scenario's distribution
 * times a factor m_i in [SCN_VARY_CONTEXT_LO, SCN_VARY_CONTEXT_HI]. The
 * factors are a seeded random walk over i, reflected at the bounds (steps
 * uniform in +-SCN_VARY_CONTEXT_STEP), so m is uniform over the range with
 * mean 1 and neighbours are alike: requests sent close together (those in
 * flight together) share a length scale, and that scale wanders across the
 * range over ~(1.5 / 0.15)^2 = 100 requests. Independent factors would
 * average out over the N requests in flight and leave K ~ N * mean length;
 * a shared scale moves K/N at every N (simulated on the default sweep's
 * levels: the variance inflation of K against N fell from ~230 with fixed
 * factors and ~140 with independent ones to ~17). The walk has its own
 * generator: a scenario without vary_context keeps its prompts byte for byte.
 * File prompts (sharegpt, jsonl) are sent as they are. */
#define SCN_VARY_CONTEXT_LO 0.25
#define SCN_VARY_CONTEXT_HI 1.75
#define SCN_VARY_CONTEXT_STEP 0.15

typedef struct scn_prompts scn_prompts;
typedef struct scn_tokenizer scn_tokenizer; /* below */
/* Load or generate the prompt set the scenario names (relative paths are
 * relative to the scenario file's folder, then the cwd). */
int scn_prompts_load(const scn_scenario *s, scn_prompts **out, char *err, size_t errlen);
size_t scn_prompts_count(const scn_prompts *p);
/* Prompt i mod count; *words (may be NULL) gets its word count. The pointer
 * lives as long as the set. */
const char *scn_prompt(const scn_prompts *p, size_t i, int *words);
void scn_prompts_free(scn_prompts *p);
/* Trace prompts: prompt i's send time after the level's start (ns, trace
 * time / speed), or -1 when the set is not a trace. */
int64_t scn_prompt_send_ns(const scn_prompts *p, size_t i);
/* The max_tokens prompt i asks for (a trace row's output length), or 0: the
 * scenario's. */
int scn_prompt_max_tokens(const scn_prompts *p, size_t i);
/* Where in prompt i (bytes) a per-request head may go without breaking a
 * prefix that other prompts share: after the shared prefix (shared_prefix)
 * or the leading blocks other rows share (trace); 0 otherwise. */
size_t scn_prompt_head_at(const scn_prompts *p, size_t i);
/* The trace format read ("mooncake", "azure", "burstgpt") and its rows, or
 * NULL and 0 (no trace, or not validated yet). */
const char *scn_trace_format(const scn_scenario *s);
size_t scn_trace_rows(const scn_scenario *s);
/* The tokens prompt i was built to (0 when not built to a token length);
 * once fitted (scn_prompts_fit), with the head it is sent with inside. */
int scn_prompt_target_tokens(const scn_prompts *p, size_t i);
/* 1 when prompt i was fitted with its head inside its target (scn_prompts_fit). */
int scn_prompt_head_inside(const scn_prompts *p, size_t i);

/* ---- prompt lengths as the target counts them (prompt_fit.c) ---- */

/* Tokens of text as the target counts it (its /tokenize, a tokenizer), or a
 * negative LL_E* code. */
typedef int64_t (*scn_count_fn)(void *ctx, const char *text, size_t len);
/* 1 and the head (NUL-terminated, at most size bytes) prompt i is first sent
 * with; 0 when this run does not send prompt i. */
typedef int (*scn_head_fn)(void *ctx, size_t i, char *out, size_t size);
typedef struct scn_fit_stats {
    size_t n_fitted, n_exact; /* prompts fitted; of them, at their asked length */
    size_t n_counts;          /* count calls made */
    int max_off_tok;          /* the largest |counted - asked| */
} scn_fit_stats;
/* 1 when some prompt was asked as a token length and can be fitted:
 * synthetic prompts with prompt_tokens, without a shared prefix or trace. */
int scn_prompts_fittable(const scn_prompts *p);
/* Fit prompts 0 .. n_use-1 that head says are sent, so that head + prompt
 * counts each one's asked length under count (prompt_fit.c says how); their
 * target becomes that count, head inside. Not thread-safe: before any
 * worker reads the set. 0, or count's error with the prompt named in err. */
int scn_prompts_fit(scn_prompts *p, size_t n_use, scn_head_fn head, void *hctx, scn_count_fn count, void *cctx,
                    scn_fit_stats *st, char *err, size_t errlen);
/* load.sessions: the user message of turn `turn` (1-based) of conversation
 * `session` of level `level`, appended to out: synthetic text seeded by the
 * scenario's seed and (level, session, turn), or the turn-th human message
 * of ShareGPT conversation session mod count. 0; 1 when the conversation has
 * no such turn (a ShareGPT conversation that is shorter: the session ends);
 * LL_ENOMEM. Pure: any thread. */
int scn_session_user(const scn_scenario *s, const scn_prompts *p, int level, int64_t session, int turn,
                     ll_buf *out);
/* The prefix group prompt i carries (load.shared_prefix), or -1. */
int scn_prompt_prefix_group(const scn_prompts *p, size_t i);
/* The tokenizer the scenario named (loaded by scn_prompts_load), or NULL. */
const scn_tokenizer *scn_prompts_tokenizer(const scn_prompts *p);

/* ---- tokenizer (tokenizer.c) ------------------------------------------------ */

/* A Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Llama 3,
 * Qwen, DeepSeek): its pre-tokenizer regex run with PCRE2 (Unicode classes),
 * byte-level mapping, BPE merges, added/special tokens. Read-only after
 * loading: encode and decode may run on any number of threads at once. */
int scn_tokenizer_load(const char *path, scn_tokenizer **out, char *err, size_t errlen);
void scn_tokenizer_free(scn_tokenizer *t);
/* Token ids of text (no special tokens added, as tokenizers' encode with
 * add_special_tokens=False). *ids: caller frees. */
int scn_tokenizer_encode(const scn_tokenizer *t, const char *text, size_t len, int32_t **ids,
                         size_t *n);
/* Number of tokens of text, or a negative LL_E* code. */
int64_t scn_tokenizer_count(const scn_tokenizer *t, const char *text, size_t len);
/* The text of ids (NUL-terminated; caller frees). */
int scn_tokenizer_decode(const scn_tokenizer *t, const int32_t *ids, size_t n, char **text,
                         size_t *len);

#endif
