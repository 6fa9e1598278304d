/* backend_synthetic.c: a step costs what the law says, played out in real time.
 *
 * step = (a + f(N) + c*ctx/1000 + p*prefill) * time_scale * (1 + jitter*g),
 * g ~ N(0,1) from a seeded generator, so a given seed replays the same step
 * times. f is the law's shape in N: b*N by default; with buckets, N is first
 * rounded up to the smallest bucket >= N (N itself above the largest), as a
 * server that pads its batch to captured sizes pays; with a knee at k, each
 * sequence beyond k costs knee_b instead of b (b*k + knee_b*(M - k)), as a
 * kernel that changes algorithm at a batch size does. The context term uses
 * the real context: padding adds rows, not cache reads. The step sleeps until an absolute deadline measured from the step's
 * planned start, so time spent by the scheduler between steps is absorbed
 * into the step instead of added to it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"

typedef struct syn_state {
    double a_ns, b_ns, c_ns_per_ktok, p_ns_per_tok, jitter;
    int buckets[ENG_LAW_MAX_BUCKETS], n_buckets;
    int knee_n;                /* 0 = no knee */
    double knee_b_ns;
    ll_rng rng;
    long steps, fail_step;     /* fault_fail_step: a testing aid (engine.h) */
} syn_state;

static int syn_create(const eng_config *cfg, void **state, char *err, size_t errlen)
{
    syn_state *s = calloc(1, sizeof *s);
    if (!s) {
        ll_errf(err, errlen, "synthetic backend: out of memory");
        return LL_ENOMEM;
    }
    double k = 1e6 * cfg->time_scale; /* law ms -> ns */
    s->a_ns = cfg->law_a_ms * k;
    s->b_ns = cfg->law_b_ms * k;
    s->c_ns_per_ktok = cfg->law_c_ms_per_ktok * k;
    s->p_ns_per_tok = cfg->law_p_ms_per_tok * k;
    s->jitter = cfg->jitter_frac;
    s->n_buckets = cfg->law_n_buckets;
    memcpy(s->buckets, cfg->law_buckets, sizeof s->buckets);
    s->knee_n = cfg->law_knee_n;
    s->knee_b_ns = cfg->law_knee_b_ms * k;
    s->fail_step = cfg->fault_fail_step;
    ll_rng_seed(&s->rng, cfg->seed ^ 0x5eed5eedULL);
    *state = s;
    return 0;
}

/* The law's N term for n decoding sequences: bucketed, then bent at the knee. */
static double syn_n_term_ns(const syn_state *s, int n)
{
    int m = n;
    for (int i = 0; n > 0 && i < s->n_buckets; i++)
        if (s->buckets[i] >= n) {
            m = s->buckets[i];
            break;
        }
    if (s->knee_n > 0 && m > s->knee_n)
        return s->b_ns * s->knee_n + s->knee_b_ns * (m - s->knee_n);
    return s->b_ns * m;
}

static int syn_step(void *state, const eng_batch *b, int64_t start_ns, eng_phase *ph, int *n_ph)
{
    syn_state *s = state;
    if (++s->steps == s->fail_step)
        return LL_EIO;
    double prefill_ns = s->p_ns_per_tok * b->prefill_tok_total;
    double total_ns = s->a_ns + syn_n_term_ns(s, b->n_decode) +
                      s->c_ns_per_ktok * (double)b->ctx_tok_total / 1000.0 + prefill_ns;
    if (s->jitter > 0) {
        double f = 1.0 + s->jitter * ll_rng_normal(&s->rng);
        f = f < 0 ? 0 : f;
        total_ns *= f;
        prefill_ns *= f;
    }
    int64_t dur = (int64_t)llround(total_ns);
    int64_t pre = (int64_t)llround(prefill_ns);
    int n = 0;
    if (b->n_decode == 0) {
        ph[n++] = (eng_phase){.name = "prefill", .start_ns = start_ns, .dur_ns = dur};
    } else {
        if (b->prefill_tok_total > 0)
            ph[n++] = (eng_phase){.name = "prefill", .start_ns = start_ns, .dur_ns = pre};
        ph[n++] = (eng_phase){.name = "decode", .start_ns = start_ns + pre, .dur_ns = dur - pre};
    }
    *n_ph = n;
    ll_sleep_until_ns(start_ns + dur);
    return 0;
}

static void syn_release(void *state, int slot) { (void)state; (void)slot; }

static void syn_destroy(void *state) { free(state); }

const eng_backend_ops eng_backend_synthetic = {
    .name = "synthetic",
    .caps = ENG_CAP_SLEEPS | ENG_CAP_PLAYS_LAW | ENG_CAP_PROMPT_LOGPROBS,
    .create = syn_create,
    .step = syn_step,
    .release = syn_release,
    .destroy = syn_destroy,
};
