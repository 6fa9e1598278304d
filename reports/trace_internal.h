/* trace_internal.h (internal to reports/): the reduced form of one trace.
 *
 * trace_parse.c feeds events in; trace_busy.c keeps per-stream interval unions;
 * trace_print.c reads the finished object through report.h's accessors. */
#ifndef LOADLAW_TRACE_INTERNAL_H
#define LOADLAW_TRACE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

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

/* Totals per distinct name: open addressing, power-of-two cap; each name is
 * the table's own copy, so its pointer stays valid while the table grows. */
typedef struct trace_tab {
    trace_name *v;
    size_t cap, n;
    rpt_trace_kernel *sorted; /* built by trace_tab_sort */
} trace_tab;

/* name's entry, added (zero totals) when new; NULL when out of memory. */
trace_name *trace_tab_get(trace_tab *t, const char *name, size_t name_len);
/* Sort by total time into t->sorted (LL_ENOMEM). */
int trace_tab_sort(trace_tab *t);
void trace_tab_free(trace_tab *t);

/* One CPU event on its way to self time (trace_self.c). */
typedef struct cpu_ev {
    int64_t start_ns, end_ns;
    int64_t child_ns;  /* time of the events directly inside it (on the stack) */
    const char *name;  /* the CPU table's copy */
} cpu_ev;

/* Self time needs the events of one thread in start order, parents before
 * their children. Kineto writes them nearly so; a min-heap of
 * RPT_CPU_REORDER events per thread restores the order, and an event that
 * starts before one already released is counted late: all of its time as its
 * own self time, its parent not reduced (the output says how many). Nesting
 * deeper than RPT_CPU_DEPTH is counted the same way. Memory: about
 * 32 bytes * (RPT_CPU_REORDER + depth) per thread, whatever the trace's size. */
#define RPT_CPU_REORDER 4096
#define RPT_CPU_DEPTH 1024
typedef struct trace_thread {
    rpt_trace_stream pub;  /* pid, tid; busy_ns: self time summed; events */
    char *pid, *tid;
    cpu_ev *heap;          /* min-heap on (start, then longest first) */
    size_t heap_n;
    cpu_ev *stack;         /* open events, outermost first, each inside the one below */
    size_t depth, stack_cap;
    int64_t released_ns;   /* start of the last event taken from the heap */
    int released;
} trace_thread;

struct rpt_trace {
    rpt_trace_info info;
    int64_t first_ns, last_ns;     /* span of "X" events */
    int have_span;
    trace_tab names;               /* GPU events by name */
    trace_tab cpu;                 /* CPU operators by name, self time */
    trace_thread *threads;
    size_t threads_n, threads_cap, last_thread;
    rpt_trace_stream *threads_sorted;
    trace_stream *streams;
    size_t streams_n, streams_cap;
    rpt_trace_stream *streams_sorted;
};

/* Account one GPU event. pid/tid are text ("0", "7", "stream 7"). */
int trace_add_gpu_event(rpt_trace *t, const char *name, size_t name_len, const char *pid,
                        const char *tid, int64_t ts_ns, int64_t dur_ns);
/* Account one CPU event (cat cpu_op or user_annotation; trace_parse.c says
 * why those) of thread pid/tid: its self time once its children are known;
 * a step marker (ProfilerStep#N, vLLM's execute_context_...) marks a step
 * instead. */
int trace_add_cpu_event(rpt_trace *t, const char *name, size_t name_len, const char *pid,
                        const char *tid, int64_t ts_ns, int64_t dur_ns);
/* Drain every thread's pending events and sort the CPU table (LL_ENOMEM). */
int trace_cpu_finish(rpt_trace *t);
void trace_cpu_free(rpt_trace *t);
/* Sort kernels and streams once parsing is done. */
int trace_finish(rpt_trace *t);

/* ---- printing: trace_print.c (GPU, shared rows), trace_print_cpu.c ---- */

/* One table row: a kernel (or CPU operator) merged over the traces. */
typedef struct krow {
    char *key;          /* short or full name */
    const char *full;   /* one full name (for the category) */
    int64_t *ns;        /* per trace */
    uint64_t *cnt;
    int64_t total_ns;
    uint64_t count;
    size_t variants;
} krow;

const char *trace_label_of(const char *const *labels, size_t i, char *buf, size_t n);
void trace_print_file_columns(FILE *out, size_t nt);
void trace_print_rows(FILE *out, size_t nt, const krow *rows, size_t nrows, int64_t grand, int top, int wide,
                      int cpu);
void trace_print_categories(FILE *out, size_t nt, const rpt_categories *cats, const int64_t *ct, int64_t grand,
                            uint64_t steps);
/* cJSON items are declared by cjson/cJSON.h, which the printers include. */
struct cJSON;
int trace_kernel_json(struct cJSON *kern, const krow *r, size_t nt, const rpt_categories *cats);
/* The rows (kernels or operators) into rows_arr and the categories into
 * catj, then root printed to out and freed (on failure too): 0 or LL_ENOMEM. */
int trace_rows_json_out(FILE *out, struct cJSON *root, struct cJSON *rows_arr, struct cJSON *catj, const krow *rows,
                        size_t nrows, size_t nt, const rpt_categories *cats, const int64_t *ct);
int trace_category_json(struct cJSON *catj, const rpt_categories *cats, size_t j, size_t nt, const int64_t *ct);

/* 1 when no trace has a GPU event and some has a CPU operator: the tables
 * then list CPU operators by self time. */
int trace_cpu_only(rpt_trace *const *tr, size_t nt);
void trace_print_cpu_text(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                          const krow *rows, size_t nrows, const rpt_categories *cats, const int64_t *ct,
                          const rpt_trace_print_opts *o);
int trace_print_cpu_json(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                         const krow *rows, size_t nrows, const rpt_categories *cats, const int64_t *ct);

#endif
