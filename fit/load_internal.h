/* load_internal.h (internal to fit/load*.c): how a
 * request record becomes the one fit keeps, shared by the first read and a
 * paged run's read-back, and the paged run's own storage (fit_internal.h
 * says what a paged run is). */
#ifndef LOADLAW_FIT_LOAD_INTERNAL_H
#define LOADLAW_FIT_LOAD_INTERNAL_H

#include "fit_internal.h"

/* A request the timeline can place: a send time and an end not before it.
 * Any other is dropped (fit_run_info.n_bad_requests). */
static inline int fit_load_placeable(const ll_rec_request *rq)
{
    return rq->send_ns >= 0 && rq->end_ns >= rq->send_ns;
}
/* rq as fit keeps it (fit.h fit_run_request) into *q: outputs and chunks
 * left out, stream_*_tok -1 with LL_COUNTS_STREAM, its chunks copied into
 * dst[0..rq->n_chunks) and sorted by arrival, its times made consistent
 * (each move counted in *n_clamped). q->error still points into rq: the
 * caller copies it where it keeps q. */
void fit_load_keep(const ll_rec_request *rq, ll_rec_request *q, ll_rec_chunk *dst, size_t *n_clamped);
/* Sort c[0..k) by arrival when it is not (the order fit_load_keep gives). */
void fit_load_sort_chunks(ll_rec_chunk *c, size_t k);

/* load_run_line.c: the run line as JSON again (fit_run_info.run_json);
 * free with cJSON_free; NULL when out of memory. */
char *fit_load_run_line_json(const ll_rec_run *run);

/* A request line: where to read it back. */
typedef struct fit_req_ref {
    uint64_t off;             /* its first byte in the file */
    uint32_t len;             /* its length without the newline */
    int32_t level;            /* its level (the record's number) */
} fit_req_ref;
typedef LL_VEC(fit_req_ref) fit_req_ref_vec;

/* Where a resident request's "chunks_packed" text lies in its line (len 0:
 * the line must be parsed whole for its chunks). */
typedef struct fit_text_span {
    uint32_t off, len;
} fit_text_span;

struct fit_paged {
    char *path;               /* the records file, for messages */
    int fd;
    fit_req_ref_vec refs;     /* by index: level by level, each in file order */
    size_t *first;            /* run level l's requests: [first[l], first[l + 1]) */
    size_t n_levels;
    size_t cur;               /* the resident level, SIZE_MAX when none */
    int cur_failed;           /* it could not be read back: placeholders */
    fit_rec_request_vec reqs; /* the resident level's requests: chunks NULL */
    LL_VEC(fit_text_span) packed; /* per resident request */
    LL_VEC(char) text;        /* a line or a packed text read back */
    fit_rec_chunk_vec scratch;/* chunks of the line read back */
    fit_rec_chunk_vec check;  /* its packed text decoded, to check the span */
    ll_rec_request dummy;     /* every request of a level that failed */
    int err_rc;               /* the first read-back failure, sticky */
    char err[256];
};

/* Turn a run read whole so far into a paged one; refs holds every request's
 * reference (file order). Lets go of the requests and chunks. */
void fit_paged_begin(fit_run *r);
/* At the end of the read: order the references (refs, file order, taken)
 * by r->levels (sorted), open path for reading back. 0, LL_EIO or LL_ENOMEM
 * (err filled). */
int fit_paged_finish(fit_run *r, fit_req_ref_vec *refs, const char *path, char *err, size_t errlen);
void fit_paged_free(struct fit_paged *p);
const ll_rec_request *fit_paged_request(const fit_run *r, size_t i);
int fit_paged_chunks_of(const fit_run *r, const ll_rec_request *q, fit_chunks *c);

#endif
