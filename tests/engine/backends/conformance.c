/* conformance.c: `test_backends PATH BACKEND` (conformance.h): the backend
 * by name among those built in, its probe (a skip with the reason where it
 * cannot run), then the path; and what every path shares: configurations
 * from key=value strings, a step, the refusals. `test_backends --list`
 * prints the backends built in. */
#define TESTUTIL_COUNTERS
#include "conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testutil.h"

/* ---- configurations ----------------------------------------------------------- */

enum { F_INT, F_DBL, F_U64, F_ATTN, F_KV };
static const struct {
    const char *key;
    int type;
    size_t off;
} k_fields[] = {
#define I(k, f) {k, F_INT, offsetof(eng_config, f)}
    I("heads", heads), I("topk", topk), I("threads", threads), I("tp", tp), I("max_running", max_running),
    I("d_model", d_model), I("d_ff", d_ff), I("vocab", vocab), I("capacity", capacity_tok),
    I("min_ctx", min_ctx_tok), I("device", device), I("attn_fault", attn_fault),
    I("fault_fail_step", fault_fail_step),
#undef I
    {"seed", F_U64, offsetof(eng_config, seed)},
    {"law_a_ms", F_DBL, offsetof(eng_config, law_a_ms)},
    {"law_b_ms", F_DBL, offsetof(eng_config, law_b_ms)},
    {"time_scale", F_DBL, offsetof(eng_config, time_scale)},
    {"attn", F_ATTN, 0},
    {"kv", F_KV, 0},
};

static void set_one(tb_cfg *t, const char *key, const char *val)
{
    for (size_t i = 0; i < sizeof k_fields / sizeof k_fields[0]; i++) {
        if (strcmp(key, k_fields[i].key) != 0)
            continue;
        char *f = (char *)&t->c + k_fields[i].off;
        switch (k_fields[i].type) {
        case F_INT: *(int *)(void *)f = atoi(val); break;
        case F_DBL: *(double *)(void *)f = atof(val); break;
        case F_U64: *(uint64_t *)(void *)f = strtoull(val, NULL, 10); break;
        case F_ATTN: snprintf(t->attn, sizeof t->attn, "%s", val); t->c.attn = t->attn; break;
        case F_KV: snprintf(t->kv, sizeof t->kv, "%s", val); t->c.kv = t->kv; break;
        }
        return;
    }
    fprintf(stderr, "test_backends: unknown key %s in the case list\n", key);
    abort();
}

static void set_all(tb_cfg *t, const char *set)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", set ? set : "");
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            fprintf(stderr, "test_backends: '%s' in the case list is not key=value\n", kv);
            abort();
        }
        *eq = '\0';
        set_one(t, kv, eq + 1);
    }
}

void tb_config(tb_cfg *t, const char *shape, const char *set)
{
    memset(t, 0, sizeof *t);
    set_all(t, shape);
    set_all(t, set);
}

int tb_step(const tb_backend *be, void *st, const eng_batch *b, eng_phase *ph, int *nph)
{
    eng_phase tmp[ENG_MAX_PHASES];
    int n = 0;
    int rc = be->ops->step(st, b, ll_now_ns(), ph ? ph : tmp, &n);
    if (nph)
        *nph = n;
    return rc;
}

/* ---- refusals ---------------------------------------------------------------- */

static void refusal(const tb_backend *be, const tb_refusal *r, const char *shape)
{
    char *keep = NULL, key[64] = "";
    if (r->env) {
        const char *eq = strchr(r->env, '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - r->env), r->env);
        const char *old = getenv(key);
        keep = old ? strdup(old) : NULL;
        setenv(key, eq + 1, 1);
    }
    tb_cfg t;
    tb_config(&t, shape, r->set);
    void *st = NULL;
    char err[1024] = "";
    int rc = be->ops->create(&t.c, &st, err, sizeof err);
    int says = 1;
    for (int i = 0; i < 3 && r->says[i]; i++)
        says &= strstr(err, r->says[i]) != NULL;
    CHECK((r->rc ? rc == r->rc : rc != 0) && st == NULL && says, "%s %s: %s refused (rc %d): %s", be->name,
          r->path, r->what, rc, err);
    if (rc == 0 && st)
        be->ops->destroy(st);
    if (r->env) {
        if (keep)
            setenv(key, keep, 1);
        else
            unsetenv(key);
        free(keep);
    }
}

void tb_refusals_run(const tb_backend *be, const char *path, const char *shape)
{
    for (const tb_refusal *r = tb_refusals; r->path; r++)
        if ((r->on & TB_ON(be->id)) && strcmp(r->path, path) == 0)
            refusal(be, r, shape);
}

/* ---- main --------------------------------------------------------------------- */

static const tb_backend *const k_backends[] = {
    &tb_synthetic,
#ifdef TB_HAVE_CPU
    &tb_cpu,
#endif
#ifdef TB_HAVE_CUDA
    &tb_cuda,
#endif
};

static int usage(void)
{
    fprintf(stderr, "usage: test_backends backend|rescore|tp|engine BACKEND   (test_backends --list)\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < sizeof k_backends / sizeof k_backends[0]; i++)
            printf("%s\n", k_backends[i]->name);
        return 0;
    }
    if (argc != 3)
        return usage();
    const tb_backend *be = NULL;
    for (size_t i = 0; i < sizeof k_backends / sizeof k_backends[0]; i++)
        if (strcmp(argv[2], k_backends[i]->name) == 0)
            be = k_backends[i];
    if (!be) {
        fprintf(stderr, "test_backends: backend %s is not built into this program\n", argv[2]);
        return 2;
    }
    char why[400] = "";
    if (be->probe && be->probe(why, sizeof why) != 0) {
        printf("SKIP: %s\n", why);
        return TEST_SKIP;
    }
    const char *path = argv[1];
    if (strcmp(path, "backend") == 0)
        tb_path_backend(be);
    else if (strcmp(path, "rescore") == 0)
        tb_path_rescore(be);
    else if (strcmp(path, "engine") == 0)
        tb_path_engine(be);
    else if (strcmp(path, "tp") == 0) {
        if (tb_path_tp(be) == TEST_SKIP)
            return tu_fail ? 1 : TEST_SKIP;
    } else
        return usage();
    TEST_MAIN_END();
}
