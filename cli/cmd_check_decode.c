/* cmd_check_decode.c: `loadlaw check-decode RUN_DIR` — re-score a run's
 * recorded outputs through prefill on the same server and compare the
 * decode-time logprobs with the prefill-time ones; a gate for CI (exit 3).
 * The work is sweep_check_decode (sweep.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "fit_outputs.h"
#include "opts.h"

enum { K_URL = 256, K_ENGINE, K_API_KEY, K_MAX_REQ, K_TOL, K_MAX_OVER, K_DTYPE, K_TIMEOUT, K_JSON };

static const cli_opt check_table[] = {
    {"url", K_URL, "URL", "the server to check (default: the run's target; for a run against the "
                "in-process engine, that engine started again from the spec its records name)"},
    {"engine", K_ENGINE, "SPEC", "start the bundled engine with SPEC (as sweep --engine) and check against it"},
    {"api-key", K_API_KEY, "KEY", "bearer token for the server (default $LOADLAW_API_KEY; never logged)"},
    {"max-requests", K_MAX_REQ, "N", "re-score at most N requests, evenly spaced over the run (default 200; 0: all)"},
    {"tolerance", K_TOL, "NAT", "the bound's absolute part: a position agrees when |decode - prefill logprob| "
                "<= NAT + what --dtype rounds (default 0.005)"},
    {"dtype", K_DTYPE, "auto|bf16|fp16|fp32", "the server's arithmetic, which sets how far rounding alone moves "
                "a logprob: 4u(1 + |lp|) nat, u its unit roundoff (bf16 2^-8). auto (default): fp32 for the "
                "bundled engine, bf16 for a remote server (none says); fp32 is the strict gate"},
    {"max-over", K_MAX_OVER, "F", "gate: exit 3 when more than this share (0..1) of positions disagrees: over "
                "the bound, or prefill ranks another token first by more than it (default 0.01)"},
    {"timeout", K_TIMEOUT, "S", "per request (default 120s)"},
    {"json", K_JSON, NULL, "machine-readable output instead of tables"},
    {0},
};

static const cli_cmd check_cmd = {
    "check-decode",
    "usage: loadlaw check-decode RUN_DIR [--url URL | --engine SPEC] [--max-requests N]\n"
    "                            [--dtype auto|bf16|fp16|fp32] [--tolerance NAT] [--max-over F] [--json]",
    "Checks a decode kernel without a second server. Each request a run recorded\n"
    "with `sweep --record-outputs` is sent back to the same server as its prompt\n"
    "followed by the tokens it decoded, asking for prompt logprobs (vLLM's\n"
    "\"prompt_logprobs\"; chat with \"continue_final_message\"). The server then\n"
    "scores the decoded tokens through prefill, and each position's decode-time\n"
    "logprob is compared with the prefill-time one: mean and max |delta|, the\n"
    "share of positions over the tolerance and the share of decoded tokens that\n"
    "prefill ranks first, per level and overall. Prefill and decode run different\n"
    "attention kernels on real servers (and in the bundled engine), so a decode\n"
    "kernel that computes the wrong distribution disagrees with prefill. A\n"
    "position may differ by the tolerance plus what the server's arithmetic\n"
    "rounds (--dtype; docs/check-decode.md \"The gate\"), so a healthy bf16\n"
    "server passes and a decode kernel wrong by more than rounding does not.\n",
    check_table,
    "exit: 0 within the gate, 1 failure, 2 usage error, the run has no recorded\n"
    "outputs, or the server cannot return prompt logprobs, 3 gate missed\n",
};

typedef struct check_args {
    const char *run_dir;
    sweep_check_decode_opts o;
} check_args;

static int on_opt(const cli_opt *opt, const char *v, void *ctx)
{
    check_args *a = ctx;
    double x;
    int rc;
    if (!opt) {
        if (a->run_dir)
            return cli_usage_error(&check_cmd, "one run, please");
        a->run_dir = v;
        return 0;
    }
    switch (opt->key) {
    case K_URL: a->o.url = v; return 0;
    case K_ENGINE: a->o.engine = v; return 0;
    case K_API_KEY: a->o.api_key = v; return 0;
    case K_JSON: a->o.json = 1; return 0;
    case K_DTYPE: {
        fit_cd_dtype d;
        if (strcmp(v, "auto") == 0)
            a->o.dtype = SWEEP_CHECK_DECODE_DTYPE_AUTO;
        else if (fit_cd_dtype_parse(v, &d) == 0)
            a->o.dtype = (int)d;
        else
            return cli_usage_error(&check_cmd, "--dtype: auto, bf16, fp16 or fp32");
        return 0;
    }
    case K_MAX_REQ:
        rc = cli_number(&check_cmd, opt->name, v, CLI_WHOLE, 0, 1e8, "a whole number >= 0", &x);
        a->o.max_requests = rc ? 0 : (int)x;
        return rc;
    case K_TOL: return cli_number(&check_cmd, opt->name, v, CLI_REAL, 0, 1e4, "nats >= 0", &a->o.tolerance);
    case K_MAX_OVER: return cli_number(&check_cmd, opt->name, v, CLI_REAL, 0, 1, "a share from 0 to 1", &a->o.max_over);
    case K_TIMEOUT:
        return cli_number(&check_cmd, opt->name, v, CLI_DURATION, 1e-3, 86400, "a duration (e.g. 30s, 2m)",
                          &a->o.timeout_s);
    }
    return cli_usage_error(&check_cmd, "unknown option");
}

int cmd_check_decode(int argc, char **argv)
{
    check_args a = {0};
    sweep_check_decode_opts_default(&a.o);
    int rc = cli_parse(&check_cmd, argc, argv, on_opt, &a);
    if (rc != CLI_GO_ON)
        return rc;
    if (!a.run_dir)
        return cli_usage_error(&check_cmd, "needs RUN_DIR (try loadlaw check-decode --help)");
    if (a.o.url && a.o.engine)
        return cli_usage_error(&check_cmd, "--url and --engine name two targets; give one");
    if (!a.o.api_key)
        a.o.api_key = getenv("LOADLAW_API_KEY");
    return sweep_check_decode(a.run_dir, &a.o);
}
