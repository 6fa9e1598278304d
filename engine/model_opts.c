/* model_opts.c: eng_config -> eng_model_opts for the cpu and cuda backends
 * (model_opts.h). */
#include <string.h>

#include "common.h"
#include "model_opts.h"

int eng_model_opts_from_config(const eng_config *cfg, const char *backend, eng_model_opts *o,
                               char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->heads = cfg->heads > 0 ? cfg->heads : 64;
    o->topk = cfg->topk > 0 ? cfg->topk : 2048;
    const char *attn = cfg->attn ? cfg->attn : "tiled";
    if (strcmp(attn, "tiled") == 0)
        o->tiled = 1;
    else if (strcmp(attn, "naive") == 0)
        o->tiled = 0;
    else if (strcmp(attn, "v2") == 0 && strcmp(backend, "cuda") == 0)
        o->tiled = 2;
    else {
        ll_errf(err, errlen, "%s backend: attn must be naive or tiled%s, got '%s'", backend,
                strcmp(backend, "cuda") == 0 ? " or v2" : " (v2 is the cuda backend's kernel)", attn);
        return LL_EINVAL;
    }
    /* Sizes are taken as given (no zero-means-default): eng_config_default
     * sets them, and a zeroed config is an error in the backend, not a
     * silent default. */
    o->tp = cfg->tp > 0 ? cfg->tp : 1;
    o->d_model = cfg->d_model;
    o->d_ff = cfg->d_ff;
    o->vocab = cfg->vocab;
    o->capacity = cfg->capacity_tok;
    o->min_ctx = cfg->min_ctx_tok < 0 ? o->topk : cfg->min_ctx_tok;
    o->max_slots = cfg->max_running > 0 ? cfg->max_running : 256;
    o->seed = cfg->seed;
    o->threads = cfg->threads;
    o->device = cfg->device;
    o->fault_step = cfg->fault_fail_step;
    if (o->heads > 1024 || o->topk > 1 << 20) {
        ll_errf(err, errlen, "%s backend: heads <= 1024 and topk <= 1048576 (got %d, %d)", backend,
                o->heads, o->topk);
        return LL_EINVAL;
    }
    if (o->capacity < 1 || o->capacity > 1 << 24) {
        ll_errf(err, errlen, "%s backend: capacity must be in [1, 16777216] rows, got %d", backend,
                o->capacity);
        return LL_EINVAL;
    }
    if (cfg->min_ctx_tok < -1 || cfg->min_ctx_tok > 1 << 24) {
        ll_errf(err, errlen, "%s backend: min_ctx must be -1 (= topk) or in [0, 16777216], got %d",
                backend, cfg->min_ctx_tok);
        return LL_EINVAL;
    }
    return 0;
}
