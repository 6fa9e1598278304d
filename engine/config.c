/* config.c: engine defaults, the law parser and the key=value spec parser that
 * both `loadlaw serve` flags and `loadlaw sweep --engine` go through. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"

void eng_config_default(eng_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->bind_addr = "127.0.0.1";
    cfg->model = "loadlaw-synthetic";
    cfg->max_connections = 8192;
    cfg->max_body_bytes = 1u << 20;
    cfg->idle_timeout_s = 120;
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
    cfg->attn = "tiled";
    cfg->heads = 64;
    cfg->topk = 2048;
    cfg->threads = 1;
    cfg->d_model = 2048;
    cfg->d_ff = 8192;
    cfg->vocab = 1024;
    cfg->capacity_tok = 4096;
    cfg->min_ctx_tok = -1; /* = topk */
    cfg->default_max_tokens = 256;
    cfg->profile_dir = "/tmp";
}

/* Spec strings are short-lived (argv, a scenario file), while eng_config holds
 * plain pointers: values are interned for the life of the process. The pool is
 * bounded by the distinct values a process ever sets, which is a handful. */
static const char *intern(const char *s)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char **pool;
    static size_t n;
    const char *out = NULL;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n && !out; i++)
        if (strcmp(pool[i], s) == 0)
            out = pool[i];
    if (!out) {
        char **np = realloc(pool, (n + 1) * sizeof *np);
        char *d = strdup(s);
        if (np)
            pool = np;
        if (np && d) {
            pool[n++] = d;
            out = d;
        } else {
            free(d);
        }
    }
    pthread_mutex_unlock(&mu);
    return out;
}

int eng_parse_law(const char *law, eng_config *cfg, char *err, size_t errlen)
{
    double v[4] = {0, 0, 0, 0}; /* a, n, c, p */
    int seen[4] = {0, 0, 0, 0};
    const char *s = law;
    if (!law || !*law) {
        ll_errf(err, errlen, "empty law (expected e.g. \"52+30n\")");
        return LL_EINVAL;
    }
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        char *end;
        double x = strtod(s, &end);
        if (end == s || !isfinite(x) || x < 0) {
            ll_errf(err, errlen, "law \"%s\": expected a non-negative number at \"%s\"", law, s);
            return LL_EINVAL;
        }
        s = end;
        while (isspace((unsigned char)*s))
            s++;
        int k = 0;
        if (*s == 'n' || *s == 'N')
            k = 1;
        else if (*s == 'c' || *s == 'C')
            k = 2;
        else if (*s == 'p' || *s == 'P')
            k = 3;
        if (k)
            s++;
        if (!k && *s != '\0' && *s != '+') { /* "5x": an unknown term, not a second constant */
            ll_errf(err, errlen, "law \"%s\": unexpected \"%s\" (terms: A + Bn + Cc + Pp, ms)", law, s);
            return LL_EINVAL;
        }
        if (seen[k]) {
            ll_errf(err, errlen, "law \"%s\": term '%s' given twice", law,
                    k == 0 ? "constant" : k == 1 ? "n" : k == 2 ? "c" : "p");
            return LL_EINVAL;
        }
        seen[k] = 1;
        v[k] = x;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == '\0')
            break;
        if (*s != '+') {
            ll_errf(err, errlen, "law \"%s\": unexpected \"%s\" (terms: A + Bn + Cc + Pp, ms)", law, s);
            return LL_EINVAL;
        }
        s++;
    }
    cfg->law_a_ms = v[0];
    cfg->law_b_ms = v[1];
    cfg->law_c_ms_per_ktok = v[2];
    cfg->law_p_ms_per_tok = v[3];
    return 0;
}

static int set_int(const char *key, const char *value, int lo, int hi, int *out,
                   char *err, size_t errlen)
{
    uint64_t u;
    int64_t i;
    /* counts accept k/m suffixes ("4k"); negatives go through the plain parser */
    if (ll_parse_count(value, &u) == 0 && u <= (uint64_t)hi && (int64_t)u >= lo) {
        *out = (int)u;
        return 0;
    }
    if (ll_parse_int64(value, &i) == 0 && i >= lo && i <= hi) {
        *out = (int)i;
        return 0;
    }
    ll_errf(err, errlen, "%s: expected an integer in [%d, %d], got \"%s\"", key, lo, hi, value);
    return LL_EINVAL;
}

static int set_double(const char *key, const char *value, double lo, double hi, double *out,
                      char *err, size_t errlen)
{
    double d;
    if (ll_parse_double(value, &d) != 0 || !(d >= lo && d <= hi)) {
        ll_errf(err, errlen, "%s: expected a number in [%g, %g], got \"%s\"", key, lo, hi, value);
        return LL_EINVAL;
    }
    *out = d;
    return 0;
}

static int set_str(const char *value, const char **out, char *err, size_t errlen)
{
    const char *s = intern(value);
    if (!s) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    *out = s;
    return 0;
}

int eng_config_set(eng_config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
    int iv;
    if (!key || !value) {
        ll_errf(err, errlen, "missing key or value");
        return LL_EINVAL;
    }
    if (strcmp(key, "backend") == 0) {
        if (strcmp(value, "synthetic") == 0)
            cfg->backend = ENG_BACKEND_SYNTHETIC;
        else if (strcmp(value, "cpu") == 0)
            cfg->backend = ENG_BACKEND_CPU;
        else if (strcmp(value, "cuda") == 0)
            cfg->backend = ENG_BACKEND_CUDA;
        else {
            ll_errf(err, errlen, "backend: expected synthetic, cpu or cuda, got \"%s\"", value);
            return LL_EINVAL;
        }
        return 0;
    }
    if (strcmp(key, "law") == 0)
        return eng_parse_law(value, cfg, err, errlen);
    if (strcmp(key, "a") == 0)
        return set_double(key, value, 0, 1e7, &cfg->law_a_ms, err, errlen);
    if (strcmp(key, "b") == 0)
        return set_double(key, value, 0, 1e7, &cfg->law_b_ms, err, errlen);
    if (strcmp(key, "c") == 0)
        return set_double(key, value, 0, 1e7, &cfg->law_c_ms_per_ktok, err, errlen);
    if (strcmp(key, "p") == 0)
        return set_double(key, value, 0, 1e7, &cfg->law_p_ms_per_tok, err, errlen);
    if (strcmp(key, "time_scale") == 0) {
        double d;
        if (set_double(key, value, 0, 1e6, &d, err, errlen))
            return LL_EINVAL;
        if (d <= 0) {
            ll_errf(err, errlen, "time_scale: must be > 0, got \"%s\"", value);
            return LL_EINVAL;
        }
        cfg->time_scale = d;
        return 0;
    }
    if (strcmp(key, "jitter") == 0)
        return set_double(key, value, 0, 1, &cfg->jitter_frac, err, errlen);
    if (strcmp(key, "seed") == 0) {
        uint64_t u;
        if (ll_parse_count(value, &u)) {
            ll_errf(err, errlen, "seed: expected a non-negative integer, got \"%s\"", value);
            return LL_EINVAL;
        }
        cfg->seed = u;
        return 0;
    }
    if (strcmp(key, "think") == 0 || strcmp(key, "think_tokens") == 0)
        return set_int(key, value, 0, 1 << 24, &cfg->think_tokens, err, errlen);
    if (strcmp(key, "max_running") == 0)
        return set_int(key, value, 1, 1 << 20, &cfg->max_running, err, errlen);
    if (strcmp(key, "max_waiting") == 0)
        return set_int(key, value, 0, 1 << 24, &cfg->max_waiting, err, errlen);
    if (strcmp(key, "prefill_budget") == 0)
        return set_int(key, value, 1, 1 << 24, &cfg->prefill_budget_tok, err, errlen);
    if (strcmp(key, "max_tokens_limit") == 0)
        return set_int(key, value, 1, 1 << 24, &cfg->max_tokens_limit, err, errlen);
    if (strcmp(key, "max_context") == 0)
        return set_int(key, value, 1, 1 << 30, &cfg->max_context_tok, err, errlen);
    if (strcmp(key, "fault_fail_step") == 0) /* testing aid (engine.h) */
        return set_int(key, value, 0, 1 << 30, &cfg->fault_fail_step, err, errlen);
    if (strcmp(key, "stop_after") == 0)
        return set_int(key, value, 0, 1 << 24, &cfg->stop_after_tok, err, errlen);
    if (strcmp(key, "default_max_tokens") == 0)
        return set_int(key, value, 1, 1 << 24, &cfg->default_max_tokens, err, errlen);
    if (strcmp(key, "port") == 0)
        return set_int(key, value, 0, 65535, &cfg->port, err, errlen);
    if (strcmp(key, "max_connections") == 0) {
        if (set_int(key, value, 16, 1 << 20, &iv, err, errlen))
            return LL_EINVAL;
        cfg->max_connections = (unsigned)iv;
        return 0;
    }
    if (strcmp(key, "idle_timeout") == 0) {
        double s;
        if (ll_parse_duration_s(value, &s) || s < 1 || s > 86400) {
            ll_errf(err, errlen, "idle_timeout: expected a duration in [1s, 24h], got \"%s\"", value);
            return LL_EINVAL;
        }
        cfg->idle_timeout_s = (unsigned)s;
        return 0;
    }
    if (strcmp(key, "max_body") == 0) {
        uint64_t u;
        if (ll_parse_count(value, &u) || u < 64 || u > (1ull << 30)) {
            ll_errf(err, errlen, "max_body: expected bytes in [64, 1G], got \"%s\"", value);
            return LL_EINVAL;
        }
        cfg->max_body_bytes = (size_t)u;
        return 0;
    }
    if (strcmp(key, "heads") == 0)
        return set_int(key, value, 1, 4096, &cfg->heads, err, errlen);
    if (strcmp(key, "topk") == 0)
        return set_int(key, value, 1, 1 << 24, &cfg->topk, err, errlen);
    if (strcmp(key, "threads") == 0) /* 0: the cpu backend uses every online core */
        return set_int(key, value, 0, 1024, &cfg->threads, err, errlen);
    /* cpu sizes: the bounds are the backend's (cpu_model.c, backend_cpu.c), checked
     * here too so a bad spec fails at parse time, naming its key */
    if (strcmp(key, "d_model") == 0)
        return set_int(key, value, 1, 65536, &cfg->d_model, err, errlen);
    if (strcmp(key, "d_ff") == 0) /* at least one 576-wide query/KV row */
        return set_int(key, value, 576, 262144, &cfg->d_ff, err, errlen);
    if (strcmp(key, "vocab") == 0)
        return set_int(key, value, 2, 1 << 20, &cfg->vocab, err, errlen);
    if (strcmp(key, "capacity") == 0)
        return set_int(key, value, 1, 1 << 24, &cfg->capacity_tok, err, errlen);
    if (strcmp(key, "min_ctx") == 0) {
        if (strcmp(value, "topk") == 0) {
            cfg->min_ctx_tok = -1;
            return 0;
        }
        return set_int(key, value, 0, 1 << 24, &cfg->min_ctx_tok, err, errlen);
    }
    if (strcmp(key, "attn") == 0) {
        if (strcmp(value, "naive") && strcmp(value, "tiled")) {
            ll_errf(err, errlen, "attn: expected naive or tiled, got \"%s\"", value);
            return LL_EINVAL;
        }
        return set_str(value, &cfg->attn, err, errlen);
    }
    if (strcmp(key, "model") == 0 || strcmp(key, "host") == 0 || strcmp(key, "profile_dir") == 0) {
        if (!*value || strlen(value) > 120) {
            ll_errf(err, errlen, "%s: expected 1..120 characters", key);
            return LL_EINVAL;
        }
        const char **dst = key[0] == 'm' ? &cfg->model : key[0] == 'h' ? &cfg->bind_addr
                                                                       : &cfg->profile_dir;
        return set_str(value, dst, err, errlen);
    }
    ll_errf(err, errlen, "unknown engine key \"%s\"", key);
    return LL_EINVAL;
}

int eng_parse_spec(const char *spec, eng_config *cfg, char *err, size_t errlen)
{
    if (!spec)
        return 0;
    char *copy = strdup(spec);
    if (!copy) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*item))
            item++;
        if (!*item)
            continue;
        char *eq = strchr(item, '=');
        if (!eq) {
            ll_errf(err, errlen, "engine spec: \"%s\" is not key=value", item);
            rc = LL_EINVAL;
            goto done;
        }
        *eq = '\0';
        char *key = item, *val = eq + 1;
        for (char *e = eq - 1; e >= key && isspace((unsigned char)*e); e--)
            *e = '\0';
        while (isspace((unsigned char)*val))
            val++;
        rc = eng_config_set(cfg, key, val, err, errlen);
        if (rc)
            goto done;
    }
done:
    free(copy);
    return rc;
}
