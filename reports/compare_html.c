/* compare_html.c: the page of `loadlaw compare --html` — the verdict, both
 * runs' throughput curves and step-time fits overlaid, the speedup per level
 * with its interval, and the tables of the terminal output in HTML. */
#include <math.h>
#include <string.h>

#include "html_internal.h"

static int cell_change(ll_buf *b, double a, double bb)
{
    char x[3][48];
    if (!isfinite(a) || !isfinite(bb))
        return ll_buf_printf(b, "<td>\u2013</td>");
    return ll_buf_printf(b, "<td>%s &rarr; %s (%s%%)</td>", html_num(x[0], 48, a, 1), html_num(x[1], 48, bb, 1),
                         html_num(x[2], 48, a > 0 ? round(100 * (bb / a - 1)) + 0.0 : NAN, 0));
}

static int law_row(ll_buf *b, const char *tag, const char *label, const fit_law *l, double asym)
{
    char x[7][48];
    if (ll_buf_printf(b, "<tr><td class=l>%s: ", tag) || html_esc(b, label) || ll_buf_printf(b, "</td>"))
        return LL_ENOMEM;
    if (!l->ok)
        return ll_buf_printf(b, "<td colspan=5 class=l>no law (too few steady points)</td></tr>\n");
    return ll_buf_printf(b, "<td>%s</td><td>[%s, %s]</td><td>%s</td><td>[%s, %s]</td><td>%s</td></tr>\n",
                         html_num(x[0], 48, l->a_ms, 3), html_num(x[1], 48, l->a_ci_ms[0], 3),
                         html_num(x[2], 48, l->a_ci_ms[1], 3), html_num(x[3], 48, l->b_ms, 4),
                         html_num(x[4], 48, l->b_ci_ms[0], 4), html_num(x[5], 48, l->b_ci_ms[1], 4),
                         html_num(x[6], 48, asym, 1));
}

static int tables(ll_buf *b, const fit_compare *c, const char *la, const char *lb)
{
    char x[6][48];
    if (ll_buf_printf(b, "<section><h2>Laws</h2><table><tr><th class=l>run</th><th>a ms</th><th>a 95%%</th>"
                         "<th>b ms</th><th>b 95%%</th><th>asymptote tok/s</th></tr>\n") ||
        law_row(b, "A", la, &c->law_a, c->asym_a_tok_per_s) || law_row(b, "B", lb, &c->law_b, c->asym_b_tok_per_s) ||
        ll_buf_printf(b, "</table><p>Slope ratio B/A: <b>%s</b> [%s, %s] (%s)</p></section>\n",
                      html_num(x[0], 48, c->slope_ratio, 3), html_num(x[1], 48, c->slope_ratio_ci[0], 3),
                      html_num(x[2], 48, c->slope_ratio_ci[1], 3), c->slope_method))
        return LL_ENOMEM;
    if (ll_buf_printf(b, "<section><h2>Per level</h2><div class=scroll><table><tr><th>C</th><th>A tok/s</th>"
                         "<th>B tok/s</th><th>B/A</th><th>%.0f%% interval</th><th>TTFT p50 ms</th><th>TTFA p50 ms</th>"
                         "<th>ITL p50 ms</th><th>TTFT p99 ms</th><th>TTFA p99 ms</th><th>ITL p99 ms</th></tr>\n",
                      100 * c->ci))
        return LL_ENOMEM;
    for (size_t i = 0; i < c->n_levels; i++) {
        const fit_compare_level *L = &c->levels[i];
        if (ll_buf_printf(b, "<tr><td>%d%s</td><td>%s</td><td>%s</td><td><b>%s</b></td><td>[%s, %s]</td>",
                          L->concurrency, L->steady ? "" : " (decode spans)", html_num(x[0], 48, L->tok_per_s_a, 1),
                          html_num(x[1], 48, L->tok_per_s_b, 1), html_num(x[2], 48, L->ratio, 2),
                          html_num(x[3], 48, L->ratio_ci[0], 2), html_num(x[4], 48, L->ratio_ci[1], 2)) ||
            cell_change(b, L->lat_a.ttft.p50_ms, L->lat_b.ttft.p50_ms) ||
            cell_change(b, L->lat_a.ttfa.p50_ms, L->lat_b.ttfa.p50_ms) ||
            cell_change(b, L->lat_a.itl.p50_ms, L->lat_b.itl.p50_ms) ||
            cell_change(b, L->lat_a.ttft.p99_ms, L->lat_b.ttft.p99_ms) ||
            cell_change(b, L->lat_a.ttfa.p99_ms, L->lat_b.ttfa.p99_ms) ||
            cell_change(b, L->lat_a.itl.p99_ms, L->lat_b.itl.p99_ms) || ll_buf_printf(b, "</tr>\n"))
            return LL_ENOMEM;
    }
    return ll_buf_printf(b, "</table></div><p class=muted>Intervals: percentile bootstrap over %d resamples of "
                            "engine steps (every request's tokens in a step move together).</p></section>\n",
                         c->n_resamples);
}

static cJSON *run_json(const char *label, const fit_run *run, const fit_result *res, char *err, size_t errlen)
{
    cJSON *d = rpt_run_chart_data(run, res, 0, err, errlen);
    if (!d)
        return NULL;
    char tag[600];
    snprintf(tag, sizeof tag, "%s: ", label);
    if (!cJSON_AddStringToObject(d, "label", tag)) {
        cJSON_Delete(d);
        return NULL;
    }
    /* the comparison chart overlays steady samples only */
    cJSON *s = cJSON_DetachItemFromObject(cJSON_GetObjectItem(d, "samples"), "steady");
    cJSON_DeleteItemFromObject(d, "samples");
    if (s)
        cJSON_AddItemToObject(d, "samples", s);
    return d;
}

/* A run's headline (reports/headline.c), under the verdict. */
static int run_headline(ll_buf *p, const char *side, const fit_result *r)
{
    char text[1024];
    if (r->law.ok)
        rpt_headline_text(r, text, sizeof text);
    if (ll_buf_printf(p, "<p><b>%s:</b> ", side) || html_esc(p, r->law.ok ? text : r->no_law))
        return LL_ENOMEM;
    if (r->law.ok) {
        rpt_heldout_text(r, text, sizeof text);
        if (ll_buf_printf(p, "<br><span class=muted>") || html_esc(p, text) || ll_buf_printf(p, "</span>"))
            return LL_ENOMEM;
    }
    return ll_buf_printf(p, "</p>\n");
}

int rpt_compare_write_html(const char *out_path, const char *label_a, const fit_run *a,
                           const fit_result *ra, const char *label_b, const fit_run *b,
                           const fit_result *rb, const fit_compare *c, char *err, size_t errlen)
{
    ll_buf p = {0};
    cJSON *data = cJSON_CreateObject(), *runs = data ? cJSON_AddArrayToObject(data, "runs") : NULL;
    cJSON *ja = NULL, *jb = NULL, *jc = NULL;
    int rc = LL_ENOMEM;
    if (!runs || !cJSON_AddStringToObject(data, "kind", "compare"))
        goto fail;
    ja = run_json("A", a, ra, err, errlen);
    if (!ja || !cJSON_AddItemToArray(runs, ja))
        goto fail;
    jb = run_json("B", b, rb, err, errlen);
    if (!jb || !cJSON_AddItemToArray(runs, jb))
        goto fail;
    jc = rpt_compare_to_json(c);
    if (!jc || !cJSON_AddItemToObject(data, "compare", jc))
        goto fail;
    jb = jc = NULL;
    char title[1024];
    snprintf(title, sizeof title, "loadlaw compare \u2014 A: %s, B: %s", label_a, label_b);
    if (html_page_begin(&p, title) || ll_buf_printf(&p, "<header><h1>") || html_esc(&p, title) ||
        ll_buf_printf(&p, "</h1><div class=sub>A is the baseline; ratios are B over A</div></header>\n<main>\n"
                          "<section><div class=verdict>") ||
        html_esc(&p, c->verdict) || ll_buf_printf(&p, "</div>") || run_headline(&p, "A", ra) ||
        run_headline(&p, "B", rb) ||
        ll_buf_printf(&p, "</section>\n<section><h2>Curves</h2><div class=grid2>"
                          "<div class=chart><canvas id=chart-throughput></canvas></div>"
                          "<div class=chart><canvas id=chart-step></canvas></div></div>"
                          "<div class='chart small'><canvas id=chart-ratio></canvas></div></section>\n") ||
        tables(&p, c, label_a, label_b) || ll_buf_printf(&p, "</main>\n"))
        goto fail;
    if ((rc = html_page_end(&p, data, err, errlen)) || (rc = html_write_file(&p, out_path, err, errlen)))
        goto out;
    rc = 0;
    goto out;
fail:
    rc = LL_ENOMEM;
    ll_errf(err, errlen, "out of memory writing the comparison page");
out:
    cJSON_Delete(data);
    ll_buf_free(&p);
    return rc;
}
