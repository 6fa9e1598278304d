/* opts.h (internal to cli/): one option table per command. The same table
 * drives getopt_long (long options for everything, short ones for the
 * common few, "--name=value" and "--name value" alike) and prints the
 * command's --help, so the two cannot drift apart.
 *
 * Rules every command shares (cli.h): --help/-h prints the help to stdout
 * and exits 0; an unknown option, a missing value or a bad value is one line
 * on stderr ("loadlaw CMD: ...") and exit 2. */
#ifndef LOADLAW_CLI_OPTS_H
#define LOADLAW_CLI_OPTS_H

#include <stdio.h>

/* One option. A row with name == NULL and help != NULL is a heading ("load:")
 * printed before the options that follow; {0} ends the table. */
typedef struct cli_opt {
    const char *name;   /* long name without "--" */
    int key;            /* the short letter ('c' for -c), or a value >= 256
                         * for a long-only option; handlers switch on it */
    const char *arg;    /* value name in the help ("N", "URL"); NULL: a flag */
    const char *help;   /* help text, word-wrapped to 80 columns (a "\n"
                         * also breaks the line); NULL: accepted, not listed */
} cli_opt;

typedef struct cli_cmd {
    const char *name;     /* "sweep": messages say "loadlaw sweep: ..." */
    const char *synopsis; /* "usage: loadlaw sweep [SCENARIO.json] [options]" */
    const char *intro;    /* paragraphs between the synopsis and the options */
    const cli_opt *opts;
    const char *outro;    /* after the options (exit codes); may be NULL */
} cli_cmd;

/* Called once per option in argv order (opt = its row, val = its value or
 * NULL for a flag) and once per positional argument (opt = NULL). Returns 0
 * to go on, or an exit code (having printed why) to stop. */
typedef int cli_opt_fn(const cli_opt *opt, const char *val, void *ctx);

/* What cli_parse returns when the command should go on. */
#define CLI_GO_ON (-1)

/* Parse argv (argv[0] = the command's name). Returns CLI_GO_ON, CLI_OK after
 * printing --help, CLI_USAGE after a one-line message, or what fn returned. */
int cli_parse(const cli_cmd *c, int argc, char **argv, cli_opt_fn *fn, void *ctx);

/* The help: synopsis, intro, the table with headings, outro. */
void cli_usage(FILE *f, const cli_cmd *c);

/* How cli_usage prints: plain text for --help (the default), or one Markdown
 * section per command for docs/cli.md (`loadlaw help --markdown`, main.c,
 * which asks every subcommand for its --help in this form). Set once, before
 * any command runs; not thread-safe. */
typedef enum { CLI_HELP_TEXT, CLI_HELP_MARKDOWN } cli_help_format;
void cli_help_set_format(cli_help_format f);

/* A usage error: "loadlaw CMD: <message>\n" on stderr; returns CLI_USAGE. */
int cli_usage_error(const cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An option's value as a number in [lo, hi]: CLI_REAL (1.5, 1e-3),
 * CLI_WHOLE (an integer, k/m/g suffixes: 4k), CLI_DURATION (seconds: 50ms,
 * 30s, 2m). 0 with *out set, or CLI_USAGE after
 * "loadlaw CMD: --NAME: expected WHAT, got 'V'". */
typedef enum { CLI_REAL, CLI_WHOLE, CLI_DURATION } cli_num_kind;
int cli_number(const cli_cmd *c, const char *name, const char *v, cli_num_kind k, double lo, double hi,
               const char *what, double *out);
/* CLI_WHOLE into a long, the message naming the range. */
int cli_long(const cli_cmd *c, const char *name, const char *v, long lo, long hi, long *out);

/* o (a cJSON *, freed here; NULL = out of memory) as one indented document on
 * stdout: CLI_OK, or CLI_FAIL after "loadlaw CMD: ..." on stderr. */
int cli_print_json(const cli_cmd *c, void *o);

#endif
