/* xfer_body.c: what a request sends: its JSON body and the scenario's extra
 * headers. Bodies follow the scenario's endpoint (chat, completions,
 * responses, generate) with its extra_body merged in, written directly into
 * the transfer's buffer (no cJSON tree per request); lg_xfer_build_body is
 * called when a transfer starts (xfer.c) and again when it is resent without
 * continuous_usage_stats. */
#include "lg_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A default key the scenario's extra_body does not replace. */
static int keep_key(const scn_scenario *s, const char *k)
{
    return !s->extra_body || !cJSON_GetObjectItemCaseSensitive(s->extra_body, k);
}

/* `"k":` after a comma unless it is the object's first key. */
static int put_key(ll_buf *b, const char *k)
{
    int rc;
    if (b->len > 1)
        LL_TRY(ll_buf_append(b, ",", 1));
    LL_TRY(ll_json_escape(b, k));
    LL_TRY(ll_buf_append(b, ":", 1));
fail:
    return rc;
}

/* The key the endpoint reads the prompt from. */
static const char *prompt_key(scn_endpoint e)
{
    switch (e) {
    case SCN_ENDPOINT_CHAT:
        return "messages";
    case SCN_ENDPOINT_RESPONSES:
        return "input";
    case SCN_ENDPOINT_GENERATE:
        return "text";
    default:
        return "prompt";
    }
}

/* The prompt as one JSON string with the head (plain ASCII, nothing to
 * escape) inserted head_at bytes into the prompt: at 0, inside the string's
 * opening quote; further on, after the prefix other requests share, so a
 * server's prefix cache can still match that prefix. The escaped prefix's
 * length is found by escaping it alone (escaping is per character). */
static int put_text(ll_buf *b, const char *head, const char *prompt, size_t head_at)
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

/* The prompt under the endpoint's key; chat sends it as one user message. */
static int put_prompt(ll_buf *b, const scn_scenario *s, const char *head, const char *prompt, size_t head_at)
{
    const char *k = prompt_key(s->endpoint);
    int rc = 0;
    if (!keep_key(s, k))
        return 0;
    LL_TRY(put_key(b, k));
    if (s->endpoint == SCN_ENDPOINT_CHAT) {
        LL_TRY(ll_buf_printf(b, "[{\"role\":\"user\",\"content\":"));
        LL_TRY(put_text(b, head, prompt, head_at));
        LL_TRY(ll_buf_append(b, "}]", 2));
    } else {
        LL_TRY(put_text(b, head, prompt, head_at));
    }
fail:
    return rc;
}

/* x as JSON in the fewest digits that read back as x (cJSON's rule). */
static int put_double(ll_buf *b, double x)
{
    char t[32];
    snprintf(t, sizeof t, "%.15g", x);
    if (strtod(t, NULL) != x)
        snprintf(t, sizeof t, "%.17g", x);
    return ll_buf_append(b, t, strlen(t));
}

/* request.top_p, when the scenario sets it (0: the server's default). */
static int put_top_p(ll_buf *b, const scn_scenario *s)
{
    int rc = 0;
    if (s->top_p > 0 && keep_key(s, "top_p"))
        LL_TRY(put_key(b, "top_p") || put_double(b, s->top_p));
fail:
    return rc;
}

/* What comparing outputs needs: greedy decoding (temperature 0, the
 * scenario's seed) and, when outputs are recorded, the chosen tokens'
 * logprobs with the top 5 (chat: logprobs + top_logprobs; completions: a
 * count). Nothing when neither is asked, so bodies stay as they were. */
static int put_output_keys(ll_buf *b, const scn_scenario *s)
{
    int rc = 0;
    if (s->greedy && keep_key(s, "temperature"))
        LL_TRY(put_key(b, "temperature") || ll_buf_printf(b, "0"));
    if (s->greedy && keep_key(s, "seed"))
        LL_TRY(put_key(b, "seed") || ll_buf_printf(b, "%" PRIu64, s->seed % 2147483648u));
    if (s->record_outputs && keep_key(s, "logprobs")) {
        LL_TRY(put_key(b, "logprobs"));
        LL_TRY(ll_buf_printf(b, s->endpoint == SCN_ENDPOINT_CHAT ? "true" : "5"));
    }
    if (s->record_outputs && s->endpoint == SCN_ENDPOINT_CHAT && keep_key(s, "top_logprobs"))
        LL_TRY(put_key(b, "top_logprobs") || ll_buf_printf(b, "5"));
fail:
    return rc;
}

/* chat and completions: the length cap, the usage request and loadlaw's
 * engine extensions. */
static int put_openai_limits(const lg_xfer *x, ll_buf *b, const scn_scenario *s)
{
    int rc = 0;
    if (keep_key(s, "max_tokens")) {
        LL_TRY(put_key(b, "max_tokens"));
        LL_TRY(ll_buf_printf(b, "%d", x->max_tokens));
    }
    if (keep_key(s, "stream_options")) {
        LL_TRY(put_key(b, "stream_options"));
        LL_TRY(ll_buf_printf(b, "{\"include_usage\":true%s}",
                             x->sent_cont_usage ? ",\"continuous_usage_stats\":true" : ""));
    }
    /* loadlaw's engine extensions, sent only when the scenario asks */
    if (s->ignore_eos && keep_key(s, "ignore_eos"))
        LL_TRY(put_key(b, "ignore_eos") || ll_buf_printf(b, "true"));
    if (s->think_tokens >= 0 && keep_key(s, "think_tokens"))
        LL_TRY(put_key(b, "think_tokens") || ll_buf_printf(b, "%d", s->think_tokens));
    LL_TRY(put_top_p(b, s));
    LL_TRY(put_output_keys(b, s));
fail:
    return rc;
}

/* The length cap (and, for generate, ignore_eos and top_p) under each endpoint's own name. */
static int put_limits(const lg_xfer *x, ll_buf *b, const scn_scenario *s, int openai)
{
    int rc = 0;
    if (openai)
        return put_openai_limits(x, b, s);
    if (s->endpoint == SCN_ENDPOINT_RESPONSES) {
        if (keep_key(s, "max_output_tokens")) {
            LL_TRY(put_key(b, "max_output_tokens"));
            LL_TRY(ll_buf_printf(b, "%d", x->max_tokens));
        }
        LL_TRY(put_top_p(b, s));
        /* outputs: each text delta's logprobs with the top 5 */
        if (s->record_outputs && keep_key(s, "top_logprobs"))
            LL_TRY(put_key(b, "top_logprobs") || ll_buf_printf(b, "5"));
        if (s->record_outputs && keep_key(s, "include"))
            LL_TRY(put_key(b, "include") || ll_buf_printf(b, "[\"message.output_text.logprobs\"]"));
    } else if (keep_key(s, "sampling_params")) {
        LL_TRY(put_key(b, "sampling_params"));
        LL_TRY(ll_buf_printf(b, "{\"max_new_tokens\":%d%s", x->max_tokens,
                             s->ignore_eos ? ",\"ignore_eos\":true" : ""));
        if (s->top_p > 0)
            LL_TRY(ll_buf_append(b, ",\"top_p\":", 9) || put_double(b, s->top_p));
        LL_TRY(ll_buf_append(b, "}", 1));
    }
    /* outputs from SGLang's /generate: meta_info's output token logprobs, top 5, with their text */
    if (s->endpoint == SCN_ENDPOINT_GENERATE && s->record_outputs && keep_key(s, "return_logprob"))
        LL_TRY(put_key(b, "return_logprob") || ll_buf_printf(b, "true,\"top_logprobs_num\":5,"
                                                                "\"return_text_in_logprobs\":true"));
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
        LL_TRY(put_key(b, c->string));
        LL_TRY((v = cJSON_PrintUnformatted(c)) ? 0 : LL_ENOMEM);
        LL_TRY(ll_buf_append(b, v, strlen(v)));
        cJSON_free(v);
        v = NULL;
    }
fail:
    cJSON_free(v);
    return rc;
}

/* The request body for the scenario's endpoint, then every key of its
 * extra_body (which replaces a default of the same name: max_tokens,
 * stream_options, ...). Written directly: no cJSON tree per request. */
int lg_xfer_build_body(lg_xfer *x)
{
    lg_run *r = x->w->run;
    const scn_scenario *s = r->scn;
    const char *prompt = scn_prompt(r->prompts, x->prompt_index, &x->prompt_words);
    ll_buf *b = &x->body;
    int openai = s->endpoint == SCN_ENDPOINT_CHAT || s->endpoint == SCN_ENDPOINT_COMPLETIONS;
    int cont = s->continuous_usage && !atomic_load(&r->no_cont_usage);
    int rc;
    ll_buf_reset(b);
    x->sent_cont_usage = openai && cont && keep_key(s, "stream_options");
    LL_TRY(ll_buf_append(b, "{", 1));
    if (s->endpoint != SCN_ENDPOINT_GENERATE && keep_key(s, "model")) {
        LL_TRY(put_key(b, "model"));
        LL_TRY(ll_json_escape(b, r->model));
    }
    x->head_at = scn_prompt_head_at(r->prompts, x->prompt_index);
    int mt = scn_prompt_max_tokens(r->prompts, x->prompt_index);
    x->max_tokens = mt > 0 ? mt : s->max_tokens;
    if (x->sess) {
        /* a turn of a conversation (session.c): the messages so far */
        LL_TRY(put_key(b, "messages"));
        LL_TRY(lg_sess_put_messages(b, x->sess, &x->prompt_words));
    } else {
        LL_TRY(put_prompt(b, s, x->head, prompt, x->head_at));
    }
    if (x->head[0]) {
        const scn_tokenizer *tok = scn_prompts_tokenizer(r->prompts);
        x->prompt_words++;
        if (tok && scn_prompt_target_tokens(r->prompts, x->prompt_index) > 0)
            x->head_tok = (int)scn_tokenizer_count(tok, x->head, strlen(x->head));
    }
    LL_TRY(put_limits(x, b, s, openai));
    if (keep_key(s, "stream"))
        LL_TRY(put_key(b, "stream") || ll_buf_printf(b, "true"));
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
