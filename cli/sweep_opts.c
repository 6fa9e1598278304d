/* sweep_opts.c: `loadlaw sweep`'s options: the table (which is also its
 * --help) and parsing argv into sweep_opts, each value's own range checked
 * as it is read. sweep_flags.c lays them over the scenario. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "opts.h"
#include "sweep_opts.h"

#ifndef LOADLAW_DATADIR
#define LOADLAW_DATADIR "/usr/local/share/loadlaw"
#endif

enum {
    K_URL = 256, K_ENGINE, K_MODEL, K_ENDPOINT, K_API_KEY, K_WARMUP, K_RATE, K_ARRIVAL, K_DURATION, K_THREADS,
    K_MAX_TOKENS, K_THINK_TOKENS, K_TIMEOUT, K_SEED, K_PROMPTS, K_NO_REPORT, K_PROMPT_TOKENS, K_PROMPT_WORDS,
    K_TOKENIZER, K_HEADER, K_EXTRA_BODY, K_ENDPOINT_PATH, K_NO_CONT_USAGE, K_MAX_FAILED,
    K_METRICS_URL, K_METRICS_INTERVAL, K_NO_METRICS, K_GPU, K_REPEAT, K_ORDER, K_ARRIVAL_STAMP, K_KEEP_GOING,
    K_SOURCE_ADDRS, K_REUSE_PROMPTS, K_RECORD_OUTPUTS, K_GREEDY, K_TRACE, K_TRACE_SPEED, K_TRACE_WINDOW,
    K_SHARED_PREFIX,
};

static const cli_opt sweep_table[] = {
    {NULL, 0, NULL, "target:"},
    {"url", K_URL, "URL", "remote server, http:// or https:// (default: start the bundled engine "
                "in-process); paths go before its query (?api-version= is kept); twice: an A/B of "
                "two servers (A the baseline, then B) into RUN_DIR/a and RUN_DIR/b, then compared"},
    {"engine", K_ENGINE, "SPEC", "bundled engine settings, e.g. backend=synthetic,law=52+30n,time_scale=0.1"},
    {"model", K_MODEL, "NAME", "model to ask for (default: the bundled engine's name); with two --url: "
                "once for both, or twice (A's, then B's)"},
    {"endpoint", K_ENDPOINT, "chat|completions|responses|generate",
     "the API to call (responses: OpenAI Responses API; generate: SGLang's native /generate)"},
    {"endpoint-path", K_ENDPOINT_PATH, "PATH", "path under --url instead of the endpoint's standard one "
                "(e.g. /openai/v1/chat/completions)"},
    {"header", K_HEADER, "'K: V'", "extra request header (repeatable; 'K:V' also accepted)"},
    {"api-key", K_API_KEY, "KEY", "Bearer token (default: $OPENAI_API_KEY); never written anywhere; with "
                "two --url: once for both, or twice (A's, then B's)"},
    {NULL, 0, NULL, "A/B (an \"ab\" scenario, or two --url):"},
    {"order", K_ORDER, "interleaved|sequential", "interleaved (default): level by level, A then B, one side "
                "loaded at a time; sequential: all of A, then all of B"},
    {"repeat", K_REPEAT, "R", "run each level R times per side (default 1); interleaved, in ABBA order "
                "(A B B A A B ...) so a linear drift cancels"},
    {NULL, 0, NULL, "load:"},
    {"concurrency", 'c', "L", "closed-loop levels, e.g. 1,2,4,8,16,32,64"},
    {"requests", 'n', "N[,N..]", "measured requests per level: one value for all, or one per level "
                "(default max(1.5*C, 8))"},
    {"warmup", K_WARMUP, "N", "extra requests per level first, excluded from statistics"},
    {"rate", K_RATE, "R", "open loop: R requests/s (alone: one level, no cap; with -c: "
                "one open level per C, C capping the requests in flight)"},
    {"arrival", K_ARRIVAL, "poisson|constant", "open loop: how arrivals are spaced"},
    {"duration", K_DURATION, "S[,S..]", "end each level's issuing after S (30s, 2m): one for all, or one "
                "per level"},
    {"max-failed", K_MAX_FAILED, "FRAC", "exit 1 when more than FRAC of a level's requests failed, and send "
                "no later level (default 0.1; 1 = never); the records, summary and report are kept"},
    {"keep-going", K_KEEP_GOING, NULL, "after a level over --max-failed, send the later levels anyway (scenario "
                "key load.keep_going; the exit code is still 1)"},
    {"threads", K_THREADS, "N", "worker threads (default: the cores this process may run on, its affinity mask)"},
    {"arrival-stamp", K_ARRIVAL_STAMP, "kernel|user", "time each chunk by the kernel's receive stamp of its "
                "socket read (default), or by the clock when a worker thread handles it"},
    {"source-addrs", K_SOURCE_ADDRS, "auto|off|LIST", "local addresses to connect from, round robin (e.g. "
                "127.0.0.1-127.0.0.8,10.0.0.5; the port is still picked per connection); default auto: to a "
                "127.x server, from 127.0.0.1..K once a level's C passes a quarter of the ephemeral port range "
                "(with one address past half of it, each connect() walks the range); off: the kernel's pick"},
    {NULL, 0, NULL, "request:"},
    {"max-tokens", K_MAX_TOKENS, "N", "tokens to ask for per request"},
    {"think-tokens", K_THINK_TOKENS, "N", "thinking tokens per request (bundled engine)"},
    {"timeout", K_TIMEOUT, "S", "per-request timeout"},
    {"extra-body", K_EXTRA_BODY, "JSON", "object merged into every request body, e.g. "
                "'{\"temperature\":0.6,\"top_p\":0.95}'"},
    {"no-continuous-usage", K_NO_CONT_USAGE, NULL, "do not ask for stream_options.continuous_usage_stats "
                "(strict OpenAI servers reject it; a 400 naming it also turns it off)"},
    {"record-outputs", K_RECORD_OUTPUTS, NULL, "keep each request's output in its record (token ids or "
                "text, and with logprobs the chosen token's and the top 5) for `loadlaw compare` to check "
                "that two runs produced the same outputs (scenario key request.record_outputs)"},
    {"greedy", K_GREEDY, NULL, "send temperature 0 and a fixed seed (scenario key request.greedy)"},
    {"seed", K_SEED, "N", "seed for prompts and arrivals"},
    {"prompts", K_PROMPTS, "FILE", ".jsonl of {\"prompt\":..} or ShareGPT .json"},
    {"prompt-tokens", K_PROMPT_TOKENS, "MEAN[,SD]", "synthetic prompt length in tokens (exact with --tokenizer, "
                "else words = tokens/1.33); with --url and no scenario the default is 256"},
    {"prompt-words", K_PROMPT_WORDS, "MEAN[,SD]", "synthetic prompt length in words"},
    {"reuse-prompts", K_REUSE_PROMPTS, NULL, "send the prompt set as it is: each level from its first prompt, "
                "without the head that makes every request's prompt fresh (a server's prefix cache then serves "
                "repeats; scenario key prompts.reuse)"},
    {"tokenizer", K_TOKENIZER, "PATH", "Hugging Face tokenizer.json: exact prompt lengths and token counts "
                "where the server gives no usage"},
    {"shared-prefix", K_SHARED_PREFIX, "G:P", "every prompt starts with one of G fixed P-token texts (round "
                "robin), then its own: the shape of system prompts and RAG documents (scenario key "
                "load.shared_prefix)"},
    {NULL, 0, NULL, "trace replay (docs/workloads.md):"},
    {"trace", K_TRACE, "FILE", "replay a request trace: Mooncake JSONL, Azure LLM inference CSV or BurstGPT "
                "CSV (known by their columns); one open-loop level, each row sent at its time with a prompt "
                "of its input length (blocks of the same hash id: the same text) and max_tokens its output "
                "length (scenario key load.trace; no -c, --rate, -n or --duration beside it)"},
    {"trace-speed", K_TRACE_SPEED, "X", "replay X times faster (0.5: half as fast; default 1)"},
    {"trace-window", K_TRACE_WINDOW, "START:END", "only the rows from START to END seconds of trace time "
                "(after its first row; END empty or 0: to the end); the first is sent at once"},
    {NULL, 0, NULL, "server metrics:"},
    {"metrics-url", K_METRICS_URL, "URL", "also scrape this Prometheus endpoint (repeatable; e.g. a DCGM "
                "exporter); the target's own /metrics is always scraped unless --no-metrics"},
    {"metrics-interval", K_METRICS_INTERVAL, "S", "seconds between scrapes (default 0.5)"},
    {"no-metrics", K_NO_METRICS, NULL, "scrape no /metrics endpoint"},
    {"gpu", K_GPU, "auto|on|off", "sample the local GPUs through NVML every --metrics-interval (default "
                "auto: when NVML loads, quiet when it does not unless the bundled engine runs on cuda; on: "
                "also say why it cannot)"},
    {NULL, 0, NULL, "output:"},
    {"output", 'o', "DIR", "run directory (default runs/<timestamp>); one that holds records is refused"},
    {"no-report", K_NO_REPORT, NULL, "skip the law and report at the end (summary.json is still written)"},
    {"quiet", 'q', NULL, "no progress line"},
    {0},
};

const cli_cmd sweep_cmd = {
    "sweep",
    "usage: loadlaw sweep [SCENARIO.json] [options]",
    "Drives an OpenAI-compatible endpoint through concurrency levels and records every\n"
    "token's arrival in RUN_DIR/records.jsonl; ends with the per-level tables, the fitted\n"
    "law and the report (every figure from one fit of the records, as `loadlaw fit` gives).\n"
    "With no SCENARIO, runs scenarios/default.json (bundled engine, 52+30n, C=1..64);\n"
    "with --url and no SCENARIO, remote-benchmark defaults instead: no loadlaw-only\n"
    "request fields, no ignore_eos, 256-token synthetic prompts (--prompt-tokens), C=1..64.\n"
    "The run line in records.jsonl says which (\"defaults\": \"bundled\", \"remote\", \"file\").\n"
    "Scenario names are looked up as given, then in the source tree, then in\n"
    "$LOADLAW_DATADIR (default " LOADLAW_DATADIR ")/scenarios.\n"
    "A scenario with \"ab\" (e.g. scenarios/kernel-ab.json) runs the sweep on both sides,\n"
    "each on its own bundled engine, into RUN_DIR/<side>, then compares them as\n"
    "`loadlaw compare` does (RUN_DIR/compare.html; exit 3 when its expect_speedup is\n"
    "missed); --engine and --url are usage errors there (edit the sides instead).\n"
    "Two --url do the same with two remote servers (RUN_DIR/a, RUN_DIR/b). The sides\n"
    "run interleaved by default: each level on A then on B, with --repeat R in ABBA\n"
    "order, and compare pairs them (docs/records.md: level \"repeat\", \"pair\", \"seq\").\n",
    sweep_table,
    "exit codes: 0 ok, 1 failure, 2 usage error, 3 ab gate missed, 130 interrupted (records kept)\n",
};

/* The workload's options (checked where sweep_flags.c lays them). */
static int on_workload_opt(sweep_opts *o, int key, const char *v)
{
    switch (key) {
    case K_TRACE: o->trace = v; break;
    case K_TRACE_SPEED: o->trace_speed = v; break;
    case K_TRACE_WINDOW: o->trace_window = v; break;
    case K_SHARED_PREFIX: o->shared_prefix = v; break;
    }
    return 0;
}

/* complexity: one switch over the option table, a line per option. */
static int on_opt(const cli_opt *opt, const char *v, void *ctx)
{
    sweep_opts *o = ctx;
    if (opt && opt->key >= K_TRACE)
        return on_workload_opt(o, opt->key, v);
    if (!opt) {
        if (o->scenario)
            return cli_usage_error(&sweep_cmd, "one scenario only ('%s' and '%s')", o->scenario, v);
        o->scenario = v;
        return 0;
    }
    char why[1024];
    switch (opt->key) {
    case K_URL:
        if (o->n_urls == 2)
            return cli_usage_error(&sweep_cmd, "--url: at most two (A, the baseline, then B)");
        if (ll_url_check(v, why, sizeof why))
            return cli_usage_error(&sweep_cmd, "--url %s", why);
        o->urls[o->n_urls++] = v;
        o->url = o->urls[0];
        break;
    case K_ENGINE: o->engine = v; break;
    case K_MODEL:
        if (o->n_models == 2)
            return cli_usage_error(&sweep_cmd, "--model: at most two (A's, then B's)");
        o->models[o->n_models++] = v;
        o->model = o->models[0];
        break;
    case K_ENDPOINT: o->endpoint = v; break;
    case K_API_KEY:
        /* the key itself is never echoed, here or anywhere */
        if (o->n_api_keys == 2)
            return cli_usage_error(&sweep_cmd, "--api-key: at most two (A's, then B's)");
        o->api_keys[o->n_api_keys++] = v;
        o->api_key = o->api_keys[0];
        break;
    case K_ORDER:
        if (strcmp(v, "interleaved") && strcmp(v, "sequential"))
            return cli_usage_error(&sweep_cmd, "--order: expected interleaved or sequential, got '%s'", v);
        o->order = v;
        break;
    case K_REPEAT: return cli_long(&sweep_cmd, "repeat", v, 1, SCN_AB_MAX_REPEAT, &o->repeat);
    case K_ARRIVAL_STAMP:
        if (strcmp(v, "kernel") && strcmp(v, "user"))
            return cli_usage_error(&sweep_cmd, "--arrival-stamp: expected kernel or user, got '%s'", v);
        o->arrival_stamp = v;
        break;
    case 'o': o->output = v; break;
    case K_PROMPTS: o->prompts = v; break;
    case K_ARRIVAL: o->arrival = v; break;
    case 'c': o->conc = v; break;
    case K_RATE: o->rate = v; break;
    case K_DURATION: o->duration = v; break;
    case K_TIMEOUT: o->timeout = v; break;
    case K_MAX_FAILED: o->max_failed = v; break;
    case K_KEEP_GOING: o->keep_going = 1; break;
    case K_SOURCE_ADDRS: o->source_addrs = v; break;
    case 'n': o->requests = v; break;
    case K_PROMPT_TOKENS: o->prompt_tokens = v; break;
    case K_PROMPT_WORDS: o->prompt_words = v; break;
    case K_TOKENIZER: o->tokenizer = v; break;
    case K_REUSE_PROMPTS: o->reuse_prompts = 1; break;
    case K_RECORD_OUTPUTS: o->record_outputs = 1; break;
    case K_GREEDY: o->greedy = 1; break;
    case K_EXTRA_BODY: o->extra_body = v; break;
    case K_ENDPOINT_PATH: o->endpoint_path = v; break;
    case K_NO_CONT_USAGE: o->no_continuous_usage = 1; break;
    case K_HEADER:
        if (o->n_headers == SWEEP_MAX_HEADERS)
            return cli_usage_error(&sweep_cmd, "--header: at most %d", SWEEP_MAX_HEADERS);
        o->headers[o->n_headers++] = v;
        break;
    case K_WARMUP: return cli_long(&sweep_cmd, "warmup", v, 0, 100000000, &o->warmup);
    case K_THREADS: return cli_long(&sweep_cmd, "threads", v, 1, 4096, &o->threads);
    case K_MAX_TOKENS: return cli_long(&sweep_cmd, "max-tokens", v, 1, 10000000, &o->max_tokens);
    case K_THINK_TOKENS: return cli_long(&sweep_cmd, "think-tokens", v, 0, 10000000, &o->think_tokens);
    case K_SEED: return cli_long(&sweep_cmd, "seed", v, 0, 0x7fffffffL, &o->seed);
    case K_NO_REPORT: o->no_report = 1; break;
    case 'q': o->quiet = 1; break;
    case K_NO_METRICS: o->no_metrics = 1; break;
    case K_GPU:
        if (strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "off"))
            return cli_usage_error(&sweep_cmd, "--gpu: expected auto, on or off, got '%s'", v);
        o->gpu = !strcmp(v, "off") ? SWEEP_GPU_OFF : !strcmp(v, "on") ? SWEEP_GPU_ON : SWEEP_GPU_AUTO;
        break;
    case K_METRICS_URL:
        if (o->n_metrics_urls == SWEEP_MAX_METRICS_URLS)
            return cli_usage_error(&sweep_cmd, "--metrics-url: at most %d", SWEEP_MAX_METRICS_URLS);
        if (ll_url_check(v, why, sizeof why))
            return cli_usage_error(&sweep_cmd, "--metrics-url %s", why);
        o->metrics_urls[o->n_metrics_urls++] = v;
        break;
    case K_METRICS_INTERVAL: {
        /* below 50 ms the scrapes would load the server more than they tell */
        return cli_number(&sweep_cmd, "metrics-interval", v, CLI_DURATION, 0.05, 3600, "seconds in [0.05, 3600]",
                          &o->metrics_interval_s);
    }
    }
    return 0;
}

int sweep_parse_args(int argc, char **argv, sweep_opts *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = o->threads = o->max_tokens = o->think_tokens = o->seed = o->repeat = -1;
    int rc = cli_parse(&sweep_cmd, argc, argv, on_opt, o);
    if (rc != CLI_GO_ON)
        return rc;
    /* A second --model or --api-key is B's: it needs a B. */
    if (o->n_urls < 2 && o->n_models == 2)
        return cli_usage_error(&sweep_cmd, "--model given twice but %s --url (a second --model is B's; "
                               "give --url A --url B)", o->n_urls ? "one" : "no");
    if (o->n_urls < 2 && o->n_api_keys == 2)
        return cli_usage_error(&sweep_cmd, "--api-key given twice but %s --url (a second --api-key is B's; "
                               "give --url A --url B)", o->n_urls ? "one" : "no");
    if (o->n_urls == 2 && o->engine)
        return cli_usage_error(&sweep_cmd, "--engine with two --url: both sides are remote servers");
    return rc;
}
