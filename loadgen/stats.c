/* stats.c: per-level statistics merged from the workers after join, the
 * summary.json file and the terminal table.
 *
 * Definitions (DESIGN.md "Measuring the right thing"): TTFT = first token of
 * any kind - send; TTFA = first answer token - send; TPOT = (last token -
 * first token) / (tokens - 1) per request; ITL = gap between chunk arrivals /
 * tokens in the later chunk; E2E = end - send. Latencies use measured requests
 * that succeeded; warmup requests are excluded from everything but the ramp
 * and the throughput (they load the server like any other request). */
#include "lg_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill(lg_stat *s, ll_pct *p)
{
    s->n = p ? ll_pct_count(p) : 0;
    if (!s->n) {
        s->p50 = s->p90 = s->p99 = s->mean = NAN;
        return;
    }
    s->p50 = ll_pct_quantile(p, 0.50);
    s->p90 = ll_pct_quantile(p, 0.90);
    s->p99 = ll_pct_quantile(p, 0.99);
    s->mean = ll_pct_mean(p);
}

typedef struct ev {
    int64_t t;
    int d;
} ev;

static int ev_cmp(const void *a, const void *b)
{
    const ev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return y->d - x->d; /* at equal times, a start before an end */
}

/* Time from level start until D (requests decoding) first reached C. */
static double ramp_s(lg_run *r, const lg_level_ctx *L)
{
    size_t n = 0, k = 0;
    for (int i = 0; i < r->nthreads; i++)
        n += r->workers[i].n_res;
    ev *e = malloc(2 * n * sizeof *e + 1);
    double out = NAN;
    if (!e)
        return NAN;
    for (int i = 0; i < r->nthreads; i++)
        for (size_t j = 0; j < r->workers[i].n_res; j++) {
            const lg_result *x = &r->workers[i].res[j];
            if (x->first_tok_ns < 0)
                continue;
            e[k++] = (ev){x->first_tok_ns, 1};
            e[k++] = (ev){x->end_ns, -1};
        }
    qsort(e, k, sizeof *e, ev_cmp);
    int d = 0;
    for (size_t i = 0; i < k; i++) {
        d += e[i].d;
        if (d >= L->lv->concurrency) {
            out = (double)(e[i].t - L->start_ns) / 1e9;
            break;
        }
    }
    free(e);
    return out;
}

void lg_level_stats(lg_run *r, const lg_level_ctx *L, int64_t end_ns, lg_level_summary *s)
{
    ll_pct *p[8];
    int64_t all_tok = 0;
    int ok_all = 0;
    memset(s, 0, sizeof *s);
    int have_pct = 1;
    for (int i = 0; i < 8; i++)
        have_pct &= (p[i] = ll_pct_new(0)) != NULL; /* out of memory: counts only, latencies NAN */
    s->level = L->index;
    s->concurrency = L->lv->concurrency;
    s->rate_per_s = L->lv->rate_per_s;
    s->n_requests = L->total - L->warmup;
    s->warmup = L->warmup;
    s->interrupted = atomic_load(&r->interrupted);
    s->duration_s = (double)(end_ns - L->start_ns) / 1e9;
    for (int i = 0; i < r->nthreads; i++) {
        const lg_worker *w = &r->workers[i];
        for (size_t j = 0; j < w->n_res; j++) {
            const lg_result *x = &w->res[j];
            if (x->cls == LG_OK) {
                all_tok += x->think_tok + x->answer_tok;
                ok_all++;
            }
            if (x->warmup)
                continue;
            s->sent++;
            if (x->cls != LG_OK) {
                s->failed++;
                s->failed_by_class[x->cls]++;
                continue;
            }
            s->ok++;
            s->think_tok += x->think_tok;
            s->answer_tok += x->answer_tok;
            if (x->usage_completion > 0)
                s->usage_completion_tok += x->usage_completion;
            int tok = x->think_tok + x->answer_tok;
            if (!have_pct)
                continue;
            if (x->first_tok_ns >= 0)
                ll_pct_add(p[0], (double)(x->first_tok_ns - x->send_ns) / 1e6);
            if (x->first_answer_ns >= 0)
                ll_pct_add(p[1], (double)(x->first_answer_ns - x->send_ns) / 1e6);
            if (tok > 1 && x->last_tok_ns > x->first_tok_ns)
                ll_pct_add(p[2], (double)(x->last_tok_ns - x->first_tok_ns) / 1e6 / (tok - 1));
            ll_pct_add(p[3], (double)(x->end_ns - x->send_ns) / 1e6);
            if (x->intended_ns >= 0) {
                ll_pct_add(p[4], (double)(x->send_ns - x->intended_ns) / 1e6);
                if (x->first_tok_ns >= 0)
                    ll_pct_add(p[5], (double)(x->first_tok_ns - x->intended_ns) / 1e6);
                ll_pct_add(p[6], (double)(x->end_ns - x->intended_ns) / 1e6);
            }
        }
        if (have_pct && w->itl_ms && ll_pct_merge(p[7], w->itl_ms))
            ll_warn("level %d: merging ITL samples failed (out of memory)", L->index);
    }
    fill(&s->ttft_ms, p[0]);
    fill(&s->ttfa_ms, p[1]);
    fill(&s->tpot_ms, p[2]);
    fill(&s->e2e_ms, p[3]);
    fill(&s->lag_ms, p[4]);
    fill(&s->ttft_intended_ms, p[5]);
    fill(&s->e2e_intended_ms, p[6]);
    fill(&s->itl_ms, p[7]);
    for (int i = 0; i < 8; i++)
        ll_pct_free(p[i]);
    /* Rates over the level's wall time. output_tok_per_s and req_per_s count
     * every successful request (warmup too: it loaded the server in that
     * time); the thinking/answer rates count measured requests only. */
    double d = s->duration_s > 0 ? s->duration_s : NAN;
    s->output_tok_per_s = (double)all_tok / d;
    s->think_tok_per_s = (double)s->think_tok / d;
    s->answer_tok_per_s = (double)s->answer_tok / d;
    s->req_per_s = (double)ok_all / d;
    s->ramp_s = L->lv->rate_per_s > 0 ? NAN : ramp_s(r, L);
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void add_stat(cJSON *o, const char *k, const lg_stat *s)
{
    cJSON *x = cJSON_AddObjectToObject(o, k);
    if (!x)
        return;
    cJSON_AddNumberToObject(x, "n", (double)s->n);
    add_num(x, "p50", s->p50);
    add_num(x, "p90", s->p90);
    add_num(x, "p99", s->p99);
    add_num(x, "mean", s->mean);
}

int lg_run_write_summary(lg_run *r, char *err, size_t errlen)
{
    char path[4096];
    cJSON *o = cJSON_CreateObject(), *lv;
    int rc = LL_ENOMEM;
    FILE *f = NULL;
    char *text = NULL;
    if (!o)
        return LL_ENOMEM;
    cJSON_AddStringToObject(o, "tool", "loadlaw");
    cJSON_AddNumberToObject(o, "schema", LL_RECORDS_SCHEMA);
    cJSON_AddStringToObject(o, "units", "latencies in ms; rates per second");
    cJSON_AddBoolToObject(o, "interrupted", lg_run_interrupted(r));
    cJSON_AddStringToObject(o, "url", r->url_base);
    cJSON_AddStringToObject(o, "model", r->model);
    if (!(lv = cJSON_AddArrayToObject(o, "levels")))
        goto out;
    for (size_t i = 0; i < r->n_levels; i++) {
        const lg_level_summary *s = &r->levels[i];
        cJSON *l = cJSON_CreateObject(), *fc;
        if (!l)
            goto out;
        cJSON_AddItemToArray(lv, l);
        cJSON_AddNumberToObject(l, "level", s->level);
        cJSON_AddNumberToObject(l, "concurrency", s->concurrency);
        cJSON_AddStringToObject(l, "mode", s->rate_per_s > 0 ? "open" : "closed");
        add_num(l, "rate_per_s", s->rate_per_s > 0 ? s->rate_per_s : NAN);
        cJSON_AddNumberToObject(l, "n_requests", s->n_requests);
        cJSON_AddNumberToObject(l, "warmup", s->warmup);
        cJSON_AddNumberToObject(l, "sent", s->sent);
        cJSON_AddNumberToObject(l, "ok", s->ok);
        cJSON_AddNumberToObject(l, "failed", s->failed);
        if (!(fc = cJSON_AddObjectToObject(l, "failed_by_class")))
            goto out;
        for (int c = 1; c < LG_ERR__COUNT; c++)
            cJSON_AddNumberToObject(fc, lg_err_class_name((lg_err_class)c), s->failed_by_class[c]);
        cJSON_AddBoolToObject(l, "interrupted", s->interrupted);
        add_num(l, "duration_s", s->duration_s);
        add_num(l, "ramp_s", s->ramp_s);
        add_stat(l, "ttft_ms", &s->ttft_ms);
        add_stat(l, "ttfa_ms", &s->ttfa_ms);
        add_stat(l, "tpot_ms", &s->tpot_ms);
        add_stat(l, "itl_ms", &s->itl_ms);
        add_stat(l, "e2e_ms", &s->e2e_ms);
        if (s->rate_per_s > 0) {
            add_stat(l, "client_lag_ms", &s->lag_ms);
            add_stat(l, "ttft_from_intended_ms", &s->ttft_intended_ms);
            add_stat(l, "e2e_from_intended_ms", &s->e2e_intended_ms);
        }
        cJSON_AddNumberToObject(l, "think_tok", (double)s->think_tok);
        cJSON_AddNumberToObject(l, "answer_tok", (double)s->answer_tok);
        cJSON_AddNumberToObject(l, "usage_completion_tok", (double)s->usage_completion_tok);
        add_num(l, "think_tok_per_s", s->think_tok_per_s);
        add_num(l, "answer_tok_per_s", s->answer_tok_per_s);
        add_num(l, "output_tok_per_s", s->output_tok_per_s);
        add_num(l, "req_per_s", s->req_per_s);
    }
    if (!(text = cJSON_Print(o)))
        goto out;
    snprintf(path, sizeof path, "%s/summary.json", r->run_dir);
    if (!(f = fopen(path, "w")) || fputs(text, f) < 0 || fputc('\n', f) < 0) {
        ll_errf(err, errlen, "%s: cannot write", path);
        rc = LL_EIO;
        goto out;
    }
    rc = 0;
out:
    if (f && fclose(f) != 0 && rc == 0) {
        ll_errf(err, errlen, "%s: cannot write", path);
        rc = LL_EIO;
    }
    cJSON_free(text);
    cJSON_Delete(o);
    return rc;
}

/* "%9.2f", or "-" where there were no samples. */
static void put_ms(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, " %9.2f", v);
    else
        fprintf(f, " %9s", "-");
}

static void put_stat_row(FILE *f, const char *name, const lg_stat *st)
{
    fprintf(f, "%12s %-10s", "", name);
    put_ms(f, st->p50);
    put_ms(f, st->p90);
    put_ms(f, st->p99);
    put_ms(f, st->mean);
    fprintf(f, " %8zu\n", st->n);
}

/* Two tables: counts and rates, one row per level; then latencies, one row
 * per level and metric (p50/p90/p99/mean), so the lines stay under ~100
 * columns whatever the metric. */
void lg_run_print_table(const lg_run *r, FILE *f)
{
    fprintf(f, "%5s %6s %6s %6s %9s %7s %9s %10s %8s %9s %7s\n", "level", "C", "ok", "failed", "out_tok/s",
            "req/s", "think_tok", "answer_tok", "think/s", "answer/s", "ramp_s");
    for (size_t i = 0; i < r->n_levels; i++) {
        const lg_level_summary *s = &r->levels[i];
        fprintf(f, "%5d %6d %6d %6d %9.1f %7.2f %9lld %10lld %8.1f %9.1f", s->level, s->concurrency, s->ok,
                s->failed, s->output_tok_per_s, s->req_per_s, (long long)s->think_tok, (long long)s->answer_tok,
                s->think_tok_per_s, s->answer_tok_per_s);
        if (isfinite(s->ramp_s))
            fprintf(f, " %7.3f", s->ramp_s);
        else
            fprintf(f, " %7s", "-");
        fprintf(f, "%s\n", s->interrupted ? "  (interrupted)" : "");
        if (s->failed) {
            fprintf(f, "      failed:");
            for (int c = 1; c < LG_ERR__COUNT; c++)
                if (s->failed_by_class[c])
                    fprintf(f, " %s=%d", lg_err_class_name((lg_err_class)c), s->failed_by_class[c]);
            fputc('\n', f);
        }
    }
    fprintf(f, "\n%5s %6s %-10s %9s %9s %9s %9s %8s\n", "level", "C", "latency ms", "p50", "p90", "p99", "mean",
            "n");
    for (size_t i = 0; i < r->n_levels; i++) {
        const lg_level_summary *s = &r->levels[i];
        fprintf(f, "%5d %6d", s->level, s->concurrency);
        if (s->rate_per_s > 0)
            fprintf(f, " open loop at %.2f requests/s; latencies below from the actual send\n", s->rate_per_s);
        else
            fputc('\n', f);
        put_stat_row(f, "TTFT", &s->ttft_ms);
        put_stat_row(f, "TTFA", &s->ttfa_ms);
        put_stat_row(f, "TPOT", &s->tpot_ms);
        put_stat_row(f, "ITL", &s->itl_ms);
        put_stat_row(f, "E2E", &s->e2e_ms);
        if (s->rate_per_s > 0) {
            /* From the intended send: what a user arriving on schedule saw. */
            put_stat_row(f, "client lag", &s->lag_ms);
            put_stat_row(f, "TTFT sched", &s->ttft_intended_ms);
            put_stat_row(f, "E2E sched", &s->e2e_intended_ms);
        }
    }
    fprintf(f, "(TTFT: first token of any kind; TTFA: first answer token; rates over each level's wall time%s)\n",
            r->n_levels && r->levels[0].rate_per_s > 0 ? "; sched: from the intended send time" : "");
}
