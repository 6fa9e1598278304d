/* scn_keys.h (internal to scenarios/): the shape of the key table
 * (scenario_keys.c) and the machinery that reads it (scn_keyio.c: reading
 * JSON, setting from text, defaults; scn_keyout.c: writing JSON, the docs).
 *
 * A shape is the keys of one JSON object, one row each, in the order the
 * writer writes them. A row says what its value is (type, bounds or names),
 * where it lands (an offset into the struct the object fills), its default,
 * its remote default and its sweep flag (both as the text a flag takes, so
 * every one goes through the same setter), and its help. Rows that need
 * more than their type gives say so with a hook: read (the JSON value),
 * set (a flag's text), write (the run line's view), when (written only
 * when it says so). Hooks live beside the section they serve (ab.c,
 * workload.c, scenario_keys.c).
 *
 * Messages: every error is "ORIGIN: PATH: expected WHAT" (scn_bad), PATH the
 * key as a JSON path ("levels[2].concurrency"), WHAT the row's `what` or the
 * words its type and bounds give ("an integer in [1, 10000000]"); a flag's
 * is "expected FORM, got 'VALUE'" (the row's `form`, else the same words). */
#ifndef LOADLAW_SCN_KEYS_H
#define LOADLAW_SCN_KEYS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "scenario.h"
#include "scenario_keys.h"

typedef enum scn_ktype {
    SCN_K_INT,     /* int in [lo, hi]; with SCN_KF_NULL, lo - 1 means none (null) */
    SCN_K_NUM,     /* double in [lo, hi] (lo excluded with SCN_KF_LO_OPEN) */
    SCN_K_SECONDS, /* double seconds in [lo, hi]; a flag takes a duration ("30s", "2m") */
    SCN_K_U64,     /* uint64_t integer in [lo, hi] */
    SCN_K_BOOL,    /* int 0 or 1 */
    SCN_K_ENUM,    /* int: the index of its name in names */
    SCN_K_STR,     /* owned char *, non-empty; with names, one of them */
    SCN_K_JSON,    /* owned cJSON * object */
    SCN_K_OBJ,     /* an object of shape's keys, into the struct at off */
    SCN_K_INLINE,  /* shape's keys are this object's keys too (at(base), or base) */
    SCN_K_HOOK,    /* the hooks do everything */
    SCN_K_IGNORED, /* accepted and not read ($comment; what the run line adds) */
} scn_ktype;

enum {
    SCN_KF_NULL = 1 << 0,     /* null accepted: the default (STR, JSON: none; OBJ: off) */
    SCN_KF_REQUIRED = 1 << 1, /* absent is an error */
    SCN_KF_LO_OPEN = 1 << 2,  /* NUM: lo itself is refused */
    SCN_KF_OMIT0 = 1 << 3,    /* written only when not 0 / NULL: a run without it keeps its run line */
    SCN_KF_NOWRITE = 1 << 4,  /* read, never written */
    SCN_KF_ON = 1 << 5,       /* OBJ: the int at base + on is 1 once read (or set), 0 after null;
                               * written only when it is 1 */
    SCN_KF_CONST = 1 << 6,    /* ENUM: checked, stored nowhere, written as names[0] */
    SCN_KF_URL = 1 << 7,      /* STR: written redacted (ll_redact_url) */
    SCN_KF_SPEC = 1 << 8,     /* STR: written redacted (ll_redact_spec) */
    SCN_KF_PER_LEVEL = 1 << 9, /* INLINE, OBJ list: the struct is a scn_level; a flag sets every level */
    SCN_KF_SET_ON = 1 << 10    /* with SCN_KF_ON: the set hook turns the object on itself (a flag that
                                * picks some levels of every level it is offered) */
};

/* Where messages point: the file (or "(scenario)") and the caller's buffer. */
typedef struct scn_rd {
    const char *origin;
    char *err;
    size_t errlen;
} scn_rd;

typedef struct scn_shape scn_shape;
typedef struct scn_key scn_key;

struct scn_key {
    const char *name;           /* the JSON key in its object */
    scn_ktype type;
    size_t off;                 /* offsetof(the object's struct, field) */
    double lo, hi;
    const char *const *names;   /* ENUM, STR: NULL-ended */
    int offered;                /* ENUM: only the first `offered` names are said and set
                                 * from text (0: all); the rest are read back from a run line */
    const scn_shape *shape;     /* OBJ, INLINE */
    unsigned flags;             /* SCN_KF_* */
    size_t on;                  /* SCN_KF_ON: offsetof the presence int */
    const char *what;           /* what a file's value must be; NULL: from type and bounds */
    const char *form;           /* what a flag's value must be; NULL: what, or from the type */
    const char *def, *rdef;     /* default (scn_new) and remote default (scn_remote_defaults),
                                 * as a flag's text; NULL: none (zero) */
    const char *flag;           /* `loadlaw sweep --FLAG`, NULL: none */
    const char *arg;            /* the flag's value in its help ("N"); NULL for BOOL */
    const char *flag_val;       /* BOOL: the text the flag sets (NULL: "true") */
    const char *flag_help;      /* the flag's help, when not help */
    const char *help;           /* what the key does (docs/scenarios.md) */
    /* hooks (NULL: the type's own behaviour) */
    /* base: the struct of the object the key is in; path: the key's own */
    int (*read)(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                void *base);
    int (*set)(const scn_key *k, void *base, const char *text); /* 0, LL_EINVAL or LL_ENOMEM */
    int (*write)(cJSON *o, const scn_key *k, const void *base);
    int (*when)(const void *base);              /* written only when 1 */
    int (*check)(const char *v, char *why, size_t n); /* STR: 0 when good; else why, or "" for `what` */
    void *(*at)(void *base);                    /* INLINE: the struct its keys fill */
};

struct scn_shape {
    const scn_key *keys;
    size_t n;
    /* after every key was read: checks between keys (NULL: none) */
    int (*done)(scn_rd *c, const char *path, void *base);
};

#define SCN_SHAPE(rows, done_fn) {rows, sizeof rows / sizeof rows[0], done_fn}

/* The table (scenario_keys.c): the root object, and the shapes of a level
 * (load's defaults for every level, and each of levels[]). */
extern const scn_shape scn_root_shape;
extern const scn_shape scn_level_shape;

/* ---- reading (scn_keyio.c) ---- */

/* "ORIGIN: PATH: expected WHAT" in c->err; LL_EINVAL. The one error helper. */
int scn_bad(const scn_rd *c, const char *path, const char *what);
/* path.key (path "" at the top level) into out. */
void scn_join(char *out, size_t n, const char *path, const char *key);
/* Every member of o a key of shape (or of a shape inlined in it), each
 * once; then each key read into base, then the shape's done. */
int scn_read_shape(scn_rd *c, const cJSON *o, const char *path, const scn_shape *sh, void *base);
/* Typed getters for hooks: v (not NULL) checked and stored; the message
 * names path. */
int scn_get_int(scn_rd *c, const cJSON *v, const char *path, double lo, double hi, int *out);
int scn_get_str(scn_rd *c, const cJSON *v, const char *path, const char *what, char **out);
/* The row's own reading of v (for a read hook that adds a check). */
int scn_read_value(scn_rd *c, const scn_key *k, const cJSON *v, const char *path, void *base);
/* A row's text (a flag's value, a default) into base: 0, LL_EINVAL, LL_ENOMEM. */
int scn_key_set_at(const scn_key *k, void *base, const char *text);
/* What a row's value must be, for messages: json 1 in a file's terms, 0 in
 * a flag's. */
void scn_key_what(const scn_key *k, int json, char *out, size_t n);
/* The defaults (remote 0) or remote defaults (remote 1) of every key
 * reachable from the root, into s (levels: s->levels[0]). */
int scn_keys_defaults(scn_scenario *s, int remote);
/* A fresh level's defaults (scn_level_shape). */
void scn_level_defaults(scn_level *l);

/* ---- writing (scn_keyout.c) ---- */

/* shape's keys of base into object o, in the table's order. 0 or LL_ENOMEM. */
int scn_write_shape(cJSON *o, const scn_shape *sh, const void *base);

/* ---- hooks, by the file that holds them ---- */

/* scenario_load.c: levels, headers, the target's checks, lengths */
int scn_levels_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                    void *base);
int scn_levels_set(const scn_key *k, void *base, const char *text);
int scn_levels_write(cJSON *o, const scn_key *k, const void *base);
int scn_concurrency_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                         void *base);
void *scn_first_level(void *base);
int scn_requests_write(cJSON *o, const scn_key *k, const void *base);
int scn_rate_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                  void *base);
int scn_url_check(const char *v, char *why, size_t n);
int scn_path_check(const char *v, char *why, size_t n);
int scn_path_write(cJSON *o, const scn_key *k, const void *base);
int scn_headers_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                     void *base);
int scn_headers_write(cJSON *o, const scn_key *k, const void *base);
int scn_dist_set(const scn_key *k, void *base, const char *text);
/* --profile C[:STEPS]: the capture on the levels of concurrency C (base: a
 * level; the others are left as they are). */
int scn_profile_set(const scn_key *k, void *base, const char *text);
int scn_prompts_done(scn_rd *c, const char *path, void *base);
/* workload.c: load.trace, load.shared_prefix */
int scn_trace_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                   void *base);
int scn_trace_set(const scn_key *k, void *base, const char *text);
int scn_trace_write(cJSON *o, const scn_key *k, const void *base);
int scn_trace_format_write(cJSON *o, const scn_key *k, const void *base);
int scn_trace_rows_write(cJSON *o, const scn_key *k, const void *base);
int scn_window_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                    void *base);
int scn_window_set(const scn_key *k, void *base, const char *text);
int scn_window_write(cJSON *o, const scn_key *k, const void *base);
int scn_prefix_set(const scn_key *k, void *base, const char *text);
int scn_has_prefix(const void *base);
/* sessions.c */
int scn_has_sessions(const void *base);
/* ab.c */
int scn_side_name_check(const char *v, char *why, size_t n);
int scn_side_done(scn_rd *c, const char *path, void *base);
int scn_ab_done(scn_rd *c, const char *path, void *base);
int scn_speedup_read(scn_rd *c, const scn_key *k, const cJSON *parent, const cJSON *v, const char *path,
                     void *base);
int scn_speedup_write(cJSON *o, const scn_key *k, const void *base);

#endif
