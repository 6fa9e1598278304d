/* sessions.c: load.sessions, multi-turn conversations (its keys are rows of
 * the key table, scenario_keys.c). The checks against the rest of the
 * scenario, the requests it gives each level, and each turn's user message
 * (seeded synthetic text, or a ShareGPT conversation's human turns, read by
 * prompts.c). The conversation itself, the turns
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
#include "scn_keys.h"

int scn_has_sessions(const void *base)
{
    return ((const scn_scenario *)base)->session_turns > 0;
}

/* What sessions cannot stand beside: each a usage error naming the key. */
static int check_beside(const scn_scenario *s, const scn_rd *c)
{
    if (s->prefix_groups > 0)
        return scn_bad(c, "load.shared_prefix", "nothing beside load.sessions (a conversation's first turn is its prefix)");
    if (s->endpoint != SCN_ENDPOINT_CHAT)
        return scn_bad(c, "target.endpoint", "\"chat\" beside load.sessions (a conversation is chat messages)");
    if (s->session_sharegpt && !s->session_path && !s->prompts_path)
        return scn_bad(c, "load.sessions.path", "a ShareGPT file (or prompts.path) for \"source\":\"sharegpt\"");
    for (size_t i = 0; i < s->n_levels; i++) {
        char key[64];
        if (s->levels[i].rate_per_s > 0) {
            snprintf(key, sizeof key, "levels[%zu].rate_per_s", i);
            return scn_bad(c, key, "0 beside load.sessions (C conversations in flight: a closed loop)");
        }
        if (s->levels[i].warmup > 0) {
            snprintf(key, sizeof key, "levels[%zu].warmup", i);
            return scn_bad(c, key, "0 beside load.sessions (every turn of a conversation is measured)");
        }
    }
    return 0;
}

int scn_sessions_validate(scn_scenario *s, const scn_rd *c)
{
    if (s->session_turns <= 0)
        return 0;
    int rc = check_beside(s, c);
    if (rc)
        return rc;
    for (size_t i = 0; i < s->n_levels; i++) {
        scn_level *l = &s->levels[i];
        int64_t n = (int64_t)(s->session_count > 0 ? s->session_count : l->concurrency) * s->session_turns;
        if (n > 100000000)
            return scn_bad(c, "load.sessions", "sessions x turns at most 1e8 requests a level");
        l->n_requests = (int)n;
    }
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
