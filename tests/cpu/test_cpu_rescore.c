/* test_cpu_rescore.c: the cpu backend's prefill path with logits per prompt
 * position (cpu_rescore.h) against its own decode: a prompt of P tokens
 * decoded for N steps, then the same prompt with the N decoded tokens as a
 * scored continuation. Healthy kernels agree per position within 1e-3 nats
 * and the token after the continuation is decode's next one; with the
 * tiled kernel's testing fault the prefill (naive, no fault) disagrees. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu_model.h"
#include "testutil.h"

#define P_TOK 5
#define N_TOK 12

static void config(eng_config *cfg, const char *attn, int fault, int min_ctx, int capacity)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->attn = attn;
    cfg->attn_fault = fault;
    cfg->heads = 32;
    cfg->topk = 192;
    cfg->threads = 2;
    cfg->max_running = 4;
    cfg->seed = 11;
    cfg->d_model = 256;
    cfg->d_ff = 1024;
    cfg->vocab = 256;
    cfg->capacity_tok = capacity;
    cfg->min_ctx_tok = min_ctx;
}

static int step(void *st, const eng_batch *b)
{
    eng_phase ph[ENG_MAX_PHASES];
    int nph = 0;
    return eng_backend_cpu.step(st, b, ll_now_ns(), ph, &nph);
}

/* Decode: prefill P_TOK on slot 1 (its first token), then N_TOK-1 decode
 * steps, then one more for the token after them. toks/lps: N_TOK + 1. */
static int decode(void *st, uint64_t seed, eng_tok *toks)
{
    int slot = 1, ptok = P_TOK;
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &ptok,
                   .prefill_tok_total = P_TOK, .prefill_seed = &seed, .prefill_out = &toks[0]};
    int rc = step(st, &b);
    for (int j = 1; j <= N_TOK && rc == 0; j++) {
        int64_t ctx = P_TOK + j;
        eng_batch d = {.n_decode = 1, .decode_slot = &slot, .decode_ctx = &ctx, .ctx_tok_total = ctx,
                       .decode_seed = &seed, .decode_out = &toks[j]};
        toks[j].id = -1;
        rc = step(st, &d);
    }
    eng_backend_cpu.release(st, 1);
    return rc;
}

/* The prompt plus the first N_TOK decoded tokens, scored; *next: the token
 * after them. Runs on slot 2 (outputs never depend on the slot). */
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
    eng_batch b = {.n_prefill = 1, .prefill_slot = &slot, .prefill_tok = &ptok,
                   .prefill_tok_total = ptok, .prefill_seed = &seed, .prefill_out = next,
                   .prefill_cont = &cp};
    int rc = step(st, &b);
    eng_backend_cpu.release(st, 2);
    return rc;
}

/* Max |decode lp - prefill lp| over the continuation, or -1 on failure. */
static double run(const char *attn, int fault, int min_ctx, int capacity, int *next_ok, int *rank1)
{
    eng_config cfg;
    config(&cfg, attn, fault, min_ctx, capacity);
    void *st = NULL;
    char err[256] = "";
    int rc = eng_backend_cpu.create(&cfg, &st, err, sizeof err);
    CHECK(rc == 0, "create: %s", err);
    if (rc)
        return -1;
    eng_tok toks[N_TOK + 1], out[N_TOK], next = {.id = -1};
    int32_t rank[N_TOK];
    uint64_t seed = 0x1234567ull;
    rc = decode(st, seed, toks);
    rc = rc ? rc : rescore(st, seed, toks, out, rank, &next);
    CHECK(rc == 0, "steps: %d", rc);
    double worst = 0;
    *rank1 = 0;
    for (int j = 0; j < N_TOK && rc == 0; j++) {
        CHECK(out[j].id == toks[j].id, "position %d scored token %d, not %d", j, out[j].id, toks[j].id);
        worst = fmax(worst, fabs((double)out[j].lp - toks[j].lp));
        *rank1 += rank[j] == 1;
    }
    *next_ok = next.id == toks[N_TOK].id;
    eng_backend_cpu.destroy(st);
    return rc ? -1 : worst;
}

int main(void)
{
    int next_ok = 0, r1 = 0;
    for (int min_ctx = -1; min_ctx <= 0; min_ctx++) {
        double d = run("tiled", 0, min_ctx, 512, &next_ok, &r1);
        CHECK(d >= 0 && d <= 1e-3, "tiled decode vs prefill, min_ctx %d: max |dlp| %.3g <= 1e-3", min_ctx, d);
        CHECK(next_ok, "min_ctx %d: the token after the continuation is decode's next", min_ctx);
        CHECK(r1 == N_TOK, "min_ctx %d: greedy tokens are prefill's argmax (%d of %d)", min_ctx, r1, N_TOK);
        d = run("naive", 0, min_ctx, 512, &next_ok, &r1);
        CHECK(d >= 0 && d <= 1e-3, "naive decode vs prefill, min_ctx %d: max |dlp| %.3g", min_ctx, d);
    }
    /* a context that passes the capacity during the continuation: decode
     * wraps the slot's ring as it goes, and the prefill must wrap no
     * sooner (filled ahead, its history rows once overwrote the prompt's
     * first rows before the early positions were scored) */
    double w = run("naive", 0, -1, P_TOK + N_TOK - 4, &next_ok, &r1);
    CHECK(w >= 0 && w <= 1e-3, "capacity %d under prompt + continuation %d: max |dlp| %.3g <= 1e-3",
          P_TOK + N_TOK - 4, P_TOK + N_TOK, w);
    CHECK(next_ok, "capacity under the context: the token after the continuation is decode's next");
    double bad = run("tiled", ENG_ATTN_FAULT_SKIP_LAST_TILE, -1, 512, &next_ok, &r1);
    CHECK(bad > 0.01, "faulty tiled decode vs prefill: max |dlp| %.3g > 0.01", bad);
    TEST_MAIN_END();
}
