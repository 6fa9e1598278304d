/* sse.c: incremental SSE framing and the OpenAI delta interpreter.
 *
 * Framing follows the WHATWG event-stream rules that matter here: lines end in
 * LF, CRLF or a lone CR (a CRLF split across two feeds is still one line end);
 * ':' starts a comment; "data:" lines accumulate, joined by '\n'; a blank line
 * dispatches. The interpreter counts tokens per chunk: from continuous usage
 * (the difference of completion_tokens between chunks) when the server sends
 * it, else one per non-empty delta per kind, because servers may pack several
 * tokens into one chunk and counting chunks as tokens is the error this tool
 * exists to avoid. Three dialects (lg_dialect): OpenAI's chat/completions
 * chunks, the Responses API's typed events, SGLang /generate's cumulative
 * text; each yields the same per-event token counts and text byte lengths
 * (xfer_record.c attributes a disagreeing final usage over the chunks by them).
 * Each event's JSON is read into a tape (jtape.h) by a fast scanner, or by
 * cJSON when the scanner meets something outside the plain subset it handles
 * (counted in lg_delta.slow_events); the interpreter reads only the tape, so
 * both give the same result. A string's text is what a lenient client reads
 * (jtape.h: a NUL or a lone surrogate as U+FFFD, the rest kept), so such an
 * event's tokens are counted and timed like any other's; a raw control byte
 * in a string is counted (lg_delta.ctl_events) for the record to name. */
#include "sse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jtape.h"
#include "outputs.h"

void lg_sse_init(lg_sse *s, lg_sse_cb cb, void *ctx)
{
    memset(s, 0, sizeof *s);
    s->cb = cb;
    s->ctx = ctx;
}

void lg_sse_free(lg_sse *s)
{
    ll_buf_free(&s->line);
    ll_buf_free(&s->data);
}

static int dispatch(lg_sse *s)
{
    int rc = 0;
    if (s->has_data) {
        /* Drop the '\n' after the last data line (the spec's join rule). */
        if (s->data.len)
            s->data.p[--s->data.len] = '\0';
        rc = s->cb(s->ctx, s->event, s->data.p ? s->data.p : "", s->data.len);
    }
    ll_buf_reset(&s->data);
    s->has_data = 0;
    s->event[0] = '\0';
    return rc;
}

static int process_line(lg_sse *s, const char *l, size_t n)
{
    if (n == 0)
        return dispatch(s);
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vl = (size_t)(l + n - v);
    if (vl && v[0] == ' ') {
        v++;
        vl--;
    }
    if (fl == 4 && memcmp(l, "data", 4) == 0) {
        if (s->data.len + vl + 1 > LG_SSE_MAX_BYTES)
            return LL_ERANGE;
        s->has_data = 1;
        if (ll_buf_append(&s->data, v, vl) || ll_buf_append(&s->data, "\n", 1))
            return LL_ENOMEM;
    } else if (fl == 5 && memcmp(l, "event", 5) == 0) {
        size_t k = vl < sizeof s->event - 1 ? vl : sizeof s->event - 1;
        memcpy(s->event, v, k);
        s->event[k] = '\0';
    }
    return 0; /* id:, retry: and unknown fields do not matter here */
}

/* Whether any of the 8 bytes at q is '\n' or '\r' (SWAR: a line is ~250
 * bytes, and this loop saw each of them one at a time). */
static inline int has_line_end(const char *q)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t v, a, b;
    memcpy(&v, q, 8);
    a = v ^ (ones * '\n');
    b = v ^ (ones * '\r');
    return (((a - ones) & ~a) | ((b - ones) & ~b)) & highs ? 1 : 0;
}

int lg_sse_feed(lg_sse *s, const char *p, size_t n)
{
    size_t i = 0;
    int rc;
    if (s->cr_pending && n > 0) {
        s->cr_pending = 0;
        if (p[0] == '\n')
            i = 1;
    }
    while (i < n) {
        /* Scan for the next line end without copying when the line is whole. */
        size_t j = i;
        while (n - j >= 8 && !has_line_end(p + j))
            j += 8;
        while (j < n && p[j] != '\n' && p[j] != '\r')
            j++;
        if (j == n) {
            if (s->line.len + (n - i) > LG_SSE_MAX_BYTES)
                return LL_ERANGE;
            if (ll_buf_append(&s->line, p + i, n - i))
                return LL_ENOMEM;
            break;
        }
        if (s->line.len) {
            if (ll_buf_append(&s->line, p + i, j - i))
                return LL_ENOMEM;
            rc = process_line(s, s->line.p, s->line.len);
            ll_buf_reset(&s->line);
        } else {
            rc = process_line(s, p + i, j - i);
        }
        if (rc)
            return rc;
        if (p[j] == '\r') {
            if (j + 1 == n)
                s->cr_pending = 1;
            else if (p[j + 1] == '\n')
                j++;
        }
        i = j + 1;
    }
    return 0;
}

int lg_sse_finish(lg_sse *s)
{
    int rc = 0;
    if (s->line.len) {
        /* An unterminated last line is incomplete: it may be cut mid-JSON. */
        ll_buf_reset(&s->line);
    }
    if (s->has_data)
        rc = dispatch(s);
    return rc;
}

/* ---- delta interpretation -------------------------------------------------- */

void lg_delta_init(lg_delta *d)
{
    memset(d, 0, sizeof *d);
    d->usage_prompt = d->usage_completion = d->usage_reasoning = d->usage_cached = -1;
    d->srv = ll_rec_srv_timing_none();
}

void lg_delta_free(lg_delta *d)
{
    ll_buf_free(&d->think_text);
    ll_buf_free(&d->answer_text);
    lg_out_free(d->out);
    d->out = NULL;
    free(d->errmsg);
    d->errmsg = NULL;
}

void lg_delta_set_error(lg_delta *d, const char *msg)
{
    d->error = 1;
    if (!d->errmsg && !(d->errmsg = malloc(LG_DELTA_ERRMSG_BYTES)))
        return; /* out of memory: the error stands, without its message */
    snprintf(d->errmsg, LG_DELTA_ERRMSG_BYTES, "%s", msg);
}

const char *lg_delta_errmsg(const lg_delta *d)
{
    return d->errmsg ? d->errmsg : "";
}

/* Text kept for a tokenizer. Out of memory loses only text (the count then
 * falls short, never the stream). */
static void keep(lg_delta *d, int think, const char *p, size_t n)
{
    if (d->keep_text && n)
        (void)ll_buf_append(think ? &d->think_text : &d->answer_text, p, n);
}

static const char k_open[] = "<think>", k_close[] = "</think>";

enum { TAG_NONE, TAG_PREFIX, TAG_OPEN, TAG_CLOSE };

/* What the bytes at p (rem of them, p[0] == '<') begin: a possible tag cut
 * short by their end, a whole <think> or </think>, or text. */
static int tag_at(const char *p, size_t rem)
{
    if ((rem < 7 && memcmp(p, k_open, rem) == 0) || (rem < 8 && memcmp(p, k_close, rem) == 0))
        return TAG_PREFIX;
    if (rem >= 7 && memcmp(p, k_open, 7) == 0)
        return TAG_OPEN;
    if (rem >= 8 && memcmp(p, k_close, 8) == 0)
        return TAG_CLOSE;
    return TAG_NONE;
}

/* A possible tag at the end of the bytes (p, rem of them): held until the
 * next chunk decides it. Its n bytes not yet counted go to thinking in
 * thinking mode or when they already read "<thi" or "</thi", else to the
 * answer (see split_content). */
static void hold_prefix(lg_delta *d, const char *p, size_t rem, size_t n, size_t *tb, size_t *ab)
{
    int tagish = d->in_think || (rem >= 4 && memcmp(p, "<thi", 4) == 0) ||
                 (rem >= 5 && memcmp(p, "</thi", 5) == 0);
    memcpy(d->tag, p, rem);
    d->tag_len = rem;
    *(tagish ? tb : ab) += n;
}

/* A bare </think> (no tag before it): everything before it was thinking,
 * this chunk's answer bytes (those past ab0) and kept answer text included. */
static void reclassify_answer(lg_delta *d, size_t *tb, size_t *ab, size_t ab0, int *reclass)
{
    *reclass = 1;
    *tb += *ab - ab0;
    *ab = ab0;
    if (d->keep_text && d->answer_text.len) {
        keep(d, 1, d->answer_text.p, d->answer_text.len);
        ll_buf_reset(&d->answer_text);
    }
}

/* The byte walk of split_content over buf: the held prefix (its first pend
 * bytes, counted with the previous chunk) and then the chunk, len in all. */
static void split_tags(lg_delta *d, const char *buf, size_t pend, size_t len, size_t *tb, size_t *ab,
                       int *reclass)
{
    size_t i = 0, ab0 = *ab;
    while (i < len) {
        int tag = buf[i] == '<' ? tag_at(buf + i, len - i) : TAG_NONE;
        /* Bytes of buf before pend were counted with the previous chunk. */
        size_t from = i > pend ? i : pend;
        if (tag == TAG_PREFIX) {
            hold_prefix(d, buf + i, len - i, len > from ? len - from : 0, tb, ab);
            break;
        }
        if (tag != TAG_NONE) {
            size_t tl = tag == TAG_OPEN ? 7 : 8;
            *tb += i + tl > from ? i + tl - from : 0;
            if (tag == TAG_CLOSE && !d->in_think && !d->saw_tag)
                reclassify_answer(d, tb, ab, ab0, reclass);
            d->in_think = tag == TAG_OPEN;
            d->saw_tag = 1;
            i += tl;
            continue;
        }
        if (i >= pend)
            (d->in_think ? (*tb)++ : (*ab)++);
        keep(d, d->in_think, buf + i, 1); /* a held prefix that was text, too */
        i++;
    }
}

/* Split content into thinking and answer bytes, tracking tags across chunks.
 * Tag bytes count as thinking (they are tokens the model spent thinking). A
 * possible tag prefix at the end is held until the next chunk decides it; its
 * bytes are counted now, in the current mode, unless they already read
 * "<thi" or "</thi": a lone "<" or "</" ending an answer chunk is far more
 * often text ("a < b", "</p>") than half a tag, and counting it as thinking
 * would add a thinking token to an answer chunk. */
static void split_content(lg_delta *d, const char *s, size_t n, size_t *tb, size_t *ab, int *reclass)
{
    char stack[512], *buf = stack;
    size_t pend = d->tag_len, len = pend + n;
    if (pend == 0 && !memchr(s, '<', n)) {
        /* No tag can start here (the common chunk): what split_tags does
         * byte by byte, at once. */
        *(d->in_think ? tb : ab) += n;
        keep(d, d->in_think, s, n);
        return;
    }
    if (len > sizeof stack && !(buf = malloc(len))) {
        *ab += n; /* out of memory: count the text, lose only tag tracking */
        return;
    }
    memcpy(buf, d->tag, pend);
    memcpy(buf + pend, s, n);
    d->tag_len = 0;
    split_tags(d, buf, pend, len, tb, ab, reclass);
    if (buf != stack)
        free(buf);
}

/* A token count from the server, or -1 when absent or not a sane count: the
 * value is untrusted, and a cast of 1e300 (or NaN) is undefined while 3e9
 * wraps the int per-chunk counts negative. No request has 1e9 tokens. */
static int64_t jnum(const lg_jtape *t, const lg_jnode *o, const char *k)
{
    const lg_jnode *v = lg_jget(t, o, k);
    if (!v || v->type != LG_J_NUM || !(v->num >= 0 && v->num <= 1e9))
        return -1;
    return (int64_t)v->num;
}

/* A duration from the server in ms, or NAN when absent or not sane (a
 * request of more than a day is not one). */
static double jms(const lg_jtape *t, const lg_jnode *o, const char *k)
{
    const lg_jnode *v = lg_jget(t, o, k);
    return v && v->type == LG_J_NUM && v->num >= 0 && v->num <= 864e5 ? v->num : NAN;
}

/* A finish reason as sent (a string, or SGLang's {"type": ...}). */
static void take_finish(lg_delta *d, const lg_jtape *t, const lg_jnode *v)
{
    size_t n = 0;
    const char *s = NULL;
    if (v && v->type == LG_J_STR)
        s = v->str, n = v->str_len;
    else if (v && v->type == LG_J_OBJ)
        s = lg_jstr(t, v, "type", &n);
    if (!s || !n)
        return;
    if (n >= sizeof d->finish)
        n = sizeof d->finish - 1;
    memcpy(d->finish, s, n);
    d->finish[n] = '\0';
}

/* usage.prompt_tokens_details.cached_tokens (OpenAI's, vLLM's, SGLang's
 * spelling), or usage.cached_tokens. */
static void take_cached(lg_delta *d, const lg_jtape *t, const lg_jnode *usage)
{
    const lg_jnode *det = lg_jget(t, usage, "prompt_tokens_details");
    int64_t c = det && det->type == LG_J_OBJ ? jnum(t, det, "cached_tokens") : -1;
    if (c < 0)
        c = jnum(t, usage, "cached_tokens");
    if (c >= 0)
        d->usage_cached = c;
}

/* The server's own timing of the request, where the event carries one:
 * llama.cpp's "timings" (on its last chunk), vLLM's per-request "metrics"
 * (--enable-per-request-metrics with include_metrics). */
static void take_server_timing(lg_delta *d, const lg_jtape *t, const lg_jnode *root)
{
    const lg_jnode *tm = lg_jget(t, root, "timings"), *m = lg_jget(t, root, "metrics");
    if (tm && tm->type == LG_J_OBJ) {
        d->srv.present = 1;
        d->srv.prompt_ms = jms(t, tm, "prompt_ms");
        d->srv.decode_ms = jms(t, tm, "predicted_ms");
        d->srv.tpot_ms = jms(t, tm, "predicted_per_token_ms");
        d->srv.prompt_n = jnum(t, tm, "prompt_n");
        d->srv.decode_n = jnum(t, tm, "predicted_n");
        int64_t c = jnum(t, tm, "cache_n");
        if (c >= 0 && d->usage_cached < 0)
            d->usage_cached = c;
    }
    if (m && m->type == LG_J_OBJ) {
        d->srv.present = 1;
        d->srv.ttft_ms = jms(t, m, "time_to_first_token_ms");
        d->srv.queue_ms = jms(t, m, "queue_time_ms");
        d->srv.decode_ms = jms(t, m, "generation_time_ms");
        d->srv.tpot_ms = jms(t, m, "mean_itl_ms");
    }
}

static int str_is(const char *s, size_t n, const char *lit)
{
    return s && n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static void set_msg(char *out, size_t outlen, const char *msg, size_t n)
{
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen), msg);
}

static int err_from_json(const lg_jtape *t, const lg_jnode *root, char *out, size_t outlen)
{
    const lg_jnode *e = lg_jget(t, root, "error");
    size_t ol = 0, ml = 5;
    const char *obj = lg_jstr(t, root, "object", &ol);
    const char *msg = NULL;
    if (e && e->type == LG_J_OBJ) {
        if (!(msg = lg_jstr(t, e, "message", &ml)))
            msg = "error", ml = 5;
    } else if (e && e->type == LG_J_STR) {
        msg = e->str, ml = e->str_len;
    } else if (str_is(obj, ol, "error")) {
        if (!(msg = lg_jstr(t, root, "message", &ml)))
            msg = "error", ml = 5;
    } else {
        msg = lg_jstr(t, root, "detail", &ml);
    }
    if (!msg)
        return 0;
    set_msg(out, outlen, msg, ml);
    return 1;
}

/* The tape of one event: the fast scanner, else cJSON (counted in *slow). */
static int parse_tape(lg_jtape *t, const char *data, size_t len, int *slow)
{
    lg_jtape_init(t);
    if (lg_jscan(t, data, len) == 0)
        return 0;
    if (slow)
        (*slow)++;
    return lg_jfull(t, data, len);
}

int lg_error_message(const char *body, size_t len, char *out, size_t outlen)
{
    lg_jtape t;
    int found = parse_tape(&t, body, len, NULL) == 0 ? err_from_json(&t, &t.n[0], out, outlen) : 0;
    lg_jtape_free(&t);
    return found;
}

/* Tokens of one event from its text bytes and, when the server sends it,
 * the running completion_tokens (continuous usage). */
static void count_event(lg_delta *d, size_t tb, size_t ab, int64_t ct_now, lg_delta_out *out)
{
    out->think_bytes = tb > UINT32_MAX ? UINT32_MAX : (uint32_t)tb;
    out->answer_bytes = ab > UINT32_MAX ? UINT32_MAX : (uint32_t)ab;
    if (ct_now >= 0) {
        /* a running count that goes back (a server's slip) moves nothing:
         * taken as the new mark, the next chunks would count twice */
        ct_now = ct_now < d->last_ct ? d->last_ct : ct_now;
        int64_t n = ct_now - d->last_ct;
        d->last_ct = ct_now;
        d->has_cont_usage = 1;
        /* A text-less chunk's usage step is absorbed; reconciled by the final usage. */
        if (n <= 0 || (tb == 0 && ab == 0))
            return;
        if (tb && ab) {
            if (n == 1) {
                out->think_tok = tb > ab;
                out->answer_tok = !out->think_tok;
            } else {
                int64_t t = (int64_t)((double)n * (double)tb / (double)(tb + ab) + 0.5);
                t = t < 1 ? 1 : t > n - 1 ? n - 1 : t;
                out->think_tok = (int)t;
                out->answer_tok = (int)(n - t);
            }
        } else if (tb) {
            out->think_tok = (int)n;
        } else {
            out->answer_tok = (int)n;
        }
    } else {
        out->think_tok = tb > 0;
        out->answer_tok = ab > 0;
    }
}

/* Reasoning text outside content: all thinking, no tags to look for. */
static void think_text(lg_delta *d, const char *s, size_t n, size_t *tb)
{
    *tb += n;
    keep(d, 1, s, n);
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
    if (str_is(type, tl, "response.output_text.delta") && delta) {
        split_content(d, delta, dl, &tb, &ab, &out->reclassify);
        lg_out_responses(d->out, t, root); /* a no-op unless outputs are recorded */
    } else if (str_is(type, tl, "response.reasoning_text.delta") && delta) {
        think_text(d, delta, dl, &tb);
        lg_out_responses(d->out, t, root);
    } else if (str_is(type, tl, "response.completed") || str_is(type, tl, "response.incomplete")) {
        const lg_jnode *usage = lg_jget(t, lg_jget(t, root, "response"), "usage");
        if (usage && usage->type == LG_J_OBJ) {
            const lg_jnode *det = lg_jget(t, usage, "output_tokens_details");
            d->usage_prompt = jnum(t, usage, "input_tokens");
            d->usage_completion = jnum(t, usage, "output_tokens");
            d->usage_reasoning = det && det->type == LG_J_OBJ ? jnum(t, det, "reasoning_tokens") : -1;
            const lg_jnode *idet = lg_jget(t, usage, "input_tokens_details");
            int64_t c = idet && idet->type == LG_J_OBJ ? jnum(t, idet, "cached_tokens") : -1;
            if (c >= 0)
                d->usage_cached = c;
        }
        /* completed: the model stopped; incomplete: its reason, max_output_tokens being the length */
        size_t rl = 0;
        const char *reason = lg_jstr(t, lg_jget(t, lg_jget(t, root, "response"), "incomplete_details"), "reason", &rl);
        if (str_is(type, tl, "response.completed"))
            snprintf(d->finish, sizeof d->finish, "stop");
        else if (!reason || str_is(reason, rl, "max_output_tokens"))
            snprintf(d->finish, sizeof d->finish, "length");
        else
            snprintf(d->finish, sizeof d->finish, "%.*s", (int)rl, reason);
        d->done = 1;
        return;
    } else if (str_is(type, tl, "response.failed") || str_is(type, tl, "error")) {
        const lg_jnode *resp = lg_jget(t, root, "response");
        size_t ml = 0;
        const char *msg = lg_jstr(t, root, "message", &ml);
        char m[LG_DELTA_ERRMSG_BYTES];
        if (!msg && !err_from_json(t, resp ? resp : root, m, sizeof m))
            msg = type, ml = tl;
        if (msg)
            set_msg(m, sizeof m, msg, ml);
        lg_delta_set_error(d, m);
        return;
    } else {
        return; /* response.created, *.added, *.done, ...: no tokens */
    }
    count_event(d, tb, ab, -1, out);
}

/* SGLang's /generate stream: each event holds the whole text so far and
 * meta_info with the running token counts (its continuous usage). */
static void generate_event(lg_delta *d, const lg_jtape *t, lg_delta_out *out)
{
    const lg_jnode *root = &t->n[0];
    const lg_jnode *meta = lg_jget(t, root, "meta_info");
    size_t n = 0, tb = 0, ab = 0;
    const char *text = lg_jstr(t, root, "text", &n);
    int64_t ct_now = -1;
    if (text) {
        /* The new text is the suffix beyond what was seen; a shorter text
         * (not a continuation) only resets the mark. */
        if (n > d->gen_len)
            split_content(d, text + d->gen_len, n - d->gen_len, &tb, &ab, &out->reclassify);
        if (d->out) /* outputs: the same suffix, and the tokens beyond those taken */
            lg_out_generate(d->out, t, root, n > d->gen_len ? text + d->gen_len : NULL,
                            n > d->gen_len ? n - d->gen_len : 0, n >= d->gen_len);
        d->gen_len = n;
    } else if (d->out) {
        lg_out_generate(d->out, t, root, NULL, 0, 1);
    }
    if (meta && meta->type == LG_J_OBJ) {
        int64_t p = jnum(t, meta, "prompt_tokens"), r = jnum(t, meta, "reasoning_tokens");
        ct_now = jnum(t, meta, "completion_tokens");
        if (p >= 0)
            d->usage_prompt = p;
        if (ct_now >= 0)
            d->usage_completion = ct_now;
        if (r >= 0)
            d->usage_reasoning = r;
        int64_t c = jnum(t, meta, "cached_tokens");
        if (c >= 0)
            d->usage_cached = c;
        take_finish(d, t, lg_jget(t, meta, "finish_reason"));
    }
    count_event(d, tb, ab, ct_now, out);
}

/* chat / completions chunks: choices[].delta (reasoning_content or reasoning,
 * and content) or choices[].text; a final chunk with usage and no choices. */
static void openai_event(lg_delta *d, const lg_jtape *t, lg_delta_out *out)
{
    const lg_jnode *root = &t->n[0];
    const lg_jnode *choices = lg_jget(t, root, "choices");
    const lg_jnode *usage = lg_jget(t, root, "usage");
    const lg_jnode *first = choices && choices->type == LG_J_ARR ? lg_jchild(t, choices) : NULL;
    if (usage && usage->type == LG_J_OBJ && !first) {
        /* The final usage chunk: what the server says it did. */
        const lg_jnode *det = lg_jget(t, usage, "completion_tokens_details");
        d->usage_prompt = jnum(t, usage, "prompt_tokens");
        d->usage_completion = jnum(t, usage, "completion_tokens");
        d->usage_reasoning = jnum(t, usage, "reasoning_tokens");
        if (d->usage_reasoning < 0 && det && det->type == LG_J_OBJ)
            d->usage_reasoning = jnum(t, det, "reasoning_tokens");
        take_cached(d, t, usage);
        take_server_timing(d, t, root);
        return;
    }
    size_t tb = 0, ab = 0;
    for (const lg_jnode *c = first; c; c = lg_jnext(t, c)) {
        const lg_jnode *delta = lg_jget(t, c, "delta");
        size_t n = 0;
        const char *s;
        if (delta && delta->type == LG_J_OBJ) {
            if ((s = lg_jstr(t, delta, "reasoning_content", &n)) || (s = lg_jstr(t, delta, "reasoning", &n)))
                think_text(d, s, n, &tb);
            if ((s = lg_jstr(t, delta, "content", &n)))
                split_content(d, s, n, &tb, &ab, &out->reclassify);
        } else if ((s = lg_jstr(t, c, "text", &n))) {
            split_content(d, s, n, &tb, &ab, &out->reclassify);
        }
    }
    if (first && d->out)
        lg_out_choice(d->out, t, first);
    if (first) {
        /* the last chunk of a choice: its finish reason, and where the
         * server puts them there (llama.cpp), its own timings */
        const lg_jnode *fr = lg_jget(t, first, "finish_reason");
        if (fr && fr->type != LG_J_NULL) {
            take_finish(d, t, fr);
            take_server_timing(d, t, root);
            if (usage && usage->type == LG_J_OBJ)
                take_cached(d, t, usage);
        }
    }
    count_event(d, tb, ab, usage && usage->type == LG_J_OBJ ? jnum(t, usage, "completion_tokens") : -1, out);
}

void lg_delta_event(lg_delta *d, const char *event, const char *data, size_t len, lg_delta_out *out)
{
    lg_jtape t;
    char m[LG_DELTA_ERRMSG_BYTES];
    memset(out, 0, sizeof *out);
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        d->done = 1;
        return;
    }
    int bad = parse_tape(&t, data, len, &d->slow_events);
    const lg_jnode *root = bad ? NULL : &t.n[0];
    if (root && t.ctl >= 0 && d->ctl_events++ == 0)
        d->ctl_byte = t.ctl;
    if (event && strcmp(event, "error") == 0) {
        /* "event: error" with a JSON error object, or plain text */
        size_t ml = 0;
        const char *rm = root ? lg_jstr(&t, root, "message", &ml) : NULL; /* Responses' error */
        if (rm)
            set_msg(m, sizeof m, rm, ml);
        else if (!root || !err_from_json(&t, root, m, sizeof m))
            snprintf(m, sizeof m, "%.*s", (int)(len < 200 ? len : 200), data);
        lg_delta_set_error(d, m);
    } else if (!root) {
        d->bad_events++;
    } else if (d->dialect == LG_DIALECT_RESPONSES) {
        responses_event(d, event, &t, out);
    } else if (err_from_json(&t, root, m, sizeof m)) {
        lg_delta_set_error(d, m);
    } else if (d->dialect == LG_DIALECT_GENERATE) {
        generate_event(d, &t, out);
    } else {
        openai_event(d, &t, out);
    }
    lg_jtape_free(&t);
}
