/* fit_internal.h (internal to fit/): the run's storage and the steps of the
 * analysis, shared by load.c, timeline.c, regress.c, model.c, analyze.c and
 * output.c. */
#ifndef LOADLAW_FIT_INTERNAL_H
#define LOADLAW_FIT_INTERNAL_H

#include "common.h"
#include "fit.h"

struct fit_run {
    fit_run_info info;
    fit_level_info *levels;
    size_t n_levels, levels_cap;
    fit_request *requests;
    size_t n_requests, requests_cap;
    fit_chunk *chunks;
    size_t n_chunks, chunks_cap;
    fit_engine_step *steps;
    size_t n_steps, steps_cap;
    char *s_version, *s_host, *s_url, *s_model, *s_endpoint, *s_engine, *s_scenario,
        *s_run_json;
};

/* Growable array of samples (timeline.c appends, analyze.c owns). */
typedef struct fit_sample_vec {
    fit_sample *v;
    size_t n, cap;
} fit_sample_vec;

/* timeline.c: rebuild one level's P(t)/D(t) from the requests at req_idx,
 * append its step samples to sv (level_idx set), and fill the level's
 * timeline fields (phase points, steady windows, ramp, rate series, counts).
 * Does not touch the law-dependent fields. */
int fit_timeline_level(const fit_run *run, const fit_level_info *info, const size_t *req_idx,
                       size_t n_req, int32_t level_idx, const fit_options *opt,
                       fit_level *out, fit_sample_vec *sv, size_t *n_empty_chunks,
                       char *err, size_t errlen);
void fit_level_release(fit_level *L);

/* regress.c: helpers shared with model.c. Distinct values of x, sorted, into
 * *out (caller frees); (x, index) pairs sorted by x with fit_cmp_xi_pair. */
int fit_distinct_x(const double *x, size_t n, double **out, size_t *nd);
typedef struct fit_xi_pair {
    double x;
    size_t i;
} fit_xi_pair;
int fit_cmp_xi_pair(const void *a, const void *b);

/* Median of v[0..n) and the normal-consistent MAD (1.4826 * median absolute
 * deviation) around it; v is reordered and overwritten. */
void fit_median_mad(double *v, size_t n, double *med, double *sd);

/* model.c: the model check on step points (x = N, y = ms per token). */
int fit_model_check_run(const double *x, const double *y, size_t n, const fit_options *opt,
                        fit_model_check *out, char *err, size_t errlen);

/* analyze.c: append a formatted note to the result. */
int fit_note(fit_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
