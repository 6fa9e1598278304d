/* delta.c: a stream's events turned into token chunks (delta.h): what every
 * server API shares. The interpreter counts tokens per chunk: from
 * continuous usage (the difference of completion_tokens between chunks) when
 * the server sends it, else one per non-empty delta per kind, because
 * servers may pack several tokens into one chunk and counting chunks as
 * tokens is the error this tool exists to avoid. Each API's interpreter
 * (api_*.c) reads its own events' shape and yields the same per-event token
 * counts and text byte lengths through lg_delta_count (xfer_record.c
 * attributes a disagreeing final usage over the chunks by them).
 * Each event's JSON is read into a tape (jtape.h) by a fast scanner, or by
 * cJSON when the scanner meets something outside the plain subset it handles
 * (counted in lg_delta.slow_events); the interpreters read only the tape, so
 * both give the same result. A string's text is what a lenient client reads
 * (jtape.h: a NUL or a lone surrogate as U+FFFD, the rest kept), so such an
 * event's tokens are counted and timed like any other's; a raw control byte
 * in a string is counted (lg_delta.ctl_events) for the record to name. */
#include "delta.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "outputs.h"

void lg_delta_init(lg_delta *d)
{
    memset(d, 0, sizeof *d);
    d->usage_prompt = d->usage_completion = d->usage_reasoning = d->usage_cached = -1;
    d->srv = ll_rec_srv_timing_none();
    d->api = lg_api_of(SCN_ENDPOINT_CHAT);
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
 * answer (see lg_delta_content). */
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

/* The byte walk of lg_delta_content over buf: the held prefix (its first pend
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
void lg_delta_content(lg_delta *d, const char *s, size_t n, size_t *tb, size_t *ab, int *reclass)
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
int64_t lg_jcount(const lg_jtape *t, const lg_jnode *o, const char *k)
{
    const lg_jnode *v = lg_jget(t, o, k);
    if (!v || v->type != LG_J_NUM || !(v->num >= 0 && v->num <= 1e9))
        return -1;
    return (int64_t)v->num;
}

void lg_delta_finish(lg_delta *d, const lg_jtape *t, const lg_jnode *v)
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

int lg_str_is(const char *s, size_t n, const char *lit)
{
    return s && n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static void set_msg(char *out, size_t outlen, const char *msg, size_t n)
{
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen), msg);
}

int lg_json_error(const lg_jtape *t, const lg_jnode *root, char *out, size_t outlen)
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
    } else if (lg_str_is(obj, ol, "error")) {
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

void lg_delta_fail(lg_delta *d, const char *msg, size_t n)
{
    char m[LG_DELTA_ERRMSG_BYTES];
    set_msg(m, sizeof m, msg, n);
    lg_delta_set_error(d, m);
}

int lg_delta_error_body(lg_delta *d, const lg_jtape *t)
{
    char m[LG_DELTA_ERRMSG_BYTES];
    if (!lg_json_error(t, &t->n[0], m, sizeof m))
        return 0;
    lg_delta_set_error(d, m);
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
    int found = parse_tape(&t, body, len, NULL) == 0 ? lg_json_error(&t, &t.n[0], out, outlen) : 0;
    lg_jtape_free(&t);
    return found;
}

void lg_delta_count(lg_delta *d, size_t tb, size_t ab, int64_t ct_now, lg_delta_out *out)
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
        if (n <= 0)
            return;
        /* A text-less chunk whose count grew carries tokens all the same: vLLM
         * sends "content": "" while it holds back the bytes of an incomplete
         * UTF-8 character, a stop token has no text. Their step is a real
         * step, so they count where they arrive, of the kind the stream is
         * in (thinking while a <think> is open or the last tokens were). */
        if (tb == 0 && ab == 0) {
            if (d->in_think || d->last_think)
                out->think_tok = (int)n;
            else
                out->answer_tok = (int)n;
            return;
        }
        d->last_think = tb > ab;
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

void lg_delta_thinking(lg_delta *d, const char *s, size_t n, size_t *tb)
{
    *tb += n;
    keep(d, 1, s, n);
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
        else if (!root || !lg_json_error(&t, root, m, sizeof m))
            snprintf(m, sizeof m, "%.*s", (int)(len < 200 ? len : 200), data);
        lg_delta_set_error(d, m);
    } else if (!root) {
        d->bad_events++;
    } else {
        d->api->event(d, event, &t, out);
    }
    lg_jtape_free(&t);
}
