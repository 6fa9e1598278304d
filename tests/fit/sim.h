/* sim.h (tests/fit): a discrete-event continuous-batching engine that writes a
 * records.jsonl with known phases, for testing fit/ without real time.
 *
 * Each step admits waiting requests (send <= step start) up to a prefill
 * budget, lasts law(n_decode) + p*prefill_tok (times (1 + jitter*z)), and at
 * its end gives one token to every decoding sequence and the first token to
 * each request prefilled in it. Closed loop: a finished request is replaced
 * at once. Because every event sits on a step boundary, the truth is known:
 * a stream's gap is one step, N is that step's n_decode, and the sample is
 * steady exactly when the step had no prefill. The simulator counts these. */
#ifndef LOADLAW_TEST_FIT_SIM_H
#define LOADLAW_TEST_FIT_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "fit.h"

#define SIM_MAX_LEVELS 12

/* Step jitter: NORMAL: law * (1 + j*z), symmetric (mean = median = law);
 * EXP: law * (1 + j*E), E ~ Exp(1) (mean law*(1+j), median law*(1+j ln 2));
 * LOGNORMAL: law * exp(j*z) (median law, mean law*exp(j^2/2)). The two
 * skewed ones are what a real engine shows: right tails (a late kernel,
 * an allocator stall), never a step faster than the work. */
enum { SIM_JITTER_NORMAL = 0, SIM_JITTER_EXP = 1, SIM_JITTER_LOGNORMAL = 2 };

typedef struct sim_cfg {
    double a_ms, b_ms;          /* step = a + b*N ... */
    double knee_n, b2_ms;       /* ... + (b2 - b)*(N - knee) above the knee (knee 0: none) */
    double knee2_n, b3_ms;      /* ... + (b3 - b2)*(N - knee2) above a second knee (0: none) */
    double c2_ms;               /* ... + c2*N^2 (curvature; 0: none) */
    double p_ms_per_tok;        /* prefill cost per prompt token */
    double jitter_frac;         /* relative size of the jitter per step (below) */
    int jitter_kind;            /* SIM_JITTER_*: how a step's time is drawn around law(N) */
    uint64_t seed;
    int prompt_tok, max_tokens, think_tok;
    int prefill_per_step;       /* requests prefilled per step (0 = all waiting) */
    int n_levels;
    int conc[SIM_MAX_LEVELS], n_requests[SIM_MAX_LEVELS], warmup[SIM_MAX_LEVELS];
    int fail_every;             /* every k-th request fails halfway (0 = none) */
    double open_interval_ms;    /* > 0: open loop, one request every interval, no cap */
    int stall_every;            /* every k-th step lasts stall_ms longer (0 = none) */
    double stall_ms;
    int64_t kill_ns;            /* stop the run at this time (0 = never) */
    int write_steps;            /* write engine step records */
    int write_truth;            /* write engine_law in the run line */
    double time_scale;          /* > 0: engine_law.time_scale in the run line (the
                                 * law as played is the law as written times it) */
    int truncate_tail;          /* append half a line without '\n' */
    int schema;                 /* run line schema (0 -> 1) */
    int burst_every;            /* > 0: in level burst_level a CPU-starved client reads
                                 * every burst_every-th chunk's time only, and stamps
                                 * the chunks collected since its last read 20 us apart
                                 * from then (0 = none) */
    int burst_level;
    int write_client;           /* level_end "client" (records.h ll_rec_client): 1 thread,
                                 * CPU time client_busy[l] of the level's wall time, one
                                 * token chunk per read unless client_events_per_read[l] */
    double client_busy[SIM_MAX_LEVELS];
    double client_events_per_read[SIM_MAX_LEVELS];
    const char *endpoint;       /* the run line's target.endpoint; NULL = "chat" */
    int prompt_tok_target;      /* > 0: requests carry "prompt_tok_target" */
    int usage_prompt_tok;       /* > 0: requests carry usage {prompt_tokens: this,
                                 * completion_tokens: their tokens} */
    int attributed_every;       /* every k-th request's counts are "attributed" and its
                                 * stream counted half its tokens (0 = none) */
    double c_ms_per_ktok;       /* ... + c * K/1000, K the decoding requests' context
                                 * (their prompts plus the tokens they have had) */
    double prompt_spread;       /* > 0: each request's prompt is prompt_tok * U(1 - s, 1 + s) */
    int buckets;                /* 1: the law's N is padded to 1, 2, 4, then multiples of 8 */
    /* The network between server and client (the server's steps are not
     * touched, only when the client sees each chunk; a stream's chunks stay
     * in order, as TCP delivers them): */
    double loss_share;          /* a chunk lost and resent loss_delay_ms later, with
                                 * every later chunk of its stream held behind it */
    double loss_delay_ms;
    double partition_ms;        /* > 0: the link is down partition_ms from partition_at_ms
                                 * after level partition_level's start: no request can
                                 * start or end, and to the client every stream waits
                                 * one step partition_ms longer than the law */
    double partition_at_ms;
    int partition_level;
} sim_cfg;

typedef struct sim_level_stats {
    int64_t start_ns, ramp_end_ns; /* ramp_end -1 if D never reached C */
    double ramp_tokens;
    long samples, steady;          /* of included (ok, non-warmup) requests */
    long steady_at_c;
    int failed;
} sim_level_stats;

typedef struct sim_stats {
    sim_level_stats lv[SIM_MAX_LEVELS];
    long steps, prefill_free_steps;
    int levels_written;
} sim_stats;

void sim_default(sim_cfg *c);
/* n closed-loop levels at concurrencies conc[], per_c * C requests each. */
void sim_set_levels(sim_cfg *c, const int *conc, int n, int per_c);
/* n open-loop levels (no cap) of `requests` each, one every interval_ms. */
void sim_set_open(sim_cfg *c, int n, int requests, double interval_ms);
/* Writes path; returns 0 or -1 (errno set). */
int sim_write(const char *path, const sim_cfg *c, sim_stats *st);
/* Load records and analyse them (opt NULL: defaults): 0 with *run and *res
 * set (the caller frees both), else -1 with why in err and nothing set. */
int sim_load_fit(const char *path, const fit_options *opt, fit_run **run, fit_result **res, char *err,
                 size_t errlen);
/* sim_write, then sim_load_fit. */
int sim_fit(const char *path, const sim_cfg *c, const fit_options *opt, sim_stats *st, fit_run **run,
            fit_result **res, char *err, size_t errlen);
/* Truth of the law at N (ms): the step before jitter. */
double sim_law(const sim_cfg *c, double n);
/* The true MEAN step at N (ms): law(N) times the jitter's mean factor (stalls
 * not included). */
double sim_mean_step(const sim_cfg *c, double n);

#endif
