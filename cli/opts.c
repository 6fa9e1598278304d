/* opts.c: the option tables of opts.h, turned into getopt_long's arrays and
 * into --help text.
 *
 * getopt_long runs in "return in order" mode ('-' first in the option
 * string): positional arguments come back where they stand, so a command can
 * say which of two run directories was extra. ':' next makes a missing value
 * its own case, and opterr = 0 leaves every message to us, worded the same
 * for every command. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "cli.h"
#include "common.h"
#include "opts.h"

/* Where the help text starts: "  -c, --concurrency L  text". */
#define HELP_COL 23
/* and how wide it may run (lines end by column 80) */
#define HELP_WIDTH (80 - HELP_COL)

enum { KEY_HELP = 'h' };

static size_t count(const cli_opt *o)
{
    size_t n = 0;
    while (o[n].name || o[n].help)
        n++;
    return n;
}

static const cli_opt *find_key(const cli_opt *o, int key)
{
    for (; o->name || o->help; o++)
        if (o->name && o->key == key)
            return o;
    return NULL;
}

int cli_usage_error(const cli_cmd *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One write: stderr is unbuffered, and a reader of the pipe should get
     * the whole line at once. */
    fprintf(stderr, "loadlaw %s: %s\n", c->name, msg);
    return CLI_USAGE;
}

int cli_number(const cli_cmd *c, const char *name, const char *v, cli_num_kind k, double lo, double hi,
               const char *what, double *out)
{
    double x = NAN;
    uint64_t n;
    int bad = k == CLI_REAL ? ll_parse_double(v, &x)
            : k == CLI_DURATION ? ll_parse_duration_s(v, &x)
                                : ll_parse_count(v, &n);
    if (!bad && k == CLI_WHOLE)
        x = (double)n;
    if (bad || !(x >= lo && x <= hi))
        return cli_usage_error(c, "--%s: expected %s, got '%s'", name, what, v);
    *out = x;
    return 0;
}

int cli_long(const cli_cmd *c, const char *name, const char *v, long lo, long hi, long *out)
{
    char what[96];
    double x = 0;
    snprintf(what, sizeof what, "an integer in [%ld, %ld]", lo, hi);
    int rc = cli_number(c, name, v, CLI_WHOLE, (double)lo, (double)hi, what, &x);
    if (rc == 0)
        *out = (long)x;
    return rc;
}

int cli_print_json(const cli_cmd *c, void *o)
{
    char *s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        fprintf(stderr, "loadlaw %s: out of memory writing JSON\n", c->name);
        return CLI_FAIL;
    }
    puts(s);
    cJSON_free(s);
    return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
}

static void print_opt(FILE *f, const cli_opt *o)
{
    char left[96];
    int n;
    if (o->key < 256)
        n = snprintf(left, sizeof left, "  -%c, --%s%s%s", o->key, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    else
        n = snprintf(left, sizeof left, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fputs(left, f);
    if (n + 2 > HELP_COL)
        fprintf(f, "\n%*s", HELP_COL, "");
    else
        fprintf(f, "%*s", HELP_COL - n, "");
    /* Word-wrapped to HELP_WIDTH; a "\n" in the text also starts a line. */
    int col = 0;
    for (const char *h = o->help; *h;) {
        size_t w = strcspn(h, " \n");
        if (col > 0 && col + 1 + (int)w > HELP_WIDTH) {
            fprintf(f, "\n%*s", HELP_COL, "");
            col = 0;
        } else if (col > 0) {
            fputc(' ', f);
            col++;
        }
        fwrite(h, 1, w, f);
        col += (int)w;
        h += w;
        if (*h == '\n') {
            fprintf(f, "\n%*s", HELP_COL, "");
            col = 0;
        }
        if (*h)
            h++;
    }
    fputc('\n', f);
}

/* ---- Markdown (docs/cli.md) ------------------------------------------------- */

static cli_help_format g_format = CLI_HELP_TEXT;

void cli_help_set_format(cli_help_format f)
{
    g_format = f;
}

/* Text as Markdown: `code spans` kept as written, and outside them the
 * characters Markdown would read as emphasis, links or HTML escaped. In a
 * table cell (cell = 1) '|' is escaped everywhere and a "\n" becomes <br>;
 * cell = 2 is text already inside a code span in a cell (only '|' escaped).
 * The install prefix baked into a help text (LOADLAW_DATADIR) is written as
 * PREFIX/share/loadlaw, so the file does not depend on how the binary was
 * configured. */
static void md_text(FILE *f, const char *s, int cell)
{
#ifdef LOADLAW_DATADIR
    const char *datadir = LOADLAW_DATADIR;
#else
    const char *datadir = NULL;
#endif
    int code = cell == 2;
    for (; *s; s++) {
        if (datadir && *datadir && strncmp(s, datadir, strlen(datadir)) == 0) {
            fputs("PREFIX/share/loadlaw", f);
            s += strlen(datadir) - 1;
            continue;
        }
        char ch = *s;
        if (ch == '`' && cell != 2)
            code = !code;
        if (ch == '|' && cell)
            fputs("\\|", f);
        else if (ch == '\n' && cell)
            fputs("<br>", f);
        else if (code || ch == '`')
            fputc(ch, f);
        else if (ch == '<')
            fputs("&lt;", f);
        else if (ch == '>')
            fputs("&gt;", f);
        else if (strchr("\\*_[]", ch))
            fprintf(f, "\\%c", ch);
        else
            fputc(ch, f);
    }
}

static void md_usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "## loadlaw %s\n\n```text\n%s\n```\n\n", c->name, c->synopsis);
    if (c->intro) {
        md_text(f, c->intro, 0);
        fputc('\n', f);
    }
    int in_table = 0;
    for (const cli_opt *o = c->opts; o->name || o->help; o++) {
        if (!o->name) { /* a heading ("load:") ends the table above it */
            size_t n = strlen(o->help);
            if (n && o->help[n - 1] == ':')
                n--;
            fprintf(f, "%s**%.*s**\n\n", in_table ? "\n" : "", (int)n, o->help);
            in_table = 0;
            continue;
        }
        if (!o->help)
            continue;
        if (!in_table)
            fputs("| option | what it does |\n|---|---|\n", f);
        in_table = 1;
        fputs("| ", f);
        if (o->key < 256)
            fprintf(f, "`-%c`, ", o->key);
        fprintf(f, "`--%s%s", o->name, o->arg ? " " : "");
        if (o->arg)
            md_text(f, o->arg, 2);
        fputs("` | ", f);
        md_text(f, o->help, 1);
        fputs(" |\n", f);
    }
    if (!in_table)
        fputs("| option | what it does |\n|---|---|\n", f);
    fputs("| `-h`, `--help` | this help |\n", f);
    if (c->outro) {
        fputc('\n', f);
        md_text(f, c->outro, 0);
    }
}

void cli_usage(FILE *f, const cli_cmd *c)
{
    if (g_format == CLI_HELP_MARKDOWN) {
        md_usage(f, c);
        return;
    }
    fprintf(f, "%s\n", c->synopsis);
    if (c->intro)
        fprintf(f, "\n%s", c->intro);
    fputc('\n', f);
    for (const cli_opt *o = c->opts; o->name || o->help; o++) {
        if (!o->name)
            fprintf(f, "%s\n", o->help);
        else if (o->help)
            print_opt(f, o);
    }
    fprintf(f, "  -h, --help           this help\n");
    if (c->outro)
        fprintf(f, "\n%s", c->outro);
}

/* getopt_long's arrays for table o (plus -h/--help). Caller frees both. */
static int build(const cli_opt *o, struct option **lo_out, char **short_out)
{
    size_t n = count(o), k = 0;
    struct option *lo = calloc(n + 2, sizeof *lo);
    char *sh = malloc(3 * n + 8), *p = sh;
    if (!lo || !sh) {
        free(lo);
        free(sh);
        return -1;
    }
    *p++ = '-';
    *p++ = ':';
    for (size_t i = 0; i < n; i++) {
        if (!o[i].name)
            continue;
        lo[k++] = (struct option){o[i].name, o[i].arg ? required_argument : no_argument, NULL, o[i].key};
        if (o[i].key < 256) {
            *p++ = (char)o[i].key;
            if (o[i].arg)
                *p++ = ':';
        }
    }
    lo[k++] = (struct option){"help", no_argument, NULL, KEY_HELP};
    lo[k] = (struct option){0};
    *p++ = 'h';
    *p = '\0';
    *lo_out = lo;
    *short_out = sh;
    return 0;
}

int cli_parse(const cli_cmd *c, int argc, char **argv, cli_opt_fn *fn, void *ctx)
{
    struct option *lo = NULL;
    char *sh = NULL;
    int ret = CLI_GO_ON, key;
    if (build(c->opts, &lo, &sh)) {
        fprintf(stderr, "loadlaw %s: out of memory\n", c->name);
        return CLI_FAIL;
    }
    opterr = 0;
    optind = 0; /* glibc: 0 re-initialises, so a second parse in one process starts afresh */
    while (ret == CLI_GO_ON && (key = getopt_long(argc, argv, sh, lo, NULL)) != -1) {
        const char *arg = argv[optind - 1];
        if (key == 1) {
            int r = fn(NULL, optarg, ctx);
            ret = r ? r : CLI_GO_ON;
        } else if (key == KEY_HELP) {
            cli_usage(stdout, c);
            ret = CLI_OK;
        } else if (key == ':') {
            ret = cli_usage_error(c, "%s needs a value", arg);
        } else if (key == '?') {
            /* A long option is named as written; a short one by its letter
             * (it may sit in a cluster such as -qx). */
            char opt[8];
            snprintf(opt, sizeof opt, "-%c", optopt > 0 && optopt < 128 ? optopt : '?');
            ret = cli_usage_error(c, "unknown option '%s' (try loadlaw %s --help)",
                                  strncmp(arg, "--", 2) == 0 || optopt <= 0 ? arg : opt, c->name);
        } else {
            const cli_opt *o = find_key(c->opts, key);
            int r = o ? fn(o, optarg, ctx) : CLI_FAIL;
            ret = r ? r : CLI_GO_ON;
        }
    }
    free(lo);
    free(sh);
    return ret;
}
