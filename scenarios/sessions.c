/* sessions.c: load.sessions, multi-turn conversations. The key's loader and
 * checks, the requests it gives each level, the run line's view, and each
 * turn's user message (seeded synthetic text, or a ShareGPT conversation's
 * human turns, read by prompts.c). The conversation itself, the turns
 * before and the answers actually received, is loadgen's to keep: only it
 * sees the answers.
 *
 * A level of concurrency C runs S conversations (load.sessions.count, else
 * C), C of them in flight at any time, each of T turns: S x T requests.
 */
#include "scn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int bad(const char *origin, const char *path, const char *what, char *err, size_t errlen)
{
    ll_errf(err, errlen, "%s: %s: expected %s", origin, path, what);
    return LL_EINVAL;
}

/* An integer member k of o in [lo, hi] into *out (absent: unchanged). */
static int opt_int(const cJSON *o, const char *k, int lo, int hi, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return -1;
    *out = (int)v->valuedouble;
    return 0;
}

/* "sessions": {"turns":T,"count":S,"think_time_ms":X,"user_tokens":U,
 * "source":"synthetic"|"sharegpt","path":"file"}; turns is required. */
int scn_sessions_load(const cJSON *v, const char *o, scn_scenario *s, char *err, size_t errlen)
{
    static const char *const keys[] = {"turns", "count", "think_time_ms", "user_tokens", "source", "path", NULL};
    if (!cJSON_IsObject(v))
        return bad(o, "load.sessions", "{\"turns\":T,...}", err, errlen);
    if (scn_check_keys(v, "load.sessions", keys, o, err, errlen))
        return LL_EINVAL;
    s->session_turns = 0;
    if (!cJSON_GetObjectItemCaseSensitive(v, "turns") || opt_int(v, "turns", 1, 10000, &s->session_turns))
        return bad(o, "load.sessions.turns", "an integer in [1, 10000]", err, errlen);
    if (opt_int(v, "count", 0, 10000000, &s->session_count))
        return bad(o, "load.sessions.count", "an integer in [0, 10000000] (0: the level's concurrency)", err,
                   errlen);
    if (opt_int(v, "user_tokens", 1, 1000000, &s->session_user_tok))
        return bad(o, "load.sessions.user_tokens", "an integer in [1, 1000000]", err, errlen);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "think_time_ms");
    if (t && (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble <= 3600000)))
        return bad(o, "load.sessions.think_time_ms", "a number in [0, 3600000]", err, errlen);
    if (t)
        s->session_think_ms = t->valuedouble;
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(v, "source");
    if (src && !(cJSON_IsString(src) &&
                 (!strcmp(src->valuestring, "synthetic") || !strcmp(src->valuestring, "sharegpt"))))
        return bad(o, "load.sessions.source", "\"synthetic\" or \"sharegpt\"", err, errlen);
    s->session_sharegpt = src && !strcmp(src->valuestring, "sharegpt");
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(v, "path");
    if (path && (!cJSON_IsString(path) || !path->valuestring[0]))
        return bad(o, "load.sessions.path", "a ShareGPT file", err, errlen);
    if (path && scn_set_str(&s->session_path, path->valuestring))
        return LL_ENOMEM;
    return 0;
}

/* What sessions cannot stand beside: each a usage error naming the key. */
static int check_beside(const scn_scenario *s, const char *o, char *err, size_t errlen)
{
    if (s->prefix_groups > 0)
        return bad(o, "load.shared_prefix", "nothing beside load.sessions (a conversation's first turn is its prefix)",
                   err, errlen);
    if (s->endpoint != SCN_ENDPOINT_CHAT)
        return bad(o, "target.endpoint", "\"chat\" beside load.sessions (a conversation is chat messages)", err,
                   errlen);
    if (s->session_sharegpt && !s->session_path && !s->prompts_path)
        return bad(o, "load.sessions.path", "a ShareGPT file (or prompts.path) for \"source\":\"sharegpt\"", err,
                   errlen);
    for (size_t i = 0; i < s->n_levels; i++) {
        char key[64];
        if (s->levels[i].rate_per_s > 0) {
            snprintf(key, sizeof key, "levels[%zu].rate_per_s", i);
            return bad(o, key, "0 beside load.sessions (C conversations in flight: a closed loop)", err, errlen);
        }
        if (s->levels[i].warmup > 0) {
            snprintf(key, sizeof key, "levels[%zu].warmup", i);
            return bad(o, key, "0 beside load.sessions (every turn of a conversation is measured)", err, errlen);
        }
    }
    return 0;
}

int scn_sessions_validate(scn_scenario *s, const char *o, char *err, size_t errlen)
{
    if (s->session_turns <= 0)
        return 0;
    int rc = check_beside(s, o, err, errlen);
    if (rc)
        return rc;
    if (s->session_user_tok <= 0)
        s->session_user_tok = 64;
    for (size_t i = 0; i < s->n_levels; i++) {
        scn_level *l = &s->levels[i];
        int64_t n = (int64_t)(s->session_count > 0 ? s->session_count : l->concurrency) * s->session_turns;
        if (n > 100000000)
            return bad(o, "load.sessions", "sessions x turns at most 1e8 requests a level", err, errlen);
        l->n_requests = (int)n;
    }
    return 0;
}

int scn_sessions_to_json(cJSON *load, const scn_scenario *s)
{
    cJSON *o;
    if (s->session_turns <= 0)
        return 0;
    if (!(o = cJSON_AddObjectToObject(load, "sessions")) || ll_json_add_num(o, "turns", s->session_turns) ||
        ll_json_add_num(o, "count", s->session_count) || ll_json_add_num(o, "think_time_ms", s->session_think_ms) ||
        ll_json_add_num(o, "user_tokens", s->session_user_tok > 0 ? s->session_user_tok : 64) ||
        !cJSON_AddStringToObject(o, "source", s->session_sharegpt ? "sharegpt" : "synthetic") ||
        (s->session_path && !cJSON_AddStringToObject(o, "path", s->session_path)))
        return LL_ENOMEM;
    return 0;
}

void scn_sessions_free(scn_scenario *s)
{
    free(s->session_path);
    s->session_path = NULL;
}

/* A seed of its own for (level, session, turn), apart from the prompt set's. */
static uint64_t turn_seed(uint64_t seed, int level, int64_t session, int turn)
{
    uint64_t z = seed ^ 0x5e5510e5ULL;
    uint64_t parts[3] = {(uint64_t)level, (uint64_t)session, (uint64_t)turn};
    for (int i = 0; i < 3; i++) {
        z ^= (parts[i] + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 31)) * 0x94d049bb133111ebULL;
        z ^= z >> 29;
    }
    return z;
}

int scn_session_user(const scn_scenario *s, const scn_prompts *p, int level, int64_t session, int turn,
                     ll_buf *out)
{
    if (s->session_sharegpt) {
        const char *m = scn_prompts_conv_turn(p, (size_t)session, turn);
        return m ? ll_buf_append(out, m, strlen(m)) : 1;
    }
    ll_rng r;
    int tok = s->session_user_tok > 0 ? s->session_user_tok : 64;
    int w = (int)floor(tok / SCN_TOKENS_PER_WORD + 0.5);
    ll_rng_seed(&r, turn_seed(s->seed, level, session, turn));
    return scn_add_words(out, w < 1 ? 1 : w, &r);
}
