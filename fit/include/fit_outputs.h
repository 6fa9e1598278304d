/* fit_outputs.h: were the recorded outputs (sweep --record-outputs) right?
 * Did B produce what A produced, by prompt key (fit/outputs.c); and do the
 * decode-time logprobs agree with the server's prefill of the same tokens
 * (check-decode, fit/check_decode.c: arithmetic only, sweep/ does the HTTP).
 * Errors: 0 or a negative LL_E* code with a message in err. */
#ifndef LOADLAW_FIT_OUTPUTS_H
#define LOADLAW_FIT_OUTPUTS_H

#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

typedef struct fit_outputs fit_outputs;

/* RUN_A and RUN_B: run directories or records.jsonl files; a run without
 * outputs is not an error. Free with fit_outputs_free. */
int fit_outputs_compare(const char *run_a, const char *run_b, fit_outputs **out, char *err, size_t errlen);
/* Within one run whose levels share prompts (--reuse-prompts): closed level
 * C = c_b against C = c_a, as one level at c_b. LL_EINVAL when the run
 * recorded no outputs or lacks either level. */
int fit_outputs_compare_levels(const char *run, int c_a, int c_b, fit_outputs **out, char *err, size_t errlen);
void fit_outputs_free(fit_outputs *o);
/* 1 when either run recorded outputs. */
int fit_outputs_recorded(const fit_outputs *o);
/* compare --json's "outputs" (NULL on no memory), and the section as text. */
cJSON *fit_outputs_to_json(const fit_outputs *o);
void fit_outputs_print(FILE *f, const fit_outputs *o);

typedef struct fit_outputs_example {
    int found;
    char key[48];
    size_t pos;                       /* first divergence in tokens; (size_t)-1: texts differ */
    char tok_a[64], tok_b[64];        /* the tokens there ("(end)" past a side's last) */
} fit_outputs_example;
typedef struct fit_outputs_level {
    int concurrency, open_loop;
    double rate_per_s;
    size_t n_pairs, n_identical, n_diverged;
    size_t n_positioned;              /* diverged pairs with a token position */
    double pos_p10, pos_p50;          /* of those positions */
    size_t n_topk_known;              /* diverged pairs with both sides' top-k there */
    size_t n_a_in_topb, n_b_in_topa, n_topk_ok; /* ok: both */
    double mean_abs_dlp;              /* over the common prefixes; NAN without logprobs */
    size_t n_lp_tok;                  /* tokens in that mean */
    double share_ok;                  /* (identical + top-k ok) / pairs; NAN when none */
    fit_outputs_example example;      /* the first pair that failed the check */
} fit_outputs_level;
/* The level with the lowest share_ok (NULL when none compared a pair). */
const fit_outputs_level *fit_outputs_worst(const fit_outputs *o);

typedef struct fit_check_decode fit_check_decode;
/* tolerance in nats; max_over: the gate's share of positions over it. NULL:
 * no memory. Free with fit_cd_free. */
fit_check_decode *fit_cd_new(double tolerance, double max_over);
/* One request's n positions: decode and prefill logprobs (NAN: skipped) and
 * prefill ranks (0: not said; rank may be NULL). 0 or LL_ENOMEM. */
int fit_cd_add(fit_check_decode *c, int level, int concurrency, const char *key, const double *decode_lp,
               const double *prefill_lp, const int *rank, size_t n);
size_t fit_cd_positions(const fit_check_decode *c); /* compared, over all levels */
double fit_cd_share_over(const fit_check_decode *c); /* over tolerance; NAN: none */
int fit_cd_passed(const fit_check_decode *c); /* positions compared, share <= max_over */
cJSON *fit_cd_to_json(const fit_check_decode *c); /* caller deletes; NULL: no memory */
void fit_cd_print(FILE *f, const fit_check_decode *c);
void fit_cd_free(fit_check_decode *c);

#endif
