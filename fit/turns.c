/* turns.c: the per-turn figures of multi-turn sessions (load.sessions;
 * fit.h fit_turn): for each level and turn k, the level's measured requests
 * that finished ok as turn k of a conversation (records' "turn"), with each
 * request's TTFT and TPOT from fit_request_latency_ms (the one definition of
 * each): TTFT p50 and p90, TPOT p50; the mean prompt tokens (the server's
 * usage where it said, else the client's count), and the cached share: the
 * cached tokens over the prompt tokens of those whose server said its cached
 * tokens (NAN when none did). A later turn resends every turn before it, so
 * a server's prefix cache can serve all of that: the share rises and TTFT
 * falls with the turn where it does (reports/ prints them). A run without
 * sessions has no turns.
 *
 * Cost: one pass over the requests per level and turn (T is small: a
 * conversation's turns), sorting each turn's samples once. */
#include "fit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The highest turn among the level's requests (0: no session requests),
 * gathered while the run was read (a run without sessions reads no level
 * back for it). */
static int max_turn(const fit_run *run, int level)
{
    const fit_level_tally *lt = fit_run_level_tally(run, level);
    return lt ? lt->max_turn : 0;
}

/* Samples of one turn: TTFT and TPOT (sorted), prompt and cached tokens. */
typedef struct turn_acc {
    fit_double_vec ttft, tpot;
    double prompt, cached, prompt_said;
    size_t n;
} turn_acc;

static int collect(const fit_run *run, int level, int turn, turn_acc *a)
{
    size_t i0, i1;
    fit_run_level_span(run, level, &i0, &i1);
    for (size_t i = i0; i < i1; i++) {
        const ll_rec_request *q = fit_run_request(run, i);
        if (q->level != level || q->warmup || !fit_request_ok(q) || q->work.kind != LL_WORK_SESSION || q->work.turn != turn)
            continue;
        fit_request_ms ms;
        fit_request_latency_ms(run, q, &ms);
        if (isfinite(ms.ttft_ms) && ll_vec_push(&a->ttft, ms.ttft_ms))
            return LL_ENOMEM;
        if (isfinite(ms.tpot_ms) && ll_vec_push(&a->tpot, ms.tpot_ms))
            return LL_ENOMEM;
        double prompt = (double)(q->usage_prompt >= 0 ? q->usage_prompt : q->prompt_tok);
        a->prompt += prompt;
        if (q->cached_tok >= 0 && prompt > 0) {
            a->cached += (double)q->cached_tok;
            a->prompt_said += prompt;
        }
        a->n++;
    }
    return 0;
}

static double pct_of(const fit_double_vec *v, double p)
{
    fit_dist d;
    fit_dist_of(v->v, v->n, &d);
    return p == 50 ? d.p50_ms : d.p90_ms;
}

static int add_turn(const fit_run *run, const fit_level *L, int turn, fit_result *r)
{
    turn_acc a;
    memset(&a, 0, sizeof a);
    int rc = collect(run, L->level, turn, &a);
    if (rc == 0) {
        if (a.ttft.n) /* an empty vector has no array: qsort's pointer must not be NULL */
            qsort(a.ttft.v, a.ttft.n, sizeof *a.ttft.v, cmp_double);
        if (a.tpot.n)
            qsort(a.tpot.v, a.tpot.n, sizeof *a.tpot.v, cmp_double);
        r->turns[r->n_turns++] = (fit_turn){
            .level = L->level,
            .concurrency = L->concurrency,
            .turn = turn,
            .n = a.n,
            .ttft_p50_ms = pct_of(&a.ttft, 50),
            .ttft_p90_ms = pct_of(&a.ttft, 90),
            .tpot_p50_ms = pct_of(&a.tpot, 50),
            .prompt_tok_mean = a.n ? a.prompt / (double)a.n : NAN,
            .cache_share = a.prompt_said > 0 ? a.cached / a.prompt_said : NAN,
        };
    }
    ll_vec_free(&a.ttft);
    ll_vec_free(&a.tpot);
    return rc;
}

int fit_turns_compute(const fit_run *run, fit_result *r)
{
    size_t total = 0;
    for (size_t l = 0; l < r->n_levels; l++)
        total += (size_t)max_turn(run, r->levels[l].level);
    if (total == 0)
        return 0;
    if (!(r->turns = calloc(total, sizeof *r->turns)))
        return LL_ENOMEM;
    for (size_t l = 0; l < r->n_levels; l++) {
        int T = max_turn(run, r->levels[l].level);
        for (int t = 1; t <= T; t++) {
            int rc = add_turn(run, &r->levels[l], t, r);
            if (rc)
                return rc;
        }
    }
    return 0;
}
