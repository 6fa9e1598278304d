/* path_backend.c: the backend path (conformance.h): each variant of
 * tb_variants the backend runs goes through SCRIPT_MIXED by the ops table
 * the scheduler uses. Per step: rc 0; for a deep variant the phases the
 * adapter names, in order, each inside the step and after the one before,
 * then the adapter's own checks; tokens in the vocabulary and varying.
 * After the script: a released slot forgets its request, a slot out of
 * range is refused and the backend still steps after it. Then the variants'
 * tokens against each other (tb_agrees), the refusals, a step that fails
 * (fault_fail_step) and tb_same_token. */
#define TESTUTIL_SHARED
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "conformance.h"
#include "testutil.h"

#define STEPS 6 /* SCRIPT_MIXED */
#define SLOTS 3

typedef struct run {
    const tb_variant *v;
    int tokens[STEPS][SLOTS];
    int ok;
} run;

static void check_phases(const tb_backend *be, const char *what, const tb_cfg *t, int s, const eng_batch *b,
                         const eng_phase *ph, int nph, int64_t t0, int64_t t1)
{
    const char *want[ENG_MAX_PHASES];
    int nw = be->phases(t->c.attn, b->n_prefill > 0, b->n_decode > 0, want);
    CHECK(nph == nw, "%s step %d: %d phases, want %d", what, s, nph, nw);
    for (int i = 0; i < nph && i < nw; i++) {
        CHECK(strcmp(ph[i].name, want[i]) == 0, "%s step %d phase %d is %s, want %s", what, s, i, ph[i].name,
              want[i]);
        CHECK(ph[i].start_ns >= t0 && ph[i].dur_ns >= 0 && ph[i].start_ns + ph[i].dur_ns <= t1,
              "%s step %d phase %s inside the step", what, s, ph[i].name);
        CHECK(i == 0 || ph[i].start_ns >= ph[i - 1].start_ns + ph[i - 1].dur_ns,
              "%s step %d phase %s after the previous one", what, s, ph[i].name);
    }
}

/* A released slot forgets its request; a slot out of range is refused, and
 * a refused batch is not a failure: the backend still steps. */
static void check_slots(const tb_backend *be, void *st, const tb_cfg *t)
{
    be->ops->release(st, 1);
    CHECK(be->token(st, 1) == 0, "%s: released slot reset", be->name);
    CHECK(be->token(st, 99) == -1, "%s: slot out of range", be->name);
    int bad_slot = t->c.max_running, ok_slot = 0, nph = 0;
    int64_t bad_ctx = 10, ok_ctx = 60;
    eng_batch bad = {.n_decode = 1, .decode_slot = &bad_slot, .decode_ctx = &bad_ctx};
    CHECK(tb_step(be, st, &bad, NULL, NULL) == LL_ERANGE, "%s: slot %d of %d rejected", be->name, bad_slot,
          bad_slot);
    eng_batch ok = {.n_decode = 1, .decode_slot = &ok_slot, .decode_ctx = &ok_ctx};
    const char *want[ENG_MAX_PHASES];
    int rc = tb_step(be, st, &ok, NULL, &nph);
    CHECK(rc == 0 && nph == be->phases(t->c.attn, 0, 1, want), "%s: steps after a refused batch (rc %d, %d phases)",
          be->name, rc, nph);
}

static void run_variant(const tb_backend *be, run *r)
{
    const tb_variant *v = r->v;
    tb_cfg t;
    tb_config(&t, tb_backend_shape[be->id], v->set);
    void *st = NULL;
    char err[512] = "";
    int rc = be->ops->create(&t.c, &st, err, sizeof err);
    CHECK(rc == 0, "%s: create %s: %s", be->name, v->name, err);
    if (rc != 0)
        return;
    r->ok = 1;
    for (int s = 0; s < STEPS; s++) {
        script_step sk;
        eng_batch b;
        script_batch(&SCRIPT_MIXED, s, &sk, &b);
        eng_phase ph[ENG_MAX_PHASES];
        int nph = -1;
        int64_t t0 = ll_now_ns();
        rc = be->ops->step(st, &b, t0, ph, &nph);
        int64_t t1 = ll_now_ns();
        CHECK(rc == 0, "%s %s step %d rc %d (%s)", be->name, v->name, s, rc,
              be->ops->last_error && be->ops->last_error(st) ? be->ops->last_error(st) : "");
        r->ok &= rc == 0;
        if (v->deep)
            check_phases(be, v->name, &t, s, &b, ph, nph, t0, t1);
        if (v->deep && be->check_step)
            be->check_step(st, v->name, &t.c, s, &sk);
        for (int k = 0; k < SLOTS && be->token; k++)
            r->tokens[s][k] = be->token(st, k);
    }
    if (be->validates_slots)
        check_slots(be, st, &t);
    be->ops->destroy(st);
}

static const run *find(const run *runs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(runs[i].v->name, name) == 0)
            return &runs[i];
    return NULL;
}

/* Tokens in the vocabulary and not one repeated token, per run; then each
 * tb_agrees row this backend has a column for. */
static void check_tokens(const tb_backend *be, const run *runs, int n, int vocab)
{
    for (int i = 0; i < n; i++) {
        int in_range = 1, varied = 0;
        for (int s = 1; s < STEPS; s++)
            for (int k = 0; k < SLOTS; k++) {
                in_range &= runs[i].tokens[s][k] >= 0 && runs[i].tokens[s][k] < vocab;
                varied |= runs[i].tokens[s][k] != runs[i].tokens[1][0];
            }
        CHECK(in_range, "%s %s: tokens in vocab", be->name, runs[i].v->name);
        CHECK(varied, "%s %s: tokens vary across slots and steps", be->name, runs[i].v->name);
    }
    for (const tb_agree *g = tb_agrees; g->a; g++) {
        double want = g->share[be->id];
        const run *a = find(runs, n, g->a), *b = find(runs, n, g->b);
        if (want < 0 || !a || !b || !a->ok || !b->ok)
            continue;
        int agree = 0, total = 0;
        for (int s = 1; s < STEPS; s++)
            for (int k = 0; k < SLOTS; k++) {
                agree += a->tokens[s][k] == b->tokens[s][k];
                total++;
            }
        CHECK(agree >= want * total, "%s: %s and %s agree on %d of %d tokens (want %.0f%%)", be->name, g->a, g->b,
              agree, total, want * 100);
    }
}

/* fault_fail_step=1: the first step fails with LL_EIO, saying why where the
 * backend says (last_error); on a backend whose failure is sticky, every
 * later step too; destroy still cleans up. */
static void check_failing_step(const tb_backend *be)
{
    tb_cfg t;
    tb_config(&t, tb_backend_shape[be->id], "attn=tiled,kv=bf16,fault_fail_step=1");
    void *st = NULL;
    char err[512] = "";
    if (be->ops->create(&t.c, &st, err, sizeof err) != 0) {
        CHECK(0, "%s: create with fault_fail_step: %s", be->name, err);
        return;
    }
    int slot = 0, tok = 5;
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &tok, .prefill_tok_total = 5};
    CHECK(tb_step(be, st, &b, NULL, NULL) == LL_EIO, "%s: the faulty step fails", be->name);
    if (be->fail_says) {
        const char *why = be->ops->last_error(st);
        CHECK(why && strstr(why, be->fail_says), "%s: last_error: %s", be->name, why ? why : "(none)");
    }
    if (be->fail_sticky)
        CHECK(tb_step(be, st, &b, NULL, NULL) == LL_EIO, "%s: and every later one", be->name);
    be->ops->destroy(st);
}

/* One prefill step then one decode step on slot 0: the sampled token, or -1. */
static int prefill_decode_token(const tb_backend *be, const char *set)
{
    tb_cfg t;
    tb_config(&t, tb_backend_shape[be->id], set);
    void *st = NULL;
    char err[256] = "";
    if (be->ops->create(&t.c, &st, err, sizeof err) != 0) {
        CHECK(0, "%s: create %s: %s", be->name, set, err);
        return -1;
    }
    int slot = 0, tok = 10, nph = 0, out = -1;
    int64_t ctx = 11;
    const char *want[ENG_MAX_PHASES];
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &tok, .prefill_tok_total = 10};
    eng_batch d = {.n_decode = 1, .decode_slot = &slot, .decode_ctx = &ctx, .ctx_tok_total = 11};
    if (tb_step(be, st, &b, NULL, NULL) == 0 && tb_step(be, st, &d, NULL, &nph) == 0 &&
        nph == be->phases(t.c.attn, 0, 1, want))
        out = be->token(st, 0);
    be->ops->destroy(st);
    return out;
}

void tb_path_backend(const tb_backend *be)
{
    static run runs[16];
    int n = 0;
    for (const tb_variant *v = tb_variants; v->name && n < 16; v++)
        if (v->on & TB_ON(be->id)) {
            runs[n] = (run){.v = v};
            run_variant(be, &runs[n++]);
        }
    tb_cfg shape;
    tb_config(&shape, tb_backend_shape[be->id], "");
    if (be->token)
        check_tokens(be, runs, n, shape.c.vocab);
    tb_refusals_run(be, "backend", tb_backend_shape[be->id]);
    if (be->fault_step)
        check_failing_step(be);
    const char *const *same = tb_same_token[be->id];
    if (same[0]) {
        int a = prefill_decode_token(be, same[0]), b = prefill_decode_token(be, same[1]);
        CHECK(a >= 0 && a < shape.c.vocab, "%s: %s runs a step (token %d)", be->name, same[0], a);
        CHECK(a == b, "%s: %s and %s sample the same token (%d, %d)", be->name, same[0], same[1], a, b);
    }
}
