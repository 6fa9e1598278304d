/* sweep_opts.c: `loadlaw sweep`'s options: the table (which is also its
 * --help) and parsing argv into sweep_opts, each value's own range checked
 * as it is read. The options that set one scenario key each are the key
 * table's (scenario_keys.h): a key's row gives its flag, help and check, so
 * they are named here only for their place in --help. sweep_flags.c lays
 * the options over the scenario. */
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
    K_URL = 256, K_ENGINE, K_MODEL, K_API_KEY, K_RATE, K_DURATION, K_PROMPTS, K_NO_REPORT, K_PROMPT_TOKENS,
    K_PROMPT_WORDS, K_TOKENIZER, K_HEADER, K_METRICS_URL, K_METRICS_INTERVAL, K_NO_METRICS, K_GPU, K_PROFILE_DIR,
    K_KEY = 512, /* K_KEY + i: row i of the built table, a scenario key's flag */
};

/* A row with a name and no help: the flag of a scenario key (scenario_keys.h),
 * its value's name and help the key's; letter: its short option, or 0. */
#define KEY(flag, letter) {flag, letter, NULL, NULL}

/* The options in the order --help lists them. A key's flag that this
 * layout does not name is listed at the end of its section's heading
 * (table_heading), so a key added to the table gets its flag here without
 * an edit. */
static const cli_opt layout[] = {
    {NULL, 0, NULL, "target:"},
    {"url", K_URL, "URL", "remote server, http:// or https:// (default: start the bundled engine "
                "in-process); paths go before its query (?api-version= is kept); twice: an A/B of "
                "two servers (A the baseline, then B) into RUN_DIR/a and RUN_DIR/b, then compared"},
    {"engine", K_ENGINE, "SPEC", "bundled engine settings, e.g. backend=synthetic,law=52+30n,time_scale=0.1"},
    {"model", K_MODEL, "NAME", "model to ask for (default: the bundled engine's name); with two --url: "
                "once for both, or twice (A's, then B's)"},
    KEY("endpoint", 0),
    KEY("endpoint-path", 0),
    {"header", K_HEADER, "'K: V'", "extra request header (repeatable; 'K:V' also accepted)"},
    {"api-key", K_API_KEY, "KEY", "Bearer token (default: $OPENAI_API_KEY); never written anywhere; with "
                "two --url: once for both, or twice (A's, then B's)"},
    {NULL, 0, NULL, "A/B (an \"ab\" scenario, or two --url):"},
    KEY("order", 0),
    KEY("repeat", 0),
    {NULL, 0, NULL, "load:"},
    {"concurrency", 'c', "L", "closed-loop levels, e.g. 1,2,4,8,16,32,64"},
    {"requests", 'n', "N[,N..]", "measured requests per level: one value for all, or one per level "
                "(default max(1.5*C, 8))"},
    KEY("warmup", 0),
    {"rate", K_RATE, "R", "open loop: R requests/s (alone: one level, no cap; with -c: "
                "one open level per C, C capping the requests in flight)"},
    KEY("arrival", 0),
    {"duration", K_DURATION, "S[,S..]", "end each level's issuing after S (30s, 2m): one for all, or one "
                "per level"},
    KEY("max-failed", 0),
    KEY("keep-going", 0),
    KEY("threads", 0),
    KEY("arrival-stamp", 0),
    KEY("source-addrs", 0),
    {NULL, 0, NULL, "request:"},
    KEY("max-tokens", 0),
    KEY("think-tokens", 0),
    KEY("timeout", 0),
    KEY("extra-body", 0),
    KEY("no-continuous-usage", 0),
    KEY("record-outputs", 0),
    KEY("greedy", 0),
    KEY("seed", 0),
    {"prompts", K_PROMPTS, "FILE", ".jsonl of {\"prompt\":..} or ShareGPT .json"},
    {"prompt-tokens", K_PROMPT_TOKENS, "MEAN[,SD]", "synthetic prompt length in tokens as the server counts "
                "the prompt, the request's head inside (fitted by --tokenizer, else by the server's /tokenize; "
                "without either, words = tokens/1.33); with --url and no scenario the default is 256"},
    {"prompt-words", K_PROMPT_WORDS, "MEAN[,SD]", "synthetic prompt length in words"},
    KEY("reuse-prompts", 0),
    {"tokenizer", K_TOKENIZER, "PATH", "Hugging Face tokenizer.json: exact prompt lengths and token counts "
                "where the server gives no usage"},
    KEY("shared-prefix", 0),
    {NULL, 0, NULL, "capacity search (docs/plan.md, \"Finding capacity\"):"},
    KEY("find", 0),
    KEY("find-budget", 0),
    KEY("find-time", 0),
    KEY("find-by", 0),
    KEY("find-precision", 0),
    {NULL, 0, NULL, "trace replay (docs/workloads.md):"},
    KEY("trace", 0),
    KEY("trace-speed", 0),
    KEY("trace-window", 0),
    {NULL, 0, NULL, "server metrics:"},
    {"metrics-url", K_METRICS_URL, "URL", "also scrape this Prometheus endpoint (repeatable; e.g. a DCGM "
                "exporter); the target's own /metrics is always scraped unless --no-metrics"},
    {"metrics-interval", K_METRICS_INTERVAL, "S", "seconds between scrapes (default 0.5)"},
    {"no-metrics", K_NO_METRICS, NULL, "scrape no /metrics endpoint"},
    {"gpu", K_GPU, "auto|on|off", "sample the local GPUs through NVML every --metrics-interval (default "
                "auto: when NVML loads, quiet when it does not unless the bundled engine runs on cuda; on: "
                "also say why it cannot)"},
    {NULL, 0, NULL, "profiling (docs/profiling.md):"},
    KEY("profile", 0),
    {"profile-dir", K_PROFILE_DIR, "DIR", "where the server writes its traces, seen from here (vLLM's "
                "torch_profiler_dir; the bundled engine's trace folder): the next level waits until they stop "
                "growing, and the profile record names them"},
    {NULL, 0, NULL, "output:"},
    KEY("output", 'o'),
    {"no-report", K_NO_REPORT, NULL, "skip the law and report at the end (summary.json is still written)"},
    {"quiet", 'q', NULL, "no progress line"},
    {0},
};

/* The table cli_parse reads: the layout with each key's row filled in
 * (build_table, once, before the first parse), and the key of each row. */
#define TABLE_MAX 128
static cli_opt table[TABLE_MAX];
static const scn_key *table_key[TABLE_MAX];

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
    table,
    "exit codes: 0 ok, 1 failure, 2 usage error, 3 ab gate missed (--find: no C meets the objective, not\n"
    "even C=1), 4 --find's budget ran out before the boundary was pinned, 130 interrupted (records kept)\n",
};

/* ---- the table ------------------------------------------------------------------ */

static const scn_key *key_by_flag(const char *flag)
{
    const scn_key *k;
    for (size_t i = 0; (k = scn_flag_key(i)); i++)
        if (strcmp(scn_key_flag(k), flag) == 0)
            return k;
    return NULL;
}

static int in_layout(const scn_key *k)
{
    for (const cli_opt *r = layout; r->name || r->help; r++)
        if (r->name && !r->help && strcmp(r->name, scn_key_flag(k)) == 0)
            return 1;
    return 0;
}

/* The heading a key's flag is listed under when the layout does not place
 * it: its section's. */
static const char *table_heading(const scn_key *k)
{
    static const char *const map[][2] = {{"target.", "target:"}, {"ab.", "A/B"},         {"load.", "load:"},
                                         {"levels", "load:"},    {"request.", "request:"}, {"prompts.", "request:"},
                                         {"find.", "capacity search"}};
    const char *path = scn_key_path(k);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strncmp(path, map[i][0], strlen(map[i][0])) == 0)
            return map[i][1];
    return "output:";
}

static void add_row(size_t *n, cli_opt row, const scn_key *k)
{
    if (*n + 1 >= TABLE_MAX) /* the last row stays {0} */
        return;
    table_key[*n] = k;
    table[(*n)++] = row;
}

static void add_key(size_t *n, const scn_key *k, int letter)
{
    if (k)
        add_row(n, (cli_opt){scn_key_flag(k), letter ? letter : K_KEY + (int)*n, scn_key_flag_arg(k),
                             scn_key_flag_help(k)}, k);
}

/* The flags of keys under heading h that the layout does not name. */
static void add_unplaced(size_t *n, const char *h)
{
    const scn_key *k;
    for (size_t i = 0; h && (k = scn_flag_key(i)); i++) {
        const char *kh = table_heading(k);
        if (!in_layout(k) && strncmp(h, kh, strlen(kh)) == 0)
            add_key(n, k, 0);
    }
}

static void build_table(void)
{
    const char *heading = NULL;
    size_t n = 0;
    if (table[0].help)
        return;
    for (const cli_opt *r = layout;; r++) {
        if (!r->name) { /* a heading or the end closes the heading before it */
            add_unplaced(&n, heading);
            if (!r->help)
                break;
            heading = r->help;
        }
        if (r->name && !r->help)
            add_key(&n, key_by_flag(r->name), r->key);
        else
            add_row(&n, *r, NULL);
    }
}

/* ---- parsing ---------------------------------------------------------------------- */

/* A scenario key's flag: its value checked now (before the scenario is
 * read) as the key takes it, and kept for sweep_apply_flags. */
static int on_key(sweep_opts *o, const cli_opt *opt, const scn_key *k, const char *v)
{
    char err[512];
    if (scn_key_check(k, v, err, sizeof err))
        return cli_usage_error(&sweep_cmd, "--%s: %s", opt->name, err);
    if (o->n_keyed == SWEEP_MAX_KEYED)
        return cli_usage_error(&sweep_cmd, "--%s: at most %d options that set scenario keys", opt->name,
                               SWEEP_MAX_KEYED);
    o->keyed[o->n_keyed++] = (sweep_keyed){k, v};
    return 0;
}

const char *sweep_keyed_flag(const sweep_opts *o, const char *flag)
{
    const char *v = NULL;
    for (size_t i = 0; i < o->n_keyed; i++)
        if (strcmp(scn_key_flag(o->keyed[i].key), flag) == 0)
            v = o->keyed[i].value ? o->keyed[i].value : "";
    return v;
}

/* --url, --model, --api-key: A's, then B's. */
static int on_target(sweep_opts *o, int key, const char *v)
{
    char why[1024];
    switch (key) {
    case K_URL:
        if (o->n_urls == 2)
            return cli_usage_error(&sweep_cmd, "--url: at most two (A, the baseline, then B)");
        if (ll_url_check(v, why, sizeof why))
            return cli_usage_error(&sweep_cmd, "--url %s", why);
        o->urls[o->n_urls++] = v;
        o->url = o->urls[0];
        break;
    case K_MODEL:
        if (o->n_models == 2)
            return cli_usage_error(&sweep_cmd, "--model: at most two (A's, then B's)");
        o->models[o->n_models++] = v;
        o->model = o->models[0];
        break;
    case K_API_KEY:
        /* the key itself is never echoed, here or anywhere */
        if (o->n_api_keys == 2)
            return cli_usage_error(&sweep_cmd, "--api-key: at most two (A's, then B's)");
        o->api_keys[o->n_api_keys++] = v;
        o->api_key = o->api_keys[0];
        break;
    }
    return 0;
}

/* --metrics-url, --metrics-interval, --no-metrics, --gpu. */
static int on_metrics(sweep_opts *o, int key, const char *v)
{
    char why[1024];
    switch (key) {
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
    case K_METRICS_INTERVAL:
        /* below 50 ms the scrapes would load the server more than they tell */
        return cli_number(&sweep_cmd, "metrics-interval", v, CLI_DURATION, 0.05, 3600, "seconds in [0.05, 3600]",
                          &o->metrics_interval_s);
    }
    return 0;
}

/* complexity: one switch over the options that are not scenario keys, a line each. */
static int on_opt(const cli_opt *opt, const char *v, void *ctx)
{
    sweep_opts *o = ctx;
    if (!opt) {
        if (o->scenario)
            return cli_usage_error(&sweep_cmd, "one scenario only ('%s' and '%s')", o->scenario, v);
        o->scenario = v;
        return 0;
    }
    if (table_key[opt - table])
        return on_key(o, opt, table_key[opt - table], v);
    switch (opt->key) {
    case K_URL:
    case K_MODEL:
    case K_API_KEY: return on_target(o, opt->key, v);
    case K_METRICS_URL:
    case K_METRICS_INTERVAL:
    case K_NO_METRICS:
    case K_GPU: return on_metrics(o, opt->key, v);
    case K_ENGINE: o->engine = v; break;
    case K_PROMPTS: o->prompts = v; break;
    case K_PROFILE_DIR: o->profile_dir = v; break;
    case 'c': o->conc = v; break;
    case K_RATE: o->rate = v; break;
    case K_DURATION: o->duration = v; break;
    case 'n': o->requests = v; break;
    case K_PROMPT_TOKENS: o->prompt_tokens = v; break;
    case K_PROMPT_WORDS: o->prompt_words = v; break;
    case K_TOKENIZER: o->tokenizer = v; break;
    case K_HEADER:
        if (o->n_headers == SWEEP_MAX_HEADERS)
            return cli_usage_error(&sweep_cmd, "--header: at most %d", SWEEP_MAX_HEADERS);
        o->headers[o->n_headers++] = v;
        break;
    case K_NO_REPORT: o->no_report = 1; break;
    case 'q': o->quiet = 1; break;
    }
    return 0;
}

int sweep_parse_args(int argc, char **argv, sweep_opts *o)
{
    memset(o, 0, sizeof *o);
    build_table();
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
