/* floor_common.h: what the two client floors (floor_reader.c, floor_curl.c) share, so they
 * send the same request, split the same way and print the same figures. Plain libc: the
 * floors must not share loadlaw's code, or its costs. Header-only (static inline functions): each
 * floor is one file and one executable. */
#ifndef LOADLAW_FLOOR_COMMON_H
#define LOADLAW_FLOOR_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Command line: --port P [--host H] [--conns N] [--tokens T] [--model M] [--prompt-words W]. */
typedef struct floor_opts {
    const char *host, *model;
    int port, conns, tokens, words;
} floor_opts;

static inline double floor_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The process's CPU (user + system), seconds. */
static inline double floor_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

/* 0, or 2 after a message naming the program (an exit status). Also raises the soft
 * open-file limit to the hard one: C streams need C descriptors. */
static inline int floor_parse(const char *prog, int argc, char **argv, floor_opts *o)
{
    *o = (floor_opts){.host = "127.0.0.1", .model = "loadlaw-synthetic", .conns = 256, .tokens = 256, .words = 190};
    /* Options as a table: each takes one value, numbers checked whole with strtol. */
    struct {
        const char *name;
        int *num;
        const char **str;
    } opt[] = {{"--port", &o->port, NULL},   {"--conns", &o->conns, NULL}, {"--tokens", &o->tokens, NULL},
               {"--prompt-words", &o->words, NULL}, {"--host", NULL, &o->host}, {"--model", NULL, &o->model}};
    for (int i = 1; i < argc; i += 2) {
        size_t k = 0;
        while (k < sizeof opt / sizeof opt[0] && strcmp(argv[i], opt[k].name) != 0)
            k++;
        if (k == sizeof opt / sizeof opt[0] || i + 1 >= argc) {
            fprintf(stderr, "%s: unknown option or missing value: %s\n", prog, argv[i]);
            return 2;
        }
        if (opt[k].str) {
            *opt[k].str = argv[i + 1];
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(argv[i + 1], &end, 10);
        if (errno || *end || end == argv[i + 1] || v < 0 || v > 1000000000L) {
            fprintf(stderr, "%s: %s wants a whole number, not '%s'\n", prog, argv[i], argv[i + 1]);
            return 2;
        }
        *opt[k].num = (int)v;
    }
    if (o->port <= 0 || o->conns <= 0 || o->tokens <= 0) {
        fprintf(stderr, "usage: %s --port P [--host H] [--conns N] [--tokens T] [--model M]\n", prog);
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return 0;
}

/* The body loadgen's xfer_body.c builds for the chat endpoint with remote defaults (continuous
 * usage on): malloc'd, NULL out of memory. */
static inline char *floor_body(const floor_opts *o)
{
    size_t cap = (size_t)o->words * 8 + 1024;
    char *body = malloc(cap);
    if (!body)
        return NULL;
    int n = snprintf(body, cap, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"", o->model);
    for (int i = 0; i < o->words; i++)
        n += snprintf(body + n, cap - (size_t)n, "%sword%d", i ? " " : "", i % 1000);
    snprintf(body + n, cap - (size_t)n,
             "\"}],\"max_tokens\":%d,\"stream_options\":{\"include_usage\":true,"
             "\"continuous_usage_stats\":true},\"stream\":true}",
             o->tokens);
    return body;
}

/* The split: a frame ends at "\n\n"; memchr finds each '\n' at libc speed. *last_nl (was the
 * previous byte '\n') carries a frame cut across two reads, so it is counted once. */
static inline long floor_split(const char *buf, size_t r, int *last_nl)
{
    long frames = 0;
    const char *p = buf, *end = buf + r;
    if (r == 0)
        return 0;
    if (*last_nl && *p == '\n') {
        frames++;
        p++;
    }
    *last_nl = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        if (nl + 1 == end) {
            *last_nl = 1;
            break;
        }
        if (nl[1] == '\n') {
            frames++;
            p = nl + 2;
        } else {
            p = nl + 1;
        }
    }
    return frames;
}

/* The one line of key=value figures both floors print. */
static inline void floor_report(const floor_opts *o, long frames, unsigned long long bytes, long reads, double wall,
                         double cpu, long short_streams, long errors)
{
    long tok_events = (long)o->conns * o->tokens;
    printf("conns=%d tokens=%d frames=%ld frames_per_stream=%.2f token_events=%ld bytes=%llu "
           "bytes_per_frame=%.1f reads=%ld frames_per_read=%.2f wall_s=%.4f cpu_s=%.4f "
           "cpu_us_per_token_event=%.4f token_events_per_s=%.0f short_streams=%ld errors=%ld\n",
           o->conns, o->tokens, frames, (double)frames / o->conns, tok_events, bytes, (double)bytes / (double)frames,
           reads, (double)frames / (double)reads, wall, cpu, cpu / (double)tok_events * 1e6,
           (double)tok_events / wall, short_streams, errors);
}

#endif
