/* sweep_flags.c: `loadlaw sweep`'s flags laid over its scenario: the
 * scenario a sweep starts from (a file found by name, or the
 * remote-benchmark defaults), then the flags in named steps (target,
 * levels, per-level load, request shape, prompts), each value checked as
 * it is laid (a bad one is one line and CLI_USAGE). The table and the
 * parsing into sweep_opts are sweep_opts.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common.h"
#include "opts.h"
#include "sweep_opts.h"

#ifndef LOADLAW_SOURCE_DIR
#define LOADLAW_SOURCE_DIR "."
#endif
#ifndef LOADLAW_DATADIR
#define LOADLAW_DATADIR "/usr/local/share/loadlaw"
#endif

/* Synthetic prompts without a tokenizer: words ~ tokens / 1.33 (English
 * text runs ~0.75 words per token with the common BPE vocabularies). */
#define TOKENS_PER_WORD 1.33

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int sweep_find_scenario(const char *name, char *out, size_t n)
{
    const char *dd = getenv("LOADLAW_DATADIR");
    const char *bare = strncmp(name, "scenarios/", 10) == 0 ? name + 10 : name;
    if (!dd || !dd[0])
        dd = LOADLAW_DATADIR;
    snprintf(out, n, "%s", name);
    if (is_file(out) || name[0] == '/')
        return is_file(out) ? 0 : -1;
    /* A build-tree binary: the scenarios of the tree it was built from. */
    const char *roots[] = {LOADLAW_SOURCE_DIR, LOADLAW_SOURCE_DIR "/scenarios", dd, NULL};
    for (size_t i = 0; roots[i]; i++) {
        snprintf(out, n, "%s/%s", roots[i], name);
        if (is_file(out))
            return 0;
    }
    /* An installed binary: DATADIR/scenarios holds the files of scenarios/. */
    snprintf(out, n, "%s/scenarios/%s", dd, bare);
    if (is_file(out))
        return 0;
    snprintf(out, n, "%s", name);
    return -1;
}

/* Remote-benchmark defaults (--url, no scenario): what AIPerf, GuideLLM and
 * bench_serving send by default, nothing the bundled engine alone knows. */
static int remote_defaults(scn_scenario *s)
{
    static const int levels[] = {1, 2, 4, 8, 16, 32, 64};
    s->think_tokens = -1; /* loadlaw's engine extension: a strict server rejects it */
    s->ignore_eos = 0;    /* vLLM/SGLang extension; OpenAI itself rejects it */
    s->max_tokens = 256;
    s->timeout_s = 600;
    s->drain_s = 30;
    s->source = SCN_SOURCE_SYNTHETIC;
    s->prompt_tokens = (scn_dist){.kind = SCN_DIST_FIXED, .value = 256};
    s->prompt_tokens_set = 1;
    s->words = (scn_dist){.kind = SCN_DIST_FIXED, .value = 192}; /* 256 / 1.33 */
    if (scn_set_str(&s->name, "remote") || scn_set_str(&s->defaults, "remote"))
        return LL_ENOMEM;
    return scn_set_concurrency(s, levels, sizeof levels / sizeof levels[0]);
}

int sweep_base_scenario(const sweep_opts *o, scn_scenario **out)
{
    char err[1024] = "", spath[4096];
    int rc;
    *out = NULL;
    if (!o->scenario && o->url) {
        if ((rc = scn_new(out)) || (rc = remote_defaults(*out))) {
            fprintf(stderr, "loadlaw sweep: %s\n", ll_strerror(rc));
            return CLI_FAIL;
        }
        return CLI_OK;
    }
    sweep_find_scenario(o->scenario ? o->scenario : "scenarios/default.json", spath, sizeof spath);
    if ((rc = scn_load_file(spath, out, err, sizeof err))) {
        fprintf(stderr, "loadlaw sweep: %s\n", err);
        return rc == LL_EIO ? CLI_FAIL : CLI_USAGE;
    }
    if (scn_set_str(&(*out)->defaults, o->scenario ? "file" : "bundled")) {
        fprintf(stderr, "loadlaw sweep: out of memory\n");
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* ---- flags over the scenario ------------------------------------------------ */

/* --header 'K: V' (or K:V), appended to the scenario's headers. */
static int apply_headers(const sweep_opts *o, scn_scenario *s)
{
    for (size_t i = 0; i < o->n_headers; i++) {
        const char *h = o->headers[i], *colon = strchr(h, ':'), *v;
        size_t nl = colon ? (size_t)(colon - h) : 0;
        if (!colon || nl == 0 || nl > 200 || strcspn(h, " \t") < nl || strpbrk(h, "\r\n"))
            return cli_usage_error(&sweep_cmd, "--header: expected 'Name: value' (no line breaks), got '%s'", h);
        for (v = colon + 1; *v == ' ' || *v == '\t'; v++) {
        }
        /* One form on the wire and in the run line: "Name: value". */
        size_t len = nl + 2 + strlen(v) + 1;
        char *line = malloc(len), **n = realloc(s->headers, (s->n_headers + 1) * sizeof *n);
        if (n)
            s->headers = n;
        if (!line || !n) {
            free(line);
            return cli_usage_error(&sweep_cmd, "out of memory");
        }
        snprintf(line, len, "%.*s: %s", (int)nl, h, v);
        s->headers[s->n_headers++] = line;
    }
    return 0;
}

/* Where to send requests, and what to call them. */
static int apply_target(const sweep_opts *o, scn_scenario *s)
{
    if ((o->url && scn_set_str(&s->url, o->url)) || (o->engine && scn_set_str(&s->engine_spec, o->engine)) ||
        (o->model && scn_set_str(&s->model, o->model)) || (o->output && scn_set_str(&s->output, o->output)))
        return cli_usage_error(&sweep_cmd, "out of memory");
    if (o->endpoint && scn_endpoint_parse(o->endpoint, &s->endpoint))
        return cli_usage_error(&sweep_cmd, "--endpoint: expected chat, completions, responses or generate, got '%s'",
                               o->endpoint);
    if (o->endpoint_path) {
        if (o->endpoint_path[0] != '/' || strpbrk(o->endpoint_path, " \t\r\n"))
            return cli_usage_error(&sweep_cmd, "--endpoint-path: expected a path starting with '/', got '%s'",
                                   o->endpoint_path);
        if (scn_set_str(&s->endpoint_path, o->endpoint_path))
            return cli_usage_error(&sweep_cmd, "out of memory");
    }
    int rc;
    if ((rc = apply_headers(o, s)))
        return rc;
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

/* "a,b,c" -> values[], one per level: one value for all, or exactly one
 * per level. parse: 0 for a good value. */
typedef int parse_one_fn(const char *tok, double *out);

static int parse_requests(const char *tok, double *out)
{
    uint64_t x;
    if (ll_parse_count(tok, &x) || x < 1 || x > 100000000)
        return -1;
    *out = (double)x;
    return 0;
}

/* The scenario file's bound: the loadgen turns it into int64 ns. */
static int parse_duration(const char *tok, double *out)
{
    return ll_parse_duration_s(tok, out) || !(*out > 0) || *out > 1e7 ? -1 : 0;
}

static int per_level_list(const char *flag, const char *v, const char *what, parse_one_fn *parse, size_t n_levels,
                          double *out)
{
    char tok[64];
    size_t n = 0;
    for (const char *p = v;; n++) {
        size_t l = strcspn(p, ",");
        if (l == 0 || l >= sizeof tok)
            return cli_usage_error(&sweep_cmd, "%s: expected %s, or a list with one per level, got '%s'", flag,
                                   what, v);
        memcpy(tok, p, l);
        tok[l] = 0;
        if (n < n_levels && parse(tok, &out[n]))
            return cli_usage_error(&sweep_cmd, "%s: expected %s, got '%s'", flag, what, tok);
        if (!p[l])
            break;
        p += l + 1;
    }
    n++;
    if (n != 1 && n != n_levels)
        return cli_usage_error(&sweep_cmd, "%s: %zu values for %zu levels (give one, or one per level)", flag, n,
                               n_levels);
    for (size_t i = n; i < n_levels; i++)
        out[i] = out[0];
    return 0;
}

/* The load of every level: counts, arrival rate and process, duration. */
static int apply_level_load(const sweep_opts *o, scn_scenario *s)
{
    double rate = 0;
    int rc = 0;
    /* The floor keeps one arrival gap (1/rate s) within int64 ns. */
    if (o->rate && (ll_parse_double(o->rate, &rate) || !(rate >= 1e-6 && rate <= 1e7)))
        return cli_usage_error(&sweep_cmd, "--rate: expected requests/s in [1e-6, 1e7], got '%s'", o->rate);
    if (o->arrival && strcmp(o->arrival, "poisson") && strcmp(o->arrival, "constant"))
        return cli_usage_error(&sweep_cmd, "--arrival: expected poisson or constant");
    if (o->max_failed) {
        double f;
        if (ll_parse_double(o->max_failed, &f) || !(f >= 0 && f <= 1))
            return cli_usage_error(&sweep_cmd, "--max-failed: expected a fraction in [0, 1], got '%s'",
                                   o->max_failed);
        s->max_failed = f;
    }
    if (o->keep_going)
        s->keep_going = 1;
    double *req = calloc(s->n_levels, sizeof *req), *dur = calloc(s->n_levels, sizeof *dur);
    if (!req || !dur)
        rc = cli_usage_error(&sweep_cmd, "out of memory");
    if (!rc && o->requests)
        rc = per_level_list("--requests", o->requests, "an integer in [1, 100000000]", parse_requests, s->n_levels,
                            req);
    if (!rc && o->duration)
        rc = per_level_list("--duration", o->duration, "a duration like 30s (at most 1e7 s)", parse_duration,
                            s->n_levels, dur);
    for (size_t i = 0; i < s->n_levels && !rc; i++) {
        scn_level *l = &s->levels[i];
        if (o->requests)
            l->n_requests = (int)req[i];
        if (o->warmup >= 0)
            l->warmup = (int)o->warmup;
        if (o->rate)
            l->rate_per_s = rate;
        if (o->arrival)
            l->arrival = o->arrival[0] == 'p' ? SCN_ARRIVAL_POISSON : SCN_ARRIVAL_CONSTANT;
        if (o->duration)
            l->duration_s = dur[i];
    }
    free(req);
    free(dur);
    return rc;
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
    if (o->arrival_stamp)
        s->arrival_stamp = strcmp(o->arrival_stamp, "user") == 0 ? SCN_STAMP_USER : SCN_STAMP_KERNEL;
    if (o->source_addrs && scn_set_str(&s->source_addrs, o->source_addrs))
        return cli_usage_error(&sweep_cmd, "out of memory");
    char why[512];
    if (lg_source_addrs_check(s->source_addrs, why, sizeof why)) /* the flag's, or the scenario's */
        return cli_usage_error(&sweep_cmd, "%s: %s", o->source_addrs ? "--source-addrs" : "load.source_addrs",
                               why);
    if (o->max_tokens > 0)
        s->max_tokens = (int)o->max_tokens;
    if (o->think_tokens >= 0)
        s->think_tokens = (int)o->think_tokens;
    if (o->seed >= 0)
        s->seed = (uint64_t)o->seed;
    if (o->no_continuous_usage)
        s->continuous_usage = 0;
    if (o->extra_body) {
        const char *end = NULL;
        cJSON *eb = cJSON_ParseWithOpts(o->extra_body, &end, 1);
        if (!cJSON_IsObject(eb)) {
            cJSON_Delete(eb);
            return cli_usage_error(&sweep_cmd, "--extra-body: expected a JSON object like '{\"temperature\":0}'");
        }
        cJSON_Delete(s->extra_body);
        s->extra_body = eb;
    }
    return 0;
}

/* "MEAN[,STDDEV]" -> a fixed or normal length distribution (clamped to
 * [max(1, mean - 3 sd), mean + 3 sd] so a draw is never empty or huge). */
static int parse_length(const char *flag, const char *v, scn_dist *d)
{
    double mean = 0, sd = 0;
    char a[64], *comma;
    snprintf(a, sizeof a, "%s", v);
    if ((comma = strchr(a, ',')))
        *comma = 0;
    if (strlen(v) >= sizeof a || ll_parse_double(a, &mean) || !(mean >= 1 && mean <= 1e6) ||
        (comma && (ll_parse_double(comma + 1, &sd) || !(sd >= 0 && sd <= 1e6))))
        return cli_usage_error(&sweep_cmd, "%s: expected MEAN[,STDDEV] with MEAN in [1, 1e6], got '%s'", flag, v);
    if (sd > 0)
        *d = (scn_dist){.kind = SCN_DIST_NORMAL, .mean = mean, .stddev = sd,
                        .min = mean - 3 * sd > 1 ? mean - 3 * sd : 1, .max = mean + 3 * sd};
    else
        *d = (scn_dist){.kind = SCN_DIST_FIXED, .value = mean};
    return 0;
}

/* Synthetic prompt length (tokens or words) and the tokenizer. */
static int apply_prompts(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    if (o->prompt_tokens && o->prompt_words)
        return cli_usage_error(&sweep_cmd, "--prompt-tokens and --prompt-words: give one or the other");
    if (o->prompt_tokens) {
        scn_dist d;
        if ((rc = parse_length("--prompt-tokens", o->prompt_tokens, &d)))
            return rc;
        s->prompt_tokens = d;
        s->prompt_tokens_set = 1;
        /* The word form of the same length, for a prompt builder without a
         * tokenizer (and the run line): tokens / 1.33. */
        s->words = d;
        s->words.value /= TOKENS_PER_WORD;
        s->words.mean /= TOKENS_PER_WORD;
        s->words.stddev /= TOKENS_PER_WORD;
        s->words.min = d.min > 0 ? (d.min / TOKENS_PER_WORD > 1 ? d.min / TOKENS_PER_WORD : 1) : 0;
        s->words.max /= TOKENS_PER_WORD;
    }
    if (o->prompt_words) {
        if ((rc = parse_length("--prompt-words", o->prompt_words, &s->words)))
            return rc;
        s->prompt_tokens_set = 0; /* the words given win over a scenario's (or remote defaults') tokens */
    }
    if (o->tokenizer) {
        if (!is_file(o->tokenizer))
            return cli_usage_error(&sweep_cmd, "--tokenizer: no such file '%s' (a Hugging Face tokenizer.json)",
                                   o->tokenizer);
        if (scn_set_str(&s->tokenizer_path, o->tokenizer))
            return cli_usage_error(&sweep_cmd, "out of memory");
    }
    if (o->reuse_prompts)
        s->prompts_reuse = 1;
    if (o->record_outputs)
        s->record_outputs = 1;
    if (o->greedy)
        s->greedy = 1;
    return 0;
}

/* "A:B" as two numbers (B may be empty: 0). */
static int parse_window(const char *v, double *a, double *b)
{
    char *end;
    *a = strtod(v, &end);
    if (end == v || *end != ':' || !(*a >= 0 && *a < 1e9))
        return -1;
    const char *q = end + 1;
    *b = 0;
    if (!*q)
        return 0;
    *b = strtod(q, &end);
    return end == q || *end || !(*b == 0 || (*b > *a && *b < 1e9)) ? -1 : 0;
}

/* --shared-prefix G:P. */
static int apply_shared_prefix(const char *v, scn_scenario *s)
{
    char *end;
    long g = strtol(v, &end, 10), p = 0;
    if (end != v && *end == ':') {
        const char *q = end + 1;
        p = strtol(q, &end, 10);
        if (end == q || *end)
            p = 0;
    }
    if (!(g >= 1 && g <= 1000000 && p >= 1 && p <= 10000000))
        return cli_usage_error(&sweep_cmd, "--shared-prefix: expected GROUPS:TOKENS like 4:512, got '%s'", v);
    s->prefix_groups = (int)g;
    s->prefix_tokens = (int)p;
    return 0;
}

/* The first flag given that shapes levels (NULL: none). */
static const char *level_flag_given(const sweep_opts *o)
{
    return o->conc ? "-c" : o->rate ? "--rate" : o->requests ? "-n" : o->duration ? "--duration"
         : o->arrival ? "--arrival" : NULL;
}

/* The workload's shape: a trace to replay (which makes the one level) and
 * shared prefixes. */
static int apply_workload(const sweep_opts *o, scn_scenario *s)
{
    double x, a, b;
    if (o->shared_prefix && apply_shared_prefix(o->shared_prefix, s))
        return CLI_USAGE;
    if ((o->trace_speed || o->trace_window) && !o->trace && !s->trace_path)
        return cli_usage_error(&sweep_cmd, "%s: needs --trace (or a scenario's load.trace)",
                               o->trace_speed ? "--trace-speed" : "--trace-window");
    if (o->trace && scn_set_str(&s->trace_path, o->trace))
        return cli_usage_error(&sweep_cmd, "out of memory");
    if (o->trace_speed) {
        if (ll_parse_double(o->trace_speed, &x) || !(x >= 1e-3 && x <= 1e6))
            return cli_usage_error(&sweep_cmd, "--trace-speed: expected a factor in [0.001, 1e6], got '%s'",
                                   o->trace_speed);
        s->trace_speed = x;
    }
    if (o->trace_window) {
        if (parse_window(o->trace_window, &a, &b))
            return cli_usage_error(&sweep_cmd, "--trace-window: expected START:END seconds (START < END, END "
                                   "empty for the end), got '%s'", o->trace_window);
        s->trace_start_s = a;
        s->trace_end_s = b;
    }
    const char *level_flag = level_flag_given(o);
    if (s->trace_path && level_flag)
        return cli_usage_error(&sweep_cmd, "%s with a trace: the trace's rows are the level (use --trace-window "
                               "and --trace-speed)", level_flag);
    return 0;
}

int sweep_apply_flags(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    if ((rc = apply_workload(o, s)))
        return rc;
    if ((rc = apply_target(o, s)) || (rc = apply_levels(o, s)) || (rc = apply_level_load(o, s)) ||
        (rc = apply_request(o, s)) || (rc = apply_prompts(o, s)) || (rc = sweep_apply_ab_flags(o, s)))
        return rc;
    return 0;
}
