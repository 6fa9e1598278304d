/* test_tokenizer.c: the tokenizer.json byte-level BPE against token ids from
 * the reference `tokenizers` package (tests/scenarios/data/, made by
 * gen_tokenizer_vectors.py; python is not needed here), unsupported kinds, and
 * synthetic prompts built to an exact token length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "scenario.h"
#include "testutil.h"

#define DATA LOADLAW_SOURCE_DIR "/tests/scenarios/data/"

/* Every reference text: identical ids, decode(encode(x)) == x, count == ids. */
static void test_vectors(const char *file)
{
    scn_tokenizer *t = NULL;
    char err[512] = "", *json = NULL;
    size_t len = 0;
    int rc = scn_tokenizer_load(file, &t, err, sizeof err);
    CHECK(rc == 0, "load %s: %s", file, err);
    rc = ll_read_file(DATA "tokenizer_vectors.json", &json, &len, err, sizeof err);
    CHECK(rc == 0, "vectors: %s", err);
    cJSON *vec = json ? cJSON_Parse(json) : NULL;
    CHECK(cJSON_GetArraySize(vec) >= 30, "30 vectors");
    int i = 0;
    for (const cJSON *v = vec ? vec->child : NULL; v && t; v = v->next, i++) {
        const char *text = cJSON_GetObjectItem(v, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(v, "ids");
        int32_t *ids = NULL;
        size_t n = 0;
        rc = scn_tokenizer_encode(t, text, strlen(text), &ids, &n);
        CHECK(rc == 0, "encode [%d]", i);
        int same = rc == 0 && n == (size_t)cJSON_GetArraySize(want);
        size_t k = 0;
        for (const cJSON *w = want->child; same && w; w = w->next, k++)
            same = ids[k] == w->valueint;
        if (!same) {
            char got[2048] = "";
            for (size_t j = 0; j < n && strlen(got) < sizeof got - 16; j++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%d ", ids[j]);
            char *w = cJSON_PrintUnformatted(want);
            CHECK(same, "%s [%d] \"%s\": got %s want %s", file, i, text, got, w);
            free(w);
        } else {
            CHECK(same, "ids");
        }
        CHECK(scn_tokenizer_count(t, text, strlen(text)) == (int64_t)n, "count [%d]", i);
        char *back = NULL;
        size_t blen = 0;
        rc = scn_tokenizer_decode(t, ids, n, &back, &blen);
        CHECK(rc == 0 && blen == strlen(text) && strcmp(back, text) == 0, "decode [%d] \"%s\" -> \"%s\"", i, text,
              back ? back : "(null)");
        free(back);
        free(ids);
    }
    cJSON_Delete(vec);
    free(json);
    scn_tokenizer_free(t);
}

/* Unsupported kinds fail at load with a message naming what was found. */
static void expect_reject(const char *json, const char *needle)
{
    char path[] = "/tmp/ll_tok_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    CHECK(write(fd, json, strlen(json)) == (ssize_t)strlen(json), "write");
    close(fd);
    scn_tokenizer *t = NULL;
    char err[512] = "";
    int rc = scn_tokenizer_load(path, &t, err, sizeof err);
    CHECK(rc != 0 && t == NULL && strstr(err, needle), "rejected with '%s': '%s'", needle, err);
    scn_tokenizer_free(t);
    unlink(path);
}

static void test_reject(void)
{
    expect_reject("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",0]]}}", "Unigram");
    expect_reject("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", "WordPiece");
    expect_reject("{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0},\"merges\":[]}}",
                  "byte_fallback");
    expect_reject("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                  "\"pre_tokenizer\":{\"type\":\"Metaspace\"}}", "Metaspace");
    expect_reject("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", "ByteLevel");
    expect_reject("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                  "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
                  "regex");
}

/* Prompts built to a token length: count == target for every prompt. */
static void test_exact_prompts(scn_dist_kind kind)
{
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    char err[512] = "";
    CHECK(scn_new(&s) == 0, "scn_new");
    if (!s)
        return;
    CHECK(scn_set_str(&s->tokenizer_path, DATA "tokenizer.json") == 0, "set");
    s->prompt_tokens_set = 1;
    s->prompt_tokens = (scn_dist){.kind = kind, .value = 37, .min = 1, .max = 600, .mean = 200, .stddev = 120};
    s->prompt_count = 40;
    s->seed = 5;
    int rc = scn_prompts_load(s, &p, err, sizeof err);
    CHECK(rc == 0, "prompts: %s", err);
    const scn_tokenizer *t = p ? scn_prompts_tokenizer(p) : NULL;
    CHECK(t != NULL, "the set owns the tokenizer");
    int distinct = 0, last = -1;
    for (size_t i = 0; t && i < scn_prompts_count(p); i++) {
        const char *text = scn_prompt(p, i, NULL);
        int target = scn_prompt_target_tokens(p, i);
        int64_t c = scn_tokenizer_count(t, text, strlen(text));
        CHECK(target >= 1 && c == target, "prompt %zu: %lld tokens, target %d", i, (long long)c, target);
        if (kind == SCN_DIST_FIXED)
            CHECK(target == 37, "fixed target %d", target);
        distinct += target != last;
        last = target;
    }
    if (kind != SCN_DIST_FIXED)
        CHECK(distinct > 10, "targets vary (%d)", distinct);
    scn_prompts_free(p);
    scn_free(s);
}

/* Without a tokenizer: words = tokens / 1.33 and no target is claimed. */
static void test_prompts_no_tokenizer(void)
{
    scn_scenario *s = NULL;
    scn_prompts *p = NULL;
    char err[512] = "";
    CHECK(scn_new(&s) == 0, "scn_new");
    if (!s)
        return;
    s->prompt_tokens_set = 1;
    s->prompt_tokens = (scn_dist){.kind = SCN_DIST_FIXED, .value = 133};
    s->prompt_count = 4;
    CHECK(scn_prompts_load(s, &p, err, sizeof err) == 0, "prompts: %s", err);
    for (size_t i = 0; p && i < scn_prompts_count(p); i++) {
        int words = 0;
        scn_prompt(p, i, &words);
        CHECK(words == 100 && scn_prompt_target_tokens(p, i) == 0, "words %d target %d", words,
              scn_prompt_target_tokens(p, i));
    }
    CHECK(p && scn_prompts_tokenizer(p) == NULL, "no tokenizer");
    scn_prompts_free(p);
    scn_free(s);
}

int main(void)
{
    test_vectors(DATA "tokenizer.json");
    test_vectors(DATA "tokenizer_legacy.json");
    test_reject();
    test_exact_prompts(SCN_DIST_FIXED);
    test_exact_prompts(SCN_DIST_UNIFORM);
    test_exact_prompts(SCN_DIST_NORMAL);
    test_prompts_no_tokenizer();
    TEST_MAIN_END();
}
