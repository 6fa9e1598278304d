/* sweep_ab_opts.c: the flags of `loadlaw sweep` that make or shape an A/B
 * (sweep_opts.h): two --url become the scenario's "ab" of two remote sides,
 * and --order/--repeat need one. The A/B itself runs in the sweep library
 * (sweep.h sweep_ab). */
#include "cli.h"
#include "opts.h"
#include "sweep_opts.h"

/* Two --url: the "ab" of two remote sides, A and B, in RUN_DIR/a and /b. */
static int apply_two_urls(const sweep_opts *o, scn_scenario *s)
{
    for (int k = 0; k < 2; k++) {
        /* each --url was checked as it was parsed (sweep_opts.c) */
        const char *u = o->urls[k], *m = o->models[o->n_models == 2 ? k : 0];
        scn_ab_side *sd = &s->ab.side[k];
        if (scn_set_str(&sd->name, k ? "b" : "a") || scn_set_str(&sd->url, u) ||
            (m && scn_set_str(&sd->model, m)))
            return cli_usage_error(&sweep_cmd, "out of memory");
    }
    s->ab.enabled = 1;
    s->ab.repeat = 1;
    s->ab.order = SCN_AB_INTERLEAVED;
    /* the sides hold the targets (the scenario's model stays, for a side
     * without its own) */
    return scn_set_str(&s->url, NULL) ? cli_usage_error(&sweep_cmd, "out of memory") : 0;
}

/* --order and --repeat are the keys ab.order and ab.repeat, laid over with
 * the other keys' flags after this (sweep_flags.c); they need an A/B. */
int sweep_apply_ab_flags(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    const char *order = sweep_keyed_flag(o, "order"), *repeat = sweep_keyed_flag(o, "repeat");
    if (o->n_urls == 2 && (rc = apply_two_urls(o, s)))
        return rc;
    if (!s->ab.enabled && (repeat || order))
        return cli_usage_error(&sweep_cmd, "%s: needs two targets (an \"ab\" scenario, or --url A --url B)",
                               order ? "--order" : "--repeat");
    return 0;
}
