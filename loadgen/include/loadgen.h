/* loadgen.h: drive an OpenAI-compatible endpoint through a scenario's levels
 * and record every token's arrival.
 *
 * DESIGN: lg_run_sweep runs on the caller's thread (the "driver"). For each
 * level it starts `threads` worker threads; each owns one libcurl multi handle,
 * its transfers, buffers and counters. Workers share only atomics (next request
 * index, stop flag, progress counters) and the records writer (common/
 * records.h), into whose queue each finished request is handed as a struct:
 * workers stamp and parse, the writer thread formats and writes. Timestamps
 * are ll_now_ns() taken in the curl write callback on the worker thread,
 * stored relative to the run epoch (ll_rec_epoch_ns of the writer). The driver
 * sleeps on a condition variable that workers signal when something it
 * watches changes (see run.c). loadgen computes no latency statistic: every
 * figure comes from the records, through fit.
 *
 * The caller (cli/) owns the target and the records writer: loadgen knows only
 * a base URL ("http://127.0.0.1:40123"; "/v1/chat/completions" or
 * "/v1/completions" goes after its path and before its query, ll_url_join:
 * ".../deployments/d?api-version=1" keeps its query on every request and on
 * /start_profile). curl_global_init must have been called
 * before lg_run_create.
 *
 * Errors: 0 or a negative LL_E* code (common.h) with a message in err.
 */
#ifndef LOADLAW_LOADGEN_H
#define LOADLAW_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "scenario.h"

typedef struct lg_run lg_run;

/* One sweep driven from K processes ("ranks"; dist/dist_mpi.c under MPI).
 * loadgen knows nothing of MPI: it gives rank r its share of each level (C_r
 * and the requests differ by at most one between ranks, an open level's rate
 * is R/K; request ids id*K + r; prompts indexed i*K + r, so the K ranks send
 * the prompts one process would) and calls the hooks on the driver thread,
 * never on a worker, so the transport never runs inside libcurl callbacks.
 * Rank 0 writes the level lines with the whole level; the others write
 * their own share into their own records. */
/* A level's progress: this process's part, or (rank 0) the whole. */
typedef struct lg_progress {
    int level, done, total, errors, inflight;
    long long tokens;
} lg_progress;

/* How often the driver wakes during a level for the progress line and the
 * lg_dist tick. */
#define LG_TICK_NS 250000000LL

/* before_level's stop: why this process runs no more levels (0: it goes on). */
#define LG_STOP_INTERRUPTED 1 /* lg_run_interrupt */
#define LG_STOP_FAILED 2      /* a level over lg_config.max_failed (lg_run_stopped_after) */

typedef struct lg_dist {
    int rank, ranks;
    /* Before level `level` starts. stop: 0, or why this process stops
     * (LG_STOP_*; the hook tells the others). Every rank must call it for
     * the same levels: it returns 0 to run the level, having slept to the
     * level's agreed start, with *epoch_ns set to run time 0 on this
     * process's CLOCK_MONOTONIC (this level's records are written on that
     * clock: rank 0's run clock); LL_EINTR when any rank asked to stop;
     * another code on failure (message in err). */
    int (*before_level)(void *ctx, int level, int stop, int64_t *epoch_ns, char *err, size_t errlen);
    /* After the level's workers are joined, before its level_end is queued:
     * rank 0 adds the other ranks' counts into *le (and has queued their
     * request records); the others send theirs. 0 or a code with err. */
    int (*after_level)(void *ctx, int level, ll_rec_level_end *le, char *err, size_t errlen);
    /* Every LG_TICK_NS while a level runs: mine is this process's part; on
     * rank 0 *all becomes the whole level's for the progress line (it starts
     * as a copy of mine). It is also the ranks' heartbeat. May be NULL. */
    void (*tick)(void *ctx, const lg_progress *mine, lg_progress *all);
    void *ctx;
} lg_dist;

/* After level `done` ended (its level_end queued), when no later level is
 * planned: 1 with *next filled to run it as the next level (its index is
 * done + 1), 0 to end the run, or a negative LL_E* code with a message in
 * err. Called on the driver thread, never with lg_dist (one process); not
 * after an interrupt or a stop over max_failed. */
typedef int lg_next_level_fn(void *ctx, int done, scn_level *next, char *err, size_t errlen);

typedef struct lg_config {
    const scn_scenario *scn;     /* levels and request shape (read-only, outlives the run) */
    const scn_prompts *prompts;  /* read-only, outlives the run */
    const char *url;             /* base URL, required */
    const char *model;           /* sent as "model"; required */
    const char *api_key;         /* Bearer token or NULL; never logged or recorded */
    const char *profile_dir;     /* where the server writes its profiler traces, as seen from
                                  * this host (NULL: not known): the profile hook waits for the
                                  * files there to stop growing and names them in its record */
    ll_rec_writer *records;      /* required; opened and closed by the caller (it
                                  * outlives lg_run_free) */
    const char *engine_spec;     /* run record "engine" (NULL for a remote server) */
    const char *engine_backend;  /* run record "backend" (NULL for a remote server) */
    const ll_rec_engine_law *engine_law; /* run record "engine_law" (NULL or !present: none) */
    const char *scenario_name;   /* run record "scenario" */
    int threads;                 /* 0 = scn->threads, then number of cores */
    int progress;                /* 1: a progress line on stderr (caller checks isatty) */
    const lg_dist *dist;         /* NULL: this process is the whole load (borrowed) */
    /* stop_on_failed: after a level where more than max_failed (a fraction)
     * of the measured requests failed, send no later level (a server that
     * died would get every one of them as an instant error). The level's own
     * records stay whole. Under lg_dist rank 0 judges the whole level and the
     * hook stops the others (LG_STOP_FAILED). 0: every level runs. */
    int stop_on_failed;
    double max_failed;
    /* Levels placed as the run goes (sweep --find): NULL, the scenario's
     * levels only. Not with dist. */
    lg_next_level_fn *next_level;
    void *next_ctx;
} lg_config;

/* Set up the workers and queue the run line (ll_rec_put_run). */
int lg_run_create(const lg_config *cfg, lg_run **out, char *err, size_t errlen);

/* Run every level. Returns 0 when all levels ran, or the run stopped after
 * a level of too many failures (lg_run_stopped_after; failed requests are
 * data, not errors), LL_EINTR when lg_run_interrupt stopped it (the records
 * are valid), or another error code. */
int lg_run_sweep(lg_run *r, char *err, size_t errlen);

/* Stop issuing requests; in-flight ones may finish until `drain_s` from now,
 * then they are aborted (recorded as error_class "other"). Safe to call from
 * any thread (a signal-handling thread), not from a signal handler. */
void lg_run_interrupt(lg_run *r, double drain_s);
int lg_run_interrupted(const lg_run *r);
/* The level after which lg_run_sweep stopped because too many of its
 * requests failed (lg_config.stop_on_failed; later levels were not sent),
 * or -1: none was over, or the run had no level after it. */
int lg_run_stopped_after(const lg_run *r);

/* A scenario's load.source_addrs (--source-addrs) as lg_run_create will take
 * it: NULL or "auto", "off", or a list of addresses (and IPv4 ranges A-B)
 * each of which can be bound on this host (loadgen/srcaddr.h says what each
 * does). 0, or LL_EINVAL / LL_ENOMEM with a one-line reason in err. */
int lg_source_addrs_check(const char *spec, char *err, size_t errlen);

/* Measured (non-warmup) requests finished so far, all levels: ok and failed.
 * Safe from any thread. */
void lg_run_counts(const lg_run *r, size_t *ok, size_t *failed);

/* Free everything; the records writer stays open (the caller closes it). */
int lg_run_free(lg_run *r);

/* What this run sends as prompt i of its set, for fitting prompt lengths
 * before the first level (scenario.h scn_prompts_fit; an scn_head_fn with r
 * as its context): 1 and the head that request carries in front of it (""
 * when prompts are reused), or 0 when this rank does not send prompt i
 * (another rank's, or a trace or sessions, which make their own heads). */
int lg_run_prompt_head(void *r, size_t i, char *out, size_t size);
/* How many of the set's prompts the run's levels send, from the first: the
 * sum of their requests (fresh prompts) or the largest level (reused), or
 * SIZE_MAX when a level runs for a duration. */
size_t lg_run_prompts_sent(const lg_run *r);

/* ---- re-scoring a decoded output through prefill (rescore.c) ----
 * For `loadlaw check-decode`: the recorded prompt plus the tokens a request
 * decoded, sent back to the server with prompt logprobs asked (vLLM's
 * "prompt_logprobs", or SGLang /generate's "return_logprob" with
 * "logprob_start_len"), and the scores of the output's positions read back.
 * One blocking HTTP transfer per call (two for /generate with ids: the
 * prompt's ids first); callable from any thread. */
typedef struct lg_rescore_req {
    const char *url;           /* the endpoint's full URL (…/v1/chat/completions, …/v1/completions, …/generate) */
    const char *api_key;       /* NULL: none; never logged */
    const char *model;         /* NULL: not sent (nor ever to /generate) */
    scn_endpoint endpoint;     /* the API the run called (lg_rescore_supported): chat's
                                * prompt_json is the messages array, completions' the
                                * prompt string, /generate's its "text" */
    const char *prompt_json;   /* the prompt as recorded (records.h ll_rec_outputs.prompt) */
    const char *output;        /* the decoded text, token by token as streamed */
    const int64_t *ids;        /* generate: (n_tok) the decoded token ids, sent back as
                                * ids; NULL: the text is sent */
    size_t n_tok;              /* tokens in output: the last n_tok prompt positions */
    int top_k;                 /* alternatives per position (0..20) */
    double timeout_s;          /* each transfer; <= 0: 600 s */
} lg_rescore_req;

typedef struct lg_rescore {
    size_t n;                  /* = n_tok */
    double *lp;                /* (n) the output token's prefill logprob, NAN where null */
    int *rank;                 /* (n) its rank (1 = prefill's argmax), 0 when not said; from
                                * SGLang its place among the top_k, top_k + 1 below them */
    double *top_lp;            /* (n) the logprob of prefill's first-ranked token there (the
                                * output token's own when it is first), NAN when not said */
    int64_t *id;               /* (n) the token id the server scored, -1 when not said */
    char **tok;                /* (n) its decoded text, NULL when not said */
    int unsupported;           /* the server cannot return prompt logprobs (refused, or sent none) */
} lg_rescore;

/* 0 with *out filled (free with lg_rescore_free); LL_EINVAL with
 * out->unsupported set when the server refused prompt logprobs (a 4xx) or
 * answered without them, LL_EINVAL alone for a prompt_json of the wrong
 * shape, LL_EIO (unreachable, 5xx), LL_EPARSE (fewer positions than
 * tokens), LL_ENOMEM; a one-line reason in err. */
int lg_rescore_run(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen);
void lg_rescore_free(lg_rescore *r);
/* 1 when the API has a way to ask for prompt logprobs (chat, completions,
 * generate; not responses). */
int lg_rescore_supported(scn_endpoint e);
/* ---- end re-scoring ---- */

#endif
