/* trace_gen.h (tests/reports): a generated Kineto-style trace of a chosen
 * size with known totals, shared by test_trace_big (the memory bound) and
 * bench/reports/bench_trace (parse rate and peak RSS). */
#ifndef LOADLAW_TRACE_GEN_H
#define LOADLAW_TRACE_GEN_H

#include <stdio.h>
#include <string.h>

typedef struct expect {
    unsigned long long events, gpu_events;
    long long gpu_total_ns, busy_dev0_ns;
} expect;

/* Events: one CPU op with bulky args, then one kernel, alternating between
 * device 0 streams 7/8 and device 1; kernel k lasts 3 + (k % 5) µs and starts
 * 10 µs after the previous one on its stream, so nothing overlaps within a
 * stream. Device 0's two streams interleave, so its union is exact too. */
static inline int write_trace(const char *path, size_t target_bytes, expect *e)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    fputs("{\"schemaVersion\":1,\"traceEvents\":[\n", f);
    size_t bytes = 0;
    long long ts[3] = {1000000, 1000003, 1000000}; /* dev0 s7, dev0 s8 (offset 3 µs), dev1 s7 */
    memset(e, 0, sizeof *e);
    long long dev0_busy = 0;
    for (unsigned long long i = 0; bytes < target_bytes; i++) {
        int k = (int)(i % 64), slot = (int)(i % 3);
        int dur = 3 + k % 5;
        char buf[1024];
        int n = snprintf(buf, sizeof buf,
                         "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear_%d\",\"pid\":4242,\"tid\":4242,"
                         "\"ts\":%lld.500,\"dur\":2.250,\"args\":{\"External id\":%llu,\"Input Dims\":[[8,4096],[4096,4096]],"
                         "\"Input type\":[\"c10::BFloat16\",\"c10::BFloat16\"],\"Sequence number\":%llu}},\n"
                         "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void decode_kernel_%02d<cutlass::bfloat16_t, 128>(Params)\","
                         "\"pid\":%d,\"tid\":%d,\"ts\":%lld,\"dur\":%d,\"args\":{\"External id\":%llu,\"device\":%d,"
                         "\"stream\":%d,\"correlation\":%llu,\"grid\":[132,1,1],\"block\":[128,1,1]}}",
                         i ? ",\n" : "", k, ts[slot], i, i, k, slot == 2 ? 1 : 0, slot == 1 ? 8 : 7, ts[slot], dur, i,
                         slot == 2 ? 1 : 0, slot == 1 ? 8 : 7, i);
        fwrite(buf, 1, (size_t)n, f);
        bytes += (size_t)n;
        e->events += 2;
        e->gpu_events++;
        e->gpu_total_ns += dur * 1000LL;
        if (slot == 0)
            dev0_busy += dur * 1000LL;
        ts[slot] += 10;
        (void)dev0_busy;
    }
    fputs("\n],\"traceName\":\"big\"}\n", f);
    e->busy_dev0_ns = -1; /* checked below from the pattern */
    return fclose(f);
}

#endif
