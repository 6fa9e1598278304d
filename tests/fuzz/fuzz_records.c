/* fuzz_records.c: the records reader (common/records_read.c), the fit's
 * loader on top of it (fit/load.c) and the whole analysis (fit_analyze) on
 * what it loaded: hostile or truncated records files must give a result or
 * an error, never undefined behaviour.
 *
 * Input: a records.jsonl. Properties of what loads: each request's times are
 * ordered (send <= first token <= end, the last chunk not after the end, as
 * fit.h promises after clamping), chunk tokens are not negative, levels come
 * sorted by start; an analysis that succeeds has a law with finite numbers and
 * ordered intervals when it says ok, and its --json object prints and parses.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_errno.h>

#include "fit.h"
#include "report.h"
/* GSL's default handler aborts; loadlaw's main turns it off once and the fit
 * checks every status (STYLE.md), so the harness does what main does. */
#define FUZZ_INIT() gsl_set_error_handler_off()
#include "fuzz_util.h"

static void check_run(const fit_run *run)
{
    size_t n_levels = fit_run_n_levels(run);
    for (size_t i = 1; i < n_levels; i++)
        FUZZ_CHECK(fit_run_level(run, i - 1)->start_ns <= fit_run_level(run, i)->start_ns);
    size_t n = fit_run_n_requests(run);
    for (size_t i = 0; i < n; i++) {
        const ll_rec_request *q = fit_run_request(run, i);
        if (q->send_ns >= 0 && q->first_token_ns >= 0)
            FUZZ_CHECK(q->send_ns <= q->first_token_ns);
        if (q->first_token_ns >= 0 && q->end_ns >= 0)
            FUZZ_CHECK(q->first_token_ns <= q->end_ns);
        for (size_t c = 0; q->chunks && c < q->n_chunks; c++) { /* NULL: a paged run (fit_internal.h) */
            FUZZ_CHECK(q->chunks[c].tokens >= 0);
            if (q->end_ns >= 0)
                FUZZ_CHECK(q->chunks[c].t_ns <= q->end_ns);
        }
    }
}

static void check_law(const fit_law *L)
{
    if (!L->ok)
        return;
    FUZZ_CHECK(isfinite(L->a_ms) && isfinite(L->b_ms));
    FUZZ_CHECK(!(L->a_ci_ms[0] > L->a_ci_ms[1]) && !(L->b_ci_ms[0] > L->b_ci_ms[1]));
}

static void check_result(const fit_result *res)
{
    check_law(&res->law);
    check_law(&res->ols);
    for (size_t i = 0; i < res->n_levels; i++) {
        double tps = res->levels[i].steady_tok_per_s;
        FUZZ_CHECK(isnan(tps) || tps >= 0);
    }
    cJSON *j = rpt_fit_to_json(res);
    if (j) {
        char *text = cJSON_PrintUnformatted(j);
        if (text) {
            cJSON *back = cJSON_Parse(text);
            FUZZ_CHECK(back != NULL);
            cJSON_Delete(back);
            free(text);
        }
        cJSON_Delete(j);
    }
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (f) {
        rpt_fit_print(f, res);
        rpt_print_law_line(f, res);
        fclose(f);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    fit_run *run = NULL;
    fit_result *res = NULL;
    int fd = fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    if (fit_load_run(path, &run, err, sizeof err) == 0) {
        check_run(run);
        fit_options opt;
        fit_options_default(&opt);
        if (fit_analyze(run, &opt, &res, err, sizeof err) == 0)
            check_result(res);
    }
    fit_result_free(res);
    fit_run_free(run);
    close(fd);
    return 0;
}
