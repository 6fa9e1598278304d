/* test_engine_prefix.c: the engine's prefix cache (engine/prefix_cache.c)
 * on its own: block keys from chat and completions bodies, hits up to the
 * first differing block, the last token never cached, eviction of the
 * oldest blocks when full, and a table that keeps finding keys after many
 * evictions (its probe runs repaired). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testutil.h"

/* n words "w0 w1 ..." with word i replaced by "x" when i == diff. */
static char *words(int n, int diff)
{
    char *s = malloc((size_t)n * 12 + 1), *p = s;
    for (int i = 0; i < n; i++)
        p += i == diff ? sprintf(p, "x ") : sprintf(p, "w%d ", i);
    *p = '\0';
    return s;
}

static void keys_of(const char *json, int chat, uint64_t **k, int *n)
{
    cJSON *root = cJSON_Parse(json);
    CHECK(root && eng_prefix_keys(root, chat, k, n) == 0, "keys of %.40s", json);
    cJSON_Delete(root);
}

int main(void)
{
    char *a = words(100, -1), *b = words(100, 40), json[4096];
    uint64_t *ka, *kb, *kc;
    int na, nb, nc;
    snprintf(json, sizeof json, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", a);
    keys_of(json, 1, &ka, &na);
    snprintf(json, sizeof json, "{\"prompt\":\"%s\"}", b);
    keys_of(json, 0, &kb, &nb);
    /* the same words split over two text parts: the same blocks */
    snprintf(json, sizeof json,
             "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"%.*s\"}]},"
             "{\"role\":\"user\",\"content\":\"%s\"}]}",
             (int)(strstr(a, "w10 ") - a), a, strstr(a, "w10 "));
    keys_of(json, 1, &kc, &nc);
    CHECK(na == 6 && nb == 6 && nc == 6, "100 words: 6 whole blocks of 16 (%d %d %d)", na, nb, nc);
    CHECK(memcmp(ka, kc, 6 * sizeof *ka) == 0, "the same words in two messages: the same keys");
    CHECK(memcmp(ka, kb, 2 * sizeof *ka) == 0 && ka[2] != kb[2] && ka[5] != kb[5],
          "a word changed in block 2: keys agree before it, differ from it on");

    eng_prefix_cache *c = eng_prefix_new(64);
    CHECK(eng_prefix_admit(c, ka, na, 100) == 0, "a first prompt: nothing cached");
    CHECK(eng_prefix_admit(c, ka, na, 100) == 96, "the same again: its 6 blocks (96 tokens)");
    CHECK(eng_prefix_admit(c, kb, nb, 100) == 32, "one differing in block 2: 2 blocks");
    CHECK(eng_prefix_admit(c, ka, na, 96) == 95, "a prompt all blocks: the last token computed");
    eng_prefix_free(c);

    /* eviction: a cache of 8 blocks, 64 distinct one-block prompts, then the
     * last 8 still found and the first gone */
    c = eng_prefix_new(8);
    uint64_t one[64];
    for (int i = 0; i < 64; i++) {
        one[i] = 1000 + (uint64_t)i * 7919;
        eng_prefix_admit(c, &one[i], 1, 32);
    }
    int found = 0;
    for (int i = 56; i < 64; i++)
        found += eng_prefix_admit(c, &one[i], 1, 32) == 16;
    CHECK(found == 8, "the last 8 blocks kept: %d", found);
    CHECK(eng_prefix_admit(c, &one[0], 1, 32) == 0, "the oldest evicted");
    eng_prefix_free(c);

    free(a);
    free(b);
    free(ka);
    free(kb);
    free(kc);
    TEST_MAIN_END();
}
