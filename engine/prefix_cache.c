/* prefix_cache.c: the bundled engine's prefix cache (engine config
 * prefix_cache=on): a prompt whose leading blocks an earlier prompt had is
 * prefilled from the first block it does not share, as vLLM's and SGLang's
 * caches do, and says how many of its tokens were cached
 * (usage.prompt_tokens_details.cached_tokens, loadlaw_prompt_tokens_cached_total).
 *
 * DESIGN: a prompt token is a word here (the engine counts words), and a
 * block is ENG_PREFIX_BLOCK words. Each block's key chains the key before it
 * (FNV-1a of its words, mixed with the previous key), so a key names the
 * whole prefix up to its block, and a lookup walks the prompt's keys until
 * the first miss. Keys are computed on the server's thread when the request
 * is parsed (eng_prefix_keys); the table is touched under the engine's mu
 * only: lookups and inserts at admission (the scheduler thread), and
 * POST /reset_prefix_cache (eng_prefix_reset_answer, the server's thread), vLLM's
 * spelling, so a sweep can empty it between levels. A request admitted after
 * the reset was answered finds it empty. The table is open addressing
 * over 2^k slots with a FIFO of inserted keys for eviction, so memory is
 * fixed: cfg.prefix_cache_blocks keys. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct eng_prefix_cache {
    uint64_t *slot;   /* 0 = empty (a key of 0 is stored as 1) */
    size_t mask;
    uint64_t *fifo;   /* inserted keys, oldest first, for eviction */
    size_t cap, head, n;
};

static uint64_t nonzero(uint64_t k) { return k ? k : 1; }

eng_prefix_cache *eng_prefix_new(size_t blocks)
{
    eng_prefix_cache *c = calloc(1, sizeof *c);
    size_t slots = 16;
    while (slots < 2 * blocks)
        slots <<= 1;
    if (!c || !(c->slot = calloc(slots, sizeof *c->slot)) || !(c->fifo = calloc(blocks ? blocks : 1, sizeof *c->fifo))) {
        eng_prefix_free(c);
        return NULL;
    }
    c->mask = slots - 1;
    c->cap = blocks ? blocks : 1;
    return c;
}

void eng_prefix_free(eng_prefix_cache *c)
{
    if (!c)
        return;
    free(c->slot);
    free(c->fifo);
    free(c);
}

static size_t find(const eng_prefix_cache *c, uint64_t k)
{
    size_t i = (size_t)(k * 0x9e3779b97f4a7c15ULL) & c->mask;
    while (c->slot[i] && c->slot[i] != k)
        i = (i + 1) & c->mask;
    return i;
}

/* Remove key k, re-placing the keys after it in its probe run. */
static void erase(eng_prefix_cache *c, uint64_t k)
{
    size_t i = find(c, k);
    if (!c->slot[i])
        return;
    c->slot[i] = 0;
    for (size_t j = (i + 1) & c->mask; c->slot[j]; j = (j + 1) & c->mask) {
        uint64_t m = c->slot[j];
        c->slot[j] = 0;
        c->slot[find(c, m)] = m;
    }
}

static void insert(eng_prefix_cache *c, uint64_t k)
{
    size_t i = find(c, k);
    if (c->slot[i])
        return; /* already there */
    if (c->n == c->cap) { /* evict the oldest */
        erase(c, c->fifo[c->head]);
        c->head = (c->head + 1) % c->cap;
        c->n--;
        i = find(c, k);
    }
    c->slot[i] = k;
    c->fifo[(c->head + c->n) % c->cap] = k;
    c->n++;
}

int eng_prefix_admit(eng_prefix_cache *c, const uint64_t *keys, int n_keys, int prompt_tok)
{
    int hit = 0;
    while (hit < n_keys && c->slot[find(c, nonzero(keys[hit]))])
        hit++;
    for (int i = hit; i < n_keys; i++)
        insert(c, nonzero(keys[i]));
    int cached = hit * ENG_PREFIX_BLOCK;
    /* as the serving engines do: the last token is always computed (its
     * logits give the first output token) */
    return cached < prompt_tok ? cached : prompt_tok - 1 > 0 ? prompt_tok - 1 : 0;
}

/* Every block forgotten; the blocks it held. */
static size_t clear(eng_prefix_cache *c)
{
    size_t n = c->n;
    memset(c->slot, 0, (c->mask + 1) * sizeof *c->slot);
    c->head = c->n = 0;
    return n;
}

cJSON *eng_prefix_reset_answer(eng_engine *e)
{
    pthread_mutex_lock(&e->mu);
    size_t n = e->prefix ? clear(e->prefix) : 0;
    pthread_mutex_unlock(&e->mu);
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddBoolToObject(o, "success", 1) || !cJSON_AddNumberToObject(o, "blocks", (double)n))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

/* Words of one string into the running block state. */
typedef struct keyer {
    uint64_t prev, h;
    int words;
    uint64_t *keys;
    int n, cap;
} keyer;

static int close_block(keyer *k)
{
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 64;
        uint64_t *t = realloc(k->keys, (size_t)cap * sizeof *t);
        if (!t)
            return LL_ENOMEM;
        k->keys = t;
        k->cap = cap;
    }
    k->prev = (k->prev ^ k->h) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
    k->keys[k->n++] = k->prev;
    k->h = LL_FNV64_INIT;
    k->words = 0;
    return 0;
}

/* Words as request.c counts them: runs of non-space bytes (isspace). */
static int feed(keyer *k, const char *s)
{
    while (*s) {
        while (*s && isspace((unsigned char)*s))
            s++;
        const char *w = s;
        while (*s && !isspace((unsigned char)*s))
            s++;
        if (s == w)
            break;
        k->h = ll_fnv64(k->h, w, (size_t)(s - w));
        k->h = ll_fnv64(k->h, " ", 1);
        if (++k->words == ENG_PREFIX_BLOCK && close_block(k))
            return LL_ENOMEM;
    }
    return 0;
}

/* The strings a prompt is made of, in order: chat messages' contents (a
 * string, or text parts), or completions' prompt string(s). */
static int feed_item(keyer *k, const cJSON *v)
{
    const cJSON *part, *arr = cJSON_IsArray(v) ? v : NULL;
    if (cJSON_IsString(v))
        return feed(k, v->valuestring);
    cJSON_ArrayForEach(part, arr)
    {
        const cJSON *t = cJSON_IsString(part) ? part : cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(t) && feed(k, t->valuestring))
            return LL_ENOMEM;
    }
    return 0;
}

int eng_prefix_keys(const cJSON *root, int chat, uint64_t **keys, int *n_keys)
{
    keyer k = {.prev = 0, .h = LL_FNV64_INIT};
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, chat ? "messages" : "prompt"), *m;
    const cJSON *msgs = chat && cJSON_IsArray(p) ? p : NULL;
    int rc = 0;
    *keys = NULL;
    *n_keys = 0;
    if (chat) {
        cJSON_ArrayForEach(m, msgs)
        {
            if ((rc = feed_item(&k, cJSON_GetObjectItemCaseSensitive(m, "content"))))
                break;
        }
    } else {
        rc = feed_item(&k, p);
    }
    if (rc) {
        free(k.keys);
        return rc;
    }
    *keys = k.keys; /* whole blocks only: a partial last block is never shared */
    *n_keys = k.n;
    return 0;
}
