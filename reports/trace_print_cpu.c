/* trace_print_cpu.c: `loadlaw trace` on traces with no GPU event (vLLM's CPU
 * backend, torch.profiler on the CPU): CPU operators by self time, the same
 * category roll-up as kernels (per step when the trace marks steps), and each
 * thread's operator time.
 *
 * Self time (trace_self.c) counts each nanosecond of a thread once, in the
 * innermost operator running then, so the shares add up to 100% and a
 * wrapper (aten::linear) does not hide the work it calls (onednn_mm). With
 * several files of one capture (vLLM's worker and API server, one per rank)
 * the tables have one column per file and each file's share is said. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "report.h"
#include "trace_internal.h"

/* Threads listed per file; the rest are summed on one line. */
#define THREAD_ROWS 8

int trace_cpu_only(rpt_trace *const *tr, size_t nt)
{
    uint64_t gpu = 0, cpu = 0;
    for (size_t f = 0; f < nt; f++) {
        rpt_trace_info info;
        rpt_trace_get_info(tr[f], &info);
        gpu += info.gpu_events;
        cpu += info.cpu_events;
    }
    return gpu == 0 && cpu > 0;
}

/* The operator self time of all files together. */
static int64_t cpu_total_ns(rpt_trace *const *tr, size_t nt)
{
    int64_t grand = 0;
    for (size_t f = 0; f < nt; f++) {
        rpt_trace_info info;
        rpt_trace_get_info(tr[f], &info);
        grand += info.cpu_self_ns;
    }
    return grand;
}

/* Each file's counts and warnings; the self time of all files together. */
static int64_t print_cpu_files(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                               uint64_t *steps)
{
    char lb[32];
    int64_t grand = cpu_total_ns(tr, nt);
    *steps = 0;
    for (size_t f = 0; f < nt; f++) {
        rpt_trace_info info;
        rpt_trace_get_info(tr[f], &info);
        *steps += info.steps;
        if (nt > 1)
            fprintf(out, "[%zu] ", f + 1);
        fprintf(out, "%s: %llu events, 0 on the GPU, span %.2f ms, CPU operator self time %.2f ms on %zu thread%s",
                trace_label_of(labels, f, lb, sizeof lb), (unsigned long long)info.events, info.span_ns / 1e6,
                info.cpu_self_ns / 1e6, rpt_trace_n_threads(tr[f]), rpt_trace_n_threads(tr[f]) == 1 ? "" : "s");
        if (nt > 1)
            fprintf(out, ", %.1f%% of the files' operator time", grand > 0 ? 100.0 * info.cpu_self_ns / grand : 0.0);
        fputc('\n', out);
        if (info.steps)
            fprintf(out, "  %llu steps (step markers): mean %.3f ms, min %.3f, max %.3f\n",
                    (unsigned long long)info.steps, info.step_total_ns / 1e6 / (double)info.steps,
                    info.step_min_ns / 1e6, info.step_max_ns / 1e6);
        if (info.cpu_late)
            fprintf(out, "  warning: %llu CPU events came more than %d events out of start order or nested "
                         "deeper than %d: each counted whole as its own self time\n",
                    (unsigned long long)info.cpu_late, RPT_CPU_REORDER, RPT_CPU_DEPTH);
    }
    return grand;
}

/* Each file's threads by operator self time, the busiest first. */
static void print_threads(FILE *out, rpt_trace *const *tr, size_t nt)
{
    fprintf(out, "\nCPU threads (operator self time / the file's wall span)\n");
    for (size_t f = 0; f < nt; f++) {
        rpt_trace_info info;
        rpt_trace_get_info(tr[f], &info);
        char col[24] = "";
        if (nt > 1)
            snprintf(col, sizeof col, "[%zu] ", f + 1);
        int64_t rest_ns = 0;
        size_t n = rpt_trace_n_threads(tr[f]);
        for (size_t i = 0; i < n; i++) {
            const rpt_trace_stream *s = rpt_trace_thread_at(tr[f], i);
            if (i >= THREAD_ROWS) {
                rest_ns += s->busy_ns;
                continue;
            }
            char where[160];
            snprintf(where, sizeof where, "pid %s tid %s", s->pid, s->tid);
            fprintf(out, "  %s%-30s %5.1f%%  %10.2f ms self  %9llu ops\n", col, where,
                    info.span_ns > 0 ? 100.0 * s->busy_ns / info.span_ns : 0.0, s->busy_ns / 1e6,
                    (unsigned long long)s->events);
        }
        if (n > THREAD_ROWS)
            fprintf(out, "  %s%-30s %5s   %10.2f ms self\n", col, "(more threads)", "", rest_ns / 1e6);
    }
}

void trace_print_cpu_text(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                          const krow *rows, size_t nrows, const rpt_categories *cats, const int64_t *ct,
                          const rpt_trace_print_opts *o)
{
    uint64_t steps;
    int64_t grand = print_cpu_files(out, tr, labels, nt, &steps);
    fprintf(out, "\nCPU operators (no GPU events): self time, an operator's time less that of the operators\n"
                 "and annotations inside it (cat cpu_op and user_annotation)\n");
    if (grand <= 0) {
        fprintf(out, "\nno CPU operator time\n");
        return;
    }
    trace_print_rows(out, nt, rows, nrows, grand, o->top, o->wide, 1);
    trace_print_categories(out, nt, cats, ct, grand, steps);
    print_threads(out, tr, nt);
}

/* One element of "files" for a CPU trace. */
static int cpu_file_json(cJSON *files, rpt_trace *t, const char *label, int64_t grand)
{
    rpt_trace_info info;
    rpt_trace_get_info(t, &info);
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(files, o))
        return cJSON_Delete(o), -1;
    if (!cJSON_AddStringToObject(o, "file", label) || !cJSON_AddNumberToObject(o, "events", (double)info.events) ||
        !cJSON_AddNumberToObject(o, "span_us", info.span_ns / 1e3) ||
        !cJSON_AddNumberToObject(o, "cpu_events", (double)info.cpu_events) ||
        !cJSON_AddNumberToObject(o, "cpu_self_us", info.cpu_self_ns / 1e3))
        return -1;
    if (!cJSON_AddNumberToObject(o, "share", grand > 0 ? (double)info.cpu_self_ns / grand : 0) ||
        !cJSON_AddNumberToObject(o, "late_events", (double)info.cpu_late) ||
        !cJSON_AddNumberToObject(o, "steps", (double)info.steps) ||
        !cJSON_AddNumberToObject(o, "step_mean_us", info.steps ? info.step_total_ns / 1e3 / info.steps : 0))
        return -1;
    cJSON *th = cJSON_AddArrayToObject(o, "threads");
    if (!th)
        return -1;
    for (size_t i = 0; i < rpt_trace_n_threads(t); i++) {
        const rpt_trace_stream *s = rpt_trace_thread_at(t, i);
        cJSON *so = cJSON_CreateObject();
        if (!so || !cJSON_AddItemToArray(th, so))
            return cJSON_Delete(so), -1;
        if (!cJSON_AddStringToObject(so, "pid", s->pid) || !cJSON_AddStringToObject(so, "tid", s->tid) ||
            !cJSON_AddNumberToObject(so, "self_us", s->busy_ns / 1e3) ||
            !cJSON_AddNumberToObject(so, "events", (double)s->events))
            return -1;
    }
    return 0;
}

int trace_print_cpu_json(FILE *out, rpt_trace *const *tr, const char *const *labels, size_t nt,
                         const krow *rows, size_t nrows, const rpt_categories *cats, const int64_t *ct)
{
    cJSON *root = cJSON_CreateObject();
    if (!root || !cJSON_AddStringToObject(root, "breakdown", "cpu"))
        goto fail;
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    cJSON *ops = cJSON_AddArrayToObject(root, "operators");
    cJSON *catj = cJSON_AddArrayToObject(root, "categories");
    if (!files || !ops || !catj)
        goto fail;
    int64_t grand = cpu_total_ns(tr, nt);
    char lb[32];
    for (size_t f = 0; f < nt; f++)
        if (cpu_file_json(files, tr[f], trace_label_of(labels, f, lb, sizeof lb), grand))
            goto fail;
    return trace_rows_json_out(out, root, ops, catj, rows, nrows, nt, cats, ct);
fail:
    cJSON_Delete(root);
    return LL_ENOMEM;
}
