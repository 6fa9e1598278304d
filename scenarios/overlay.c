/* overlay.c: what a command line lays over a scenario, in the scenario's own
 * terms (scenario.h "Values from a command line"): a scenario file found by
 * name, the remote-benchmark defaults a scenario-less run starts from, and
 * the short textual forms a flag gives (a length MEAN[,STDDEV], one value
 * or one per level, a window START:END, shared prefixes GROUPS:TOKENS).
 * Each parser returns 0, or -1 and leaves the scenario as it was; the
 * caller names the flag in its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scenario.h"
#include "scn_internal.h"
#include "scn_keys.h"

#ifndef LOADLAW_SOURCE_DIR
#define LOADLAW_SOURCE_DIR "."
#endif
#ifndef LOADLAW_DATADIR
#define LOADLAW_DATADIR "/usr/local/share/loadlaw"
#endif

int scn_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int scn_find_file(const char *name, char *out, size_t n)
{
    const char *dd = getenv("LOADLAW_DATADIR");
    const char *bare = strncmp(name, "scenarios/", 10) == 0 ? name + 10 : name;
    if (!dd || !dd[0])
        dd = LOADLAW_DATADIR;
    snprintf(out, n, "%s", name);
    if (scn_is_file(out) || name[0] == '/')
        return scn_is_file(out) ? 0 : -1;
    /* A build-tree binary: the scenarios of the tree it was built from. */
    const char *roots[] = {LOADLAW_SOURCE_DIR, LOADLAW_SOURCE_DIR "/scenarios", dd, NULL};
    for (size_t i = 0; roots[i]; i++) {
        snprintf(out, n, "%s/%s", roots[i], name);
        if (scn_is_file(out))
            return 0;
    }
    /* An installed binary: DATADIR/scenarios holds the files of scenarios/. */
    snprintf(out, n, "%s/scenarios/%s", dd, bare);
    if (scn_is_file(out))
        return 0;
    snprintf(out, n, "%s", name);
    return -1;
}

/* What AIPerf, GuideLLM and bench_serving send by default, nothing the
 * bundled engine alone knows: the key table's remote defaults
 * (scenario_keys.c, each row's rdef). */
int scn_remote_defaults(scn_scenario *s)
{
    return scn_keys_defaults(s, 1);
}

int scn_load_base(const char *name, int remote, scn_scenario **out, char *err, size_t errlen)
{
    char path[4096];
    int rc;
    *out = NULL;
    if (!name && remote) {
        if ((rc = scn_new(out)) || (rc = scn_remote_defaults(*out)))
            ll_errf(err, errlen, "%s", ll_strerror(rc));
        return rc;
    }
    scn_find_file(name ? name : "scenarios/default.json", path, sizeof path);
    if ((rc = scn_load_file(path, out, err, errlen)))
        return rc;
    if ((rc = scn_set_str(&(*out)->defaults, name ? "file" : "bundled")))
        ll_errf(err, errlen, "out of memory");
    return rc;
}

int scn_parse_length(const char *v, scn_dist *d)
{
    double mean = 0, sd = 0;
    char a[64], *comma;
    if (strlen(v) >= sizeof a)
        return -1;
    snprintf(a, sizeof a, "%s", v);
    if ((comma = strchr(a, ',')))
        *comma = 0;
    if (ll_parse_double(a, &mean) || !(mean >= 1 && mean <= 1e6) ||
        (comma && (ll_parse_double(comma + 1, &sd) || !(sd >= 0 && sd <= 1e6))))
        return -1;
    if (sd > 0)
        *d = (scn_dist){.kind = SCN_DIST_NORMAL, .mean = mean, .stddev = sd,
                        .min = mean - 3 * sd > 1 ? mean - 3 * sd : 1, .max = mean + 3 * sd};
    else
        *d = (scn_dist){.kind = SCN_DIST_FIXED, .value = mean};
    return 0;
}

void scn_set_prompt_tokens(scn_scenario *s, scn_dist d)
{
    s->prompt_tokens = d;
    s->prompt_tokens_set = 1;
    /* The word form of the same length, for a prompt builder without a
     * tokenizer (and the run line). */
    s->words = d;
    s->words.value /= SCN_TOKENS_PER_WORD;
    s->words.mean /= SCN_TOKENS_PER_WORD;
    s->words.stddev /= SCN_TOKENS_PER_WORD;
    s->words.min = d.min > 0 ? (d.min / SCN_TOKENS_PER_WORD > 1 ? d.min / SCN_TOKENS_PER_WORD : 1) : 0;
    s->words.max /= SCN_TOKENS_PER_WORD;
}

static int one_value(scn_per_level kind, const char *tok, double *out)
{
    uint64_t x;
    if (kind == SCN_PER_LEVEL_REQUESTS) {
        if (ll_parse_count(tok, &x) || x < 1 || x > 100000000)
            return -1;
        *out = (double)x;
        return 0;
    }
    /* A duration: the loadgen turns it into int64 ns. */
    return ll_parse_duration_s(tok, out) || !(*out > 0) || *out > 1e7 ? -1 : 0;
}

int scn_parse_per_level(const char *v, scn_per_level kind, size_t n_levels, double *out, char *err, size_t errlen)
{
    char tok[64];
    size_t n = 0;
    for (const char *p = v;; n++) {
        size_t l = strcspn(p, ",");
        if (l == 0 || l >= sizeof tok) {
            ll_errf(err, errlen, "expected %s, or a list with one per level, got '%s'",
                    SCN_PER_LEVEL_WHAT(kind), v);
            return -1;
        }
        memcpy(tok, p, l);
        tok[l] = 0;
        if (n < n_levels && one_value(kind, tok, &out[n])) {
            ll_errf(err, errlen, "expected %s, got '%s'", SCN_PER_LEVEL_WHAT(kind), tok);
            return -1;
        }
        if (!p[l])
            break;
        p += l + 1;
    }
    n++;
    if (n != 1 && n != n_levels) {
        ll_errf(err, errlen, "%zu values for %zu levels (give one, or one per level)", n, n_levels);
        return -1;
    }
    for (size_t i = n; i < n_levels; i++)
        out[i] = out[0];
    return 0;
}

int scn_parse_window(const char *v, double *a, double *b)
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

int scn_parse_shared_prefix(const char *v, scn_scenario *s)
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
        return -1;
    s->prefix_groups = (int)g;
    s->prefix_tokens = (int)p;
    return 0;
}
