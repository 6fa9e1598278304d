/* scenario_keys.c: every key of the scenario format, one row each (the row
 * type is scn_keys.h's). The loader, the writer, scn_new's defaults, the
 * remote defaults, `loadlaw sweep`'s flags and docs/scenarios.md all read
 * these rows, so a key is added here: a row, and a field in scn_scenario
 * (docs/contributing.md). Rows are in the order the run line writes them.
 *
 * A row's `what` is only there when a file's message must say more than its
 * type and bounds do; `form` likewise for a flag's. Hooks (the key needs
 * more than its type) live beside their section: levels, headers, paths and
 * lengths in scenario_load.c, the trace and shared prefixes in workload.c,
 * sessions in sessions.c, the A/B in ab.c. */
#include <stddef.h>

#include "scn_internal.h"
#include "scn_keys.h"

#define S(f) offsetof(scn_scenario, f)
#define L(f) offsetof(scn_level, f)
#define AB(f) offsetof(scn_ab, f)
#define SIDE(f) offsetof(scn_ab_side, f)
#define DIST(f) offsetof(scn_dist, f)

#define INT(n, o, l, h) .name = n, .type = SCN_K_INT, .off = o, .lo = l, .hi = h
#define NUM(n, o, l, h) .name = n, .type = SCN_K_NUM, .off = o, .lo = l, .hi = h
#define BOOL(n, o) .name = n, .type = SCN_K_BOOL, .off = o
#define ENUM(n, o, nm) .name = n, .type = SCN_K_ENUM, .off = o, .names = nm
#define STR(n, o) .name = n, .type = SCN_K_STR, .off = o
#define OBJ(n, o, sh) .name = n, .type = SCN_K_OBJ, .off = o, .shape = &sh
#define HOOK(n) .name = n, .type = SCN_K_HOOK

static const char *const k_defaults[] = {"bundled", "remote", "file", NULL};
static const char *const k_source[] = {"synthetic", "sharegpt", "jsonl", NULL};
static const char *const k_dist_kind[] = {"fixed", "uniform", "normal", NULL};
static const char *const k_when[] = {"steady", NULL};
static const char *const k_style[] = {"sglang", "vllm", "auto", NULL};
static const char *const k_pick[] = {"round-robin", "seeded", NULL};
static const char *const k_session_source[] = {"synthetic", "sharegpt", NULL};
static const char *const k_order[] = {"interleaved", "sequential", NULL};
static const char *const k_find_by[] = {"concurrency", "rate", NULL};

/* ---- a level (levels[i]; load's keys are every level's defaults) ---------- */

static const scn_key k_profile[] = {
    {ENUM("when", 0, k_when), .flags = SCN_KF_CONST, .help = "when the capture starts: once every request in "
     "flight has its first token"},
    {INT("num_steps", offsetof(scn_profile, num_steps), 1, 100000), .def = "12",
     .help = "steps to capture (SGLang's body {\"num_steps\":N}; vLLM's {\"max_iterations\":N}, then POST "
     "/stop_profile when the level ends)"},
    {NUM("pace_wait_s", offsetof(scn_profile, pace_wait_s), 0, 86400), .def = "120",
     .help = "after the capture, how long a probe request may take to come back to the pace it had before it "
     "(plus 2 s per MB of trace written) before the next level starts all the same (0: no probe)"},
    {ENUM("style", offsetof(scn_profile, style), k_style), .def = "auto",
     .help = "the server's profiler API (auto: vLLM's or SGLang's as the server's /metrics names it; the "
     "bundled engine's is SGLang's; vLLM's for any other)"},
};
static const scn_shape sh_profile = SCN_SHAPE(k_profile, NULL);

static const scn_key k_level_fields[] = {
    {INT("requests", L(n_requests), 0, 100000000), .write = scn_requests_write,
     .help = "measured requests (0: max(ceil(1.5 C), 8) closed loop; 100, or until duration_s, open loop)"},
    {INT("warmup", L(warmup), 0, 100000000), .flag = "warmup", .arg = "N",
     .flag_help = "extra requests per level first, excluded from statistics",
     .help = "extra requests sent first, marked warmup and left out of every figure"},
    {NUM("duration_s", L(duration_s), 0, 1e7), .help = "stop issuing after this many seconds (0: when the "
     "requests are done)"},
    {NUM("rate_per_s", L(rate_per_s), 0, 1e7), .read = scn_rate_read,
     .help = "open loop: requests per second, concurrency capping those in flight (0: closed loop)"},
    {ENUM("arrival", L(arrival), scn_arrival_names), .offered = 2, .flag = "arrival", .arg = "poisson|constant",
     .flag_help = "open loop: how arrivals are spaced", .help = "open loop: how arrivals are spaced"},
    {OBJ("profile", L(profile), sh_profile), .flags = SCN_KF_NULL | SCN_KF_ON | SCN_KF_SET_ON,
     .on = L(profile) + offsetof(scn_profile, enabled), .set = scn_profile_set, .flag = "profile",
     .arg = "C[:STEPS]", .form = "C[:STEPS]: a level's concurrency, and steps in [1, 100000]",
     .flag_help = "profile the level of concurrency C: STEPS steps (default 12) once decode is steady, "
     "then wait for the server's pace before the next level; the level is left out of the law",
     .help = "ask the server for a profiler trace once decode is steady (null: none); the level is marked "
     "profiled and left out of the law"},
};
static const scn_shape sh_level_fields = SCN_SHAPE(k_level_fields, NULL);

static const scn_key k_level[] = {
    {INT("concurrency", L(concurrency), 0, 1000000),
     .help = "closed loop: requests in flight; open loop: their cap (0: none)"},
    {.type = SCN_K_INLINE, .shape = &sh_level_fields},
};
const scn_shape scn_level_shape = SCN_SHAPE(k_level, NULL);

/* ---- target ------------------------------------------------------------------ */

static const scn_key k_target[] = {
    {STR("url", S(url)), .flags = SCN_KF_NULL | SCN_KF_URL, .check = scn_url_check,
     .help = "the server's base URL, http:// or https:// (null: start the bundled engine in-process)"},
    {STR("model", S(model)), .flags = SCN_KF_NULL,
     .help = "the model to ask for (null: the bundled engine's name)"},
    {ENUM("endpoint", S(endpoint), scn_endpoint_names), .flag = "endpoint",
     .help = "the API to call (responses: OpenAI Responses API; generate: SGLang's native /generate)"},
    {STR("path", S(endpoint_path)), .flags = SCN_KF_NULL, .check = scn_path_check, .write = scn_path_write,
     .what = "a string starting with '/' (no spaces or control characters), or null",
     .form = "a path starting with '/' (no spaces or control characters)", .flag = "endpoint-path",
     .arg = "PATH", .flag_help = "path under --url instead of the endpoint's standard one "
     "(e.g. /openai/v1/chat/completions)",
     .help = "the path under the URL instead of the endpoint's standard one (/v1/chat/completions, "
     "/v1/completions, /v1/responses, /generate)"},
    {HOOK("headers"), .read = scn_headers_read, .write = scn_headers_write,
     .what = "an array of \"Name: value\" strings",
     .help = "extra request headers, [\"Name: value\", ...]; the run line hides the values of secret names"},
    {STR("api_key_env", S(api_key_env)), .flags = SCN_KF_NOWRITE, .def = "OPENAI_API_KEY",
     .help = "the environment variable holding the API key, sent as a Bearer token"},
};
static const scn_shape sh_target = SCN_SHAPE(k_target, NULL);

/* ---- request ----------------------------------------------------------------- */

static const scn_key k_request[] = {
    {INT("max_tokens", S(max_tokens), 1, 10000000), .def = "64", .rdef = "256", .flag = "max-tokens",
     .arg = "N", .help = "tokens to ask for per request"},
    {INT("think_tokens", S(think_tokens), 0, 10000000), .flags = SCN_KF_NULL, .def = "null", .rdef = "null",
     .flag = "think-tokens", .arg = "N", .flag_help = "thinking tokens per request (bundled engine)",
     .help = "thinking tokens per request, the bundled engine's extension (null: not sent; a strict server "
     "rejects it)"},
    {BOOL("ignore_eos", S(ignore_eos)), .def = "true", .rdef = "false",
     .help = "ask the server to go on past end-of-sequence (vLLM, SGLang, the bundled engine; OpenAI itself "
     "rejects it)"},
    {.name = "timeout_s", .type = SCN_K_SECONDS, .off = S(timeout_s), .lo = 0.001, .hi = 1e6, .def = "300",
     .rdef = "600", .flag = "timeout", .arg = "S", .flag_help = "per-request timeout",
     .help = "a whole request's time bound, in seconds"},
    {BOOL("continuous_usage", S(continuous_usage)), .def = "true", .flag = "no-continuous-usage",
     .flag_val = "false", .flag_help = "do not ask for stream_options.continuous_usage_stats (strict OpenAI "
     "servers reject it; a 400 naming it also turns it off)",
     .help = "ask for stream_options.continuous_usage_stats, tokens per chunk (a 400 that names it turns it "
     "off, said once)"},
    {BOOL("record_outputs", S(record_outputs)), .flags = SCN_KF_OMIT0, .flag = "record-outputs",
     .flag_help = "keep each request's output in its record (token ids or text, and with logprobs the chosen "
     "token's and the top 5) for `loadlaw compare` to check that two runs produced the same outputs (scenario "
     "key request.record_outputs)",
     .help = "keep each request's output (token ids or text, the chosen token's logprob and the top 5) in its "
     "record, for `loadlaw compare` and `loadlaw check-decode`"},
    {BOOL("greedy", S(greedy)), .flags = SCN_KF_OMIT0, .flag = "greedy",
     .flag_help = "send temperature 0 and a fixed seed (scenario key request.greedy)",
     .help = "send temperature 0 and a fixed seed (prompts.seed)"},
    {NUM("top_p", S(top_p), 0, 1), .flags = SCN_KF_LO_OPEN | SCN_KF_NULL | SCN_KF_OMIT0, .flag = "top-p",
     .arg = "P", .flag_help = "nucleus sampling: send top_p P (scenario key request.top_p)",
     .help = "nucleus sampling, sent as top_p (generate: sampling_params.top_p): each token is drawn from the "
     "fewest most likely tokens whose probabilities add up to this. The sampler's work is part of every "
     "step's per-request cost, so measure at production's value (null: not sent, the server's default)"},
    {.name = "extra_body", .type = SCN_K_JSON, .off = S(extra_body), .flags = SCN_KF_NULL,
     .what = "an object (keys merged into every request body) or null", .flag = "extra-body", .arg = "JSON",
     .flag_help = "object merged into every request body, e.g. '{\"temperature\":0.6,\"top_p\":0.95}'",
     .help = "an object whose keys are merged into every request body, each replacing a key the body would "
     "have had (temperature, stop, ...)"},
};
static const scn_shape sh_request = SCN_SHAPE(k_request, NULL);

/* ---- prompts ----------------------------------------------------------------- */

static const scn_key k_dist[] = {
    {ENUM("dist", DIST(kind), k_dist_kind), .help = "the distribution"},
    {NUM("value", DIST(value), 0, 1e6), .help = "fixed: the length"},
    {NUM("min", DIST(min), 0, 1e6), .help = "uniform: the least length (normal: its clamp)"},
    {NUM("max", DIST(max), 0, 1e6), .help = "uniform: the greatest length (normal: its clamp when above 0)"},
    {NUM("mean", DIST(mean), 0, 1e6), .help = "normal: the mean"},
    {NUM("stddev", DIST(stddev), 0, 1e6), .help = "normal: the standard deviation"},
};
static const scn_shape sh_dist = SCN_SHAPE(k_dist, NULL);

static const scn_key k_prompts[] = {
    {ENUM("source", S(source), k_source), .rdef = "synthetic",
     .help = "synthetic (seeded words), sharegpt ([{\"conversations\":[{\"from\":\"human\",\"value\":..}]}]) or "
     "jsonl (one {\"prompt\":..} or {\"text\":..} a line)"},
    {STR("path", S(prompts_path)), .flags = SCN_KF_NULL,
     .help = "the sharegpt or jsonl file (relative to the scenario's folder, then the working directory)"},
    {INT("count", S(prompt_count), 1, 10000000), .def = "1024", .help = "synthetic prompts in the set"},
    {.name = "seed", .type = SCN_K_U64, .off = S(seed), .lo = 0, .hi = 9007199254740992.0, .def = "1",
     .flag = "seed", .arg = "N", .help = "seed for prompts and arrivals"},
    {STR("tokenizer", S(tokenizer_path)), .flags = SCN_KF_NULL,
     .help = "a Hugging Face tokenizer.json: exact prompt lengths, and token counts where the server gives "
     "no usage"},
    {BOOL("reuse", S(prompts_reuse)), .flag = "reuse-prompts",
     .flag_help = "send the prompt set as it is: each level from its first prompt, without the head that makes "
     "every request's prompt fresh (a server's prefix cache then serves repeats; scenario key prompts.reuse)",
     .help = "send the prompt set as it is, each level from its first prompt (else every request's prompt "
     "starts with a head no other has, so a prefix cache serves nothing)"},
    {OBJ("words", S(words), sh_dist), .set = scn_dist_set, .def = "100", .rdef = "192",
     .form = "MEAN[,STDDEV] with MEAN in [1, 1e6]", .help = "synthetic prompt length in words"},
    {OBJ("tokens", S(prompt_tokens), sh_dist), .set = scn_dist_set, .rdef = "256",
     .flags = SCN_KF_ON, .on = S(prompt_tokens_set), .form = "MEAN[,STDDEV] with MEAN in [1, 1e6]",
     .help = "synthetic prompt length in tokens, instead of words, as the server counts the prompt with "
     "the request's head inside: fitted by the tokenizer, else by the server's /tokenize, else words = "
     "tokens / 1.33"},
};
static const scn_shape sh_prompts = SCN_SHAPE(k_prompts, scn_prompts_done);

/* ---- load: its workload sections ----------------------------------------------- */

static const scn_key k_trace[] = {
    {STR("path", S(trace_path)), .flags = SCN_KF_REQUIRED, .what = "a trace file",
     .help = "the trace file (relative to the scenario's folder first)"},
    {NUM("speed", S(trace_speed), 0.001, 1e6), .def = "1", .what = "a number in [0.001, 1e6]",
     .form = "a factor in [0.001, 1e6]", .flag = "trace-speed", .arg = "X",
     .flag_help = "replay X times faster (0.5: half as fast; default 1)",
     .help = "replay X times faster (a row is sent at its trace time / X)"},
    {.name = "format", .type = SCN_K_IGNORED, .write = scn_trace_format_write, .what = "anything",
     .help = "the format read (mooncake, azure, burstgpt): written by the run line, ignored when read"},
    {.name = "rows", .type = SCN_K_IGNORED, .write = scn_trace_rows_write, .what = "anything",
     .help = "the rows replayed: written by the run line, ignored when read"},
    {HOOK("window_s"), .read = scn_window_read, .set = scn_window_set, .write = scn_window_write,
     .what = "[START, END] seconds, 0 <= START < END (END 0: to the end)",
     .form = "START:END seconds (START < END, END empty for the end)", .flag = "trace-window",
     .arg = "START:END", .flag_help = "only the rows from START to END seconds of trace time (after its first "
     "row; END empty or 0: to the end); the first is sent at once",
     .help = "[START, END]: only the rows from START to END seconds of trace time after its first row (END 0: "
     "to the end); the first is sent at once"},
};
static const scn_shape sh_trace = SCN_SHAPE(k_trace, NULL);

static const scn_key k_prefix[] = {
    {INT("groups", S(prefix_groups), 1, 1000000), .flags = SCN_KF_REQUIRED, .help = "the fixed texts"},
    {INT("tokens", S(prefix_tokens), 1, 10000000), .flags = SCN_KF_REQUIRED, .help = "each one's length"},
    {ENUM("pick", S(prefix_seeded), k_pick), .help = "which a prompt takes: prompt i the (i mod groups)-th, or "
     "a seeded draw"},
};
static const scn_shape sh_prefix = SCN_SHAPE(k_prefix, NULL);

static const scn_key k_sessions[] = {
    {INT("turns", S(session_turns), 1, 10000), .flags = SCN_KF_REQUIRED, .help = "turns per conversation"},
    {INT("count", S(session_count), 0, 10000000), .what = "an integer in [0, 10000000] (0: the level's concurrency)",
     .help = "conversations per level (0: the level's concurrency)"},
    {NUM("think_time_ms", S(session_think_ms), 0, 3600000), .what = "a number in [0, 3600000]",
     .help = "between an answer's end and the next turn's send"},
    {INT("user_tokens", S(session_user_tok), 1, 1000000), .def = "64",
     .help = "a synthetic user message's tokens"},
    {ENUM("source", S(session_sharegpt), k_session_source),
     .help = "user messages: synthetic, or a ShareGPT conversation's human turns"},
    {STR("path", S(session_path)), .flags = SCN_KF_OMIT0, .what = "a ShareGPT file",
     .help = "that ShareGPT file (absent: prompts.path)"},
};
static const scn_shape sh_sessions = SCN_SHAPE(k_sessions, NULL);

/* ---- load -------------------------------------------------------------------- */

static const scn_key k_load[] = {
    {INT("threads", S(threads), 0, 4096), .flag = "threads", .arg = "N",
     .flag_help = "worker threads (default: the cores this process may run on, its affinity mask)",
     .help = "worker threads (0: the cores in this process's CPU affinity mask)"},
    {NUM("drain_s", S(drain_s), 0, 86400), .def = "10", .rdef = "30",
     .help = "after the first interrupt, how long requests in flight may finish (s)"},
    {NUM("max_failed", S(max_failed), 0, 1), .def = "0.1", .what = "a fraction in [0, 1]", .flag = "max-failed",
     .arg = "FRAC", .flag_help = "exit 1 when more than FRAC of a level's requests failed, and send no later "
     "level (default 0.1; 1 = never); the records, summary and report are kept",
     .help = "a level where more than this share of the measured requests failed measures failures, not "
     "speed: the sweep keeps everything, sends no later level and exits 1 (1: never)"},
    {BOOL("keep_going", S(keep_going)), .flag = "keep-going",
     .flag_help = "after a level over --max-failed, send the later levels anyway (scenario key load.keep_going; "
     "the exit code is still 1)",
     .help = "after a level over max_failed, send the later levels anyway (the exit code is still 1)"},
    {BOOL("vary_context", S(vary_context)), .flags = SCN_KF_OMIT0,
     .help = "synthetic prompt lengths wander (a seeded walk) between 0.25 and 1.75 times their drawn length, "
     "so the context tokens in flight (K) do not move in step with the requests in flight (N)"},
    {ENUM("arrival_stamp", S(arrival_stamp), scn_stamp_names), .flag = "arrival-stamp", .arg = "kernel|user",
     .flag_help = "time each chunk by the kernel's receive stamp of its socket read (default), or by the clock "
     "when a worker thread handles it",
     .help = "time each chunk by the kernel's receive stamp of its socket read, or by the clock when a worker "
     "thread handles it"},
    {ENUM("cache", S(cache), scn_cache_names), .flags = SCN_KF_OMIT0, .flag = "cache", .arg = "auto|reset|keep",
     .flag_help = "the server's prefix cache before each level: reset asks the server to forget it (vLLM POST "
     "/reset_prefix_cache, SGLang POST /flush_cache, llama.cpp each slot's erase, the bundled engine as vLLM), "
     "keep leaves it warm from the level before; default auto: reset where the server offers it, keep "
     "elsewhere, said per level (scenario key load.cache)",
     .help = "the server's prefix cache before each level: auto (reset where the server offers it, else keep), "
     "reset, or keep (docs/workloads.md, \"The prefix cache between levels\")"},
    {STR("source_addrs", S(source_addrs)), .def = "auto", .flag = "source-addrs", .arg = "auto|off|LIST",
     .flag_help = "local addresses to connect from, round robin (e.g. 127.0.0.1-127.0.0.8,10.0.0.5; the port "
     "is still picked per connection); default auto: to a 127.x server, from 127.0.0.1..K once a level's C "
     "passes a quarter of the ephemeral port range (with one address past half of it, each connect() walks the "
     "range); off: the kernel's pick",
     .help = "local addresses connections are bound to, round robin: auto (to a 127.x server, 127.0.0.1..K "
     "once a level's C needs them), off (the kernel's pick) or a list like 127.0.0.1-127.0.0.8,10.0.0.5"},
    {HOOK("trace"), .shape = &sh_trace, .read = scn_trace_read, .set = scn_trace_set, .write = scn_trace_write,
     .what = "a trace file (or {\"path\",\"speed\",\"window_s\"})", .form = "a file name",
     .flag = "trace", .arg = "FILE",
     .flag_help = "replay a request trace: Mooncake JSONL, Azure LLM inference CSV or BurstGPT CSV (known by "
     "their columns); one open-loop level, each row sent at its time with a prompt of its input length (blocks "
     "of the same hash id: the same text) and max_tokens its output length (scenario key load.trace; no -c, "
     "--rate, -n or --duration beside it)",
     .help = "replay a request trace (Mooncake JSONL, Azure or BurstGPT CSV; docs/workloads.md) as the one "
     "open-loop level: \"FILE\", or the object below"},
    {OBJ("shared_prefix", 0, sh_prefix), .flags = SCN_KF_NULL, .set = scn_prefix_set, .when = scn_has_prefix,
     .what = "{\"groups\":G,\"tokens\":P}", .form = "GROUPS:TOKENS like 4:512", .flag = "shared-prefix",
     .arg = "G:P", .flag_help = "every prompt starts with one of G fixed P-token texts (round robin), then its "
     "own: the shape of system prompts and RAG documents (scenario key load.shared_prefix)",
     .help = "every prompt starts with one of `groups` fixed texts of `tokens` tokens, then its own: the shape "
     "of system prompts and RAG documents"},
    {OBJ("sessions", 0, sh_sessions), .flags = SCN_KF_NULL, .when = scn_has_sessions,
     .what = "{\"turns\":T,...}",
     .help = "multi-turn conversations: each level runs its C conversations at a time, each turn sending "
     "the conversation so far (docs/workloads.md)"},
    /* read, not written: the run line writes every level whole */
    {.type = SCN_K_INLINE, .shape = &sh_level_fields, .at = scn_first_level,
     .flags = SCN_KF_NOWRITE | SCN_KF_PER_LEVEL,
     .help = "each key of a level but concurrency (requests, warmup, ...): every level's default"},
    {HOOK("concurrency"), .read = scn_concurrency_read, .flags = SCN_KF_NOWRITE,
     .what = "a non-empty array of integers in [0, 1000000]",
     .help = "closed-loop levels, [C, ...]: one level per element, each with load's level keys (not beside "
     "levels)"},
};
static const scn_shape sh_load = SCN_SHAPE(k_load, NULL);

/* ---- ab ------------------------------------------------------------------------ */

static const scn_key k_side[] = {
    {STR("name", SIDE(name)), .flags = SCN_KF_REQUIRED, .check = scn_side_name_check,
     .what = "a directory name of letters, digits, '.', '_' or '-'",
     .help = "the side's name: its run goes to OUTPUT/<name>"},
    {STR("engine", SIDE(engine)), .flags = SCN_KF_NULL | SCN_KF_OMIT0 | SCN_KF_SPEC,
     .what = "a non-empty engine spec string",
     .help = "its bundled engine's spec, appended to the scenario's engine (its keys win)"},
    {STR("url", SIDE(url)), .flags = SCN_KF_NULL | SCN_KF_OMIT0 | SCN_KF_URL, .check = scn_url_check,
     .help = "or a remote server (what `sweep --url A --url B` writes)"},
    {STR("model", SIDE(model)), .flags = SCN_KF_NULL | SCN_KF_OMIT0, .help = "the model that side asks for"},
};
static const scn_shape sh_side = SCN_SHAPE(k_side, scn_side_done);

static const scn_key k_ab[] = {
    {OBJ("a", AB(side[0]), sh_side), .flags = SCN_KF_REQUIRED, .what = "an object {\"name\":..,\"engine\":..}",
     .help = "the baseline side"},
    {OBJ("b", AB(side[1]), sh_side), .flags = SCN_KF_REQUIRED, .what = "an object {\"name\":..,\"engine\":..}",
     .help = "the side compared with it"},
    {ENUM("order", AB(order), k_order), .flags = SCN_KF_NULL, .flag = "order", .arg = "interleaved|sequential",
     .flag_help = "interleaved (default): level by level, A then B, one side loaded at a time; sequential: all "
     "of A, then all of B",
     .help = "interleaved: level by level, A then B, one side loaded at a time; sequential: all of A, then "
     "all of B"},
    {INT("repeat", AB(repeat), 1, SCN_AB_MAX_REPEAT), .flags = SCN_KF_NULL, .def = "1", .flag = "repeat",
     .arg = "R", .flag_help = "run each level R times per side (default 1); interleaved, in ABBA order "
     "(A B B A A B ...) so a linear drift cancels",
     .help = "runs of each level per side; interleaved, in ABBA order, so a linear drift cancels"},
    {HOOK("expect_speedup"), .read = scn_speedup_read, .write = scn_speedup_write,
     .what = "\"X\" or \"X@C\" (0.001 <= X <= 1e6, C >= 1), or a number",
     .help = "the gate of `compare --expect-speedup`: \"X\" or \"X@C\" (C a closed level's concurrency), "
     "or a number X"},
    {NUM("expect_same_outputs", AB(expect_outputs), 0, 1), .flags = SCN_KF_LO_OPEN | SCN_KF_NULL | SCN_KF_OMIT0,
     .what = "a share in (0, 1], e.g. 0.99",
     .help = "gate: at every level at least this share of B's requests produced A's outputs or passed the "
     "top-k check (needs request.record_outputs)"},
};
static const scn_shape sh_ab = SCN_SHAPE(k_ab, scn_ab_done);

/* ---- find ------------------------------------------------------------------------ */

static int objective_check(const char *v, char *why, size_t n)
{
    scn_objective o;
    return scn_objective_parse(v, &o, why, n) ? -1 : 0;
}

static int has_find(const void *base)
{
    return ((const scn_scenario *)base)->find_objective != NULL;
}

static const scn_key k_find[] = {
    {STR("objective", S(find_objective)), .flags = SCN_KF_NULL, .check = objective_check,
     .what = "terms like \"itl_p99<=50ms,ttft_p99<=2s\"", .form = "terms like itl_p99<=50ms,ttft_p99<=2s",
     .flag = "find", .arg = "OBJECTIVE",
     .flag_help = "search for the largest C that meets OBJECTIVE instead of running fixed levels: terms joined "
     "by ',' of ttft, itl, tpot or e2e with _p50, _p90, _p99, _mean or _max (<= 50ms, 2s; bare: ms), "
     "error_rate<=SHARE, goodput>=SHARE, user_tps>=TOK/S; a doubling ladder until the model predicts the "
     "boundary, probes at it and beside it, a sustain at the answer and a re-measure above it; exit 3 when "
     "even C=1 fails, 4 when the budget ran out first (scenario key find.objective; docs/plan.md)",
     .help = "search for the largest C that meets these terms (docs/plan.md, \"Finding capacity\"); null: "
     "run the levels"},
    {INT("budget_levels", S(find_budget_levels), 2, 1000), .def = "12", .flag = "find-budget", .arg = "N",
     .flag_help = "the most levels --find may run (default 12)",
     .help = "the most levels the search may run"},
    {.name = "budget_s", .type = SCN_K_SECONDS, .off = S(find_budget_s), .lo = 0, .hi = 1e7, .def = "0",
     .flag = "find-time", .arg = "S",
     .flag_help = "the most time --find may take (10m, 600s; default none); no level starts after it",
     .help = "the most seconds the search may take: no level starts after it (0: no bound)"},
    {ENUM("by", S(find_by_rate), k_find_by), .def = "concurrency", .flag = "find-by", .arg = "concurrency|rate",
     .flag_help = "what --find searches over: concurrency (default; closed-loop C) or rate (open-loop "
     "arrivals per second, after one closed level at C=1; pinned to --find-precision)",
     .help = "concurrency: the largest closed-loop C; rate: the largest open-loop arrival rate (requests/s)"},
    {NUM("precision", S(find_precision), 0.01, 1), .def = "0.1", .flag = "find-precision", .arg = "X",
     .flag_help = "--find-by rate: the boundary is pinned once the smallest rate that fails is within (1 + X) "
     "times the largest that meets (default 0.1: 10%)",
     .help = "a rate search ends pinned when the smallest failing rate is at most (1 + this) times the largest "
     "meeting one"},
};
static const scn_shape sh_find = SCN_SHAPE(k_find, NULL);

/* ---- the top level ---------------------------------------------------------------- */

static const scn_key k_root[] = {
    {STR("name", S(name)), .def = "unnamed", .rdef = "remote", .help = "the run's name"},
    {STR("defaults", S(defaults)), .names = k_defaults, .flags = SCN_KF_NULL, .rdef = "remote",
     .help = "which defaults the run started from (bundled: scenarios/default.json; remote: --url without a "
     "scenario; file), as the run line says"},
    {OBJ("target", 0, sh_target), .help = "where requests go and how they name themselves"},
    {OBJ("request", 0, sh_request), .help = "what each request asks for"},
    {OBJ("prompts", 0, sh_prompts), .help = "what the requests say"},
    {OBJ("load", 0, sh_load), .help = "how hard, how long, and what shape of traffic"},
    {HOOK("levels"), .shape = &scn_level_shape, .read = scn_levels_read, .set = scn_levels_set,
     .what = "a non-empty array of level objects",
     .write = scn_levels_write, .def = "1", .rdef = "1,2,4,8,16,32,64",
     .help = "the levels, one object each (not beside load.concurrency)"},
    {STR("engine", S(engine_spec)), .flags = SCN_KF_NULL | SCN_KF_SPEC,
     .help = "the bundled engine's spec, e.g. \"backend=synthetic,law=52+30n\" (docs/engine.md)"},
    {STR("output", S(output)), .flags = SCN_KF_NULL, .flag = "output", .arg = "DIR",
     .flag_help = "run directory (default runs/<timestamp>); one that holds records is refused",
     .help = "the run directory (null: runs/<timestamp>)"},
    {OBJ("ab", offsetof(scn_scenario, ab), sh_ab), .flags = SCN_KF_NULL | SCN_KF_ON,
     .on = offsetof(scn_scenario, ab) + AB(enabled), .what = "an object {\"a\":{..},\"b\":{..}} or null",
     .help = "the same sweep against two targets, each side's run in its own folder, then compared "
     "(docs/ab.md)"},
    {OBJ("find", 0, sh_find), .flags = SCN_KF_NULL, .when = has_find,
     .what = "an object {\"objective\":..} or null",
     .help = "an adaptive capacity search instead of the levels (sweep --find; docs/plan.md)"},
    {.name = "$comment", .type = SCN_K_IGNORED, .what = "anything", .help = "a note for the reader"},
};
const scn_shape scn_root_shape = SCN_SHAPE(k_root, NULL);
