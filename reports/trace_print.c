/* trace_print.c: the tables (or JSON) of `loadlaw trace` for one or more
 * reduced traces: top kernels, the category roll-up, GPU busy per stream.
 * Traces with no GPU event at all are printed by trace_print_cpu.c from the
 * same rows, built here from their CPU operators.
 *
 * With several traces (one per tensor-parallel rank) every table gets one
 * column per trace; shares are of the time summed over all traces. Without
 * --wide, kernels whose short names coincide (template instantiations of one
 * kernel) share a row and the row says how many variants it holds. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "report.h"
#include "trace_internal.h"

#define NAME_CHARS 72

typedef struct kent {
    char *key;
    const char *full;
    size_t file;
    int64_t ns;
    uint64_t cnt;
} kent;

static int kent_cmp(const void *pa, const void *pb)
{
    const kent *a = pa, *b = pb;
    int c = strcmp(a->key, b->key);
    return c ? c : (a->file > b->file) - (a->file < b->file);
}

static int krow_cmp(const void *pa, const void *pb)
{
    const krow *a = pa, *b = pb;
    if (a->total_ns != b->total_ns)
        return a->total_ns > b->total_ns ? -1 : 1;
    return strcmp(a->key, b->key);
}

static void rows_free(krow *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].ns);
        free(rows[i].cnt);
    }
    free(rows);
}

/* What the tables list: GPU kernels, or CPU operators by self time. */
static size_t n_items(const rpt_trace *t, int cpu)
{
    return cpu ? rpt_trace_n_cpu_ops(t) : rpt_trace_n_kernels(t);
}

static const rpt_trace_kernel *item_at(const rpt_trace *t, size_t i, int cpu)
{
    return cpu ? rpt_trace_cpu_op_at(t, i) : rpt_trace_kernel_at(t, i);
}

/* Merge the kernels (or CPU operators) of all traces into rows keyed by
 * display name. */
static int build_rows(rpt_trace *const *tr, size_t nt, int wide, int cpu, krow **rows_out, size_t *nrows,
                      kent **ents_out, size_t *nents)
{
    size_t total = 0;
    for (size_t f = 0; f < nt; f++)
        total += n_items(tr[f], cpu);
    kent *ents = calloc(total ? total : 1, sizeof *ents);
    krow *rows = calloc(total ? total : 1, sizeof *rows);
    if (!ents || !rows)
        goto fail;
    size_t k = 0;
    char buf[1024];
    for (size_t f = 0; f < nt; f++) {
        for (size_t i = 0; i < n_items(tr[f], cpu); i++, k++) {
            const rpt_trace_kernel *kk = item_at(tr[f], i, cpu);
            ents[k].key = strdup(wide ? kk->name : rpt_kernel_short_name(kk->name, 0, buf, sizeof buf));
            if (!ents[k].key)
                goto fail;
            ents[k].full = kk->name;
            ents[k].file = f;
            ents[k].ns = kk->total_ns;
            ents[k].cnt = kk->count;
        }
    }
    qsort(ents, total, sizeof *ents, kent_cmp);
    size_t nr = 0, run = 0;
    krow *prev_row = NULL;
    for (size_t i = 0; i < total; i++) {
        krow *r;
        if (nr > 0 && strcmp(rows[nr - 1].key, ents[i].key) == 0) {
            r = &rows[nr - 1];
        } else {
            r = &rows[nr++];
            r->key = ents[i].key;
            r->full = ents[i].full;
            r->ns = calloc(nt, sizeof *r->ns);
            r->cnt = calloc(nt, sizeof *r->cnt);
            if (!r->ns || !r->cnt) {
                rows_free(rows, nr);
                rows = NULL;
                goto fail;
            }
        }
        /* variants: the most full names one trace has under this key */
        if (i == 0 || r != prev_row || ents[i - 1].file != ents[i].file)
            run = 1;
        else
            run++;
        if (run > r->variants)
            r->variants = run;
        prev_row = r;
        r->ns[ents[i].file] += ents[i].ns;
        r->cnt[ents[i].file] += ents[i].cnt;
        r->total_ns += ents[i].ns;
        r->count += ents[i].cnt;
    }
    qsort(rows, nr, sizeof *rows, krow_cmp);
    *rows_out = rows;
    *nrows = nr;
    *ents_out = ents;
    *nents = total;
    return 0;
fail:
    if (ents)
        for (size_t i = 0; i < total; i++)
            free(ents[i].key);
    free(ents);
    free(rows);
    return LL_ENOMEM;
}

const char *trace_label_of(const char *const *labels, size_t i, char *buf, size_t n)
{
    if (labels && labels[i])
        return labels[i];
    snprintf(buf, n, "#%zu", i);
    return buf;
}

/* Per-category totals: out[f * ncat + c]. */
static int64_t *category_totals(rpt_trace *const *tr, size_t nt, const rpt_categories *cats, int cpu)
{
    size_t nc = rpt_categories_count(cats);
    int64_t *v = calloc(nt * nc, sizeof *v);
    if (!v)
        return NULL;
    for (size_t f = 0; f < nt; f++)
        for (size_t i = 0; i < n_items(tr[f], cpu); i++) {
            const rpt_trace_kernel *k = item_at(tr[f], i, cpu);
            const char *c = rpt_categories_classify(cats, k->name);
            for (size_t j = 0; j < nc; j++)
                if (strcmp(c, rpt_categories_name(cats, j)) == 0) {
                    v[f * nc + j] += k->total_ns;
                    break;
                }
        }
    return v;
}

/* One stream of file f (a device's "*" row adds its communication share). */
static int stream_json(cJSON *st, rpt_trace *t, const rpt_trace_stream *s, const rpt_trace_info *info,
                       const rpt_categories *cats)
{
    cJSON *so = cJSON_CreateObject();
    if (!so || !cJSON_AddItemToArray(st, so))
        return cJSON_Delete(so), -1;
    if (!cJSON_AddStringToObject(so, "device", s->pid) || !cJSON_AddStringToObject(so, "stream", s->tid) ||
        !cJSON_AddNumberToObject(so, "busy_us", s->busy_ns / 1e3))
        return -1;
    if (!cJSON_AddNumberToObject(so, "busy_frac", info->span_ns > 0 ? (double)s->busy_ns / info->span_ns : 0) ||
        !cJSON_AddNumberToObject(so, "events", (double)s->events))
        return -1;
    if (strcmp(s->tid, "*") == 0) { /* a device: its communication share */
        int64_t all = 0;
        int64_t comm = rpt_trace_device_category_ns(t, s->pid, cats, "communication", &all);
        if (!cJSON_AddNumberToObject(so, "comm_us", comm / 1e3) ||
            !cJSON_AddNumberToObject(so, "comm_frac", all > 0 ? (double)comm / all : 0))
            return -1;
    }
    return 0;
}

/* One element of "files": the file's counts and its streams. */
static int file_json(cJSON *files, rpt_trace *t, const char *label, const rpt_categories *cats)
{
    rpt_trace_info info;
    rpt_trace_get_info(t, &info);
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(files, o))
        return cJSON_Delete(o), -1;
    if (!cJSON_AddStringToObject(o, "file", label) || !cJSON_AddNumberToObject(o, "events", (double)info.events) ||
        !cJSON_AddNumberToObject(o, "gpu_events", (double)info.gpu_events))
        return -1;
    if (!cJSON_AddNumberToObject(o, "span_us", info.span_ns / 1e3) ||
        !cJSON_AddNumberToObject(o, "gpu_total_us", info.gpu_total_ns / 1e3) ||
        !cJSON_AddNumberToObject(o, "late_events", (double)info.late_events) ||
        !cJSON_AddNumberToObject(o, "bad_events", (double)info.bad_events))
        return -1;
    cJSON *st = cJSON_AddArrayToObject(o, "streams");
    if (!st)
        return -1;
    for (size_t i = 0; i < rpt_trace_n_streams(t); i++)
        if (stream_json(st, t, rpt_trace_stream_at(t, i), &info, cats))
            return -1;
    return 0;
}

/* One element of "kernels": a kernel's totals and its time per file. */
int trace_kernel_json(cJSON *kern, const krow *r, size_t nt, const rpt_categories *cats)
{
    char buf[1024];
    cJSON *o = cJSON_CreateObject();
    cJSON *per = cJSON_CreateArray();
    if (!o || !cJSON_AddItemToArray(kern, o)) {
        cJSON_Delete(o);
        cJSON_Delete(per);
        return -1;
    }
    if (!per || !cJSON_AddItemToObject(o, "per_file_us", per))
        return cJSON_Delete(per), -1;
    if (!cJSON_AddStringToObject(o, "name", r->key) ||
        !cJSON_AddStringToObject(o, "short", rpt_kernel_short_name(r->key, NAME_CHARS, buf, sizeof buf)) ||
        !cJSON_AddStringToObject(o, "category", rpt_categories_classify(cats, r->full)))
        return -1;
    if (!cJSON_AddNumberToObject(o, "total_us", r->total_ns / 1e3) ||
        !cJSON_AddNumberToObject(o, "count", (double)r->count) ||
        !cJSON_AddNumberToObject(o, "variants", (double)r->variants))
        return -1;
    for (size_t f = 0; f < nt; f++)
        if (!cJSON_AddItemToArray(per, cJSON_CreateNumber(r->ns[f] / 1e3)))
            return -1;
    return 0;
}

/* One element of "categories": category j's time per file and in all. */
int trace_category_json(cJSON *catj, const rpt_categories *cats, size_t j, size_t nt, const int64_t *ct)
{
    size_t nc = rpt_categories_count(cats);
    cJSON *o = cJSON_CreateObject();
    cJSON *per = cJSON_CreateArray();
    if (!o || !cJSON_AddItemToArray(catj, o)) {
        cJSON_Delete(o);
        cJSON_Delete(per);
        return -1;
    }
    if (!per || !cJSON_AddItemToObject(o, "per_file_us", per))
        return cJSON_Delete(per), -1;
    if (!cJSON_AddStringToObject(o, "category", rpt_categories_name(cats, j)))
        return -1;
    double tot = 0;
    for (size_t f = 0; f < nt; f++) {
        if (!cJSON_AddItemToArray(per, cJSON_CreateNumber(ct[f * nc + j] / 1e3)))
            return -1;
        tot += ct[f * nc + j] / 1e3;
    }
    return cJSON_AddNumberToObject(o, "total_us", tot) ? 0 : -1;
}

static int print_json(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                      krow *rows, size_t nrows, const rpt_categories *cats, const int64_t *ct)
{
    cJSON *root = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(root, "files");
    cJSON *kern = cJSON_AddArrayToObject(root, "kernels");
    cJSON *catj = cJSON_AddArrayToObject(root, "categories");
    if (!root || !files || !kern || !catj)
        goto fail;
    char lb[32];
    for (size_t f = 0; f < nt; f++)
        if (file_json(files, tr[f], trace_label_of(labels, f, lb, sizeof lb), cats))
            goto fail;
    return trace_rows_json_out(out, root, kern, catj, rows, nrows, nt, cats, ct);
fail:
    cJSON_Delete(root);
    return LL_ENOMEM;
}

int trace_rows_json_out(FILE *out, struct cJSON *root, struct cJSON *rows_arr, struct cJSON *catj, const krow *rows,
                        size_t nrows, size_t nt, const rpt_categories *cats, const int64_t *ct)
{
    for (size_t i = 0; i < nrows; i++)
        if (trace_kernel_json(rows_arr, &rows[i], nt, cats))
            goto fail;
    for (size_t j = 0; j < rpt_categories_count(cats); j++)
        if (trace_category_json(catj, cats, j, nt, ct))
            goto fail;
    char *s = cJSON_Print(root);
    if (!s)
        goto fail;
    fprintf(out, "%s\n", s);
    free(s);
    cJSON_Delete(root);
    return 0;
fail:
    cJSON_Delete(root);
    return LL_ENOMEM;
}

static void print_comm_per_device(FILE *out, rpt_trace *const *tr, size_t nt,
                                  const rpt_categories *cats);

/* Each file's counts and warnings; the GPU time of all files together. */
static int64_t print_files(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt)
{
    char lb[32];
    int64_t grand = 0;
    for (size_t f = 0; f < nt; f++) {
        rpt_trace_info info;
        rpt_trace_get_info(tr[f], &info);
        grand += info.gpu_total_ns;
        if (nt > 1)
            fprintf(out, "[%zu] ", f + 1);
        fprintf(out, "%s: %llu events, %llu on the GPU, span %.2f ms, GPU time %.2f ms\n",
                trace_label_of(labels, f, lb, sizeof lb), (unsigned long long)info.events,
                (unsigned long long)info.gpu_events, info.span_ns / 1e6, info.gpu_total_ns / 1e6);
        if (info.bad_events)
            fprintf(out, "  warning: %llu GPU events left out: no numeric ts, or no numeric dur >= 0\n",
                    (unsigned long long)info.bad_events);
        if (info.late_events)
            fprintf(out, "  warning: %llu events came more than %d intervals out of order; "
                         "busy fractions below are lower bounds\n",
                    (unsigned long long)info.late_events, RPT_BUSY_WINDOW);
    }
    return grand;
}

/* " [1] ms [2] ms ...": the per-file columns' headers, with several files. */
void trace_print_file_columns(FILE *out, size_t nt)
{
    for (size_t f = 0; nt > 1 && f < nt; f++)
    {
        char h[24];
        snprintf(h, sizeof h, "[%zu] ms", f + 1);
        fprintf(out, " %10s", h);
    }
}

/* The top rows by time, the rest summed on one line; cpu: CPU operators by
 * self time, else kernels by total GPU time. */
void trace_print_rows(FILE *out, size_t nt, const krow *rows, size_t nrows, int64_t grand, int top, int wide,
                      int cpu)
{
    char buf[1024];
    fprintf(out, "\ntop %s%s\n", cpu ? "CPU operators by self time" : "kernels by total GPU time",
            nt > 1 ? " (all files)" : "");
    fprintf(out, "  share   %s ms     count    mean us", cpu ? " self" : "total");
    trace_print_file_columns(out, nt);
    fprintf(out, "  %s\n", cpu ? "operator" : "kernel");
    size_t shown = (size_t)top < nrows ? (size_t)top : nrows;
    int64_t rest_ns = 0;
    uint64_t rest_cnt = 0;
    for (size_t i = 0; i < nrows; i++) {
        const krow *r = &rows[i];
        if (i >= shown) {
            rest_ns += r->total_ns;
            rest_cnt += r->count;
            continue;
        }
        fprintf(out, " %5.1f%% %10.2f %9llu %10.1f", 100.0 * r->total_ns / grand, r->total_ns / 1e6,
                (unsigned long long)r->count, r->count ? r->total_ns / 1e3 / r->count : 0.0);
        for (size_t f = 0; nt > 1 && f < nt; f++)
            fprintf(out, " %10.2f", r->ns[f] / 1e6);
        fprintf(out, "  %s", wide ? r->key : rpt_kernel_short_name(r->key, NAME_CHARS, buf, sizeof buf));
        if (r->variants > 1)
            fprintf(out, " (%zu variants)", r->variants);
        fputc('\n', out);
    }
    if (rest_cnt) {
        fprintf(out, " %5.1f%% %10.2f %9llu %10s", 100.0 * rest_ns / grand, rest_ns / 1e6,
                (unsigned long long)rest_cnt, "");
        for (size_t f = 0; nt > 1 && f < nt; f++) {
            int64_t ns = 0;
            for (size_t i = shown; i < nrows; i++)
                ns += rows[i].ns[f];
            fprintf(out, " %10.2f", ns / 1e6);
        }
        fprintf(out, "  (%zu more)\n", nrows - shown);
    }
}

/* Time by category (those with any), per file with several; with steps > 0
 * also per step (the time of all files over their steps summed). */
void trace_print_categories(FILE *out, size_t nt, const rpt_categories *cats, const int64_t *ct, int64_t grand,
                            uint64_t steps)
{
    size_t nc = rpt_categories_count(cats);
    fprintf(out, "\nby category\n  %-22s %6s %10s", "category", "share", "total ms");
    if (steps)
        fprintf(out, " %10s", "ms/step");
    trace_print_file_columns(out, nt);
    fputc('\n', out);
    for (size_t j = 0; j < nc; j++) {
        int64_t tot = 0;
        for (size_t f = 0; f < nt; f++)
            tot += ct[f * nc + j];
        if (tot == 0)
            continue;
        fprintf(out, "  %-22s %5.1f%% %10.2f", rpt_categories_name(cats, j), 100.0 * tot / grand, tot / 1e6);
        if (steps)
            fprintf(out, " %10.3f", tot / 1e6 / (double)steps);
        for (size_t f = 0; nt > 1 && f < nt; f++)
            fprintf(out, " %10.2f", ct[f * nc + j] / 1e6);
        fputc('\n', out);
    }
}

/* Each stream's busy share of its file's wall span. */
static void print_busy(FILE *out, rpt_trace *const *tr, size_t nt)
{
    fprintf(out, "\nGPU busy (union of event intervals / the file's wall span)\n");
    for (size_t f = 0; f < nt; f++) {
        rpt_trace_info info;
        rpt_trace_get_info(tr[f], &info);
        for (size_t i = 0; i < rpt_trace_n_streams(tr[f]); i++) {
            const rpt_trace_stream *s = rpt_trace_stream_at(tr[f], i);
            int all = strcmp(s->tid, "*") == 0;
            char where[160];
            snprintf(where, sizeof where, "device %s %s%s", s->pid, all ? "all streams" : "stream ",
                     all ? "" : s->tid);
            char col[24] = "";
            if (nt > 1)
                snprintf(col, sizeof col, "[%zu] ", f + 1);
            fprintf(out, "  %s%-30s %5.1f%%  %10.2f ms busy  %9llu events\n", col, where,
                    info.span_ns > 0 ? 100.0 * s->busy_ns / info.span_ns : 0.0, s->busy_ns / 1e6,
                    (unsigned long long)s->events);
        }
    }
}

static void print_text(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                       krow *rows, size_t nrows, const rpt_categories *cats, const int64_t *ct,
                       int top, int wide)
{
    int64_t grand = print_files(out, tr, labels, nt);
    if (grand == 0) {
        fprintf(out, "\nno GPU events (ph \"X\" with cat kernel/gpu_memcpy/gpu_memset, or args.stream)\n"
                     "and no CPU operators (ph \"X\" with cat cpu_op or user_annotation)\n");
        return;
    }
    trace_print_rows(out, nt, rows, nrows, grand, top, wide, 0);
    trace_print_categories(out, nt, cats, ct, grand, 0);
    print_busy(out, tr, nt);
    print_comm_per_device(out, tr, nt, cats);
}

/* Tensor parallelism: with more than one device (rank) in a file, each
 * device's "communication" kernel time and its share of that device's
 * kernel time (the seed's "NCCL all-reduce was 0.8% of GPU time", per rank). */
static void print_comm_per_device(FILE *out, rpt_trace *const *tr, size_t nt,
                                  const rpt_categories *cats)
{
    int header = 0;
    for (size_t f = 0; f < nt; f++) {
        size_t devices = 0;
        for (size_t i = 0; i < rpt_trace_n_streams(tr[f]); i++)
            devices += strcmp(rpt_trace_stream_at(tr[f], i)->tid, "*") == 0;
        if (devices < 2)
            continue;
        if (!header)
            fprintf(out, "\ncommunication per device (rank): its communication kernels / its kernel time\n");
        header = 1;
        for (size_t i = 0; i < rpt_trace_n_streams(tr[f]); i++) {
            const rpt_trace_stream *s = rpt_trace_stream_at(tr[f], i);
            if (strcmp(s->tid, "*") != 0)
                continue;
            int64_t all = 0;
            int64_t comm = rpt_trace_device_category_ns(tr[f], s->pid, cats, "communication", &all);
            char col[24] = "";
            if (nt > 1)
                snprintf(col, sizeof col, "[%zu] ", f + 1);
            fprintf(out, "  %sdevice %-23s %5.1f%%  %10.2f ms of %.2f ms\n", col, s->pid,
                    all > 0 ? 100.0 * comm / all : 0.0, comm / 1e6, all / 1e6);
        }
    }
}

int rpt_trace_print(FILE *f, rpt_trace *const *traces, const char *const *labels, size_t n,
                    const rpt_trace_print_opts *opts, char *err, size_t errlen)
{
    rpt_trace_print_opts o = {0};
    if (opts)
        o = *opts;
    if (o.top <= 0)
        o.top = 15;
    rpt_categories *own = NULL;
    const rpt_categories *cats = o.cats;
    krow *rows = NULL;
    kent *ents = NULL;
    size_t nrows = 0, nents = 0;
    int64_t *ct = NULL;
    int rc;
    if (!cats) {
        if ((rc = rpt_categories_new(&own, err, errlen)))
            return rc;
        cats = own;
    }
    int cpu = trace_cpu_only(traces, n);
    rc = build_rows(traces, n, o.wide, cpu, &rows, &nrows, &ents, &nents);
    if (rc == 0 && !(ct = category_totals(traces, n, cats, cpu)))
        rc = LL_ENOMEM;
    if (rc == 0 && cpu) {
        if (o.json)
            rc = trace_print_cpu_json(f, traces, labels, n, rows, nrows, cats, ct);
        else
            trace_print_cpu_text(f, traces, labels, n, rows, nrows, cats, ct, &o);
    } else if (rc == 0) {
        if (o.json)
            rc = print_json(f, traces, labels, n, rows, nrows, cats, ct);
        else
            print_text(f, traces, labels, n, rows, nrows, cats, ct, o.top, o.wide);
    }
    if (rc)
        ll_errf(err, errlen, "out of memory");
    free(ct);
    if (rows)
        rows_free(rows, nrows);
    if (ents)
        for (size_t i = 0; i < nents; i++)
            free(ents[i].key);
    free(ents);
    rpt_categories_free(own);
    return rc;
}

int rpt_trace_files(FILE *f, const char *const *paths, size_t n, const rpt_trace_print_opts *opts, char *err,
                    size_t errlen)
{
    rpt_trace **t = calloc(n ? n : 1, sizeof *t);
    size_t loaded = 0;
    int rc = t ? 0 : LL_ENOMEM;
    if (!t)
        ll_errf(err, errlen, "out of memory");
    for (; rc == 0 && loaded < n; loaded++)
        if ((rc = rpt_trace_load(paths[loaded], &t[loaded], err, errlen)))
            break;
    if (rc == 0)
        rc = rpt_trace_print(f, t, paths, n, opts, err, errlen);
    for (size_t i = 0; i < loaded; i++)
        rpt_trace_free(t[i]);
    free(t);
    return rc;
}
