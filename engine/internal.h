/* internal.h (engine/ only): the engine object, requests, and the seams
 * between the HTTP server (server.c, routes.c, response.c), the scheduler
 * (sched.c), the output formatter (sse.c), metrics and the profiler.
 *
 * DESIGN, threads and ownership:
 *  - One MHD polling thread runs every HTTP callback; one scheduler thread runs
 *    steps. Nothing else touches requests.
 *  - A request (eng_req) is reference counted: the HTTP connection holds one
 *    reference until MHD's "request completed" notice, the streaming response
 *    holds one until MHD frees it, the scheduler holds one from submission until
 *    it drops the request (finished, cancelled or shut down). The last release
 *    frees it, so no side ever frees memory the other still reads.
 *  - eng->mu guards the waiting queue, the stop flag, metrics and the profiler.
 *  - eng->io_mu guards every request's output bytes and its suspended /
 *    finished / aborted flags. MHD_suspend_connection (reader side) and
 *    MHD_resume_connection (scheduler side) are both called with io_mu held,
 *    so a resume can never precede its suspend (MHD forbids that).
 *  - Scheduler-only fields (slot, progress) are touched by the scheduler thread
 *    alone after submission.
 *  - eng->log_mu guards the step log; eng->rec_mu guards the records writer
 *    the scheduler puts steps into (eng_set_records), held across each put so
 *    that a detach waits for a put in progress.
 */
#ifndef LOADLAW_ENGINE_INTERNAL_H
#define LOADLAW_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <microhttpd.h>

#include "backend.h"
#include "common.h"
#include "engine.h"

enum { ENG_REQ_CHAT = 0, ENG_REQ_COMPLETION = 1 };

/* Backpressure bound: the scheduler does not start a step while a reading
 * stream has more than this not yet handed to MHD (sched.c, wait_drained).
 * 16 KiB (~60 events of a stream): at C = 256 it kept law 0+0n from
 * spinning (median 928k events/s against 455k unbounded) with less loss at
 * 0.05+0.001n than 4 KiB did (567k against 502k; 670k unbounded, runs
 * scattering 2-3x on this shared machine). Overridable at build time for the
 * bench (-DENG_UNSENT_MAX_BYTES=..). */
#ifndef ENG_UNSENT_MAX_BYTES
#define ENG_UNSENT_MAX_BYTES (16 * 1024)
#endif

/* The largest term of a played law, ms (the a, b, c, p and knee keys and
 * the law string): hours per step; the synthetic backend's step time in
 * nanoseconds stays far inside an int64. */
#define ENG_LAW_TERM_MAX_MS 1e7

/* Handoff samples a stream may have in flight (unsent) at once; more are
 * dropped, counted in eng_engine.handoff_dropped. */
#define ENG_HANDOFF_PENDING 8

typedef struct eng_req {
    atomic_int refs;
    atomic_int cancelled;          /* client went away: drop at the next step */
    struct eng_engine *eng;
    struct MHD_Connection *conn;
    int fd;                        /* conn's socket, -1 if unknown; read only while suspended */
    uint64_t id;
    uint64_t seed;                 /* token words derive from (seed, position); seed from
                                    * the engine's seed and the prompt (request.c) */
    int64_t created_s;             /* wall clock seconds, for "created" */
    int64_t submit_ns;
    /* what the request asked for (immutable after submission) */
    int kind;                      /* ENG_REQ_* */
    int stream, include_usage, continuous_usage;
    int prompt_tok, max_tok, min_tok, think_tok;
    int target_tok;                /* tokens it will produce */
    int stop_early;                /* finish_reason "stop" rather than "length" */
    int lp_top;                    /* logprobs asked (chat logprobs, completions
                                    * logprobs N): alternatives per token; -1 none */
    int return_ids;                /* vLLM's return_token_ids: choices[].token_ids */
    int prompt_lp;                 /* vLLM's prompt_logprobs: alternatives per prompt
                                    * position; -1 none (prompt_lp.c) */
    eng_cont cont;                 /* the prompt's scored continuation (cont.n = 0: none);
                                    * ids/out/rank owned, out written by the step */
    char model_json[160];          /* served model name as a JSON string literal */
    char chunk_head[320];          /* "data: {"id":..,"model":..," of every stream chunk, */
    int chunk_head_len;            /* built once (sse.c); 0 until then */
    /* scheduler thread only */
    struct eng_req *next;          /* waiting queue link (under eng->mu while queued) */
    int slot;
    int prefilled;                 /* prompt tokens prefilled so far (cached ones included) */
    int cached_tok;                /* prompt tokens the prefix cache served */
    uint64_t *prefix_keys;         /* the prompt's block keys (eng_prefix_keys); NULL */
    int n_prefix_keys;
    int gen;                       /* tokens emitted so far */
    int64_t last_tok_ns;           /* the step end of its last token (scheduler thread) */
    eng_tok *toks;                 /* (target_tok) the model's tokens when the backend
                                    * computes them (sched.c), else NULL; read by sse.c */
    int started;                   /* prefill complete, decoding */
    /* under eng->io_mu */
    ll_buf out;                    /* SSE / JSON bytes not yet handed to MHD */
    size_t out_off;
    int suspended, finished, aborted;
    int held;                      /* the scheduler waits for its backlog (sched.c) */
    /* handoff samples (cfg.handoff_sample; under io_mu): tokens whose bytes
     * end at byte end_off of the stream, waiting for eng_response_read_cb to hand them on */
    int64_t sent_total;            /* bytes handed to MHD so far */
    struct {
        int tok;
        int64_t step_end_ns, end_off;
    } hs[ENG_HANDOFF_PENDING];
    int hs_head, hs_n;
    /* MHD's thread only (response.c, "handoff records"):
     * samples handed to MHD whose bytes it has not written yet, and the
     * socket registered for them (-1: none) */
    struct {
        int tok;
        int64_t step_end_ns, write_ns;
    } hh[ENG_HANDOFF_PENDING];
    int hh_n;
    int send_fd;
    char rid[LL_REC_HANDOFF_REQ_MAX + 1]; /* X-Request-Id, or "engine-<id>" */
} eng_req;

/* prefix_cache.c: the engine's prefix cache (eng_config.prefix_cache). A
 * block is ENG_PREFIX_BLOCK words; a prompt's keys name its prefixes block
 * by block. */
#define ENG_PREFIX_BLOCK 16
typedef struct eng_prefix_cache eng_prefix_cache;
eng_prefix_cache *eng_prefix_new(size_t blocks);
void eng_prefix_free(eng_prefix_cache *c);
/* The keys of a parsed request body's prompt (chat: its messages' text;
 * else its prompt strings), whole blocks only. *keys: caller frees. 0 or LL_ENOMEM. */
int eng_prefix_keys(const cJSON *root, int chat, uint64_t **keys, int *n_keys);
/* At admission (the scheduler thread): the prompt tokens its leading cached
 * blocks cover (never the whole prompt), and its blocks inserted. */
int eng_prefix_admit(eng_prefix_cache *c, const uint64_t *keys, int n_keys, int prompt_tok);
/* POST /reset_prefix_cache (the server's thread; takes mu): every block
 * forgotten, and vLLM's answer {"success":true} with "blocks", how many were
 * held (0 with prefix_cache off: nothing to forget is a success). NULL when
 * out of memory; the caller sends and frees it. */
cJSON *eng_prefix_reset_answer(eng_engine *e);

void eng_req_ref(eng_req *r);
void eng_req_unref(eng_req *r);

#define ENG_HIST_BUCKETS 14
/* One latency histogram of /metrics: seconds summed, observations, and
 * their counts per bucket of eng_hist_bounds_s (not cumulative). */
typedef struct eng_lat {
    double sum_s;
    uint64_t count;
    uint64_t hist[ENG_HIST_BUCKETS];
} eng_lat;
#define ENG_MAX_PHASE_NAMES 64 /* (name, rank) pairs: 2 + 3 per tp rank */

/* Descriptors kept free at the top of the open-file limit. A request that
 * arrives on a socket numbered in this band is answered 503 and its
 * connection closed (routes.c, fd_exhausted; Linux hands out the lowest free
 * number, so a socket up there means the rest are taken). Without the band,
 * accept() fails with EMFILE at the limit, libmicrohttpd 0.9.75 then stops
 * accepting (daemon.c, at_limit) and new connections wait unanswered in the
 * listen backlog until an idle one times out. The band leaves MHD room to
 * accept, answer and close, and the engine room for a trace file. */
#define ENG_FD_RESERVE 32

/* The most steps one profile capture holds (also num_steps' bound) when a
 * key guards /start_profile; cfg.profile_max_steps_open when none does. */
#define ENG_PROF_MAX_STEPS 10000000

/* A captured step; its phases are prof.phases[phase0, phase0 + n_phases)
 * (stored apart: a tp backend may report up to ENG_MAX_PHASES, most report 4). */
typedef struct eng_prof_step {
    eng_step step;
    int n_phases;
    size_t phase0;
} eng_prof_step;

typedef struct eng_linger eng_linger; /* linger.c */

typedef struct eng_engine {
    eng_config cfg;
    const eng_backend_ops *be;
    void *be_state;
    char url[96];
    int port;
    struct MHD_Daemon *mhd;
    /* A request on a socket numbered at or above this is answered 503 and
     * its connection closed (ENG_FD_RESERVE); INT_MAX without a limit. */
    int conn_fd_max;
    /* server.c, mhd_nudge_main: an eventfd in MHD's epoll set, written every
     * ENG_MHD_NUDGE_NS by mhd_nudge_thread so that MHD's loop never waits long
     * with work on its ready list (-1: none) */
    int mhd_nudge_fd;
    pthread_t mhd_nudge_thread;
    int mhd_nudge_started;
    atomic_int mhd_nudge_stop;
    eng_linger *linger;            /* lingering closes (linger.c); NULL: none */
    pthread_t sched_thread;
    int sched_started;
    struct eng_sched *sched;       /* scheduler-thread state (sched.c) */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    /* A failed backend step: fail_msg is written once, before failed_rc is
     * stored (release), so a reader that sees failed_rc != 0 sees the text. */
    atomic_int failed_rc;
    char fail_msg[512];
    eng_req *wait_head, *wait_tail;
    int n_waiting;
    atomic_int n_running;
    atomic_ullong next_id;

    pthread_mutex_t io_mu;
    /* Backpressure (sched.c, wait_drained): the scheduler sleeps on drain_cv
     * (with io_mu) while n_held streams (eng_req.held) have more than
     * ENG_UNSENT_MAX_BYTES unsent; eng_response_read_cb releases each as its backlog
     * falls to the bound and signals when the last one is released, so a
     * step costs the scheduler one wake-up, not one per stream. */
    pthread_cond_t drain_cv;
    int n_held;                    /* under io_mu */
    atomic_uint_fast64_t handoff_dropped; /* samples not recorded (ring full, no writer) */

    /* step log (log_mu): a ring of the newest cfg.step_log_max steps. Step
     * index i lives at log.v[i % step_log_max]; log.n = min(log_total,
     * step_log_max), so the oldest index held is log_total - log.n. While it
     * has not wrapped, i % step_log_max == i and the ring is a plain array
     * that grows (log_reserve). */
    pthread_mutex_t log_mu;
    LL_VEC(eng_step) log;
    size_t log_total;              /* steps logged in the engine's life */

    /* records (rec_mu): NULL when detached */
    pthread_mutex_t rec_mu;
    ll_rec_writer *rec;
    int64_t rec_epoch_ns;
    int rec_warned;                /* a failed put was logged (once per attachment) */

    /* metrics (under mu) */
    uint64_t steps_total, prompt_tok_total, gen_tok_total;
    uint64_t prompt_cached_total;  /* prompt tokens the prefix cache served */
    eng_prefix_cache *prefix;      /* under mu (admission, the reset); NULL when off */
    uint64_t req_finished, req_cancelled, req_rejected;
    uint64_t hist[ENG_HIST_BUCKETS];
    double step_sum_s;
    eng_lat itl, ttft, queue;      /* the requests' own latencies (eng_metrics_lat) */
    const char *phase_name[ENG_MAX_PHASE_NAMES];
    int phase_rank[ENG_MAX_PHASE_NAMES]; /* with phase_name, the key (tp rank; 0 without tp) */
    double comm_sum_s;             /* eng_step.comm_ns summed (loadlaw_comm_seconds_total) */
    double phase_sum_s[ENG_MAX_PHASE_NAMES];
    uint64_t phase_count[ENG_MAX_PHASE_NAMES];
    int n_phase_names;

    /* profiler (under mu, but base and base_private are set before the
     * threads start and never change) */
    struct {
        char base[448];            /* cfg.profile_dir, or the private default */
        int base_private;          /* base is the default: ours alone, mode 0700 */
        int active, done;          /* capturing; capture complete, file not yet written */
        int want_steps;            /* 0 = until /stop_profile */
        int max_steps;             /* the capture's bound (profile.c, prof_max_steps) */
        int64_t deadline_ns;       /* a num_steps capture ends by then even if idle */
        int gzip;
        char dir[512];             /* base/sub, as the answers name it */
        char sub[72];              /* the request's output_dir ("" for none) */
        LL_VEC(eng_prof_step) steps;
        LL_VEC(eng_phase) phases;  /* of every captured step, in step order */
        struct MHD_Connection *waiter;  /* suspended /start_profile with num_steps */
        int waiter_suspended;
        unsigned seq;              /* captures written so far */
        char last_path[600];       /* the last file written ("" if that write failed) */
        size_t last_n;
    } prof;
} eng_engine;

extern const double eng_hist_bounds_s[ENG_HIST_BUCKETS]; /* last is +Inf */

/* config.c: point every NULL string field at its default (static). */
void eng_config_fill_strings(eng_config *cfg);
/* config.c: eng_config's string fields, by their slot in owned_str_ (the
 * key table, config_keys.c, names a string key's slot). */
enum { ENG_STR_BIND_ADDR, ENG_STR_MODEL, ENG_STR_ATTN, ENG_STR_PROFILE_DIR, ENG_STR_API_KEY,
       ENG_STR_CONTROL_KEY, ENG_STR_KV, ENG_STR__COUNT };
/* Store a copy of value in the slot's field; the previous copy (if the
 * config owned one) is released. 0 or LL_ENOMEM. */
int eng_config_own_str(eng_config *cfg, int slot, const char *value);

/* server.c */
int eng_server_start(eng_engine *e, char *err, size_t errlen);
void eng_server_stop(eng_engine *e);

/* linger.c: a lingering close for connections answered before their body
 * was read (the file says why). start: 0, or LL_ENOMEM / LL_ESYS with err.
 * add (MHD's thread, from the "request completed" notice, before MHD closes
 * the socket): a duplicate of fd is shut for writing and what the client
 * still sends is read and dropped until it closes, for a few seconds at
 * most; a no-op when l is NULL or every slot is taken. stop joins the thread
 * and closes what still lingers (after MHD has stopped). */
int eng_linger_start(eng_linger **out, char *err, size_t errlen);
void eng_linger_add(eng_linger *l, int fd);
void eng_linger_stop(eng_linger *l);

/* routes.c: MHD's access handler (called with the headers, then each piece
 * of body, then with none left: the route's answer) and its "request
 * completed" notice (marks an unfinished generation cancelled, frees the
 * connection's state). cls is the engine. MHD's thread only. */
enum MHD_Result eng_routes_on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version,
                                     const char *upload_data, size_t *upload_data_size,
                                     void **con_cls);
void eng_routes_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                             enum MHD_RequestTerminationCode toe);
/* routes.c: MHD's connection notice; a new connection gets request_timeout
 * until its request is in (then idle_timeout, until its answer is out). */
void eng_routes_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code);

/* response.c: a generation's callback response (cls is its eng_req, which
 * holds one reference for the response). eng_response_read_cb copies r->out under io_mu,
 * or suspends the connection when nothing is queued; eng_response_free_cb releases the
 * reference. track_sends registers r's socket so its handoff samples get
 * send_ns (cfg.handoff_sample > 0; before MHD writes anything for r). All
 * three on MHD's thread. */
ssize_t eng_response_read_cb(void *cls, uint64_t pos, char *buf, size_t max);
void eng_response_free_cb(void *cls);
void eng_response_track_sends(eng_req *r);

/* sched.c */
int eng_sched_start(eng_engine *e, char *err, size_t errlen);
void eng_sched_stop(eng_engine *e);
/* Queue a request; takes the scheduler's reference. LL_ERANGE when the queue is
 * full, LL_EINTR when the engine is stopping. */
int eng_sched_submit(eng_engine *e, eng_req *r);

/* POST /tokenize: the prompt's tokens as a generation request would count
 * them (words; a chat body's "messages", a completion's "prompt", or
 * llama.cpp's "content"). 0 and *count, or LL_EINVAL with the answer's
 * status, param and message as eng_req_parse gives them. */
int eng_req_count(const eng_engine *e, const char *body, size_t len, int *count, int *status, const char **param,
                  char *msg, size_t msglen);

/* request.c: parse and check a request body; on failure fills status, the
 * offending parameter and a message, and returns NULL. */
eng_req *eng_req_parse(eng_engine *e, int kind, const char *body, size_t len,
                       int *status, const char **param, char *msg, size_t msglen);

/* sse.c: output formatting; append to r->out (caller holds io_mu). */
int eng_sse_tokens(eng_req *r, int from, int n);   /* tokens [from, from+n) */
int eng_json_full(eng_req *r);                     /* whole non-streaming body */
/* The engine's token spelling (sse.c): id i is word i mod 64, followed by
 * i / 64 when that is not 0 ("tile", "tile3"); buf has 16 bytes. The
 * inverse: the id a word of n bytes spells, or -1. */
const char *eng_token_text(int id, char *buf);
int eng_token_id(const char *s, size_t n);
/* The seeded words' model (the synthetic backend's tokens): the id at
 * position pos of a request with seed, and the logprob and rank (1 = the
 * chosen one) it gives token id; the j-th alternative of the chosen one. */
int eng_seeded_id(uint64_t seed, int pos);
double eng_seeded_lp(uint64_t seed, int pos, int id, int *rank);
void eng_seeded_alt(uint64_t seed, int pos, int j, int *id, double *lp);

/* prompt_lp.c: prompt logprobs (docs/engine.md, "Prompt logprobs"). From a
 * checked body: "prompt_logprobs" (0..20, -1 when absent) and the scored
 * continuation: chat, a last assistant message with "continue_final_message":
 * true; completions, the words from "logprob_start_len" on (SGLang's name).
 * *ctx_json (caller frees; NULL when there is no continuation) is the prompt
 * without it, printed as the engine prints prompts for their seed. 0, or
 * LL_EINVAL with a 400's parameter and message, or LL_ENOMEM. */
int eng_prompt_lp_parse(const cJSON *root, int kind, int vocab, int *prompt_lp, eng_cont *cont,
                        char **ctx_json, const char **param, char *msg, size_t msglen);
/* ,"prompt_logprobs":[...] for r (null for context positions), filling the
 * positions the backend left (out[j].id < 0) from the seeded words' model. */
int eng_json_prompt_lp(ll_buf *b, eng_req *r);
void eng_cont_free(eng_cont *c);

/* json_dup.c: 1 when an object anywhere in root holds a key twice, with
 * path naming it ("max_tokens", "stream_options.include_usage",
 * "messages[0].content"; request bytes, each key clipped to 40, a path too
 * deep for pathlen elided with "..." before the key), 0 when none,
 * LL_ENOMEM, or LL_EINVAL for a path buffer under 56 bytes. */
int eng_json_dup_key(const cJSON *root, char *path, size_t pathlen);

/* Copy at most max_bytes of src into dst (dstlen with its NUL), cut at a
 * character boundary, invalid UTF-8 bytes made '?', and "..." appended
 * (within dstlen) when cut: request bytes safe to put in a message.
 * Returns strlen(dst). */
size_t eng_clip_utf8(char *dst, size_t dstlen, const char *src, size_t max_bytes);
/* OpenAI-style error body into b; msg is made valid UTF-8 first (401:
 * AuthenticationError, 404 NotFoundError, ...). */
int eng_json_error(ll_buf *b, int status, const char *param, const char *msg);

/* metrics.c (caller holds mu) */
/* One observation of ns nanoseconds into l (metrics.c); the caller holds mu. */
void eng_metrics_lat(eng_lat *l, int64_t ns);
void eng_metrics_step(eng_engine *e, const eng_step *s, const eng_phase *ph, int n_ph,
                      int gen_tok);
int eng_metrics_text(eng_engine *e, ll_buf *b);

/* profile.c */
/* Settle where traces go (prof.base): cfg.profile_dir, or by default
 * "$TMPDIR/loadlaw-profile-<uid>" ($TMPDIR unset or relative: /tmp), made
 * mode 0700 when first used. Reads the environment: call before the threads
 * start. LL_EINVAL when the path is too long. */
int eng_prof_init(eng_engine *e, char *err, size_t errlen);
/* Begin a capture from a /start_profile body (may be empty). Caller holds mu
 * (the capture directory is opened, and made if missing, under it: a few
 * metadata calls, never the trace's I/O). LL_EINVAL: the request is at fault
 * (400); LL_EIO: the profile directory is (500). */
int eng_prof_begin(eng_engine *e, const char *body, size_t len, char *msg, size_t msglen);
/* Record one step when capturing; returns 1 when the capture just completed.
 * Caller holds mu. */
int eng_prof_record(eng_engine *e, const eng_step *s, const eng_phase *ph, int n_ph);
/* The engine is idle: a num_steps capture ends with what it has (if any, or
 * once its deadline passed). Returns the deadline the scheduler should wake
 * at to check again (0: none). Caller holds mu. */
int64_t eng_prof_idle(eng_engine *e);
/* Write the captured steps as a Chrome trace; *path receives the file name.
 * The file is always a new one (mode 0600): never an existing name, never a
 * symlink's target. Caller must not hold mu (file I/O); takes and releases mu
 * itself. LL_EINVAL: no capture, or output_dir is no longer a plain
 * directory (400); LL_EIO: the directory or the file failed (500). */
int eng_prof_write(eng_engine *e, char *path, size_t pathlen, size_t *n_steps,
                   char *msg, size_t msglen);

#endif
