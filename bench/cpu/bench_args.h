/* bench_args.h: the argument loop the cpu benches share: "--name value"
 * pairs handed to the bench's own option parser, --help (or -h) printing its
 * usage. Header-only: each bench is one file. */
#ifndef LOADLAW_BENCH_ARGS_H
#define LOADLAW_BENCH_ARGS_H

#include <stdio.h>
#include <string.h>

/* One option: 0, or nonzero after saying what is wrong. */
typedef int bench_opt_fn(void *opts, const char *name, const char *value);

/* -1 to go on, else the exit code: 0 after --help (usage on stdout), 2
 * after a name without its value (usage on stderr) or a bad option. */
static inline int bench_parse_pairs(int argc, char **argv, void (*usage)(FILE *), bench_opt_fn *opt, void *opts)
{
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        if (opt(opts, a, v) != 0)
            return 2;
    }
    return -1;
}

#endif
