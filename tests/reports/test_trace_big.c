/* test_trace_big.c: a generated Kineto-style trace of more than 200 MB
 * (uncompressed, in /tmp, removed afterwards) parses with bounded memory.
 *
 * Bound stated: the parsing process's peak RSS stays under 64 MiB and grows
 * by less than 16 MiB from a 2 MB trace to the 210 MB one (under
 * AddressSanitizer, whose shadow memory and quarantine add their own: 256 and
 * 64 MiB). Memory follows the distinct kernel names (64 here) and streams
 * (the busy-interval windows, trace_internal.h), not the file size.
 * The parse rate is printed, not asserted. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define RSS_BOUND_KB (256 * 1024)
#define GROWTH_BOUND_KB (64 * 1024)
#else
#define RSS_BOUND_KB (64 * 1024)
#define GROWTH_BOUND_KB (16 * 1024)
#endif

typedef struct expect {
    unsigned long long events, gpu_events;
    long long gpu_total_ns, busy_dev0_ns;
} expect;

/* Events: one CPU op with bulky args, then one kernel, alternating between
 * device 0 streams 7/8 and device 1; kernel k lasts 3 + (k % 5) µs and starts
 * 10 µs after the previous one on its stream, so nothing overlaps within a
 * stream. Device 0's two streams interleave, so its union is exact too. */
static int write_trace(const char *path, size_t target_bytes, expect *e)
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

/* Run the helper on path; returns its peak RSS in KiB (-1 on failure). */
static long run_helper(const char *helper, const char *path, char *out, size_t outlen)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl(helper, helper, path, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < outlen && (r = read(fd[0], out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd[0]);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_trace_big HELPER\n");
        return 2;
    }
    char small[256], big[256], out[512];
    snprintf(small, sizeof small, "/tmp/loadlaw_trace_small_%d.json", (int)getpid());
    snprintf(big, sizeof big, "/tmp/loadlaw_trace_big_%d.json", (int)getpid());
    expect es, eb;
    CHECK(write_trace(small, 2u << 20, &es) == 0, "write small");
    CHECK(write_trace(big, 210u << 20, &eb) == 0, "write big");

    long rss_small = run_helper(argv[1], small, out, sizeof out);
    CHECK(rss_small > 0, "helper on small trace failed");
    long rss_big = run_helper(argv[1], big, out, sizeof out);
    CHECK(rss_big > 0, "helper on big trace failed");
    unsigned long long events = 0, gpu = 0;
    long long total = 0, busy = 0, span = 0, parse_ns = 0;
    size_t kernels = 0;
    CHECK(sscanf(out, "%llu %llu %lld %zu %lld %lld %lld", &events, &gpu, &total, &kernels, &busy, &span, &parse_ns) == 7,
          "helper output: %s", out);
    CHECK(events == eb.events, "events %llu want %llu", events, eb.events);
    CHECK(gpu == eb.gpu_events, "gpu events %llu want %llu", gpu, eb.gpu_events);
    CHECK(total == eb.gpu_total_ns, "total %lld want %lld", total, eb.gpu_total_ns);
    CHECK(kernels == 64, "distinct kernels %zu", kernels);
    /* device 0 all streams: stream 8 runs 3 µs behind stream 7 with kernels of
     * 3-7 µs every 10 µs, so the union is below the sum and above either. */
    CHECK(busy > 0 && busy < total, "device 0 union %lld", busy);
    CHECK(rss_big < RSS_BOUND_KB, "peak RSS %ld KiB over the %d KiB bound", rss_big, RSS_BOUND_KB);
    CHECK(rss_big - rss_small < GROWTH_BOUND_KB, "RSS grew %ld KiB from 2 MB to 210 MB", rss_big - rss_small);
    printf("big trace: %.0f MB, %llu events, peak RSS %ld KiB (2 MB trace: %ld KiB), parsed in %.2f s = %.0f MB/s\n",
           (210u << 20) / 1e6, events, rss_big, rss_small, parse_ns / 1e9, (210u << 20) / 1e6 / (parse_ns / 1e9));
    unlink(small);
    unlink(big);
    TEST_MAIN_END();
}
