/* trace_busy.c: the reduced trace — per-name totals (a hash table keyed by the
 * full kernel name) and per-stream busy time as a union of intervals.
 *
 * The union is what "GPU busy" means: two kernels overlapping on one device
 * (two streams) count once. Intervals are kept sorted and merged as they come;
 * the window bound (trace_internal.h) keeps memory independent of trace size. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "trace_internal.h"

/* ---- interval union -------------------------------------------------------- */

/* iv and tmp grow as common.h's vectors do (ll_vec_reserve_), counted in
 * intervals of two int64_t each; trace_internal.h keeps them as bare fields. */
#define IV_BYTES (2 * sizeof(int64_t))

/* Fold the older half of the window into committed_ns. */
static void busy_fold(rpt_busy *b)
{
    size_t k = b->n / 2;
    for (size_t i = 0; i < k; i++)
        b->committed_ns += b->iv[2 * i + 1] - b->iv[2 * i];
    b->frontier_ns = b->iv[2 * (k - 1) + 1];
    b->has_frontier = 1;
    memmove(b->iv, b->iv + 2 * k, (b->n - k) * 2 * sizeof *b->iv);
    b->n -= k;
}

static int iv_cmp(const void *pa, const void *pb)
{
    const int64_t *a = pa, *b = pb;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Append [s, e) to a sorted output, merging with its last interval. */
static void out_push(int64_t *out, size_t *n, int64_t s, int64_t e)
{
    if (*n > 0 && s <= out[2 * (*n - 1) + 1]) {
        if (e > out[2 * (*n - 1) + 1])
            out[2 * (*n - 1) + 1] = e;
        return;
    }
    out[2 * *n] = s;
    out[2 * *n + 1] = e;
    (*n)++;
}

/* Sort the pending intervals and merge them with the list in one pass. */
static int busy_flush(rpt_busy *b)
{
    if (b->n_pend == 0)
        return 0;
    qsort(b->pend, b->n_pend, 2 * sizeof *b->pend, iv_cmp);
    if (ll_vec_reserve_((void **)&b->tmp, &b->tmp_cap, b->n + b->n_pend, IV_BYTES))
        return LL_ENOMEM;
    int64_t *out = b->tmp;
    size_t i = 0, j = 0, n = 0;
    while (i < b->n || j < b->n_pend) {
        if (j >= b->n_pend || (i < b->n && b->iv[2 * i] <= b->pend[2 * j])) {
            out_push(out, &n, b->iv[2 * i], b->iv[2 * i + 1]);
            i++;
        } else {
            out_push(out, &n, b->pend[2 * j], b->pend[2 * j + 1]);
            j++;
        }
    }
    /* swap the buffers: the merged list becomes iv, the old list the next target */
    size_t out_cap = b->tmp_cap;
    b->tmp = b->iv;
    b->tmp_cap = b->cap;
    b->iv = out;
    b->cap = out_cap;
    b->n = n;
    b->n_pend = 0;
    while (b->n > RPT_BUSY_WINDOW)
        busy_fold(b);
    return 0;
}

int rpt_busy_add(rpt_busy *b, int64_t s, int64_t e)
{
    if (e < s)
        return 0;
    if (b->has_frontier && s < b->frontier_ns) {
        b->late++;
        s = b->frontier_ns;
        if (e <= s)
            return 0;
    }
    /* Common case: in order, at or after the last interval's start. */
    if (b->n == 0 || s >= b->iv[2 * (b->n - 1)]) {
        if (b->n > 0 && s <= b->iv[2 * (b->n - 1) + 1]) {
            if (e > b->iv[2 * (b->n - 1) + 1])
                b->iv[2 * (b->n - 1) + 1] = e;
            return 0;
        }
        if (ll_vec_reserve_((void **)&b->iv, &b->cap, b->n + 1, IV_BYTES))
            return LL_ENOMEM;
        b->iv[2 * b->n] = s;
        b->iv[2 * b->n + 1] = e;
        b->n++;
        if (b->n > RPT_BUSY_WINDOW) {
            if (b->n_pend) /* they may lie before the fold: merge them first */
                return busy_flush(b);
            busy_fold(b);
        }
        return 0;
    }
    if (!b->pend && !(b->pend = malloc(RPT_BUSY_PENDING * 2 * sizeof *b->pend)))
        return LL_ENOMEM;
    b->pend[2 * b->n_pend] = s;
    b->pend[2 * b->n_pend + 1] = e;
    if (++b->n_pend == RPT_BUSY_PENDING)
        return busy_flush(b);
    return 0;
}

int rpt_busy_total_ns(rpt_busy *b, int64_t *out)
{
    if (busy_flush(b))
        return LL_ENOMEM;
    int64_t t = b->committed_ns;
    for (size_t i = 0; i < b->n; i++)
        t += b->iv[2 * i + 1] - b->iv[2 * i];
    *out = t;
    return 0;
}

void rpt_busy_free(rpt_busy *b)
{
    free(b->iv);
    free(b->pend);
    free(b->tmp);
    memset(b, 0, sizeof *b);
}

/* ---- names and streams ----------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int tab_grow(trace_tab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 256;
    trace_name *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return LL_ENOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->v[i].pub.name)
            continue;
        size_t j = t->v[i].hash & (cap - 1);
        while (tab[j].pub.name)
            j = (j + 1) & (cap - 1);
        tab[j] = t->v[i];
    }
    free(t->v);
    t->v = tab;
    t->cap = cap;
    return 0;
}

trace_name *trace_tab_get(trace_tab *t, const char *name, size_t name_len)
{
    if ((t->n + 1) * 2 > t->cap && tab_grow(t))
        return NULL;
    uint64_t h = fnv1a(name, name_len);
    size_t j = h & (t->cap - 1);
    while (t->v[j].pub.name) {
        if (t->v[j].hash == h && strlen(t->v[j].pub.name) == name_len &&
            memcmp(t->v[j].pub.name, name, name_len) == 0)
            return &t->v[j];
        j = (j + 1) & (t->cap - 1);
    }
    trace_name *e = &t->v[j];
    char *copy = malloc(name_len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, name, name_len);
    copy[name_len] = '\0';
    e->pub.name = copy;
    e->hash = h;
    t->n++;
    return e;
}

static int kernel_cmp(const void *pa, const void *pb);

int trace_tab_sort(trace_tab *t)
{
    t->sorted = malloc((t->n ? t->n : 1) * sizeof *t->sorted);
    if (!t->sorted)
        return LL_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->v[i].pub.name)
            t->sorted[k++] = t->v[i].pub;
    qsort(t->sorted, k, sizeof *t->sorted, kernel_cmp);
    return 0;
}

void trace_tab_free(trace_tab *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free((char *)t->v[i].pub.name);
    free(t->v);
    free(t->sorted);
    memset(t, 0, sizeof *t);
}

static size_t ptr_slot(const char *p, size_t cap)
{
    return (size_t)(((uint64_t)(uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
}

/* Add dur_ns to the device row's total for the kernel named `name` (the
 * trace's own copy: one pointer per distinct name). */
static int dev_kernel_add(trace_stream *s, const char *name, int64_t dur_ns)
{
    if ((s->dk_n + 1) * 2 > s->dk_cap) {
        size_t cap = s->dk_cap ? s->dk_cap * 2 : 64;
        const char **nn = calloc(cap, sizeof *nn);
        int64_t *nv = calloc(cap, sizeof *nv);
        if (!nn || !nv) {
            free(nn);
            free(nv);
            return LL_ENOMEM;
        }
        for (size_t i = 0; i < s->dk_cap; i++)
            if (s->dk_name[i]) {
                size_t j = ptr_slot(s->dk_name[i], cap);
                while (nn[j])
                    j = (j + 1) & (cap - 1);
                nn[j] = s->dk_name[i];
                nv[j] = s->dk_ns[i];
            }
        free(s->dk_name);
        free(s->dk_ns);
        s->dk_name = nn;
        s->dk_ns = nv;
        s->dk_cap = cap;
    }
    size_t j = ptr_slot(name, s->dk_cap);
    while (s->dk_name[j] && s->dk_name[j] != name)
        j = (j + 1) & (s->dk_cap - 1);
    if (!s->dk_name[j]) {
        s->dk_name[j] = name;
        s->dk_n++;
    }
    s->dk_ns[j] += dur_ns;
    return 0;
}

static trace_stream *stream_get(rpt_trace *t, const char *pid, const char *tid)
{
    for (size_t i = 0; i < t->streams_n; i++)
        if (strcmp(t->streams[i].pid, pid) == 0 && strcmp(t->streams[i].tid, tid) == 0)
            return &t->streams[i];
    if (ll_vec_reserve_((void **)&t->streams, &t->streams_cap, t->streams_n + 1, sizeof *t->streams))
        return NULL;
    trace_stream *s = &t->streams[t->streams_n];
    memset(s, 0, sizeof *s);
    s->pid = strdup(pid);
    s->tid = strdup(tid);
    if (!s->pid || !s->tid) {
        free(s->pid);
        free(s->tid);
        return NULL;
    }
    t->streams_n++;
    return s;
}

int trace_add_gpu_event(rpt_trace *t, const char *name, size_t name_len, const char *pid,
                        const char *tid, int64_t ts_ns, int64_t dur_ns)
{
    trace_name *e = trace_tab_get(&t->names, name, name_len);
    if (!e)
        return LL_ENOMEM;
    e->pub.total_ns += dur_ns;
    e->pub.count++;
    t->info.gpu_events++;
    t->info.gpu_total_ns += dur_ns;

    /* The stream itself, then the device's all-streams row. */
    trace_stream *s = stream_get(t, pid, tid);
    if (!s || rpt_busy_add(&s->busy, ts_ns, ts_ns + dur_ns))
        return LL_ENOMEM;
    s->pub.events++;
    s = stream_get(t, pid, "*");
    if (!s || rpt_busy_add(&s->busy, ts_ns, ts_ns + dur_ns) || dev_kernel_add(s, e->pub.name, dur_ns))
        return LL_ENOMEM;
    s->pub.events++;
    return 0;
}

int64_t rpt_trace_device_category_ns(const rpt_trace *t, const char *pid,
                                     const rpt_categories *cats, const char *category,
                                     int64_t *total_ns)
{
    int64_t in = 0, all = 0;
    for (size_t i = 0; i < t->streams_n; i++) {
        const trace_stream *s = &t->streams[i];
        if (strcmp(s->tid, "*") != 0 || strcmp(s->pid, pid) != 0)
            continue;
        for (size_t j = 0; j < s->dk_cap; j++)
            if (s->dk_name[j]) {
                all += s->dk_ns[j];
                if (strcmp(rpt_categories_classify(cats, s->dk_name[j]), category) == 0)
                    in += s->dk_ns[j];
            }
    }
    if (total_ns)
        *total_ns = all;
    return in;
}

static int kernel_cmp(const void *pa, const void *pb)
{
    const rpt_trace_kernel *a = pa, *b = pb;
    if (a->total_ns != b->total_ns)
        return a->total_ns > b->total_ns ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Numeric text compares as a number so device 10 sorts after device 2. */
static int label_cmp(const char *a, const char *b)
{
    char *ea, *eb;
    double da = strtod(a, &ea), db = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb && da != db)
        return da < db ? -1 : 1;
    return strcmp(a, b);
}

static int stream_cmp(const void *pa, const void *pb)
{
    const rpt_trace_stream *a = pa, *b = pb;
    int c = label_cmp(a->pid, b->pid);
    if (c)
        return c;
    int sa = strcmp(a->tid, "*") == 0, sb = strcmp(b->tid, "*") == 0;
    if (sa != sb)
        return sa ? -1 : 1;
    return label_cmp(a->tid, b->tid);
}

int trace_finish(rpt_trace *t)
{
    t->streams_sorted = malloc((t->streams_n ? t->streams_n : 1) * sizeof *t->streams_sorted);
    if (!t->streams_sorted || trace_tab_sort(&t->names) || trace_cpu_finish(t))
        return LL_ENOMEM;
    for (size_t i = 0; i < t->streams_n; i++) {
        trace_stream *s = &t->streams[i];
        s->pub.pid = s->pid;
        s->pub.tid = s->tid;
        if (rpt_busy_total_ns(&s->busy, &s->pub.busy_ns))
            return LL_ENOMEM;
        t->info.late_events += s->busy.late;
        t->streams_sorted[i] = s->pub;
    }
    qsort(t->streams_sorted, t->streams_n, sizeof *t->streams_sorted, stream_cmp);
    t->info.span_ns = t->have_span ? t->last_ns - t->first_ns : 0;
    return 0;
}

void rpt_trace_free(rpt_trace *t)
{
    if (!t)
        return;
    trace_tab_free(&t->names);
    trace_cpu_free(t);
    for (size_t i = 0; i < t->streams_n; i++) {
        free(t->streams[i].pid);
        free(t->streams[i].tid);
        free(t->streams[i].dk_name);
        free(t->streams[i].dk_ns);
        rpt_busy_free(&t->streams[i].busy);
    }
    free(t->streams);
    free(t->streams_sorted);
    free(t);
}

void rpt_trace_get_info(const rpt_trace *t, rpt_trace_info *out) { *out = t->info; }
size_t rpt_trace_n_kernels(const rpt_trace *t) { return t->names.n; }
const rpt_trace_kernel *rpt_trace_kernel_at(const rpt_trace *t, size_t i)
{
    return i < t->names.n ? &t->names.sorted[i] : NULL;
}
size_t rpt_trace_n_streams(const rpt_trace *t) { return t->streams_n; }
const rpt_trace_stream *rpt_trace_stream_at(const rpt_trace *t, size_t i)
{
    return i < t->streams_n ? &t->streams_sorted[i] : NULL;
}
