/* objective.c: the text of find.objective (`loadlaw sweep --find`) read
 * into terms (scenario.h scn_objective): the one parser, used by the key
 * table's check (a typo is the scenario's error, naming the term) and by the
 * search (sweep/find.c), which evaluates the terms on fit's figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scenario.h"

#define TERM_FORMS "itl_p99<=50ms, ttft_p90<=2s, tpot_mean<=40ms, e2e_p50<=10s, error_rate<=1%%, " \
                   "goodput>=90%%, user_tps>=20"

static const char *const k_latency[] = {"ttft", "itl", "tpot", "e2e"};
static const char *const k_stat[] = {"mean", "p50", "p90", "p99", "max"};

double scn_obj_stat_q(scn_obj_stat s)
{
    static const double q[] = {NAN, 0.5, 0.9, 0.99, 1.0};
    return q[s];
}

/* "ttft_p99" and the like, or error_rate, goodput, user_tps: 0 or -1. */
static int read_metric(const char *name, scn_obj_term *t)
{
    static const char *const plain[] = {"error_rate", "goodput", "user_tps"};
    for (size_t i = 0; i < 3; i++)
        if (strcmp(name, plain[i]) == 0) {
            t->metric = (scn_obj_metric)(SCN_OBJ_ERROR_RATE + i);
            t->at_most = t->metric == SCN_OBJ_ERROR_RATE;
            return 0;
        }
    for (size_t i = 0; i < 4; i++) {
        size_t l = strlen(k_latency[i]);
        if (strncmp(name, k_latency[i], l) || name[l] != '_')
            continue;
        for (size_t j = 0; j < 5; j++)
            if (strcmp(name + l + 1, k_stat[j]) == 0) {
                t->metric = (scn_obj_metric)i;
                t->stat = (scn_obj_stat)j;
                t->at_most = 1;
                return 0;
            }
    }
    return -1;
}

/* The value after the operator: a duration for latencies (bare: ms), a
 * share (0.01 or 1%), or tokens/s. 0 or -1. */
static int read_value(const char *v, scn_obj_term *t)
{
    size_t l = strlen(v);
    double x;
    if (t->metric <= SCN_OBJ_E2E) {
        if (ll_parse_double(v, &x) == 0)
            x /= 1000; /* a bare number is ms */
        else if (ll_parse_duration_s(v, &x))
            return -1;
        t->value = x * 1000;
        return t->value > 0 && isfinite(t->value) ? 0 : -1;
    }
    if (t->metric == SCN_OBJ_USER_TPS)
        return ll_parse_double(v, &t->value) == 0 && t->value > 0 && isfinite(t->value) ? 0 : -1;
    char buf[64];
    if (l == 0 || l >= sizeof buf)
        return -1;
    memcpy(buf, v, l + 1);
    int pct = buf[l - 1] == '%';
    if (pct)
        buf[l - 1] = '\0';
    if (ll_parse_double(buf, &x) || !(x >= 0))
        return -1;
    t->value = pct ? x / 100 : x;
    return t->value <= 1 ? 0 : -1;
}

/* One term "NAME OP VALUE" (spaces around each allowed). 0 or LL_EINVAL. */
static int read_term(char *s, scn_obj_term *t, char *err, size_t errlen)
{
    char *op = strpbrk(s, "<>=");
    if (!op)
        return ll_errf(err, errlen, "'%s': expected METRIC<=VALUE or METRIC>=VALUE (like " TERM_FORMS ")", s),
               LL_EINVAL;
    char opc = *op;
    char *v = op + 1 + (op[1] == '=');
    *op = '\0';
    char *name = s + strspn(s, " ");
    for (char *e = name + strlen(name); e > name && e[-1] == ' ';)
        *--e = '\0';
    v += strspn(v, " ");
    for (char *e = v + strlen(v); e > v && e[-1] == ' ';)
        *--e = '\0';
    memset(t, 0, sizeof *t);
    if (read_metric(name, t))
        return ll_errf(err, errlen, "'%s': unknown metric: expected ttft, itl, tpot or e2e with _p50, _p90, "
                       "_p99, _mean or _max, or error_rate, goodput, user_tps (like " TERM_FORMS ")", name),
               LL_EINVAL;
    snprintf(t->name, sizeof t->name, "%s", name);
    if (opc == '=' || (opc == '<') != t->at_most)
        return ll_errf(err, errlen, "%s: expected %s (%s)", name, t->at_most ? "<=" : ">=",
                       t->at_most ? "a figure that must stay at most a value" : "a figure that must reach a value"),
               LL_EINVAL;
    if (read_value(v, t))
        return ll_errf(err, errlen, "%s: expected %s, got '%s'", name,
                       t->metric <= SCN_OBJ_E2E ? "a duration above 0 like 50ms or 2s (a bare number is ms)"
                       : t->metric == SCN_OBJ_USER_TPS ? "tokens/s above 0"
                                                       : "a share in [0, 1] like 0.9 or 90%", v),
               LL_EINVAL;
    return 0;
}

int scn_objective_parse(const char *text, scn_objective *out, char *err, size_t errlen)
{
    char buf[512];
    int goodput = 0, per_request = 0;
    memset(out, 0, sizeof *out);
    if (!text || !text[strspn(text, " ")] || strlen(text) >= sizeof buf)
        return ll_errf(err, errlen, "expected terms like " TERM_FORMS " (at most 511 characters)"), LL_EINVAL;
    memcpy(buf, text, strlen(text) + 1);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == SCN_OBJ_MAX_TERMS)
            return ll_errf(err, errlen, "at most %d terms", SCN_OBJ_MAX_TERMS), LL_EINVAL;
        scn_obj_term *t = &out->t[out->n];
        int rc = read_term(tok, t, err, errlen);
        if (rc)
            return rc;
        for (size_t i = 0; i < out->n; i++)
            if (strcmp(out->t[i].name, t->name) == 0)
                return ll_errf(err, errlen, "%s given twice", t->name), LL_EINVAL;
        goodput |= t->metric == SCN_OBJ_GOODPUT;
        per_request |= t->metric <= SCN_OBJ_E2E;
        out->n++;
    }
    if (out->n == 0)
        return ll_errf(err, errlen, "expected terms like " TERM_FORMS), LL_EINVAL;
    if (goodput && !per_request)
        return ll_errf(err, errlen, "goodput counts the requests that meet the objective's ttft, tpot (or itl) "
                       "and e2e terms: give one of them beside it"), LL_EINVAL;
    return 0;
}
