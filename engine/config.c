/* config.c: engine defaults, the strings a config owns, the law parser and
 * the key=value spec parser that both `loadlaw serve` flags and `loadlaw
 * sweep --engine` go through. Each key of a spec is set by eng_config_set,
 * which reads the key table (config_keys.c).
 *
 * Strings: the config owns the strings stored through a key (a copy in
 * owned_str_, one slot per string field); eng_config_free releases them.
 * There is no process-wide pool: a config's strings live as long as it does.
 */
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "internal.h"

/* ---- string fields ------------------------------------------------------- */

static const size_t str_field_off[ENG_STR__COUNT] = {
    [ENG_STR_BIND_ADDR] = offsetof(eng_config, bind_addr),
    [ENG_STR_MODEL] = offsetof(eng_config, model),
    [ENG_STR_ATTN] = offsetof(eng_config, attn),
    [ENG_STR_PROFILE_DIR] = offsetof(eng_config, profile_dir),
    [ENG_STR_API_KEY] = offsetof(eng_config, api_key),
    [ENG_STR_CONTROL_KEY] = offsetof(eng_config, control_key),
    [ENG_STR_KV] = offsetof(eng_config, kv),
};

static const char *const str_default[ENG_STR__COUNT] = {
    [ENG_STR_BIND_ADDR] = "127.0.0.1",
    [ENG_STR_MODEL] = "loadlaw-synthetic",
    [ENG_STR_ATTN] = "tiled",
    [ENG_STR_PROFILE_DIR] = NULL, /* private: $TMPDIR/loadlaw-profile-<uid> (profile.c) */
    [ENG_STR_API_KEY] = NULL,     /* no key: open */
    [ENG_STR_CONTROL_KEY] = NULL, /* api_key's rule */
    [ENG_STR_KV] = "bf16",
};

_Static_assert(ENG_STR__COUNT == sizeof ((eng_config *)0)->owned_str_ / sizeof(char *),
               "one owned_str_ slot per string field");

static const char **str_field(eng_config *cfg, int slot)
{
    return (const char **)((char *)cfg + str_field_off[slot]);
}

int eng_config_own_str(eng_config *cfg, int slot, const char *value)
{
    char *d = strdup(value);
    if (!d)
        return LL_ENOMEM;
    free(cfg->owned_str_[slot]);
    cfg->owned_str_[slot] = d;
    *str_field(cfg, slot) = d;
    return 0;
}

void eng_config_default(eng_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int k = 0; k < ENG_STR__COUNT; k++)
        *str_field(cfg, k) = str_default[k];
    cfg->max_connections = 8192;
    cfg->max_body_bytes = 1u << 20;
    cfg->idle_timeout_s = 120;
    /* uvicorn (vLLM's server) keeps an idle connection 5 s: clients already
     * reconnect when a server lets one go */
    cfg->request_timeout_s = 10;
    cfg->max_connections_per_ip = 0; /* max_connections less a spare (server.c) */
    /* the scenarios' own bound on num_steps (scenario_load.c) */
    cfg->profile_max_steps_open = 100000;
    cfg->conn_memory_bytes = 8192;
    cfg->max_running = 256;
    cfg->max_waiting = 8192;
    cfg->prefill_budget_tok = 2048;
    cfg->max_tokens_limit = 32768;
    cfg->max_context_tok = 131072;
    cfg->backend = ENG_BACKEND_SYNTHETIC;
    cfg->law_a_ms = 52;
    cfg->law_b_ms = 30;
    cfg->time_scale = 1;
    cfg->seed = 1;
    cfg->heads = 64;
    cfg->topk = 2048;
    cfg->threads = 1;
    cfg->tp = 1;
    cfg->d_model = 2048;
    cfg->d_ff = 8192;
    cfg->vocab = 1024;
    cfg->capacity_tok = 4096;
    cfg->min_ctx_tok = -1; /* = topk */
    cfg->default_max_tokens = 256;
    cfg->prefix_cache_blocks = 65536;
    /* sizeof(eng_step) = 56 bytes a step: 56 MB at most, about 5.6 hours
     * of 20 ms steps */
    cfg->step_log_max = 1000000;
}

void eng_config_free(eng_config *cfg)
{
    for (int k = 0; k < ENG_STR__COUNT; k++) {
        if (!cfg->owned_str_[k])
            continue;
        const char **f = str_field(cfg, k);
        if (*f == cfg->owned_str_[k])
            *f = NULL;
        free(cfg->owned_str_[k]);
        cfg->owned_str_[k] = NULL;
    }
}

int eng_config_copy(eng_config *dst, const eng_config *src)
{
    eng_config c = *src;
    int rc = 0;
    memset(c.owned_str_, 0, sizeof c.owned_str_);
    for (int k = 0; k < ENG_STR__COUNT; k++) {
        const char *s = *str_field(&c, k);
        if (s)
            LL_TRY(eng_config_own_str(&c, k, s));
    }
    *dst = c;
    return 0;
fail:
    eng_config_free(&c);
    *dst = c;
    return rc;
}

void eng_config_fill_strings(eng_config *cfg)
{
    for (int k = 0; k < ENG_STR__COUNT; k++)
        if (!*str_field(cfg, k))
            *str_field(cfg, k) = str_default[k];
}

/* ---- the law ------------------------------------------------------------- */

static void skip_space(const char **s)
{
    while (isspace((unsigned char)**s))
        (*s)++;
}

/* The term a suffix letter names: 0 constant, 1 n, 2 c, 3 p. */
static int law_term(char c)
{
    switch (c) {
    case 'n': case 'N': return 1;
    case 'c': case 'C': return 2;
    case 'p': case 'P': return 3;
    default: return 0;
    }
}

static int law_unexpected(const char *law, const char *at, char *err, size_t errlen)
{
    ll_errf(err, errlen, "law \"%s\": unexpected \"%s\" (terms: A + Bn + Cc + Pp, ms)", law, at);
    return LL_EINVAL;
}

int eng_parse_law(const char *law, eng_config *cfg, char *err, size_t errlen)
{
    static const char *const term_name[4] = {"constant", "n", "c", "p"};
    double v[4] = {0, 0, 0, 0}; /* a, n, c, p */
    int seen[4] = {0, 0, 0, 0};
    const char *s = law;
    if (!law || !*law) {
        ll_errf(err, errlen, "empty law (expected e.g. \"52+30n\")");
        return LL_EINVAL;
    }
    for (;;) {
        skip_space(&s);
        char *end;
        double x = strtod(s, &end);
        /* the same bound as the a, b, c and p keys: 1e7 ms is hours per
         * step, and the synthetic backend's nanoseconds must not overflow */
        if (end == s || !isfinite(x) || x < 0 || x > ENG_LAW_TERM_MAX_MS) {
            ll_errf(err, errlen, "law \"%s\": expected a number in [0, %g] (ms) at \"%s\"", law,
                    ENG_LAW_TERM_MAX_MS, s);
            return LL_EINVAL;
        }
        s = end;
        skip_space(&s);
        int k = law_term(*s);
        if (k)
            s++;
        if (!k && *s != '\0' && *s != '+') /* "5x": an unknown term, not a second constant */
            return law_unexpected(law, s, err, errlen);
        if (seen[k]) {
            ll_errf(err, errlen, "law \"%s\": term '%s' given twice", law, term_name[k]);
            return LL_EINVAL;
        }
        seen[k] = 1;
        v[k] = x;
        skip_space(&s);
        if (*s == '\0')
            break;
        if (*s != '+')
            return law_unexpected(law, s, err, errlen);
        s++;
    }
    cfg->law_a_ms = v[0];
    cfg->law_b_ms = v[1];
    cfg->law_c_ms_per_ktok = v[2];
    cfg->law_p_ms_per_tok = v[3];
    return 0;
}


/* ---- the spec ------------------------------------------------------------ */

/* Split one "key = value" item in place (spaces around both trimmed).
 * LL_EINVAL without '='. */
static int split_item(char *item, char **key, char **value)
{
    char *eq = strchr(item, '=');
    if (!eq)
        return LL_EINVAL;
    *eq = '\0';
    for (char *e = eq - 1; e >= item && isspace((unsigned char)*e); e--)
        *e = '\0';
    char *v = eq + 1;
    while (isspace((unsigned char)*v))
        v++;
    *key = item;
    *value = v;
    return 0;
}

/* The keys whose value is a comma-separated list: in a spec, the items after
 * "buckets=1" that hold no '=' ("2", "4") continue its value. */
static int is_list_key(const char *key) { return strcmp(key, "buckets") == 0; }

/* A spec is split at commas; an item without '=' after a list key is glued
 * back to its value (the comma restored in place: strtok_r wrote a NUL
 * there), so "buckets=1,2,4,law=5+1n" sets buckets to "1,2,4". */
int eng_parse_spec(const char *spec, eng_config *cfg, char *err, size_t errlen)
{
    if (!spec)
        return 0;
    int rc = 0;
    char *copy = strdup(spec), *save = NULL, *key = NULL, *val = NULL;
    if (!copy) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *raw = item;
        while (isspace((unsigned char)*item))
            item++;
        if (!*item)
            continue;
        if (!strchr(item, '=') && key && is_list_key(key)) {
            /* between the value's end and this item: the NUL strtok_r wrote and
             * the commas of empty items it skipped ("1,,2", refused later) */
            for (char *q = val + strlen(val); q < raw; q++)
                *q = ',';
            continue;
        }
        if (key)
            LL_TRY(eng_config_set(cfg, key, val, err, errlen));
        if (split_item(item, &key, &val)) {
            ll_errf(err, errlen, "engine spec: \"%s\" is not key=value", item);
            rc = LL_EINVAL;
            goto fail;
        }
    }
    if (key)
        LL_TRY(eng_config_set(cfg, key, val, err, errlen));
fail:
    free(copy);
    return rc;
}
