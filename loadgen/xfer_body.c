/* xfer_body.c: what a request sends: its JSON body and the scenario's extra
 * headers. A body is the same frame for every server API, its prompt and
 * limits the API's (api.h), with the scenario's extra_body merged in,
 * written directly into the transfer's buffer (no cJSON tree per request);
 * lg_xfer_build_body is called when a transfer starts (xfer.c) and again
 * when it is resent without continuous_usage_stats. */
#include "lg_internal.h"

#include "api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lg_body_keep(const scn_scenario *s, const char *k)
{
    return !s->extra_body || !cJSON_GetObjectItemCaseSensitive(s->extra_body, k);
}

int lg_body_key(ll_buf *b, const char *k)
{
    int rc;
    if (b->len > 1)
        LL_TRY(ll_buf_append(b, ",", 1));
    LL_TRY(ll_json_escape(b, k));
    LL_TRY(ll_buf_append(b, ":", 1));
fail:
    return rc;
}

int lg_body_double(ll_buf *b, double x)
{
    char t[32];
    snprintf(t, sizeof t, "%.15g", x);
    if (strtod(t, NULL) != x)
        snprintf(t, sizeof t, "%.17g", x);
    return ll_buf_append(b, t, strlen(t));
}

int lg_body_top_p(ll_buf *b, const scn_scenario *s)
{
    int rc = 0;
    if (s->top_p > 0 && lg_body_keep(s, "top_p"))
        LL_TRY(lg_body_key(b, "top_p") || lg_body_double(b, s->top_p));
fail:
    return rc;
}

/* The prompt as one JSON string with the head (plain ASCII, nothing to
 * escape) inserted head_at bytes into the prompt: at 0, inside the string's
 * opening quote; further on, after the prefix other requests share, so a
 * server's prefix cache can still match that prefix. The escaped prefix's
 * length is found by escaping it alone (escaping is per character). */
int lg_body_text(ll_buf *b, const char *head, const char *prompt, size_t head_at)
{
    size_t at = b->len, hn = strlen(head), off = 1;
    int rc;
    LL_TRY(ll_json_escape(b, prompt));
    if (hn && head_at > 0 && head_at <= strlen(prompt)) {
        ll_buf pre = {0};
        char *cut = strndup(prompt, head_at);
        rc = cut ? ll_json_escape(&pre, cut) : LL_ENOMEM;
        off = pre.len - 1; /* the opening quote and the prefix, without its closing quote */
        free(cut);
        ll_buf_free(&pre);
        LL_TRY(rc);
    }
    if (hn) {
        LL_TRY(ll_buf_append(b, head, hn)); /* room, then move the string's body up */
        memmove(b->p + at + off + hn, b->p + at + off, b->len - hn - at - off);
        memcpy(b->p + at + off, head, hn);
    }
fail:
    return rc;
}

int lg_body_prompt(ll_buf *b, const scn_scenario *s, const char *key, const char *head, const char *prompt,
                   size_t head_at)
{
    int rc = 0;
    if (!lg_body_keep(s, key))
        return 0;
    LL_TRY(lg_body_key(b, key));
    LL_TRY(lg_body_text(b, head, prompt, head_at));
fail:
    return rc;
}

/* Every key of the scenario's extra_body, as cJSON prints its value. */
static int put_extra_body(ll_buf *b, const scn_scenario *s)
{
    char *v = NULL;
    int rc = 0;
    for (const cJSON *c = s->extra_body ? s->extra_body->child : NULL; c; c = c->next) {
        if (!c->string)
            continue;
        LL_TRY(lg_body_key(b, c->string));
        LL_TRY((v = cJSON_PrintUnformatted(c)) ? 0 : LL_ENOMEM);
        LL_TRY(ll_buf_append(b, v, strlen(v)));
        cJSON_free(v);
        v = NULL;
    }
fail:
    cJSON_free(v);
    return rc;
}

/* The request body for the scenario's API, then every key of its
 * extra_body (which replaces a default of the same name: max_tokens,
 * stream_options, ...). Written directly: no cJSON tree per request. */
int lg_xfer_build_body(lg_xfer *x)
{
    lg_run *r = x->w->run;
    const scn_scenario *s = r->scn;
    const char *prompt = scn_prompt(r->prompts, x->prompt_index, &x->prompt_words);
    const lg_api *api = r->api;
    ll_buf *b = &x->body;
    int cont = s->continuous_usage && !atomic_load(&r->no_cont_usage);
    int rc;
    ll_buf_reset(b);
    x->sent_cont_usage = api->cont_usage && cont && lg_body_keep(s, "stream_options");
    LL_TRY(ll_buf_append(b, "{", 1));
    if (api->sends_model && lg_body_keep(s, "model")) {
        LL_TRY(lg_body_key(b, "model"));
        LL_TRY(ll_json_escape(b, r->model));
    }
    x->head_at = scn_prompt_head_at(r->prompts, x->prompt_index);
    int mt = scn_prompt_max_tokens(r->prompts, x->prompt_index);
    x->max_tokens = mt > 0 ? mt : s->max_tokens;
    if (x->sess) {
        /* a turn of a conversation (session.c): the messages so far */
        LL_TRY(lg_body_key(b, "messages"));
        LL_TRY(lg_sess_put_messages(b, x->sess, &x->prompt_words));
    } else {
        LL_TRY(api->put_prompt(b, s, x->head, prompt, x->head_at));
    }
    if (x->head[0]) {
        const scn_tokenizer *tok = scn_prompts_tokenizer(r->prompts);
        x->prompt_words++;
        /* a prompt fitted with its head counts it already (scn_prompts_fit) */
        if (tok && scn_prompt_target_tokens(r->prompts, x->prompt_index) > 0 &&
            !scn_prompt_head_inside(r->prompts, x->prompt_index))
            x->head_tok = (int)scn_tokenizer_count(tok, x->head, strlen(x->head));
    }
    LL_TRY(api->put_limits(b, s, x->max_tokens, x->sent_cont_usage));
    if (lg_body_keep(s, "stream"))
        LL_TRY(lg_body_key(b, "stream") || ll_buf_printf(b, "true"));
    LL_TRY(put_extra_body(b, s));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

const char *lg_request_path(const scn_scenario *s)
{
    return s->endpoint_path && s->endpoint_path[0] ? s->endpoint_path : scn_endpoint_path(s->endpoint);
}

int lg_xfer_headers(const scn_scenario *s, struct curl_slist **list)
{
    for (size_t i = 0; i < s->n_headers; i++) {
        struct curl_slist *t = curl_slist_append(*list, s->headers[i]);
        if (!t)
            return LL_ENOMEM;
        *list = t;
    }
    return 0;
}
