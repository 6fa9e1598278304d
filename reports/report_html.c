/* report_html.c: RUN_DIR/report.html — the law with its intervals and model
 * check, the charts (throughput against C with the fitted curve and its
 * asymptote; step time against N with the fit, its band and the engine's own
 * steps; what the model sees: the steps coloured by context with the chosen
 * model at three contexts, and its residuals against N and K; per level the
 * P/D timeline, the token rate thinking vs answer, the TTFT/TTFA/ITL
 * distributions and the step against position in the request, with words
 * that say whether early or late tokens are slower), the per-level table, the
 * server's own figures beside it, and the run's configuration. Tables are plain HTML written here, so the numbers read even
 * with scripts off; charts are drawn by report.js from the embedded data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "html_internal.h"

static int law_row(ll_buf *b, const char *what, const fit_law *l)
{
    char x[8][48];
    if (ll_buf_printf(b, "<tr><td class=l>") || html_esc(b, what) || ll_buf_printf(b, "</td>"))
        return LL_ENOMEM;
    if (!l->ok)
        return ll_buf_printf(b, "<td colspan=7 class=l>not fitted (too few points)</td></tr>\n");
    return ll_buf_printf(b,
                         "<td>%s</td><td>[%s, %s]</td><td>%s</td><td>[%s, %s]</td>"
                         "<td>%s</td><td>%s</td><td>%zu (%zu)</td></tr>\n",
                         html_num(x[0], 48, l->a_ms, 3), html_num(x[1], 48, l->a_ci_ms[0], 3),
                         html_num(x[2], 48, l->a_ci_ms[1], 3), html_num(x[3], 48, l->b_ms, 4),
                         html_num(x[4], 48, l->b_ci_ms[0], 4), html_num(x[5], 48, l->b_ci_ms[1], 4),
                         html_num(x[6], 48, l->r2, 4), html_num(x[7], 48, l->resid_sd_ms, 3), l->n_points,
                         l->n_samples);
}

/* The chosen model's intervals when it is not the line (the headline gave
 * its formula), and the level it may rest on alone (fit/model.c "The chosen
 * model"). */
static int model_words(ll_buf *b, const fit_result *r)
{
    const fit_model_check *m = &r->model;
    const fit_model_fit *f = &m->chosen;
    if (!m->done || m->best == FIT_MODEL_LINEAR || !f->p)
        return 0;
    int ctx = fit_model_fit_has(f, FIT_TERM_K);
    if (ll_buf_printf(b, "<div class=muted>the %s model's 95%% intervals (HC3):", fit_model_name(m->best)))
        return LL_ENOMEM;
    for (size_t j = 0; j < f->p; j++)
        if (ll_buf_printf(b, "%s %s [%.4g, %.4g]", j ? "," : "", fit_term_name(f->term[j]),
                          f->coef[j] - 1.96 * f->se[j], f->coef[j] + 1.96 * f->se[j]))
            return LL_ENOMEM;
    if (ll_buf_printf(b, "%s</div>\n", ctx ? "; K: the context tokens of the running requests (their prompts "
                                              "and the tokens they have had), per 1,000" : ""))
        return LL_ENOMEM;
    if (isfinite(m->alone_n) &&
        ll_buf_printf(b, "<p class=warn>The %s model rests on the level at N=%g alone: without it a straight "
                         "line would do. Repeat that level before trusting it.</p>\n",
                      fit_model_name(m->best), m->alone_n))
        return LL_ENOMEM;
    return 0;
}

/* The headline (reports/headline.c), first: the same words as the
 * terminal's. */
static int headline_words(ll_buf *b, const fit_result *r)
{
    char text[1024];
    if (!r->law.ok)
        return 0;
    rpt_headline_text(r, text, sizeof text);
    if (ll_buf_printf(b, "<div class=law>") || html_esc(b, text) || ll_buf_printf(b, "</div>\n"))
        return LL_ENOMEM;
    rpt_heldout_text(r, text, sizeof text);
    return ll_buf_printf(b, "<p class=%s>", r->headline.heldout_warn ? "warn" : "muted") || html_esc(b, text) ||
                   ll_buf_printf(b, "</p>\n")
               ? LL_ENOMEM
               : 0;
}

/* The line: the headline when chosen (its intervals and N1/2 here), else
 * beneath it, said not chosen. */
static int line_words(ll_buf *b, const fit_result *r)
{
    char x[8][48];
    const fit_law *l = &r->law;
    if (!l->ok)
        return ll_buf_printf(b, "<div class=law>No law: too few steady samples at distinct N</div>\n");
    int chosen = r->headline.model == FIT_MODEL_LINEAR;
    return ll_buf_printf(b,
                         "<p%s>%s step(N) = %s + %s&middot;N ms, 1/b = %s tokens/s: a in [%s, %s], b in [%s, %s] "
                         "(95%%); N&frac12; = a/b = %s requests; fitted by %s on steady decode steps</p>\n",
                         chosen ? " class=muted" : "", chosen ? "The line, the chosen model:" : "<b>The line, not chosen:</b>",
                         html_num(x[0], 48, l->a_ms, 2), html_num(x[1], 48, l->b_ms, 3),
                         html_num(x[2], 48, r->asymptote_tok_per_s, 1), html_num(x[3], 48, l->a_ci_ms[0], 2),
                         html_num(x[4], 48, l->a_ci_ms[1], 2), html_num(x[5], 48, l->b_ci_ms[0], 3),
                         html_num(x[6], 48, l->b_ci_ms[1], 3), html_num(x[7], 48, r->n_half, 1),
                         l->method ? l->method : "robust regression");
}

static int law_section(ll_buf *b, const fit_result *r)
{
    char x[8][48];
    const fit_law *l = &r->law;
    char law_label[96];
    snprintf(law_label, sizeof law_label, "the line: %s%s", l->method ? l->method : "none",
             fit_law_n_is_server(r) ? ", against the server's N" : "");
    if (ll_buf_printf(b, "<section><h2>The law</h2>\n") || headline_words(b, r))
        return LL_ENOMEM;
    if (line_words(b, r))
        return LL_ENOMEM;
    if (model_words(b, r))
        return LL_ENOMEM;
    if (ll_buf_printf(b, "<p><b>Model check:</b> ") ||
        html_esc(b, r->model.done ? r->model.verdict : "too few distinct N to check the straight line") ||
        ll_buf_printf(b, "</p>\n<div class=scroll><table><tr><th class=l>fit</th><th>a ms</th><th>a 95%%</th>"
                         "<th>b ms</th><th>b 95%%</th><th>R&sup2;</th><th>resid sd ms</th>"
                         "<th>points (samples)</th></tr>\n") ||
        law_row(b, law_label, &r->law) || law_row(b, "OLS, same points", &r->ols) ||
        law_row(b, "OLS on every gap, phases ignored", &r->naive))
        return LL_ENOMEM;
    if (r->engine.ok && law_row(b, "engine's own step log", &r->engine))
        return LL_ENOMEM;
    /* fit/analyze_law.c "The law against the server's N": both laws when the server said its N */
    if (r->law_other.ok && law_row(b, fit_law_n_is_server(r) ? "the same steps against the client's D"
                                                             : "the same steps against the server's N (scraped)",
                                   &r->law_other))
        return LL_ENOMEM;
    if (r->has_truth &&
        ll_buf_printf(b, "<tr><td class=l>engine&#39;s configured law (truth)</td><td>%s</td><td></td><td>%s</td>"
                         "<td colspan=4></td></tr>\n",
                      html_num(x[0], 48, r->truth_a_ms, 3), html_num(x[1], 48, r->truth_b_ms, 4)))
        return LL_ENOMEM;
    return ll_buf_printf(b, "</table></div></section>\n");
}

/* "3 (timeout 2, reset 1)": measured failed requests, by class. */
static int failed_cell(ll_buf *out, const fit_level *L)
{
    const char *sep = " (";
    int rc = ll_buf_printf(out, "%zu", rpt_level_failed(L));
    for (int c = LL_ERRC_OK + 1; c < LL_ERRC__COUNT && rc == 0; c++)
        if (L->failed_by_class[c]) {
            rc = ll_buf_printf(out, "%s%s %zu", sep, ll_err_class_name((ll_err_class)c), L->failed_by_class[c]);
            sep = ", ";
        }
    if (rc == 0 && sep[0] == ',')
        rc = ll_buf_printf(out, ")");
    return rc;
}

/* One row per level, every figure fit_level's (the sweep's table and
 * summary.json print the same ones). */
static int level_row(ll_buf *b, const fit_level *L)
{
    char x[16][48], tag[64];
    ll_buf fail = {0};
    int rc = failed_cell(&fail, L);
    if (rc == 0)
        rc = ll_buf_printf(b,
                           "<tr><td>%d%s%s%s</td><td>%zu</td><td class=l>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                           "<td>%s</td><td>%s</td><td>%s%%</td><td>%s</td><td>%s / %s</td><td>%s / %s</td>"
                           "<td>%s / %s</td></tr>\n",
                           L->concurrency, L->interrupted ? " (interrupted)" : "", rpt_profiled_tag(L),
                           rpt_find_tag(L, tag, sizeof tag),
                           rpt_level_ok(L), fail.p,
                           html_num(x[0], 48, L->ramp_s, 2), html_num(x[1], 48, L->ramp_tokens, 0),
                           html_num(x[2], 48, L->steady_s, 2), html_num(x[3], 48, L->steady_tok_per_s, 1),
                           html_num(x[4], 48, L->predicted_tok_per_s, 1), html_num(x[5], 48, 100 * L->error_rel, 1),
                           html_num(x[6], 48, L->whole_tok_per_s, 1), html_num(x[7], 48, L->ttft.p50_ms, 1),
                           html_num(x[8], 48, L->ttft.p99_ms, 1), html_num(x[9], 48, L->ttfa.p50_ms, 1),
                           html_num(x[10], 48, L->ttfa.p99_ms, 1), html_num(x[11], 48, L->itl.p50_ms, 2),
                           html_num(x[12], 48, L->itl.p99_ms, 2));
    ll_buf_free(&fail);
    return rc;
}

static int level_table(ll_buf *b, const fit_result *r)
{
    if (ll_buf_printf(b, "<section><h2>Per level</h2><div class=scroll><table>\n<tr><th>C</th><th>requests ok</th>"
                         "<th class=l>failed (by class)</th><th>ramp s</th><th>ramp tokens</th><th>steady s</th>"
                         "<th>steady tok/s</th><th>law predicts</th><th>error</th><th>whole-level tok/s</th>"
                         "<th>TTFT p50 / p99 ms</th><th>TTFA p50 / p99 ms</th><th>ITL p50 / p99 ms</th></tr>\n"))
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++)
        if (level_row(b, &r->levels[i]))
            return LL_ENOMEM;
    return ll_buf_printf(b, "</table></div><p class=muted>Requests ok and failed: measured (non-warmup) "
                            "requests. Steady: spans with no request prefilling and all C decoding. Ramp: from "
                            "the level's start until D first reaches C. ITL: gap between chunk arrivals divided "
                            "by the tokens in the later arrival.</p></section>\n");
}

/* The GPU figures and diagnosis per level (fit/gpu.c "GPU figures and
 * diagnosis"), when any level has GPU telemetry or server metrics. */
static int gpu_table(ll_buf *b, const fit_result *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_levels; i++)
        any += r->levels[i].gpu_scrapes || r->levels[i].server_scrapes;
    if (!any)
        return 0;
    if (ll_buf_printf(b, "<section><h2>GPU and diagnosis</h2><div class=scroll><table>\n<tr><th>C</th>"
                         "<th>power / limit W</th><th>of cap</th><th>SM</th><th>tensor</th><th>DRAM</th>"
                         "<th>J/token</th><th>server waiting growth</th><th class=l>diagnosis</th></tr>\n"))
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++) {
        const fit_level *L = &r->levels[i];
        char x[8][48];
        if (ll_buf_printf(b, "<tr><td>%d</td><td>%s / %s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                             "<td>%s</td><td>%s</td><td class=l>%s (",
                          L->concurrency, html_num(x[0], 48, L->gpu_power_w, 1),
                          html_num(x[1], 48, L->gpu_power_limit_w, 1), html_num(x[2], 48, L->gpu_power_frac, 2),
                          html_num(x[3], 48, L->gpu_sm_active, 2), html_num(x[4], 48, L->gpu_tensor_active, 2),
                          html_num(x[5], 48, L->gpu_dram_active, 2), html_num(x[6], 48, L->gpu_j_per_tok, 4),
                          html_num(x[7], 48, L->server_waiting_growth, 2), fit_diag_name(L->diagnosis)) ||
            html_esc(b, L->diagnosis_why) || ll_buf_printf(b, ")</td></tr>\n"))
            return LL_ENOMEM;
    }
    if (ll_buf_printf(b, "</table></div><p class=muted>Means over the scrapes in each level's steady windows; "
                         "power and energy summed over GPUs, activities averaged; J/token from the energy "
                         "counter's difference. Rule, first that holds: ") ||
        html_esc(b, fit_diag_rule()) || ll_buf_printf(b, ".</p></section>\n"))
        return LL_ENOMEM;
    return 0;
}

static int kv(ll_buf *b, const char *k, const char *v)
{
    if (ll_buf_printf(b, "<tr><td class=l>%s</td><td class=l>", k) || html_esc(b, v && *v ? v : "\u2013"))
        return LL_ENOMEM;
    return ll_buf_printf(b, "</td></tr>\n");
}

/* The run's configuration as a key/value table. */
static int config_table(ll_buf *b, const fit_run_info *in)
{
    char t[64] = "", ranks[32], lines[320];
    time_t secs = (time_t)(in->epoch_wall_ns / 1000000000LL);
    struct tm tm;
    if (in->epoch_wall_ns > 0 && gmtime_r(&secs, &tm))
        strftime(t, sizeof t, "%Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(ranks, sizeof ranks, "%d", in->ranks);
    snprintf(lines, sizeof lines,
             "%zu read, %zu truncated last line, %zu of unknown type, %zu rejected (%zu values out of range), "
             "%zu bad requests, %zu with times clamped",
             in->n_lines, in->n_truncated, in->n_unknown, in->n_rejected, in->n_out_of_range, in->n_bad_requests,
             in->n_clamped);
    if (ll_buf_printf(b, "<section><h2>Run configuration</h2><table>\n") || kv(b, "target", in->target_url) ||
        kv(b, "model", in->model) || kv(b, "endpoint", in->endpoint) ||
        kv(b, "engine", in->bundled ? in->engine_spec : "remote server") || kv(b, "scenario", in->scenario))
        return LL_ENOMEM;
    if (kv(b, "host", in->host) || kv(b, "load ranks", ranks) || kv(b, "started", t) ||
        kv(b, "written by", in->version) || kv(b, "report by", "loadlaw " LOADLAW_VERSION) ||
        kv(b, "records", lines) || ll_buf_printf(b, "</table>\n"))
        return LL_ENOMEM;
    return 0;
}

/* The effective scenario the run recorded, folded. */
static int scenario_details(ll_buf *b, const fit_run_info *in)
{
    cJSON *rj = cJSON_ParseWithOpts(in->run_json ? in->run_json : "{}", NULL, 0);
    cJSON *cfg = rj ? cJSON_GetObjectItemCaseSensitive(rj, "config") : NULL;
    char *pretty = cfg ? cJSON_Print(cfg) : NULL;
    int rc = 0;
    if (pretty)
        rc = ll_buf_printf(b, "<details><summary>effective scenario</summary><pre>") || html_esc(b, pretty) ||
             ll_buf_printf(b, "</pre></details>\n");
    free(pretty);
    cJSON_Delete(rj);
    return rc ? LL_ENOMEM : 0;
}

static int config_section(ll_buf *b, const fit_run *run, const fit_result *r)
{
    const fit_run_info *in = fit_run_get_info(run);
    if (config_table(b, in) || scenario_details(b, in))
        return LL_ENOMEM;
    if (r->n_notes) {
        if (ll_buf_printf(b, "<h3>Notes from the analysis</h3><ul class=notes>"))
            return LL_ENOMEM;
        for (size_t i = 0; i < r->n_notes; i++)
            if (ll_buf_printf(b, "<li>") || html_esc(b, r->notes[i]) || ll_buf_printf(b, "</li>"))
                return LL_ENOMEM;
        if (ll_buf_printf(b, "</ul>\n"))
            return LL_ENOMEM;
    }
    return ll_buf_printf(b, "</section>\n");
}

/* The Pareto chart's frame and what it shows, in words that read without
 * scripts: why there is no curve, the objectives. */
static int pareto_section(ll_buf *b, const cJSON *pareto, const fit_slo *slo)
{
    const char *no_curve = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pareto, "no_curve"));
    char x[4][48];
    if (ll_buf_printf(b, "<section><h2>Per-user against total tokens/s</h2>"
                         "<div class='chart wide'><canvas id=chart-pareto></canvas></div>\n"
                         "<p class=muted>Each measured level: total output tokens/s against the tokens/s one "
                         "stream gets (closed loop: steady throughput and that over C; open loop, triangles: "
                         "output tokens/s and 1000 / TPOT p50). "))
        return LL_ENOMEM;
    if (no_curve) {
        if (ll_buf_printf(b, "<b>No law curve</b> (") || html_esc(b, no_curve) || ll_buf_printf(b, "). "))
            return LL_ENOMEM;
    } else if (ll_buf_printf(b, "The line is the law at C = 1, 2, &hellip; (total 1000&middot;C/(a+b&middot;C), "
                                "per user 1000/(a+b&middot;C), steady decode, as <code>loadlaw plan</code> "
                                "computes them) with its 95%% band; dashed beyond the largest measured C "
                                "(extrapolation). ")) {
        return LL_ENOMEM;
    }
    if (slo && fit_slo_given(slo->tpot_ms) &&
        ll_buf_printf(b, "Red line: ITL/TPOT &le; %s ms, i.e. at least %s tokens/s per user. ",
                      html_num(x[0], 48, slo->tpot_ms, 1), html_num(x[1], 48, 1000.0 / slo->tpot_ms, 2)))
        return LL_ENOMEM;
    if (slo && (fit_slo_given(slo->tpot_ms) || fit_slo_given(slo->ttft_ms) || fit_slo_given(slo->e2e_ms))) {
        static const char *const names[3] = {"TTFT", "TPOT", "E2E"};
        const double v[3] = {slo->ttft_ms, slo->tpot_ms, slo->e2e_ms};
        const char *sep = "";
        if (ll_buf_printf(b, "Green points: at least %.0f%% of the level&#39;s measured requests met every "
                             "objective (", 100 * RPT_PARETO_ATTAINMENT))
            return LL_ENOMEM;
        for (int k = 0; k < 3; k++) {
            if (!fit_slo_given(v[k]))
                continue;
            if (ll_buf_printf(b, "%s%s &le; %s ms", sep, names[k], html_num(x[k], 48, v[k], 1)))
                return LL_ENOMEM;
            sep = ", ";
        }
        if (ll_buf_printf(b, "; goodput as <code>loadlaw plan</code> counts it, the share beside each "
                             "point); red ones did not."))
            return LL_ENOMEM;
    } else if (ll_buf_printf(b, "No objectives given (<code>loadlaw report RUN_DIR --itl-slo 50ms "
                                "[--ttft-slo DUR] [--e2e-slo DUR]</code> adds them).")) {
        return LL_ENOMEM;
    }
    return ll_buf_printf(b, "</p></section>\n");
}

/* What the step-time model sees: the steady samples against N coloured by
 * their context per request with the chosen model at three contexts, and
 * the residuals against N and against K (report_model.c's data). */
static int model_section(ll_buf *b, const fit_result *r)
{
    const fit_model_check *m = &r->model;
    int ctx = m->done && m->chosen.p && fit_model_fit_has(&m->chosen, FIT_TERM_K);
    if (ll_buf_printf(b, "<section><h2>What the model sees</h2><div class='chart wide'><canvas id=chart-model>"
                         "</canvas></div><div class=grid2><div class='chart small'><canvas id=chart-resid-n>"
                         "</canvas></div><div class='chart small'><canvas id=chart-resid-k></canvas></div></div>\n"
                         "<p class=muted>Steady samples coloured by the context of each running request (K/N: "
                         "prompt and tokens so far, in tokens). "))
        return LL_ENOMEM;
    if (!r->law.ok) {
        if (ll_buf_printf(b, "No model: no law was fitted (") ||
            html_esc(b, r->no_law[0] ? r->no_law : "too few steady samples") ||
            ll_buf_printf(b, "), so there are no lines and no residuals.</p></section>\n"))
            return LL_ENOMEM;
        return 0;
    }
    if (ll_buf_printf(b, ctx ? "The lines are the chosen model (%s) at the 10th, 50th and 90th percentile of K/N "
                               "(K = N &times; that): samples of one colour should sit on the line of that colour. "
                             : "The line is the chosen model (%s): it has no context term. ",
                      fit_model_name(m->done ? m->best : FIT_MODEL_LINEAR)) ||
        ll_buf_printf(b, "Residuals: measured minus the model at each sample&#39;s own N and K, in ms per token; "
                         "a trend in either chart is what the model misses.</p></section>\n"))
        return LL_ENOMEM;
    return 0;
}

static int level_block(ll_buf *b, const fit_level *L, size_t i)
{
    char x[2][48];
    if (ll_buf_printf(b, "<div class=level><h3>Level %d: C = %d, %zu requests, steady %s tok/s</h3>"
                         "<div class=grid2><div class='chart small'><canvas id=tl-%zu></canvas></div>"
                         "<div class='chart small'><canvas id=rate-%zu></canvas></div></div>"
                         "<div class=grid2><div class='chart small'><canvas id=dist-%zu></canvas></div>"
                         "<div class='chart small'><canvas id=pos-%zu></canvas></div></div><p class=pos>",
                      L->level, L->concurrency, L->n_requests, html_num(x[0], 48, L->steady_tok_per_s, 1), i, i, i,
                      i) ||
        rpt_position_words(b, L) ||
        ll_buf_printf(b, "</p><p class=muted>duration %s s</p></div>\n", html_num(x[1], 48, L->duration_s, 2)))
        return LL_ENOMEM;
    return 0;
}

static int charts_section(ll_buf *b, const fit_result *r, const cJSON *pareto, const fit_slo *slo)
{
    if (ll_buf_printf(b, "<section><h2>Throughput and step time</h2><div class=grid2>"
                         "<div class=chart><canvas id=chart-throughput></canvas></div>"
                         "<div class=chart><canvas id=chart-step></canvas></div></div></section>\n") ||
        model_section(b, r) || pareto_section(b, pareto, slo) ||
        ll_buf_printf(b, "<section><h2>Each level</h2><p class=pos-summary>") || rpt_position_summary(b, r) ||
        ll_buf_printf(b, "</p><p class=muted>Timelines: the ramp is shaded orange, steady windows green. Step "
                         "against position: the mean ms per token by the tokens a request had received, in steady "
                         "steps (closed loop: at N = C) and over every step; early and late are the first and the "
                         "last quarter of positions.</p>\n"))
        return LL_ENOMEM;
    for (size_t i = 0; i < r->n_levels; i++)
        if (level_block(b, &r->levels[i], i))
            return LL_ENOMEM;
    return ll_buf_printf(b, "</section>\n");
}

int rpt_write_html_from(const char *run_dir, const fit_run *run, const fit_result *res,
                        const char *out_path, char *path_out, size_t path_len, char *err,
                        size_t errlen)
{
    return rpt_write_html_with(run_dir, run, res, NULL, out_path, path_out, path_len, err, errlen);
}

/* Where the report goes: out_path, else report.html in the run directory
 * (beside records.jsonl when run_dir names the file). Caller frees; NULL on
 * no memory. */
static char *report_path(const char *run_dir, const char *out_path)
{
    if (out_path)
        return strdup(out_path);
    struct stat st;
    size_t n = strlen(run_dir) + 16;
    char *path = malloc(n);
    if (!path)
        return NULL;
    if (stat(run_dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        const char *slash = strrchr(run_dir, '/');
        snprintf(path, n, "%.*sreport.html", slash ? (int)(slash - run_dir + 1) : 0, run_dir);
    } else {
        snprintf(path, n, "%s/report.html", run_dir);
    }
    return path;
}

/* The page's head, title and the run's one-line description. */
static int page_header(ll_buf *b, const char *run_dir, const fit_run *run)
{
    const fit_run_info *in = fit_run_get_info(run);
    char title[512];
    snprintf(title, sizeof title, "loadlaw report \u2014 %s", run_dir);
    if (html_page_begin(b, title) || ll_buf_printf(b, "<header><h1>") || html_esc(b, title) ||
        ll_buf_printf(b, "</h1><div class=sub>") ||
        html_escf(b, "%s \u00b7 %s \u00b7 %s \u00b7 host %s", in->target_url, in->model,
                  in->bundled ? in->engine_spec : "remote server", in->host) ||
        ll_buf_printf(b, "</div></header>\n<main>\n"))
        return LL_ENOMEM;
    return 0;
}

int rpt_write_html_with(const char *run_dir, const fit_run *run, const fit_result *res,
                        const fit_slo *slo, const char *out_path, char *path_out, size_t path_len,
                        char *err, size_t errlen)
{
    cJSON *pareto = NULL;
    ll_buf b = {0};
    cJSON *data = NULL;
    char *path = NULL;
    int rc = LL_ENOMEM;
    if (!(path = report_path(run_dir, out_path)) || page_header(&b, run_dir, run))
        goto oom;
    pareto = rpt_pareto_json(run, res, slo, err, errlen);
    if (!pareto)
        goto oom;
    if ((rc = law_section(&b, res)) || (rc = charts_section(&b, res, pareto, slo)) ||
        (rc = level_table(&b, res)) || (rc = rpt_server_table(&b, res)) || (rc = gpu_table(&b, res)) ||
        (rc = config_section(&b, run, res)))
        goto fail;
    if (ll_buf_printf(&b, "</main>\n"))
        goto oom;
    data = rpt_run_chart_data(run, res, 1, err, errlen);
    if (!data || !cJSON_AddStringToObject(data, "kind", "run") || !cJSON_AddItemToObject(data, "pareto", pareto))
        goto oom;
    pareto = NULL; /* data owns it */
    if ((rc = html_page_end(&b, data, err, errlen)) || (rc = html_write_file(&b, path, err, errlen)))
        goto fail;
    if (path_out && path_len)
        snprintf(path_out, path_len, "%s", path);
    rc = 0;
    goto done;
oom:
    rc = LL_ENOMEM;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "out of memory writing the report");
done:
    cJSON_Delete(pareto);
    cJSON_Delete(data);
    ll_buf_free(&b);
    free(path);
    return rc;
}

int rpt_write_html(const char *run_dir, const char *out_path, char *path_out, size_t path_len,
                   char *err, size_t errlen)
{
    fit_run *run = NULL;
    fit_result *res = NULL;
    int rc = fit_open(run_dir, NULL, &run, &res, err, errlen);
    if (rc == 0)
        rc = rpt_write_html_from(run_dir, run, res, out_path, path_out, path_len, err, errlen);
    fit_result_free(res);
    fit_run_free(run);
    return rc;
}
