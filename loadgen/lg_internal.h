/* lg_internal.h (internal to loadgen/): the run, its workers and transfers.
 *
 * Ownership: lg_run owns the workers (one CURLM each, kept across levels so
 * connections are reused); a worker owns its in-flight transfers (a list) and
 * its counters for the current level; a transfer owns its easy handle,
 * request body, parser state and chunk array until lg_xfer_done hands the
 * chunks to the records writer and frees the rest.
 *
 * Threads: the driver (run.c) and the workers (worker.c, xfer*.c) share only
 * the atomics of lg_run and, to wake the driver, mu/cv/events (lg_run_notify). */
#ifndef LOADLAW_LOADGEN_INTERNAL_H
#define LOADLAW_LOADGEN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <curl/curl.h>

#include "dialect.h"
#include "loadgen.h"
#include "netstamp.h"
#include "delta.h"
#include "srcaddr.h"
#include "sse.h"

/* One level as the workers see it: read-only except the atomics. */
typedef struct lg_level_ctx {
    int index;
    const scn_level *lv;
    int total;                 /* this rank's warmup + measured */
    int warmup;                /* this rank's warmup */
    int concurrency;           /* this rank's C (open loop: cap, 0 = none) */
    double rate_per_s;         /* this rank's rate (open loop), else 0 */
    int64_t start_ns, deadline_ns;  /* CLOCK_MONOTONIC; deadline 0 = none */
    uint64_t seed;
    int sessions;              /* load.sessions: this rank's conversations (total = sessions x turns) */
    atomic_int next;           /* closed loop: next request index to issue
                                * (with sessions: next conversation) */
} lg_level_ctx;

typedef struct lg_worker lg_worker;

/* load.sessions: one conversation slot of a worker (session.c). */
typedef enum lg_sess_state {
    LG_SESS_IDLE = 0,          /* no conversation: takes the level's next */
    LG_SESS_DUE,               /* its next turn is sent at due_ns */
    LG_SESS_INFLIGHT,          /* a turn in flight */
    LG_SESS_DONE,              /* the level has no conversation left for it */
} lg_sess_state;
typedef struct lg_sess {
    lg_sess_state state;
    int local;                 /* this rank's index of the conversation in the level */
    int64_t session;           /* its index in the level (local * ranks + rank) */
    int turn;                  /* the turn due or in flight, 1-based */
    int64_t due_ns;            /* DUE: CLOCK_MONOTONIC */
    ll_buf hist;               /* the turns before: message objects, comma-separated */
    ll_buf user;               /* this turn's user message */
    int hist_words;            /* words in hist's contents */
} lg_sess;

typedef struct lg_xfer {
    lg_worker *w;
    CURL *easy;
    struct lg_xfer *prev, *next;   /* worker's in-flight list */
    uint64_t id;
    int req_index, warmup, prompt_words;
    size_t prompt_index;           /* req_index * ranks + rank: the prompt one process would send */
    /* CLOCK_MONOTONIC ns, -1 = not reached */
    int64_t intended_ns, send_ns, header_ns, first_tok_ns, first_think_ns, first_answer_ns, end_ns;
    int64_t now_ns;                /* arrival time of the bytes being parsed */
    int fd;                        /* its connection's socket, once known (xfer_recv.c arrival_ns); -1 before */
    int64_t empty_ns;              /* when a read last found that socket empty (netstamp.h), -1 never */
    int64_t read_ns, read_t_ns;    /* the last read timed (its rx read_at_ns, -1 none) and its time */
    int read_kernel;               /* that time was the kernel's stamp */
    int64_t counted_ns;            /* the last read counted in lg_worker.reads (its read_at_ns) */
    long http_status;
    int status_known;
    ll_buf body, errbody;
    lg_sse sse;
    lg_delta delta;
    LL_VEC(ll_rec_chunk) chunks;   /* t_ns CLOCK_MONOTONIC until handed over */
    int think_tok, answer_tok;
    int aborted;
    char curl_err[CURL_ERROR_SIZE];
    /* a stream whose usage comes late or never, and a server that refuses continuous_usage_stats */
    LL_VEC(uint32_t) chunk_bytes;  /* text bytes of each chunk (parallel to chunks):
                                    * the weights a disagreeing final usage is attributed by */
    int sent_cont_usage;           /* this body asked continuous_usage_stats */
    int retried;                   /* resent once without it after a 400 naming it */
    /* "X-Request-Id: loadlaw-<run tag>-<id>" in front of the worker's headers
     * (a list node of our own: no allocation per request) */
    struct curl_slist rid_hdr;
    char rid_line[64];
    /* The head that makes the prompt fresh (lg_fresh_head): "" when the
     * scenario reuses prompts; its tokens when a tokenizer counts them. */
    char head[40];
    int head_tok;
    size_t head_at;                /* where in the prompt the head goes (scn_prompt_head_at):
                                    * after a prefix other requests share, else 0 */
    int max_tokens;                /* this request's length cap: a trace row's output
                                    * length, else the scenario's max_tokens */
    lg_sess *sess;                 /* load.sessions: the conversation it is a turn of; NULL */
} lg_xfer;

struct lg_worker {
    lg_run *run;
    int index;
    CURLM *multi;
    struct curl_slist *headers;
    int epfd, wake_fd;             /* the worker's epoll set (curl's sockets + wake_fd) */
    int64_t timer_at;              /* curl's timer (CURLMOPT_TIMERFUNCTION), -1 = none */
    int user_rid;                  /* the scenario's headers name X-Request-Id: no own one */
    ns_rx rx;                      /* the stamp of this thread's last read (netstamp.h) */
    lg_src src;                    /* the local address of its next connection (srcaddr.h) */
    pthread_t thread;
    /* current level */
    lg_level_ctx *lvl;
    int slots;                     /* closed: requests in flight; open: cap (0 = none) */
    int stride, offset;            /* open loop: this worker's arrivals k = offset + i*stride */
    int inflight;
    lg_xfer *head;
    lg_sess *sess;                 /* load.sessions: the level's conversation slots (n_sess = slots) */
    int n_sess;
    int n_ok, n_failed;            /* measured requests finished in this level */
    int rc;
    char err[256];
    /* what this worker's thread did in the current level (level_end "client",
     * records.h ll_rec_client): reset by the driver (assign), written by the
     * worker thread only, read by the driver after the join */
    double cpu_s;                  /* CLOCK_THREAD_CPUTIME_ID over the level */
    uint64_t reads;                /* socket reads with data (xfer_recv.c on_data; with user
                                    * stamps, libcurl write callbacks) */
    uint64_t reads_kstamp;         /* of those, timed by the kernel's receive stamp */
    ll_pct *read_lag;              /* their kernel stamp -> callback, ms (NULL: not kept) */
    uint64_t events;               /* token-carrying chunks parsed (counted as each
                                    * transfer is finished: worker.c) */
    /* closed loop against a server that refuses connections (worker.c
     * lg_worker_connect_result): kept across levels, worker thread only */
    int backoff_k;                 /* refused rounds in a row; 0: connecting normally */
    int64_t backoff_until_ns;      /* no request starts before (CLOCK_MONOTONIC) */
    int64_t backoff_set_ns;        /* when the current round began */
};

struct lg_run {
    char *url_full, *url_base, *model, *api_key;
    char *profile_dir;             /* lg_config's (NULL: not known) */
    const scn_scenario *scn;
    /* The levels to run: the scenario's, copied at create, then those
     * lg_config.next_level appends (driver thread only). */
    scn_level *levels;
    size_t n_levels, cap_levels;
    lg_next_level_fn *next_level;
    void *next_ctx;
    const struct lg_api *api;      /* the scenario's server API (api.h) */
    const scn_prompts *prompts;
    int kstamp; /* reads timed by the kernel's stamp: load.arrival_stamp "kernel"
                 * and netstamp linked (netstamp.h), else the write-callback clock */
    int progress;
    ll_rec_writer *rec;
    int64_t epoch_ns;
    int nthreads;
    int rank, ranks;               /* lg_dist; 0 of 1 alone */
    const lg_dist *dist;
    lg_worker *workers;
    atomic_uint_fast64_t next_id;
    char run_tag[17];              /* hex, this process's run: X-Request-Id's middle part */
    atomic_int stop_issue;
    atomic_int interrupted;
    int stop_on_failed;            /* lg_config; driver thread only, as stopped_after */
    double max_failed;
    int stopped_after;             /* the level over max_failed that ended the run; -1 */
    atomic_llong abort_at_ns;      /* 0 = no abort deadline */
    /* progress and the profile hook (per level; reset by the driver) */
    atomic_int inflight, decoding, done, errors;
    atomic_llong tokens;
    atomic_int workers_left;
    atomic_int watch;              /* 1: the driver wants every start of decoding and finish */
    atomic_size_t total_ok, total_failed;  /* measured requests, all levels */
    /* the driver's wake-up: events counts lg_run_notify calls */
    pthread_mutex_t mu;
    pthread_cond_t cv;             /* CLOCK_MONOTONIC */
    uint64_t events;
    /* a 400 named continuous_usage_stats: no later body asks for it */
    atomic_int no_cont_usage;
    atomic_int backoff_ms;         /* the longest back-off a worker is in now (0: none): progress line */
    /* the prefix-cache reset (cache_reset.c; driver thread, rank 0) */
    int cache_told;                /* cache_srv was asked of /metrics */
    ll_srv cache_srv;              /* the server it names (LL_SRV__COUNT: none known) */
    int cache_refused;             /* load.cache auto: the server refused a reset; no more are sent */
    ll_rec_cache cache;            /* what was done before the next level line */
};

/* run.c: wake the driver (a watched event happened, or the last worker left). */
void lg_run_notify(lg_run *r);

/* server_root.c: a request to the server's root + path (POST body, or GET
 * when NULL): 0 when an answer came (its status in *status, its first
 * max_bytes in resp), else an error code and libcurl's words in err. Driver
 * thread. */
int lg_root_ask(const lg_run *r, const char *path, const char *body, long timeout_ms, size_t max_bytes,
                ll_buf *resp, long *status, char *err, size_t errlen);
/* The server r's /metrics names (the bundled engine, vLLM, SGLang or
 * llama.cpp; LL_SRV__COUNT: none of them, or no page). */
ll_srv lg_root_server(const lg_run *r);

/* cache_reset.c: before level `level`'s line (rank 0, driver thread, the
 * server idle): the server's prefix cache reset or kept as load.cache asks,
 * said on stderr, and what was done into r->cache for the level record. */
void lg_cache_before_level(lg_run *r, int level);

/* The profile hook of one level (driver thread, rank 0; profile_hook.c and
 * profile_wait.c). Before the level: the style told from the server, the
 * trace folder's files and a reference pace (prepare); in it, POST
 * /start_profile (start); after its end is stamped: POST /stop_profile for
 * vLLM's form, the wait for the trace files and the server's pace, and the
 * profile record (finish). run.c prepares a level while it is still this
 * side's turn: before the first level, or when the level before it ends. */
#define LG_PROF_MAX_FILES 32
#define LG_PROF_REPLY_BYTES 1024
typedef struct lg_prof_file {
    char path[512];
    int64_t bytes, mtime_ns;
} lg_prof_file;
typedef struct lg_prof_files {
    size_t n;
    lg_prof_file f[LG_PROF_MAX_FILES];
} lg_prof_files;
typedef struct lg_prof {
    scn_profile_style style;       /* SGLANG or VLLM once prepared */
    int started;                   /* POST /start_profile was sent */
    int64_t t_ns;                  /* when (run clock) */
    int http_status, ok;
    char detail[LG_PROF_REPLY_BYTES + 1]; /* the answer's first 1 KiB, or curl's error */
    int burst;                     /* requests per probe: the next level's C (1..LG_PROF_BURST_MAX) */
    double probe_ref_ms;           /* the quickest probe before the level (NAN: none) */
    lg_prof_files before;          /* the trace folder before the level */
    lg_prof_files wrote;           /* what the capture wrote (the answer's path, the folder's new files) */
} lg_prof;
/* Prepare level i's hook into *prof (allocated once; the caller frees it)
 * when level i is profiled and this is rank 0, setting *prepared = i; else
 * nothing. 0 or LL_ENOMEM. */
int lg_profile_prepare_level(lg_run *r, size_t i, lg_prof **prof, int *prepared, char *err, size_t errlen);
void lg_profile_start(lg_run *r, const lg_level_ctx *L, lg_prof *p);
void lg_profile_finish(lg_run *r, const lg_level_ctx *L, lg_prof *p);
/* profile_wait.c: the folder's plain files (two levels deep) into out. */
void lg_prof_scan(const char *dir, lg_prof_files *out);
/* Wait until the files new or changed since p->before stop growing, into
 * p->wrote (the answer's path kept), saying so every few seconds. */
void lg_prof_wait_files(const lg_run *r, int level, lg_prof *p);
/* One probe: n (at most LG_PROF_BURST_MAX) short streamed requests of the
 * scenario's API at once; the slowest one's ms (NAN when one failed). */
#define LG_PROF_BURST_MAX 16
double lg_prof_probe(const lg_run *r, int n);
/* Probe until a probe is back within LG_PROF_PACE_FACTOR of the reference
 * or the deadline (base_s, plus a part scaled by the bytes written) passes;
 * 1 when it came back. *last_ms: the last probe. */
int lg_prof_wait_pace(const lg_run *r, int level, double base_s, const lg_prof *p, double *last_ms);

/* xfer.c: a transfer's life */
/* sess: the conversation it is a turn of (load.sessions), else NULL. */
int lg_xfer_start(lg_worker *w, int req_index, int64_t intended_ns, lg_sess *sess);
/* The one place a finished transfer is classified, handed to the records
 * writer and freed. */
void lg_xfer_done(lg_xfer *x, CURLcode res);
/* A finished transfer's word on the connection (worker.c): refused starts or
 * lengthens the worker's back-off, a response ends it. */
void lg_worker_connect_result(lg_worker *w, const lg_xfer *x, ll_err_class cls);

/* xfer_body.c: what a request sends */
/* x's request body into x->body (reset first) for the scenario's API;
 * sets x's max_tokens, head_at, prompt_words, head_tok and sent_cont_usage.
 * 0 or LL_ENOMEM. */
int lg_xfer_build_body(lg_xfer *x);
/* The path under the base URL requests go to: the scenario's endpoint_path,
 * else scn_endpoint_path(endpoint). For run.c, which builds the URL. */
const char *lg_request_path(const scn_scenario *s);
/* Append the scenario's extra headers ("Name: value") to *list (worker.c
 * calls it after its own headers). 0 or LL_ENOMEM (*list is then unchanged
 * past the headers appended so far, and still the caller's to free). */
int lg_xfer_headers(const scn_scenario *s, struct curl_slist **list);

/* xfer_recv.c: a transfer's bytes as they arrive (worker thread) */
/* The options of x's easy handle, its callbacks on x. LL_EINVAL when curl
 * refused an option. */
int lg_xfer_setup_easy(lg_xfer *x);
/* x's SSE parser and delta state, for the run's API (on a start and on a
 * resend, after the old ones were freed). */
void lg_xfer_init_parsers(lg_xfer *x);

/* xfer_record.c: a finished transfer's record */
/* Its error class, and into msg its message ("" when ok). */
ll_err_class lg_xfer_classify(lg_xfer *x, CURLcode res, char *msg, size_t msglen);
/* Make the chunks' tokens agree with the server's usage or the tokenizer;
 * returns where the counts came from, *st_* what the stream counted. */
ll_counts lg_xfer_reconcile(lg_xfer *x, int64_t *st_think, int64_t *st_answer);
/* The record of x on the run clock into *rq: takes x's chunk array. */
void lg_xfer_fill_record(lg_xfer *x, ll_err_class cls, const char *msg, ll_counts counts, int64_t st_think,
                         int64_t st_answer, ll_rec_request *rq);

/* session.c (load.sessions; its DESIGN comment says how a slot walks) */
/* n slots for a level, every one idle (the old ones freed). 0 or LL_ENOMEM. */
int lg_sess_assign(lg_worker *w, int n);
void lg_sess_free_all(lg_worker *w);
/* Start every turn that is due at now, idle slots taking conversations
 * first. Returns the slots still live (not DONE); w->rc on a failure. */
int lg_sess_issue(lg_worker *w, int64_t now);
/* The earliest due turn of the worker's slots, or INT64_MAX. */
int64_t lg_sess_next_due(const lg_worker *w);
/* The messages array of the slot's turn into b; *words: their words. */
int lg_sess_put_messages(ll_buf *b, const lg_sess *q, int *words);
/* A turn ended (ok or not) at now with this answer text: the next turn is
 * due after the think time, or the conversation is over. */
void lg_sess_end(lg_worker *w, lg_sess *q, const ll_buf *answer, int ok, int64_t now);

/* worker.c */
int lg_worker_init(lg_worker *w, lg_run *r, int index, char *err, size_t errlen);
/* Wake the worker out of its wait (any thread; lg_run_interrupt). */
void lg_worker_wake(lg_worker *w);
void lg_worker_free(lg_worker *w);
void *lg_worker_main(void *arg);

#endif
