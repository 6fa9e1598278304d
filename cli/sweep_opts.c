/* sweep_opts.c: `loadlaw sweep`'s options: the table (which is also its
 * --help), parsing into sweep_opts, and laying the flags over the scenario
 * in named steps (target, levels, per-level load, request shape). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common.h"
#include "opts.h"
#include "sweep.h"

#ifndef LOADLAW_SOURCE_DIR
#define LOADLAW_SOURCE_DIR "."
#endif

enum {
    K_URL = 256, K_ENGINE, K_MODEL, K_ENDPOINT, K_API_KEY, K_WARMUP, K_RATE, K_ARRIVAL, K_DURATION, K_THREADS,
    K_MAX_TOKENS, K_THINK_TOKENS, K_TIMEOUT, K_SEED, K_PROMPTS, K_NO_REPORT,
};

static const cli_opt sweep_table[] = {
    {NULL, 0, NULL, "target:"},
    {"url", K_URL, "URL", "remote server (default: start the bundled engine in-process)"},
    {"engine", K_ENGINE, "SPEC", "bundled engine settings, e.g. backend=synthetic,law=52+30n,time_scale=0.1"},
    {"model", K_MODEL, "NAME", "model to ask for (default: the bundled engine's name)"},
    {"endpoint", K_ENDPOINT, "chat|completions", "the API to call"},
    {"api-key", K_API_KEY, "KEY", "Bearer token (default: $OPENAI_API_KEY); never written anywhere"},
    {NULL, 0, NULL, "load:"},
    {"concurrency", 'c', "L", "closed-loop levels, e.g. 1,2,4,8,16,32,64"},
    {"requests", 'n', "N", "measured requests per level (default max(1.5*C, 8))"},
    {"warmup", K_WARMUP, "N", "extra requests per level first, excluded from statistics"},
    {"rate", K_RATE, "R", "open loop: R requests/s (alone: one level, no cap; with -c: "
                "one open level per C, C capping the requests in flight)"},
    {"arrival", K_ARRIVAL, "poisson|constant", "open loop: how arrivals are spaced"},
    {"duration", K_DURATION, "S", "end each level's issuing after S (30s, 2m)"},
    {"threads", K_THREADS, "N", "worker threads (default: number of cores)"},
    {NULL, 0, NULL, "request:"},
    {"max-tokens", K_MAX_TOKENS, "N", "tokens to ask for per request"},
    {"think-tokens", K_THINK_TOKENS, "N", "thinking tokens per request (bundled engine)"},
    {"timeout", K_TIMEOUT, "S", "per-request timeout"},
    {"seed", K_SEED, "N", "seed for prompts and arrivals"},
    {"prompts", K_PROMPTS, "FILE", ".jsonl of {\"prompt\":..} or ShareGPT .json"},
    {NULL, 0, NULL, "output:"},
    {"output", 'o', "DIR", "run directory (default runs/<timestamp>)"},
    {"no-report", K_NO_REPORT, NULL, "skip the law and report at the end (summary.json is still written)"},
    {"quiet", 'q', NULL, "no progress line"},
    {0},
};

static const cli_cmd sweep_cmd = {
    "sweep",
    "usage: loadlaw sweep [SCENARIO.json] [options]",
    "Drives an OpenAI-compatible endpoint through concurrency levels and records every\n"
    "token's arrival in RUN_DIR/records.jsonl; ends with the per-level tables, the fitted\n"
    "law and the report (every figure from one fit of the records, as `loadlaw fit` gives).\n"
    "With no SCENARIO, runs scenarios/default.json (bundled engine, 52+30n, C=1..64).\n"
    "A scenario with \"ab\" (e.g. scenarios/kernel-ab.json) runs the sweep once per side,\n"
    "each on its own bundled engine, into RUN_DIR/<side>, then compares them as\n"
    "`loadlaw compare` does (RUN_DIR/compare.html; exit 3 when its expect_speedup is\n"
    "missed); --engine and --url are usage errors there (edit the sides instead).\n",
    sweep_table,
    "exit codes: 0 ok, 1 failure, 2 usage error, 3 ab gate missed, 130 interrupted (records kept)\n",
};

/* A whole number in [lo, hi] (k/m/g suffixes accepted). */
static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    uint64_t x;
    if (ll_parse_count(v, &x) || x < (uint64_t)lo || x > (uint64_t)hi)
        return cli_usage_error(&sweep_cmd, "%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, v);
    *out = (long)x;
    return 0;
}

static int on_opt(const cli_opt *opt, const char *v, void *ctx)
{
    sweep_opts *o = ctx;
    if (!opt) {
        if (o->scenario)
            return cli_usage_error(&sweep_cmd, "one scenario only ('%s' and '%s')", o->scenario, v);
        o->scenario = v;
        return 0;
    }
    switch (opt->key) {
    case K_URL: o->url = v; break;
    case K_ENGINE: o->engine = v; break;
    case K_MODEL: o->model = v; break;
    case K_ENDPOINT: o->endpoint = v; break;
    case K_API_KEY: o->api_key = v; break;
    case 'o': o->output = v; break;
    case K_PROMPTS: o->prompts = v; break;
    case K_ARRIVAL: o->arrival = v; break;
    case 'c': o->conc = v; break;
    case K_RATE: o->rate = v; break;
    case K_DURATION: o->duration = v; break;
    case K_TIMEOUT: o->timeout = v; break;
    case 'n': return parse_long("--requests", v, 1, 100000000, &o->requests);
    case K_WARMUP: return parse_long("--warmup", v, 0, 100000000, &o->warmup);
    case K_THREADS: return parse_long("--threads", v, 1, 4096, &o->threads);
    case K_MAX_TOKENS: return parse_long("--max-tokens", v, 1, 10000000, &o->max_tokens);
    case K_THINK_TOKENS: return parse_long("--think-tokens", v, 0, 10000000, &o->think_tokens);
    case K_SEED: return parse_long("--seed", v, 0, 0x7fffffffL, &o->seed);
    case K_NO_REPORT: o->no_report = 1; break;
    case 'q': o->quiet = 1; break;
    }
    return 0;
}

int sweep_parse_args(int argc, char **argv, sweep_opts *o)
{
    memset(o, 0, sizeof *o);
    o->requests = o->warmup = o->threads = o->max_tokens = o->think_tokens = o->seed = -1;
    return cli_parse(&sweep_cmd, argc, argv, on_opt, o);
}

int sweep_find_scenario(const char *name, char *out, size_t n)
{
    struct stat st;
    const char *forms[] = {"%s", LOADLAW_SOURCE_DIR "/%s", LOADLAW_SOURCE_DIR "/scenarios/%s"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(out, n, forms[i], name);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
            return 0;
        if (name[0] == '/')
            break;
    }
    snprintf(out, n, "%s", name);
    return -1;
}

/* ---- flags over the scenario ------------------------------------------------ */

/* Where to send requests, and what to call them. */
static int apply_target(const sweep_opts *o, scn_scenario *s)
{
    if ((o->url && scn_set_str(&s->url, o->url)) || (o->engine && scn_set_str(&s->engine_spec, o->engine)) ||
        (o->model && scn_set_str(&s->model, o->model)) || (o->output && scn_set_str(&s->output, o->output)))
        return cli_usage_error(&sweep_cmd, "out of memory");
    if (o->endpoint) {
        if (strcmp(o->endpoint, "chat") && strcmp(o->endpoint, "completions"))
            return cli_usage_error(&sweep_cmd, "--endpoint: expected chat or completions");
        s->endpoint = !strcmp(o->endpoint, "chat") ? SCN_ENDPOINT_CHAT : SCN_ENDPOINT_COMPLETIONS;
    }
    if (o->prompts) {
        size_t l = strlen(o->prompts);
        s->source = l > 6 && !strcmp(o->prompts + l - 6, ".jsonl") ? SCN_SOURCE_JSONL : SCN_SOURCE_SHAREGPT;
        if (scn_set_str(&s->prompts_path, o->prompts))
            return cli_usage_error(&sweep_cmd, "out of memory");
    }
    return 0;
}

/* Which levels: -c's list, or one open level with no cap for --rate alone. */
static int apply_levels(const sweep_opts *o, scn_scenario *s)
{
    int *c = NULL, rc = 0, zero = 0;
    size_t n = 0;
    if (o->conc) {
        if (ll_parse_int_list(o->conc, &c, &n) || n == 0) {
            free(c);
            return cli_usage_error(&sweep_cmd, "-c: expected a list like 1,2,4,8, got '%s'", o->conc);
        }
        for (size_t i = 0; i < n && rc == 0; i++)
            if (c[i] < 0 || c[i] > 1000000)
                rc = cli_usage_error(&sweep_cmd, "-c: %d out of range [0, 1000000]", c[i]);
        if (rc == 0 && scn_set_concurrency(s, c, n))
            rc = cli_usage_error(&sweep_cmd, "out of memory");
        free(c);
        return rc;
    }
    if (o->rate && scn_set_concurrency(s, &zero, 1))
        return cli_usage_error(&sweep_cmd, "out of memory");
    return 0;
}

/* The load of every level: counts, arrival rate and process, duration. */
static int apply_level_load(const sweep_opts *o, scn_scenario *s)
{
    double rate = 0, duration_s = 0;
    /* The floor keeps one arrival gap (1/rate s) within int64 ns. */
    if (o->rate && (ll_parse_double(o->rate, &rate) || !(rate >= 1e-6 && rate <= 1e7)))
        return cli_usage_error(&sweep_cmd, "--rate: expected requests/s in [1e-6, 1e7], got '%s'", o->rate);
    if (o->arrival && strcmp(o->arrival, "poisson") && strcmp(o->arrival, "constant"))
        return cli_usage_error(&sweep_cmd, "--arrival: expected poisson or constant");
    /* The scenario file's bound: the loadgen turns it into int64 ns. */
    if (o->duration && (ll_parse_duration_s(o->duration, &duration_s) || !(duration_s > 0) || duration_s > 1e7))
        return cli_usage_error(&sweep_cmd, "--duration: expected a duration like 30s (at most 1e7 s), got '%s'",
                               o->duration);
    for (size_t i = 0; i < s->n_levels; i++) {
        scn_level *l = &s->levels[i];
        if (o->requests > 0)
            l->n_requests = (int)o->requests;
        if (o->warmup >= 0)
            l->warmup = (int)o->warmup;
        if (o->rate)
            l->rate_per_s = rate;
        if (o->arrival)
            l->arrival = o->arrival[0] == 'p' ? SCN_ARRIVAL_POISSON : SCN_ARRIVAL_CONSTANT;
        if (o->duration)
            l->duration_s = duration_s;
    }
    return 0;
}

/* The shape of each request, and the client's threads. */
static int apply_request(const sweep_opts *o, scn_scenario *s)
{
    if (o->timeout) {
        double v;
        if (ll_parse_duration_s(o->timeout, &v) || !(v > 0) || v > 1e6)
            return cli_usage_error(&sweep_cmd, "--timeout: expected a duration (at most 1e6 s), got '%s'",
                                   o->timeout);
        s->timeout_s = v;
    }
    if (o->threads > 0)
        s->threads = (int)o->threads;
    if (o->max_tokens > 0)
        s->max_tokens = (int)o->max_tokens;
    if (o->think_tokens >= 0)
        s->think_tokens = (int)o->think_tokens;
    if (o->seed >= 0)
        s->seed = (uint64_t)o->seed;
    return 0;
}

int sweep_apply_flags(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    if ((rc = apply_target(o, s)) || (rc = apply_levels(o, s)) || (rc = apply_level_load(o, s)) ||
        (rc = apply_request(o, s)))
        return rc;
    return 0;
}
