/* dist_mpi.c: the lg_dist hooks over MPI (dist.h): one sweep driven
 * from K ranks, one timeline on rank 0's clock, one records.jsonl.
 *
 * DESIGN (per level, point to point only, every wait bounded on rank 0):
 *   before_level  each rank r > 0 sends HELLO{level, stop}. Rank 0 waits for
 *                 every HELLO (a rank silent for SILENT_NS is named, and the
 *                 run ends), then, unless a rank asked to
 *                 stop, ping-pongs PING_ROUNDS times with each rank: t0 on
 *                 rank 0, the rank's clock t_r, t1 on rank 0; the sample
 *                 with the smallest round trip gives offset = t_r - (t0+t1)/2
 *                 (its error is at most half that round trip). Rank 0 picks
 *                 the start T = now + START_MARGIN_NS on its clock and sends
 *                 GO{stop, offset, rtt, T, epoch0}. Every rank converts T and
 *                 rank 0's run epoch to its own CLOCK_MONOTONIC with its
 *                 offset and sleeps to T with clock_nanosleep(TIMER_ABSTIME):
 *                 a barrier's release is not simultaneous, a deadline on each
 *                 clock is. Rank 0 writes a "clock" record per rank.
 *   during        every rank > 0 sends PROGRESS{its part} each LG_TICK_NS
 *                 (loadgen's tick): rank 0's progress line sums them, and a
 *                 rank silent for SILENT_NS with no summary sent is lost.
 *   after_level   rank r drains its records writer, reads back the request
 *                 lines its level added to its own file (already on rank 0's
 *                 clock: loadgen wrote them against the converted epoch) and
 *                 sends SUMMARY{counts, client cost, bytes} then the lines in
 *                 pieces of at most PIECE_BYTES, cut at newlines. Rank 0 puts
 *                 them into records.jsonl as they are (ll_rec_put_lines) and
 *                 adds the counts to its level_end.
 * MPI runs on the sweep's driver thread only (MPI_THREAD_FUNNELED), between
 * levels: never inside libcurl callbacks or worker threads.
 *
 * Crash safety: each rank's own file (RUN_DIR/rank-<r>.jsonl) is flushed
 * per request by its writer; rank 0's records.jsonl holds every level that
 * was gathered. A rank that dies is noticed by rank 0 by its silence (no
 * progress, hello or summary for SILENT_NS) and named once the live ranks'
 * level is gathered; the finished levels stay in the file.
 *
 * Test keys (environment, read at init; never set in normal use):
 *   LOADLAW_TEST_CLOCK_SKEW_NS=S  ranks > 0 read their clock S ns ahead, as a
 *                                 host whose clock differs would; the offset
 *                                 estimate must undo it.
 *   LOADLAW_TEST_RANK_EXIT=R:L    rank R _exits 50 ms into level L.
 *   LOADLAW_TEST_RANK_HANG=R:L    rank R sends its summary of level L, then
 *                                 nothing (cut off between the summary and
 *                                 its records), until the job ends it.
 *   LOADLAW_MPI_WAIT_S=S          rank 0's bound on a rank's silence (when
 *                                 shorter than SILENT_NS) and on each piece
 *                                 of its records once its summary came. */
/* memrchr is a GNU extension */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "dist.h"

#define PING_ROUNDS 64
/* Time from rank 0 choosing the start to the start: the GO messages and
 * each rank's wake-up fit well inside it, even with ranks sharing cores. */
#define START_MARGIN_NS 50000000LL
#define PIECE_BYTES (16u << 20)
/* Waiting for a message: spin this long (a ping-pong answer comes within
 * microseconds), then probe every POLL_SLEEP_NS so a waiting rank does not
 * take a core from the ranks still generating load. */
#define SPIN_NS 2000000LL
#define POLL_SLEEP_NS 200000L

/* A rank silent this long during a level (no progress message, no summary)
 * is taken for dead; it sends one every LG_TICK_NS while its level runs. */
#define SILENT_NS 10000000000LL

enum { TAG_HELLO = 1, TAG_PING, TAG_PONG, TAG_GO, TAG_SUMMARY, TAG_DATA, TAG_PROGRESS };

typedef struct hello_msg {
    int32_t level, stop;
} hello_msg;

typedef struct go_msg {
    int32_t stop, level;
    int64_t offset_ns, rtt_ns, start_ns, epoch0_ns; /* start and epoch on rank 0's clock */
} go_msg;

/* All ranks run the same binary, so the struct travels as bytes. */
typedef struct summary_msg {
    int32_t level, ok, failed, interrupted, threads, pad;
    double cpu_s_max, cpu_s_sum;
    uint64_t reads, events, n_bytes;
    int64_t reads_kstamp;
} summary_msg;

struct dist_world {
    int rank, ranks;
    int64_t skew_ns;           /* test key: added to this rank's clock reads */
    int exit_rank, exit_level; /* test key: -1 = none */
    int hang_rank, hang_level; /* test key: -1 = none */
    double wait_s;
    int lost;                  /* a rank stopped answering */
    int synced;                /* dist_synced: ending alone is safe */
    ll_rec_writer *w;
    const char *local_path;    /* ranks > 0: their records file */
    long sent_off;             /* bytes of it already sent */
    int64_t epoch0_ns;         /* rank 0: its run epoch */
    int level;                 /* the level running (rank 0's progress) */
    lg_progress *part;         /* rank 0: each rank's last progress message */
    int64_t *heard_ns;         /* rank 0: when each rank was last heard */
    int64_t silent_ns;         /* rank 0: heard nothing this long: lost */
    lg_dist dist;
};

int dist_launched(void)
{
    /* Open MPI's mpirun, and PMI/PMIx launchers (srun, hydra). Not SLURM_NTASKS:
     * it is set in a whole sbatch shell, where a plain sweep is one process. */
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars; i++) {
        const char *v = getenv(size_vars[i]);
        if (v && atoi(v) > 1)
            return 1;
    }
    /* srun --mpi=pmix: a PMIx rank among the step's tasks */
    const char *tasks = getenv("SLURM_STEP_NUM_TASKS");
    return getenv("PMIX_RANK") && tasks && atoi(tasks) > 1;
}

static int64_t clock_ns(const dist_world *m) { return ll_now_ns() + m->skew_ns; }

static void read_test_keys(dist_world *m)
{
    const char *v = getenv("LOADLAW_TEST_CLOCK_SKEW_NS");
    if (v && m->rank > 0)
        m->skew_ns = strtoll(v, NULL, 10);
    m->exit_rank = m->exit_level = -1;
    if ((v = getenv("LOADLAW_TEST_RANK_EXIT")) && sscanf(v, "%d:%d", &m->exit_rank, &m->exit_level) != 2)
        m->exit_rank = -1;
    m->hang_rank = m->hang_level = -1;
    if ((v = getenv("LOADLAW_TEST_RANK_HANG")) && sscanf(v, "%d:%d", &m->hang_rank, &m->hang_level) != 2)
        m->hang_rank = -1;
}

int dist_init(dist_world **out, char *err, size_t errlen)
{
    int provided = 0, rc;
    dist_world *m = calloc(1, sizeof *m);
    if (!m)
        return LL_ENOMEM;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        ll_errf(err, errlen, "MPI_Init_thread failed");
        rc = LL_ESYS;
        goto fail;
    }
    /* A failed call returns here instead of aborting the job: rank 0 can then
     * name the rank and keep what was measured. */
    if (MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(MPI_COMM_WORLD, &m->rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &m->ranks) != MPI_SUCCESS) {
        ll_errf(err, errlen, "MPI: rank and size unknown");
        rc = LL_ESYS;
        goto fail;
    }
    if (provided < MPI_THREAD_FUNNELED)
        ll_warn("MPI gives thread level %d (< funneled); loadlaw calls MPI from one thread only", provided);
    read_test_keys(m);
    *out = m;
    return 0;
fail:
    free(m);
    return rc;
}

int dist_rank(const dist_world *m) { return m->rank; }
int dist_ranks(const dist_world *m) { return m->ranks; }
int dist_lost_rank(const dist_world *m) { return m && m->lost; }
void dist_synced(dist_world *m) { m->synced = 1; }

int dist_bcast(dist_world *m, char **text, char *err, size_t errlen)
{
    uint64_t len = m->rank == 0 ? strlen(*text) + 1 : 0;
    if (MPI_Bcast(&len, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS || len > INT32_MAX) {
        ll_errf(err, errlen, "MPI_Bcast of the job failed");
        return LL_EIO;
    }
    if (m->rank != 0 && !(*text = malloc(len)))
        return LL_ENOMEM;
    if (MPI_Bcast(*text, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        ll_errf(err, errlen, "MPI_Bcast of the job failed");
        if (m->rank != 0) {
            free(*text);
            *text = NULL;
        }
        return LL_EIO;
    }
    (*text)[len - 1] = '\0';
    return 0;
}

/* Wait until a message from src with tag is there. deadline_ns 0: no bound
 * (a rank > 0 waiting on rank 0, whose death ends the job anyway).
 * LL_EINTR when the deadline passed, LL_EIO when MPI failed. */
static int wait_msg(int src, int tag, int64_t deadline_ns, MPI_Status *st)
{
    int64_t spin_until = ll_now_ns() + SPIN_NS;
    for (;;) {
        int flag = 0;
        if (MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, st) != MPI_SUCCESS)
            return LL_EIO;
        if (flag)
            return 0;
        int64_t now = ll_now_ns();
        if (deadline_ns && now >= deadline_ns)
            return LL_EINTR;
        if (now >= spin_until) {
            struct timespec ts = {0, POLL_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
}

static int recv_bytes(void *buf, int n, int src, int tag, int64_t deadline_ns)
{
    MPI_Status st;
    int rc = wait_msg(src, tag, deadline_ns, &st);
    if (rc)
        return rc;
    return MPI_Recv(buf, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : LL_EIO;
}

static int send_bytes(const void *buf, int n, int dst, int tag)
{
    return MPI_Send(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : LL_EIO;
}

static int64_t deadline(const dist_world *m) { return ll_now_ns() + (int64_t)(m->wait_s * 1e9); }

/* Rank 0 lost rank r: say which, and what the run keeps. rc LL_EINTR: no
 * answer in time (what: what it did not do); else an MPI error. */
static int lost(dist_world *m, int r, int rc, const char *what, int level, char *err, size_t errlen)
{
    m->lost = 1;
    ll_errf(err, errlen, "rank %d did not %s level %d (%s; died?); the levels before it are complete in "
            "records.jsonl, and rank %d's own records are in its rank-%d.jsonl",
            r, what, level, rc == LL_EINTR ? "no word from it in time" : "MPI error", r, r);
    return LL_EIO;
}

static void sleep_until(int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000), (long)(t_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* Rank 0: the minimum-round-trip sample of PING_ROUNDS with rank r. */
static int ping_pong(dist_world *m, int r, int64_t *offset_ns, int64_t *rtt_ns)
{
    int rc = 0;
    *rtt_ns = INT64_MAX;
    for (int i = 0; i < PING_ROUNDS; i++) {
        int64_t t_r = 0, t0 = ll_now_ns();
        if ((rc = send_bytes(&t0, sizeof t0, r, TAG_PING)) ||
            (rc = recv_bytes(&t_r, sizeof t_r, r, TAG_PONG, deadline(m))))
            return rc;
        int64_t t1 = ll_now_ns();
        if (t1 - t0 < *rtt_ns) {
            *rtt_ns = t1 - t0;
            *offset_ns = t_r - (t0 + (t1 - t0) / 2);
        }
    }
    return 0;
}

static void *exit_soon(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 50000000L};
    nanosleep(&ts, NULL);
    _exit(1); /* a rank that dies mid-level, without a word */
}

static void maybe_test_exit(const dist_world *m, int level)
{
    pthread_t t;
    if (m->rank == m->exit_rank && level == m->exit_level && pthread_create(&t, NULL, exit_soon, NULL) == 0)
        pthread_detach(t);
}

static int before_rank0(dist_world *m, int level, int stop, int64_t *epoch_ns, char *err, size_t errlen)
{
    int rc = 0;
    go_msg *go = calloc((size_t)m->ranks, sizeof *go);
    if (!go)
        return LL_ENOMEM;
    for (int r = 1; r < m->ranks; r++) {
        hello_msg h;
        /* a rank says hello right after its last level's summary: no long wait */
        if ((rc = recv_bytes(&h, sizeof h, r, TAG_HELLO, ll_now_ns() + m->silent_ns))) {
            rc = lost(m, r, rc, "answer before", level, err, errlen);
            goto out;
        }
        stop |= h.stop;
    }
    for (int r = 1; r < m->ranks && !stop; r++)
        if ((rc = ping_pong(m, r, &go[r].offset_ns, &go[r].rtt_ns))) {
            rc = lost(m, r, rc, "answer the clock pings before", level, err, errlen);
            goto out;
        }
    int64_t start = ll_now_ns() + START_MARGIN_NS;
    for (int r = 1; r < m->ranks; r++) {
        go[r].stop = stop;
        go[r].level = level;
        go[r].start_ns = start;
        go[r].epoch0_ns = m->epoch0_ns;
        if ((rc = send_bytes(&go[r], sizeof go[r], r, TAG_GO))) {
            rc = lost(m, r, rc, "take the start of", level, err, errlen);
            goto out;
        }
    }
    if (stop) {
        rc = LL_EINTR;
        goto out;
    }
    for (int r = 1; r < m->ranks; r++) {
        ll_rec_clock ck = {.level = level, .rank = r, .offset_ns = go[r].offset_ns, .rtt_ns = go[r].rtt_ns,
                           .samples = PING_ROUNDS, .start_ns = start - m->epoch0_ns};
        if ((rc = ll_rec_put_clock(m->w, &ck))) {
            ll_errf(err, errlen, "queueing a clock record: %s", ll_strerror(rc));
            goto out;
        }
    }
    *epoch_ns = m->epoch0_ns;
    m->level = level;
    for (int r = 1; r < m->ranks; r++) {
        m->heard_ns[r] = start;
        m->part[r] = (lg_progress){.level = level};
    }
    sleep_until(start);
out:
    free(go);
    return rc;
}

static int before_rank(dist_world *m, int level, int stop, int64_t *epoch_ns, char *err, size_t errlen)
{
    hello_msg h = {.level = level, .stop = stop};
    int rc;
    if ((rc = send_bytes(&h, sizeof h, 0, TAG_HELLO)))
        goto fail;
    for (;;) {
        MPI_Status st;
        int64_t t0 = 0;
        if ((rc = wait_msg(0, MPI_ANY_TAG, 0, &st)))
            goto fail;
        if (st.MPI_TAG != TAG_PING)
            break;
        LL_TRY(recv_bytes(&t0, sizeof t0, 0, TAG_PING, 0));
        int64_t t_r = clock_ns(m);
        LL_TRY(send_bytes(&t_r, sizeof t_r, 0, TAG_PONG));
    }
    go_msg go;
    LL_TRY(recv_bytes(&go, sizeof go, 0, TAG_GO, 0));
    if (go.stop)
        return LL_EINTR;
    /* rank 0's clock + offset = this rank's clock (as read, skew included);
     * minus the skew = the CLOCK_MONOTONIC that loadgen and the kernel use */
    int64_t to_local = go.offset_ns - m->skew_ns;
    *epoch_ns = go.epoch0_ns + to_local;
    ll_rec_clock ck = {.level = level, .rank = m->rank, .offset_ns = go.offset_ns, .rtt_ns = go.rtt_ns,
                       .samples = PING_ROUNDS, .start_ns = go.start_ns - go.epoch0_ns};
    if (ll_rec_put_clock(m->w, &ck))
        ll_warn("rank %d: queueing its clock record failed", m->rank);
    sleep_until(go.start_ns + to_local);
    maybe_test_exit(m, level);
    return 0;
fail:
    ll_errf(err, errlen, "rank %d: talking to rank 0 before level %d: %s", m->rank, level, ll_strerror(rc));
    return rc;
}

static int before_level(void *ctx, int level, int stop, int64_t *epoch_ns, char *err, size_t errlen)
{
    dist_world *m = ctx;
    if (m->rank == 0) {
        int rc = before_rank0(m, level, stop, epoch_ns, err, errlen);
        maybe_test_exit(m, level);
        return rc;
    }
    return before_rank(m, level, stop, epoch_ns, err, errlen);
}

/* A rank's request lines since the last level: read back from its own file
 * (the writer drained first), kept only whole lines of type request. */
static int level_lines(dist_world *m, ll_buf *out, char *err, size_t errlen)
{
    static const char prefix[] = "{\"type\":\"request\"";
    int rc = ll_rec_drain(m->w, 0);
    if (rc) {
        ll_errf(err, errlen, "rank %d: its records writer failed: %s", m->rank, ll_strerror(rc));
        return rc;
    }
    FILE *f = fopen(m->local_path, "rb");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    if (!f || fseek(f, m->sent_off, SEEK_SET) != 0) {
        ll_errf(err, errlen, "rank %d: reading back %s: %s", m->rank, m->local_path, strerror(errno));
        rc = LL_EIO;
        goto out;
    }
    while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
        m->sent_off += n;
        if ((size_t)n > sizeof prefix - 1 && memcmp(line, prefix, sizeof prefix - 1) == 0 &&
            (rc = ll_buf_append(out, line, (size_t)n)))
            goto out;
    }
out:
    free(line);
    if (f)
        fclose(f);
    return rc;
}

static int after_rank(dist_world *m, int level, const ll_rec_level_end *le, char *err, size_t errlen)
{
    ll_buf lines = {0};
    int rc = level_lines(m, &lines, err, errlen);
    summary_msg s = {.level = level, .ok = le->ok, .failed = le->failed, .interrupted = le->interrupted,
                     .threads = le->client.threads, .cpu_s_max = le->client.cpu_s_max,
                     .cpu_s_sum = le->client.cpu_s_sum, .reads = le->client.reads,
                     .reads_kstamp = le->client.reads_kstamp,
                     .events = le->client.events, .n_bytes = rc ? 0 : lines.len};
    /* The summary goes even when reading failed: rank 0 then counts, not waits. */
    int src = send_bytes(&s, sizeof s, 0, TAG_SUMMARY);
    while (m->rank == m->hang_rank && level == m->hang_level)
        pause(); /* the job's end (rank 0's abort) kills it */
    for (size_t off = 0; !rc && !src && off < lines.len;) {
        size_t n = lines.len - off;
        if (n > PIECE_BYTES) {
            const char *nl = memrchr(lines.p + off, '\n', PIECE_BYTES);
            n = nl ? (size_t)(nl - (lines.p + off)) + 1 : n; /* one line over the cap goes whole */
        }
        src = send_bytes(lines.p + off, (int)n, 0, TAG_DATA);
        off += n;
    }
    ll_buf_free(&lines);
    if (!rc && src) {
        rc = src;
        ll_errf(err, errlen, "rank %d: sending level %d to rank 0 failed", m->rank, level);
    }
    return rc;
}

/* Rank 0: take the progress messages waiting from rank r (all of them: a
 * slow rank 0 must not fall behind). */
static void take_progress(dist_world *m, int r)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        lg_progress p;
        if (MPI_Iprobe(r, TAG_PROGRESS, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        if (MPI_Recv(&p, sizeof p, MPI_BYTE, st.MPI_SOURCE, TAG_PROGRESS, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        m->heard_ns[st.MPI_SOURCE] = ll_now_ns();
        if (p.level == m->level) /* an earlier level's last word can still be queued */
            m->part[st.MPI_SOURCE] = p;
    }
}

static int summary_waiting(int r)
{
    int flag = 0;
    return MPI_Iprobe(r, TAG_SUMMARY, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag;
}

/* Rank 0: until rank r's summary is there; LL_EINTR when r fell silent. */
static int wait_summary(dist_world *m, int r)
{
    int64_t spin_until = ll_now_ns() + SPIN_NS;
    for (;;) {
        if (summary_waiting(r))
            return 0;
        take_progress(m, r);
        int64_t now = ll_now_ns();
        if (now - m->heard_ns[r] > m->silent_ns)
            return LL_EINTR;
        if (now >= spin_until) {
            struct timespec ts = {0, POLL_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
}

/* The lg_dist tick: ranks > 0 report (their heartbeat); rank 0 sums. A rank
 * that falls silent is named at the level's end (wait_summary): the ranks
 * still alive finish their share, so the level keeps what they measured. */
static void tick(void *ctx, const lg_progress *mine, lg_progress *all)
{
    dist_world *m = ctx;
    if (m->rank != 0) {
        if (send_bytes(mine, sizeof *mine, 0, TAG_PROGRESS))
            ll_warn("rank %d: sending progress failed", m->rank);
        return;
    }
    take_progress(m, MPI_ANY_SOURCE);
    for (int r = 1; r < m->ranks; r++) {
        all->done += m->part[r].done;
        all->total += m->part[r].total;
        all->errors += m->part[r].errors;
        all->inflight += m->part[r].inflight;
        all->tokens += m->part[r].tokens;
    }
}

static int after_rank0(dist_world *m, int level, ll_rec_level_end *le, char *err, size_t errlen)
{
    int rc = 0, first_rc = 0;
    char *piece = NULL;
    for (int r = 1; r < m->ranks; r++) {
        summary_msg s;
        /* a lost rank is named once the others are gathered: what they measured stays */
        if ((rc = wait_summary(m, r)) || (rc = recv_bytes(&s, sizeof s, r, TAG_SUMMARY, deadline(m)))) {
            if (!first_rc)
                first_rc = lost(m, r, rc, "report", level, err, errlen);
            continue;
        }
        uint64_t got = 0;
        while (got < s.n_bytes) {
            MPI_Status st;
            int n = 0;
            if ((rc = wait_msg(r, TAG_DATA, deadline(m), &st)) || MPI_Get_count(&st, MPI_BYTE, &n) != MPI_SUCCESS ||
                n <= 0 || !(piece = malloc((size_t)n))) {
                free(piece);
                piece = NULL;
                break;
            }
            if ((rc = recv_bytes(piece, n, r, TAG_DATA, deadline(m))) ||
                (rc = ll_rec_put_lines(m->w, piece, (size_t)n))) {
                free(piece);
                ll_errf(err, errlen, "rank %d's records of level %d: %s", r, level, ll_strerror(rc));
                return rc;
            }
            free(piece);
            piece = NULL;
            got += (uint64_t)n;
        }
        if (got < s.n_bytes) { /* cut off after its summary: named like a silent one, the next still gathered */
            if (!first_rc)
                first_rc = lost(m, r, rc ? rc : LL_EIO, "send the records of", level, err, errlen);
            continue;
        }
        le->ok += s.ok;
        le->failed += s.failed;
        le->interrupted |= s.interrupted;
        le->client.threads += s.threads;
        if (s.cpu_s_max > le->client.cpu_s_max)
            le->client.cpu_s_max = s.cpu_s_max;
        le->client.cpu_s_sum += s.cpu_s_sum;
        le->client.reads += s.reads;
        if (s.reads_kstamp > 0)
            le->client.reads_kstamp += s.reads_kstamp;
        le->client.events += s.events;
    }
    return first_rc;
}

static int after_level(void *ctx, int level, ll_rec_level_end *le, char *err, size_t errlen)
{
    dist_world *m = ctx;
    return m->rank == 0 ? after_rank0(m, level, le, err, errlen) : after_rank(m, level, le, err, errlen);
}

int dist_hooks(dist_world *m, ll_rec_writer *w, const char *local_path, double wait_s, const lg_dist **out)
{
    const char *v = getenv("LOADLAW_MPI_WAIT_S");
    m->w = w;
    m->local_path = local_path;
    m->sent_off = 0;
    m->wait_s = v && atof(v) > 0 ? atof(v) : wait_s;
    m->epoch0_ns = ll_rec_epoch_ns(w);
    m->silent_ns = m->wait_s * 1e9 < SILENT_NS ? (int64_t)(m->wait_s * 1e9) : SILENT_NS;
    free(m->part);
    free(m->heard_ns);
    m->part = calloc((size_t)m->ranks, sizeof *m->part);
    m->heard_ns = calloc((size_t)m->ranks, sizeof *m->heard_ns);
    if (!m->part || !m->heard_ns)
        return LL_ENOMEM;
    m->dist = (lg_dist){.rank = m->rank, .ranks = m->ranks, .before_level = before_level,
                        .after_level = after_level, .tick = tick, .ctx = m};
    *out = &m->dist;
    return 0;
}

void dist_end(dist_world *m, int exit_code)
{
    if (!m)
        return;
    if (m->lost || !m->synced) {
        fflush(stdout);
        fflush(stderr);
        /* the others wait on this rank (or on the lost one) */
        MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : 1);
    }
    MPI_Finalize();
    free(m->part);
    free(m->heard_ns);
    free(m);
}
