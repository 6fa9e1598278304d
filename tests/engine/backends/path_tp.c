/* path_tp.c: the tp path (conformance.h): tensor parallelism, tp=K against
 * tp=1. Each run steps the backend's script (tb_tp_cols) and checks its
 * phases per rank: ranks in [0, tp), each inside the step and each rank's
 * in time order, the communication phase exactly once per rank per decode
 * step at tp > 1 and never at tp=1 or in a prefill-only step, the names
 * only rank 0 runs on rank 0 alone, and as many phases per rank as the
 * adapter says. The decode steps of the column's snap_steps are copied back
 * (attention output per head, logits, the head mean where kept); each case
 * compares run b with run a there: tokens (the column's share), every value
 * within atol + rtol |a|, logits not all ~0; a rerun, to the bit. */
#define TESTUTIL_SHARED
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "conformance.h"
#include "testutil.h"

typedef struct tp_run {
    const char *set;
    int done, ok;
    int tokens[SCRIPT_MAX_STEPS][SCRIPT_MAX_SLOTS];
    tb_snap snap[SCRIPT_MAX_STEPS];
} tp_run;

static void check_phases(const tb_backend *be, const char *what, int tp, int s, const eng_batch *b,
                         const eng_phase *ph, int nph, int64_t t0, int64_t t1)
{
    int comm[64] = {0}, count[64] = {0}, rank0_only_elsewhere = 0, bad_rank = 0, outside = 0;
    for (int i = 0; i < nph; i++) {
        int r = ph[i].rank;
        if (r < 0 || r >= tp) {
            bad_rank++;
            continue;
        }
        count[r]++;
        if (eng_phase_is_comm(ph[i].name)) {
            comm[r]++;
            CHECK(strcmp(ph[i].name, be->tp_comm_name) == 0, "%s: comm phase named %s", what, ph[i].name);
        }
        for (const char *const *n = be->tp_rank0_only; *n; n++)
            rank0_only_elsewhere += r != 0 && strcmp(ph[i].name, *n) == 0;
        outside += ph[i].start_ns < t0 || ph[i].dur_ns < 0 || ph[i].start_ns + ph[i].dur_ns > t1;
        for (int j = i - 1; j >= 0; j--) /* each rank's phases in time order */
            if (ph[j].rank == r) {
                CHECK(ph[i].start_ns >= ph[j].start_ns + ph[j].dur_ns, "%s step %d rank %d: %s after %s", what, s,
                      r, ph[i].name, ph[j].name);
                break;
            }
    }
    CHECK(bad_rank == 0 && outside == 0, "%s step %d: %d phases with a bad rank, %d outside the step", what, s,
          bad_rank, outside);
    CHECK(rank0_only_elsewhere == 0, "%s step %d: %d rank-0 phases on other ranks", what, s, rank0_only_elsewhere);
    int prefill = b->n_prefill > 0, decode = b->n_decode > 0;
    for (int r = 0; r < tp && r < 64; r++) {
        int want_comm = tp > 1 && decode;
        CHECK(comm[r] == want_comm, "%s step %d rank %d: %d all-reduce phases, want %d", what, s, r, comm[r],
              want_comm);
        int want = be->tp_rank_phases(tp, r, prefill, decode);
        CHECK(count[r] == want, "%s step %d rank %d: %d phases, want %d", what, s, r, count[r], want);
    }
    if (tp > 1 && decode)
        CHECK(eng_phases_comm_ns(ph, nph) >= 0, "%s: comm_ns", what);
}

/* Runs the script; 0, or TEST_SKIP when tp=K cannot be made here (NCCL). */
static int run(const tb_backend *be, tp_run *o)
{
    const tb_tp_col *col = &tb_tp_cols[be->id];
    tb_cfg t;
    tb_config(&t, col->shape, o->set);
    const int tp = t.c.tp > 0 ? t.c.tp : 1;
    void *st = NULL;
    char err[1024] = "";
    int rc = be->ops->create(&t.c, &st, err, sizeof err);
    if (rc != 0 && tp > 1 && strstr(err, "nccl")) {
        printf("SKIP: %s: %s: %s\n", be->name, o->set, err);
        return TEST_SKIP;
    }
    CHECK(rc == 0, "%s: create %s: %s", be->name, o->set, err);
    o->done = 1;
    if (rc != 0)
        return 0;
    o->ok = 1;
    for (int s = 0; s < col->script->steps; s++) {
        script_step sk;
        eng_batch b;
        script_batch(col->script, s, &sk, &b);
        eng_phase ph[ENG_MAX_PHASES];
        int nph = -1;
        int64_t t0 = ll_now_ns();
        rc = be->ops->step(st, &b, t0, ph, &nph);
        int64_t t1 = ll_now_ns();
        CHECK(rc == 0, "%s %s step %d rc %d (%s)", be->name, o->set, s, rc,
              be->ops->last_error && be->ops->last_error(st) ? be->ops->last_error(st) : "");
        if (rc != 0) {
            o->ok = 0;
            break;
        }
        check_phases(be, o->set, tp, s, &b, ph, nph, t0, t1);
        if (col->snap_steps & (1u << s))
            be->tp_snap(st, tp, b.n_decode, col->heads, col->vocab, &o->snap[s]);
        for (int k = 0; k < col->script->slots; k++)
            o->tokens[s][k] = be->token(st, k);
    }
    be->ops->destroy(st);
    return 0;
}

/* Count of |b - a| > atol + rtol |a| over n values; the largest |b - a|. */
static size_t outside(const float *b, const float *a, size_t n, double atol, double rtol, double *max_d)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)b[i] - (double)a[i]);
        *max_d = fmax(*max_d, d);
        bad += d > atol + rtol * fabs((double)a[i]);
    }
    return bad;
}

static void compare(const tb_backend *be, const tb_tp_case *c, const tp_run *a, const tp_run *b)
{
    const tb_tp_col *col = &tb_tp_cols[be->id];
    const script_def *sc = col->script;
    int agree = 0, total = 0, in_vocab = 1;
    for (int s = 1; s < sc->steps; s++)
        for (int k = 0; k < sc->slots; k++) {
            agree += a->tokens[s][k] == b->tokens[s][k];
            in_vocab &= b->tokens[s][k] >= 0 && b->tokens[s][k] < col->vocab;
            total++;
        }
    double da = 0, dl = 0, dm = 0, scale = 0;
    size_t bad_a = 0, bad_l = 0, bad_m = 0;
    for (int s = 1; s < sc->steps; s++) {
        if (!(col->snap_steps & (1u << s)))
            continue;
        int n = s == sc->single_step ? 1 : sc->slots;
        const tb_snap *x = &a->snap[s], *y = &b->snap[s];
        for (int i = 0; i < n; i++) {
            for (int h = 0; h < col->heads; h++)
                bad_a += outside(y->attn[i][h], x->attn[i][h], TB_DV, col->atol, col->rtol, &da);
            bad_l += outside(y->logits[i], x->logits[i], (size_t)col->vocab, col->atol, col->rtol, &dl);
            if (x->has_mean && y->has_mean)
                bad_m += outside(y->mean[i], x->mean[i], TB_DV, col->atol, col->rtol, &dm);
            for (int v = 0; v < col->vocab; v++)
                scale = fmax(scale, fabs(x->logits[i][v]));
        }
    }
    printf("%-28s tokens agree: %d of %d, max |d logits| %.3g (|logit| <= %.2f), max |d attn| %.3g, max |d mean| "
           "%.3g\n", c->what, agree, total, dl, scale, da, dm);
    CHECK(in_vocab, "%s %s: tokens in vocab", be->name, c->what);
    CHECK(agree >= col->token_share * total, "%s %s: tokens agree on %d of %d", be->name, c->what, agree, total);
    CHECK(scale > 0.01, "%s %s: logits are not all ~0 (%.3g)", be->name, c->what, scale);
    if (c->rerun) {
        CHECK(memcmp(a->tokens, b->tokens, sizeof a->tokens) == 0 && memcmp(a->snap, b->snap, sizeof a->snap) == 0,
              "%s %s: bit-identical", be->name, c->what);
        return;
    }
    CHECK(bad_a == 0, "%s %s: attention outputs differ by %.3g (%zu outside tolerance)", be->name, c->what, da, bad_a);
    CHECK(bad_l == 0, "%s %s: logits differ by %.3g (%zu outside tolerance)", be->name, c->what, dl, bad_l);
    CHECK(bad_m == 0, "%s %s: head means differ by %.3g (%zu outside tolerance)", be->name, c->what, dm, bad_m);
}

/* The run of set, made once (a fresh one when again). */
static tp_run *get(const tb_backend *be, tp_run *runs, int *n, const char *set, int again, int *skip)
{
    for (int i = 0; i < *n && !again; i++)
        if (strcmp(runs[i].set, set) == 0)
            return &runs[i];
    tp_run *r = &runs[(*n)++];
    memset(r, 0, sizeof *r);
    r->set = set;
    *skip = run(be, r) == TEST_SKIP;
    return r;
}

int tb_path_tp(const tb_backend *be)
{
    if (be->tp_prepare && be->tp_prepare() == TEST_SKIP)
        return TEST_SKIP;
    tb_refusals_run(be, "tp", tb_tp_cols[be->id].shape);
    static tp_run runs[16];
    int n = 0, skip = 0;
    for (const tb_tp_case *c = tb_tp_cases; c->what && n < 14; c++) {
        if (!(c->on & TB_ON(be->id)))
            continue;
        tp_run *a = get(be, runs, &n, c->a, 0, &skip);
        tp_run *b = skip ? NULL : get(be, runs, &n, c->b, c->rerun, &skip);
        if (skip)
            return TEST_SKIP;
        if (a->ok && b->ok)
            compare(be, c, a, b);
    }
    return 0;
}
