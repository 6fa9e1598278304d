/* outputs_print.c: the outputs comparison (fit/outputs.c "outputs
 * comparison") as `loadlaw compare` shows it: the "outputs" object of --json
 * and the section under the speed tables, both saying what could not be
 * compared and why. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_internal.h"

static int add_num(cJSON *o, const char *k, double x)
{
    return ll_json_add_num(o, k, x) ? -1 : 0;
}

/* The counts and shares of one level (or of all). 0 or -1. */
static int level_counts(cJSON *o, const fit_outputs_level *l)
{
    return add_num(o, "pairs", (double)l->n_pairs) || add_num(o, "identical", (double)l->n_identical) ||
                   add_num(o, "diverged", (double)l->n_diverged) || add_num(o, "share_identical", l->share_identical) ||
                   add_num(o, "share_ok", l->share_ok)
               ? -1
               : 0;
}

/* Where the diverged pairs diverged, the top-k check and the logprobs. 0 or -1. */
static int level_divergence(cJSON *o, const fit_outputs_level *l)
{
    return add_num(o, "divergence_pos_p10", l->pos_p10) || add_num(o, "divergence_pos_p50", l->pos_p50) ||
                   add_num(o, "topk_known", (double)l->n_topk_known) ||
                   add_num(o, "a_in_top_b", (double)l->n_a_in_topb) ||
                   add_num(o, "b_in_top_a", (double)l->n_b_in_topa) || add_num(o, "topk_ok", (double)l->n_topk_ok) ||
                   add_num(o, "mean_abs_dlogprob", l->mean_abs_dlp) ||
                   add_num(o, "logprob_tokens", (double)l->n_lp_tok)
               ? -1
               : 0;
}

static int level_example(cJSON *o, const fit_outputs_example *x)
{
    cJSON *e = cJSON_AddObjectToObject(o, "example");
    return !e || !cJSON_AddStringToObject(e, "prompt_key", x->key) ||
                   add_num(e, "position", x->pos == (size_t)-1 ? NAN : (double)x->pos) ||
                   !cJSON_AddStringToObject(e, "token_a", x->tok_a) || !cJSON_AddStringToObject(e, "token_b", x->tok_b)
               ? -1
               : 0;
}

static cJSON *level_json(const fit_outputs_level *l, int overall)
{
    cJSON *o = cJSON_CreateObject();
    int bad = !o;
    if (!bad && !overall)
        bad = !cJSON_AddStringToObject(o, "mode", l->open_loop ? "open" : "closed") ||
              add_num(o, "concurrency", l->concurrency) || add_num(o, "rate_per_s", l->open_loop ? l->rate_per_s : NAN);
    bad = bad || level_counts(o, l) || level_divergence(o, l) || (l->example.found && level_example(o, &l->example));
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int add_side_counts(cJSON *o, const char *k, const fit_outputs *r, int s)
{
    cJSON *c = cJSON_AddObjectToObject(o, k);
    return !c || add_num(c, "requests", (double)r->n_req[s]) ||
           add_num(c, "with_outputs", (double)r->n_with_outputs[s]) ||
           add_num(c, "with_ids", (double)r->n_with_ids[s]) || add_num(c, "with_logprobs", (double)r->n_with_lp[s]) ||
           add_num(c, "with_top_logprobs", (double)r->n_with_top[s]) ||
           add_num(c, "unmatched", (double)r->n_unmatched[s]);
}

cJSON *rpt_outputs_to_json(const fit_outputs *r)
{
    cJSON *o = cJSON_CreateObject(), *lv = o ? cJSON_AddArrayToObject(o, "levels") : NULL, *x;
    if (!lv)
        goto fail;
    for (size_t i = 0; i < r->n_levels; i++) {
        if (!(x = level_json(&r->levels[i], 0)))
            goto fail;
        cJSON_AddItemToArray(lv, x);
    }
    if (!(x = level_json(&r->all, 1)))
        goto fail;
    cJSON_AddItemToObject(o, "all", x);
    if (add_side_counts(o, "a", r, 0) || add_side_counts(o, "b", r, 1) ||
        add_num(o, "pairs_text_only", (double)r->n_text_only) ||
        add_num(o, "pairs_not_comparable", (double)r->n_nothing))
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* ---- text --------------------------------------------------------------------- */

static void pct(char *out, size_t n, size_t k, size_t of)
{
    if (of)
        snprintf(out, n, "%.1f%%", 100.0 * (double)k / (double)of);
    else
        snprintf(out, n, "-");
}

static void num_or_dash(char *out, size_t n, double v, int dec)
{
    if (isfinite(v))
        snprintf(out, n, "%.*f", dec, v);
    else
        snprintf(out, n, "-");
}

static void print_row(FILE *f, const char *name, const fit_outputs_level *l)
{
    char ident[16], ok[16], p10[24], p50[24], ain[24], bin[24], dlp[24];
    pct(ident, sizeof ident, l->n_identical, l->n_pairs);
    pct(ok, sizeof ok, l->n_identical + l->n_topk_ok, l->n_pairs);
    num_or_dash(p10, sizeof p10, l->pos_p10, 0);
    num_or_dash(p50, sizeof p50, l->pos_p50, 0);
    snprintf(ain, sizeof ain, "%zu/%zu", l->n_a_in_topb, l->n_topk_known);
    snprintf(bin, sizeof bin, "%zu/%zu", l->n_b_in_topa, l->n_topk_known);
    num_or_dash(dlp, sizeof dlp, l->mean_abs_dlp, 4);
    fprintf(f, "  %8s %6zu %10s %9s %8zu %8s %8s %10s %10s %10s\n", name, l->n_pairs, ident, ok, l->n_diverged, p10,
            p50, ain, bin, dlp);
}

static void level_name(const fit_outputs_level *l, char *out, size_t n)
{
    if (l->open_loop)
        snprintf(out, n, "%g/s", l->rate_per_s);
    else
        snprintf(out, n, "%d", l->concurrency);
}

/* What could not be compared, one line each. */
static void print_gaps(FILE *f, const fit_outputs *r)
{
    static const char *const side[2] = {"A", "B"};
    for (int s = 0; s < 2; s++) {
        if (r->n_with_outputs[s] == 0)
            fprintf(f, "  %s recorded no outputs (sweep --record-outputs): nothing to compare\n", side[s]);
        else if (r->n_with_lp[s] == 0)
            fprintf(f, "  %s's server sent no logprobs: no top-k check and no logprob difference%s\n", side[s],
                    r->n_with_ids[s] ? "" : "; its tokens are known only as text");
        else if (r->n_with_top[s] == 0)
            fprintf(f, "  %s's server sent no top-k alternatives: no top-k check\n", side[s]);
        if (r->n_unmatched[s])
            fprintf(f, "  %zu of %s's requests have no request of the same prompt key and level in %s\n",
                    r->n_unmatched[s], side[s], side[1 - s]);
    }
    if (r->n_text_only)
        fprintf(f, "  %zu pairs compared by text only (hash and length: identical or not, no position)\n",
                r->n_text_only);
    if (r->n_nothing)
        fprintf(f, "  %zu pairs share no kind of output (one side has tokens, the other only text)\n", r->n_nothing);
}

void rpt_outputs_print(FILE *f, const fit_outputs *r)
{
    char name[32];
    fprintf(f, "\noutputs: B against A, requests matched by prompt key (token ids, else tokens, else text)\n");
    if (r->all.n_pairs) {
        fprintf(f, "  %8s %6s %10s %9s %8s %8s %8s %10s %10s %10s\n", "C", "pairs", "identical", "same|topk",
                "diverged", "pos p10", "pos p50", "A in topB", "B in topA", "mean|dlp|");
        for (size_t i = 0; i < r->n_levels; i++) {
            if (!r->levels[i].n_pairs)
                continue;
            level_name(&r->levels[i], name, sizeof name);
            print_row(f, name, &r->levels[i]);
        }
        print_row(f, "all", &r->all);
        const fit_outputs_level *w = fit_outputs_worst(r);
        if (w && w->example.found) {
            if (w->open_loop)
                snprintf(name, sizeof name, "%g req/s", w->rate_per_s);
            else
                snprintf(name, sizeof name, "C=%d", w->concurrency);
            if (w->example.pos == (size_t)-1)
                fprintf(f, "  first differing pair at the worst level (%s): prompt %s, texts differ\n", name,
                        w->example.key);
            else
                fprintf(f, "  first failing pair at the worst level (%s): prompt %s, token %zu: A \"%s\", B \"%s\"\n",
                        name, w->example.key, w->example.pos, w->example.tok_a, w->example.tok_b);
        }
    }
    print_gaps(f, r);
}
