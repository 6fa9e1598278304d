/* config_keys.c: the engine's spec keys, one row each of `keys` below: its
 * name, the kind of value it takes, its bounds, the eng_config field it lands
 * in (or a setter for the few that need one) and its help text.
 * eng_config_set, its error messages and eng_config_key's list all read that
 * table, so a key is added in one place. A string key's value is stored as
 * a copy the config owns (eng_config_own_str, config.c). */
#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "internal.h"

/* ---- the key table ------------------------------------------------------- */

typedef enum key_type {
    KEY_INT,        /* int in [lo, hi]; counts take k/m suffixes ("4k") */
    KEY_UINT,       /* unsigned, same syntax as KEY_INT */
    KEY_U64,        /* uint64_t, any non-negative count */
    KEY_DOUBLE,     /* double in [lo, hi] (lo excluded with lo_open) */
    KEY_BYTES,      /* size_t bytes in [lo, hi], k/m/g suffixes */
    KEY_DURATION_S, /* unsigned seconds in [lo, hi], "30s", "2m" */
    KEY_STR,        /* owned string of lo..hi characters */
    KEY_CHOICE,     /* owned string, one of choices ("a|b") */
    KEY_BOOL,       /* int 0 or 1 ("0|1", "true|false", "on|off"); serve makes it a flag */
    KEY_CUSTOM,     /* set() does it */
} key_type;

typedef struct eng_key eng_key;
struct eng_key {
    const char *name;
    key_type type;
    size_t off;         /* offsetof(eng_config, field) of a number */
    int slot;           /* KEY_STR, KEY_CHOICE: the string's ENG_STR_* slot */
    double lo, hi;
    int lo_open;        /* KEY_DOUBLE: lo itself is refused */
    const char *choices;
    int (*set)(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen);
    const char *form;   /* the value's form, for help */
    const char *help;
};

static int set_backend(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen);
static int set_law(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen);
static int set_min_ctx(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen);
static int set_attn_fault(eng_config *cfg, const eng_key *k, const char *value, char *err,
                          size_t errlen);
static int set_buckets(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen);
static int set_knee(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen);

#define OFF(field) offsetof(eng_config, field)
#define INT(n, field, l, h, f, hl) \
    {.name = n, .type = KEY_INT, .off = OFF(field), .lo = l, .hi = h, .form = f, .help = hl}
#define DBL(n, field, l, h, f, hl) \
    {.name = n, .type = KEY_DOUBLE, .off = OFF(field), .lo = l, .hi = h, .form = f, .help = hl}
#define STR(n, s, f, hl) {.name = n, .type = KEY_STR, .slot = s, .lo = 1, .hi = 120, .form = f, .help = hl}
#define CUSTOM(n, fn, f, hl) {.name = n, .type = KEY_CUSTOM, .set = fn, .form = f, .help = hl}
#define BOOL(n, field, hl) {.name = n, .type = KEY_BOOL, .off = OFF(field), .form = "0|1", .help = hl}
/* A secret: 1..256 characters; refuse() never echoes a string's value. */
#define SECRET(n, s, hl) {.name = n, .type = KEY_STR, .slot = s, .lo = 1, .hi = 256, .form = "KEY", .help = hl}

/* One row per key, in the order help lists them. The cpu sizes' bounds are
 * the backend's (cpu_model.c, backend_cpu.c), checked here too so a bad spec
 * fails at parse time, naming its key. */
static const eng_key keys[] = {
    STR("host", ENG_STR_BIND_ADDR, "ADDR", "IPv4 address to bind (default 127.0.0.1)"),
    INT("port", port, 0, 65535, "P", "port (0 = ephemeral)"),
    STR("model", ENG_STR_MODEL, "NAME", "served model name (default loadlaw-synthetic)"),
    CUSTOM("backend", set_backend, "synthetic|cpu|cuda", "step backend (default synthetic)"),
    CUSTOM("law", set_law, "LAW",
           "step time in ms before scaling: \"52+30n\", with optional terms \"+0.5c\" "
           "(per 1000 context tokens) \"+0.01p\" (per prefill token)"),
    DBL("a", law_a_ms, 0, ENG_LAW_TERM_MAX_MS, "MS", "the law's constant term alone"),
    DBL("b", law_b_ms, 0, ENG_LAW_TERM_MAX_MS, "MS", "the law's per-sequence term alone"),
    DBL("c", law_c_ms_per_ktok, 0, ENG_LAW_TERM_MAX_MS, "MS", "the law's per-1000-context-tokens term alone"),
    DBL("p", law_p_ms_per_tok, 0, ENG_LAW_TERM_MAX_MS, "MS", "the law's per-prefill-token term alone"),
    CUSTOM("buckets", set_buckets, "N,N,...",
           "batch buckets: a step with N sequences costs the law at the smallest bucket >= N "
           "(above the largest: N), e.g. \"1,2,4,8,16,24,32\"; \"none\" (default) for none"),
    CUSTOM("knee", set_knee, "N:MS",
           "above N sequences each further one costs MS instead of b (continuous at N), e.g. "
           "\"8:5\"; \"none\" (default) for none"),
    {.name = "time_scale", .type = KEY_DOUBLE, .off = OFF(time_scale), .lo = 0, .lo_open = 1,
     .hi = 1e6, .form = "X", .help = "multiply every step time by X (default 1)"},
    DBL("jitter", jitter_frac, 0, 1, "F", "relative std-dev of seeded gaussian step jitter (default 0)"),
    {.name = "seed", .type = KEY_U64, .off = OFF(seed), .form = "S",
     .help = "seed for jitter and token words (default 1)"},
    INT("think", think_tokens, 0, 1 << 24, "N", "default thinking tokens per request (default 0)"),
    INT("think_tokens", think_tokens, 0, 1 << 24, "N", "the same as think"),
    INT("stop_after", stop_after_tok, 0, 1 << 24, "N",
        "requests without ignore_eos stop after N tokens (default 0 = never)"),
    INT("default_max_tokens", default_max_tokens, 1, 1 << 24, "N",
        "max_tokens of a request that names none (default 256)"),
    INT("max_running", max_running, 1, 1 << 20, "N", "sequences in the batch (default 256)"),
    INT("max_waiting", max_waiting, 0, 1 << 24, "N", "queue bound; a full queue answers 503 (default 8192)"),
    INT("prefill_budget", prefill_budget_tok, 1, 1 << 24, "N", "prompt tokens prefilled per step (default 2048)"),
    INT("max_tokens_limit", max_tokens_limit, 1, 1 << 24, "N", "largest max_tokens accepted (default 32768)"),
    INT("max_context", max_context_tok, 1, 1 << 30, "N", "prompt + output bound (default 131072)"),
    {.name = "max_connections", .type = KEY_UINT, .off = OFF(max_connections), .lo = 16,
     .hi = 1 << 20, .form = "N", .help = "connection limit (default 8192)"},
    {.name = "max_body", .type = KEY_BYTES, .off = OFF(max_body_bytes), .lo = 64, .hi = 1 << 30,
     .form = "BYTES", .help = "request body limit (default 1Mi)"},
    {.name = "max_connections_per_ip", .type = KEY_UINT, .off = OFF(max_connections_per_ip),
     .lo = 0, .hi = 1 << 20, .form = "N", .help = "connections one client address may hold; "
     "more are closed on accept (default 0 = max_connections - 64, half below 128)"},
    {.name = "idle_timeout", .type = KEY_DURATION_S, .off = OFF(idle_timeout_s), .lo = 1,
     .hi = 86400, .form = "DUR", .help = "a connection being answered is closed after this "
     "long without a byte moving (default 120s)"},
    {.name = "request_timeout", .type = KEY_DURATION_S, .off = OFF(request_timeout_s), .lo = 1,
     .hi = 86400, .form = "DUR", .help = "a connection waiting for a request (new, or idle "
     "between requests) is closed after this long without a byte arriving (default 10s)"},
    {.name = "conn_memory", .type = KEY_BYTES, .off = OFF(conn_memory_bytes), .lo = 4096,
     .hi = 1 << 20, .form = "BYTES", .help = "HTTP memory per connection (request headers must "
     "fit: ~7 KB at 8k; more answer 431); the server's memory per stream (default 8k)"},
    STR("profile_dir", ENG_STR_PROFILE_DIR, "DIR",
        "where /start_profile writes traces; a request's output_dir may only name a plain "
        "subdirectory of it (default $TMPDIR/loadlaw-profile-<uid>, or under /tmp, made "
        "mode 0700)"),
    SECRET("api_key", ENG_STR_API_KEY,
           "every endpoint but /health needs \"Authorization: Bearer KEY\" (default: none, open; "
           "serve also reads LOADLAW_API_KEY)"),
    SECRET("control_key", ENG_STR_CONTROL_KEY,
           "the key the control routes (/start_profile, /stop_profile, /reset_prefix_cache) need "
           "instead of api_key (serve also reads LOADLAW_CONTROL_KEY)"),
    BOOL("no_control", no_control, "turn the control routes off (404): /start_profile, /stop_profile, "
         "/reset_prefix_cache"),
    INT("profile_max_steps_open", profile_max_steps_open, 1, ENG_PROF_MAX_STEPS, "N",
        "the most steps a /start_profile captures when neither control_key nor api_key is set "
        "(with a key: 10m; default 100k: ~20 MB of memory, ~36 MB of trace)"),
    BOOL("prefix_cache", prefix_cache,
         "keep a prefix cache: a prompt's leading 16-word blocks an earlier prompt had are not "
         "prefilled again, and are said as usage.prompt_tokens_details.cached_tokens; POST "
         "/reset_prefix_cache empties it"),
    INT("prefix_cache_blocks", prefix_cache_blocks, 1, 1 << 26, "N",
        "blocks the prefix cache keeps, oldest evicted first (default 65536)"),
    BOOL("metrics_vllm_names", metrics_vllm_names,
         "also export vLLM's vllm:num_requests_running/waiting in /metrics (colons: not "
         "promtool-clean)"),
    INT("handoff_sample", handoff_sample, 0, 1 << 20, "K",
        "record when every K-th token of each stream was handed to the socket, beside its "
        "step's end (\"handoff\" records, while a sweep records; default 0 = off)"),
    {.name = "step_log_max", .type = KEY_BYTES, .off = OFF(step_log_max), .lo = 1, .hi = 1e9,
     .form = "N", .help = "steps the engine's step log keeps, newest first; older ones are "
     "dropped and counted in /metrics (default 1m = 56 MB)"},
    {.name = "attn", .type = KEY_CHOICE, .slot = ENG_STR_ATTN, .choices = "naive|tiled|v2",
     .form = "naive|tiled|v2", .help = "cpu/cuda: decode attention kernel (default tiled; v2: cuda only)"},
    INT("heads", heads, 1, 4096, "N", "cpu/cuda: query heads (default 64)"),
    INT("topk", topk, 1, 1 << 24, "N", "cpu/cuda: KV rows selected per decode (default 2048)"),
    INT("threads", threads, 0, 1024, "N", "cpu: compute threads, 0 = all cores (default 1)"),
    INT("tp", tp, 1, 64, "K", "tensor-parallel ranks (default 1); cpu: K thread groups, heads "
        "and d_ff divide by K, K <= 10; cuda: rank r on GPU device+r over NCCL, heads divide by "
        "K, K <= 4"),
    INT("d_model", d_model, 1, 65536, "N", "cpu/cuda: model width (default 2048)"),
    INT("d_ff", d_ff, 576, 262144, "N", "cpu/cuda: MLP width, at least one 576-wide row (default 8192)"),
    INT("vocab", vocab, 2, 1 << 20, "N", "cpu/cuda: vocabulary (default 1024)"),
    INT("capacity", capacity_tok, 1, 1 << 24, "N", "cpu/cuda: KV rows per sequence slot (default 4096)"),
    CUSTOM("min_ctx", set_min_ctx, "N|topk", "cpu/cuda: rows attended at least (default topk; 0 = real context)"),
    CUSTOM("attn_fault", set_attn_fault, "none|skip_last_tile|swap_heads",
           "testing: cpu/cuda attn=tiled drops each sequence's last KV tile, or writes each head's "
           "output from its neighbour's accumulator (fast and wrong; default none)"),
    {.name = "kv", .type = KEY_CHOICE, .slot = ENG_STR_KV, .choices = "bf16|fp8", .form = "bf16|fp8",
     .help = "cuda: KV cache layout, bf16 1152 B or DeepSeek-V3.2 fp8 656 B per row (default bf16)"},
    INT("device", device, 0, 1023, "K", "cuda: CUDA device index (default 0)"),
    INT("fault_fail_step", fault_fail_step, 0, 1 << 30, "K",
        "testing aid: the K-th step fails (synthetic; cuda: a refused kernel launch; default 0 = "
        "never)"),
};
#define N_KEYS (sizeof keys / sizeof keys[0])
#undef OFF
#undef INT
#undef DBL
#undef STR
#undef CUSTOM
#undef BOOL
#undef SECRET

static const eng_key *find_key(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

const char *eng_config_key(size_t i, const char **value_form, const char **help)
{
    if (i >= N_KEYS)
        return NULL;
    if (value_form)
        *value_form = keys[i].form;
    if (help)
        *help = keys[i].help;
    return keys[i].name;
}

int eng_config_has_key(const char *key) { return key && find_key(key) != NULL; }

/* ---- parsing one value, by type ------------------------------------------ */

/* An integer in [lo, hi]: counts accept k/m suffixes ("4k"); negatives go
 * through the plain parser. */
static int parse_int_in(const char *value, int64_t lo, int64_t hi, int64_t *out)
{
    uint64_t u;
    int64_t i;
    if (ll_parse_count(value, &u) == 0 && u <= (uint64_t)hi && (int64_t)u >= lo) {
        *out = (int64_t)u;
        return 0;
    }
    if (ll_parse_int64(value, &i) == 0 && i >= lo && i <= hi) {
        *out = i;
        return 0;
    }
    return LL_EINVAL;
}

/* 1 when value is one of the '|'-separated choices. */
static int is_choice(const char *choices, const char *value)
{
    size_t n = strlen(value);
    for (const char *c = choices; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, value, n) == 0)
            return 1;
        c = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* The message for a value the key refuses: it names the key, what it takes,
 * and what it got. */
static int refuse(const eng_key *k, const char *value, char *err, size_t errlen)
{
    switch (k->type) {
    case KEY_INT:
    case KEY_UINT:
        ll_errf(err, errlen, "%s: expected an integer in [%.0f, %.0f], got \"%s\"", k->name, k->lo,
                k->hi, value);
        break;
    case KEY_U64:
        ll_errf(err, errlen, "%s: expected a non-negative integer, got \"%s\"", k->name, value);
        break;
    case KEY_DOUBLE:
        ll_errf(err, errlen, "%s: expected a number in %c%g, %g], got \"%s\"", k->name,
                k->lo_open ? '(' : '[', k->lo, k->hi, value);
        break;
    case KEY_BYTES:
        ll_errf(err, errlen, "%s: expected bytes in [%.0f, %.0f], got \"%s\"", k->name, k->lo, k->hi,
                value);
        break;
    case KEY_DURATION_S:
        ll_errf(err, errlen, "%s: expected a duration in [%.0fs, %.0fs], got \"%s\"", k->name, k->lo,
                k->hi, value);
        break;
    case KEY_STR:
        ll_errf(err, errlen, "%s: expected %.0f..%.0f characters", k->name, k->lo, k->hi);
        break;
    case KEY_CHOICE:
        ll_errf(err, errlen, "%s: expected one of %s, got \"%s\"", k->name, k->choices, value);
        break;
    case KEY_BOOL:
        ll_errf(err, errlen, "%s: expected 0|1, true|false or on|off, got \"%s\"", k->name, value);
        break;
    case KEY_CUSTOM:
        ll_errf(err, errlen, "%s: expected %s, got \"%s\"", k->name, k->form, value);
        break;
    }
    return LL_EINVAL;
}

/* Parse a number as k's type says (KEY_INT through KEY_DURATION_S) and store
 * it in field; 1 when the value is refused, the field then untouched. */
static int store_number(void *field, const eng_key *k, const char *value)
{
    int64_t i;
    uint64_t u;
    double d;
    switch (k->type) {
    case KEY_INT:
        if (parse_int_in(value, (int64_t)k->lo, (int64_t)k->hi, &i))
            return 1;
        *(int *)field = (int)i;
        return 0;
    case KEY_UINT:
        if (parse_int_in(value, (int64_t)k->lo, (int64_t)k->hi, &i))
            return 1;
        *(unsigned *)field = (unsigned)i;
        return 0;
    case KEY_U64:
        if (ll_parse_count(value, &u))
            return 1;
        *(uint64_t *)field = u;
        return 0;
    case KEY_DOUBLE:
        if (ll_parse_double(value, &d) || !(d >= k->lo && d <= k->hi) || (k->lo_open && d == k->lo))
            return 1;
        *(double *)field = d;
        return 0;
    case KEY_BYTES:
        if (ll_parse_count(value, &u) || u < (uint64_t)k->lo || u > (uint64_t)k->hi)
            return 1;
        *(size_t *)field = (size_t)u;
        return 0;
    case KEY_DURATION_S:
        if (ll_parse_duration_s(value, &d) || !(d >= k->lo && d <= k->hi))
            return 1;
        *(unsigned *)field = (unsigned)d;
        return 0;
    default:
        return 1; /* not a number key */
    }
}

/* A KEY_STR (length in [lo, hi]) or KEY_CHOICE value, copied into its
 * string slot. */
static int set_text(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    if (k->type == KEY_STR) {
        size_t len = strlen(value);
        if (len < (size_t)k->lo || len > (size_t)k->hi)
            return refuse(k, value, err, errlen);
    } else if (!is_choice(k->choices, value)) {
        return refuse(k, value, err, errlen);
    }
    if (eng_config_own_str(cfg, k->slot, value)) {
        ll_errf(err, errlen, "%s: out of memory", k->name);
        return LL_ENOMEM;
    }
    return 0;
}

/* Parse value as k says and store it in cfg; the field is untouched when
 * the value is refused. */
static int set_by_type(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    void *field = (char *)cfg + k->off; /* a number's or a flag's field */
    switch (k->type) {
    case KEY_STR:
    case KEY_CHOICE:
        return set_text(cfg, k, value, err, errlen);
    case KEY_BOOL:
        if (is_choice("1|true|on", value))
            *(int *)field = 1;
        else if (is_choice("0|false|off", value))
            *(int *)field = 0;
        else
            return refuse(k, value, err, errlen);
        return 0;
    case KEY_CUSTOM:
        return k->set(cfg, k, value, err, errlen);
    default:
        if (store_number(field, k, value))
            return refuse(k, value, err, errlen);
        return 0;
    }
}

static int set_backend(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    static const char *const names[] = {
        [ENG_BACKEND_SYNTHETIC] = "synthetic", [ENG_BACKEND_CPU] = "cpu", [ENG_BACKEND_CUDA] = "cuda"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(value, names[i]) == 0) {
            cfg->backend = (eng_backend_kind)i;
            return 0;
        }
    ll_errf(err, errlen, "%s: expected synthetic, cpu or cuda, got \"%s\"", k->name, value);
    return LL_EINVAL;
}

static int set_law(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    (void)k;
    return eng_parse_law(value, cfg, err, errlen);
}

/* "topk" (-1) or an integer in [0, 2^24]. */
static int set_min_ctx(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    int64_t i;
    if (strcmp(value, "topk") == 0) {
        cfg->min_ctx_tok = -1;
        return 0;
    }
    if (parse_int_in(value, 0, 1 << 24, &i)) {
        ll_errf(err, errlen, "%s: expected \"topk\" or an integer in [0, %d], got \"%s\"", k->name,
                1 << 24, value);
        return LL_EINVAL;
    }
    cfg->min_ctx_tok = (int)i;
    return 0;
}

static int set_attn_fault(eng_config *cfg, const eng_key *k, const char *value, char *err,
                          size_t errlen)
{
    static const char *const names[] = {"none", "skip_last_tile", "swap_heads"};
    for (int i = 0; i < 3; i++)
        if (strcmp(value, names[i]) == 0) {
            cfg->attn_fault = i; /* ENG_ATTN_FAULT_* in this order */
            return 0;
        }
    ll_errf(err, errlen, "%s: expected none, skip_last_tile or swap_heads, got \"%s\"", k->name,
            value);
    return LL_EINVAL;
}

/* "none", or up to ENG_LAW_MAX_BUCKETS strictly increasing integers in
 * [1, 2^20], comma-separated. */
static int set_buckets(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    int b[ENG_LAW_MAX_BUCKETS], n = 0;
    if (strcmp(value, "none") == 0) {
        cfg->law_n_buckets = 0;
        return 0;
    }
    for (const char *p = value;;) {
        char item[32];
        size_t end = strcspn(p, ","), lo = 0, hi = end; /* the item: p[lo, hi) */
        int64_t v;
        while (lo < hi && isspace((unsigned char)p[lo])) /* "1, 2": spaces around items */
            lo++;
        while (hi > lo && isspace((unsigned char)p[hi - 1]))
            hi--;
        if (hi == lo || hi - lo >= sizeof item || n == ENG_LAW_MAX_BUCKETS)
            goto bad;
        memcpy(item, p + lo, hi - lo);
        item[hi - lo] = '\0';
        if (parse_int_in(item, 1, 1 << 20, &v) || (n > 0 && v <= b[n - 1]))
            goto bad;
        b[n++] = (int)v;
        if (p[end] == '\0')
            break;
        p += end + 1;
    }
    memcpy(cfg->law_buckets, b, (size_t)n * sizeof *b);
    cfg->law_n_buckets = n;
    return 0;
bad:
    ll_errf(err, errlen, "%s: expected \"none\" or 1..%d strictly increasing integers in [1, %d], "
            "comma-separated, got \"%s\"", k->name, ENG_LAW_MAX_BUCKETS, 1 << 20, value);
    return LL_EINVAL;
}

/* "none", or "N:MS": N in [1, 2^20], MS a slope in [0, 1e7]. */
static int set_knee(eng_config *cfg, const eng_key *k, const char *value, char *err, size_t errlen)
{
    char n_txt[32];
    const char *colon = strchr(value, ':');
    int64_t n;
    double slope;
    if (strcmp(value, "none") == 0) {
        cfg->law_knee_n = 0;
        cfg->law_knee_b_ms = 0;
        return 0;
    }
    if (!colon || colon == value || (size_t)(colon - value) >= sizeof n_txt)
        goto bad;
    memcpy(n_txt, value, (size_t)(colon - value));
    n_txt[colon - value] = '\0';
    if (parse_int_in(n_txt, 1, 1 << 20, &n) || ll_parse_double(colon + 1, &slope) ||
        !(slope >= 0 && slope <= ENG_LAW_TERM_MAX_MS))
        goto bad;
    cfg->law_knee_n = (int)n;
    cfg->law_knee_b_ms = slope;
    return 0;
bad:
    ll_errf(err, errlen, "%s: expected \"none\" or N:MS (N in [1, %d], MS in [0, 1e7]), got \"%s\"",
            k->name, 1 << 20, value);
    return LL_EINVAL;
}

int eng_config_set(eng_config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
    if (!key || !value) {
        ll_errf(err, errlen, "missing key or value");
        return LL_EINVAL;
    }
    const eng_key *k = find_key(key);
    if (!k) {
        ll_errf(err, errlen, "unknown engine key \"%s\"", key);
        return LL_EINVAL;
    }
    return set_by_type(cfg, k, value, err, errlen);
}
