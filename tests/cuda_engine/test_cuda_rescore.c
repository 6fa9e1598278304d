/* test_cuda_rescore.c: the cuda backend's prompt logprobs (cuda_rescore.h)
 * against its own decode, the check `loadlaw check-decode` makes: a prompt
 * of P tokens decoded greedily for N steps on slot 1, then the prompt with
 * the N decoded tokens as a scored continuation on slot 2 (the prefill path:
 * the naive kernel, no testing fault). Per position |decode lp - prefill lp|:
 *   - healthy tiled and naive (bf16), tiled (fp8): max <= 0.005 nat (the
 *     check's tolerance), every decoded token prefill's argmax, the token
 *     after the continuation decode's next one, and the same outputs on a
 *     second run (seeded);
 *   - tiled with attn_fault=skip_last_tile or swap_heads: max > 0.005 nat,
 *     while the faulty decode's tokens still come back scored (ids match).
 * Prints mean and max |d| per case. A GPU test: "SKIP: <reason>" (exit 77)
 * without a device; test_cuda_rescore_cuemu runs it on the CPU (cuemu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda.h"
#include "common.h"
#include "testutil.h"

#define P_TOK 5
#define N_TOK 10
#define TOL_NAT 0.005

static void config(eng_config *cfg, const char *attn, const char *kv, int fault, int capacity)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->attn = attn;
    cfg->kv = kv;
    cfg->attn_fault = fault;
    cfg->heads = 16;
    cfg->topk = 64; /* 4 tiles, every entry valid (min_ctx = topk) */
    cfg->max_running = 4;
    cfg->seed = 11;
    cfg->d_model = 64;
    cfg->d_ff = 1024;
    cfg->vocab = 128;
    cfg->capacity_tok = capacity;
    cfg->min_ctx_tok = -1;
}

static int step(void *st, const eng_batch *b)
{
    eng_phase ph[ENG_MAX_PHASES];
    int nph = 0;
    return eng_backend_cuda.step(st, b, ll_now_ns(), ph, &nph);
}

/* Prefill P_TOK on slot 1 (its first token), then N_TOK decode steps:
 * toks[0..N_TOK] (the last one: the token after the continuation). */
static int decode(void *st, uint64_t seed, eng_tok *toks)
{
    int slot = 1, ptok = P_TOK;
    toks[0].id = -1;
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &ptok, .prefill_tok_total = P_TOK,
                   .prefill_seed = &seed, .prefill_out = &toks[0]};
    int rc = step(st, &b);
    for (int j = 1; j <= N_TOK && rc == 0; j++) {
        int64_t ctx = P_TOK + j;
        eng_batch d = {.n_decode = 1, .decode_slot = &slot, .decode_ctx = &ctx, .ctx_tok_total = ctx,
                       .decode_seed = &seed, .decode_out = &toks[j], .want_lp = 1};
        toks[j].id = -1;
        rc = step(st, &d);
    }
    eng_backend_cuda.release(st, 1);
    return rc;
}

/* The prompt plus the first N_TOK decoded tokens, scored on slot 2. */
static int rescore(void *st, uint64_t seed, const eng_tok *toks, eng_tok *out, int32_t *rank, eng_tok *next)
{
    int slot = 2, ptok = P_TOK + N_TOK;
    int32_t ids[N_TOK];
    for (int j = 0; j < N_TOK; j++) {
        ids[j] = toks[j].id;
        out[j].id = -1;
    }
    eng_cont c = {.ctx_tok = P_TOK, .n = N_TOK, .ids = ids, .out = out, .rank = rank};
    const eng_cont *cp = &c;
    next->id = -1;
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &ptok, .prefill_tok_total = ptok,
                   .prefill_seed = &seed, .prefill_out = next, .prefill_cont = &cp};
    int rc = step(st, &b);
    eng_backend_cuda.release(st, 2);
    return rc;
}

typedef struct result {
    double mean, max;
    int rank1, next_ok, ids_ok;
    int32_t toks[N_TOK + 1];
} result;

static int run(const char *attn, const char *kv, int fault, int capacity, result *r)
{
    eng_config cfg;
    config(&cfg, attn, kv, fault, capacity);
    void *st = NULL;
    char err[512] = "";
    int rc = eng_backend_cuda.create(&cfg, &st, err, sizeof err);
    CHECK(rc == 0, "create: %s", err);
    if (rc)
        return rc;
    eng_tok toks[N_TOK + 1], out[N_TOK], next;
    int32_t rank[N_TOK];
    uint64_t seed = 0x1234567ull;
    rc = decode(st, seed, toks);
    rc = rc ? rc : rescore(st, seed, toks, out, rank, &next);
    CHECK(rc == 0, "%s %s fault %d: steps: %d", attn, kv, fault, rc);
    memset(r, 0, sizeof *r);
    for (int j = 0; j < N_TOK && rc == 0; j++) {
        double d = fabs((double)out[j].lp - toks[j].lp);
        r->mean += d / N_TOK;
        r->max = fmax(r->max, d);
        r->rank1 += rank[j] == 1;
        r->ids_ok += out[j].id == toks[j].id && toks[j].id >= 0 && out[j].n_top == (j ? 8 : 1);
    }
    for (int j = 0; j <= N_TOK; j++)
        r->toks[j] = toks[j].id;
    r->next_ok = next.id == toks[N_TOK].id;
    printf("  %-5s %-4s attn_fault=%-14s mean |d| %.3g nat, max |d| %.3g nat, prefill#1 %d/%d, next %s\n", attn,
           kv, fault == 1 ? "skip_last_tile" : fault == 2 ? "swap_heads" : "none", r->mean, r->max, r->rank1, N_TOK,
           r->next_ok ? "same" : "differs");
    eng_backend_cuda.destroy(st);
    return rc;
}

static void healthy(const char *attn, const char *kv)
{
    result r, again;
    if (run(attn, kv, 0, 256, &r) != 0 || run(attn, kv, 0, 256, &again) != 0)
        return;
    CHECK(r.ids_ok == N_TOK, "%s %s: %d of %d positions scored decode's token with 8 alternatives", attn, kv,
          r.ids_ok, N_TOK);
    CHECK(r.max <= TOL_NAT, "%s %s: decode vs prefill max |d| %.3g <= %.3g", attn, kv, r.max, TOL_NAT);
    CHECK(r.rank1 == N_TOK, "%s %s: greedy tokens are prefill's argmax (%d of %d)", attn, kv, r.rank1, N_TOK);
    CHECK(r.next_ok, "%s %s: the token after the continuation is decode's next", attn, kv);
    CHECK(memcmp(r.toks, again.toks, sizeof r.toks) == 0 && r.max == again.max, "%s %s: a rerun gives the same",
          attn, kv);
    int distinct = 0;
    for (int j = 1; j <= N_TOK; j++)
        distinct += r.toks[j] != r.toks[j - 1];
    CHECK(distinct >= 2, "%s %s: the decode is not one repeated token (%d changes)", attn, kv, distinct);
}

int main(void)
{
    char why[400];
    if (cuda_backend_probe(0, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return TEST_SKIP;
    }
    healthy("tiled", "bf16");
    healthy("naive", "bf16");
    healthy("tiled", "fp8");
    /* a context that passes the capacity during the continuation: the
     * prefill must wrap the slot's ring no sooner than decode did */
    result w;
    if (run("naive", "bf16", 0, P_TOK + N_TOK - 4, &w) == 0) {
        CHECK(w.max <= TOL_NAT, "capacity %d under prompt + continuation %d: max |d| %.3g <= %.3g", P_TOK + N_TOK - 4,
              P_TOK + N_TOK, w.max, TOL_NAT);
        CHECK(w.next_ok, "capacity under the context: the token after the continuation is decode's next");
    }
    for (int f = ENG_ATTN_FAULT_SKIP_LAST_TILE; f <= ENG_ATTN_FAULT_SWAP_HEADS; f++) {
        result r;
        if (run("tiled", "bf16", f, 256, &r) != 0)
            continue;
        CHECK(r.ids_ok == N_TOK, "fault %d: %d of %d positions scored decode's token", f, r.ids_ok, N_TOK);
        CHECK(r.max > TOL_NAT, "fault %d: decode vs prefill max |d| %.3g > %.3g", f, r.max, TOL_NAT);
    }
    TEST_MAIN_END();
}
