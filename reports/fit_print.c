/* fit_print.c: a fit_result as `loadlaw fit` prints it: the headline
 * (headline.c; also what `loadlaw sweep`, `report` and `plan` print first),
 * the fits, the model check, the per-level table, the server's figures and
 * its own timing, the turns, the GPU diagnosis and the notes. The --json
 * object is fit_json.c's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dialect.h"
#include "html_internal.h"

void rpt_print_law_line(FILE *f, const fit_result *r)
{
    char text[1024];
    if (!r->law.ok) {
        /* No "law:" prefix: the sweep prints one before this line. */
        fprintf(f, "step(N) not fitted: %s\n", r->no_law[0] ? r->no_law : "no steady steps");
        return;
    }
    rpt_headline_text(r, text, sizeof text);
    fprintf(f, "%s\n", text);
    rpt_heldout_text(r, text, sizeof text);
    fprintf(f, "%s\n", text);
    if (isfinite(r->model.alone_n) && r->headline.model != FIT_MODEL_LINEAR)
        fprintf(f, "model: chosen on the strength of the level at N=%g alone: without it the line would do; "
                   "repeat that level before trusting the %s model\n",
                r->model.alone_n, fit_model_name(r->model.best));
    rpt_other_line_text(r, text, sizeof text);
    if (text[0])
        fprintf(f, "%s\n", text);
}

/* A number for a table cell, or "-" when there is none. */
static const char *fmt_num(char buf[32], double v, const char *fmt)
{
    if (!isfinite(v))
        return "-";
    snprintf(buf, 32, fmt, v);
    return buf;
}

static void print_law_row(FILE *f, const char *name, const fit_law *L)
{
    if (!L->ok) {
        fprintf(f, "  %-22s (not fitted)\n", name);
        return;
    }
    /* The decimals each interval needs, so a tight one never prints as [3, 3]. */
    char x[6][48];
    int da = fit_ci_decimals(L->a_ci_ms[0], L->a_ci_ms[1]), db = fit_ci_decimals(L->b_ci_ms[0], L->b_ci_ms[1]);
    fprintf(f, "  %-22s a = %9s ms [%s, %s]   b = %9s ms [%s, %s]   R2 %.4f  sd %.3g ms  n %zu\n", name,
            rpt_fmt_dec(x[0], L->a_ms, da), rpt_fmt_dec(x[1], L->a_ci_ms[0], da), rpt_fmt_dec(x[2], L->a_ci_ms[1], da),
            rpt_fmt_dec(x[3], L->b_ms, db), rpt_fmt_dec(x[4], L->b_ci_ms[0], db), rpt_fmt_dec(x[5], L->b_ci_ms[1], db),
            L->r2, L->resid_sd_ms, L->n_points);
}

/* Under the server table: what the server's figures do not mean, from the
 * dialect table (common/dialect.h), each once. */
static void print_caveats(FILE *f, int srv)
{
    size_t n;
    const ll_srv_metric *t = ll_srv_metrics(&n);
    for (size_t i = 0; i < n && srv >= 0; i++) {
        if ((int)t[i].server != srv || !t[i].caveat)
            continue;
        size_t j = 0;
        while (j < i && !((int)t[j].server == srv && t[j].caveat && strcmp(t[j].caveat, t[i].caveat) == 0))
            j++;
        if (j == i)
            fprintf(f, "  %s: %s\n", t[i].name, t[i].caveat);
    }
}

/* The server's own figures (fit/server.c "Server figures") beside the client's
 * steady step, when the sweep scraped any. */
static void print_server(FILE *f, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += r->levels[i].server_scrapes || isfinite(r->levels[i].server_step_ms);
    if (!any)
        return;
    int srv = -1;
    for (size_t i = 0; i < r->n_levels && srv < 0; i++)
        srv = r->levels[i].server;
    fprintf(f, "\nserver (scraped /metrics%s%s):\n%5s %6s %9s %9s %12s %12s %10s %9s %7s %8s\n", srv >= 0 ? ": " : "",
            srv >= 0 ? ll_srv_name((ll_srv)srv) : "", "level", "C", "server N", "waiting", "step ms", "client step",
            "tok/step", "gen tok/s", "cached", "scrapes");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32], c7[32];
        fprintf(f, "%5d %6d %9s %9s %12s %12s %10s %9s %7s %8zu%s\n", L->level, L->concurrency,
                fmt_num(c1, L->server_n, "%.2f"), fmt_num(c2, L->server_waiting, "%.2f"),
                fmt_num(c3, L->server_step_ms, "%.4g"), fmt_num(c4, L->steady_step_ms, "%.4g"),
                fmt_num(c5, L->server_tok_per_step, "%.4g"), fmt_num(c6, L->server_gen_tok_s, "%.4g"),
                isfinite(L->server_cache_share) ? (snprintf(c7, sizeof c7, "%.1f%%", 100 * L->server_cache_share), c7)
                                                : "-",
                L->server_scrapes, L->server_n_disagrees ? "  N != D" : "");
    }
    print_caveats(f, srv);
}

static int server_own_any(const fit_level *L)
{
    return isfinite(L->server_itl_mean_ms) || isfinite(L->server_ttft_mean_ms) ||
           isfinite(L->server_queue_mean_ms) || isfinite(L->server_kv_usage_mean) ||
           isfinite(L->server_preemptions);
}

/* The server's own latency histograms and gauges (fit/server_own.c) beside
 * the client's figures, when any level has any. */
static void print_server_own(FILE *f, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += server_own_any(&r->levels[i]);
    if (!any)
        return;
    fprintf(f, "\nserver's own latencies (scraped /metrics), beside the client's:\n"
               "%5s %6s %8s %8s %9s %9s %9s %9s %8s %9s %9s %7s %7s %7s %9s\n",
            "level", "C", "ITL", "server", "TTFT", "server", "TTFT p90", "server", "queue", "prefill", "decode",
            "KV mean", "KV max", "preempt", "wait c/d");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c[13][32], wait[72];
        snprintf(wait, sizeof wait, "%s/%s", fmt_num(c[11], L->server_waiting_capacity, "%.2g"),
                 fmt_num(c[12], L->server_waiting_deferred, "%.2g"));
        fprintf(f, "%5d %6d %8s %8s %9s %9s %9s %9s %8s %9s %9s %7s %7s %7s %9s\n", L->level, L->concurrency,
                fmt_num(c[0], L->itl.mean_ms, "%.4g"), fmt_num(c[1], L->server_itl_mean_ms, "%.4g"),
                fmt_num(c[2], L->ttft.mean_ms, "%.4g"), fmt_num(c[3], L->server_ttft_mean_ms, "%.4g"),
                fmt_num(c[4], L->ttft.p90_ms, "%.4g"), fmt_num(c[5], L->server_ttft_p90_ms, "%.4g"),
                fmt_num(c[6], L->server_queue_mean_ms, "%.3g"), fmt_num(c[7], L->server_prefill_mean_ms, "%.4g"),
                fmt_num(c[8], L->server_decode_mean_ms, "%.4g"), fmt_num(c[9], 100 * L->server_kv_usage_mean, "%.1f%%"),
                fmt_num(c[10], 100 * L->server_kv_usage_max, "%.1f%%"), fmt_num(c[11], L->server_preemptions, "%.0f"),
                wait);
    }
    fprintf(f, "  ms, means over the level (TTFT p90: from the server's histogram buckets, as coarse as they are);\n"
               "  queue, prefill (scheduled to first token), decode (first to last token): per request; KV: cache in\n"
               "  use; preempt: requests preempted in the level; wait c/d: waiting for capacity / deferred\n");
}

/* What the server said per request (fit/said.c "The server's own per-request
 * figures") beside the client's figures, when any level has any. */
static void print_said(FILE *f, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += r->levels[i].server_timed || r->levels[i].n_cached_said || r->levels[i].n_cut_short;
    if (!any)
        return;
    fprintf(f, "\nserver's own timing (its responses), beside the client's:\n%5s %6s %9s %9s %9s %9s %9s %7s %s\n",
            "level", "C", "TTFT p50", "server", "beyond", "TPOT p50", "server", "cached", "cut short");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c[6][32], share[32] = "-";
        if (isfinite(L->cache_share))
            snprintf(share, sizeof share, "%.1f%%", 100 * L->cache_share);
        fprintf(f, "%5d %6d %9s %9s %9s %9s %9s %7s %s\n", L->level, L->concurrency,
                fmt_num(c[0], L->ttft.p50_ms, "%.4g"), fmt_num(c[1], L->server_ttft_ms, "%.4g"),
                fmt_num(c[2], L->ttft_beyond_server_ms, "%.3g"), fmt_num(c[3], L->tpot.p50_ms, "%.4g"),
                fmt_num(c[4], L->server_tpot_ms, "%.4g"), share, L->n_cut_short ? L->cut_short_why : "0");
    }
    fprintf(f, "  ms; server TTFT: its own, else queue + prompt processing; beyond: the client's TTFT minus it,\n"
               "  per request (network, the server's HTTP layer and queue before it timed, the client)\n");
}

/* The per-turn figures (fit/turns.c) of multi-turn sessions; nothing without. */
void rpt_print_turns(FILE *f, const fit_result *r)
{
    if (!r->n_turns)
        return;
    fprintf(f, "\nby turn (multi-turn sessions; ok measured requests of each turn):\n"
               "%5s %6s %5s %6s %9s %9s %9s %10s %7s\n",
            "level", "C", "turn", "n", "TTFT p50", "TTFT p90", "TPOT p50", "prompt tok", "cached");
    for (size_t i = 0; i < r->n_turns; i++) {
        const fit_turn *t = &r->turns[i];
        char c[5][32];
        fprintf(f, "%5d %6d %5d %6zu %9s %9s %9s %10s %7s\n", t->level, t->concurrency, t->turn, t->n,
                fmt_num(c[0], t->ttft_p50_ms, "%.4g"), fmt_num(c[1], t->ttft_p90_ms, "%.4g"),
                fmt_num(c[2], t->tpot_p50_ms, "%.4g"), fmt_num(c[3], t->prompt_tok_mean, "%.0f"),
                fmt_num(c[4], 100 * t->cache_share, "%.1f%%"));
    }
    fprintf(f, "  ms; turn k sends turns 1..k-1 again: cached is the share of its prompt tokens the server's\n"
               "  prefix cache served (where it said)\n");
}

/* The GPU figures and diagnosis (fit/gpu.c "GPU figures and diagnosis"), when
 * any level has GPU or server data. */
static void print_gpu(FILE *f, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += r->levels[i].gpu_scrapes || r->levels[i].server_scrapes;
    if (!any)
        return;
    fprintf(f, "\ngpu / diagnosis (steady windows; power summed over GPUs, activities averaged; wait +: "
               "server waiting, last third of the level minus first)\n  rule, first that holds: %s\n"
               "%5s %6s %8s %8s %6s %6s %6s %6s %9s %8s  %s\n",
            fit_diag_rule(), "level", "C", "power W", "limit W", "of cap", "SM", "tensor", "DRAM", "J/token", "wait +",
            "diagnosis");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c[8][32];
        fprintf(f, "%5d %6d %8s %8s %6s %6s %6s %6s %9s %8s  %s (%s)\n", L->level, L->concurrency,
                fmt_num(c[0], L->gpu_power_w, "%.1f"), fmt_num(c[1], L->gpu_power_limit_w, "%.1f"),
                fmt_num(c[2], L->gpu_power_frac, "%.2f"), fmt_num(c[3], L->gpu_sm_active, "%.2f"),
                fmt_num(c[4], L->gpu_tensor_active, "%.2f"), fmt_num(c[5], L->gpu_dram_active, "%.2f"),
                fmt_num(c[6], L->gpu_j_per_tok, "%.4f"), fmt_num(c[7], L->server_waiting_growth, "%.2f"),
                fit_diag_name(L->diagnosis), L->diagnosis_why);
    }
}

void rpt_fit_print(FILE *f, const fit_result *r)
{
    rpt_print_law_line(f, r);
    if (fit_law_n_is_server(r))
        fprintf(f, "(N is the server's: its running requests at each step, fit --n server)\n");
    fprintf(f, "\nlines (step ms = a + b*N):\n");
    print_law_row(f, r->law.method && strcmp(r->law.method, "ols-fallback") == 0 ? "OLS FALLBACK, steady" : "line (mean step)", &r->law);
    print_law_row(f, "OLS, steady steps", &r->ols);
    print_law_row(f, "naive OLS, all gaps", &r->naive);
    if (r->law_other.ok)
        print_law_row(f, fit_law_n_is_server(r) ? "law vs client's D" : "law vs server's N", &r->law_other);
    if (r->engine.ok)
        print_law_row(f, "engine's own steps", &r->engine);
    if (r->has_truth)
        fprintf(f, "  %-22s a = %9.4g ms   b = %9.4g ms\n", "engine law (truth)", r->truth_a_ms,
                r->truth_b_ms);
    fprintf(f, "  steady samples %zu, in %zu step points; %zu samples in all\n",
            r->law.n_samples, r->law.n_points, r->n_samples);
    if (r->model.done)
        fprintf(f, "\nmodel check: %s: %s\n", fit_model_name(r->model.best), r->model.verdict);
    else /* no model was compared: naming "linear" would claim the data chose it */
        fprintf(f, "\nmodel check: %s\n", r->model.verdict);
    fprintf(f, "\n%5s %6s %12s %12s %8s %12s %9s %10s %8s %8s %7s %7s %8s %8s\n", "level", "C", "steady t/s",
            "line t/s", "err %", "whole t/s", "ramp s", "ramp tok", "steady", "failed", "burst%", "client",
            "model %", "held %");
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32], c7[32], c8[32], c9[32], tag[64];
        fprintf(f, "%5d %6d %12s %12s %8s %12s %9s %10s %8zu %8zu %7s %7s %8s %8s%s%s%s%s\n", L->level,
                L->concurrency, fmt_num(c1, L->steady_tok_per_s, "%.5g"),
                fmt_num(c2, L->predicted_tok_per_s, "%.5g"),
                fmt_num(c3, 100 * L->error_rel, "%+.2f"), fmt_num(c4, L->whole_tok_per_s, "%.5g"),
                fmt_num(c5, L->ramp_s, "%.4g"), fmt_num(c6, L->ramp_tokens, "%.6g"),
                L->n_steady_samples, L->n_failed, fmt_num(c7, 100 * L->burst_gap_frac, "%.1f"),
                L->client_bound ? "BOUND" : "-", fmt_num(c8, 100 * L->model_error_rel, "%+.2f"),
                fmt_num(c9, 100 * L->heldout_error_rel, "%+.2f"),
                L->closed_loop ? "" : "  (open loop)",
                L->interrupted ? "  (interrupted)" : "", rpt_profiled_tag(L), rpt_find_tag(L, tag, sizeof tag));
    }
    print_server(f, r);
    print_server_own(f, r);
    print_said(f, r);
    rpt_print_turns(f, r);
    print_gpu(f, r);
    if (r->n_notes) {
        fprintf(f, "\nleft out, and why:\n");
        for (size_t i = 0; i < r->n_notes; i++)
            fprintf(f, "  - %s\n", r->notes[i]);
    }
}
