/* json_dup.c: finds a key that appears twice in one JSON object, anywhere
 * in a parsed body (generation requests, /start_profile).
 *
 * Why refuse such a body: cJSON keeps both members and its lookup returns
 * the first, while Python's json (vLLM, SGLang, most gateways in front of
 * them) keeps the last. With {"max_tokens":1,"max_tokens":100000} a proxy
 * that checked one value and this engine would act on different requests.
 * RFC 8259 leaves the behaviour to the reader; refusing (400 naming the key)
 * is the one answer no reader can take differently. Every object is checked,
 * not only the members the engine reads: one rule, and a proxy may read
 * members the engine ignores.
 *
 * Cost: an object's keys are sorted (n log n) and compared in neighbours;
 * nodes are visited once. Depth is bounded by cJSON's nesting limit (1000),
 * so the recursion is too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Keys an object may have before the sort needs the heap. */
#define DUP_STACK_KEYS 32

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Bytes of a path kept for the repeated key itself ("." and 40 bytes of
 * key, "..." when clipped, and the NUL), so a deep path still names it. */
#define DUP_KEY_ROOM 48

/* Append ".key" (or "key" at the start) or "[i]" to path[0, len), leaving
 * `keep` bytes of cap unused: the new length. A part that does not fit ends
 * the path with "..." instead. */
static size_t path_add(char *path, size_t len, size_t cap, size_t keep, const char *key, int index)
{
    char part[64], k[52];
    int elided = len >= 3 && strcmp(path + len - 3, "...") == 0;
    if (key) {
        eng_clip_utf8(k, sizeof k, key, 40);
        snprintf(part, sizeof part, "%s%s", len && !elided ? "." : "", k);
    } else {
        snprintf(part, sizeof part, "[%d]", index);
    }
    size_t n = strlen(part);
    if (len + n + keep + 4 > cap) {
        if (len + keep + 4 <= cap && !elided) {
            memcpy(path + len, "...", 4);
            len += 3;
        }
        return len;
    }
    memcpy(path + len, part, n + 1);
    return len + n;
}

/* The first key of object o that another of its keys repeats, or NULL
 * (*oom = 1 when the sort could not get memory). */
static const char *repeated_key(const cJSON *o, int *oom)
{
    const char *stack[DUP_STACK_KEYS], **keys = stack, *dup = NULL;
    size_t n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, o)
        n++;
    if (n < 2)
        return NULL;
    if (n > DUP_STACK_KEYS && !(keys = malloc(n * sizeof *keys))) {
        *oom = 1;
        return NULL;
    }
    n = 0;
    cJSON_ArrayForEach(m, o)
        keys[n++] = m->string ? m->string : "";
    qsort(keys, n, sizeof *keys, cmp_key);
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            dup = keys[i];
    if (keys != stack)
        free(keys);
    return dup;
}

/* 1 with path naming the repeated key under v, 0 when there is none,
 * LL_ENOMEM. path[0, len) names v. */
static int dup_under(const cJSON *v, char *path, size_t len, size_t cap)
{
    int oom = 0, i = 0, rc;
    const cJSON *m;
    if (cJSON_IsObject(v)) {
        const char *dup = repeated_key(v, &oom);
        if (oom)
            return LL_ENOMEM;
        if (dup) {
            path_add(path, len, cap, 0, dup, 0);
            return 1;
        }
    } else if (!cJSON_IsArray(v)) {
        return 0;
    }
    cJSON_ArrayForEach(m, v) {
        const char *key = cJSON_IsObject(v) ? (m->string ? m->string : "") : NULL;
        size_t n = path_add(path, len, cap, DUP_KEY_ROOM, key, i++);
        if ((rc = dup_under(m, path, n, cap)) != 0)
            return rc;
        path[len] = '\0';
    }
    return 0;
}

int eng_json_dup_key(const cJSON *root, char *path, size_t pathlen)
{
    if (!path || pathlen < DUP_KEY_ROOM + 8)
        return LL_EINVAL;
    path[0] = '\0';
    return dup_under(root, path, 0, pathlen);
}
