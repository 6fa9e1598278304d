/* test_prompt_fit.c: synthetic prompts asked in tokens, fitted to their
 * length with a head in front (scenarios/prompt_fit.c), under a counter of
 * known costs: a word of n letters is ceil(n / 3) tokens, "the" one, and
 * the head's "[", id, "-", tag and "]" one each (as a BPE splits them).
 *
 * (a) The prompts head says are sent are fitted: head + text counts the
 *     asked length, their target is that length with the head inside; the
 *     others are left as built (not fitted).
 * (b) A prompt asked shorter than its head alone cannot land: it keeps
 *     one word, its target is what it counts, and the stats say how far
 *     off it is.
 * (c) The counter's error stops the fit, the prompt named. */
#include <ctype.h>
#include <string.h>

#include "scenario.h"
#include "testutil.h"

static int64_t count(void *ctx, const char *text, size_t len)
{
    int *calls = ctx;
    int64_t n = 0;
    (*calls)++;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        if (isalpha((unsigned char)text[i])) {
            while (j < len && isalpha((unsigned char)text[j]))
                j++;
            n += (int64_t)(j - i + 2) / 3;
        } else if (isdigit((unsigned char)text[i])) {
            while (j < len && isdigit((unsigned char)text[j]))
                j++;
            n++;
        } else {
            j++;
            n += text[i] != ' ';
        }
        i = j;
    }
    return n;
}

static int64_t failing(void *ctx, const char *text, size_t len)
{
    (void)ctx, (void)text, (void)len;
    return LL_EIO;
}

/* Even prompts are sent, with "[i-ab] " in front. */
static int head(void *ctx, size_t i, char *out, size_t size)
{
    (void)ctx;
    snprintf(out, size, "[%zu-ab] ", i);
    return i % 2 == 0;
}

static scn_prompts *load(int tokens)
{
    char json[256], err[256] = "";
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    snprintf(json, sizeof json, "{\"prompts\":{\"count\":10,\"tokens\":{\"dist\":\"fixed\",\"value\":%d}}}", tokens);
    CHECK(scn_load_string(json, "fit.json", &s, err, sizeof err) == 0, "load: %s", err);
    CHECK(s && scn_prompts_load(s, &p, err, sizeof err) == 0, "prompts: %s", err);
    scn_free(s);
    return p;
}

int main(void)
{
    scn_fit_stats st;
    char err[256] = "", h[64];
    int calls = 0;
    scn_prompts *p = load(40);
    if (p) {
        CHECK(scn_prompts_fittable(p), "fittable");
        CHECK(scn_prompts_fit(p, 8, head, NULL, count, &calls, &st, err, sizeof err) == 0, "fit: %s", err);
        CHECK(st.n_fitted == 4 && st.n_exact == 4 && st.max_off_tok == 0, "4 of the 8 used fitted, exact: %zu %zu",
              st.n_fitted, st.n_exact);
        CHECK(st.n_counts == (size_t)calls && calls <= 4 * 8, "%d counts for 4 prompts", calls);
        for (size_t i = 0; i < 10; i++) {
            int sent = i % 2 == 0 && i < 8;
            head(NULL, i, h, sizeof h);
            char text[4096];
            snprintf(text, sizeof text, "%s%s", h, scn_prompt(p, i, NULL));
            int dummy = 0;
            CHECK(scn_prompt_head_inside(p, i) == sent, "prompt %zu fitted: %d", i, sent);
            if (sent)
                CHECK(count(&dummy, text, strlen(text)) == 40 && scn_prompt_target_tokens(p, i) == 40,
                      "prompt %zu with its head counts 40 (%lld), its target 40 (%d)", i,
                      (long long)count(&dummy, text, strlen(text)), scn_prompt_target_tokens(p, i));
        }
        CHECK(scn_prompts_fit(p, 8, head, NULL, failing, NULL, &st, err, sizeof err) == LL_EIO &&
                  strstr(err, "fitting prompt 0 to 40 tokens"),
              "a counter's error names the prompt: %s", err);
        scn_prompts_free(p);
    }
    p = load(3); /* the head alone is 5 tokens: "[", id, "-", "ab", "]" */
    if (p) {
        CHECK(scn_prompts_fit(p, 1, head, NULL, count, &calls, &st, err, sizeof err) == 0, "fit: %s", err);
        int dummy = 0;
        const char *t = scn_prompt(p, 0, NULL);
        CHECK(st.n_fitted == 1 && st.n_exact == 0 && strchr(t, ' ') == NULL &&
                  scn_prompt_target_tokens(p, 0) == 5 + count(&dummy, t, strlen(t)) &&
                  st.max_off_tok == scn_prompt_target_tokens(p, 0) - 3,
              "too short to fit: one word left (%s), target %d, off by %d", t, scn_prompt_target_tokens(p, 0),
              st.max_off_tok);
        scn_prompts_free(p);
    }
    TEST_MAIN_END();
}
