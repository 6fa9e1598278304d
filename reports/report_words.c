/* report_words.c: the report's sentences and tables that read fit's figures
 * on how the step behaves on a real server: early against late tokens per
 * level (fit/position.c "Step time against position in the request"), and the
 * server's own per-level figures beside the client's (fit/server.c "Server
 * figures", "The server's own per-request figures"). The figures are fit's;
 * only the words are chosen here, by the same FIT_POS_SAME_FRAC that the
 * header states. */
#include <math.h>
#include <stdio.h>

#include "html_internal.h"

/* "C=4", or "level 3 (open loop)". */
static void level_name(char *buf, size_t n, const fit_level *L)
{
    if (L->closed_loop && L->concurrency > 0)
        snprintf(buf, n, "C=%d", L->concurrency);
    else
        snprintf(buf, n, "level %d (open loop)", L->level);
}

/* How much slower x is than y, in per cent of y. */
static double slower_pct(double x, double y)
{
    return 100 * (x / y - 1);
}

/* Early against late over every sample: prefill shares the first steps. */
static int prefill_words(ll_buf *b, const fit_level *L, int steady_early_slower)
{
    double ea = L->early_all_ms, la = L->late_all_ms;
    if (!(isfinite(ea) && isfinite(la) && la > 0) || ea <= la * (1 + FIT_POS_SAME_FRAC) || steady_early_slower)
        return 0;
    return ll_buf_printf(b, " Counting every step, early tokens are %.0f%% slower (%.3g against %.3g ms): they "
                            "share steps with prefill.",
                         slower_pct(ea, la), ea, la);
}

int rpt_position_words(ll_buf *b, const fit_level *L)
{
    char name[48];
    double e = L->early_ms, l = L->late_ms;
    level_name(name, sizeof name, L);
    int rc;
    if (!(isfinite(e) && isfinite(l) && e > 0 && l > 0)) {
        rc = ll_buf_printf(b, "At %s too few steady samples in the first or the last quarter of positions to "
                              "compare early and late tokens.",
                           name);
        return rc ? rc : prefill_words(b, L, 0);
    }
    if (l > e * (1 + FIT_POS_SAME_FRAC))
        rc = ll_buf_printf(b, "At %s late tokens are %.0f%% slower than early ones (steady steps: %.3g ms a token "
                              "in the last quarter of positions against %.3g in the first): the step grows with "
                              "context.",
                           name, slower_pct(l, e), l, e);
    else if (e > l * (1 + FIT_POS_SAME_FRAC))
        rc = ll_buf_printf(b, "At %s early tokens are %.0f%% slower than late ones even in steady steps, where "
                              "nothing is prefilling (%.3g ms a token in the first quarter of positions against "
                              "%.3g in the last).",
                           name, slower_pct(e, l), e, l);
    else
        rc = ll_buf_printf(b, "At %s early and late tokens take the same steady step within %.0f%% (%.3g ms a "
                              "token in the first quarter of positions, %.3g in the last): the tokens a request "
                              "adds to its context do not move the step measurably.",
                           name, 100 * FIT_POS_SAME_FRAC, e, l);
    return rc ? rc : prefill_words(b, L, e > l * (1 + FIT_POS_SAME_FRAC));
}

/* The level whose late/early (or, all = 1, early/late over every sample)
 * departs most from 1 in direction sign; -1 when none is beyond the margin. */
static long most_apart(const fit_result *r, int all, double *pct)
{
    long best = -1;
    *pct = 0;
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        double x = all ? L->early_all_ms : L->late_ms, y = all ? L->late_all_ms : L->early_ms;
        if (!(isfinite(x) && isfinite(y) && y > 0) || x <= y * (1 + FIT_POS_SAME_FRAC))
            continue;
        if (slower_pct(x, y) > *pct) {
            *pct = slower_pct(x, y);
            best = (long)i;
        }
    }
    return best;
}

int rpt_position_summary(ll_buf *b, const fit_result *r)
{
    char name[48];
    double pct;
    long i = most_apart(r, 0, &pct);
    int rc = 0;
    if (i >= 0) {
        level_name(name, sizeof name, &r->levels[i]);
        rc = ll_buf_printf(b, "Late tokens are slower than early ones in steady steps, most at %s (%.0f%%): the "
                              "step grows with context. ",
                           name, pct);
    } else {
        rc = ll_buf_printf(b, "In steady steps late tokens are nowhere more than %.0f%% slower than early ones. ",
                           100 * FIT_POS_SAME_FRAC);
    }
    i = most_apart(r, 1, &pct);
    if (rc == 0 && i >= 0) {
        level_name(name, sizeof name, &r->levels[i]);
        rc = ll_buf_printf(b, "Counting every step, early tokens are slower, most at %s (%.0f%%): they share "
                              "steps with prefill. ",
                           name, pct);
    }
    return rc;
}

static int any_server(const fit_result *r)
{
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        if (L->server_scrapes || isfinite(L->server_step_ms) || L->server_timed || L->n_cached_said)
            return 1;
    }
    return 0;
}

static int server_row(ll_buf *b, const fit_level *L)
{
    char x[12][48], name[48];
    level_name(name, sizeof name, L);
    return ll_buf_printf(b,
                         "<tr><td>%s</td><td>%s%s</td><td>%s</td><td>%s / %s</td><td>%s</td><td>%s / %s</td>"
                         "<td>%s / %s</td><td>%s / %s</td><td>%s</td><td>%zu</td></tr>\n",
                         name, html_num(x[0], 48, L->server_n, 2), L->server_n_disagrees ? " (N &ne; D)" : "",
                         html_num(x[1], 48, L->server_waiting, 2), html_num(x[2], 48, L->steady_step_ms, 3),
                         html_num(x[3], 48, L->server_step_ms, 3), html_num(x[4], 48, L->server_tok_per_step, 2),
                         html_num(x[5], 48, L->steady_tok_per_s, 1), html_num(x[6], 48, L->server_gen_tok_s, 1),
                         html_num(x[7], 48, L->tpot.p50_ms, 3), html_num(x[8], 48, L->server_tpot_ms, 3),
                         html_num(x[9], 48, L->ttft.p50_ms, 1), html_num(x[10], 48, L->server_ttft_ms, 1),
                         html_num(x[11], 48, 100 * (isfinite(L->server_cache_share) ? L->server_cache_share
                                                                                    : L->cache_share), 1),
                         L->server_scrapes);
}

static int server_own_row(ll_buf *b, const fit_level *L)
{
    char x[12][48], name[48];
    level_name(name, sizeof name, L);
    return ll_buf_printf(b,
                         "<tr><td>%s</td><td>%s / %s</td><td>%s / %s</td><td>%s / %s</td><td>%s</td><td>%s</td>"
                         "<td>%s</td><td>%s / %s</td><td>%s</td></tr>\n",
                         name, html_num(x[0], 48, L->itl.mean_ms, 3), html_num(x[1], 48, L->server_itl_mean_ms, 3),
                         html_num(x[2], 48, L->ttft.mean_ms, 1), html_num(x[3], 48, L->server_ttft_mean_ms, 1),
                         html_num(x[4], 48, L->ttft.p90_ms, 1), html_num(x[5], 48, L->server_ttft_p90_ms, 1),
                         html_num(x[6], 48, L->server_queue_mean_ms, 2), html_num(x[7], 48, L->server_prefill_mean_ms, 1),
                         html_num(x[8], 48, L->server_decode_mean_ms, 1),
                         html_num(x[9], 48, 100 * L->server_kv_usage_mean, 1),
                         html_num(x[10], 48, 100 * L->server_kv_usage_max, 1),
                         html_num(x[11], 48, L->server_preemptions, 0));
}

/* The server's own latency histograms and gauges (fit/server_own.c), when any level has them. */
static int server_own_table(ll_buf *b, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += isfinite(r->levels[i].server_itl_mean_ms) || isfinite(r->levels[i].server_ttft_mean_ms) ||
               isfinite(r->levels[i].server_kv_usage_mean);
    if (!any)
        return 0;
    if (ll_buf_printf(b, "\n<div class=scroll><table>\n<tr><th>level</th><th>ITL mean ms: client / server</th>"
                         "<th>TTFT mean ms: client / server</th><th>TTFT p90 ms: client / server</th><th>queue "
                         "ms</th><th>prefill ms</th><th>decode ms</th><th>KV cache %%: mean / max</th>"
                         "<th>preempted</th></tr>\n"))
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++)
        if (server_own_row(b, &r->levels[i]))
            return LL_ENOMEM;
    return ll_buf_printf(b, "</table></div><p class=muted>From the server&#39;s own histograms and gauges on "
                            "its /metrics page, over each level: the server&#39;s TTFT p90 is interpolated in "
                            "its buckets, as coarse as they are; queue, prefill and decode are per-request "
                            "means.</p>");
}

int rpt_server_table(ll_buf *b, const fit_result *r)
{
    if (!any_server(r))
        return 0;
    if (ll_buf_printf(b, "<section><h2>The server&#39;s own figures</h2><div class=scroll><table>\n<tr><th>level"
                         "</th><th>server N</th><th>waiting</th><th>step ms: client / server</th><th>tokens per "
                         "step</th><th>tok/s: client steady / server</th><th>TPOT p50 ms: client / server</th>"
                         "<th>TTFT p50 ms: client / server</th><th>cached %%</th><th>scrapes</th></tr>\n"))
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++)
        if (server_row(b, &r->levels[i]))
            return LL_ENOMEM;
    if (ll_buf_printf(b, "</table></div><p class=muted>Server N and waiting: means of its running and waiting "
                         "gauges over the level&#39;s steady windows (N &ne; D: the server ran another number "
                         "of requests than the client&#39;s C). Step: the client&#39;s median steady ms per "
                         "token against the server&#39;s own step clock. Tokens per step and tok/s: the "
                         "server&#39;s counters. TPOT and TTFT: what each response said of itself. Cached: "
                         "prompt tokens served from the prefix cache.</p>") ||
        server_own_table(b, r))
        return LL_ENOMEM;
    return ll_buf_printf(b, "</section>\n");
}
