/* html_util.c: the frame every loadlaw page shares — escaping, stylesheet,
 * Chart.js and the page script inlined, the embedded JSON, atomic writes.
 *
 * A page must open offline in any browser years from now, so nothing is
 * linked: Chart.js (read from Debian's libjs-chart.js at report time) and
 * report.js (compiled into the binary) are copied into every file. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "html_internal.h"

#ifndef LOADLAW_CHARTJS_PATH
#define LOADLAW_CHARTJS_PATH "/usr/share/javascript/chart.js/chart.min.js"
#endif

const char *rpt_chartjs_path(void)
{
    const char *env = getenv("LOADLAW_CHARTJS");
    if (env && *env)
        return env;
    return LOADLAW_CHARTJS_PATH[0] ? LOADLAW_CHARTJS_PATH : "/usr/share/javascript/chart.js/chart.min.js";
}

int html_esc(ll_buf *b, const char *s)
{
    if (!s)
        return 0;
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        case ':': /* "://" -> "&#58;//": no URL text in the page (see below) */
            if (s[1] != '/' || s[2] != '/')
                continue;
            rep = "&#58;";
            break;
        default: continue;
        }
        if (ll_buf_append(b, run, (size_t)(s - run)) || ll_buf_append(b, rep, strlen(rep)))
            return LL_ENOMEM;
        run = s + 1;
    }
    return ll_buf_append(b, run, (size_t)(s - run));
}

int html_escf(ll_buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return html_esc(b, tmp);
}

const char *html_num(char *buf, size_t n, double x, int d)
{
    if (!isfinite(x)) {
        snprintf(buf, n, "\u2013");
        return buf;
    }
    double scale = pow(10, d), r = round(x * scale) / scale;
    snprintf(buf, n, "%.*f", d, r == 0 ? 0.0 : x); /* never "-0.0" */
    return buf;
}

static const char *style =
    "<style>\n"
    ":root{--fg:#111827;--muted:#6b7280;--line:#e5e7eb;--card:#fff;--bg:#f6f7f9;--accent:#2563eb}\n"
    "*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);"
    "font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}\n"
    "header{background:#0f172a;color:#f8fafc;padding:18px 28px}header h1{margin:0;font-size:20px;font-weight:600}"
    "header .sub{color:#cbd5e1;font-size:13px;margin-top:4px}\n"
    "main{max-width:1280px;margin:0 auto;padding:18px 24px 48px}\n"
    "section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:16px 0}\n"
    "h2{font-size:16px;margin:0 0 10px;font-weight:600}h3{font-size:14px;margin:14px 0 8px;font-weight:600}\n"
    ".law{font-size:18px;font-weight:600;margin:2px 0 6px}.muted{color:var(--muted)}.warn{color:#b00020}\n"
    ".verdict{font-size:17px;font-weight:600;padding:10px 14px;border-left:4px solid var(--accent);background:#eff6ff}\n"
    ".grid2{display:grid;grid-template-columns:1fr 1fr;gap:14px}@media(max-width:900px){.grid2{grid-template-columns:1fr}}\n"
    ".chart{position:relative;height:330px}.chart.small{height:250px}.chart.wide{height:440px}\n"
    "table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}"
    "th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}"
    "th{background:#f9fafb;font-weight:600;color:#374151}td.l,th.l{text-align:left;white-space:normal}"
    "tr:nth-child(even) td{background:#fcfcfd}\n"
    ".scroll{overflow-x:auto}pre{background:#f9fafb;border:1px solid var(--line);padding:10px;overflow:auto;"
    "font-size:12px;max-height:360px}\n"
    "#ll-errors{display:none;background:#fee2e2;color:#991b1b;padding:10px 14px;border-radius:8px;margin:12px 0}\n"
    ".level{border-top:1px solid var(--line);padding-top:10px;margin-top:14px}\n"
    "ul.notes{margin:6px 0 0 18px;padding:0}.nodata{padding:40px 10px;text-align:center}\n"
    "</style>\n";

int html_page_begin(ll_buf *b, const char *title)
{
    if (ll_buf_printf(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                         "<meta name=\"generator\" content=\"loadlaw %s\">\n<title>",
                      LOADLAW_VERSION) ||
        html_esc(b, title) || ll_buf_printf(b, "</title>\n%s</head>\n<body>\n", style))
        return LL_ENOMEM;
    return ll_buf_printf(b, "<div id=\"ll-errors\"></div>\n");
}

/* JSON inside <script> must hold no '<' at all: "</script" would close the
 * block, and "<!--" followed by "<script" switches the tokenizer into the
 * script-data escaped states, where the block's own "</script>" no longer
 * ends it. '<' occurs only inside JSON strings, where "\u003c" is the same
 * character to JSON.parse. "://" is written ":\/\/" (also the same string),
 * so that no URL appears in the page's text (see append_script). */
static int append_json_safe(ll_buf *b, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        if (s[0] == '<') {
            if (ll_buf_append(b, run, (size_t)(s - run)) || ll_buf_append(b, "\\u003c", 6))
                return LL_ENOMEM;
            run = s + 1;
        } else if (s[0] == ':' && s[1] == '/' && s[2] == '/') {
            if (ll_buf_append(b, run, (size_t)(s - run + 1)) || ll_buf_append(b, "\\/\\/", 4))
                return LL_ENOMEM;
            s += 2;
            run = s + 1;
        }
    }
    return ll_buf_append(b, run, (size_t)(s - run));
}

/* A script inlined with every "://" written ":/\/". The page must hold no
 * http(s) URL at all, so that "opens offline" can be checked by grep: Chart.js
 * names its home page and a dependency's in its licence banner. In a comment
 * the change is invisible; in a string or regex literal "\/" is "/" again. */
static int append_script(ll_buf *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i + 2 < n; i++) {
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            if (ll_buf_append(b, s + run, i + 2 - run) || ll_buf_append(b, "\\", 1))
                return LL_ENOMEM;
            run = i + 2;
        }
    }
    return ll_buf_append(b, s + run, n - run);
}

int html_page_end(ll_buf *b, const cJSON *data, char *err, size_t errlen)
{
    const char *cj = rpt_chartjs_path();
    char *chart = NULL;
    size_t chart_len = 0;
    char msg[256];
    if (ll_read_file(cj, &chart, &chart_len, msg, sizeof msg)) {
        ll_errf(err, errlen, "cannot read Chart.js at %s (install Debian's libjs-chart.js, or set "
                             "LOADLAW_CHARTJS): %s", cj, msg);
        return LL_EIO;
    }
    if (strstr(chart, "</script")) {
        free(chart);
        ll_errf(err, errlen, "%s contains \"</script\" and cannot be inlined", cj);
        return LL_EINVAL;
    }
    char *json = cJSON_PrintUnformatted(data);
    int rc = LL_ENOMEM;
    if (!json)
        goto out;
    if (ll_buf_printf(b, "<script id=\"ll-data\" type=\"application/json\">") || append_json_safe(b, json) ||
        ll_buf_printf(b, "</script>\n<script>/* Chart.js, inlined from %s */\n", cj) ||
        append_script(b, chart, chart_len) || ll_buf_printf(b, "\n</script>\n<script>\n") ||
        append_script(b, rpt_report_js, rpt_report_js_len) || ll_buf_printf(b, "\n</script>\n</body></html>\n"))
        goto out;
    rc = 0;
out:
    if (rc)
        ll_errf(err, errlen, "out of memory");
    free(json);
    free(chart);
    return rc;
}

int html_write_file(const ll_buf *b, const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        ll_errf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return LL_EIO;
    }
    int ok = fwrite(b->p, 1, b->len, f) == b->len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        ll_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return LL_EIO;
    }
    free(tmp);
    return 0;
}

int rpt_json_add(cJSON *o, const char *k, cJSON *v)
{
    if (!v)
        return -1;
    if (!cJSON_AddItemToObject(o, k, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}

int rpt_json_push(cJSON *arr, cJSON *v)
{
    if (!v)
        return -1;
    if (!cJSON_AddItemToArray(arr, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}
