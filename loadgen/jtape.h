/* jtape.h (internal to loadgen/): one streamed JSON event as a flat array of
 * nodes, read by the server APIs' event interpreters (delta.h, api.h).
 *
 * Two parsers fill the same tape. lg_jscan is the fast path: one pass, no
 * allocation for an ordinary event, strings left in place unless they hold an
 * escape. It accepts a strict subset of what cJSON accepts (an object at the
 * top; whitespace of space/tab/CR/LF; integers of up to 15 digits; escapes
 * other than \u) and gives up on anything else rather than guess. lg_jfull
 * parses with cJSON and copies its tree onto the tape, so whatever the fast
 * path gives up on reaches the interpreter in the same form. The two must
 * give equal tapes wherever lg_jscan succeeds (tests/fuzz/fuzz_sse.c checks
 * it on every event), so the interpreter cannot tell which one ran.
 *
 * Strings are read as a lenient streaming client reads them, not as cJSON
 * alone would (it cuts a string at a NUL and refuses a lone surrogate, which
 * lost text or a whole event's tokens): a \u0000 escape, a raw NUL byte and
 * a lone surrogate escape (\ud800 alone: JSON's grammar, not Unicode) each
 * become U+FFFD, so the rest of the string is kept; a \u without four hex
 * digits is not JSON. Other raw control bytes inside a string (invalid JSON,
 * RFC 8259 section 7; cJSON keeps them) are kept as sent, and the first one
 * is named in lg_jtape.ctl for the caller to report.
 *
 * Lookups mirror cJSON's: lg_jget returns an object's first member with that
 * key (duplicates after it are ignored), NULL on a non-object. Strings are
 * (pointer, length) and not NUL-terminated, and hold no NUL. The tape points into
 * the parsed data (and, after lg_jfull, into cJSON's tree): it lives until
 * lg_jtape_free. Not thread-safe; a tape per call, on the caller's stack.
 */
#ifndef LOADLAW_LOADGEN_JTAPE_H
#define LOADLAW_LOADGEN_JTAPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { LG_J_NULL, LG_J_FALSE, LG_J_TRUE, LG_J_NUM, LG_J_STR, LG_J_ARR, LG_J_OBJ };

typedef struct lg_jnode {
    const char *key;        /* member name; NULL for an array element or the root */
    const char *str;        /* LG_J_STR: the decoded bytes */
    uint32_t key_len, str_len;
    int32_t child, next;    /* first child, next sibling: node indexes, -1 for none */
    int32_t type;
    double num;             /* LG_J_NUM */
} lg_jnode;

/* Nodes and decoded-string bytes held inline: a vLLM chunk is ~20 nodes, so an
 * ordinary event allocates nothing; a bigger one grows onto the heap. */
#define LG_JTAPE_NODES 64
#define LG_JTAPE_ARENA_BYTES 512

typedef struct lg_jtape {
    lg_jnode *n;            /* n[0] is the root once a parse succeeded */
    size_t count, cap;
    char *arena;            /* decoded strings that held escapes */
    size_t arena_used, arena_cap;
    void *dom;              /* lg_jfull: the cJSON tree the strings point into */
    int ctl;                /* the first raw control byte (0x00-0x1f) met inside a
                             * string, -1 none (lg_jfull only: lg_jscan refuses them) */
    lg_jnode inline_n[LG_JTAPE_NODES];
    char inline_arena[LG_JTAPE_ARENA_BYTES];
} lg_jtape;

void lg_jtape_init(lg_jtape *t);
void lg_jtape_free(lg_jtape *t);
/* Fast path: 0, or -1 when the event is outside the subset it handles (the
 * tape is then reset; call lg_jfull). */
int lg_jscan(lg_jtape *t, const char *p, size_t len);
/* Full parse: 0, -1 when the data is not JSON, LL_ENOMEM. Resets first;
 * sets ctl. */
int lg_jfull(lg_jtape *t, const char *p, size_t len);

/* Inline so that a literal key's length and comparison fold to constants:
 * lookups were ~10% of an event's cost as calls to strlen and memcmp. */
static inline const lg_jnode *lg_jget(const lg_jtape *t, const lg_jnode *o, const char *key)
{
    if (!o || o->type != LG_J_OBJ)
        return NULL;
    size_t kl = strlen(key);
    for (int32_t i = o->child; i >= 0; i = t->n[i].next) {
        const lg_jnode *m = &t->n[i];
        /* kl > 0 for every key looked up; the first byte settles most misses */
        if (m->key_len == kl && m->key[0] == key[0] && memcmp(m->key, key, kl) == 0)
            return m;
    }
    return NULL;
}
/* Node i's first child / next sibling, or NULL. */
const lg_jnode *lg_jchild(const lg_jtape *t, const lg_jnode *o);
const lg_jnode *lg_jnext(const lg_jtape *t, const lg_jnode *o);
/* The string at key, or NULL (then *len is untouched). */
const char *lg_jstr(const lg_jtape *t, const lg_jnode *obj, const char *key, size_t *len);
/* Whether two tapes hold the same tree (for the fuzz harness). */
int lg_jtape_equal(const lg_jtape *a, const lg_jtape *b);

#endif
