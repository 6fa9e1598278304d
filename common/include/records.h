/* records.h: the records.jsonl schema in one place (docs/records.md): record
 * types, their keys, error classes and chunk kinds, the writer and the reader.
 *
 * DESIGN: producers (loadgen's worker threads, the bundled engine's scheduler,
 * the sweep driver) hand typed records to ll_rec_put_*, which only moves them
 * into a bounded queue; one writer thread formats each record as a JSON line,
 * writes it and flushes it (a killed run keeps every line the writer reached).
 * So the threads that stamp tokens never format JSON nor touch the file. When
 * the queue is full, a producer waits: a slow disk slows the client, it never
 * drops a record. ll_rec_drain waits until everything queued so far is on
 * disk (a second Ctrl-C calls it with a bound before _exit); ll_rec_close
 * drains and joins.
 *
 * Every time in a record struct is integer nanoseconds on the run clock:
 * CLOCK_MONOTONIC minus the epoch taken by ll_rec_open (ll_rec_epoch_ns), -1
 * for "never reached" (written as null). The reader gives back the same
 * structs; it rejects and counts values it cannot represent (a time of 1e300,
 * a negative count) instead of casting them.
 *
 * Prefix ll_rec_. Errors: 0 or a negative LL_E* code with a message in err.
 * Thread safety: ll_rec_put_* and ll_rec_drain may be called from any thread;
 * open/close from one. The reader is single-threaded.
 */
#ifndef LOADLAW_RECORDS_H
#define LOADLAW_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Version of the schema (docs/records.md). Bump on a change a reader must
 * know about; readers refuse a newer one and keep reading older ones. */
#define LL_RECORDS_SCHEMA 1

/* ---- vocabulary ------------------------------------------------------------ */

/* Record types: the "type" key. */
#define LL_REC_RUN "run"
#define LL_REC_LEVEL "level"
#define LL_REC_LEVEL_END "level_end"
#define LL_REC_REQUEST "request"
#define LL_REC_STEP "step"
#define LL_REC_PROFILE "profile"
#define LL_REC_CLOCK "clock"      /* a K-rank run: one rank's clock estimate (docs/records.md) */
#define LL_REC_METRIC "metric"    /* one sample scraped from a server's /metrics */
#define LL_REC_HANDOFF "handoff"  /* a sampled token: when the engine handed it to the socket */

/* Error class of a failed request (records.md "error_class"). */
typedef enum ll_err_class {
    LL_ERRC_OK = 0,
    LL_ERRC_HTTP_4XX,
    LL_ERRC_HTTP_5XX,
    LL_ERRC_STREAM,     /* an error event inside a 200 stream */
    LL_ERRC_TRUNCATED,  /* stream ended before [DONE] */
    LL_ERRC_TIMEOUT,
    LL_ERRC_CONNECT,    /* refused / unreachable */
    LL_ERRC_RESET,      /* connection reset or closed with nothing received */
    LL_ERRC_OTHER,      /* anything else, including aborts at the interrupt deadline */
    LL_ERRC_ENCODING,   /* a Content-Encoding the client did not ask for (gzip, br...) */
    LL_ERRC_HEADERS,    /* response headers past libcurl's limits (a line, or all of them) */
    LL_ERRC__COUNT
} ll_err_class;
/* "ok", "http_4xx", "http_5xx", "stream_error", "truncated", "timeout",
 * "connect", "reset", "other", "encoding", "headers". */
const char *ll_err_class_name(ll_err_class c);
/* Inverse of ll_err_class_name; LL_EINVAL (and *out = OTHER) when unknown. */
int ll_err_class_parse(const char *name, ll_err_class *out);

/* Chunk kinds, written as one-letter strings. */
enum { LL_CHUNK_THINK = 't', LL_CHUNK_ANSWER = 'a' };

/* ---- records ---------------------------------------------------------------- */

/* Most batch buckets an engine law records. */
#define LL_REC_LAW_MAX_BUCKETS 16

/* The engine's law as played (bundled synthetic engine only). a_ms.. are in
 * played (scaled) milliseconds; time_scale is the factor they were scaled by,
 * so a_ms / time_scale is the law as written ("52+30n").
 * Its shape in N: the N a step pays for is the smallest of buckets[] >= N
 * (N itself above the largest, or with n_buckets = 0), and above knee_n
 * (> 0) each further sequence costs knee_b_ms instead of b_ms:
 *   step = a + b*min(M, knee_n) + knee_b*max(M - knee_n, 0) + c*K/1000 + p*P,
 * M the bucketed N (knee_n = 0: a + b*M + ...). Written only when set. */
typedef struct ll_rec_engine_law {
    int present;
    double a_ms, b_ms, c_ms_per_ktok, p_ms_per_tok;
    double time_scale;        /* 1 when the engine ran in real time */
    int n_buckets;            /* 0 = no buckets */
    int buckets[LL_REC_LAW_MAX_BUCKETS]; /* strictly increasing, >= 1 */
    int knee_n;               /* 0 = no knee */
    double knee_b_ms;         /* slope above the knee, played milliseconds per sequence */
} ll_rec_engine_law;

/* What the run asked of the server, read from the run line's "config" (the
 * effective scenario) once by the reader, so that no reader of a run looks
 * keys up in its JSON again (records_asked.c). Reader only; the writer
 * ignores it. Zeroed with prompt_tok NAN: a run line without a config. */
typedef struct ll_rec_asked {
    int max_tokens;           /* request.max_tokens when a number in [1, 2^31); 0 = not */
    int ignore_eos;           /* request.ignore_eos or request.extra_body.ignore_eos is true */
    int trace;                /* load.trace is set: each trace row asks its own length */
    double prompt_tok;        /* synthetic prompts built to prompts.tokens without a
                               * tokenizer (words = tokens / 1.33: an estimate): its
                               * value (dist "fixed") or mean; NAN otherwise */
    /* Fingerprints (FNV-1a 64 over a canonical form: keys sorted) of
     * config.prompts and config.request without their timeout_s (how long
     * the client waits is not the work asked for): two runs asked for the
     * same work when both match. 0 = the section is absent. */
    uint64_t prompts_fp, request_fp;
} ll_rec_asked;

/* The asked block of a config object (NULL: none). */
void ll_rec_asked_of(const cJSON *config, ll_rec_asked *out);

typedef struct ll_rec_run {
    int schema;               /* reader: as read; writer: ignored (LL_RECORDS_SCHEMA) */
    const char *version;      /* tool version; writer: ignored (LOADLAW_VERSION) */
    const char *host;         /* writer: NULL = gethostname() */
    int ranks, threads;
    int64_t epoch_wall_ns;    /* writer: ignored (taken at ll_rec_open) */
    const char *url, *model, *endpoint; /* target */
    int bundled;              /* target is the in-process engine */
    const char *engine;       /* the bundled engine's spec, NULL for a remote server */
    const char *backend;      /* "synthetic" | "cpu" | "cuda"; NULL when remote */
    ll_rec_engine_law law;
    const char *scenario;     /* path or NULL */
    const cJSON *config;      /* the effective scenario as JSON (borrowed; may be NULL) */
    ll_rec_asked asked;       /* reader: from config; writer: ignored */
} ll_rec_run;

/* What was done to the server's prefix cache before a level (load.cache;
 * docs/records.md "level"), written only when present: asked "auto" |
 * "reset" | "keep"; action "reset" when a reset was sent, else "keep"; done
 * 1 when the server confirmed it (2xx, and vLLM's "success" true); status
 * the HTTP status of the last request sent (0: none answered); how the
 * request ("POST /reset_prefix_cache", "POST /flush_cache", "POST
 * /slots/{id}?action=erase" for each of slots), server the dialect told from
 * /metrics ("" unknown), note why a reset was not sent or not confirmed, or
 * the server's answer. Fixed arrays: the record is copied into the writer's
 * queue. The reader fills present, action, done, status and slots. */
typedef struct ll_rec_cache {
    int present;
    const char *asked;        /* a static name (scn_cache_names) */
    int action_reset, done, status, slots;
    char how[48], server[16], note[160];
} ll_rec_cache;

typedef struct ll_rec_level {
    int level;                /* index in the sweep */
    int concurrency;          /* C; open loop: cap on in-flight (0 = none) */
    int open_loop;
    double rate_per_s;        /* open loop only */
    int poisson;              /* open loop: 1 poisson, 0 constant arrivals */
    int n_requests, warmup;   /* planned; n_requests excludes warmup */
    int64_t start_ns;
    /* A/B runs (docs/records.md "level"), written only when ab_tagged (a
     * zero-initialised level stays as before): the r-th run of this level on
     * this side, the pair it forms with the other side's level of the same
     * pair number, and its position in the order both sides ran in; pair and
     * seq are written when >= 0. The reader sets ab_tagged when "repeat" is
     * present and -1 for each absent value (older files lack them all). */
    int ab_tagged;
    int repeat, pair, seq;
    /* sweep --find: the level's role in the search, a static string
     * ("ladder", "probe", "sustain", "re-measure"); NULL: not written. */
    const char *find_role;
    ll_rec_cache cache;
} ll_rec_level;

/* What the client's own threads did during a level (level_end "client"):
 * enough to tell when the client, not the server, set the pace. */
typedef struct ll_rec_client {
    int present;
    int threads;              /* worker threads */
    double wall_s;            /* level start to drained */
    double cpu_s_max;         /* the busiest worker thread's CPU time (CLOCK_THREAD_CPUTIME_ID) */
    double cpu_s_sum;         /* all worker threads' CPU time */
    uint64_t reads;           /* libcurl write callbacks (socket reads with data) */
    int64_t reads_kstamp;     /* of those, timed by the kernel's receive stamp
                               * (netstamp/include/netstamp.h); -1 = not recorded (older files) */
    /* How far behind the worker threads read: kernel stamp -> write callback,
     * over the kernel-stamped reads (ms; NAN = none). Not in the stamps: it
     * says whether the client kept up, the way the server-side queue would. */
    double read_lag_p50_ms, read_lag_p99_ms, read_lag_max_ms;
    uint64_t events;          /* token-carrying chunks received (a chunk split into
                               * thinking and answer counts twice) */
} ll_rec_client;

typedef struct ll_rec_level_end {
    int level;
    int64_t end_ns;
    int interrupted;
    int ok, failed;           /* measured (non-warmup) requests that finished */
    ll_rec_client client;     /* "client"; absent in older files (present = 0) */
    int profiled;             /* "profiled": a profiler capture ran during the level, so its
                               * figures are the profiler's too (fit leaves it out of the law);
                               * written only when 1, absent (0) in older files */
} ll_rec_level_end;

typedef struct ll_rec_chunk {
    int64_t t_ns;             /* arrival on the run clock */
    int32_t tokens;
    char kind;                /* LL_CHUNK_THINK / LL_CHUNK_ANSWER */
} ll_rec_chunk;

/* The packed chunk list, the request's "chunks_packed" (docs/records.md,
 * records_chunks.c). The writer writes it; readers take it or the older
 * "chunks" array alike. */
#define LL_REC_CHUNKS_PACKED "chunks_packed"
/* Append the base64 text (without quotes) of c[0..n) to b. A kind other than
 * LL_CHUNK_THINK is written as LL_CHUNK_ANSWER. 0 or LL_ENOMEM. */
struct ll_buf; /* common.h */
int ll_rec_chunks_pack(struct ll_buf *b, const ll_rec_chunk *c, size_t n);
/* Decode len bytes of packed text into the growable array *v (*cap
 * elements, realloc'ed as needed; the caller frees *v), *n chunks.
 * 0; LL_EPARSE: not base64, or a number cut short or too long; LL_ERANGE:
 * a time beyond +/- 2^62 ns or a chunk of more than 2^31 - 1 tokens;
 * LL_ENOMEM. */
int ll_rec_chunks_unpack(const char *s, size_t len, ll_rec_chunk **v, size_t *n, size_t *cap);

/* Rewrite the records file `in` into `out` ("-": stdout) with every request's
 * chunks in the packed form (to_packed = 1) or the list form (0); every other
 * line is copied byte for byte, a request whose chunks cannot be read is
 * copied as it is (counted), a truncated last line is left out (counted).
 * 0; LL_EINVAL (out is in), LL_EIO, LL_ENOMEM, with a message in err. */
typedef struct ll_rec_convert_stats {
    size_t n_lines, n_converted, n_chunks, n_kept_bad, n_truncated;
} ll_rec_convert_stats;
int ll_rec_convert(const char *in, const char *out, int to_packed, ll_rec_convert_stats *st, char *err,
                   size_t errlen);

/* Where a request's token counts came from ("counts"). */
typedef enum ll_counts {
    LL_COUNTS_STREAM = 0,     /* the stream itself: one token per delta, or per-chunk usage */
    LL_COUNTS_ATTRIBUTED,     /* the final usage disagreed with the stream; its tokens were
                               * attributed over the chunks (reasoning over thinking chunks) */
    LL_COUNTS_TOKENIZER,      /* no usage: counted with --tokenizer from the streamed text */
    LL_COUNTS__COUNT
} ll_counts;
/* "stream", "attributed", "tokenizer". */
const char *ll_counts_name(ll_counts c);

/* The server's own timing of one request, where its response carries one
 * (request "server"): llama.cpp's "timings", vLLM's per-request "metrics"
 * (--enable-per-request-metrics), SGLang's meta_info. Milliseconds on the
 * server's clock; NAN (and -1 for counts) = not said. */
typedef struct ll_rec_srv_timing {
    int present;
    double ttft_ms;           /* vLLM time_to_first_token_ms */
    double queue_ms;          /* vLLM queue_time_ms, SGLang queue_time */
    double prompt_ms;         /* llama.cpp prompt_ms: prefill of the uncached tokens */
    double decode_ms;         /* llama.cpp predicted_ms, vLLM generation_time_ms */
    double tpot_ms;           /* llama.cpp predicted_per_token_ms, vLLM mean_itl_ms */
    int64_t prompt_n;         /* llama.cpp prompt_n: prompt tokens computed */
    int64_t decode_n;         /* llama.cpp predicted_n */
} ll_rec_srv_timing;

/* An ll_rec_srv_timing that says nothing. */
ll_rec_srv_timing ll_rec_srv_timing_none(void);

/* What a request produced, for comparing two runs' outputs (request
 * "outputs", written only when the sweep records outputs: --record-outputs).
 * key names the prompt-set item the request sent ("p<index>-s<seed>": the
 * index into the prompt set and the set's seed, the same in an A and a B run,
 * whatever per-request head the prompt carried). Per token, where the server
 * said it: ids (its token ids), tok (the token's text, from logprobs), lp
 * (the chosen token's logprob) and top_k alternatives each (top_tok[i*top_k+j]
 * and top_lp[...], NULL / NAN past what the server sent). text is the output
 * text cut to LL_REC_OUTPUT_TEXT_MAX bytes; text_bytes and text_hash (FNV-1a
 * 64) are those of the whole text. Every pointer is malloc'ed and freed by
 * ll_rec_outputs_free. */
#define LL_REC_OUTPUT_TEXT_MAX 4096
#define LL_REC_OUTPUT_TOP_MAX 20
typedef struct ll_rec_outputs {
    char key[48];
    size_t n_tok;             /* tokens recorded (ids, tok, lp: each n_tok or NULL) */
    int64_t *ids;
    char **tok;
    double *lp;               /* NAN where not said */
    int top_k;                /* alternatives kept per token, 0 = none */
    char **top_tok;           /* n_tok * top_k */
    double *top_lp;
    char *text;               /* NULL = no text */
    size_t text_bytes;
    uint64_t text_hash;
    /* -- the prompt as sent ("prompt", "prompt_bytes"; loadlaw check-decode) --
     * The body's "messages" (chat) or "prompt" (completions) member printed
     * as JSON, kept when it is at most LL_REC_OUTPUT_PROMPT_MAX bytes (NULL:
     * not kept); prompt_bytes: its length, 0 when unknown. */
    char *prompt;
    size_t prompt_bytes;
    /* -- end prompt -- */
} ll_rec_outputs;
#define LL_REC_OUTPUT_PROMPT_MAX 65536

/* Free o and everything it holds; NULL is a no-op. */
void ll_rec_outputs_free(ll_rec_outputs *o);
/* A deep copy (free with ll_rec_outputs_free), NULL when out of memory. */
ll_rec_outputs *ll_rec_outputs_dup(const ll_rec_outputs *o);
/* FNV-1a 64 over len bytes, continuing from h (start with LL_FNV64_INIT). */
#define LL_FNV64_INIT UINT64_C(0xcbf29ce484222325)
uint64_t ll_fnv64(uint64_t h, const void *p, size_t len);

/* Where a request sits in the workload that made it (docs/records.md
 * "Workload"): at most one applies, so the line carries only its keys.
 * Zeroed: none (the line is as before). */
typedef enum ll_work_kind {
    LL_WORK_NONE = 0,
    LL_WORK_SESSION,          /* load.sessions: "session":S,"turn":K */
    LL_WORK_TRACE,            /* load.trace: "trace_row":R */
    LL_WORK_PREFIX,           /* load.shared_prefix: "prefix_group":G */
} ll_work_kind;
typedef struct ll_rec_work {
    ll_work_kind kind;
    int64_t index;            /* the session (0-based in its level), the trace row
                               * (0-based in the window kept) or the prefix group */
    int turn;                 /* a session's turn, 1-based; 0 otherwise */
} ll_rec_work;

typedef struct ll_rec_request {
    int level, rank;
    uint64_t id;
    int warmup;
    ll_err_class cls;         /* LL_ERRC_OK: "status":"ok" */
    int http_status;          /* 0 = none */
    char *error;              /* server's or curl's message; NULL = none */
    int64_t intended_ns;      /* open loop: scheduled send; -1 closed loop */
    int64_t send_ns, header_ns, first_token_ns, first_think_ns, first_answer_ns, end_ns;
    int64_t prompt_tok, think_tok, answer_tok;   /* counted from the stream */
    int64_t usage_prompt, usage_completion, usage_reasoning; /* -1 = not sent;
                               * "usage" is null when usage_completion < 0 */
    ll_counts counts;         /* where think_tok/answer_tok and the chunks' tokens came from */
    int64_t stream_think_tok, stream_answer_tok; /* what the stream alone counted, when
                               * counts != STREAM ("stream_tok"); else -1 */
    int64_t prompt_tok_target;/* the prompt's length as built with a tokenizer
                               * ("prompt_tok_target"); 0 = not built to a length */
    int64_t cached_tok;       /* prompt tokens the server served from its prefix cache
                               * ("cached_tok": usage.prompt_tokens_details.cached_tokens,
                               * llama.cpp's timings.cache_n, SGLang's meta_info
                               * cached_tokens); -1 = not said */
    char finish[16];          /* the (first) choice's finish_reason as sent ("finish":
                               * "length", "stop", ...; cut to 15 bytes); "" = none sent */
    ll_rec_srv_timing srv;    /* "server": the server's own timing, when present */
    ll_rec_work work;         /* "session"/"turn", "trace_row" or "prefix_group" */
    int max_tokens;           /* "max_tokens": the length cap the request asked; 0 = not said */
    size_t n_chunks;
    ll_rec_chunk *chunks;     /* in arrival order */
    /* "outputs": NULL when not recorded (the line is then as before). The
     * writer takes it like chunks; the reader's lives during the call only. */
    ll_rec_outputs *outputs;
} ll_rec_request;

typedef struct ll_rec_step {
    int64_t start_ns, dur_ns;
    int n_decode, n_running, prefill_tok;
    int64_t ctx_tok;
    int64_t comm_ns;          /* tp all-reduce time of rank 0; written when > 0 (0 = none) */
} ll_rec_step;

/* A bundled engine with handoff_sample=K: for every K-th token of each
 * stream, when its step ended, when its bytes were handed to the HTTP
 * library (write_ns) and when the socket write that carried its last byte
 * returned (send_ns; libmicrohttpd writes on its next pass over the
 * connections, not in the turn it takes the bytes; -1 when not known). req is the request's
 * X-Request-Id as the client sent it (loadlaw sends "loadlaw-<run>-<id>", id
 * as in the request record), or "engine-<n>" when it sent none. Times on the
 * run clock. */
#define LL_REC_HANDOFF_REQ_MAX 64
typedef struct ll_rec_handoff {
    const char *req;
    int tok;                  /* 0-based token index in the stream */
    int64_t step_end_ns, write_ns;
    int64_t send_ns;          /* written when >= 0; read back -1 when absent */
} ll_rec_handoff;

typedef struct ll_rec_profile {
    int level;
    int64_t t_ns;
    int num_steps;
    const char *style;        /* "sglang" | "vllm" */
    int http_status;          /* 0 = no answer */
    int ok;
    const char *detail;       /* server's answer (first 1 KiB) or curl's error */
    /* What followed the capture (written when has_wait; absent in older
     * files): the wait after the level before the next one could start. */
    int has_wait;
    double stop_s;            /* POST /stop_profile's answer took (NAN: none sent) */
    double wait_s;            /* the level's end to the wait's end */
    int64_t done_ns;          /* run clock: the wait's end (the next level starts after it) */
    double probe_ref_ms, probe_ms; /* a probe's ms per token before the capture, and the last
                               * after it (NAN: none) */
    int settled;              /* 1: the probe came back to the pre-capture pace; 0: gave up */
    size_t n_files;           /* the trace files the capture wrote, as seen from here */
    const char *const *files; /* their paths (n_files) */
    const int64_t *file_bytes; /* and sizes */
} ll_rec_profile;

/* A K-rank run (MPI): rank 0's estimate of one rank's clock before a level,
 * by ping-pong (the sample with the smallest round trip is kept). offset_ns
 * is that rank's CLOCK_MONOTONIC minus rank 0's; the rank's records are
 * already shifted by it. start_ns: the level's agreed start on the run clock. */
typedef struct ll_rec_clock {
    int level, rank;
    int64_t offset_ns, rtt_ns;
    int samples;
    int64_t start_ns;
} ll_rec_clock;

/* One sample of a known family scraped from a Prometheus endpoint during the
 * run (telemetry/scrape.c). t_ns: the middle of the scrape (request sent to body
 * received) on the run clock. name: the sample's name as exposed
 * (vllm:iteration_tokens_total_sum); labels: its label set in exposition
 * form, k="v",k2="v2" ("" for none); src: the endpoint's URL. value is finite
 * (a NaN or Inf sample is not written). */
typedef struct ll_rec_metric {
    int64_t t_ns;
    const char *src, *name, *labels;
    double value;
} ll_rec_metric;

/* ---- the writer ------------------------------------------------------------- */

typedef struct ll_rec_writer ll_rec_writer;

/* Create (truncate) path, take the run epoch (ll_now_ns()) and start the
 * writer thread. queue_cap: records that may wait (0: default 65536). The
 * writer checks at each level's end (and once a second) that path is still
 * the file it writes; when it was deleted or replaced it saves what it wrote
 * to PATH.recovered beside it, says so, and fails (LL_EIO) as on a write
 * error (records.c). */
int ll_rec_open(const char *path, size_t queue_cap, ll_rec_writer **out, char *err, size_t errlen);
/* CLOCK_MONOTONIC ns of run time 0. */
int64_t ll_rec_epoch_ns(const ll_rec_writer *w);

/* Queue one record. The struct is copied; strings and cJSON are copied or
 * formatted before return except where "takes" is said. They return
 * LL_ENOMEM, or LL_EIO once the writer has failed (the first write error is
 * kept; ll_rec_close reports it). */
int ll_rec_put_run(ll_rec_writer *w, const ll_rec_run *run);
int ll_rec_put_level(ll_rec_writer *w, const ll_rec_level *lv);
int ll_rec_put_level_end(ll_rec_writer *w, const ll_rec_level_end *le);
/* Takes rq->chunks, rq->error and rq->outputs (malloc'ed; freed by the
 * writer, also on error); the caller must not touch them afterwards. */
int ll_rec_put_request(ll_rec_writer *w, ll_rec_request *rq);
int ll_rec_put_step(ll_rec_writer *w, const ll_rec_step *st);
int ll_rec_put_profile(ll_rec_writer *w, const ll_rec_profile *pr);
int ll_rec_put_clock(ll_rec_writer *w, const ll_rec_clock *ck);
/* LL_EINVAL for a NULL or over-long (> 64 bytes) req. */
int ll_rec_put_handoff(ll_rec_writer *w, const ll_rec_handoff *h);
/* LL_EINVAL for a non-finite value (JSON cannot hold it). */
int ll_rec_put_metric(ll_rec_writer *w, const ll_rec_metric *m);
/* Lines another writer formatted (a rank's request records, already on this
 * run's clock): text is len bytes of whole lines, each ending in '\n'; it is
 * copied. LL_EINVAL when the last byte is not a newline. */
int ll_rec_put_lines(ll_rec_writer *w, const char *text, size_t len);
/* Any other record type (telemetry samples, ...): takes obj, which must have
 * a string "type". */
int ll_rec_put_json(ll_rec_writer *w, cJSON *obj);

/* Wait until every record queued before the call is written and flushed, or
 * until timeout_ns passes (<= 0: no bound). 0, LL_EINTR on timeout, LL_EIO if
 * the writer failed. */
int ll_rec_drain(ll_rec_writer *w, int64_t timeout_ns);
/* Records written so far (lines on disk). */
uint64_t ll_rec_written(const ll_rec_writer *w);
/* Request records handed to the writer after it failed (refused by a put or
 * dropped from the queue): not on disk. ll_rec_close says the count too. */
uint64_t ll_rec_lost_requests(ll_rec_writer *w);
/* Drain, stop the thread, close the file, free. Returns the first write
 * error (LL_EIO) if any. NULL is a no-op. Every producer must be done first
 * (loadgen's run freed, the engine detached with eng_set_records(e, NULL)):
 * a put that races with close uses freed memory. */
int ll_rec_close(ll_rec_writer *w);

/* ---- the reader ------------------------------------------------------------- */

/* Called for each record, in file order; each returns 0 to go on or a
 * negative code to stop (returned by ll_rec_read). A NULL handler skips that
 * type. Pointers inside the struct are valid during the call only. */
typedef struct ll_rec_handlers {
    int (*on_run)(const ll_rec_run *run, void *ctx);
    int (*on_level)(const ll_rec_level *lv, void *ctx);
    int (*on_level_end)(const ll_rec_level_end *le, void *ctx);
    int (*on_request)(const ll_rec_request *rq, void *ctx);
    int (*on_step)(const ll_rec_step *st, void *ctx);
    int (*on_profile)(const ll_rec_profile *pr, void *ctx);
    /* Types this reader does not know (counted in n_unknown as well). */
    int (*on_other)(const cJSON *obj, const char *type, void *ctx);
    /* Last, so positional initializers written before it stay valid. */
    int (*on_clock)(const ll_rec_clock *ck, void *ctx);
    int (*on_metric)(const ll_rec_metric *m, void *ctx);
    int (*on_handoff)(const ll_rec_handoff *h, void *ctx);
    /* Where the record about to be handed over lies in the file: its line's
     * byte offset and length without the newline; called before that
     * record's own handler, for every line, so that a caller may come back
     * to a line later (pread, then ll_rec_read_line) without holding it. */
    int (*on_line)(uint64_t off, size_t len, void *ctx);
} ll_rec_handlers;

typedef struct ll_rec_read_stats {
    size_t n_lines;           /* lines read */
    size_t n_truncated;       /* a truncated last line, skipped (0 or 1) */
    size_t n_unknown;         /* records of a type this reader does not know */
    size_t n_rejected;        /* records dropped: a required key missing, or a
                               * value out of range (see n_out_of_range) */
    size_t n_out_of_range;    /* values outside what the field can hold
                               * (times beyond +/- 2^62 ns, negative counts,
                               * tokens per chunk above 2^31), each counted */
} ll_rec_read_stats;

/* Read path (a records.jsonl). The run line must come first. LL_EIO: cannot
 * read; LL_EPARSE: malformed line (not the last); LL_EINVAL: no run line, or
 * a schema newer than LL_RECORDS_SCHEMA.
 * Required keys (a record without one is dropped and counted in n_rejected):
 * "level" on level, level_end, request and profile; "start_ns" on level;
 * "end_ns" on level_end; "status", "send_ns" and "end_ns" on request;
 * "start_ns" and "dur_ns" on step; "t_ns" on profile; "level", "rank" and
 * "offset_ns" on clock; "t_ns", "name" and a finite "value" on metric. Other keys take their
 * "absent" value (-1 for times and usage, 0 for counts, NULL for strings).
 * A run line without "engine_law.time_scale" (older files) reads as NAN. A
 * failed request whose error_class is unknown reads as LL_ERRC_OTHER. */
int ll_rec_read(const char *path, const ll_rec_handlers *h, void *ctx, ll_rec_read_stats *st,
                char *err, size_t errlen);
/* One line of a records file that ll_rec_read has read before (len bytes, no
 * newline needed), parsed and checked exactly as ll_rec_read does and handed
 * to h: a record after the run line (a run line here is rejected as a second
 * one; h->on_line, if set, is told offset 0). What it counts is added to
 * *st (may be NULL). 0, the handler's code, LL_EPARSE (not a JSON object;
 * err says so) or LL_ENOMEM. */
int ll_rec_read_line(const char *line, size_t len, const ll_rec_handlers *h, void *ctx, ll_rec_read_stats *st,
                     char *err, size_t errlen);

#endif
