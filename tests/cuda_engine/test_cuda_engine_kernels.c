/* test_cuda_engine_kernels.c: the three decode-attention kernels give the
 * same outputs through the engine with backend=cuda, over loopback HTTP, the
 * end-to-end half of a kernel A/B's "same outputs" verdict. Per KV layout
 * (bf16, fp8), one engine per kernel (naive, tiled, v2; same seed, so the
 * same weights and the same cache contents) serves the same four greedy
 * streamed completions of 8 tokens at once (they share decode steps, so
 * the tiled and v2 kernels run batches under their split plans: checked
 * on the emulator, printed on a GPU), with
 * prompts longer than the top-k, so the indexer's selection, not the whole
 * context, reaches the kernels. Against naive's answers, every request's
 * tokens must be identical and each token's logprob within 0.005 nat
 * (check-decode's tolerance). The negative control: tiled with
 * attn_fault=swap_heads must move some logprob past that tolerance, or the
 * check could not see a wrong kernel. A GPU test ("SKIP: <reason>", exit
 * 77, without a device); test_cuda_engine_kernels_cuemu runs it on the CPU
 * (cuemu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "common.h"
#include "engine.h"
#include "tclient.h"
#include "testutil.h"

#define N_REQ 4
#define N_TOK 8
#define TOL_NAT 0.005
#define SPEC "backend=cuda,heads=64,topk=32,d_model=64,d_ff=1024,vocab=256,capacity=256,max_running=4,seed=5"

/* Prompts of 30-60 words: more rows than the top-k of 32. */
static const char *const k_prompts[N_REQ] = {
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
    "upsilon phi chi psi omega one two three four five six seven eight nine ten eleven twelve",
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat and the bird sings "
    "in the tall tree by the river where the fish swim under the old stone bridge near the mill and the "
    "farmer walks home across the green field at dusk",
    "red orange yellow green blue indigo violet black white grey brown pink cyan magenta gold silver "
    "bronze copper iron tin lead zinc nickel cobalt chrome amber ivory jade ruby pearl onyx",
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june "
    "july august september october november december spring summer autumn winter morning noon evening "
    "night dawn dusk midnight today tomorrow yesterday week month year decade century",
};

typedef struct answer {
    int n;                    /* tokens read */
    char text[1024];          /* the tokens' texts, joined */
    double lp[N_TOK];         /* each token's logprob */
} answer;

/* One streamed completion's tokens and logprobs from its SSE body. */
static void read_answer(const char *body, answer *a)
{
    tc_events ev = {0};
    memset(a, 0, sizeof *a);
    tc_sse_split(body ? body : "", &ev);
    for (size_t i = 0; i < ev.n && a->n < N_TOK; i++) {
        cJSON *e = cJSON_Parse(ev.data[i]);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0);
        const cJSON *t = cJSON_GetObjectItem(ch, "text");
        const cJSON *l =
            cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "token_logprobs"), 0);
        if (cJSON_IsString(t) && cJSON_IsNumber(l)) {
            strncat(a->text, t->valuestring, sizeof a->text - strlen(a->text) - 1);
            a->lp[a->n++] = l->valuedouble;
        }
        cJSON_Delete(e);
    }
    tc_events_free(&ev);
}

/* The N_REQ completions at once from an engine with spec SPEC,kv=<kv>,<extra>. */
static void serve(const char *kv, const char *extra, answer *out)
{
    char spec[512], url[256], body[N_REQ][1024];
    snprintf(spec, sizeof spec, "%s,kv=%s,%s", SPEC, kv, extra);
    eng_engine *e = tc_start(spec);
    snprintf(url, sizeof url, "%s/v1/completions", eng_url(e));
    tc_bg bg[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        snprintf(body[i], sizeof body[i],
                 "{\"prompt\":\"%s\",\"max_tokens\":%d,\"ignore_eos\":true,\"logprobs\":0,\"temperature\":0,"
                 "\"stream\":true}",
                 k_prompts[i], N_TOK);
        tc_bg_start(&bg[i], url, body[i]);
    }
    for (int i = 0; i < N_REQ; i++) {
        tc_bg_join(&bg[i]);
        CHECK(bg[i].resp.status == 200, "%s %s: request %d answered %ld", kv, extra, i, bg[i].resp.status);
        read_answer(bg[i].resp.body.p, &out[i]);
        CHECK(out[i].n == N_TOK, "%s %s: request %d streamed %d tokens with logprobs", kv, extra, i, out[i].n);
        tc_resp_free(&bg[i].resp);
    }
    /* alone, each request takes N_TOK steps (a prefill and N_TOK - 1
     * decodes): fewer in all means some steps ran several at once. On the
     * emulated GPU a step takes milliseconds, so four requests sent together
     * always overlap; a real GPU may finish one before the next arrives, so
     * there the count is only printed. */
    char murl[256];
    ll_buf m = {0};
    snprintf(murl, sizeof murl, "%s/metrics", eng_url(e));
    double steps = tc_http("GET", murl, NULL, &m) == 200 ? tc_metric(m.p, "loadlaw_steps_total") : -1;
    printf("  kv=%s %-34s %.0f steps for %d requests of %d tokens\n", kv, extra, steps, N_REQ, N_TOK);
#ifdef LOADLAW_TEST_EMULATED
    CHECK(steps > 0 && steps < N_REQ * N_TOK, "%s %s: the requests shared steps (%.0f steps for %d tokens)", kv,
          extra, steps, N_REQ * N_TOK);
#endif
    ll_buf_free(&m);
    eng_stop(e);
}

/* Max |lp - ref lp| over every request's tokens; *same: requests whose text
 * is naive's. */
static double against(const answer *ref, const answer *got, int *same)
{
    double worst = 0;
    *same = 0;
    for (int i = 0; i < N_REQ; i++) {
        *same += ref[i].n == got[i].n && strcmp(ref[i].text, got[i].text) == 0;
        for (int t = 0; t < N_TOK; t++)
            worst = fmax(worst, fabs(ref[i].lp[t] - got[i].lp[t]));
    }
    return worst;
}

/* naive's answers into ref, then tiled's and v2's against them */
static void layout(const char *kv, answer *ref)
{
    answer got[N_REQ];
    serve(kv, "attn=naive", ref);
    printf("  kv=%s naive: '%s' ...\n", kv, ref[0].text);
    static const char *const kernels[] = {"attn=tiled", "attn=v2"};
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        int same = 0;
        serve(kv, kernels[k], got);
        double d = against(ref, got, &same);
        printf("  kv=%s %-10s: %d/%d requests naive's tokens, max |d logprob| %.4f nat\n", kv, kernels[k], same,
               N_REQ, d);
        CHECK(same == N_REQ, "kv=%s %s: every request's greedy tokens are naive's (%d of %d)", kv, kernels[k], same,
              N_REQ);
        CHECK(d <= TOL_NAT, "kv=%s %s: logprobs within %.3f nat of naive's (max %.4f)", kv, kernels[k], TOL_NAT, d);
    }
}

int main(void)
{
    char why[400];
    if (cuda_backend_probe(0, why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return TEST_SKIP;
    }
    answer ref[N_REQ], ref8[N_REQ], bad[N_REQ];
    layout("bf16", ref);
    layout("fp8", ref8);
    /* the control: a kernel that is wrong on purpose must be seen */
    int same = 0;
    serve("bf16", "attn=tiled,attn_fault=swap_heads", bad);
    double d = against(ref, bad, &same);
    printf("  control: tiled with swap_heads: %d/%d requests naive's tokens, max |d logprob| %.4f nat\n", same, N_REQ,
           d);
    CHECK(d > TOL_NAT, "control: swap_heads moves a logprob past %.3f nat (max %.4f)", TOL_NAT, d);
    TEST_MAIN_END();
}
