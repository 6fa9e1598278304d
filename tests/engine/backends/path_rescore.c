/* path_rescore.c: the rescore path (conformance.h), the check `loadlaw
 * check-decode` makes: a prompt of P_TOK tokens decoded greedily for n_tok
 * steps on slot 1, then the prompt with the n_tok decoded tokens as a scored
 * continuation on slot 2 (the prefill path: the naive kernel, no testing
 * fault; outputs never depend on the slot). Per position |decode lp -
 * prefill lp|, against the backend's column of tb_rescore_cols:
 *   - healthy: max within tol_nat, every position scored with decode's
 *     token and 8 alternatives (1 for the first), every decoded token
 *     prefill's argmax, the token after the continuation decode's next one,
 *     the same outputs on a second run (seeded), not one repeated token;
 *   - capacity under the context: max within tol_nat and the next token;
 *   - faulty (attn_fault): max above fault_nat, positions still scored.
 * Prints mean and max |d| per case. */
#define TESTUTIL_SHARED
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "conformance.h"
#include "testutil.h"

#define P_TOK 5
#define MAX_TOK 16

typedef struct result {
    double mean, max;
    int rank1, next_ok, ids_ok;
    int32_t toks[MAX_TOK + 1];
} result;

/* Prefill P_TOK on slot 1 (its first token), then n decode steps:
 * toks[0..n] (the last one: the token after the continuation). */
static int decode(const tb_backend *be, void *st, uint64_t seed, int n, eng_tok *toks)
{
    int slot = 1, ptok = P_TOK;
    toks[0].id = -1;
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &ptok, .prefill_tok_total = P_TOK,
                   .prefill_seed = &seed, .prefill_out = &toks[0]};
    int rc = tb_step(be, st, &b, NULL, NULL);
    for (int j = 1; j <= n && rc == 0; j++) {
        int64_t ctx = P_TOK + j;
        eng_batch d = {.n_decode = 1, .decode_slot = &slot, .decode_ctx = &ctx, .ctx_tok_total = ctx,
                       .decode_seed = &seed, .decode_out = &toks[j], .want_lp = 1};
        toks[j].id = -1;
        rc = tb_step(be, st, &d, NULL, NULL);
    }
    be->ops->release(st, 1);
    return rc;
}

/* The prompt plus the first n decoded tokens, scored on slot 2. */
static int rescore(const tb_backend *be, void *st, uint64_t seed, int n, const eng_tok *toks, eng_tok *out,
                   int32_t *rank, eng_tok *next)
{
    int slot = 2, ptok = P_TOK + n;
    int32_t ids[MAX_TOK];
    for (int j = 0; j < n; j++) {
        ids[j] = toks[j].id;
        out[j].id = -1;
    }
    eng_cont c = {.ctx_tok = P_TOK, .n = n, .ids = ids, .out = out, .rank = rank};
    const eng_cont *cp = &c;
    next->id = -1;
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &ptok, .prefill_tok_total = ptok,
                   .prefill_seed = &seed, .prefill_out = next, .prefill_cont = &cp};
    int rc = tb_step(be, st, &b, NULL, NULL);
    be->ops->release(st, 2);
    return rc;
}

static int run(const tb_backend *be, const tb_rescore *rs, result *r)
{
    const tb_rescore_col *col = &tb_rescore_cols[be->id];
    const int n = col->n_tok;
    tb_cfg t;
    tb_config(&t, col->shape, rs->set);
    if (rs->kind == TB_CAP_UNDER)
        t.c.capacity_tok = P_TOK + n - 4;
    void *st = NULL;
    char err[512] = "";
    int rc = be->ops->create(&t.c, &st, err, sizeof err);
    CHECK(rc == 0, "%s %s: create: %s", be->name, rs->what, err);
    if (rc)
        return rc;
    eng_tok toks[MAX_TOK + 1], out[MAX_TOK], next;
    int32_t rank[MAX_TOK];
    uint64_t seed = 0x1234567ull;
    rc = decode(be, st, seed, n, toks);
    rc = rc ? rc : rescore(be, st, seed, n, toks, out, rank, &next);
    CHECK(rc == 0, "%s %s: steps: %d", be->name, rs->what, rc);
    memset(r, 0, sizeof *r);
    for (int j = 0; j < n && rc == 0; j++) {
        double d = fabs((double)out[j].lp - toks[j].lp);
        r->mean += d / n;
        r->max = fmax(r->max, d);
        r->rank1 += rank[j] == 1;
        r->ids_ok += out[j].id == toks[j].id && toks[j].id >= 0 && out[j].n_top == (j ? 8 : 1);
    }
    for (int j = 0; j <= n; j++)
        r->toks[j] = toks[j].id;
    r->next_ok = next.id == toks[n].id;
    printf("  %-28s mean |d| %.3g nat, max |d| %.3g nat, prefill#1 %d/%d, next %s\n", rs->what, r->mean, r->max,
           r->rank1, n, r->next_ok ? "same" : "differs");
    be->ops->destroy(st);
    return rc;
}

static void healthy(const tb_backend *be, const tb_rescore *rs)
{
    const tb_rescore_col *col = &tb_rescore_cols[be->id];
    const int n = col->n_tok;
    result r, again;
    if (run(be, rs, &r) != 0 || run(be, rs, &again) != 0)
        return;
    CHECK(r.ids_ok == n, "%s %s: %d of %d positions scored decode's token with 8 alternatives", be->name, rs->what,
          r.ids_ok, n);
    CHECK(r.max <= col->tol_nat, "%s %s: decode vs prefill max |d| %.3g <= %.3g", be->name, rs->what, r.max,
          col->tol_nat);
    CHECK(r.rank1 == n, "%s %s: greedy tokens are prefill's argmax (%d of %d)", be->name, rs->what, r.rank1, n);
    CHECK(r.next_ok, "%s %s: the token after the continuation is decode's next", be->name, rs->what);
    CHECK(memcmp(r.toks, again.toks, sizeof r.toks) == 0 && r.max == again.max, "%s %s: a rerun gives the same",
          be->name, rs->what);
    int distinct = 0;
    for (int j = 1; j <= n; j++)
        distinct += r.toks[j] != r.toks[j - 1];
    CHECK(distinct >= 2, "%s %s: the decode is not one repeated token (%d changes)", be->name, rs->what, distinct);
}

void tb_path_rescore(const tb_backend *be)
{
    const tb_rescore_col *col = &tb_rescore_cols[be->id];
    for (const tb_rescore *rs = tb_rescores; rs->what; rs++) {
        if (!(rs->on & TB_ON(be->id)))
            continue;
        result r;
        if (rs->kind == TB_HEALTHY) {
            healthy(be, rs);
        } else if (rs->kind == TB_CAP_UNDER && run(be, rs, &r) == 0) {
            CHECK(r.max <= col->tol_nat, "%s: capacity %d under prompt + continuation %d: max |d| %.3g <= %.3g",
                  be->name, P_TOK + col->n_tok - 4, P_TOK + col->n_tok, r.max, col->tol_nat);
            CHECK(r.next_ok, "%s: capacity under the context: the token after the continuation is decode's next",
                  be->name);
        } else if (rs->kind == TB_FAULTY && run(be, rs, &r) == 0) {
            CHECK(r.ids_ok == col->n_tok, "%s %s: %d of %d positions scored decode's token", be->name, rs->what,
                  r.ids_ok, col->n_tok);
            CHECK(r.max > col->fault_nat, "%s %s: decode vs prefill max |d| %.3g > %.3g", be->name, rs->what, r.max,
                  col->fault_nat);
        }
    }
}
