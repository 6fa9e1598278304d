/* sweep_ab_opts.c: the flags of `loadlaw sweep` that make or shape an A/B
 * (sweep_opts.h): two --url become the scenario's "ab" of two remote sides,
 * and --order/--repeat are laid over any "ab". The A/B itself runs in the
 * sweep library (sweep.h sweep_ab). */
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

int sweep_apply_ab_flags(const sweep_opts *o, scn_scenario *s)
{
    int rc;
    if (o->n_urls == 2 && (rc = apply_two_urls(o, s)))
        return rc;
    if (!s->ab.enabled && (o->repeat > 0 || o->order))
        return cli_usage_error(&sweep_cmd, "%s: needs two targets (an \"ab\" scenario, or --url A --url B)",
                               o->order ? "--order" : "--repeat");
    if (o->repeat > 0)
        s->ab.repeat = (int)o->repeat;
    if (o->order)
        s->ab.order = o->order[0] == 's' ? SCN_AB_SEQUENTIAL : SCN_AB_INTERLEAVED;
    return 0;
}
