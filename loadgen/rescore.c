/* rescore.c: one decoded output sent back through a server's prefill
 * (loadgen.h lg_rescore_run, for `loadlaw check-decode`): the request and
 * the reading of its answer are the server API's (api.h lg_api.rescore:
 * vLLM's prompt_logprobs for chat and completions in api_openai.c, SGLang's
 * return_logprob in api_generate.c); here are what they share: the POST and
 * its status, and the result's arrays. One blocking transfer per request
 * (common's http1.h), on the caller's thread. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "http1.h"

#define RESCORE_BODY_MAX (64u << 20) /* a response past 64 MiB is not a prompt's logprobs */

void lg_rescore_free(lg_rescore *r)
{
    for (size_t i = 0; r->tok && i < r->n; i++)
        free(r->tok[i]);
    free(r->tok);
    free(r->lp);
    free(r->rank);
    free(r->top_lp);
    free(r->id);
    memset(r, 0, sizeof *r);
}

/* POST body to q->url; the whole answer into resp, its status into *status. */
static int post(const lg_rescore_req *q, const char *body, ll_buf *resp, long *status, char *err, size_t errlen)
{
    char why[320] = "";
    ll_http1_opts o = {.url = q->url, .content_type = "application/json", .api_key = q->api_key,
                       .max_bytes = RESCORE_BODY_MAX,
                       .timeout_ms = (long)(q->timeout_s > 0 ? q->timeout_s * 1000 : 600000)};
    int rc = ll_http1_once(&o, body, resp, status, why, sizeof why);
    if (rc == LL_EINVAL) {
        ll_errf(err, errlen, "cannot set up the request to %s", q->url);
        rc = LL_EIO;
    } else if (rc == LL_EIO) {
        ll_errf(err, errlen, "%s: %s", q->url, why);
    }
    return rc;
}

int lg_rescore_exchange(const lg_rescore_req *q, const char *body, ll_buf *resp, char *err, size_t errlen)
{
    long status = 0;
    int rc = post(q, body, resp, &status, err, errlen);
    if (rc == 0 && status != 200) {
        char msg[300];
        if (!lg_error_message(resp->p ? resp->p : "", resp->len, msg, sizeof msg))
            snprintf(msg, sizeof msg, "%.200s", resp->p ? resp->p : "");
        ll_errf(err, errlen, "%s answered HTTP %ld: %s", q->url, status, msg);
        rc = status >= 400 && status < 500 ? LG_RESCORE_UNSUPPORTED : LL_EIO;
    }
    return rc;
}

int lg_rescore_alloc(lg_rescore *r, size_t n)
{
    r->n = n;
    r->lp = malloc((n ? n : 1) * sizeof *r->lp);
    r->rank = calloc(n ? n : 1, sizeof *r->rank);
    r->top_lp = malloc((n ? n : 1) * sizeof *r->top_lp);
    r->id = malloc((n ? n : 1) * sizeof *r->id);
    r->tok = calloc(n ? n : 1, sizeof *r->tok);
    if (!r->lp || !r->rank || !r->top_lp || !r->id || !r->tok)
        return LL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        r->lp[i] = r->top_lp[i] = NAN;
        r->id[i] = -1;
    }
    return 0;
}

int lg_rescore_supported(scn_endpoint e)
{
    return (unsigned)e < SCN_ENDPOINT__COUNT && lg_api_of(e)->rescore != NULL;
}

int lg_rescore_run(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = '\0';
    if (!lg_rescore_supported(q->endpoint)) {
        ll_errf(err, errlen, "the %s API has no prompt logprobs to re-score with", scn_endpoint_name(q->endpoint));
        out->unsupported = 1;
        return LL_EINVAL;
    }
    int rc = lg_api_of(q->endpoint)->rescore(q, out, err, errlen);
    if (rc)
        lg_rescore_free(out);
    out->unsupported = rc == LG_RESCORE_UNSUPPORTED;
    return rc == LG_RESCORE_UNSUPPORTED ? LL_EINVAL : rc;
}
