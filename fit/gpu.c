/* gpu.c: a level's GPU figures and its diagnosis from the GPU telemetry
 * among the metric records: loadlaw's NVML sampler (`sweep --gpu`, nvml_*) or
 * a DCGM exporter (DCGM_FI_*), read the same way through server.c's gauge
 * and counter helpers; per figure NVML when the level has it, else DCGM,
 * never both added.
 *
 * GPU figures and diagnosis:
 *  power, limit    mean over the scrapes in the level's steady windows (the
 *                  whole level when it has none) of the scrape's power summed
 *                  over GPUs (W), and of the enforced power limit summed the
 *                  same way; power_frac = power / limit.
 *  SM, tensor,     the same scrapes' mean over GPUs of DCGM_FI_PROF_SM_ACTIVE,
 *  DRAM activity   _PIPE_TENSOR_ACTIVE, _DRAM_ACTIVE (NVML: the GPM metrics
 *                  SM_UTIL, ANY_TENSOR_UTIL, DRAM_BW_UTIL / 100), 0..1.
 *                  NVML's "utilization" (time any kernel ran) is not SM
 *                  activity and is never used for it.
 *  energy          the energy counter (mJ) differenced per GPU over the span
 *                  of the steady windows as the server figures' counters are
 *                  (a drop is a reset), summed over GPUs; J per token = that
 *                  energy / the tokens of every stream that arrived after the
 *                  counter's first sample and up to its last.
 *  waiting growth  the waiting gauge (server.c) over the whole level: mean of
 *                  the last third of its scrapes minus mean of the first third
 *                  (NAN with fewer than 3 scrapes).
 * The diagnosis is the first rule that holds, in the order of fit_tuning.h's
 * FIT_DIAG_* thresholds: latency-, compute-, bandwidth-, admission-bound;
 * "-" when none held, diagnosis_why saying why (no GPU data, or the figures
 * that missed). A figure that is absent fails its rule.
 *
 * Why energy from the counter: NVML's power reading is a ~1 s moving
 * average and DCGM's a sample of it, so a mean of power samples over a
 * window of a few seconds misses the edges; the counter's difference is
 * the energy the GPU drew between two exact instants. The tokens set
 * against it are those that arrived between the same two instants. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fit_internal.h"

const char *fit_diag_name(fit_diag d)
{
    switch (d) {
    case FIT_DIAG_LATENCY: return "latency-bound";
    case FIT_DIAG_COMPUTE: return "compute-bound";
    case FIT_DIAG_BANDWIDTH: return "bandwidth-bound";
    case FIT_DIAG_ADMISSION: return "admission-bound";
    case FIT_DIAG_NONE: break;
    }
    return "-";
}

#define STR_(x) #x
#define STR(x) STR_(x)
const char *fit_diag_rule(void)
{
    /* From the constants themselves, so the printed rule cannot drift from them. */
    return "latency-bound: SM >= " STR(FIT_DIAG_SM_BUSY) ", tensor and DRAM < " STR(FIT_DIAG_LOW)
           ", power < " STR(FIT_DIAG_POWER_LOW) " of the limit; "
           "compute-bound: tensor >= " STR(FIT_DIAG_TENSOR_HIGH) " and power >= " STR(FIT_DIAG_POWER_CAP)
           " of the limit; "
           "bandwidth-bound: DRAM >= " STR(FIT_DIAG_DRAM_PEAK) "; "
           "admission-bound: server waiting grew by >= " STR(FIT_DIAG_WAIT_GROWTH) " across the level";
}

/* The first kind of the pair with scrapes in L's windows (NVML before
 * DCGM: loadlaw's own sampler is on this host; both at once would count a
 * GPU twice). */
static double gauge_of(const fit_run *run, const fit_level *L, const int *kinds, size_t n, int avg,
                       size_t *scrapes)
{
    *scrapes = 0;
    for (size_t k = 0; k < n; k++) {
        double v = fit_server_gauge(run, L, kinds[k], avg, scrapes);
        if (*scrapes)
            return v;
    }
    return NAN;
}

/* Tokens of every stream that arrived in (t0, t1]; NAN when chunks could
 * not be read back. Level by level, past the levels whose chunks all
 * arrived outside it, so that a run read back a level at a time reads only
 * the levels that overlap the span (the sum of whole token counts is the
 * same in any order). */
static double tokens_between(const fit_run *run, int64_t t0, int64_t t1)
{
    double tok = 0;
    fit_chunks ch = {0};
    for (size_t l = 0; l < fit_run_n_levels(run) && !isnan(tok); l++) {
        int level = fit_run_level(run, l)->level;
        const fit_level_tally *lt = fit_run_level_tally(run, level);
        size_t i0, i1;
        if (!lt || lt->last_chunk_ns <= t0 || lt->first_chunk_ns > t1)
            continue;
        fit_run_level_span(run, level, &i0, &i1);
        for (size_t i = i0; i < i1; i++) {
            const ll_rec_request *q = fit_run_request(run, i);
            if (q->level != level)
                continue;
            if (fit_chunks_of(run, q, &ch)) {
                tok = NAN;
                break;
            }
            for (size_t c = 0; c < ch.n; c++)
                if (ch.v[c].t_ns > t0 && ch.v[c].t_ns <= t1)
                    tok += ch.v[c].tokens;
        }
    }
    fit_chunks_free(&ch);
    return tok;
}

/* Last third of the waiting gauge's scrape totals minus the first third,
 * over the whole level. */
static double waiting_growth(const fit_run *run, const fit_level *L)
{
    fit_level whole = *L;
    whole.n_windows = 0; /* fit_server_gauge then takes start..end */
    for (int srv = 0; srv < LL_SRV_DCGM; srv++) {
        int kind = FIT_SMK(srv, LL_ROLE_WAITING);
        size_t n = 0;
        fit_server_gauge(run, &whole, kind, 0, &n);
        if (n < 3)
            continue;
        /* Second pass: the totals in time order, summed per third. */
        size_t third = n / 3, idx = 0;
        double first = 0, last = 0, cur = 0;
        int64_t t = -1;
        int open = 0;
        for (size_t i = 0; i <= run->server.n; i++) {
            const fit_server_sample *s = i < run->server.n ? &run->server.v[i] : NULL;
            if (s && (s->kind != kind || s->t_ns < L->start_ns || s->t_ns > L->end_ns))
                continue;
            if (open && (!s || s->t_ns != t)) {
                if (idx < third)
                    first += cur;
                else if (idx >= n - third)
                    last += cur;
                idx++;
                open = 0;
            }
            if (!s)
                break;
            if (!open) {
                open = 1;
                cur = 0;
                t = s->t_ns;
            }
            cur += s->value;
        }
        return (last - first) / (double)third;
    }
    return NAN;
}

static void diagnose(fit_level *L)
{
    double sm = L->gpu_sm_active, te = L->gpu_tensor_active, dr = L->gpu_dram_active, pf = L->gpu_power_frac;
    char *why = L->diagnosis_why;
    size_t n = sizeof L->diagnosis_why;
    L->diagnosis = FIT_DIAG_NONE;
    /* NAN compares false, so an absent figure fails every rule it is in. */
    if (sm >= FIT_DIAG_SM_BUSY && te < FIT_DIAG_LOW && dr < FIT_DIAG_LOW && pf < FIT_DIAG_POWER_LOW)
        L->diagnosis = FIT_DIAG_LATENCY;
    else if (te >= FIT_DIAG_TENSOR_HIGH && pf >= FIT_DIAG_POWER_CAP)
        L->diagnosis = FIT_DIAG_COMPUTE;
    else if (dr >= FIT_DIAG_DRAM_PEAK)
        L->diagnosis = FIT_DIAG_BANDWIDTH;
    else if (L->server_waiting_growth >= FIT_DIAG_WAIT_GROWTH)
        L->diagnosis = FIT_DIAG_ADMISSION;
    if (L->diagnosis == FIT_DIAG_ADMISSION)
        snprintf(why, n, "server waiting grew by %.3g", L->server_waiting_growth);
    else if (L->gpu_scrapes)
        snprintf(why, n, "%sSM %.2f, tensor %.2f, DRAM %.2f, %.0f of %.0f W", L->diagnosis ? "" : "no rule held: ",
                 sm, te, dr, L->gpu_power_w, L->gpu_power_limit_w);
    else
        snprintf(why, n, "no GPU data%s", isfinite(L->server_waiting_growth) ? ", server queue steady" : "");
}

void fit_gpu_level(const fit_run *run, fit_level *L)
{
    /* each figure from loadlaw's own NVML sampler first, else a DCGM exporter */
#define GPU_KINDS(role) {FIT_SMK(LL_SRV_NVML, role), FIT_SMK(LL_SRV_DCGM, role)}
    static const int power[] = GPU_KINDS(LL_ROLE_POWER_W);
    static const int limit[] = {FIT_SMK(LL_SRV_NVML, LL_ROLE_POWER_LIMIT_W), FIT_SMK(LL_SRV_DCGM, LL_ROLE_POWER_LIMIT_W),
                                FIT_SMK(LL_SRV_DCGM, LL_ROLE_POWER_MGMT_LIMIT_W)};
    static const int sm[] = GPU_KINDS(LL_ROLE_SM_ACTIVE);
    static const int tensor[] = GPU_KINDS(LL_ROLE_TENSOR_ACTIVE);
    static const int dram[] = GPU_KINDS(LL_ROLE_DRAM_ACTIVE);
    static const int energy[] = GPU_KINDS(LL_ROLE_ENERGY_MJ);
#undef GPU_KINDS
    size_t n_power = 0, n_sm = 0, n_te = 0, n_dr = 0, n_lim = 0;
    L->gpu_power_w = L->gpu_power_limit_w = L->gpu_power_frac = NAN;
    L->gpu_sm_active = L->gpu_tensor_active = L->gpu_dram_active = NAN;
    L->gpu_energy_j = L->gpu_j_per_tok = L->server_waiting_growth = NAN;
    L->gpu_scrapes = 0;
    if (run->server.n) {
        L->gpu_power_w = gauge_of(run, L, power, 2, 0, &n_power);
        L->gpu_power_limit_w = gauge_of(run, L, limit, 3, 0, &n_lim);
        if (L->gpu_power_limit_w > 0)
            L->gpu_power_frac = L->gpu_power_w / L->gpu_power_limit_w;
        L->gpu_sm_active = gauge_of(run, L, sm, 2, 1, &n_sm);
        L->gpu_tensor_active = gauge_of(run, L, tensor, 2, 1, &n_te);
        L->gpu_dram_active = gauge_of(run, L, dram, 2, 1, &n_dr);
        L->gpu_scrapes = n_power > n_sm ? n_power : n_sm;
        int64_t t0 = L->n_windows ? L->windows[0].t0_ns : L->start_ns;
        int64_t t1 = L->n_windows ? L->windows[L->n_windows - 1].t1_ns : L->end_ns;
        for (size_t k = 0; k < 2 && !isfinite(L->gpu_energy_j); k++) {
            int64_t span_ns, first_ns, last_ns;
            double mj = fit_server_counter(run, energy[k], t0, t1, &span_ns, &first_ns, &last_ns);
            if (!isfinite(mj))
                continue;
            L->gpu_energy_j = mj / 1000;
            double tok = tokens_between(run, first_ns, last_ns);
            L->gpu_j_per_tok = tok > 0 ? L->gpu_energy_j / tok : NAN;
        }
        L->server_waiting_growth = waiting_growth(run, L);
    }
    diagnose(L);
}
