/* cmd_trace.c: `loadlaw trace FILE|DIR [...]` — kernel-time breakdown of
 * PyTorch profiler / Kineto / Chrome traces (.json or .json.gz), one column per
 * file when several are given (one per tensor-parallel rank, or the worker and
 * API-server traces of one vLLM capture); a directory stands for its traces,
 * and a run's directory (records.jsonl) for the traces its profile records
 * name (sweep --profile-dir). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    "usage: loadlaw trace FILE|DIR|RUN [...] [--top N] [--wide] [--json]\n"
    "                     [--category NAME=REGEX ...]",
    "Reads PyTorch profiler / Kineto Chrome traces (.json or .json.gz) as a stream and\n"
    "prints the top GPU kernels by total time, a roll-up by category, and the GPU-busy\n"
    "fraction (union of event intervals / the trace's wall span) per device and stream.\n"
    "GPU events: ph \"X\" with cat kernel, gpu_memcpy or gpu_memset, or with args.stream\n"
    "when cat is missing; dur in microseconds.\n"
    "With no GPU event in any file (a CPU-only server such as vLLM's CPU backend), CPU\n"
    "operators instead: ph \"X\" with cat cpu_op or user_annotation, by self time (an\n"
    "operator's time less that of the operators inside it on its thread), the same\n"
    "categories, per step when the trace marks steps (ProfilerStep#N, or vLLM's\n"
    "execute_context_... annotations), and each thread's operator time. Several files\n"
    "of one capture (worker and API server, one per rank) are read together, one column\n"
    "and a share each; a DIR stands for its *.json and *.json.gz files, in name order,\n"
    "and a RUN (a sweep's -o folder) for the trace files its profile records name\n"
    "(sweep --profile with --profile-dir).\n",
    trace_table,
    NULL,
};

typedef struct trace_args {
    rpt_trace_print_opts o;
    rpt_categories *cats;
    char **files;          /* owned copies: a directory adds its traces */
    size_t nfiles, cap;
} trace_args;

static int add_file(trace_args *a, char *path)
{
    if (!path || ll_vec_reserve_((void **)&a->files, &a->cap, a->nfiles + 1, sizeof *a->files)) {
        free(path);
        return LL_ENOMEM;
    }
    a->files[a->nfiles++] = path;
    return 0;
}

static int is_trace_name(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && ((n > 5 && strcmp(d->d_name + n - 5, ".json") == 0) ||
                                   (n > 8 && strcmp(d->d_name + n - 8, ".json.gz") == 0));
}

typedef struct run_traces {
    trace_args *a;
    size_t named, missing;
    int rc;
} run_traces;

/* A profile record's files (records.h: path and bytes each): those still on
 * disk, in the record's order; the others counted and said. */
static int on_record(const cJSON *o, size_t line_no, void *ctx)
{
    run_traces *rt = ctx;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type"), *f;
    (void)line_no;
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "profile") != 0)
        return 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(o, "files")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(f, "path");
        struct stat st;
        if (!cJSON_IsString(p))
            continue;
        rt->named++;
        if (stat(p->valuestring, &st) != 0) {
            fprintf(stderr, "loadlaw trace: %s: named by the run's profile record, not on disk\n", p->valuestring);
            rt->missing++;
        } else if ((rt->rc = add_file(rt->a, strdup(p->valuestring)))) {
            return rt->rc;
        }
    }
    return 0;
}

/* A run's directory: the traces its profile records name. 0, LL_ENOMEM, or
 * LL_EINVAL (said) when it names none that is on disk. */
static int add_run(trace_args *a, const char *dir, const char *records)
{
    char err[512];
    run_traces rt = {.a = a};
    if (ll_jsonl_foreach(records, on_record, &rt, NULL, err, sizeof err) && !rt.rc) {
        fprintf(stderr, "loadlaw trace: %s\n", err);
        return LL_EINVAL;
    }
    if (rt.rc)
        return rt.rc;
    if (rt.named == rt.missing) {
        fprintf(stderr, "loadlaw trace: %s: the run's records name %s trace file%s: give the traces or their "
                        "folder (sweep --profile-dir names them)\n",
                dir, rt.named ? "no existing" : "no", rt.named ? "" : "s");
        return LL_EINVAL;
    }
    fprintf(stderr, "loadlaw trace: %s: %zu trace file%s named by the run's profile records\n", dir,
            rt.named - rt.missing, rt.named - rt.missing == 1 ? "" : "s");
    return 0;
}

/* A directory's *.json and *.json.gz files in name order (vLLM writes one
 * capture's traces into one directory), or a run's directory (records.jsonl
 * in it) for the traces its profile records name; anything else is taken as
 * a file. 0, LL_ENOMEM, or LL_EINVAL for a directory with no trace in it. */
static int add_arg(trace_args *a, const char *v)
{
    struct stat st;
    if (stat(v, &st) != 0 || !S_ISDIR(st.st_mode))
        return add_file(a, strdup(v));
    char records[4096];
    if (snprintf(records, sizeof records, "%s/records.jsonl", v) < (int)sizeof records && stat(records, &st) == 0)
        return add_run(a, v, records);
    struct dirent **ents = NULL;
    int n = scandir(v, &ents, is_trace_name, alphasort);
    if (n < 0)
        return add_file(a, strdup(v)); /* the reader says why it cannot be read */
    int rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(v) + strlen(ents[i]->d_name) + 2;
        char *p = rc ? NULL : malloc(len);
        if (!rc && p)
            snprintf(p, len, "%s/%s", v, ents[i]->d_name);
        if (!rc)
            rc = add_file(a, p);
        free(ents[i]);
    }
    free(ents);
    return n == 0 ? LL_EINVAL : rc;
}

static int on_opt(const cli_opt *opt, const char *v, void *ctx)
{
    trace_args *a = ctx;
    char err[512];
    if (!opt) {
        struct stat st;
        char records[4096];
        int is_run = snprintf(records, sizeof records, "%s/records.jsonl", v) < (int)sizeof records &&
                     stat(records, &st) == 0;
        int rc = add_arg(a, v);
        if (rc == LL_EINVAL && is_run)
            return CLI_USAGE; /* add_run said why */
        if (rc == LL_EINVAL)
            return cli_usage_error(&trace_cmd, "%s: no *.json or *.json.gz trace in this directory", v);
        if (rc) {
            fprintf(stderr, "loadlaw trace: out of memory\n");
            return CLI_FAIL;
        }
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
    if (rpt_categories_new(&a.cats, err, sizeof err)) {
        fprintf(stderr, "loadlaw trace: %s\n", err);
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
    if (rpt_trace_files(stdout, (const char *const *)a.files, a.nfiles, &a.o, err, sizeof err)) {
        fprintf(stderr, "loadlaw trace: %s\n", err);
        rc = CLI_FAIL;
    }
done:
    for (size_t i = 0; i < a.nfiles; i++)
        free(a.files[i]);
    free(a.files);
    rpt_categories_free(a.cats);
    return rc;
}
