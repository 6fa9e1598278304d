/* tokenizer_internal.h (internal to scenarios/, tokenizer.c and
 * tokenizer_encode.c only): the loaded tokenizer's tables, which tokenizer.c
 * fills from a tokenizer.json and tokenizer_encode.c reads. Apart from
 * scn_internal.h because it needs PCRE2's types (with the code unit width
 * set before pcre2.h), which the rest of the folder does not. Read-only once
 * scn_tokenizer_load returns. */
#ifndef LOADLAW_TOKENIZER_INTERNAL_H
#define LOADLAW_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "scenario.h"

typedef enum tk_behavior {
    TK_ISOLATED,
    TK_REMOVED,
    TK_MERGED_PREV,
    TK_MERGED_NEXT,
    TK_CONTIGUOUS
} tk_behavior;

/* One pre-tokenizer step. ByteLevel is a split step with its GPT-2 regex (or
 * none) plus the optional prefix space. */
typedef struct tk_step {
    pcre2_code *re;          /* NULL: no split (ByteLevel with use_regex false) */
    tk_behavior behavior;
    int invert;
    int add_prefix_space;
} tk_step;

typedef struct tk_added {
    char *text;
    size_t len;
    int32_t id;
} tk_added;

/* A merge: (left, right) -> merged, by rank. Open addressing, key UINT64_MAX = empty. */
typedef struct tk_merge {
    uint64_t key;
    int32_t rank;
    int32_t id;
} tk_merge;

struct scn_tokenizer {
    char **tok;              /* id -> bytes (NULL = unused id) */
    uint32_t *tok_len;
    int32_t n_ids;           /* max id + 1 */
    int32_t *vmap;           /* bytes -> id, open addressing on tok[], -1 = empty */
    size_t vmap_cap;         /* power of two */
    tk_merge *mmap;
    size_t mmap_cap;
    int32_t byte_id[256];    /* id of each single byte, -1 = none */
    int32_t unk_id;          /* -1 = unknown bytes are dropped, as tokenizers does */
    int ignore_merges;       /* a piece that is itself in the vocab is one token */
    LL_VEC(tk_added) added;
    unsigned char added_first[256]; /* bytes an added token can start with */
    LL_VEC(tk_step) steps;
};

/* The id of the token whose bytes are s[0..n), or -1 (tokenizer.c). */
int32_t scn_tk_vocab_find(const scn_tokenizer *t, const char *s, size_t n);
/* The merge of the pair (a, b), or NULL when there is none (tokenizer.c). */
const tk_merge *scn_tk_merge_find(const scn_tokenizer *t, int32_t a, int32_t b);

#endif
