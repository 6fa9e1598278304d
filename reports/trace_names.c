/* trace_names.c: making kernel names readable and sorting them into categories.
 *
 * Categories are POSIX extended regexes matched case-insensitively against the
 * full name, first match wins. The built-in order matters: communication comes
 * before elementwise because "reduce" is in "allreduce", attention before GEMM
 * because flash/fmha kernels are often cutlass templates, MoE before GEMM
 * because fused MoE kernels are grouped GEMMs. */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "report.h"

typedef struct category {
    char *name;
    char *pattern;
    regex_t re;
} category;

struct rpt_categories {
    LL_VEC(category) cats; /* match order: first match wins */
};

static const struct {
    const char *name, *pattern;
} builtin[] = {
    {"communication", "nccl|allreduce|all_reduce|all_gather|allgather|reduce_scatter|cross_device"
                      "|all_to_all|alltoall|c10d::|gloo"},
    {"attention", "attn|attention|flash|mla|sparse_decode|fmha|sdpa"},
    {"MoE", "moe|expert|topk|fused_moe"},
    /* CPU operators: oneDNN's (vLLM's CPU backend), MKL-DNN's and aten's own
     * matmul entry points by their exact names (aten::mm is a prefix of much). */
    {"GEMM", "gemm|cutlass|cublas|matmul|sm90_xmma|nvjet|onednn|mkldnn|dnnl|packed_linear"
             "|^aten::(linear|mm|addmm|bmm|baddbmm|addbmm|_int_mm)$"},
    /* CPU: vLLM's KV-cache write (reshape_and_cache, kv_cache_update) is a copy; aten's
     * pointwise and layout-copying operators by exact name. */
    {"elementwise & copies", "elementwise|copy|memcpy|memset|fill|cat|reduce|norm|act|_and_cache|kv_cache_update"
                             "|_and_mul|^aten::(to|clone|contiguous|add_?|mul_?|sub_?|div_?|neg|pow|rsqrt|exp"
                             "|gelu|silu|relu|sigmoid|tanh|_?softmax|where|mean|sum|embedding|index_select"
                             "|index_put_|masked_fill_?|zero_|stack|gather|scatter_?)$"},
};

static int cat_init(category *c, const char *name, size_t name_len, const char *pattern,
                    char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    int rc = regcomp(&c->re, pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc != 0) {
        char msg[128];
        regerror(rc, &c->re, msg, sizeof msg);
        ll_errf(err, errlen, "category regex '%s' does not compile: %s", pattern, msg);
        return LL_EINVAL;
    }
    c->name = strndup(name, name_len);
    c->pattern = strdup(pattern);
    if (!c->name || !c->pattern) {
        regfree(&c->re);
        free(c->name);
        free(c->pattern);
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    return 0;
}

static void cat_free(category *c)
{
    regfree(&c->re);
    free(c->name);
    free(c->pattern);
}

int rpt_categories_new(rpt_categories **out, char *err, size_t errlen)
{
    size_t nb = sizeof builtin / sizeof builtin[0];
    rpt_categories *c = calloc(1, sizeof *c);
    if (!c || ll_vec_reserve(&c->cats, nb)) {
        free(c);
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    for (size_t i = 0; i < nb; i++) {
        int rc = cat_init(&c->cats.v[i], builtin[i].name, strlen(builtin[i].name),
                          builtin[i].pattern, err, errlen);
        if (rc) {
            rpt_categories_free(c);
            return rc;
        }
        c->cats.n++;
    }
    *out = c;
    return 0;
}

int rpt_categories_set(rpt_categories *c, const char *spec, char *err, size_t errlen)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) {
        ll_errf(err, errlen, "--category wants NAME=REGEX, got '%s'", spec);
        return LL_EINVAL;
    }
    size_t name_len = (size_t)(eq - spec);
    if (name_len == 5 && strncmp(spec, "other", 5) == 0) {
        ll_errf(err, errlen, "'other' is what matches nothing; it takes no regex");
        return LL_EINVAL;
    }
    category nc;
    int rc = cat_init(&nc, spec, name_len, eq + 1, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; i < c->cats.n; i++) {
        category *e = &c->cats.v[i];
        if (strlen(e->name) == name_len && strncmp(e->name, spec, name_len) == 0) {
            cat_free(e);
            *e = nc;
            return 0;
        }
    }
    /* A new category goes first: the user's pattern wins over the built-ins. */
    if (ll_vec_reserve(&c->cats, c->cats.n + 1)) {
        cat_free(&nc);
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    memmove(c->cats.v + 1, c->cats.v, c->cats.n * sizeof *c->cats.v);
    c->cats.v[0] = nc;
    c->cats.n++;
    return 0;
}

const char *rpt_categories_classify(const rpt_categories *c, const char *kernel_name)
{
    for (size_t i = 0; i < c->cats.n; i++)
        if (regexec(&c->cats.v[i].re, kernel_name, 0, NULL, 0) == 0)
            return c->cats.v[i].name;
    return "other";
}

size_t rpt_categories_count(const rpt_categories *c) { return c->cats.n + 1; }

const char *rpt_categories_name(const rpt_categories *c, size_t i)
{
    return i < c->cats.n ? c->cats.v[i].name : i == c->cats.n ? "other" : NULL;
}

void rpt_categories_free(rpt_categories *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cats.n; i++)
        cat_free(&c->cats.v[i]);
    ll_vec_free(&c->cats);
    free(c);
}

/* ---- short names ------------------------------------------------------------ */

/* Template wrappers whose first argument is the real kernel. */
static int generic_wrapper(const char *base, size_t n)
{
    static const char *const g[] = {"Kernel", "Kernel2", "kernel", "device_kernel",
                                    "KernelWrapper", "kernel_entry"};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        if (strlen(g[i]) == n && memcmp(g[i], base, n) == 0)
            return 1;
    return 0;
}

/* Copy s[0..n) to out dropping every <...> group (nested); stop at a '(' at
 * depth 0 (the parameter list). */
static size_t strip_templates(const char *s, size_t n, char *out, size_t outlen)
{
    size_t k = 0;
    int depth = 0;
    for (size_t i = 0; i < n && k + 1 < outlen; i++) {
        if (s[i] == '<')
            depth++;
        else if (s[i] == '>' && depth > 0)
            depth--;
        else if (depth == 0 && s[i] == '(')
            break;
        else if (depth == 0)
            out[k++] = s[i];
    }
    out[k] = '\0';
    return k;
}

char *rpt_kernel_short_name(const char *full, size_t max_chars, char *out, size_t outlen)
{
    if (outlen == 0)
        return out;
    const char *s = full;
    if (strncmp(s, "void ", 5) == 0)
        s += 5;
    size_t n = strlen(s);
    /* The parameter list starts at the first '(' outside template brackets;
     * "(anonymous namespace)::" is part of the name, not a parameter list. */
    char *tmp = malloc(outlen + n + 1);
    if (!tmp) {
        snprintf(out, outlen, "%.*s", (int)(outlen - 1), s);
        return out;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (strncmp(s + i, "(anonymous namespace)::", 23) == 0) {
            i += 23;
            continue;
        }
        tmp[k++] = s[i++];
    }
    tmp[k] = '\0';
    size_t len = strip_templates(tmp, k, out, outlen);
    const char *base = strrchr(out, ':');
    base = base ? base + 1 : out;
    const char *lt = strchr(tmp, '<');
    if (generic_wrapper(base, strlen(base)) && lt) {
        /* cutlass::Kernel2<cutlass_80_simt_sgemm_64x128_8x5_tn_align1> keeps its
         * argument: the wrapper's name alone says nothing. */
        const char *a = lt + 1;
        size_t depth = 0, an = 0;
        while (a[an] && !(depth == 0 && (a[an] == ',' || a[an] == '>'))) {
            if (a[an] == '<')
                depth++;
            else if (a[an] == '>')
                depth--;
            an++;
        }
        char *arg = malloc(an + 1);
        if (arg) {
            size_t al = strip_templates(a, an, arg, an + 1);
            while (al > 0 && arg[0] == ' ')
                memmove(arg, arg + 1, al--);
            if (len + al + 3 < outlen) {
                out[len++] = '<';
                memcpy(out + len, arg, al);
                len += al;
                out[len++] = '>';
                out[len] = '\0';
            }
            free(arg);
        }
    }
    free(tmp);
    while (len > 0 && out[len - 1] == ' ')
        out[--len] = '\0';
    if (max_chars >= 4 && len > max_chars) {
        out[max_chars - 3] = '\0';
        strcat(out, "...");
    }
    return out;
}
