/* test_trace_big.c: a generated Kineto-style trace of more than 200 MB
 * (uncompressed, in /tmp, removed afterwards) parses with bounded memory.
 *
 * Bound stated: the parsing process's peak RSS stays under 64 MiB and grows
 * by less than 16 MiB from a 2 MB trace to the 210 MB one (under
 * AddressSanitizer, whose shadow memory and quarantine add their own: 256 and
 * 64 MiB). Memory follows the distinct kernel names (64 here) and streams
 * (the busy-interval windows, trace_internal.h), not the file size.
 * Parse rate and RSS figures: bench/reports/bench_trace. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"
#include "trace_gen.h"

#if defined(__SANITIZE_ADDRESS__)
#define RSS_BOUND_KB (256 * 1024)
#define GROWTH_BOUND_KB (64 * 1024)
#else
#define RSS_BOUND_KB (64 * 1024)
#define GROWTH_BOUND_KB (16 * 1024)
#endif

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
    long long total = 0, busy = 0, span = 0;
    size_t kernels = 0;
    CHECK(sscanf(out, "%llu %llu %lld %zu %lld %lld", &events, &gpu, &total, &kernels, &busy, &span) == 6,
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
    printf("big trace: peak RSS %ld KiB (2 MB trace: %ld KiB), bound %d KiB\n", rss_big, rss_small, RSS_BOUND_KB);
    unlink(small);
    unlink(big);
    TEST_MAIN_END();
}
