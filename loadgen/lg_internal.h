/* lg_internal.h (internal to loadgen/): the run, its workers and transfers.
 *
 * Ownership: lg_run owns the workers (one CURLM each, kept across levels so
 * connections are reused); a worker owns its in-flight transfers (a list) and
 * the results of the current level; a transfer owns its easy handle, request
 * body, parser state and chunk list until xfer_done frees it. */
#ifndef LOADLAW_LOADGEN_INTERNAL_H
#define LOADLAW_LOADGEN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <curl/curl.h>

#include "loadgen.h"
#include "sse.h"

typedef struct lg_chunk {
    int64_t t_ns;      /* CLOCK_MONOTONIC arrival */
    int32_t tok;
    char kind;         /* LG_KIND_THINK / LG_KIND_ANSWER */
} lg_chunk;

/* What statistics need from one finished request (absolute monotonic ns; -1 = none). */
typedef struct lg_result {
    int warmup;
    lg_err_class cls;
    int64_t intended_ns, send_ns, first_tok_ns, first_answer_ns, last_tok_ns, end_ns;
    int think_tok, answer_tok;
    int64_t usage_completion;
} lg_result;

/* One level as the workers see it: read-only except the atomics. */
typedef struct lg_level_ctx {
    int index;
    const scn_level *lv;
    int total;                 /* warmup + measured */
    int warmup;
    int64_t start_ns, deadline_ns;  /* deadline 0 = none */
    uint64_t seed;
    atomic_int next;           /* closed loop: next request index to issue */
} lg_level_ctx;

typedef struct lg_worker lg_worker;

typedef struct lg_xfer {
    lg_worker *w;
    CURL *easy;
    struct lg_xfer *prev, *next;   /* worker's in-flight list */
    uint64_t id;
    int req_index, warmup, prompt_words;
    int64_t intended_ns, send_ns, header_ns, first_tok_ns, first_think_ns, first_answer_ns, end_ns;
    int64_t now_ns;                /* arrival time of the bytes being parsed */
    long http_status;
    int status_known;
    ll_buf body, errbody;
    lg_sse sse;
    lg_delta delta;
    lg_chunk *chunks;
    size_t n_chunks, cap_chunks;
    int think_tok, answer_tok;
    int aborted;
    char curl_err[CURL_ERROR_SIZE];
} lg_xfer;

struct lg_worker {
    lg_run *run;
    int index;
    CURLM *multi;
    struct curl_slist *headers;
    pthread_t thread;
    /* current level */
    lg_level_ctx *lvl;
    int slots;                     /* closed: requests in flight; open: cap (0 = none) */
    int stride, offset;            /* open loop: this worker's arrivals k = offset + i*stride */
    int inflight;
    lg_xfer *head;
    lg_result *res;
    size_t n_res, cap_res;
    ll_pct *itl_ms;
    ll_buf line;                   /* record line scratch */
    int rc;
    char err[256];
};

struct lg_run {
    char *url_full, *url_base, *model, *api_key, *run_dir;
    const scn_scenario *scn;
    const scn_prompts *prompts;
    lg_level_cb on_level_end;
    void *cb_ctx;
    int progress;
    ll_jsonl_writer *rec;
    int64_t epoch_ns;
    int nthreads;
    lg_worker *workers;
    atomic_uint_fast64_t next_id;
    atomic_int stop_issue;
    atomic_int interrupted;
    atomic_llong abort_at_ns;      /* 0 = no abort deadline */
    /* progress and the profile hook (per level; reset by the driver) */
    atomic_int inflight, decoding, done, errors;
    atomic_llong tokens;
    atomic_int workers_left;
    lg_level_summary *levels;
    size_t n_levels;
};

/* xfer.c */
int lg_xfer_start(lg_worker *w, int req_index, int64_t intended_ns);
/* The one place a finished transfer is classified, recorded and freed. */
void lg_xfer_done(lg_xfer *x, CURLcode res);
int lg_json_escape(ll_buf *b, const char *s);

/* worker.c */
int lg_worker_init(lg_worker *w, lg_run *r, int index, char *err, size_t errlen);
void lg_worker_free(lg_worker *w);
void *lg_worker_main(void *arg);

/* stats.c */
void lg_level_stats(lg_run *r, const lg_level_ctx *L, int64_t end_ns, lg_level_summary *out);

#endif
