/* fit_outputs.h: were the recorded outputs (sweep --record-outputs) right?
 * Did B produce what A produced, by prompt key (fit/outputs.c); and do the
 * decode-time logprobs agree with the server's prefill of the same tokens
 * (check-decode, fit/check_decode.c: arithmetic only, sweep/ does the HTTP).
 * Tables and JSON: reports/report.h. Errors: 0 or a negative LL_E* code
 * with a message in err. */
#ifndef LOADLAW_FIT_OUTPUTS_H
#define LOADLAW_FIT_OUTPUTS_H

#include <stddef.h>

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
    double share_ok, share_identical; /* (identical + top-k ok) / pairs, identical / pairs; NAN: none */
    fit_outputs_example example;      /* the first pair that failed the check */
} fit_outputs_level;
/* What was compared, and what could not be and why ([0] A, [1] B). */
struct fit_outputs {
    size_t n_levels;
    fit_outputs_level *levels;        /* in A's order */
    fit_outputs_level all;            /* every level together */
    size_t n_req[2];                  /* measured ok requests read (0: no outputs recorded) */
    size_t n_with_outputs[2], n_with_lp[2], n_with_top[2], n_with_ids[2]; /* of those */
    size_t n_unmatched[2];            /* no request of the same key and level on the other side */
    size_t n_text_only;               /* pairs compared by text hash only (no token position) */
    size_t n_nothing;                 /* pairs where the sides share no kind of output */
};
/* The level with the lowest share_ok (NULL when none compared a pair). */
const fit_outputs_level *fit_outputs_worst(const fit_outputs *o);

/* One level's check, or every level's (level = concurrency = -1). A
 * position disagrees when |decode lp - prefill lp| is over its bound, or
 * when prefill ranks another token first by more than that bound (a rank
 * miss); the gate counts positions that disagree. */
typedef struct fit_cd_stats {
    int level, concurrency;
    size_t n_req, n_pos;              /* requests; positions with both logprobs */
    size_t n_over, n_ranked, n_rank1; /* |delta| over the bound; with a prefill rank; rank 1 */
    size_t n_rank_miss, n_disagree;   /* another token first beyond the bound; over or a miss */
    double sum_abs, mean_abs, max_abs; /* |decode lp - prefill lp|, nats; mean NAN: no position */
    double share_over, share_rank1;   /* of n_pos, of n_ranked; NAN without any */
    double share_disagree;            /* of n_pos; NAN without any */
    char worst_key[48];               /* where max_abs is: prompt key, position */
    size_t worst_pos;
    double worst_decode, worst_prefill;
} fit_cd_stats;
/* The arithmetic the server computes in, which sets how far decode and
 * prefill may differ by rounding alone (fit/check_decode.c "The bound"). */
typedef enum fit_cd_dtype { FIT_CD_FP32, FIT_CD_BF16, FIT_CD_FP16, FIT_CD_DTYPE__COUNT } fit_cd_dtype;
/* "fp32", "bf16", "fp16" (also "float32", "bfloat16", "float16"): 0, or LL_EINVAL. */
int fit_cd_dtype_parse(const char *s, fit_cd_dtype *out);
const char *fit_cd_dtype_name(fit_cd_dtype d);
typedef struct fit_check_decode {
    double tolerance, max_over;       /* as given to fit_cd_new */
    fit_cd_dtype dtype;
    double rel;                       /* the bound's rounding term: tolerance + rel * (1 + |prefill lp|) */
    fit_cd_stats all;
    fit_cd_stats *levels;             /* in the order first seen */
    size_t n_levels;
} fit_check_decode;
/* tolerance in nats (the bound's absolute part); dtype: the server's
 * arithmetic (the bound's rounding part); max_over: the gate's share of
 * positions that disagree. NULL: no memory. Free with fit_cd_free. */
fit_check_decode *fit_cd_new(double tolerance, fit_cd_dtype dtype, double max_over);
/* The bound at a position whose prefill logprob is lp (nats). */
double fit_cd_bound(const fit_check_decode *c, double lp);
/* One request's n positions: decode and prefill logprobs (NAN: skipped),
 * prefill's first-ranked logprob at each (NAN: not said; may be NULL) and
 * prefill ranks (0: not said; may be NULL). 0 or LL_ENOMEM. */
int fit_cd_add(fit_check_decode *c, int level, int concurrency, const char *key, const double *decode_lp,
               const double *prefill_lp, const double *prefill_top_lp, const int *rank, size_t n);
size_t fit_cd_positions(const fit_check_decode *c); /* compared, over all levels */
double fit_cd_share_disagree(const fit_check_decode *c); /* NAN: none compared */
int fit_cd_passed(const fit_check_decode *c); /* positions compared, share disagreeing <= max_over */
void fit_cd_free(fit_check_decode *c);

#endif
