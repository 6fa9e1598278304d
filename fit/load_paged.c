/* load_paged.c: a run too big to hold (fit_internal.h "paged"), read back
 * from its records file one level at a time.
 *
 * DESIGN. While the file is read (load.c) every request line that survives
 * is recorded as a 16-byte reference (offset, length, level); past the bound
 * the requests and chunks held so far are let go and only references stay.
 * At the end the references are ordered level by level in the order of the
 * run's levels, each level's in file order, so a level is one index range and
 * its requests keep their relative order: every per-level figure is computed
 * over the same requests in the same order as when the run is held whole.
 *
 * Asking for a request of another level makes that level resident: its lines
 * are read again (pread at the references, in file order), parsed by the
 * records module's line parser (ll_rec_read_line: the same checks as the
 * first read) and kept as load.c keeps them (fit_load_keep: sorted, clamped,
 * error copied), without their chunks. A request's chunks are decoded from
 * the file on each fit_chunks_of: straight from the line's "chunks_packed"
 * text where that text was found and checked against the parser's chunks
 * when the level was read back, else through the line parser.
 *
 * Cost: 16 bytes a request line run-wide, one level's requests (328 bytes
 * each with their packed spans) and each caller's chunk buffer; each level
 * read back once per pass in index order (a run-wide loop in index order
 * reads every line again once: what run-wide figures need is gathered by
 * the first read instead, load.c), and a request's chunks decoded again on
 * each fit_chunks_of. A line that no longer reads
 * as the request it was (the file was cut or rewritten after the run was
 * loaded) is a sticky LL_EIO with a message (fit_run_read_error): the level
 * then reads as failed placeholders, never as other data. */
#define _GNU_SOURCE /* memmem */
#include "load_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PACKED_KEY "\"" LL_REC_CHUNKS_PACKED "\":\""

void fit_paged_begin(fit_run *r)
{
    r->paged->fd = -1;
    r->paged->cur = SIZE_MAX;
    for (size_t i = 0; i < r->requests.n; i++)
        free(r->requests.v[i].error);
    ll_vec_free(&r->requests);
    ll_vec_free(&r->chunks);
}

static void release_level(struct fit_paged *p)
{
    for (size_t i = 0; i < p->reqs.n; i++)
        free(p->reqs.v[i].error);
    p->reqs.n = p->packed.n = 0;
    p->cur = SIZE_MAX;
    p->cur_failed = 0;
}

void fit_paged_free(struct fit_paged *p)
{
    if (!p)
        return;
    release_level(p);
    if (p->fd >= 0)
        close(p->fd);
    free(p->path);
    free(p->first);
    ll_vec_free(&p->refs);
    ll_vec_free(&p->reqs);
    ll_vec_free(&p->packed);
    ll_vec_free(&p->text);
    ll_vec_free(&p->scratch);
    ll_vec_free(&p->check);
    free(p);
}

/* The first failure is the one reported; the code comes back either way. */
static int fail_read(struct fit_paged *p, int rc, uint64_t off, const char *what)
{
    if (!p->err_rc) {
        p->err_rc = rc;
        if (rc == LL_ENOMEM)
            ll_errf(p->err, sizeof p->err, "out of memory reading back %s", p->path);
        else
            ll_errf(p->err, sizeof p->err, "%s changed after it was read: the request line at byte %llu %s; "
                    "read the run again", p->path, (unsigned long long)off, what);
    }
    return rc;
}

/* len bytes at off into p->text (NUL-terminated). */
static int read_at(struct fit_paged *p, uint64_t off, size_t len)
{
    if (ll_vec_reserve(&p->text, len + 1))
        return fail_read(p, LL_ENOMEM, off, "");
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(p->fd, p->text.v + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && !p->err_rc) {
            p->err_rc = LL_EIO;
            ll_errf(p->err, sizeof p->err, "%s: %s", p->path, strerror(errno));
        }
        if (n <= 0)
            return fail_read(p, LL_EIO, off, "is cut short");
        got += (size_t)n;
    }
    p->text.v[len] = '\0';
    return 0;
}

/* ---- the references, level by level --------------------------------------- */

typedef struct level_pos {
    int level;
    size_t pos;
} level_pos;

static int cmp_level_pos(const void *a, const void *b)
{
    const level_pos *x = a, *y = b;
    return (x->level > y->level) - (x->level < y->level);
}

/* Position in the sorted levels of a level number (every reference's level
 * has an entry: load.c made one for each request). */
static size_t pos_of(const level_pos *lp, size_t n, int level)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (lp[mid].level <= level)
            lo = mid;
        else
            hi = mid;
    }
    return lp[lo].pos;
}

/* refs (file order) into p->refs grouped by level position (a stable
 * counting sort), with p->first the groups' starts. */
static int order_refs(struct fit_paged *p, const fit_run *r, const fit_req_ref_vec *refs)
{
    size_t nl = r->levels.n;
    level_pos *lp = malloc((nl + 1) * sizeof *lp);
    size_t *at = calloc(nl + 1, sizeof *at);
    p->first = calloc(nl + 1, sizeof *p->first);
    p->n_levels = nl;
    int rc = LL_ENOMEM;
    if (!lp || !at || !p->first || ll_vec_reserve(&p->refs, refs->n + 1))
        goto out;
    for (size_t l = 0; l < nl; l++)
        lp[l] = (level_pos){r->levels.v[l].level, l};
    if (nl > 1)
        qsort(lp, nl, sizeof *lp, cmp_level_pos);
    for (size_t i = 0; i < refs->n; i++)
        p->first[pos_of(lp, nl, refs->v[i].level) + 1]++;
    for (size_t l = 0; l < nl; l++) {
        p->first[l + 1] += p->first[l];
        at[l] = p->first[l];
    }
    for (size_t i = 0; i < refs->n; i++)
        p->refs.v[at[pos_of(lp, nl, refs->v[i].level)]++] = refs->v[i];
    p->refs.n = refs->n;
    rc = 0;
out:
    free(lp);
    free(at);
    return rc;
}

int fit_paged_finish(fit_run *r, fit_req_ref_vec *refs, const char *path, char *err, size_t errlen)
{
    struct fit_paged *p = r->paged;
    int rc = order_refs(p, r, refs);
    ll_vec_free(refs);
    if (rc == 0 && !(p->path = strdup(path)))
        rc = LL_ENOMEM;
    if (rc) {
        ll_errf(err, errlen, "out of memory reading %s", path);
        return rc;
    }
    if ((p->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        return LL_EIO;
    }
    return 0;
}

void fit_run_level_span(const fit_run *run, int level, size_t *i0, size_t *i1)
{
    *i0 = *i1 = 0;
    if (!run->paged) {
        *i1 = run->requests.n;
        return;
    }
    for (size_t l = 0; l < run->levels.n; l++)
        if (run->levels.v[l].level == level) {
            *i0 = run->paged->first[l];
            *i1 = run->paged->first[l + 1];
            return;
        }
}

int fit_run_read_error(const fit_run *run, char *err, size_t errlen)
{
    if (!run || !run->paged || !run->paged->err_rc)
        return 0;
    ll_errf(err, errlen, "%s", run->paged->err);
    return run->paged->err_rc;
}

/* ---- one level resident ---------------------------------------------------- */

/* A line read back, and what came of it. */
typedef struct back_ctx {
    struct fit_paged *p;
    const fit_req_ref *ref;
    ll_rec_request *q;        /* out */
    fit_text_span span;       /* out: its packed text, checked */
    int got;                  /* one request came back, the same as before */
} back_ctx;

/* Where rq's chunks_packed text lies in its line, if that text decodes to
 * exactly the chunks the parser gave (so a key of that name inside another
 * member cannot stand in for it); {0, 0} otherwise. */
static int find_packed(struct fit_paged *p, const char *line, size_t len, const ll_rec_request *rq,
                       fit_text_span *out)
{
    const char *k = memmem(line, len, PACKED_KEY, sizeof PACKED_KEY - 1);
    const char *s = k ? k + sizeof PACKED_KEY - 1 : NULL;
    const char *e = s ? memchr(s, '"', len - (size_t)(s - line)) : NULL;
    *out = (fit_text_span){0, 0};
    if (!e || e == s)
        return 0;
    int rc = ll_rec_chunks_unpack(s, (size_t)(e - s), &p->check.v, &p->check.n, &p->check.cap);
    if (rc == LL_ENOMEM)
        return rc;
    if (rc || p->check.n != rq->n_chunks)
        return 0;
    for (size_t i = 0; i < rq->n_chunks; i++) {
        const ll_rec_chunk *a = &p->check.v[i], *b = &rq->chunks[i];
        if (a->t_ns != b->t_ns || a->tokens != b->tokens || a->kind != b->kind)
            return 0;
    }
    *out = (fit_text_span){(uint32_t)(s - line), (uint32_t)(e - s)};
    return 0;
}

/* The line parser's request, kept as load.c's on_request kept it. */
static int on_back_request(const ll_rec_request *rq, void *vctx)
{
    back_ctx *b = vctx;
    struct fit_paged *p = b->p;
    size_t n_clamped = 0; /* counted by the first read */
    if (b->got || !fit_load_placeable(rq) || rq->level != b->ref->level)
        return 0;
    if (ll_vec_reserve(&p->scratch, rq->n_chunks + 1))
        return LL_ENOMEM;
    fit_load_keep(rq, b->q, p->scratch.v, &n_clamped);
    b->q->error = NULL;
    if (rq->error && !(b->q->error = strdup(rq->error)))
        return LL_ENOMEM;
    int rc = find_packed(p, p->text.v, b->ref->len, rq, &b->span);
    if (rc) {
        free(b->q->error);
        return rc;
    }
    b->got = 1;
    return 0;
}

/* Reference ref's request read back into *q (its packed text's span). */
static int read_back(struct fit_paged *p, const fit_req_ref *ref, ll_rec_request *q, fit_text_span *span)
{
    static const ll_rec_handlers h = {.on_request = on_back_request};
    back_ctx b = {.p = p, .ref = ref, .q = q};
    char msg[128];
    int rc = read_at(p, ref->off, ref->len);
    if (rc)
        return rc;
    rc = ll_rec_read_line(p->text.v, ref->len, &h, &b, NULL, msg, sizeof msg);
    if (rc == LL_ENOMEM)
        return fail_read(p, rc, ref->off, "");
    if (rc || !b.got)
        return fail_read(p, LL_EIO, ref->off, "no longer reads as the same request");
    *span = b.span;
    return 0;
}

/* A level that could not be read back: one failed placeholder stands for
 * each of its requests (no chunks; fit_chunks_of gives the error). */
static void fail_level(struct fit_paged *p, const fit_level_info *L)
{
    release_level(p);
    memset(&p->dummy, 0, sizeof p->dummy);
    p->dummy.level = L->level;
    p->dummy.cls = LL_ERRC_OTHER;
    p->dummy.send_ns = p->dummy.end_ns = L->start_ns;
    p->dummy.intended_ns = p->dummy.header_ns = p->dummy.first_token_ns = -1;
    p->dummy.first_think_ns = p->dummy.first_answer_ns = -1;
    p->dummy.usage_prompt = p->dummy.usage_completion = p->dummy.usage_reasoning = -1;
    p->dummy.stream_think_tok = p->dummy.stream_answer_tok = p->dummy.cached_tok = -1;
    p->cur_failed = 1;
}

static void make_resident(struct fit_paged *p, const fit_run *r, size_t l)
{
    size_t n = p->first[l + 1] - p->first[l];
    release_level(p);
    if (ll_vec_reserve(&p->reqs, n + 1) || ll_vec_reserve(&p->packed, n + 1)) {
        fail_read(p, LL_ENOMEM, 0, "");
        fail_level(p, &r->levels.v[l]);
        p->cur = l;
        return;
    }
    for (size_t j = 0; j < n; j++) {
        if (read_back(p, &p->refs.v[p->first[l] + j], &p->reqs.v[j], &p->packed.v[j])) {
            fail_level(p, &r->levels.v[l]);
            break;
        }
        p->reqs.n = p->packed.n = j + 1;
    }
    p->cur = l;
}

/* The run level holding index i (i < the number of requests). */
static size_t level_of(const struct fit_paged *p, size_t i)
{
    size_t lo = 0, hi = p->n_levels;
    while (hi - lo > 1) { /* the last l with first[l] <= i */
        size_t mid = lo + (hi - lo) / 2;
        if (p->first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

const ll_rec_request *fit_paged_request(const fit_run *r, size_t i)
{
    struct fit_paged *p = r->paged; /* the resident level: a cache (fit_internal.h) */
    if (i >= p->refs.n)
        return NULL;
    if (p->cur == SIZE_MAX || i < p->first[p->cur] || i >= p->first[p->cur + 1])
        make_resident(p, r, level_of(p, i));
    return p->cur_failed ? &p->dummy : &p->reqs.v[i - p->first[p->cur]];
}

/* ---- a request's chunks ---------------------------------------------------- */

/* The chunks of the line in p->text, through the line parser. */
static int on_chunks_request(const ll_rec_request *rq, void *vctx)
{
    fit_chunks *c = vctx;
    if (ll_vec_reserve(&c->buf, rq->n_chunks + 1))
        return LL_ENOMEM;
    if (rq->n_chunks)
        memcpy(c->buf.v, rq->chunks, rq->n_chunks * sizeof *c->buf.v);
    c->buf.n = rq->n_chunks;
    return 0;
}

static int chunks_from_line(struct fit_paged *p, const fit_req_ref *ref, fit_chunks *c)
{
    static const ll_rec_handlers h = {.on_request = on_chunks_request};
    char msg[128];
    int rc = read_at(p, ref->off, ref->len);
    if (rc == 0)
        rc = ll_rec_read_line(p->text.v, ref->len, &h, c, NULL, msg, sizeof msg);
    return rc == 0 || rc == LL_ENOMEM || rc == p->err_rc ? rc : LL_EPARSE;
}

int fit_paged_chunks_of(const fit_run *r, const ll_rec_request *q, fit_chunks *c)
{
    struct fit_paged *p = r->paged;
    c->v = NULL;
    c->n = 0;
    if (q == &p->dummy)
        return p->err_rc ? p->err_rc : LL_EIO;
    if (p->cur == SIZE_MAX || q < p->reqs.v || q >= p->reqs.v + p->reqs.n)
        return LL_EINVAL; /* not the resident level's: a pointer kept too long */
    if (!q->n_chunks)
        return 0;
    size_t j = (size_t)(q - p->reqs.v);
    const fit_req_ref *ref = &p->refs.v[p->first[p->cur] + j];
    fit_text_span sp = p->packed.v[j];
    int rc;
    c->buf.n = 0;
    if (sp.len) {
        if ((rc = read_at(p, ref->off + sp.off, sp.len)) != 0)
            return rc;
        rc = ll_rec_chunks_unpack(p->text.v, sp.len, &c->buf.v, &c->buf.n, &c->buf.cap);
    } else
        rc = chunks_from_line(p, ref, c);
    if (rc == LL_ENOMEM || rc == LL_EIO)
        return fail_read(p, rc, ref->off, "");
    if (rc || c->buf.n != q->n_chunks)
        return fail_read(p, LL_EIO, ref->off, "no longer holds the same chunks");
    fit_load_sort_chunks(c->buf.v, c->buf.n);
    c->v = c->buf.v;
    c->n = c->buf.n;
    return 0;
}
