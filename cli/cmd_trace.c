/* cmd_trace.c: `loadlaw trace FILE [FILE...]` — kernel-time breakdown of
 * PyTorch profiler / Kineto / Chrome traces (.json or .json.gz), one column per
 * file when several are given (one per tensor-parallel rank). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "opts.h"
#include "report.h"

enum { K_TOP = 256, K_WIDE, K_JSON, K_CATEGORY };

static const cli_opt trace_table[] = {
    {"top", K_TOP, "N", "kernel rows (default 15)"},
    {"wide", K_WIDE, NULL, "full kernel names, one row per distinct name"},
    {"json", K_JSON, NULL, "machine-readable output"},
    {"category", K_CATEGORY, "NAME=REGEX", "put kernels matching REGEX (POSIX extended, case- "
                "insensitive) in NAME; replaces a built-in category of "
                "that name, otherwise is tried before the built-ins. "
                "Built-in, in order: communication, attention, MoE, GEMM, "
                "elementwise & copies; the rest is other."},
    {0},
};

static const cli_cmd trace_cmd = {
    "trace",
    "usage: loadlaw trace FILE [FILE...] [--top N] [--wide] [--json]\n"
    "                     [--category NAME=REGEX ...]",
    "Reads PyTorch profiler / Kineto Chrome traces (.json or .json.gz) as a stream and\n"
    "prints the top GPU kernels by total time, a roll-up by category, and the GPU-busy\n"
    "fraction (union of event intervals / the trace's wall span) per device and stream.\n"
    "GPU events: ph \"X\" with cat kernel, gpu_memcpy or gpu_memset, or with args.stream\n"
    "when cat is missing; dur in microseconds.\n",
    trace_table,
    NULL,
};

typedef struct trace_args {
    rpt_trace_print_opts o;
    rpt_categories *cats;
    const char **files;
    size_t nfiles;
} trace_args;

static int on_opt(const cli_opt *opt, const char *v, void *ctx)
{
    trace_args *a = ctx;
    char err[512];
    if (!opt) {
        a->files[a->nfiles++] = v;
        return 0;
    }
    switch (opt->key) {
    case K_WIDE: a->o.wide = 1; break;
    case K_JSON: a->o.json = 1; break;
    case K_TOP: {
        long top;
        int rc = cli_long(&trace_cmd, opt->name, v, 1, 1000000, &top);
        a->o.top = (int)top;
        return rc;
    }
    case K_CATEGORY:
        if (rpt_categories_set(a->cats, v, err, sizeof err))
            return cli_usage_error(&trace_cmd, "%s", err);
        break;
    }
    return 0;
}

int cmd_trace(int argc, char **argv)
{
    int rc = CLI_FAIL;
    char err[512];
    trace_args a = {0};
    if (rpt_categories_new(&a.cats, err, sizeof err) || !(a.files = calloc((size_t)argc, sizeof *a.files))) {
        fprintf(stderr, "loadlaw trace: %s\n", a.cats ? "out of memory" : err);
        goto done;
    }
    if ((rc = cli_parse(&trace_cmd, argc, argv, on_opt, &a)) != CLI_GO_ON)
        goto done;
    if (a.nfiles == 0) {
        rc = cli_usage_error(&trace_cmd, "no trace file given (try loadlaw trace --help)");
        goto done;
    }
    a.o.cats = a.cats;
    rc = CLI_OK;
    if (rpt_trace_files(stdout, a.files, a.nfiles, &a.o, err, sizeof err)) {
        fprintf(stderr, "loadlaw trace: %s\n", err);
        rc = CLI_FAIL;
    }
done:
    free(a.files);
    rpt_categories_free(a.cats);
    return rc;
}
