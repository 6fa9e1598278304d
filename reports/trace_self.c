/* trace_self.c: CPU operators by self time, for traces with no GPU events
 * (vLLM's CPU backend, any torch.profiler run on the CPU).
 *
 * Self time is an event's duration less that of the events directly inside
 * it on the same thread (pid, tid): aten::linear's time is mostly its
 * aten::addmm's, which is mostly the matmul library's. Summing durations
 * instead would count every nested op once per level.
 *
 * METHOD: per thread, events go through a bounded min-heap that restores start
 * order (trace_internal.h states the bound), then through a stack of open
 * events: an event that starts after the top ends closes the top (its self
 * time is final); an event that starts inside the top is its child, and adds
 * its duration to the top's child time. A child that ends past its parent
 * (the profiler's rounding, a microsecond) is clipped to the parent, so the
 * stack always holds properly nested events. Cost: O(log K) per event; memory
 * per thread fixed; per distinct name one table entry. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "trace_internal.h"

/* A step's marker: torch.profiler's schedule (ProfilerStep#N), and vLLM's
 * worker, which annotates each iteration as
 * execute_context_<requests>(<tokens>)_generation_<requests>(<tokens>)
 * (vllm/v1/worker/gpu_worker.py; its CPU worker too). */
static const char *const step_prefixes[] = {"ProfilerStep#", "execute_context_"};

static int is_step_marker(const char *name, size_t name_len)
{
    for (size_t i = 0; i < sizeof step_prefixes / sizeof *step_prefixes; i++) {
        size_t n = strlen(step_prefixes[i]);
        if (name_len > n && memcmp(name, step_prefixes[i], n) == 0)
            return 1;
    }
    return 0;
}

/* Heap order: earlier start first; at equal starts the longer (the parent). */
static int ev_before(const cpu_ev *a, const cpu_ev *b)
{
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
}

static void heap_push(trace_thread *th, cpu_ev e)
{
    size_t i = th->heap_n++;
    while (i > 0 && ev_before(&e, &th->heap[(i - 1) / 2])) {
        th->heap[i] = th->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    th->heap[i] = e;
}

static cpu_ev heap_pop(trace_thread *th)
{
    cpu_ev top = th->heap[0], last = th->heap[--th->heap_n];
    size_t i = 0, n = th->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_before(&th->heap[c + 1], &th->heap[c]))
            c++;
        if (!ev_before(&th->heap[c], &last))
            break;
        th->heap[i] = th->heap[c];
        i = c;
    }
    if (n)
        th->heap[i] = last;
    return top;
}

/* An event whose self time is final. */
static int account(rpt_trace *t, trace_thread *th, const cpu_ev *e, int64_t self_ns)
{
    if (self_ns < 0)
        self_ns = 0;
    trace_name *n = trace_tab_get(&t->cpu, e->name, strlen(e->name));
    if (!n)
        return LL_ENOMEM;
    n->pub.total_ns += self_ns;
    n->pub.count++;
    th->pub.busy_ns += self_ns;
    th->pub.events++;
    t->info.cpu_events++;
    t->info.cpu_self_ns += self_ns;
    return 0;
}

static int stack_pop(rpt_trace *t, trace_thread *th)
{
    cpu_ev *e = &th->stack[--th->depth];
    return account(t, th, e, e->end_ns - e->start_ns - e->child_ns);
}

/* Feed one event in start order through the stack of open events. */
static int feed(rpt_trace *t, trace_thread *th, cpu_ev e)
{
    int rc;
    if (th->released && e.start_ns < th->released_ns) {
        t->info.cpu_late++;
        return account(t, th, &e, e.end_ns - e.start_ns);
    }
    th->released_ns = e.start_ns;
    th->released = 1;
    while (th->depth && th->stack[th->depth - 1].end_ns <= e.start_ns)
        if ((rc = stack_pop(t, th)))
            return rc;
    if (th->depth) {
        cpu_ev *parent = &th->stack[th->depth - 1];
        if (e.end_ns > parent->end_ns)
            e.end_ns = parent->end_ns;
        parent->child_ns += e.end_ns - e.start_ns;
    }
    if (th->depth == RPT_CPU_DEPTH) {
        t->info.cpu_late++;
        return account(t, th, &e, e.end_ns - e.start_ns);
    }
    if (th->depth == th->stack_cap &&
        ll_vec_reserve_((void **)&th->stack, &th->stack_cap, th->depth + 1, sizeof *th->stack))
        return LL_ENOMEM;
    e.child_ns = 0;
    th->stack[th->depth++] = e;
    return 0;
}

static trace_thread *thread_get(rpt_trace *t, const char *pid, const char *tid)
{
    /* Events of one thread come in runs: the last one found is tried first. */
    if (t->last_thread < t->threads_n) {
        trace_thread *th = &t->threads[t->last_thread];
        if (strcmp(th->pid, pid) == 0 && strcmp(th->tid, tid) == 0)
            return th;
    }
    for (size_t i = 0; i < t->threads_n; i++)
        if (strcmp(t->threads[i].pid, pid) == 0 && strcmp(t->threads[i].tid, tid) == 0) {
            t->last_thread = i;
            return &t->threads[i];
        }
    if (ll_vec_reserve_((void **)&t->threads, &t->threads_cap, t->threads_n + 1, sizeof *t->threads))
        return NULL;
    trace_thread *th = &t->threads[t->threads_n];
    memset(th, 0, sizeof *th);
    th->pid = strdup(pid);
    th->tid = strdup(tid);
    th->heap = malloc(RPT_CPU_REORDER * sizeof *th->heap);
    if (!th->pid || !th->tid || !th->heap) {
        free(th->pid);
        free(th->tid);
        free(th->heap);
        return NULL;
    }
    t->last_thread = t->threads_n++;
    return th;
}

int trace_add_cpu_event(rpt_trace *t, const char *name, size_t name_len, const char *pid,
                        const char *tid, int64_t ts_ns, int64_t dur_ns)
{
    if (is_step_marker(name, name_len)) {
        /* A step marker spans the step; its own "self time" would be the
         * Python between operators, not an operator. */
        if (t->info.steps == 0 || dur_ns < t->info.step_min_ns)
            t->info.step_min_ns = dur_ns;
        if (dur_ns > t->info.step_max_ns)
            t->info.step_max_ns = dur_ns;
        t->info.steps++;
        t->info.step_total_ns += dur_ns;
        return 0;
    }
    /* The name goes into the table now so the event can hold its stable copy. */
    trace_name *n = trace_tab_get(&t->cpu, name, name_len);
    trace_thread *th = n ? thread_get(t, pid, tid) : NULL;
    if (!th)
        return LL_ENOMEM;
    cpu_ev e = {ts_ns, ts_ns + dur_ns, 0, n->pub.name};
    heap_push(th, e);
    return th->heap_n == RPT_CPU_REORDER ? feed(t, th, heap_pop(th)) : 0;
}

static int thread_cmp(const void *pa, const void *pb)
{
    const rpt_trace_stream *a = pa, *b = pb;
    if (a->busy_ns != b->busy_ns)
        return a->busy_ns > b->busy_ns ? -1 : 1;
    int c = strcmp(a->pid, b->pid);
    return c ? c : strcmp(a->tid, b->tid);
}

int trace_cpu_finish(rpt_trace *t)
{
    for (size_t i = 0; i < t->threads_n; i++) {
        trace_thread *th = &t->threads[i];
        int rc;
        while (th->heap_n)
            if ((rc = feed(t, th, heap_pop(th))))
                return rc;
        while (th->depth)
            if ((rc = stack_pop(t, th)))
                return rc;
    }
    t->threads_sorted = malloc((t->threads_n ? t->threads_n : 1) * sizeof *t->threads_sorted);
    if (!t->threads_sorted)
        return LL_ENOMEM;
    for (size_t i = 0; i < t->threads_n; i++) {
        t->threads[i].pub.pid = t->threads[i].pid;
        t->threads[i].pub.tid = t->threads[i].tid;
        t->threads_sorted[i] = t->threads[i].pub;
    }
    qsort(t->threads_sorted, t->threads_n, sizeof *t->threads_sorted, thread_cmp);
    return trace_tab_sort(&t->cpu);
}

void trace_cpu_free(rpt_trace *t)
{
    trace_tab_free(&t->cpu);
    for (size_t i = 0; i < t->threads_n; i++) {
        free(t->threads[i].pid);
        free(t->threads[i].tid);
        free(t->threads[i].heap);
        free(t->threads[i].stack);
    }
    free(t->threads);
    free(t->threads_sorted);
}

size_t rpt_trace_n_cpu_ops(const rpt_trace *t) { return t->cpu.n; }
const rpt_trace_kernel *rpt_trace_cpu_op_at(const rpt_trace *t, size_t i)
{
    return i < t->cpu.n ? &t->cpu.sorted[i] : NULL;
}
size_t rpt_trace_n_threads(const rpt_trace *t) { return t->threads_n; }
const rpt_trace_stream *rpt_trace_thread_at(const rpt_trace *t, size_t i)
{
    return i < t->threads_n ? &t->threads_sorted[i] : NULL;
}
