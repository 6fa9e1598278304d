/* fuzz_trace.c: the profiler-trace reader behind `loadlaw trace`
 * (reports/trace_parse.c with trace_busy.c's interval unions).
 *
 * Input: a Chrome/Kineto trace (plain; gzip is zlib's business). Properties of
 * a trace that loads: kernel counts add up to the GPU events and kernel times
 * to the GPU total; kernels are sorted by time, largest first; a stream's busy
 * time is >= 0 and, when no event arrived too late for an exact union, a
 * device's "*" row is at least each of its streams and at most their sum; the
 * JSON breakdown (`loadlaw trace --json`) parses. CPU operators: self times
 * are >= 0, sorted, and add up (per name and per thread) to the counted CPU
 * events and their self total, which, with no late event, no thread exceeds
 * the span with.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "report.h"

static void check_streams(const rpt_trace *t, const rpt_trace_info *info)
{
    size_t n = rpt_trace_n_streams(t);
    for (size_t i = 0; i < n; i++) {
        const rpt_trace_stream *st = rpt_trace_stream_at(t, i);
        FUZZ_CHECK(st && st->pid && st->tid && st->busy_ns >= 0);
        if (strcmp(st->tid, "*") != 0 || info->late_events)
            continue;
        int64_t sum_ns = 0;
        size_t parts = 0;
        for (size_t j = 0; j < n; j++) {
            const rpt_trace_stream *o = rpt_trace_stream_at(t, j);
            if (j == i || strcmp(o->pid, st->pid) != 0 || strcmp(o->tid, "*") == 0)
                continue;
            FUZZ_CHECK(st->busy_ns >= o->busy_ns);
            sum_ns += o->busy_ns;
            parts++;
        }
        if (parts)
            FUZZ_CHECK(st->busy_ns <= sum_ns);
    }
}

static void check_cpu(const rpt_trace *t, const rpt_trace_info *info)
{
    FUZZ_CHECK(info->cpu_events <= info->events && info->cpu_self_ns >= 0);
    uint64_t count = 0;
    int64_t total_ns = 0;
    for (size_t i = 0; i < rpt_trace_n_cpu_ops(t); i++) {
        const rpt_trace_kernel *k = rpt_trace_cpu_op_at(t, i);
        FUZZ_CHECK(k && k->name && k->total_ns >= 0 && k->count >= 1);
        if (i > 0)
            FUZZ_CHECK(rpt_trace_cpu_op_at(t, i - 1)->total_ns >= k->total_ns);
        count += k->count;
        total_ns += k->total_ns;
    }
    FUZZ_CHECK(count == info->cpu_events && total_ns == info->cpu_self_ns);
    count = 0;
    total_ns = 0;
    for (size_t i = 0; i < rpt_trace_n_threads(t); i++) {
        const rpt_trace_stream *th = rpt_trace_thread_at(t, i);
        FUZZ_CHECK(th && th->pid && th->tid && th->busy_ns >= 0);
        if (!info->cpu_late)
            FUZZ_CHECK(th->busy_ns <= info->span_ns);
        count += th->events;
        total_ns += th->busy_ns;
    }
    FUZZ_CHECK(count == info->cpu_events && total_ns == info->cpu_self_ns);
}

static void check_json_print(rpt_trace *t)
{
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (!f)
        return;
    rpt_trace_print_opts opts = {.json = 1};
    char err[256];
    int rc = rpt_trace_print(f, &t, NULL, 1, &opts, err, sizeof err);
    fclose(f);
    if (rc == 0) {
        cJSON *j = cJSON_ParseWithLength(out, out_len);
        if (!j)
            fprintf(stderr, "not JSON: %.2000s\n", out);
        FUZZ_CHECK(j != NULL);
        cJSON_Delete(j);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[256];
    rpt_trace *t = NULL;
    int fd = fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    if (rpt_trace_load(path, &t, err, sizeof err) == 0) {
        rpt_trace_info info;
        rpt_trace_get_info(t, &info);
        FUZZ_CHECK(info.gpu_events <= info.events);
        FUZZ_CHECK(info.gpu_total_ns >= 0 && info.span_ns >= 0);
        uint64_t count = 0;
        int64_t total_ns = 0;
        size_t n = rpt_trace_n_kernels(t);
        for (size_t i = 0; i < n; i++) {
            const rpt_trace_kernel *k = rpt_trace_kernel_at(t, i);
            FUZZ_CHECK(k && k->name && k->total_ns >= 0 && k->count >= 1);
            if (i > 0)
                FUZZ_CHECK(rpt_trace_kernel_at(t, i - 1)->total_ns >= k->total_ns);
            count += k->count;
            total_ns += k->total_ns;
        }
        FUZZ_CHECK(count == info.gpu_events);
        FUZZ_CHECK(total_ns == info.gpu_total_ns);
        check_streams(t, &info);
        check_cpu(t, &info);
        check_json_print(t);
    }
    rpt_trace_free(t);
    close(fd);
    return 0;
}
