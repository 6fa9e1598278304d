/* backend_cuda.c: eng_backend_cuda, the cpu backend's decode step on an
 * NVIDIA GPU (engine/cpu/backend_cpu.c is the model: same keys, same seeds,
 * same phases).
 *
 * A step for the scheduler's batch enqueues, on one stream, with a CUDA event
 * between phases (each phase is named after the kernel that does its work,
 * so /metrics and the /start_profile trace read like a real server's):
 *   kv_cache_fill_kernel       seeded KV rows: a slot's history on its first
 *                              use, the prompt rows prefilled this step
 *   embed_tokens_kernel        X (N, d_model) bf16 from each last token
 *   cublasGemmEx_bf16_f32_dense  Hd = X · W, bf16 in, fp32 out (the law's a)
 *   project_q_kv_kernel        queries and each sequence's new KV row
 *   mla_topk_select_kernel     the indexer stand-in: global pool rows
 *   mla_decode_{naive,tiled}_kernel   sparse MLA decode attention
 *                              (cuda_attn.h; tiled's combine included)
 *   cublasSgemm_logits         mean over heads, logits = mean · Wv
 *   softmax_argmax_kernel      next tokens, copied back to the host
 * then synchronises once, on the last event, and turns event offsets into
 * phase times: start = (host clock when the step began) + offset.
 *
 * Outputs, as the cpu backend's: a function of the prompt and the engine's
 * seed, never of the slot. A request's key (from eng_batch.prefill_seed)
 * gives its first token, its prompt rows and its top-k choice; every slot
 * starts a request on the same seeded history (refilled after a release).
 * Each token goes back with its logprob and alternatives when a request of
 * the step asked for logprobs (the logits are then copied back with the
 * tokens; otherwise the ids alone), and a prompt's scored continuation goes
 * through cuda_rescore.h's prefill path (the naive kernel, never the
 * testing fault attn_fault, which only the tiled kernel honours).
 *
 * Memory (cuda_state.c), all cudaMalloc'd at create from the keys:
 * the KV pool max_running x capacity x row bytes (1152 bf16, 656 fp8; slot s
 * owns rows [s*capacity, (s+1)*capacity)), the dense weights, and step
 * buffers for a batch of max_running. A request that does not fit fails
 * create with the sizes in the message.
 *
 * Errors: no device, out of memory, a failed launch or kernel -> create's err
 * or a failed step (LL_EIO) whose message eng_backend_ops.last_error gives
 * the engine for /health. A CUDA error poisons the context, so after one
 * failed step every later step fails at once.
 *
 * Tensor parallelism (tp=K, cuda_tp.h): one path for every K. The ranks run
 * on their own devices and streams, driven from the scheduler thread; each
 * enqueues the phases above for its heads (its shard of W), then, at K > 1,
 * one NCCL all-reduce of the attention sums; rank 0 samples. K = 1 is one
 * rank holding all of W and all heads: the unsharded GEMM, projection and
 * logits, no all-reduce, no NCCL, and one cudaEventSynchronize per step.
 *
 * DESIGN (threads): the scheduler thread calls step(), eng_start's thread
 * create(), eng_stop's destroy(); each first makes the backend's device
 * current (cudaSetDevice is per host thread).
 */
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "common.h"
#include "cuda_rescore.h"
#include "cuda_state.h"

/* ---- errors ----------------------------------------------------------------- */

/* Record a failed step's reason (for last_error) and log it once. */
static int step_fail(cuda_state *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->last_err, sizeof st->last_err, fmt, ap);
    va_end(ap);
    st->broken = 1;
    ll_error("%s", st->last_err);
    return LL_EIO;
}

/* The reason of a failed cuda_model.h call; a cuBLAS failure also names the
 * CUDA error pending, if any (after an earlier kernel's fault cuBLAS only
 * says EXECUTION_FAILED). */
static const char *model_status(int r)
{
    if (r < CUDA_MODEL_BLAS)
        return cuda_model_errstr(r);
    static __thread char buf[384];
    cudaError_t ce = cudaPeekAtLastError();
    snprintf(buf, sizeof buf, "%s", cuda_model_errstr(r));
    if (ce != cudaSuccess) {
        size_t used = strlen(buf);
        snprintf(buf + used, sizeof buf - used, " (pending CUDA error %s)", cuda_model_errstr(ce));
    }
    return buf;
}

/* ---- one step ----------------------------------------------------------------- */

static int check_slot(cuda_state *st, int slot)
{
    if (slot < 0 || slot >= st->o.max_slots) {
        ll_error("cuda backend: slot %d out of range [0, %d)", slot, st->o.max_slots);
        return LL_ERANGE;
    }
    return 0;
}

/* Queue a slot's seeded history (cpu_kv_fill over its whole capacity) the
 * first time it is used after create or a release: the same rows in every
 * slot, so a request finds the same history wherever it lands. */
static void want_history(cuda_state *st, int slot, cuda_fill_item *items, int *n)
{
    if (st->filled[slot])
        return;
    st->filled[slot] = 1;
    items[(*n)++] = (cuda_fill_item){.slot = slot, .n = st->o.capacity, .row0 = 0,
                                     .seed = cuda_history_seed(st->o.seed)};
}

/* A request's first prefill chunk: its key (top-k choice, prompt rows) and
 * first token from its seed (eng_batch.prefill_seed, a function of the
 * engine's seed and the prompt), as the cpu backend's; without seeds, the
 * slot's key (cuda_slot_key) stays. Returns the seed of its prompt rows. */
static uint64_t start_request(cuda_state *st, const eng_batch *b, int i)
{
    const eng_model_opts *o = &st->o;
    int slot = b->prefill_slot[i];
    if (!b->prefill_seed)
        return ll_splitmix64(o->seed ^ ((uint64_t)slot << 32) ^ 0x9f11ull);
    if (st->prefilled[slot] == 0) {
        st->key[slot] = ll_splitmix64(b->prefill_seed[i]);
        st->token[slot] = (int32_t)(ll_splitmix64(st->key[slot] ^ 0x70ull) % (uint64_t)o->vocab);
    }
    return ll_splitmix64(st->key[slot] ^ 0x9f11ull);
}

typedef struct phase_mark {
    const char *name;
    int ev; /* the event that ends it; it starts at ev - 1 */
} phase_mark;

/* The step's upload in the pinned buffer: slots, last tokens, contexts, fill
 * items (histories first, then this step's prefill rows); the bytes to copy. */
static size_t build_upload(cuda_state *st, const eng_batch *b, int *n_hist_out, int *n_pre_out,
                           int *max_pre_out)
{
    const eng_model_opts *o = &st->o;
    int n = b->n_decode;
    const cuda_upload *u = &st->up;
    int32_t *h_slot = (int32_t *)(st->h_up + u->off_slot);
    int32_t *h_tok = (int32_t *)(st->h_up + u->off_tok);
    int64_t *h_ctx = (int64_t *)(st->h_up + u->off_ctx);
    uint64_t *h_key = (uint64_t *)(st->h_up + u->off_key);
    cuda_fill_item *h_items = (cuda_fill_item *)(st->h_up + u->off_items);
    int n_hist = 0, n_pre = 0, max_pre = 0; /* max_pre: most rows of one prefill item */
    for (int i = 0; i < b->n_prefill; i++)
        want_history(st, b->prefill_slot[i], h_items, &n_hist);
    for (int i = 0; i < n; i++)
        want_history(st, b->decode_slot[i], h_items, &n_hist);
    cuda_fill_item *h_pre = h_items + n_hist;
    for (int i = 0; i < b->n_prefill; i++) {
        int slot = b->prefill_slot[i];
        int64_t tok = b->prefill_tok[i];
        uint64_t rows_seed = start_request(st, b, i);
        if (tok <= 0)
            continue;
        /* rows past capacity wrap onto rows already written with the same
         * values (a row's value depends only on its index): write each once */
        int cnt = tok < o->capacity ? (int)tok : o->capacity;
        h_pre[n_pre++] = (cuda_fill_item){
            .slot = slot, .n = cnt, .row0 = st->prefilled[slot] % o->capacity,
            .seed = rows_seed};
        if (cnt > max_pre)
            max_pre = cnt;
        st->prefilled[slot] += tok;
    }
    for (int i = 0; i < n; i++) {
        h_slot[i] = b->decode_slot[i];
        h_tok[i] = st->token[b->decode_slot[i]];
        h_ctx[i] = b->decode_ctx[i];
        h_key[i] = st->key[b->decode_slot[i]];
    }
    *n_hist_out = n_hist;
    *n_pre_out = n_pre;
    *max_pre_out = max_pre;
    return u->off_items + (size_t)(n_hist + n_pre) * sizeof(cuda_fill_item);
}

/* ---- one step ----------------------------------------------------------------------
 * From this (the scheduler) thread, for each rank in turn on its device and
 * stream: the upload, fill, embed, its GEMM block (its W columns), its
 * heads' queries and the new KV row into its own pool copy, top-k, its heads'
 * attention and (K > 1) their sum (n, 512). Then, at K > 1, one
 * ncclGroupStart/End with the K all-reduces of those sums
 * (eng_comm_allreduce_group, each on its rank's stream), and rank 0 samples
 * from the mean over all heads; the tokens come back to the host, so the
 * next step embeds the same tokens on every rank. Each rank's phases are
 * timed with events on its own stream; the all-reduce phase is named like
 * NCCL's kernel. If a rank fails before the all-reduce, no collective is
 * issued (no rank waits for a peer that never comes) and the backend is
 * broken from then on. */

/* "" at K = 1, "tp rank 1 (device 1): " else: what a step's messages say
 * first. */
static const char *rank_tag(const cuda_state *st, const cuda_rank *rk)
{
    static __thread char buf[64];
    if (st->o.tp == 1)
        return "";
    snprintf(buf, sizeof buf, "tp rank %d (device %d): ", rk->rank, rk->device);
    return buf;
}

#define RANK_CUDA(call, what)                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess)                                                                 \
            return step_fail(st, "cuda backend: %s%s failed: %s", rank_tag(st, rk), what,      \
                             cuda_model_errstr(e_));                                           \
    } while (0)

#define RANK_MODEL(call, what)                                                                 \
    do {                                                                                       \
        int r_ = (call);                                                                       \
        if (r_ != 0)                                                                           \
            return step_fail(st, "cuda backend: %s%s failed: %s", rank_tag(st, rk), what,      \
                             model_status(r_));                                                \
    } while (0)

typedef struct rank_marks {
    phase_mark pm[CUDA_TP_RANK_PHASES];
    int np, ev;
    int64_t t_host0; /* host clock when the rank's first event was recorded */
} rank_marks;

#define RANK_MARK(nm)                                                                          \
    do {                                                                                       \
        RANK_CUDA(cudaEventRecord(rk->ev[m->ev], rk->stream), "cudaEventRecord");              \
        m->pm[m->np++] = (phase_mark){.name = (nm), .ev = m->ev++};                            \
    } while (0)

/* A rank's work up to its attention (and, K > 1, its head sum). */
static int rank_enqueue(cuda_state *st, cuda_rank *rk, rank_marks *m, const eng_batch *b,
                        int n_hist, int n_pre, int max_pre, size_t up_bytes)
{
    const eng_model_opts *o = &st->o;
    const cuda_upload *u = &st->up;
    int n = b->n_decode, hr = rk->h1 - rk->h0;
    const int32_t *d_slot = (const int32_t *)(rk->d_up + u->off_slot);
    const int32_t *d_tok = (const int32_t *)(rk->d_up + u->off_tok);
    const int64_t *d_ctx = (const int64_t *)(rk->d_up + u->off_ctx);
    const uint64_t *d_key = (const uint64_t *)(rk->d_up + u->off_key);
    const cuda_fill_item *d_items = (const cuda_fill_item *)(rk->d_up + u->off_items);
    m->np = 0;
    m->ev = 0;
    RANK_CUDA(cudaSetDevice(rk->device), "cudaSetDevice");
    m->t_host0 = ll_now_ns();
    RANK_CUDA(cudaEventRecord(rk->ev[m->ev++], rk->stream), "cudaEventRecord");
    if (rk->rank == 0 && st->steps == o->fault_step)
        RANK_MODEL(cuda_model_fault_launch(rk->stream), "fault_fail_step (a testing aid): a launch");
    RANK_CUDA(cudaMemcpyAsync(rk->d_up, st->h_up, up_bytes, cudaMemcpyHostToDevice, rk->stream),
              "uploading the batch (cudaMemcpyAsync)");
    if (n_hist + n_pre > 0) {
        /* histories first: a slot's prompt rows land on top of its history */
        RANK_MODEL(cuda_kv_fill(rk->d_pool, st->layout, o->capacity, d_items, n_hist,
                                n_hist ? o->capacity : 0, rk->stream),
                   CUDA_K_FILL " (slot history)");
        RANK_MODEL(cuda_kv_fill(rk->d_pool, st->layout, o->capacity, d_items + n_hist, n_pre,
                                max_pre, rk->stream),
                   CUDA_K_FILL " (prefill rows)");
        RANK_MARK(CUDA_K_FILL);
    }
    if (n == 0)
        return 0;
    RANK_MODEL(cuda_embed(&rk->dense, d_tok, n, o->seed, rk->d_x, rk->stream), CUDA_K_EMBED);
    RANK_MARK(CUDA_K_EMBED);
    RANK_MODEL(cuda_dense_forward(&rk->dense, rk->d_x, n, rk->d_hd), CUDA_K_GEMM);
    RANK_MARK(CUDA_K_GEMM);
    if (rk->whole)
        RANK_MODEL(cuda_project(&rk->dense, rk->d_hd, n, hr, d_slot, d_ctx, rk->d_pool, st->layout,
                                o->capacity, rk->d_q, rk->stream),
                   CUDA_K_PROJECT);
    else
        RANK_MODEL(cuda_project_shard(rk->d_hd, rk->dense.ld, n, rk->h0, hr, o->d_ff, rk->d_colmap,
                                      d_slot, d_ctx, rk->d_pool, st->layout, o->capacity, rk->d_q,
                                      rk->stream),
                   CUDA_K_PROJECT);
    RANK_MARK(CUDA_K_PROJECT);
    RANK_MODEL(cuda_topk(d_slot, d_ctx, d_key, n, o->topk, o->min_ctx, o->capacity, o->seed, rk->d_idx,
                         rk->stream),
               CUDA_K_TOPK);
    RANK_MARK(CUDA_K_TOPK);
    cuda_attn_args a = {
        .n_seq = n, .heads = hr, .topk = o->topk,
        .scale = 1.0f / sqrtf((float)CUDA_ATTN_DQK), .layout = st->layout, .q = rk->d_q,
        .kv = rk->d_pool, .kv_rows = st->pool_rows, .idx = rk->d_idx, .out = rk->d_out,
        .lse = rk->d_lse, .ws = rk->d_ws, .ws_bytes = rk->ws_bytes, .fault = st->fault,
    };
    RANK_MODEL(cuda_attn_decode(st->kind, &a, rk->sm_count, rk->stream), st->attn_name);
    RANK_CUDA(cudaGetLastError(), st->attn_name);
    /* the row-parallel half: this rank's heads summed, for the all-reduce */
    if (o->tp > 1)
        RANK_MODEL(cuda_head_sum(rk->d_out, n, hr, rk->d_sum, rk->stream), "head_reduce_kernel (head sum)");
    RANK_MARK(st->attn_name);
    return 0;
}

/* The all-reduce of the head sums (K > 1), then rank 0's logits and tokens. */
static int reduce_and_sample(cuda_state *st, rank_marks *marks, int n, int want_lp)
{
    const eng_model_opts *o = &st->o;
    const int K = o->tp;
    cuda_rank *rk;
    rank_marks *m;
    if (K > 1) {
        float *bufs[CUDA_TP_MAX];
        void *streams[CUDA_TP_MAX];
        for (int r = 0; r < K; r++) {
            bufs[r] = st->rk[r].d_sum;
            streams[r] = st->rk[r].stream;
        }
        if (eng_comm_allreduce_group(st->comm, bufs, (size_t)n * CUDA_ATTN_DV, streams) != 0) {
            /* some ranks' collectives may be queued already, waiting for peers
             * that never come: abort them, or destroy's stream syncs hang */
            int rc = step_fail(st, "cuda backend: tp=%d all-reduce of the attention sums failed: %s", K,
                               eng_comm_last_error(st->comm));
            eng_comm_abort(st->comm);
            return rc;
        }
        for (int r = 0; r < K; r++) {
            rk = &st->rk[r];
            m = &marks[r];
            RANK_CUDA(cudaSetDevice(rk->device), "cudaSetDevice");
            RANK_MARK(CUDA_K_ALLREDUCE);
        }
    }
    /* rank 0 samples; every rank embeds the tokens it sampled next step */
    rk = &st->rk[0];
    m = &marks[0];
    RANK_CUDA(cudaSetDevice(rk->device), "cudaSetDevice");
    if (K > 1)
        RANK_MODEL(cuda_logits_sum(&rk->dense, rk->d_sum, n, o->heads, rk->d_mean, rk->d_logits,
                                   rk->stream),
                   CUDA_K_LOGITS);
    else
        RANK_MODEL(cuda_logits(&rk->dense, rk->d_out, n, o->heads, rk->d_mean, rk->d_logits,
                               rk->stream),
                   CUDA_K_LOGITS);
    RANK_MARK(CUDA_K_LOGITS);
    RANK_MODEL(cuda_sample(rk->d_logits, n, o->vocab, rk->d_tok_out, rk->d_prob, rk->stream),
               CUDA_K_SAMPLE);
    RANK_CUDA(cudaMemcpyAsync(st->h_tok_out, rk->d_tok_out, (size_t)n * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, rk->stream),
              "copying the tokens back (cudaMemcpyAsync)");
    /* the logits and winners' probabilities: each token's logprob and
     * alternatives for the engine (cuda_score_row, on the host), only when a
     * request of the step asked for them: n * vocab floats copied and scanned
     * on the host every step would add to the step time the law measures */
    if (want_lp) {
        RANK_CUDA(cudaMemcpyAsync(st->h_logits, rk->d_logits, (size_t)n * o->vocab * sizeof(float),
                                  cudaMemcpyDeviceToHost, rk->stream),
                  "copying the logits back (cudaMemcpyAsync)");
        RANK_CUDA(cudaMemcpyAsync(st->h_prob, rk->d_prob, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost,
                                  rk->stream),
                  "copying the probabilities back (cudaMemcpyAsync)");
    }
    RANK_MARK(CUDA_K_SAMPLE);
    return 0;
}

/* cuda_tp_wait's view of a step's ranks: each rank's last event. */
typedef struct tp_poll {
    cuda_state *st;
    const rank_marks *marks;
    cudaError_t err;  /* the failed rank's error */
} tp_poll;

static int tp_query(void *ctx, int r)
{
    tp_poll *p = ctx;
    const rank_marks *m = &p->marks[r];
    cudaError_t e = cudaSetDevice(p->st->rk[r].device);
    if (e == cudaSuccess)
        e = cudaEventQuery(p->st->rk[r].ev[m->ev - 1]);
    if (e == cudaSuccess)
        return 0;
    if (e == cudaErrorNotReady) {
        /* the runtime also keeps "not ready" as this thread's last error:
         * left there, the next step's first launch check (cudaGetLastError)
         * would fail on it (PyTorch's CUDAEvent::query clears it the same way) */
        (void)cudaGetLastError();
        return 1;
    }
    p->err = e;
    return -1;
}

static int tp_comm_failed(void *ctx)
{
    return eng_comm_check(((tp_poll *)ctx)->st->comm) != 0;
}

static void tp_pause(void *ctx)
{
    (void)ctx;
    sched_yield(); /* as the runtime's own spin-then-yield wait does */
}

/* Wait for every rank's last event. K = 1: the step's one synchronisation
 * (a kernel's own failure shows here). K > 1: the ranks polled together
 * with NCCL's own error: a blocking wait on one rank would hang if another
 * failed (cuda_tp.h); on a failure the communicators are aborted. */
static int wait_ranks(cuda_state *st, const rank_marks *marks, const eng_batch *b)
{
    const int K = st->o.tp, n = b->n_decode;
    int failed = 0, why = CUDA_TP_WAIT_RANK;
    tp_poll poll = {.st = st, .marks = marks};
    if (K == 1) {
        poll.err = cudaEventSynchronize(st->rk[0].ev[marks[0].ev - 1]);
        if (poll.err == cudaSuccess)
            return 0;
    } else {
        cuda_tp_waiter w = {.query = tp_query, .comm_failed = tp_comm_failed, .pause = tp_pause,
                            .ctx = &poll};
        why = cuda_tp_wait(&w, K, &failed);
        if (why == CUDA_TP_WAIT_DONE)
            return 0;
        /* end the peers' all-reduce kernels before anything else touches the GPUs */
        eng_comm_abort(st->comm);
        if (why == CUDA_TP_WAIT_COMM)
            return step_fail(st, "cuda backend: tp=%d step with %d decoding: %s (communicators "
                             "aborted)", K, n, eng_comm_last_error(st->comm));
    }
    const rank_marks *m = &marks[failed];
    return step_fail(st, "cuda backend: %sstep with %d decoding, %d prefilling (kernels %s .. %s) "
                     "failed: %s%s", rank_tag(st, &st->rk[failed]), n, b->n_prefill,
                     m->np ? m->pm[0].name : "-", m->np ? m->pm[m->np - 1].name : "-",
                     cuda_model_errstr(poll.err), K > 1 ? " (communicators aborted)" : "");
}

/* Each rank's phases from its events: start = the host clock when its first
 * event was recorded + the event offset, kept inside the step as the host
 * saw it (the GPU clock and the host clock differ by a little). */
static int rank_phases(cuda_state *st, const rank_marks *marks, eng_phase *phases, int *n_phases)
{
    int64_t t_end = ll_now_ns();
    int np = 0;
    for (int r = 0; r < st->o.tp; r++) {
        cuda_rank *rk = &st->rk[r];
        const rank_marks *m = &marks[r];
        float prev_ms = 0.0f;
        for (int k = 0; k < m->np && np < ENG_MAX_PHASES; k++) {
            float ms = 0.0f;
            RANK_CUDA(cudaEventElapsedTime(&ms, rk->ev[0], rk->ev[m->pm[k].ev]),
                      "cudaEventElapsedTime");
            int64_t s0 = m->t_host0 + (int64_t)((double)prev_ms * 1e6);
            int64_t s1 = m->t_host0 + (int64_t)((double)ms * 1e6);
            if (s1 > t_end)
                s1 = t_end;
            if (s0 > s1)
                s0 = s1;
            phases[np++] = (eng_phase){.name = m->pm[k].name, .start_ns = s0, .dur_ns = s1 - s0,
                                       .rank = r};
            prev_ms = ms;
        }
    }
    *n_phases = np;
    return 0;
}

static int cuda_create(const eng_config *cfg, void **state, char *err, size_t errlen)
{
    cuda_state *st = NULL;
    int rc = cuda_state_create(cfg, &st, err, errlen);
    *state = rc == 0 ? st : NULL;
    return rc;
}

static void cuda_destroy(void *state) { cuda_state_destroy(state); }

static int cuda_step(void *state, const eng_batch *b, int64_t step_start_ns, eng_phase *phases,
                     int *n_phases)
{
    (void)step_start_ns;
    cuda_state *st = state;
    const eng_model_opts *o = &st->o;
    *n_phases = 0;
    if (b->n_decode < 0 || b->n_prefill < 0 || b->n_decode > o->max_slots ||
        b->n_prefill > o->max_slots)
        return LL_EINVAL;
    if (st->broken)
        return LL_EIO; /* last_err still says why */
    for (int i = 0; i < b->n_prefill; i++)
        if (check_slot(st, b->prefill_slot[i]) != 0)
            return LL_ERANGE;
    for (int i = 0; i < b->n_decode; i++)
        if (check_slot(st, b->decode_slot[i]) != 0)
            return LL_ERANGE;
    int n = b->n_decode;
    if (n == 0 && b->n_prefill == 0)
        return 0;

    int n_hist = 0, n_pre = 0, max_pre = 0; /* max_pre: most rows of one prefill item */
    size_t up_bytes = build_upload(st, b, &n_hist, &n_pre, &max_pre);
    rank_marks marks[CUDA_TP_MAX];
    ++st->steps;
    for (int r = 0; r < o->tp; r++) {
        int rc = rank_enqueue(st, &st->rk[r], &marks[r], b, n_hist, n_pre, max_pre, up_bytes);
        if (rc != 0)
            return rc;
    }
    int rc = n > 0 ? reduce_and_sample(st, marks, n, b->want_lp) : 0;
    if (rc == 0)
        rc = wait_ranks(st, marks, b);
    if (rc == 0)
        rc = rank_phases(st, marks, phases, n_phases);
    if (rc != 0)
        return rc;
    for (int i = 0; i < n; i++)
        st->token[b->decode_slot[i]] = st->h_tok_out[i];
    if (n > 0)
        st->last_n = n;
    return cuda_step_outputs(st, b, phases, n_phases);
}

static void cuda_release(void *state, int slot)
{
    cuda_state *st = state;
    if (check_slot(st, slot) != 0)
        return;
    /* forget the request; the slot's rows go back to history at its next use */
    st->prefilled[slot] = 0;
    st->token[slot] = 0;
    st->filled[slot] = 0;
    st->key[slot] = cuda_slot_key(st->o.seed, slot);
}

static const char *cuda_last_error(void *state)
{
    const cuda_state *st = state;
    return st && st->last_err[0] ? st->last_err : NULL;
}

int cuda_backend_token(void *state, int slot)
{
    const cuda_state *st = state;
    if (slot < 0 || slot >= st->o.max_slots)
        return -1;
    return st->token[slot];
}

int cuda_backend_view_rank(void *state, int r, cuda_backend_view *v)
{
    const cuda_state *st = state;
    if (r < 0 || r >= st->o.tp)
        return 1;
    const cuda_rank *rk = &st->rk[r];
    *v = (cuda_backend_view){
        .n_seq = st->last_n, .heads = rk->h1 - rk->h0, .topk = st->o.topk,
        .scale = 1.0f / sqrtf((float)CUDA_ATTN_DQK), .layout = st->layout, .kind = st->kind,
        .d_q = rk->d_q, .d_idx = rk->d_idx, .d_out = rk->d_out, .d_pool = rk->d_pool,
        .pool_rows = st->pool_rows, .row_bytes = st->row_bytes,
        .tp = st->o.tp, .rank = r, .device = rk->device, .h0 = rk->h0, .vocab = st->o.vocab,
        .d_mean = st->rk[0].d_mean, .d_logits = st->rk[0].d_logits, .d_sum = rk->d_sum,
    };
    return 0;
}

void cuda_backend_view_get(void *state, cuda_backend_view *v)
{
    (void)cuda_backend_view_rank(state, 0, v);
}

const eng_backend_ops eng_backend_cuda = {
    .name = "cuda",
    /* computes (on the GPU); its step time is measured; scores a continuation
     * through a naive-kernel prefill (cuda_rescore.h) */
    .caps = ENG_CAP_PROMPT_LOGPROBS,
    .create = cuda_create,
    .step = cuda_step,
    .release = cuda_release,
    .destroy = cuda_destroy,
    .last_error = cuda_last_error,
};
