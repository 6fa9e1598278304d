/* prompts.c: the prompt set a scenario sends: seeded synthetic text, a
 * ShareGPT-format JSON file (first human turn of each conversation), or a
 * JSONL file of prompts. Loaded once, then read-only (shared by workers). */
#include "scenario.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct prompt {
    char *text;
    int words; /* whitespace-separated words in text */
} prompt;

struct scn_prompts {
    LL_VEC(prompt) set;
};

/* A small vocabulary: English-looking words so tokenizers see ~1.3 tokens/word. */
static const char *const k_vocab[] = {
    "the", "model", "server", "decode", "token", "batch", "latency", "kernel", "memory", "cache",
    "attention", "request", "stream", "throughput", "query", "head", "layer", "weight", "tensor",
    "prefill", "step", "time", "scale", "law", "fit", "profile", "trace", "engine", "answer",
    "think", "about", "why", "how", "when", "every", "number", "grows", "slowly", "quickly",
    "measure", "explain", "compare", "write", "short", "story", "river", "mountain", "city", "light",
};
#define VOCAB_N (sizeof k_vocab / sizeof k_vocab[0])

static int push(scn_prompts *p, const char *s)
{
    prompt e = {strdup(s), 0};
    if (!e.text)
        return LL_ENOMEM;
    int in = 0;
    for (const char *c = s; *c; c++) {
        int sp = *c == ' ' || *c == '\n' || *c == '\t' || *c == '\r';
        if (!sp && !in)
            e.words++;
        in = !sp;
    }
    if (ll_vec_push(&p->set, e)) {
        free(e.text);
        return LL_ENOMEM;
    }
    return 0;
}

static int draw_words(const scn_dist *d, ll_rng *r)
{
    double x;
    switch (d->kind) {
    case SCN_DIST_UNIFORM:
        x = d->min + (d->max - d->min) * ll_rng_uniform(r);
        break;
    case SCN_DIST_NORMAL:
        x = d->mean + d->stddev * ll_rng_normal(r);
        if (d->max > 0 && x > d->max)
            x = d->max;
        if (x < d->min)
            x = d->min;
        break;
    default:
        x = d->value;
    }
    x = floor(x + 0.5);
    return x < 1 ? 1 : (int)x;
}

static int gen_synthetic(const scn_scenario *s, scn_prompts *p)
{
    ll_rng r;
    ll_buf b = {0};
    int rc = 0;
    ll_rng_seed(&r, s->seed);
    for (int i = 0; i < s->prompt_count && rc == 0; i++) {
        int w = draw_words(&s->words, &r);
        ll_buf_reset(&b);
        for (int k = 0; k < w && rc == 0; k++)
            rc = ll_buf_printf(&b, "%s%s", k ? " " : "", k_vocab[ll_rng_u64(&r) % VOCAB_N]);
        if (rc == 0)
            rc = push(p, b.p ? b.p : "");
    }
    ll_buf_free(&b);
    return rc;
}

static int load_sharegpt(const char *path, scn_prompts *p, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    int rc = ll_read_file(path, &text, &len, err, errlen);
    if (rc)
        return rc;
    root = cJSON_ParseWithOpts(text, NULL, 1);
    if (!cJSON_IsArray(root)) {
        ll_errf(err, errlen, "%s: expected a ShareGPT JSON array of conversations", path);
        rc = LL_EPARSE;
        goto out;
    }
    size_t i = 0;
    for (const cJSON *conv = root->child; conv && rc == 0; conv = conv->next, i++) {
        const cJSON *turns = cJSON_GetObjectItemCaseSensitive(conv, "conversations");
        if (!cJSON_IsArray(turns)) {
            ll_errf(err, errlen, "%s: [%zu].conversations: expected an array", path, i);
            rc = LL_EPARSE;
            goto out;
        }
        /* The first human turn is the prompt; conversations without one are skipped. */
        for (const cJSON *t = turns->child; t; t = t->next) {
            const char *from = ll_json_str(t, "from", "");
            const char *val = ll_json_str(t, "value", NULL);
            if ((strcmp(from, "human") == 0 || strcmp(from, "user") == 0) && val && val[0]) {
                rc = push(p, val);
                break;
            }
        }
    }
out:
    cJSON_Delete(root);
    free(text);
    return rc;
}

typedef struct jl_ctx {
    scn_prompts *p;
    const char *path;
    char *err;
    size_t errlen;
} jl_ctx;

static int jsonl_line(const cJSON *o, size_t line_no, void *ctx)
{
    jl_ctx *c = ctx;
    const char *s = cJSON_IsString(o) ? o->valuestring : ll_json_str(o, "prompt", ll_json_str(o, "text", NULL));
    if (!s) {
        ll_errf(c->err, c->errlen, "%s:%zu: expected a string or an object with \"prompt\" or \"text\"",
                c->path, line_no);
        return LL_EPARSE;
    }
    return push(c->p, s);
}

int scn_prompts_load(const scn_scenario *s, scn_prompts **out, char *err, size_t errlen)
{
    scn_prompts *p = calloc(1, sizeof *p);
    char path[4096];
    int rc = 0;
    if (!p)
        return LL_ENOMEM;
    if (s->source != SCN_SOURCE_SYNTHETIC) {
        /* Relative to the scenario's folder first, then the cwd. */
        snprintf(path, sizeof path, "%s", s->prompts_path ? s->prompts_path : "");
        if (s->path && path[0] != '/') {
            const char *slash = strrchr(s->path, '/');
            if (slash) {
                char cand[4096];
                snprintf(cand, sizeof cand, "%.*s/%s", (int)(slash - s->path), s->path, s->prompts_path);
                FILE *f = fopen(cand, "r");
                if (f) {
                    fclose(f);
                    snprintf(path, sizeof path, "%s", cand);
                }
            }
        }
    }
    switch (s->source) {
    case SCN_SOURCE_SHAREGPT:
        rc = load_sharegpt(path, p, err, errlen);
        break;
    case SCN_SOURCE_JSONL: {
        jl_ctx c = {p, path, err, errlen};
        rc = ll_jsonl_foreach(path, jsonl_line, &c, NULL, err, errlen);
        break;
    }
    default:
        rc = gen_synthetic(s, p);
    }
    if (rc == 0 && p->set.n == 0) {
        ll_errf(err, errlen, "%s: no prompts", s->source == SCN_SOURCE_SYNTHETIC ? "synthetic" : path);
        rc = LL_EINVAL;
    }
    if (rc) {
        scn_prompts_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

size_t scn_prompts_count(const scn_prompts *p) { return p->set.n; }

const char *scn_prompt(const scn_prompts *p, size_t i, int *words)
{
    const prompt *e = &p->set.v[i % p->set.n];
    if (words)
        *words = e->words;
    return e->text;
}

void scn_prompts_free(scn_prompts *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->set.n; i++)
        free(p->set.v[i].text);
    ll_vec_free(&p->set);
    free(p);
}
