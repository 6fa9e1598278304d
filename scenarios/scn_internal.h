/* scn_internal.h (internal to scenarios/): what the folder's files share:
 * the scenario's own seams (scenario.c; the key table and its reader and
 * writer: scn_keys.h), and the sections kept in files of their own so each
 * stays one job (ab.c, workload.c, trace.c, sessions.c). */
#ifndef LOADLAW_SCN_INTERNAL_H
#define LOADLAW_SCN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#include <cjson/cJSON.h>

#include "scenario.h"

typedef struct scn_rd scn_rd; /* where messages point (scn_keys.h) */

/* ---- the scenario (scenario.c) ---- */

/* Names of scn_endpoint, scn_arrival and scn_stamp, by value, NULL-ended:
 * what the loader accepts and scn_to_json writes. */
extern const char *const scn_endpoint_names[];
extern const char *const scn_arrival_names[];
extern const char *const scn_stamp_names[];
/* 0 for a "Name: value" header line that is safe to send as one header. */
int scn_check_header(const char *h);
/* scn_validate with c naming the scenario in messages (the loader's file
 * name or "(scenario)"). */
int scn_validate_origin(scn_scenario *s, const scn_rd *c);

/* ---- the "ab" section (ab.c; its keys are scenario_keys.c's) ---- */

/* Checks that need the whole scenario (no url; the gate's C is a level). */
int scn_ab_validate(const scn_scenario *s, const scn_rd *c);
void scn_ab_free(scn_ab *ab);

/* ---- load.trace and load.shared_prefix (trace.c, workload.c) ---- */

/* Mooncake's prefix blocks: hash_ids name blocks of this many tokens. */
#define SCN_TRACE_BLOCK_TOK 512

typedef struct scn_trace_row {
    int64_t send_ns;         /* after the level's start (speed applied) */
    int in_tok, out_tok;     /* out_tok >= 1 */
    size_t hash_at, n_hash;  /* its block hashes: hashes.v[hash_at .. +n_hash) */
} scn_trace_row;

struct scn_trace {
    LL_VEC(scn_trace_row) rows;
    LL_VEC(int64_t) hashes;
    const char *format;      /* "mooncake", "azure", "burstgpt" (static) */
    /* what it was read with: a scenario whose trace keys change after it is
     * read (the command line's --trace, --trace-speed, --trace-window over a
     * scenario's load.trace) reads it again (workload.c) */
    char *path;
    double speed, start_s, end_s;
};
typedef struct scn_trace scn_trace;

/* Read a trace file (trace.c says the formats and checks). 0, or LL_EINVAL
 * with "PATH:LINE: COLUMN: what" in err, or LL_ENOMEM. */
int scn_trace_load(const char *path, double speed, double start_s, double end_s, scn_trace **out, char *err,
                   size_t errlen);
void scn_trace_free(scn_trace *t);

/* Read the trace (when named and not read yet) and give the scenario its one
 * trace level; check what may not stand beside it (workload.c). */
int scn_workload_validate(scn_scenario *s, const scn_rd *c);
void scn_workload_free(scn_scenario *s);
/* ---- load.sessions (sessions.c) ---- */

/* Checks beside the rest of the scenario, and each level's requests made
 * sessions x turns. */
int scn_sessions_validate(scn_scenario *s, const scn_rd *c);
void scn_sessions_free(scn_scenario *s);
/* prompts.c: w seeded words of the synthetic vocabulary appended to b (a
 * space before each unless b ends in one). */
int scn_add_words(ll_buf *b, int w, ll_rng *r);
/* prompts.c: ShareGPT conversations kept for sessions: how many, and the
 * human message of turn (1-based) of conversation conv mod count (NULL
 * past its last). */
size_t scn_prompts_n_convs(const scn_prompts *p);
const char *scn_prompts_conv_turn(const scn_prompts *p, size_t conv, int turn);

/* ---- the prompt set (prompts.c; prompt_fit.c fits its lengths) ---- */

typedef struct prompt {
    char *text;
    int words;      /* whitespace-separated words in text */
    int target_tok; /* tokens it was built to; 0 = not built to a token length */
    int asked_tok;  /* prompt_tokens' draw for it (synthetic prompts); 0 = not asked in tokens */
    int fitted;     /* 1: fitted with the head it is sent with inside target_tok (prompt_fit.c) */
    int64_t send_ns; /* trace: its send time after the level's start; else -1 */
    int max_tok;     /* trace: its output length; else 0 (the scenario's max_tokens) */
    size_t head_at;  /* where a per-request head may go (scn_prompt_head_at) */
    int group;       /* load.shared_prefix: its prefix's group; else -1 */
} prompt;

struct scn_prompts {
    LL_VEC(prompt) set;
    /* load.sessions from ShareGPT: each conversation's human turns, in
     * order (turns.v[conv.v[c]] .. up to the next conversation's start) */
    LL_VEC(char *) turns;
    LL_VEC(size_t) conv;
    scn_tokenizer *tok; /* the scenario's tokenizer_path, or NULL */
};

/* Whitespace-separated words in s. */
int scn_count_words(const char *s);

/* A path a scenario names: relative to the scenario's folder when a file is
 * there, else as given (relative to the cwd). */
void scn_resolve_path(const scn_scenario *s, const char *name, char *path, size_t size);

#endif
