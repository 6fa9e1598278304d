/* test_fit_cpu_context.c: the context term of a real kernel, end to end.
 * The cpu backend's attention reads each running request's context (up to
 * its top-k cap; min_ctx=0 lets a short context cost less), so its step has
 * a c*K term by its arithmetic, not by a played law:
 *
 *  - min_ctx=0, top-k past every context, prompt lengths wandering within
 *    levels (load.vary_context): `loadlaw fit` chooses a model with the
 *    context term, c's interval above 0, and the chosen model predicts every
 *    level's steady throughput within TOL;
 *  - the same with a top-k cap under every context (the seed's sparse
 *    attention: each request reads k rows however long its context): no
 *    context term is chosen, or one under a fifth of the uncapped run's
 *    (the indexer's own scan).
 * The uncapped sweep is measured once more when its first try misses (a
 * busy host).
 * argv: none (LOADLAW_BIN). Real time: about a minute (two sweeps). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"
#include "tsupport.h"

/* The chosen model's error per level: 5% is the family's own bar
 * (FIT_MODEL_LEVEL_FIT); real kernels on a shared machine get 8%, and under
 * the sanitizers, whose overhead is not spread like the kernels' work, 20%. */
#ifdef LOADLAW_SANITIZED
#define TOL 0.20
#else
#define TOL 0.08
#endif

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Sweep the cpu backend with top-k cap `topk` and fit; the fit's JSON. */
static cJSON *sweep_fit(const char *dir, const char *name, int topk)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s-scenario.json", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fprintf(f,
            "{\"name\":\"%s\",\"engine\":\"backend=cpu,attn=naive,heads=32,topk=%d,min_ctx=0,threads=1,seed=1\","
            "\"request\":{\"max_tokens\":48,\"think_tokens\":0,\"ignore_eos\":true,\"timeout_s\":300},"
            "\"prompts\":{\"source\":\"synthetic\",\"words\":{\"dist\":\"uniform\",\"min\":200,\"max\":1500},"
            "\"count\":512,\"seed\":1},"
            "\"load\":{\"concurrency\":[1,2,4,8],\"requests\":0,\"warmup\":0,\"drain_s\":10,"
            "\"vary_context\":true}}\n",
            name, topk);
    fclose(f);
    int rc = 0;
    cJSON *j = tu_sweep_fit(LOADLAW_BIN, path, dir, name, &rc);
    CHECK(rc == 0, "%s: sweep and fit (%s)", name, dir);
    return j;
}

/* The chosen model's term "K/1k": its coefficient and interval; 0 when the
 * chosen model has none. */
static int context_term(const cJSON *fit, double *c, double ci[2])
{
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fit, "model_check"), "chosen");
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(ch, "terms"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "term");
        if (cJSON_IsString(name) && strcmp(name->valuestring, "K/1k") == 0) {
            const cJSON *iv = cJSON_GetObjectItemCaseSensitive(t, "ci");
            *c = num(t, "coef");
            ci[0] = cJSON_GetArraySize(iv) == 2 ? cJSON_GetArrayItem(iv, 0)->valuedouble : NAN;
            ci[1] = cJSON_GetArraySize(iv) == 2 ? cJSON_GetArrayItem(iv, 1)->valuedouble : NAN;
            return 1;
        }
    }
    return 0;
}

static const char *best_of(const cJSON *fit)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fit, "model_check"), "best");
    return cJSON_IsString(b) ? b->valuestring : "(none)";
}

/* Every level's error of the chosen model against TOL; print=1 prints them.
 * The number of levels out of tolerance (-1: not four levels). */
static int levels_off(const cJSON *fit, int print)
{
    const cJSON *L;
    int n = 0, off = 0;
    cJSON_ArrayForEach(L, cJSON_GetObjectItemCaseSensitive(fit, "levels"))
    {
        double e = num(L, "model_error_rel");
        n++;
        if (print)
            printf("  C=%g: steady %.2f tok/s, model %.2f (%+.1f%%)\n", num(L, "concurrency"),
                   num(L, "steady_tok_per_s"), num(L, "model_pred_tok_per_s"), 100 * e);
        off += !(fabs(e) < TOL);
    }
    return n == 4 ? off : -1;
}

/* The uncapped sweep, measured again once when its first try misses: a
 * host busy with other work during one level (another build, another test
 * suite) slows that level's steps and no law fits it; a wrong kernel or a
 * wrong fit misses both tries. */
static cJSON *sweep_full(const char *dir)
{
    static const char *const names[] = {"full", "full-again"};
    cJSON *fit = NULL;
    for (int i = 0; i < 2; i++) {
        double c = NAN, ci[2] = {NAN, NAN};
        cJSON_Delete(fit);
        fit = sweep_fit(dir, names[i], 16384);
        int has = fit && context_term(fit, &c, ci), off = fit ? levels_off(fit, 0) : -1;
        if (has && ci[0] > 0 && off == 0)
            break;
        if (i == 0)
            printf("min_ctx=0, top-k 16384: %s, %d level(s) past %.0f%%: measured once more\n",
                   fit ? best_of(fit) : "(no fit)", off, 100 * TOL);
    }
    return fit;
}

int main(void)
{
    char dir[256];
    double c = NAN, ci[2] = {NAN, NAN};
    if (tu_tmpdir("ll_test_fit_cpu_ctx", dir, sizeof dir))
        return 1;
    cJSON *full = sweep_full(dir);
    printf("min_ctx=0, top-k 16384: %s\n", best_of(full));
    CHECK(context_term(full, &c, ci), "a model with the context term chosen: %s", best_of(full));
    printf("  c = %.4g ms per 1k context tokens [%.4g, %.4g]\n", c, ci[0], ci[1]);
    CHECK(ci[0] > 0, "c's interval above 0: [%g, %g]", ci[0], ci[1]);
    int off = full ? levels_off(full, 1) : -1;
    CHECK(off == 0, "four levels, each within %.0f%% of the chosen model (%d past it; -1: not four levels)", 100 * TOL,
          off);
    cJSON_Delete(full);

    cJSON *capped = sweep_fit(dir, "capped", 32);
    double cc = NAN, cci[2] = {NAN, NAN};
    int has = capped && context_term(capped, &cc, cci);
    printf("min_ctx=0, top-k 32 under every context: %s", best_of(capped));
    if (has)
        printf(" (c = %.4g ms per 1k [%.4g, %.4g])", cc, cci[0], cci[1]);
    printf("\n");
    /* The indexer still scans each context to pick its 32 rows: a real
     * O(context) cost. The sanitizers slow that scan more than the rest, and
     * plain runs on the shared 2-core machine have chosen it as a term of
     * 0.40-0.73 ms per 1k (about 12% of the uncapped run's, in about one
     * run of three). What the cap must do is remove the attention's share:
     * no context term, or one under a fifth of the uncapped run's. */
    CHECK(capped && (!has || cc < 0.2 * c), "no context term, or one under a fifth of the uncapped run's %.4g: %s %.4g",
          c, best_of(capped), cc);
    cJSON_Delete(capped);
    if (!tu_fail)
        tu_rmtree(dir);
    TEST_MAIN_END();
}
