/* api_responses.c: the OpenAI Responses API, /v1/responses: the prompt as
 * "input", the length cap as max_output_tokens; a stream of typed events
 * (response.output_text.delta, response.reasoning_text.delta, ...) with the
 * usage in the final response.completed. Outputs: each text delta's
 * logprobs[] in chat's per-token shape, asked with top_logprobs and
 * include. No prompt logprobs to re-score with, so no check-decode, and the
 * input is not kept with the outputs. */
#include "api.h"

#include <stdio.h>
#include <string.h>

#include "outputs.h"

static int responses_prompt(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt,
                            size_t head_at)
{
    return lg_body_prompt(b, s, "input", head, prompt, head_at);
}

static int responses_limits(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage)
{
    int rc = 0;
    (void)cont_usage; /* the API has no running usage */
    if (lg_body_keep(s, "max_output_tokens")) {
        LL_TRY(lg_body_key(b, "max_output_tokens"));
        LL_TRY(ll_buf_printf(b, "%d", max_tokens));
    }
    LL_TRY(lg_body_top_p(b, s));
    /* outputs: each text delta's logprobs with the top 5 */
    if (s->record_outputs && lg_body_keep(s, "top_logprobs"))
        LL_TRY(lg_body_key(b, "top_logprobs") || ll_buf_printf(b, "5"));
    if (s->record_outputs && lg_body_keep(s, "include"))
        LL_TRY(lg_body_key(b, "include") || ll_buf_printf(b, "[\"message.output_text.logprobs\"]"));
fail:
    return rc;
}

/* A text delta event (response.output_text.delta or
 * response.reasoning_text.delta): its delta and logprobs[] of {token,
 * logprob, top_logprobs}. o NULL: nothing (outputs not recorded). */
static void responses_outputs(lg_outputs *o, const lg_jtape *t, const lg_jnode *ev)
{
    if (!o)
        return;
    size_t n = 0;
    const char *s = lg_jstr(t, ev, "delta", &n);
    const lg_jnode *lp = lg_jget(t, ev, "logprobs");
    if (s)
        lg_out_text(o, s, n);
    if (lp && lp->type == LG_J_ARR)
        lg_out_logprobs(o, t, lp, 1);
}

/* The OpenAI Responses API stream: typed events, text in "delta", usage in
 * the final response.completed (or response.incomplete, which is how a
 * response cut at max_output_tokens ends: still a complete stream). */
static void responses_event(lg_delta *d, const char *event, const lg_jtape *t, lg_delta_out *out)
{
    const lg_jnode *root = &t->n[0];
    size_t tl = 0, dl = 0;
    const char *type = lg_jstr(t, root, "type", &tl);
    const char *delta = lg_jstr(t, root, "delta", &dl);
    size_t tb = 0, ab = 0;
    if (!type) {
        type = event ? event : "";
        tl = strlen(type);
    }
    if (lg_str_is(type, tl, "response.output_text.delta") && delta) {
        lg_delta_content(d, delta, dl, &tb, &ab, &out->reclassify);
        responses_outputs(d->out, t, root); /* a no-op unless outputs are recorded */
    } else if (lg_str_is(type, tl, "response.reasoning_text.delta") && delta) {
        lg_delta_thinking(d, delta, dl, &tb);
        responses_outputs(d->out, t, root);
    } else if (lg_str_is(type, tl, "response.completed") || lg_str_is(type, tl, "response.incomplete")) {
        const lg_jnode *usage = lg_jget(t, lg_jget(t, root, "response"), "usage");
        if (usage && usage->type == LG_J_OBJ) {
            const lg_jnode *det = lg_jget(t, usage, "output_tokens_details");
            d->usage_prompt = lg_jcount(t, usage, "input_tokens");
            d->usage_completion = lg_jcount(t, usage, "output_tokens");
            d->usage_reasoning = det && det->type == LG_J_OBJ ? lg_jcount(t, det, "reasoning_tokens") : -1;
            const lg_jnode *idet = lg_jget(t, usage, "input_tokens_details");
            int64_t c = idet && idet->type == LG_J_OBJ ? lg_jcount(t, idet, "cached_tokens") : -1;
            if (c >= 0)
                d->usage_cached = c;
        }
        /* completed: the model stopped; incomplete: its reason, max_output_tokens being the length */
        size_t rl = 0;
        const char *reason = lg_jstr(t, lg_jget(t, lg_jget(t, root, "response"), "incomplete_details"), "reason", &rl);
        if (lg_str_is(type, tl, "response.completed"))
            snprintf(d->finish, sizeof d->finish, "stop");
        else if (!reason || lg_str_is(reason, rl, "max_output_tokens"))
            snprintf(d->finish, sizeof d->finish, "length");
        else
            snprintf(d->finish, sizeof d->finish, "%.*s", (int)rl, reason);
        d->done = 1;
        return;
    } else if (lg_str_is(type, tl, "response.failed") || lg_str_is(type, tl, "error")) {
        const lg_jnode *resp = lg_jget(t, root, "response");
        size_t ml = 0;
        const char *msg = lg_jstr(t, root, "message", &ml);
        char m[LG_DELTA_ERRMSG_BYTES];
        if (!msg && lg_json_error(t, resp ? resp : root, m, sizeof m)) {
            lg_delta_set_error(d, m);
            return;
        }
        if (!msg)
            msg = type, ml = tl;
        lg_delta_fail(d, msg, ml);
        return;
    } else {
        return; /* response.created, *.added, *.done, ...: no tokens */
    }
    lg_delta_count(d, tb, ab, -1, out);
}

const lg_api lg_api_responses = {
    .sends_model = 1,
    .cont_usage = 0,
    .put_prompt = responses_prompt,
    .put_limits = responses_limits,
    .event = responses_event,
    .prompt_key = NULL,
    .rescore = NULL,
};
