/* cmd_trace.c: `loadlaw trace FILE [FILE...]` — kernel-time breakdown of
 * PyTorch profiler / Kineto / Chrome traces (.json or .json.gz), one column per
 * file when several are given (one per tensor-parallel rank). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "report.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: loadlaw trace FILE [FILE...] [--top N] [--wide] [--json]\n"
            "                     [--category NAME=REGEX ...]\n\n"
            "Reads PyTorch profiler / Kineto Chrome traces (.json or .json.gz) as a stream and\n"
            "prints the top GPU kernels by total time, a roll-up by category, and the GPU-busy\n"
            "fraction (union of event intervals / the trace's wall span) per device and stream.\n"
            "GPU events: ph \"X\" with cat kernel, gpu_memcpy or gpu_memset, or with args.stream\n"
            "when cat is missing; dur in microseconds.\n\n"
            "  --top N               kernel rows (default 15)\n"
            "  --wide                full kernel names, one row per distinct name\n"
            "  --json                machine-readable output\n"
            "  --category NAME=REGEX put kernels matching REGEX (POSIX extended, case-\n"
            "                        insensitive) in NAME; replaces a built-in category of\n"
            "                        that name, otherwise is tried before the built-ins.\n"
            "                        Built-in, in order: communication, attention, MoE, GEMM,\n"
            "                        elementwise & copies; the rest is other.\n");
}

int cmd_trace(int argc, char **argv)
{
    int rc = CLI_FAIL;
    char err[512];
    rpt_categories *cats = NULL;
    rpt_trace **traces = NULL;
    const char **files = NULL;
    size_t nfiles = 0, nloaded = 0;
    rpt_trace_print_opts o = {0};

    if (rpt_categories_new(&cats, err, sizeof err)) {
        fprintf(stderr, "loadlaw trace: %s\n", err);
        return CLI_FAIL;
    }
    files = calloc((size_t)argc, sizeof *files);
    traces = calloc((size_t)argc, sizeof *traces);
    if (!files || !traces) {
        fprintf(stderr, "loadlaw trace: out of memory\n");
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            rc = CLI_OK;
            goto done;
        } else if (strcmp(a, "--wide") == 0) {
            o.wide = 1;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (strcmp(a, "--top") == 0 || strcmp(a, "--category") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "loadlaw trace: %s needs a value\n", a);
                rc = CLI_USAGE;
                goto done;
            }
            const char *v = argv[++i];
            int64_t top;
            if (a[2] == 't') {
                if (ll_parse_int64(v, &top) || top < 1 || top > 1000000) {
                    fprintf(stderr, "loadlaw trace: --top wants a count >= 1, got '%s'\n", v);
                    rc = CLI_USAGE;
                    goto done;
                }
                o.top = (int)top;
            } else if (rpt_categories_set(cats, v, err, sizeof err)) {
                fprintf(stderr, "loadlaw trace: %s\n", err);
                rc = CLI_USAGE;
                goto done;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "loadlaw trace: unknown option '%s' (try --help)\n", a);
            rc = CLI_USAGE;
            goto done;
        } else {
            files[nfiles++] = a;
        }
    }
    if (nfiles == 0) {
        fprintf(stderr, "loadlaw trace: no trace file given (try --help)\n");
        rc = CLI_USAGE;
        goto done;
    }
    for (size_t i = 0; i < nfiles; i++, nloaded++) {
        if (rpt_trace_load(files[i], &traces[i], err, sizeof err)) {
            fprintf(stderr, "loadlaw trace: %s\n", err);
            goto done;
        }
    }
    o.cats = cats;
    if (rpt_trace_print(stdout, traces, files, nfiles, &o, err, sizeof err)) {
        fprintf(stderr, "loadlaw trace: %s\n", err);
        goto done;
    }
    rc = CLI_OK;
done:
    for (size_t i = 0; i < nloaded; i++)
        rpt_trace_free(traces[i]);
    free(traces);
    free(files);
    rpt_categories_free(cats);
    return rc;
}
