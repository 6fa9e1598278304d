/* jtape.c: the JSON tape of one streamed event (jtape.h): a fast scanner for
 * the shapes servers send, and cJSON behind it for everything else.
 *
 * Why a scanner: a cJSON DOM costs one malloc per node and per string, ~20 of
 * each for a 250-byte chunk, which made JSON handling the client's main cost
 * per token event. The scanner walks the bytes once into nodes on
 * the caller's stack, pointing at the strings where they lie.
 *
 * Exactness: the scanner accepts only input that cJSON (1.7.x) parses to the
 * same tree, and refuses (returns -1) at the first thing outside that subset:
 * a non-object root, whitespace other than space/tab/CR/LF (cJSON skips every
 * byte <= 32), a raw control byte in a string, a \u escape (surrogates and
 * NULs are lg_jfull's business), a key with an escape, a number that is not a
 * plain integer of at most 15 digits (exact in a double; cJSON's strtod gives
 * the same value), nesting deeper than LG_JSCAN_DEPTH. Bytes after the root
 * object are ignored, as cJSON_ParseWithLengthOpts(..., 0) ignores them. */
#include "jtape.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "jtape_fix.h"

/* Deeper than any chunk a server sends; deeper input goes to cJSON. */
#define LG_JSCAN_DEPTH 32

void lg_jtape_init(lg_jtape *t)
{
    t->n = t->inline_n;
    t->cap = LG_JTAPE_NODES;
    t->count = 0;
    t->arena = t->inline_arena;
    t->arena_cap = LG_JTAPE_ARENA_BYTES;
    t->arena_used = 0;
    t->dom = NULL;
    t->ctl = -1;
}

void lg_jtape_free(lg_jtape *t)
{
    if (t->n != t->inline_n)
        free(t->n);
    if (t->arena != t->inline_arena)
        free(t->arena);
    cJSON_Delete(t->dom);
    lg_jtape_init(t);
}

/* Grows the node array (doubling): 0, or -1 out of memory. */
static int grow(lg_jtape *t)
{
    {
        size_t cap = t->cap * 2;
        if (cap > INT32_MAX)
            return -1;
        lg_jnode *n = t->n == t->inline_n ? malloc(cap * sizeof *n) : realloc(t->n, cap * sizeof *n);
        if (!n)
            return -1;
        if (t->n == t->inline_n)
            memcpy(n, t->n, t->count * sizeof *n);
        t->n = n;
        t->cap = cap;
    }
    return 0;
}

/* A new node (index), or -1 out of memory. */
static inline int32_t new_node(lg_jtape *t, int type)
{
    if (t->count == t->cap && grow(t))
        return -1;
    lg_jnode *x = &t->n[t->count];
    x->key = x->str = NULL;
    x->key_len = x->str_len = 0;
    x->child = x->next = -1;
    x->type = type;
    x->num = 0;
    return (int32_t)t->count++;
}

/* ---- the fast scanner ---------------------------------------------------------- */

typedef struct scan {
    const char *p, *end;
    lg_jtape *t;
    int depth;
} scan;

static void skip_ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

/* The byte a two-character escape \e stands for, or -1: \u and invalid
 * escapes are left to cJSON. */
static inline int unescape(char e)
{
    switch (e) {
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '"': case '\\': case '/': return e;
    default: return -1;
    }
}

/* Room in the arena for an escaped string that starts at start: 0, or -1
 * when it cannot be had. Decoded bytes never outnumber raw ones, so what is
 * left of the event bounds it. */
static int reserve_arena(scan *s, const char *start)
{
    lg_jtape *t = s->t;
    size_t room = (size_t)(s->end - start);
    if (t->arena_cap - t->arena_used >= room)
        return 0;
    /* One heap arena as big as the whole event holds every string of it. */
    if (t->arena != t->inline_arena)
        return -1;
    size_t cap = (size_t)(s->end - s->p);
    char *a = malloc(cap);
    if (!a)
        return -1;
    t->arena = a; /* strings already in the inline arena stay there */
    t->arena_used = 0;
    t->arena_cap = cap;
    return 0;
}

/* The rest of a string that holds an escape, decoded into the arena: start
 * is its first byte, q its first escape (the bytes between are plain). */
static int scan_escaped(scan *s, const char *start, const char *q, const char **out, uint32_t *len)
{
    if (reserve_arena(s, start))
        return -1;
    lg_jtape *t = s->t;
    char *dst = t->arena + t->arena_used, *w = dst;
    memcpy(w, start, (size_t)(q - start));
    w += q - start;
    while (q < s->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"') {
            *out = dst;
            *len = (uint32_t)(w - dst);
            t->arena_used += (size_t)(w - dst);
            s->p = q + 1;
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            int e = q + 1 < s->end ? unescape(q[1]) : -1;
            if (e < 0)
                return -1;
            *w++ = (char)e;
            q += 2;
            continue;
        }
        *w++ = (char)c;
        q++;
    }
    return -1;
}

/* At a '"': the string's bytes into (*out, *len); escaped strings are decoded
 * into the arena. A key (is_key) may not hold an escape. */
static int scan_str(scan *s, const char **out, uint32_t *len, int is_key)
{
    const char *q = s->p + 1, *start = q;
    while (s->end - q >= 8 && !has_special(q))
        q += 8;
    while (q < s->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"') {
            *out = start;
            *len = (uint32_t)(q - start);
            s->p = q + 1;
            return 0;
        }
        if (c == '\\' || c < 0x20)
            break;
        q++;
    }
    if (q >= s->end || *q != '\\' || is_key)
        return -1;
    return scan_escaped(s, start, q, out, len);
}

static int scan_value(scan *s, int32_t *idx);

/* Members or elements up to the closing bracket; s->p is just past the opening one. */
static int scan_container(scan *s, int32_t self, int is_obj)
{
    char close = is_obj ? '}' : ']';
    int32_t prev = -1;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        uint32_t key_len = 0;
        int32_t v;
        if (is_obj) {
            if (s->p >= s->end || *s->p != '"' || scan_str(s, &key, &key_len, 1))
                return -1;
            skip_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return -1;
            s->p++;
            skip_ws(s);
        }
        if (scan_value(s, &v))
            return -1;
        lg_jnode *n = s->t->n;
        n[v].key = key;
        n[v].key_len = key_len;
        if (prev < 0)
            n[self].child = v;
        else
            n[prev].next = v;
        prev = v;
        skip_ws(s);
        if (s->p >= s->end)
            return -1;
        if (*s->p == close) {
            s->p++;
            return 0;
        }
        if (*s->p != ',')
            return -1;
        s->p++;
        skip_ws(s);
    }
}

static int scan_lit(scan *s, const char *lit, size_t n)
{
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
        return -1;
    s->p += n;
    return 0;
}

/* An object or array at s->p, nested at most LG_JSCAN_DEPTH deep. */
static int scan_nested(scan *s, int32_t *idx)
{
    int is_obj = *s->p == '{';
    int32_t i;
    if (++s->depth > LG_JSCAN_DEPTH || (i = new_node(s->t, is_obj ? LG_J_OBJ : LG_J_ARR)) < 0)
        return -1;
    s->p++;
    if (scan_container(s, i, is_obj))
        return -1;
    s->depth--;
    *idx = i;
    return 0;
}

/* A string value at s->p (a '"'). */
static int scan_str_value(scan *s, int32_t *idx)
{
    const char *str;
    uint32_t len;
    int32_t i;
    if ((i = new_node(s->t, LG_J_STR)) < 0 || scan_str(s, &str, &len, 0))
        return -1;
    s->t->n[i].str = str;
    s->t->n[i].str_len = len;
    *idx = i;
    return 0;
}

/* true, false or null: the literal lit (n bytes) as a node of type. */
static int scan_lit_value(scan *s, int type, const char *lit, size_t n, int32_t *idx)
{
    int32_t i;
    if ((i = new_node(s->t, type)) < 0 || scan_lit(s, lit, n))
        return -1;
    *idx = i;
    return 0;
}

/* cJSON reads a number as the run of [0-9+-eE.] (then strtod): take the
 * whole run, and only a plain integer of it. */
static int scan_num(scan *s, int32_t *idx)
{
    const char *q = s->p;
    int neg = *q == '-';
    int32_t i;
    q += neg;
    const char *d0 = q;
    uint64_t v = 0; /* at most 15 digits: exact here and in the double */
    while (q < s->end && *q >= '0' && *q <= '9')
        v = v * 10 + (uint64_t)(*q++ - '0');
    if (q == d0 || q - d0 > 15 ||
        (q < s->end && (*q == '+' || *q == '-' || *q == 'e' || *q == 'E' || *q == '.')))
        return -1;
    if ((i = new_node(s->t, LG_J_NUM)) < 0)
        return -1;
    s->t->n[i].num = neg ? -(double)v : (double)v;
    s->p = q;
    *idx = i;
    return 0;
}

/* One value at s->p (whitespace already skipped); its node index in *idx. */
static int scan_value(scan *s, int32_t *idx)
{
    if (s->p >= s->end)
        return -1;
    switch (*s->p) {
    case '{':
    case '[':
        return scan_nested(s, idx);
    case '"':
        return scan_str_value(s, idx);
    case 't':
        return scan_lit_value(s, LG_J_TRUE, "true", 4, idx);
    case 'f':
        return scan_lit_value(s, LG_J_FALSE, "false", 5, idx);
    case 'n':
        return scan_lit_value(s, LG_J_NULL, "null", 4, idx);
    default:
        return scan_num(s, idx);
    }
}

int lg_jscan(lg_jtape *t, const char *p, size_t len)
{
    scan s = {p, p + len, t, 0};
    int32_t root;
    t->count = 0;
    t->arena_used = 0;
    skip_ws(&s);
    if (s.p < s.end && *s.p == '{' && scan_value(&s, &root) == 0)
        return 0;
    t->count = 0;
    t->arena_used = 0;
    return -1;
}

/* ---- the full parser ----------------------------------------------------------- */

static int32_t copy_dom(lg_jtape *t, const cJSON *j)
{
    int type = cJSON_IsObject(j) ? LG_J_OBJ : cJSON_IsArray(j) ? LG_J_ARR : cJSON_IsString(j) ? LG_J_STR
             : cJSON_IsNumber(j) ? LG_J_NUM : cJSON_IsTrue(j) ? LG_J_TRUE : cJSON_IsFalse(j) ? LG_J_FALSE
             : LG_J_NULL;
    int32_t i = new_node(t, type), prev = -1;
    if (i < 0)
        return -1;
    if (j->string) {
        t->n[i].key = j->string;
        t->n[i].key_len = (uint32_t)strlen(j->string);
    }
    if (type == LG_J_STR) {
        t->n[i].str = j->valuestring;
        t->n[i].str_len = (uint32_t)strlen(j->valuestring);
    }
    t->n[i].num = type == LG_J_NUM ? j->valuedouble : 0;
    if (type == LG_J_OBJ || type == LG_J_ARR)
        for (const cJSON *c = j->child; c; c = c->next) {
            int32_t k = copy_dom(t, c);
            if (k < 0)
                return -1;
            if (prev < 0)
                t->n[i].child = k;
            else
                t->n[prev].next = k;
            prev = k;
        }
    return i;
}

int lg_jfull(lg_jtape *t, const char *p, size_t len)
{
    char *fixed = NULL;
    int ctl = -1;
    lg_jtape_free(t);
    int rc = lg_jfix(p, len, &fixed, &len, &ctl);
    if (rc)
        return rc;
    cJSON *root = cJSON_ParseWithLengthOpts(fixed ? fixed : p, len, NULL, 0);
    free(fixed); /* cJSON's tree holds copies of the strings */
    if (!root)
        return -1;
    t->dom = root;
    t->ctl = ctl;
    if (copy_dom(t, root) < 0)
        return LL_ENOMEM;
    t->n[0].key = NULL; /* the root has no name (cJSON leaves it NULL too) */
    t->n[0].key_len = 0;
    return 0;
}

/* ---- lookups ---------------------------------------------------------------- */

const lg_jnode *lg_jchild(const lg_jtape *t, const lg_jnode *o)
{
    return o && o->child >= 0 ? &t->n[o->child] : NULL;
}

const lg_jnode *lg_jnext(const lg_jtape *t, const lg_jnode *o)
{
    return o && o->next >= 0 ? &t->n[o->next] : NULL;
}

const char *lg_jstr(const lg_jtape *t, const lg_jnode *obj, const char *key, size_t *len)
{
    const lg_jnode *v = lg_jget(t, obj, key);
    if (!v || v->type != LG_J_STR)
        return NULL;
    *len = v->str_len;
    return v->str;
}

static int node_equal(const lg_jtape *a, int32_t i, const lg_jtape *b, int32_t j)
{
    for (; i >= 0 && j >= 0; i = a->n[i].next, j = b->n[j].next) {
        const lg_jnode *x = &a->n[i], *y = &b->n[j];
        if (x->type != y->type || x->key_len != y->key_len || (!x->key) != (!y->key) ||
            (x->key_len && memcmp(x->key, y->key, x->key_len)) || x->str_len != y->str_len ||
            (x->str_len && memcmp(x->str, y->str, x->str_len)) || x->num != y->num ||
            !node_equal(a, x->child, b, y->child))
            return 0;
    }
    return i < 0 && j < 0;
}

int lg_jtape_equal(const lg_jtape *a, const lg_jtape *b)
{
    return a->count == b->count && (a->count == 0 || node_equal(a, 0, b, 0));
}
