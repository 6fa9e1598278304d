/* trace_internal.h (internal to reports/): the reduced form of one trace.
 *
 * trace_parse.c feeds events in; trace_busy.c keeps per-stream interval unions;
 * trace_print.c reads the finished object through report.h's accessors. */
#ifndef LOADLAW_TRACE_INTERNAL_H
#define LOADLAW_TRACE_INTERNAL_H

#include <stdint.h>

#include "report.h"

/* Busy intervals of one stream (or one device), merged into a sorted,
 * disjoint list. Events that arrive in order extend or append to the list in
 * O(1); others wait in a small pending buffer that is sorted and merged in
 * one pass when full, so a trace that lists one stream's kernels after
 * another's (a device row sees exactly that) costs O(n log n), not O(n^2).
 * At most RPT_BUSY_WINDOW intervals are kept; the older half is then folded
 * into committed_ns, and an event that starts before that folded frontier is
 * counted late (its early part cannot be merged exactly any more: busy time
 * becomes a lower bound, and the output says so). Memory: about
 * 32 bytes * (RPT_BUSY_WINDOW + RPT_BUSY_PENDING) per stream at most. */
#define RPT_BUSY_WINDOW (1 << 16)
#define RPT_BUSY_PENDING 4096
typedef struct rpt_busy {
    int64_t *iv;          /* 2*n values: start, end (ns), sorted, disjoint */
    size_t n, cap;
    int64_t *pend;        /* 2*n_pend values, unsorted */
    size_t n_pend;
    int64_t *tmp;         /* merge target, swapped with iv (no churn per flush) */
    size_t tmp_cap;
    int64_t committed_ns; /* busy time of intervals folded out of the window */
    int64_t frontier_ns;  /* end of the last folded interval */
    int has_frontier;
    uint64_t late;
} rpt_busy;

int rpt_busy_add(rpt_busy *b, int64_t start_ns, int64_t end_ns); /* LL_ENOMEM */
/* Merges what is pending first (LL_ENOMEM possible), then sums. */
int rpt_busy_total_ns(rpt_busy *b, int64_t *out);
void rpt_busy_free(rpt_busy *b);

typedef struct trace_stream {
    rpt_trace_stream pub;
    char *pid, *tid;
    rpt_busy busy;
    /* a device's ("*" row) kernel time by name, so categories can be split
     * per device (tensor-parallel ranks): open addressing on the trace's own
     * name strings (their pointers are stable), power-of-two dk_cap */
    const char **dk_name;
    int64_t *dk_ns;
    size_t dk_n, dk_cap;
} trace_stream;

typedef struct trace_name {
    rpt_trace_kernel pub; /* pub.name == NULL: empty slot */
    uint64_t hash;
} trace_name;

struct rpt_trace {
    rpt_trace_info info;
    int64_t first_ns, last_ns;     /* span of "X" events */
    int have_span;
    trace_name *names;             /* open-addressing table, power-of-two size */
    size_t names_cap, names_n;
    rpt_trace_kernel *sorted;      /* built by trace_finish */
    trace_stream *streams;
    size_t streams_n, streams_cap;
    rpt_trace_stream *streams_sorted;
};

/* Account one GPU event. pid/tid are text ("0", "7", "stream 7"). */
int trace_add_gpu_event(rpt_trace *t, const char *name, size_t name_len, const char *pid,
                        const char *tid, int64_t ts_ns, int64_t dur_ns);
/* Sort kernels and streams once parsing is done. */
int trace_finish(rpt_trace *t);

#endif
