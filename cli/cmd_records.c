/* cmd_records.c: `loadlaw records compact|expand IN [OUT]` — a records file's
 * request chunk lists rewritten packed (as sweep writes them now) or as the
 * older [[t_ns,tokens,"k"],...] list (for jq and scripts that read that
 * list). The records module does the work (ll_rec_convert). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common.h"
#include "opts.h"

static const cli_opt records_table[] = {
    {0},
};

static const cli_cmd records_cmd = {
    "records",
    "usage: loadlaw records compact IN OUT\n"
    "       loadlaw records expand IN [OUT]",
    "Rewrites a records file's request chunk lists. compact: into the packed form\n"
    "(\"chunks_packed\", what sweep writes: ~1.5-5 bytes a token event instead of ~19),\n"
    "for runs recorded before it. expand: into the list form (\"chunks\":\n"
    "[[t_ns,tokens,\"t\"|\"a\"],...]) that jq and older scripts read; OUT defaults to\n"
    "stdout (`loadlaw records expand RUN | jq ...`). IN and OUT are records files or\n"
    "existing run directories (their records.jsonl). Every other line is copied\n"
    "byte for byte; fit, report, plan and compare read both forms alike.\n"
    "docs/records.md says how the packed form is laid out.\n",
    records_table,
    NULL,
};

typedef struct records_args {
    const char *verb, *in, *out;
} records_args;

static int on_opt(const cli_opt *o, const char *v, void *ctx)
{
    records_args *a = ctx;
    (void)o; /* no options but --help */
    const char **slot = !a->verb ? &a->verb : !a->in ? &a->in : !a->out ? &a->out : NULL;
    if (!slot)
        return cli_usage_error(&records_cmd, "too many arguments ('%s')", v);
    *slot = v;
    return 0;
}

/* A run directory stands for its records.jsonl. */
static const char *records_path(const char *p, char *buf, size_t n)
{
    struct stat st;
    if (strcmp(p, "-") == 0 || stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
        return p;
    snprintf(buf, n, "%s/records.jsonl", p);
    return buf;
}

int cmd_records(int argc, char **argv)
{
    records_args a = {0};
    int pr = cli_parse(&records_cmd, argc, argv, on_opt, &a);
    if (pr != CLI_GO_ON)
        return pr;
    int to_packed = a.verb && strcmp(a.verb, "compact") == 0;
    if (!a.verb || (!to_packed && strcmp(a.verb, "expand") != 0))
        return cli_usage_error(&records_cmd, "compact or expand, please (try loadlaw records --help)");
    if (!a.in || (to_packed && !a.out))
        return cli_usage_error(&records_cmd, "%s needs IN%s (try loadlaw records --help)", a.verb,
                               to_packed ? " and OUT" : "");
    char inb[4200], outb[4200], err[1024];
    ll_rec_convert_stats st;
    const char *in = records_path(a.in, inb, sizeof inb);
    const char *out = records_path(a.out ? a.out : "-", outb, sizeof outb);
    int rc = ll_rec_convert(in, out, to_packed, &st, err, sizeof err);
    if (rc) {
        fprintf(stderr, "loadlaw records: %s\n", err);
        return CLI_FAIL;
    }
    fprintf(stderr, "loadlaw records: %zu lines, %zu requests (%zu chunks) %s", st.n_lines, st.n_converted,
            st.n_chunks, to_packed ? "packed" : "expanded");
    if (st.n_kept_bad)
        fprintf(stderr, ", %zu with unreadable chunks copied as they were", st.n_kept_bad);
    if (st.n_truncated)
        fprintf(stderr, ", a truncated last line left out");
    fprintf(stderr, "\n");
    return CLI_OK;
}
