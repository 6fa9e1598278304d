/* model_opts.h (internal to engine/): the model a computing backend runs,
 * read from eng_config once for the cpu and cuda backends (the same keys,
 * the same defaults, the same bounds). What only one backend needs
 * (threads, device, kv, the tp bounds) is checked by that backend.
 */
#ifndef LOADLAW_ENGINE_MODEL_OPTS_H
#define LOADLAW_ENGINE_MODEL_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct eng_model_opts {
    int heads, topk;           /* 64, 2048 when cfg leaves them 0 */
    int tiled;                 /* attn: 1 tiled (default), 0 naive, 2 v2 (cuda only) */
    int tp;                    /* ranks, 1 when cfg leaves it 0; bounds: the backend's */
    int d_model, d_ff, vocab;  /* as given (eng_config_default sets them) */
    int capacity, min_ctx;     /* rows per slot; min_ctx -1 resolved to topk */
    int max_slots;             /* max_running, 256 when cfg leaves it 0 */
    uint64_t seed;
    int threads;               /* cpu: compute threads, as given (0 = all cores) */
    int device;                /* cuda: the first rank's device, as given */
    int fault_step;            /* fault_fail_step, a testing aid (engine.h) */
} eng_model_opts;

/* Fill o from cfg and check what both backends require: attn is naive or
 * tiled, heads <= 1024, topk <= 2^20, capacity in [1, 2^24], min_ctx -1 or
 * in [0, 2^24]. 0, or LL_EINVAL with "<backend> backend: ..." in err. */
int eng_model_opts_from_config(const eng_config *cfg, const char *backend, eng_model_opts *o,
                               char *err, size_t errlen);

#endif
