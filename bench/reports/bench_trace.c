/* bench_trace.c: how fast `loadlaw trace` reads a large Kineto trace, and
 * with how much memory. Writes a generated trace (tests/reports/trace_gen.h:
 * CPU ops with bulky args alternating with kernels over three streams, 64
 * distinct kernel names) of --mb MiB to /tmp, parses it --reps times
 * with rpt_trace_load, and prints the parse rate (file bytes / wall time)
 * and the process's peak RSS before and after. The file was just written, so
 * it is read from the page cache: the rate is the parser's, not the disk's.
 * test_trace_big asserts the memory bound; this only prints figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"
#include "report.h"
#include "trace_gen.h"

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_trace [--mb N] [--reps R] [--keep]\n"
               "  --mb N    trace size in MiB (default 210)\n"
               "  --reps R  parses to time (default 3; the best and the median are printed)\n"
               "  --keep    leave the trace in /tmp\n");
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int64_t mb = 210, reps = 3;
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--keep")) {
            keep = 1;
        } else if ((!strcmp(argv[i], "--mb") || !strcmp(argv[i], "--reps")) && i + 1 < argc) {
            int64_t *dst = argv[i][2] == 'm' ? &mb : &reps;
            if (ll_parse_int64(argv[++i], dst) || *dst < 1 || *dst > 100000) {
                fprintf(stderr, "bench_trace: %s wants a positive whole number\n", argv[i - 1]);
                return 2;
            }
        } else {
            usage(stderr);
            return 2;
        }
    }
    char path[256], err[512];
    snprintf(path, sizeof path, "/tmp/loadlaw_bench_trace_%d.json", (int)getpid());
    expect e;
    size_t target = (size_t)mb << 20;
    int64_t w0 = ll_now_ns();
    if (write_trace(path, target, &e)) {
        fprintf(stderr, "bench_trace: cannot write %s\n", path);
        return 1;
    }
    double write_s = (ll_now_ns() - w0) / 1e9;
    FILE *f = fopen(path, "rb");
    long long bytes = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        bytes = ftell(f);
    if (f)
        fclose(f);
    long rss0 = peak_rss_kib();
    double *secs = calloc((size_t)reps, sizeof *secs);
    int rc = 1;
    if (!secs)
        goto out;
    rpt_trace_info info = {0};
    for (int64_t r = 0; r < reps; r++) {
        rpt_trace *t = NULL;
        int64_t t0 = ll_now_ns();
        if (rpt_trace_load(path, &t, err, sizeof err)) {
            fprintf(stderr, "bench_trace: %s\n", err);
            goto out;
        }
        secs[r] = (ll_now_ns() - t0) / 1e9;
        rpt_trace_get_info(t, &info);
        rpt_trace_free(t);
    }
    long rss1 = peak_rss_kib();
    qsort(secs, (size_t)reps, sizeof *secs, cmp_d);
    double best = secs[0], med = secs[reps / 2];
    printf("command: %s --mb %lld --reps %lld\n", argv[0], (long long)mb, (long long)reps);
    printf("trace: %.1f MB, %llu events (%llu kernels, want %llu), written in %.2f s\n", bytes / 1e6,
           (unsigned long long)info.events, (unsigned long long)info.gpu_events,
           (unsigned long long)e.gpu_events, write_s);
    printf("parse: best %.3f s = %.0f MB/s, median %.3f s = %.0f MB/s (%lld parses, page cache warm)\n", best,
           bytes / 1e6 / best, med, bytes / 1e6 / med, (long long)reps);
    printf("peak RSS: %ld KiB before parsing, %ld KiB after (growth %ld KiB)\n", rss0, rss1, rss1 - rss0);
    rc = info.gpu_events == e.gpu_events ? 0 : 1;
    if (rc)
        fprintf(stderr, "bench_trace: parsed %llu kernels, wrote %llu\n", (unsigned long long)info.gpu_events,
                (unsigned long long)e.gpu_events);
out:
    free(secs);
    if (!keep)
        unlink(path);
    return rc;
}
