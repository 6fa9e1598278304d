/* sweep_flags.c: `loadlaw sweep`'s flags laid over its scenario, in named
 * steps: the target, the levels (-c, --rate) and what shapes them (-n,
 * --duration), the prompts' length and tokenizer, the A/B of two --url,
 * then every flag that sets one scenario key (in the order given; their
 * values were checked as they were parsed), then the checks between them.
 * A bad value is one line and CLI_USAGE. The table and the parsing into
 * sweep_opts are sweep_opts.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "opts.h"
#include "sweep_opts.h"

/* ---- flags over the scenario ------------------------------------------------ */

/* --header 'K: V' (or K:V), appended to the scenario's headers. */
static int apply_headers(const sweep_opts *o, scn_scenario *s)
{
    for (size_t i = 0; i < o->n_headers; i++) {
        int rc = scn_add_header(s, o->headers[i]);
        if (rc == LL_EINVAL)
            return cli_usage_error(&sweep_cmd, "--header: expected 'Name: value' (a token name, no line breaks), "
                                   "got '%s'", o->headers[i]);
        if (rc)
            return cli_usage_error(&sweep_cmd, "out of memory");
    }
    return 0;
}

/* --url or --engine: one target. A target flag replaces the scenario's
 * target of the other kind: a url would win over an engine spec, which the
 * run line would still name. */
static int apply_url_engine(const sweep_opts *o, scn_scenario *s)
{
    if (o->url && o->engine)
        return cli_usage_error(&sweep_cmd, "--url and --engine name two targets (a server, the bundled engine): "
                                           "give one");
    if ((o->url && (scn_set_str(&s->engine_spec, NULL) || scn_set_str(&s->url, o->url))) ||
        (o->engine && (scn_set_str(&s->url, NULL) || scn_set_str(&s->engine_spec, o->engine))))
        return cli_usage_error(&sweep_cmd, "out of memory");
    return 0;
}

/* Where to send requests, and what to call them. */
static int apply_target(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    if ((rc = apply_url_engine(o, s)))
        return rc;
    if (o->model && scn_set_str(&s->model, o->model))
        return cli_usage_error(&sweep_cmd, "out of memory");
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

/* -n / --duration: one value for all levels, or one per level. */
static int per_level_list(const char *flag, const char *v, scn_per_level kind, size_t n_levels, double *out)
{
    char err[256];
    if (scn_parse_per_level(v, kind, n_levels, out, err, sizeof err))
        return cli_usage_error(&sweep_cmd, "%s: %s", flag, err);
    return 0;
}

/* The load of every level: counts, arrival rate, duration. */
static int apply_level_load(const sweep_opts *o, scn_scenario *s)
{
    double rate = 0;
    int rc = 0;
    /* The floor keeps one arrival gap (1/rate s) within int64 ns. */
    if (o->rate && cli_number(&sweep_cmd, "rate", o->rate, CLI_REAL, 1e-6, 1e7, "requests/s in [1e-6, 1e7]", &rate))
        return CLI_USAGE;
    double *req = calloc(s->n_levels, sizeof *req), *dur = calloc(s->n_levels, sizeof *dur);
    if (!req || !dur)
        rc = cli_usage_error(&sweep_cmd, "out of memory");
    if (!rc && o->requests)
        rc = per_level_list("--requests", o->requests, SCN_PER_LEVEL_REQUESTS, s->n_levels, req);
    if (!rc && o->duration)
        rc = per_level_list("--duration", o->duration, SCN_PER_LEVEL_DURATION, s->n_levels, dur);
    for (size_t i = 0; i < s->n_levels && !rc; i++) {
        scn_level *l = &s->levels[i];
        if (o->requests)
            l->n_requests = (int)req[i];
        if (o->rate)
            l->rate_per_s = rate;
        if (o->duration)
            l->duration_s = dur[i];
    }
    free(req);
    free(dur);
    return rc;
}

static int parse_length(const char *flag, const char *v, scn_dist *d)
{
    if (scn_parse_length(v, d))
        return cli_usage_error(&sweep_cmd, "%s: expected MEAN[,STDDEV] with MEAN in [1, 1e6], got '%s'", flag, v);
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
        scn_set_prompt_tokens(s, d);
    }
    if (o->prompt_words) {
        if ((rc = parse_length("--prompt-words", o->prompt_words, &s->words)))
            return rc;
        s->prompt_tokens_set = 0; /* the words given win over a scenario's (or remote defaults') tokens */
    }
    if (o->tokenizer) {
        if (!scn_is_file(o->tokenizer))
            return cli_usage_error(&sweep_cmd, "--tokenizer: no such file '%s' (a Hugging Face tokenizer.json)",
                                   o->tokenizer);
        if (scn_set_str(&s->tokenizer_path, o->tokenizer))
            return cli_usage_error(&sweep_cmd, "out of memory");
    }
    return 0;
}

/* Every flag that sets one scenario key, in the order given. */
static int apply_keyed(const sweep_opts *o, scn_scenario *s)
{
    char err[512];
    for (size_t i = 0; i < o->n_keyed; i++)
        if (scn_key_set(s, o->keyed[i].key, o->keyed[i].value, err, sizeof err))
            return cli_usage_error(&sweep_cmd, "--%s: %s", scn_key_flag(o->keyed[i].key), err);
    return 0;
}

/* The first flag given that shapes levels (NULL: none). */
static const char *level_flag_given(const sweep_opts *o)
{
    return o->conc ? "-c" : o->rate ? "--rate" : o->requests ? "-n" : o->duration ? "--duration"
         : sweep_keyed_flag(o, "arrival") ? "--arrival" : NULL;
}

/* What the flags and the scenario say together: the source addresses
 * (checked here: loadgen knows them), a trace's flags with a trace. */
static int check_together(const sweep_opts *o, const scn_scenario *s)
{
    const char *speed = sweep_keyed_flag(o, "trace-speed"), *window = sweep_keyed_flag(o, "trace-window");
    const char *level_flag = level_flag_given(o);
    char why[512];
    if (lg_source_addrs_check(s->source_addrs, why, sizeof why)) /* the flag's, or the scenario's */
        return cli_usage_error(&sweep_cmd, "%s: %s",
                               sweep_keyed_flag(o, "source-addrs") ? "--source-addrs" : "load.source_addrs", why);
    if ((speed || window) && !s->trace_path)
        return cli_usage_error(&sweep_cmd, "%s: needs --trace (or a scenario's load.trace)",
                               speed ? "--trace-speed" : "--trace-window");
    const char *prof = sweep_keyed_flag(o, "profile");
    size_t n_prof = 0;
    for (size_t i = 0; i < s->n_levels; i++)
        n_prof += s->levels[i].profile.enabled != 0;
    if (prof && n_prof == 0)
        return cli_usage_error(&sweep_cmd, "--profile %s: no level has that concurrency (-c names the levels)", prof);
    if (s->trace_path && level_flag)
        return cli_usage_error(&sweep_cmd, "%s with a trace: the trace's rows are the level (use --trace-window "
                               "and --trace-speed)", level_flag);
    return 0;
}

/* find (--find or a scenario's): the search places the levels, from one
 * closed level at C = 1 with the first level's options (warmup, duration;
 * requests for the ladder), over C or, with find.by "rate", over open-loop
 * arrival rates. What it cannot search over is refused. */
static int apply_find(const sweep_opts *o, scn_scenario *s)
{
    int one = 1;
    const char *why = o->conc ? "-c names levels; the search places its own"
                    : o->rate || s->levels[0].rate_per_s > 0 ? "the search places its own levels: for the "
                      "largest arrival rate, --find-by rate (find.by \"rate\") instead of a rate"
                    : s->trace_path ? "a trace is its own level"
                    : s->session_turns > 0 ? "it measures single requests, not sessions"
                    : s->ab.enabled ? "an A/B compares fixed levels (run --find on each side)" : NULL;
    for (size_t i = 0; i < s->n_levels && !why; i++)
        if (s->levels[i].profile.enabled)
            why = "a profiled level is left out of the model the search needs";
    const char *alone = sweep_keyed_flag(o, "find-by") ? "--find-by" : sweep_keyed_flag(o, "find-precision")
                      ? "--find-precision" : NULL;
    if (!s->find_objective)
        return alone ? cli_usage_error(&sweep_cmd, "%s: needs --find (or a scenario's find.objective)", alone) : 0;
    if (why)
        return cli_usage_error(&sweep_cmd, "--find: %s", why);
    if (scn_set_concurrency(s, &one, 1))
        return cli_usage_error(&sweep_cmd, "out of memory");
    s->levels[0].find_role = "ladder";
    return 0;
}

int sweep_apply_flags(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    if ((rc = apply_target(o, s)) || (rc = apply_levels(o, s)) || (rc = apply_level_load(o, s)) ||
        (rc = apply_prompts(o, s)) || (rc = sweep_apply_ab_flags(o, s)) || (rc = apply_keyed(o, s)))
        return rc;
    if ((rc = check_together(o, s)))
        return rc;
    return apply_find(o, s);
}
