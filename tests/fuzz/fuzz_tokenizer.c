/* fuzz_tokenizer.c: the tokenizer.json loader and the byte-level BPE
 * (scenarios/tokenizer.c).
 *
 * Two kinds of input, told apart by the first byte:
 *  - '{': a tokenizer.json. When it loads, a fixed multilingual sample is
 *    encoded and decoded with it.
 *  - anything else: text, encoded with the test tokenizer
 *    (tests/scenarios/data/tokenizer.json, loaded once).
 * Properties: the tokenizer is byte-level (scenario.h), whose byte map is a
 * bijection, so with the test tokenizer well-formed UTF-8 text comes back
 * byte for byte from decode(encode(x)), in at most one id per byte; with any
 * tokenizer that loads, every id encode gives is one decode accepts and
 * scn_tokenizer_count agrees with the number of ids.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fuzz_util.h"
#include "scenario.h"

static const char k_sample[] = "Hello, world! 123 4567 \xc3\xa9t\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b "
                               "<|endoftext|> it's  \t\n\r\n x\xf0\x9f\x98\x80y";

/* exact 2: decode(encode(x)) == x as well; 1: counts and a decode only (a
 * fuzzed tokenizer.json may give two added tokens one id, so its decode need
 * not give the text back); 0: no promise beyond "no crash" (not UTF-8). */
static void round_trip(const scn_tokenizer *t, const char *text, size_t len, int exact)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (scn_tokenizer_encode(t, text, len, &ids, &n) != 0)
        return; /* refused (no memory, or text the regex engine rejects) */
    if (!exact) {
        free(ids);
        return;
    }
    /* Each id covers at least one byte of the text, except the space a
     * ByteLevel step with add_prefix_space puts in front of a segment (the
     * test tokenizer has none; a fuzzed one may). */
    if (exact == 2)
        FUZZ_CHECK((len == 0) == (n == 0) && n <= len);
    int64_t count = scn_tokenizer_count(t, text, len);
    FUZZ_CHECK(count == (int64_t)n);
    char *back = NULL;
    size_t back_len = 0;
    int rc = scn_tokenizer_decode(t, ids, n, &back, &back_len);
    if (rc == 0) {
        FUZZ_CHECK(back[back_len] == '\0');
        if (exact == 2)
            FUZZ_CHECK(back_len == len && memcmp(back, text, len) == 0);
    }
    FUZZ_CHECK(rc == 0 || rc == LL_ENOMEM);
    free(back);
    free(ids);
}

static scn_tokenizer *test_tokenizer(void)
{
    static scn_tokenizer *t;
    if (!t) {
        char err[512];
        const char *path = LOADLAW_SOURCE_DIR "/tests/scenarios/data/tokenizer.json";
        if (scn_tokenizer_load(path, &t, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err);
            abort();
        }
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && data[0] == '{') {
        char path[64], err[512];
        scn_tokenizer *t = NULL;
        int fd = fuzz_memfile(data, size, path, sizeof path);
        if (fd < 0)
            return 0;
        if (scn_tokenizer_load(path, &t, err, sizeof err) == 0) {
            round_trip(t, k_sample, sizeof k_sample - 1, 1);
            scn_tokenizer_free(t);
        }
        close(fd);
        return 0;
    }
    const char *text = (const char *)data;
    round_trip(test_tokenizer(), text, size, fuzz_utf8_valid(text, size) ? 2 : 0);
    return 0;
}
