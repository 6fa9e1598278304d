/* api.h (internal to loadgen/): the server APIs a sweep can call, one ops
 * table each, in the way curl keeps one `struct Curl_handler` per protocol:
 * the request body, the stream's events, the outputs they carry and
 * check-decode's re-scoring are the API's, in its own file (api_chat.c,
 * api_completions.c, api_responses.c, api_generate.c); the transfer code
 * (xfer_body.c, delta.c, xfer.c, rescore.c) calls through the table and never
 * asks which API it is.
 *
 * Adding an API: its name and standard path in scenarios/ (the scenario
 * format is below loadgen: scenario.h's enum, scenario.c's names and paths),
 * one api_NAME.c defining `const lg_api lg_api_NAME`, and its row in api.c.
 *
 * Every member is read-only and the tables are const: any thread. */
#ifndef LOADLAW_LOADGEN_API_H
#define LOADLAW_LOADGEN_API_H

#include <cjson/cJSON.h>

#include "common.h"
#include "delta.h"
#include "loadgen.h"

typedef struct lg_api {
    /* ---- the request body. xfer_body.c writes "{", "model" (sends_model),
     * the prompt (put_prompt; a conversation's turn writes chat's messages
     * instead), the limits (put_limits), "stream":true, the scenario's
     * extra_body and "}". A key the extra_body names is left to it
     * (lg_body_keep). */
    int sends_model;
    /* The API takes stream_options.continuous_usage_stats (put_limits is
     * then told whether to ask it: the scenario's choice, unless a server
     * refused it). */
    int cont_usage;
    /* The prompt (its head inserted head_at bytes in: xfer_body.c
     * lg_body_text). 0 or LL_ENOMEM. */
    int (*put_prompt)(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt, size_t head_at);
    /* The length cap (max_tokens: this request's) and whatever else the
     * scenario asks of this API (usage, greedy decoding, logprobs when
     * outputs are recorded). 0 or LL_ENOMEM. */
    int (*put_limits)(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage);
    /* ---- the stream. One event, already a JSON tape that is not an error
     * event (delta.c read those): its tokens into out, usage and finish into
     * d, an error body marks d failed; when d->out is set (outputs
     * recorded), what the event adds to them (outputs.h). */
    void (*event)(lg_delta *d, const char *name, const lg_jtape *t, lg_delta_out *out);
    /* ---- outputs. The body member holding the prompt, kept as JSON for
     * check-decode to send back (lg_out_prompt); NULL: none kept. */
    const char *prompt_key;
    /* ---- check-decode (loadgen.h lg_rescore_run): the recorded prompt and
     * the decoded tokens sent back for prompt logprobs; NULL when the API
     * has no way to ask for them. Returns as lg_rescore_run, with
     * LG_RESCORE_UNSUPPORTED for a server that cannot say. */
    int (*rescore)(const lg_rescore_req *q, lg_rescore *out, char *err, size_t errlen);
} lg_api;

/* The API of an endpoint (chat's for an unknown one). */
const lg_api *lg_api_of(scn_endpoint e);

/* ---- helpers for the APIs' bodies (xfer_body.c) -------------------------- */

/* A default key the scenario's extra_body does not replace. */
int lg_body_keep(const scn_scenario *s, const char *k);
/* `"k":` after a comma unless it is the object's first key. */
int lg_body_key(ll_buf *b, const char *k);
/* The prompt as one JSON string with head inserted head_at bytes in. */
int lg_body_text(ll_buf *b, const char *head, const char *prompt, size_t head_at);
/* x as JSON in the fewest digits that read back as x (cJSON's rule). */
int lg_body_double(ll_buf *b, double x);
/* request.top_p as "top_p" when the scenario sets it (0: the server's
 * default, nothing sent) and extra_body does not. */
int lg_body_top_p(ll_buf *b, const scn_scenario *s);
/* The prompt as one JSON string under key (unless extra_body has it). */
int lg_body_prompt(ll_buf *b, const scn_scenario *s, const char *key, const char *head, const char *prompt,
                   size_t head_at);

/* ---- the OpenAI family: chat and completions (api_openai.c) ------------- */

/* max_tokens, stream_options, loadlaw's engine extensions, greedy decoding
 * and (outputs) logprobs: chat asks them as logprobs + top_logprobs,
 * completions as a count. */
int lg_openai_limits(ll_buf *b, const scn_scenario *s, int max_tokens, int cont_usage, int chat);
/* choices[].delta / text chunks and the final usage chunk. */
void lg_openai_event(lg_delta *d, const char *name, const lg_jtape *t, lg_delta_out *out);
/* The re-scoring request in vLLM's spelling: model, what fill adds for the
 * API, prompt_logprobs, max_tokens 1, temperature 0; the answer's
 * prompt_logprobs read into out. fill gets the recorded prompt parsed (it
 * may take it, leaving *prompt NULL) and adds the prompt with the output
 * after it: 0, LL_EINVAL when the prompt is not of the API's shape (named
 * by shape in the message), LL_ENOMEM. */
typedef int (*lg_openai_fill)(cJSON *root, cJSON **prompt, const lg_rescore_req *q);
int lg_openai_rescore(const lg_rescore_req *q, lg_openai_fill fill, const char *shape, lg_rescore *out, char *err,
                      size_t errlen);

/* ---- helpers for the re-scorers (rescore.c) ------------------------------ */

#define LG_RESCORE_UNSUPPORTED 1   /* the server cannot say (lg_rescore.unsupported) */
/* POST body to q->url: 0 with a 200's body in resp, LG_RESCORE_UNSUPPORTED
 * for a 4xx (the server refusing what was asked: prompt logprobs), LL_EIO
 * for another status or no answer; the reason in err. */
int lg_rescore_exchange(const lg_rescore_req *q, const char *body, ll_buf *resp, char *err, size_t errlen);
/* n slots of each of r's arrays (lp NAN, rank 0, id -1, tok NULL). */
int lg_rescore_alloc(lg_rescore *r, size_t n);

#endif
