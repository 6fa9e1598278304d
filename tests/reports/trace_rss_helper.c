/* trace_rss_helper.c: parse one trace and print what test_trace_big checks,
 * in a process of its own so the parent can read its peak RSS (wait4). */
#include <stdio.h>

#include "common.h"
#include "report.h"

int main(int argc, char **argv)
{
    char err[512];
    rpt_trace *t = NULL;
    if (argc != 2) {
        fprintf(stderr, "usage: trace_rss_helper TRACE\n");
        return 2;
    }
    if (rpt_trace_load(argv[1], &t, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    rpt_trace_info info;
    rpt_trace_get_info(t, &info);
    const rpt_trace_stream *s = rpt_trace_stream_at(t, 0);
    printf("%llu %llu %lld %zu %lld %lld\n", (unsigned long long)info.events,
           (unsigned long long)info.gpu_events, (long long)info.gpu_total_ns, rpt_trace_n_kernels(t),
           (long long)(s ? s->busy_ns : -1), (long long)info.span_ns);
    rpt_trace_free(t);
    return 0;
}
