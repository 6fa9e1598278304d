/* records.c: the records.jsonl writer: a bounded queue drained by one
 * writer thread. Each record's line is records_format.c; the reader is
 * records_read.c.
 *
 * DESIGN (writer): producers copy a record into a ring of queue_cap slots
 * under one mutex and signal the writer; a producer that finds the ring full
 * waits on `not_full`. Request, level, level_end and step records travel as
 * structs and are formatted by the writer thread; the run and profile records
 * (one per run / per level, from the driver) are built as cJSON trees by the
 * producer and printed by the writer. The writer takes one slot at a time,
 * formats it outside the lock, writes the line and flushes it, so a killed
 * process keeps every line the writer reached. `n_put` counts records
 * accepted and `n_done` records the writer finished with (written, or dropped
 * after a write error); ll_rec_drain waits for n_done to reach the n_put it
 * saw. After the first write error the writer keeps emptying the queue (so no
 * producer blocks forever) but writes nothing more, and every put returns
 * LL_EIO.
 *
 * The file itself: the writer holds it open, so a records.jsonl deleted or
 * replaced under a running sweep would take every later line into a file
 * nobody can read, silently until the end. At each level's end, and at most
 * once a second otherwise, the writer compares the path with the file it
 * holds (device and inode); when they differ it copies what it wrote to a
 * new file beside the path (PATH.recovered, or .recovered.1 ... .9, never
 * over an existing file), says where, and fails as on a write error, so the
 * run stops at once. Request records that reach a failed writer are counted,
 * and ll_rec_close says how many were not written.
 *
 * Memory: the ring is queue_cap slots of one rec_item each (200 B on x86-64:
 * a request record and its kind), 12.5 MiB at the default 65,536, allocated
 * untouched. The writer keeps the queued records at the front: when it has
 * emptied the ring the next record goes to slot 0, and when the head has
 * passed RING_FRONT_SLOTS with at most RING_MOVE_MAX records queued it moves
 * them there (a writer that is never quite idle). So while the writer keeps
 * up (its backlog falls to RING_MOVE_MAX now and then) a run touches about
 * RING_FRONT_SLOTS slots plus its deepest backlog (~0.2 MB plus 200 B a
 * record of backlog), not a slot for every record it wrote: a client that
 * cycled through the whole ring grew ~200 B per record (a request, or a
 * metric sample scraped) until 65,536 records (bench/soak.sh). The bound is the full
 * ring, reached only when the writer falls 65,536 records behind; producers
 * then wait. */
#include "common.h"
#include "records_item.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the writer: queue ------------------------------------------------------- */

/* The ring's front (Memory, above): a head past this many slots moves the
 * queued records back to slot 0 when they are at most RING_MOVE_MAX (12.8 KB
 * copied once per 1,024 records at most). */
#define RING_FRONT_SLOTS 1024
#define RING_MOVE_MAX 64
/* How often, besides each level's end, the writer looks at its path. */
#define FILE_CHECK_NS 1000000000LL

struct ll_rec_writer {
    FILE *f;
    char *path;                               /* as opened: the file checks look at it */
    dev_t dev;                                /* the file opened there */
    ino_t ino;
    int64_t next_check_ns;                    /* writer thread only */
    int64_t epoch_ns, epoch_wall_ns;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full, done; /* done: n_done grew */
    rec_item *ring;
    size_t cap, head, count;                  /* guarded by mu */
    uint64_t n_put, n_done;                   /* guarded by mu */
    uint64_t n_lost_requests;                 /* guarded by mu: refused or dropped after a failure */
    int stopping;                             /* guarded by mu */
    atomic_int failed;                        /* a write failed: LL_EIO from now on */
    atomic_uint_fast64_t n_written;           /* lines on disk */
    ll_buf line;                              /* writer thread only */
};

static void item_free(rec_item *it)
{
    if (it->kind == K_REQUEST) {
        free(it->u.rq.chunks);
        free(it->u.rq.error);
        ll_rec_outputs_free(it->u.rq.outputs);
    } else if (it->kind == K_JSON) {
        cJSON_Delete(it->u.obj);
    } else if (it->kind == K_LINES) {
        free(it->u.lines.p);
    } else if (it->kind == K_METRIC) {
        free(it->u.metric.text);
    }
}

/* ---- the writer thread ------------------------------------------------------- */

/* Lines formatted by another writer (a rank's records, ll_rec_put_lines):
 * written as they came, flushed, each counted. */
static void write_lines(ll_rec_writer *w, const char *p, size_t len)
{
    if (fwrite(p, 1, len, w->f) != len || fflush(w->f) != 0) {
        ll_error("records: write failed: %s", strerror(errno));
        atomic_store(&w->failed, 1);
        return;
    }
    uint64_t n = 0;
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + len - q))) != NULL; q++)
        n++;
    atomic_fetch_add(&w->n_written, n);
}

/* Format one record and write it as a line, flushed. */
static void write_item(ll_rec_writer *w, const rec_item *it)
{
    if (it->kind == K_LINES) {
        write_lines(w, it->u.lines.p, it->u.lines.len);
        return;
    }
    ll_buf_reset(&w->line);
    int rc = ll_rec_format_item(&w->line, it);
    if (rc == 0)
        rc = ll_buf_append(&w->line, "\n", 1);
    if (rc) {
        /* Out of memory: the file can no longer hold every record, so the
         * writer fails as on a write error (ll_rec_close reports it). */
        ll_error("records: a record could not be formatted (%s)", ll_strerror(rc));
        atomic_store(&w->failed, 1);
        return;
    }
    if (fwrite(w->line.p, 1, w->line.len, w->f) != w->line.len || fflush(w->f) != 0) {
        ll_error("records: write failed: %s", strerror(errno));
        atomic_store(&w->failed, 1);
        return;
    }
    atomic_fetch_add(&w->n_written, 1);
}

/* A file beside the records path that nothing holds yet: PATH.recovered,
 * else PATH.recovered.1 ... .9. Its descriptor, -1 when none could be made. */
static int open_recovery(const char *path, char *out, size_t n)
{
    for (int k = 0; k < 10; k++) {
        if (k == 0)
            snprintf(out, n, "%s.recovered", path);
        else
            snprintf(out, n, "%s.recovered.%d", path, k);
        int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* Copy every byte of the open records file (already flushed) into fd. */
static int copy_written(FILE *f, int fd)
{
    char buf[65536];
    off_t off = 0;
    for (;;) {
        ssize_t got = pread(fileno(f), buf, sizeof buf, off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? -1 : 0;
        for (ssize_t put = 0; put < got;) {
            ssize_t k = write(fd, buf + put, (size_t)(got - put));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return -1;
            put += k;
        }
        off += got;
    }
}

/* Is the records path still the file this writer holds? When it is gone or
 * another file took its place, save what was written beside it and fail
 * (the DESIGN note above). */
static void check_file(ll_rec_writer *w)
{
    struct stat st;
    w->next_check_ns = ll_now_ns() + FILE_CHECK_NS;
    int gone = stat(w->path, &st) != 0;
    if (gone && errno != ENOENT)
        return; /* cannot tell (a permission changed on the folder): keep writing */
    if (!gone && st.st_dev == w->dev && st.st_ino == w->ino)
        return;
    char saved[4200];
    int fd = open_recovery(w->path, saved, sizeof saved);
    int ok = fd >= 0 && copy_written(w->f, fd) == 0;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    unsigned long long lines = (unsigned long long)atomic_load(&w->n_written);
    if (ok)
        ll_error("records: %s was %s during the run: its %llu lines are saved in %s; stopping the run",
                 w->path, gone ? "deleted" : "replaced by another file", lines, saved);
    else
        ll_error("records: %s was %s during the run, and its %llu lines could not be saved beside it (%s); "
                 "stopping the run",
                 w->path, gone ? "deleted" : "replaced by another file", lines, strerror(errno));
    atomic_store(&w->failed, 1);
}

static void *writer_main(void *arg)
{
    ll_rec_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->count == 0 && !w->stopping)
            pthread_cond_wait(&w->not_empty, &w->mu);
        if (w->count == 0)
            break; /* stopping, and nothing left */
        rec_item it = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        if (w->count == 0) {
            w->head = 0; /* empty: start again at slot 0 (Memory, above) */
        } else if (w->head >= RING_FRONT_SLOTS && w->count <= RING_MOVE_MAX && w->head + w->count <= w->cap) {
            memmove(w->ring, w->ring + w->head, w->count * sizeof *w->ring);
            w->head = 0; /* items hold no pointers into their own slot */
        }
        pthread_cond_signal(&w->not_full);
        pthread_mutex_unlock(&w->mu);
        uint64_t before = atomic_load(&w->n_written);
        if (!atomic_load(&w->failed)) {
            write_item(w, &it);
            if (!atomic_load(&w->failed) && (it.kind == K_LEVEL_END || ll_now_ns() >= w->next_check_ns))
                check_file(w);
        }
        int lost = it.kind == K_REQUEST && atomic_load(&w->n_written) == before;
        item_free(&it);
        pthread_mutex_lock(&w->mu);
        w->n_lost_requests += (uint64_t)lost;
        w->n_done++;
        pthread_cond_broadcast(&w->done);
        /* A failed writer takes no more records: every producer waiting for
         * room must hear it, not just the one a pop would wake. */
        if (atomic_load(&w->failed))
            pthread_cond_broadcast(&w->not_full);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Queue a record (the writer frees what it owns, also on error). */
static int enqueue(ll_rec_writer *w, const rec_item *it)
{
    pthread_mutex_lock(&w->mu);
    while (w->count == w->cap && !atomic_load(&w->failed) && !w->stopping)
        pthread_cond_wait(&w->not_full, &w->mu);
    if (atomic_load(&w->failed) || w->stopping) {
        w->n_lost_requests += it->kind == K_REQUEST;
        pthread_mutex_unlock(&w->mu);
        rec_item tmp = *it;
        item_free(&tmp);
        return LL_EIO;
    }
    w->ring[(w->head + w->count) % w->cap] = *it;
    w->count++;
    w->n_put++;
    pthread_cond_signal(&w->not_empty);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* ---- the writer: lifecycle ---------------------------------------------------- */

static int cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a))
        return LL_ESYS;
    int bad = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) || pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return bad ? LL_ESYS : 0;
}

int ll_rec_open(const char *path, size_t queue_cap, ll_rec_writer **out, char *err, size_t errlen)
{
    int rc;
    ll_rec_writer *w = calloc(1, sizeof *w);
    if (!w)
        return LL_ENOMEM;
    w->cap = queue_cap ? queue_cap : 65536;
    pthread_mutex_init(&w->mu, NULL);
    if (cond_init_monotonic(&w->not_empty) || cond_init_monotonic(&w->not_full) ||
        cond_init_monotonic(&w->done)) {
        ll_errf(err, errlen, "records: pthread_cond_init failed");
        free(w);
        return LL_ESYS;
    }
    if (!(w->ring = calloc(w->cap, sizeof *w->ring))) {
        rc = LL_ENOMEM;
        ll_errf(err, errlen, "records: out of memory");
        goto fail;
    }
    struct stat st;
    /* w+: readable too, so that a deleted file can still be copied (check_file) */
    if (!(w->f = fopen(path, "w+")) || fstat(fileno(w->f), &st) != 0) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        rc = LL_EIO;
        goto fail;
    }
    if (!(w->path = strdup(path))) {
        rc = LL_ENOMEM;
        ll_errf(err, errlen, "records: out of memory");
        goto fail;
    }
    w->dev = st.st_dev;
    w->ino = st.st_ino;
    w->epoch_ns = ll_now_ns();
    w->epoch_wall_ns = ll_wall_ns();
    w->next_check_ns = w->epoch_ns + FILE_CHECK_NS;
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        ll_errf(err, errlen, "records: pthread_create failed");
        rc = LL_ESYS;
        goto fail;
    }
    w->thread_started = 1;
    *out = w;
    return 0;
fail:
    ll_rec_close(w);
    return rc;
}

int64_t ll_rec_epoch_ns(const ll_rec_writer *w) { return w->epoch_ns; }

uint64_t ll_rec_written(const ll_rec_writer *w) { return atomic_load(&w->n_written); }

uint64_t ll_rec_lost_requests(ll_rec_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t n = w->n_lost_requests;
    pthread_mutex_unlock(&w->mu);
    return n;
}

int ll_rec_drain(ll_rec_writer *w, int64_t timeout_ns)
{
    int64_t deadline = timeout_ns > 0 ? ll_now_ns() + timeout_ns : 0;
    struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->n_put;
    while (w->n_done < target && rc == 0)
        if (deadline ? pthread_cond_timedwait(&w->done, &w->mu, &ts) == ETIMEDOUT
                     : pthread_cond_wait(&w->done, &w->mu) != 0)
            rc = w->n_done < target ? LL_EINTR : 0;
    pthread_mutex_unlock(&w->mu);
    return rc ? rc : atomic_load(&w->failed) ? LL_EIO : 0;
}

int ll_rec_close(ll_rec_writer *w)
{
    if (!w)
        return 0;
    if (w->thread_started) {
        pthread_mutex_lock(&w->mu);
        w->stopping = 1;
        pthread_cond_broadcast(&w->not_empty);
        pthread_cond_broadcast(&w->not_full);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    int rc = atomic_load(&w->failed) ? LL_EIO : 0;
    if (w->f && fclose(w->f) != 0)
        rc = LL_EIO;
    if (w->n_lost_requests)
        ll_error("records: %llu request record%s finished after the records failed and %s not written",
                 (unsigned long long)w->n_lost_requests, w->n_lost_requests == 1 ? "" : "s",
                 w->n_lost_requests == 1 ? "was" : "were");
    for (size_t i = 0; i < w->count; i++)
        item_free(&w->ring[(w->head + i) % w->cap]);
    free(w->ring);
    free(w->path);
    ll_buf_free(&w->line);
    pthread_cond_destroy(&w->not_empty);
    pthread_cond_destroy(&w->not_full);
    pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return rc;
}

/* ---- the writer: puts --------------------------------------------------------- */

int ll_rec_put_level(ll_rec_writer *w, const ll_rec_level *lv)
{
    rec_item it = {.kind = K_LEVEL, .u.lv = *lv};
    return enqueue(w, &it);
}

int ll_rec_put_level_end(ll_rec_writer *w, const ll_rec_level_end *le)
{
    rec_item it = {.kind = K_LEVEL_END, .u.le = *le};
    return enqueue(w, &it);
}

int ll_rec_put_request(ll_rec_writer *w, ll_rec_request *rq)
{
    rec_item it = {.kind = K_REQUEST, .u.rq = *rq};
    rq->chunks = NULL;
    rq->error = NULL;
    rq->n_chunks = 0;
    rq->outputs = NULL;
    return enqueue(w, &it);
}

int ll_rec_put_step(ll_rec_writer *w, const ll_rec_step *st)
{
    rec_item it = {.kind = K_STEP, .u.st = *st};
    return enqueue(w, &it);
}

int ll_rec_put_clock(ll_rec_writer *w, const ll_rec_clock *ck)
{
    rec_item it = {.kind = K_CLOCK, .u.ck = *ck};
    return enqueue(w, &it);
}

int ll_rec_put_handoff(ll_rec_writer *w, const ll_rec_handoff *h)
{
    size_t n = h->req ? strlen(h->req) : 0;
    if (!h->req || n > LL_REC_HANDOFF_REQ_MAX)
        return LL_EINVAL;
    rec_item it = {.kind = K_HANDOFF, .u.handoff.h = *h};
    memcpy(it.u.handoff.req, h->req, n + 1);
    it.u.handoff.h.req = NULL; /* pointed at the copy when formatted (the item moves) */
    return enqueue(w, &it);
}

int ll_rec_put_metric(ll_rec_writer *w, const ll_rec_metric *m)
{
    if (!isfinite(m->value) || !m->name)
        return LL_EINVAL;
    const char *src = m->src ? m->src : "", *labels = m->labels ? m->labels : "";
    size_t ls = strlen(src) + 1, ln = strlen(m->name) + 1, ll = strlen(labels) + 1;
    rec_item it = {.kind = K_METRIC, .u.metric.m = *m};
    char *t = malloc(ls + ln + ll);
    if (!t)
        return LL_ENOMEM;
    memcpy(t, src, ls);
    memcpy(t + ls, m->name, ln);
    memcpy(t + ls + ln, labels, ll);
    it.u.metric.text = t;
    it.u.metric.m.src = t;
    it.u.metric.m.name = t + ls;
    it.u.metric.m.labels = t + ls + ln;
    return enqueue(w, &it);
}

int ll_rec_put_lines(ll_rec_writer *w, const char *text, size_t len)
{
    /* Whole lines only: a piece without its newline would glue two records. */
    if (len == 0)
        return 0;
    if (text[len - 1] != '\n')
        return LL_EINVAL;
    rec_item it = {.kind = K_LINES};
    if (!(it.u.lines.p = malloc(len)))
        return LL_ENOMEM;
    memcpy(it.u.lines.p, text, len);
    it.u.lines.len = len;
    return enqueue(w, &it);
}

int ll_rec_put_json(ll_rec_writer *w, cJSON *obj)
{
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(obj, "type"))) {
        cJSON_Delete(obj);
        return LL_EINVAL;
    }
    rec_item it = {.kind = K_JSON, .u.obj = obj};
    return enqueue(w, &it);
}

/* cJSON_Add* that can fail: a string, or null for NULL. */
static int add_str_or_null(cJSON *o, const char *key, const char *s)
{
    return (s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) ? 0 : LL_ENOMEM;
}

static int add_num(cJSON *o, const char *key, double v)
{
    return cJSON_AddNumberToObject(o, key, v) ? 0 : LL_ENOMEM;
}

static int add_law(cJSON *o, const ll_rec_engine_law *law)
{
    int rc;
    cJSON *l;
    if (!law->present)
        return cJSON_AddNullToObject(o, "engine_law") ? 0 : LL_ENOMEM;
    if (!(l = cJSON_AddObjectToObject(o, "engine_law")))
        return LL_ENOMEM;
    LL_TRY(ll_json_add_num(l, "a_ms", law->a_ms));
    LL_TRY(ll_json_add_num(l, "b_ms", law->b_ms));
    LL_TRY(ll_json_add_num(l, "c_ms_per_ktok", law->c_ms_per_ktok));
    LL_TRY(ll_json_add_num(l, "p_ms_per_tok", law->p_ms_per_tok));
    LL_TRY(ll_json_add_num(l, "time_scale", law->time_scale));
    if (law->n_buckets > 0) {
        int n = law->n_buckets < LL_REC_LAW_MAX_BUCKETS ? law->n_buckets : LL_REC_LAW_MAX_BUCKETS;
        cJSON *b = cJSON_CreateIntArray(law->buckets, n);
        if (!b || !cJSON_AddItemToObject(l, "buckets", b)) {
            cJSON_Delete(b);
            return LL_ENOMEM;
        }
    }
    if (law->knee_n > 0) {
        LL_TRY(add_num(l, "knee_n", law->knee_n));
        LL_TRY(ll_json_add_num(l, "knee_b_ms", law->knee_b_ms));
    }
fail:
    return rc;
}

static int add_target(cJSON *o, const ll_rec_run *run)
{
    cJSON *t = cJSON_AddObjectToObject(o, "target");
    int rc;
    if (!t)
        return LL_ENOMEM;
    LL_TRY(add_str_or_null(t, "url", run->url));
    LL_TRY(add_str_or_null(t, "model", run->model));
    LL_TRY(add_str_or_null(t, "endpoint", run->endpoint));
    LL_TRY(cJSON_AddBoolToObject(t, "bundled", run->bundled) ? 0 : LL_ENOMEM);
fail:
    return rc;
}

int ll_rec_put_run(ll_rec_writer *w, const ll_rec_run *run)
{
    char host[256] = "unknown", wall[32];
    cJSON *o = cJSON_CreateObject(), *cfg = NULL;
    int rc;
    if (!o)
        return LL_ENOMEM;
    if (!run->host && gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    snprintf(wall, sizeof wall, "%" PRId64, w->epoch_wall_ns);
    LL_TRY(add_str_or_null(o, "type", LL_REC_RUN));
    LL_TRY(add_num(o, "schema", LL_RECORDS_SCHEMA));
    LL_TRY(add_str_or_null(o, "tool", "loadlaw"));
    LL_TRY(add_str_or_null(o, "version", LOADLAW_VERSION));
    /* epoch_wall_ns: an integer written as digits (a double would round it). */
    LL_TRY(cJSON_AddRawToObject(o, "epoch_wall_ns", wall) ? 0 : LL_ENOMEM);
    LL_TRY(add_str_or_null(o, "host", run->host ? run->host : host));
    LL_TRY(add_num(o, "ranks", run->ranks > 0 ? run->ranks : 1));
    LL_TRY(add_num(o, "threads", run->threads));
    LL_TRY(add_target(o, run));
    LL_TRY(add_str_or_null(o, "engine", run->engine));
    LL_TRY(add_str_or_null(o, "backend", run->backend));
    LL_TRY(add_law(o, &run->law));
    LL_TRY(add_str_or_null(o, "scenario", run->scenario));
    if (run->config) {
        rc = LL_ENOMEM;
        if (!(cfg = cJSON_Duplicate(run->config, 1)) || !cJSON_AddItemToObject(o, "config", cfg)) {
            cJSON_Delete(cfg);
            goto fail;
        }
    }
    return ll_rec_put_json(w, o);
fail:
    cJSON_Delete(o);
    return rc;
}

/* The profile record's wait (records.h ll_rec_profile.has_wait): the
 * trace files the capture wrote and how the server came back to its pace. */
static int add_profile_wait(cJSON *o, const ll_rec_profile *pr)
{
    int rc;
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    LL_TRY(files ? 0 : LL_ENOMEM);
    for (size_t i = 0; i < pr->n_files; i++) {
        cJSON *f = cJSON_CreateObject();
        LL_TRY(f && cJSON_AddItemToArray(files, f) ? 0 : (cJSON_Delete(f), LL_ENOMEM));
        LL_TRY(add_str_or_null(f, "path", pr->files[i]));
        LL_TRY(add_num(f, "bytes", (double)pr->file_bytes[i]));
    }
    LL_TRY(ll_json_add_num(o, "stop_s", pr->stop_s));
    LL_TRY(ll_json_add_num(o, "wait_s", pr->wait_s));
    LL_TRY(add_num(o, "done_ns", (double)pr->done_ns));
    LL_TRY(ll_json_add_num(o, "probe_ref_ms", pr->probe_ref_ms));
    LL_TRY(ll_json_add_num(o, "probe_ms", pr->probe_ms));
    LL_TRY(cJSON_AddBoolToObject(o, "settled", pr->settled) ? 0 : LL_ENOMEM);
fail:
    return rc;
}

int ll_rec_put_profile(ll_rec_writer *w, const ll_rec_profile *pr)
{
    cJSON *o = cJSON_CreateObject();
    int rc;
    if (!o)
        return LL_ENOMEM;
    LL_TRY(add_str_or_null(o, "type", LL_REC_PROFILE));
    LL_TRY(add_num(o, "level", pr->level));
    LL_TRY(add_num(o, "t_ns", (double)pr->t_ns));
    LL_TRY(add_num(o, "num_steps", pr->num_steps));
    LL_TRY(add_str_or_null(o, "style", pr->style));
    LL_TRY(pr->http_status ? add_num(o, "http_status", pr->http_status) : add_str_or_null(o, "http_status", NULL));
    LL_TRY(cJSON_AddBoolToObject(o, "ok", pr->ok) ? 0 : LL_ENOMEM);
    /* A server's answer, possibly cut: the records stay valid UTF-8. */
    cJSON *d = cJSON_AddStringToObject(o, "detail", pr->detail ? pr->detail : "");
    if (!d) {
        rc = LL_ENOMEM;
        goto fail;
    }
    ll_utf8_scrub(d->valuestring);
    if (pr->has_wait)
        LL_TRY(add_profile_wait(o, pr));
    return ll_rec_put_json(w, o);
fail:
    cJSON_Delete(o);
    return rc;
}
