/* tokenizer.c: Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2,
 * Llama 3, Qwen, DeepSeek), so loadlaw can count tokens where a server gives
 * no usage and build prompts of an exact token length.
 *
 * Pipeline, as the reference `tokenizers` runs it for these files:
 *   1. added tokens are cut out of the raw text first (leftmost, longest);
 *   2. each remaining segment goes through the pre-tokenizer steps (Split with
 *      a regex, ByteLevel, Digits, in a Sequence), each step splitting every
 *      piece further; the regexes run with PCRE2 (UTF + UCP: the patterns use
 *      \p{L} / \p{N} and Unicode \s);
 *   3. each piece is BPE-merged by merge rank.
 * The byte-level map (byte <-> printable code point) is a bijection, so the
 * vocabulary and merges are converted to raw bytes once at load time and BPE
 * runs on the text's bytes directly: no per-call remapping.
 * Loaded once, then read-only: encode/decode allocate their own scratch, so any
 * number of threads may call them at once.
 * This file reads tokenizer.json into the tables (tokenizer_internal.h), with
 * their hash maps, and frees them; steps 1-3 run in tokenizer_encode.c.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* The ByteLevel pre-tokenizer's own regex (GPT-2), used when use_regex is set. */
static const char k_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- byte-level map (GPT-2's bytes_to_unicode) ----------------------------- */

/* Printable bytes map to themselves; the other 68 to U+0100.. in byte order. */
static int bl_self(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

/* Code point -> byte, or -1 when cp is not a byte-level character. */
static int bl_byte(uint32_t cp)
{
    if (cp < 256)
        return bl_self((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1;
    int n = 0;
    for (int b = 0; b < 256; b++)
        if (!bl_self(b) && n++ == (int)(cp - 256))
            return b;
    return -1;
}

/* Decode one UTF-8 code point at s (len bytes left); returns its length, 0 if invalid. */
static size_t utf8_cp(const unsigned char *s, size_t len, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || n > len)
        return 0;
    uint32_t c = s[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    return n;
}

/* A vocab string of byte-level characters -> raw bytes (in place: never longer).
 * Returns the new length, or -1 when a character is not byte-level. */
static long bl_to_bytes(char *s, size_t len)
{
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = utf8_cp((const unsigned char *)s + i, len - i, &cp);
        int b = n ? bl_byte(cp) : -1;
        if (b < 0)
            return -1;
        s[o++] = (char)b;
        i += n;
    }
    return (long)o;
}

/* ---- hash maps -------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

int32_t scn_tk_vocab_find(const scn_tokenizer *t, const char *s, size_t n)
{
    size_t m = t->vmap_cap - 1;
    for (size_t i = hash_bytes(s, n) & m;; i = (i + 1) & m) {
        int32_t id = t->vmap[i];
        if (id < 0)
            return -1;
        if (t->tok_len[id] == n && memcmp(t->tok[id], s, n) == 0)
            return id;
    }
}

/* Duplicate byte strings keep the first id (vocab strings are unique in practice). */
static void vocab_insert(scn_tokenizer *t, int32_t id)
{
    if (scn_tk_vocab_find(t, t->tok[id], t->tok_len[id]) >= 0)
        return;
    size_t m = t->vmap_cap - 1;
    size_t i = hash_bytes(t->tok[id], t->tok_len[id]) & m;
    while (t->vmap[i] >= 0)
        i = (i + 1) & m;
    t->vmap[i] = id;
}

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

const tk_merge *scn_tk_merge_find(const scn_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t k = pair_key(a, b);
    size_t m = t->mmap_cap - 1;
    for (size_t i = hash_u64(k) & m;; i = (i + 1) & m) {
        if (t->mmap[i].key == UINT64_MAX)
            return NULL;
        if (t->mmap[i].key == k)
            return &t->mmap[i];
    }
}

/* A later duplicate of a pair keeps the earlier (lower) rank, as tokenizers does. */
static void merge_insert(scn_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t id)
{
    uint64_t k = pair_key(a, b);
    size_t m = t->mmap_cap - 1;
    size_t i = hash_u64(k) & m;
    for (; t->mmap[i].key != UINT64_MAX; i = (i + 1) & m)
        if (t->mmap[i].key == k)
            return;
    t->mmap[i] = (tk_merge){k, rank, id};
}

/* ---- loading ------------------------------------------------------------------ */

static int compile_re(const char *pattern, int literal, pcre2_code **out, const char *path, char *err,
                      size_t errlen)
{
    int ec;
    PCRE2_SIZE eo;
    /* MATCH_INVALID_UTF: text with bad UTF-8 still tokenizes (the bad bytes
     * fall in gaps between matches) instead of failing the match. Oniguruma
     * writes \uHHHH; PCRE2 reads it only with ALT_BSUX. */
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (literal)
        opts |= PCRE2_LITERAL;
    else if (strstr(pattern, "\\u"))
        opts |= PCRE2_ALT_BSUX;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        ll_errf(err, errlen, "%s: pre_tokenizer regex at offset %zu: %s", path, (size_t)eo, (const char *)msg);
        return LL_EINVAL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* a speed-up only: without JIT it interprets */
    *out = re;
    return 0;
}

static int push_step(scn_tokenizer *t, tk_step st)
{
    if (ll_vec_push(&t->steps, st)) {
        pcre2_code_free(st.re);
        return LL_ENOMEM;
    }
    return 0;
}

static int json_bool(const cJSON *o, const char *key, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* One pre_tokenizer object (recursing into Sequence). *byte_level set when a
 * ByteLevel step is seen. */
static int load_pretok(scn_tokenizer *t, const cJSON *pt, int *byte_level, const char *path, char *err,
                       size_t errlen)
{
    const char *type = ll_json_str(pt, "type", "");
    int rc = 0;
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
        for (const cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next)
            LL_TRY(load_pretok(t, c, byte_level, path, err, errlen));
        return 0;
    }
    tk_step st = {NULL, TK_ISOLATED, 0, 0};
    if (strcmp(type, "ByteLevel") == 0) {
        *byte_level = 1;
        st.add_prefix_space = json_bool(pt, "add_prefix_space", 1);
        if (json_bool(pt, "use_regex", 1))
            LL_TRY(compile_re(k_gpt2_pattern, 0, &st.re, path, err, errlen));
        return push_step(t, st);
    }
    if (strcmp(type, "Digits") == 0) {
        LL_TRY(compile_re(json_bool(pt, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", 0, &st.re, path, err,
                          errlen));
        return push_step(t, st);
    }
    if (strcmp(type, "Split") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
        const char *rx = ll_json_str(pat, "Regex", NULL), *lit = ll_json_str(pat, "String", NULL);
        const char *beh = ll_json_str(pt, "behavior", "Isolated");
        static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                            "Contiguous"};
        size_t k = 0;
        while (k < 5 && strcmp(beh, names[k]) != 0)
            k++;
        if ((!rx && !lit) || k == 5) {
            ll_errf(err, errlen, "%s: pre_tokenizer Split: expected pattern {\"Regex\"|\"String\"} and a known "
                    "behavior (got \"%s\")", path, beh);
            return LL_EINVAL;
        }
        st.behavior = (tk_behavior)k;
        st.invert = json_bool(pt, "invert", 0);
        LL_TRY(compile_re(rx ? rx : lit, rx == NULL, &st.re, path, err, errlen));
        return push_step(t, st);
    }
    ll_errf(err, errlen, "%s: pre_tokenizer \"%s\" is not supported (byte-level BPE takes Split, ByteLevel, "
            "Digits, Sequence)", path, type);
    return LL_EINVAL;
fail:
    return rc;
}

/* Reject what this tokenizer would get wrong, naming what was found. */
static int check_kind(const cJSON *root, const cJSON *model, const char *path, char *err, size_t errlen)
{
    const char *mt = ll_json_str(model, "type", NULL);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!mt && cJSON_IsObject(vocab) && cJSON_GetObjectItemCaseSensitive(model, "merges"))
        mt = "BPE"; /* old files leave model.type out */
    if (!mt || strcmp(mt, "BPE") != 0) {
        const char *what = !mt ? "no model.type" : strcmp(mt, "Unigram") == 0 ? "Unigram (SentencePiece)"
                                                                                 : mt;
        ll_errf(err, errlen, "%s: model %s is not supported: only byte-level BPE (GPT-2, Llama 3, Qwen, "
                "DeepSeek)", path, what);
        return LL_EINVAL;
    }
    if (json_bool(model, "byte_fallback", 0)) {
        ll_errf(err, errlen, "%s: BPE with byte_fallback (SentencePiece-style, e.g. Llama 2 / Mistral) is not "
                "supported: only byte-level BPE", path);
        return LL_EINVAL;
    }
    const char *cp = ll_json_str(model, "continuing_subword_prefix", NULL);
    const char *ew = ll_json_str(model, "end_of_word_suffix", NULL);
    if ((cp && cp[0]) || (ew && ew[0])) {
        ll_errf(err, errlen, "%s: BPE with continuing_subword_prefix/end_of_word_suffix is not supported", path);
        return LL_EINVAL;
    }
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (norm && !cJSON_IsNull(norm)) {
        const char *nt = ll_json_str(norm, "type", "");
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
        int empty_seq = strcmp(nt, "Sequence") == 0 && cJSON_GetArraySize(list) == 0;
        /* NFC (Qwen) is taken as a no-op: prompts and model output are NFC
         * already in practice; anything else would change the text. */
        if (!empty_seq && strcmp(nt, "NFC") != 0) {
            ll_errf(err, errlen, "%s: normalizer \"%s\" is not supported (byte-level BPE has none, or NFC)",
                    path, nt);
            return LL_EINVAL;
        }
    }
    return 0;
}

static int load_vocab(scn_tokenizer *t, const cJSON *vocab, const char *path, char *err, size_t errlen)
{
    int32_t max_id = -1;
    int n = 0;
    for (const cJSON *e = vocab->child; e; e = e->next, n++) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e8) {
            ll_errf(err, errlen, "%s: model.vocab[\"%s\"]: expected an id >= 0", path, e->string);
            return LL_EPARSE;
        }
        if (e->valueint > max_id)
            max_id = e->valueint;
    }
    t->n_ids = max_id + 1;
    t->tok = calloc((size_t)t->n_ids + 1, sizeof *t->tok);
    t->tok_len = calloc((size_t)t->n_ids + 1, sizeof *t->tok_len);
    t->vmap_cap = pow2_at_least((size_t)n * 2);
    t->vmap = malloc(t->vmap_cap * sizeof *t->vmap);
    if (!t->tok || !t->tok_len || !t->vmap)
        return LL_ENOMEM;
    memset(t->vmap, 0xff, t->vmap_cap * sizeof *t->vmap);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id = e->valueint;
        size_t len = strlen(e->string);
        char *s = malloc(len + 1);
        if (!s)
            return LL_ENOMEM;
        memcpy(s, e->string, len + 1);
        long bl = bl_to_bytes(s, len);
        free(t->tok[id]);
        t->tok[id] = s;
        if (bl < 0) {
            /* Not byte-level text: BPE can never produce it; decode gives it as is. */
            t->tok_len[id] = (uint32_t)len;
            continue;
        }
        s[bl] = '\0';
        t->tok_len[id] = (uint32_t)bl;
        vocab_insert(t, id);
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = scn_tk_vocab_find(t, &c, 1);
    }
    return 0;
}

/* One vocab string (byte-level text) -> id, or -1. */
static int32_t vocab_id_bl(const scn_tokenizer *t, const char *s)
{
    size_t len = strlen(s);
    char *tmp = malloc(len + 1);
    if (!tmp)
        return -2;
    memcpy(tmp, s, len + 1);
    long bl = bl_to_bytes(tmp, len);
    int32_t id = bl < 0 ? -1 : scn_tk_vocab_find(t, tmp, (size_t)bl);
    free(tmp);
    return id;
}

static int load_merges(scn_tokenizer *t, const cJSON *merges, const char *path, char *err, size_t errlen)
{
    int n = cJSON_GetArraySize(merges);
    t->mmap_cap = pow2_at_least((size_t)n * 2);
    t->mmap = malloc(t->mmap_cap * sizeof *t->mmap);
    if (!t->mmap)
        return LL_ENOMEM;
    for (size_t i = 0; i < t->mmap_cap; i++)
        t->mmap[i].key = UINT64_MAX;
    int rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++) {
        char buf[1024];
        const char *a = NULL, *b = NULL;
        /* Two forms: "a b" (older files) or ["a", "b"] (tokenizers >= 0.20). */
        if (cJSON_IsString(m)) {
            const char *sp = strchr(m->valuestring, ' ');
            if (sp && (size_t)(sp - m->valuestring) < sizeof buf) {
                snprintf(buf, sizeof buf, "%.*s", (int)(sp - m->valuestring), m->valuestring);
                a = buf;
                b = sp + 1;
            }
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            b = m->child->next->valuestring;
        }
        if (!a) {
            ll_errf(err, errlen, "%s: model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", path, rank);
            return LL_EPARSE;
        }
        char joined[2048];
        snprintf(joined, sizeof joined, "%s%s", a, b);
        int32_t ia = vocab_id_bl(t, a), ib = vocab_id_bl(t, b), ij = vocab_id_bl(t, joined);
        if (ia == -2 || ib == -2 || ij == -2)
            return LL_ENOMEM;
        if (ia < 0 || ib < 0 || ij < 0) {
            ll_errf(err, errlen, "%s: model.merges[%d]: \"%s\" + \"%s\" is not in the byte-level vocab", path,
                    rank, a, b);
            return LL_EPARSE;
        }
        merge_insert(t, ia, ib, rank, ij);
    }
    return 0;
}

static int load_added(scn_tokenizer *t, const cJSON *added, const char *path, char *err, size_t errlen)
{
    for (const cJSON *a = cJSON_IsArray(added) ? added->child : NULL; a; a = a->next) {
        const char *content = ll_json_str(a, "content", NULL);
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(a, "id");
        if (!content || !content[0] || !cJSON_IsNumber(idv) || idv->valueint < 0) {
            ll_errf(err, errlen, "%s: added_tokens: expected {\"id\": N, \"content\": \"...\"}", path);
            return LL_EPARSE;
        }
        tk_added e = {strdup(content), strlen(content), idv->valueint};
        if (!e.text || ll_vec_push(&t->added, e)) {
            free(e.text);
            return LL_ENOMEM;
        }
        t->added_first[(unsigned char)content[0]] = 1;
        /* Decode gives an added token's content, whatever the vocab says. */
        if (e.id >= t->n_ids) {
            char **nt = realloc(t->tok, ((size_t)e.id + 1) * sizeof *nt);
            if (!nt)
                return LL_ENOMEM;
            t->tok = nt;
            uint32_t *nl = realloc(t->tok_len, ((size_t)e.id + 1) * sizeof *nl);
            if (!nl)
                return LL_ENOMEM;
            t->tok_len = nl;
            for (int32_t i = t->n_ids; i <= e.id; i++) {
                t->tok[i] = NULL;
                t->tok_len[i] = 0;
            }
            t->n_ids = e.id + 1;
        }
        char *copy = strdup(content);
        if (!copy)
            return LL_ENOMEM;
        free(t->tok[e.id]);
        t->tok[e.id] = copy;
        t->tok_len[e.id] = (uint32_t)e.len;
    }
    return 0;
}

int scn_tokenizer_load(const char *path, scn_tokenizer **out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    scn_tokenizer *t = calloc(1, sizeof *t);
    int rc = 0, byte_level = 0;
    if (!t)
        return LL_ENOMEM;
    t->unk_id = -1;
    LL_TRY(ll_read_file(path, &text, &len, err, errlen));
    root = cJSON_ParseWithOpts(text, NULL, 1);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(model)) {
        ll_errf(err, errlen, "%s: not a Hugging Face tokenizer.json (no \"model\" object)", path);
        rc = LL_EPARSE;
        goto fail;
    }
    LL_TRY(check_kind(root, model, path, err, errlen));
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        ll_errf(err, errlen, "%s: model: expected a \"vocab\" object and a \"merges\" array", path);
        rc = LL_EPARSE;
        goto fail;
    }
    LL_TRY(load_vocab(t, vocab, path, err, errlen));
    LL_TRY(load_merges(t, merges, path, err, errlen));
    t->ignore_merges = json_bool(model, "ignore_merges", 0);
    const char *unk = ll_json_str(model, "unk_token", NULL);
    if (unk)
        t->unk_id = vocab_id_bl(t, unk);
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (pt && !cJSON_IsNull(pt))
        LL_TRY(load_pretok(t, pt, &byte_level, path, err, errlen));
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (strcmp(ll_json_str(dec, "type", ""), "ByteLevel") == 0)
        byte_level = 1;
    if (!byte_level) {
        ll_errf(err, errlen, "%s: BPE without a ByteLevel pre_tokenizer or decoder (SentencePiece-style "
                "Metaspace BPE?) is not supported: only byte-level BPE", path);
        rc = LL_EINVAL;
        goto fail;
    }
    LL_TRY(load_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), path, err, errlen));
    cJSON_Delete(root);
    free(text);
    *out = t;
    return 0;
fail:
    if (rc == LL_ENOMEM)
        ll_errf(err, errlen, "%s: out of memory", path);
    cJSON_Delete(root);
    free(text);
    scn_tokenizer_free(t);
    return rc;
}

void scn_tokenizer_free(scn_tokenizer *t)
{
    if (!t)
        return;
    for (int32_t i = 0; t->tok && i < t->n_ids; i++)
        free(t->tok[i]);
    free(t->tok);
    free(t->tok_len);
    free(t->vmap);
    free(t->mmap);
    for (size_t i = 0; i < t->added.n; i++)
        free(t->added.v[i].text);
    ll_vec_free(&t->added);
    for (size_t i = 0; i < t->steps.n; i++)
        pcre2_code_free(t->steps.v[i].re);
    ll_vec_free(&t->steps);
    free(t);
}
