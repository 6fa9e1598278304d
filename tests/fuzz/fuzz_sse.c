/* fuzz_sse.c: the client's SSE framer and OpenAI delta interpreter
 * (loadgen/sse.c) must not depend on how the bytes were split.
 *
 * Input: byte 0 picks the dialect, keep_text and whether outputs are
 * gathered (outputs.h: their tokens, ids and text must not depend on the
 * split either), bytes 1-4 seed the split
 * points, the rest is the stream. The stream is parsed twice: fed whole, then
 * fed in pieces of 1..64 bytes drawn from the seed (single bytes, CRLF pairs
 * and UTF-8 sequences cut in two included). The events (name, data), the
 * per-event delta results and the final interpreter state must be identical.
 *
 * Second property, on every event: wherever the fast JSON scanner (jtape.h)
 * accepts the data, cJSON accepts it too and gives the same tape (same tree,
 * keys, strings, numbers), so the interpreter cannot tell the two apart; an
 * event the scanner refuses goes to cJSON anyway.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "api.h"
#include "fuzz_util.h"
#include "jtape.h"
#include "outputs.h"
#include "sse.h"

/* Every dispatched event and what it meant, serialised into one buffer so two
 * parses compare with one memcmp. */
typedef struct parse {
    lg_sse sse;
    lg_delta d;
    ll_buf log;
    int oom;
    int check_tapes;    /* the whole parse checks fast vs full on each event */
} parse;

static void check_tapes(const char *data, size_t len)
{
    lg_jtape fast, full;
    lg_jtape_init(&fast);
    lg_jtape_init(&full);
    if (lg_jscan(&fast, data, len) == 0) {
        int rc = lg_jfull(&full, data, len);
        FUZZ_CHECK(rc == 0 || rc == LL_ENOMEM);
        FUZZ_CHECK(rc != 0 || lg_jtape_equal(&fast, &full));
    }
    lg_jtape_free(&fast);
    lg_jtape_free(&full);
}

static int on_event(void *ctx, const char *event, const char *data, size_t len)
{
    parse *p = ctx;
    if (p->check_tapes)
        check_tapes(data, len);
    lg_delta_out o;
    memset(&o, 0, sizeof o);
    FUZZ_CHECK(data[len] == '\0');
    lg_delta_event(&p->d, event, data, len, &o);
    char head[160];
    int n = snprintf(head, sizeof head, "[%s|%zu|%d,%d,%d,%u,%u]", event, len, o.think_tok,
                     o.answer_tok, o.reclassify, o.think_bytes, o.answer_bytes);
    FUZZ_CHECK(o.think_tok >= 0 && o.answer_tok >= 0);
    if (ll_buf_append(&p->log, head, (size_t)n) || ll_buf_append(&p->log, data, len))
        p->oom = 1;
    return 0;
}

static void parse_init(parse *p, uint8_t mode)
{
    memset(p, 0, sizeof *p);
    lg_sse_init(&p->sse, on_event, p);
    lg_delta_init(&p->d);
    static const scn_endpoint apis[3] = {SCN_ENDPOINT_CHAT, SCN_ENDPOINT_RESPONSES, SCN_ENDPOINT_GENERATE};
    p->d.api = lg_api_of(apis[mode % 3]);
    p->d.keep_text = (mode >> 2) & 1;
    if ((mode >> 3) & 1)
        p->d.out = lg_out_new();
}

static void parse_free(parse *p)
{
    lg_sse_free(&p->sse);
    lg_delta_free(&p->d);
    ll_buf_free(&p->log);
}

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static int buf_eq(const ll_buf *a, const ll_buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

/* Both parses gathered the same outputs (NULL when out of memory). */
static void check_outputs(lg_outputs *a, lg_outputs *b)
{
    FUZZ_CHECK(!a == !b);
    if (!a || !b || a->oom || b->oom)
        return;
    FUZZ_CHECK(a->tok.n == b->tok.n && a->ids.n == b->ids.n && a->alts.n == b->alts.n && a->lp.n == a->tok.n);
    FUZZ_CHECK(a->text_bytes == b->text_bytes && a->text_hash == b->text_hash && buf_eq(&a->text, &b->text));
    for (size_t i = 0; i < a->tok.n; i++)
        FUZZ_CHECK(strcmp(a->tok.v[i], b->tok.v[i]) == 0);
    ll_rec_outputs *ra = lg_out_take(a, "k"), *rb = lg_out_take(b, "k");
    if (ra && rb)
        FUZZ_CHECK(ra->n_tok == rb->n_tok && ra->top_k == rb->top_k && !ra->ids == !rb->ids);
    ll_rec_outputs_free(ra);
    ll_rec_outputs_free(rb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    uint8_t mode = data[0];
    uint32_t seed;
    memcpy(&seed, data + 1, 4);
    seed |= 1; /* xorshift must not start at 0 */
    const char *s = (const char *)data + 5;
    size_t n = size - 5;

    parse whole, cut;
    parse_init(&whole, mode);
    parse_init(&cut, mode);
    whole.check_tapes = 1;
    int rc_whole = lg_sse_feed(&whole.sse, s, n);
    if (!rc_whole)
        rc_whole = lg_sse_finish(&whole.sse);
    int rc_cut = 0;
    for (size_t off = 0; off < n && !rc_cut;) {
        size_t piece = 1 + next_rand(&seed) % 64;
        if (piece > n - off)
            piece = n - off;
        rc_cut = lg_sse_feed(&cut.sse, s + off, piece);
        off += piece;
    }
    if (!rc_cut)
        rc_cut = lg_sse_finish(&cut.sse);

    if (!whole.oom && !cut.oom && rc_whole != LL_ENOMEM && rc_cut != LL_ENOMEM) {
        FUZZ_CHECK(rc_whole == rc_cut);
        FUZZ_CHECK(buf_eq(&whole.log, &cut.log));
        const lg_delta *a = &whole.d, *b = &cut.d;
        FUZZ_CHECK(a->done == b->done && a->error == b->error);
        FUZZ_CHECK(strcmp(lg_delta_errmsg(a), lg_delta_errmsg(b)) == 0);
        FUZZ_CHECK(a->in_think == b->in_think && a->saw_tag == b->saw_tag);
        FUZZ_CHECK(a->tag_len == b->tag_len && a->tag_len <= sizeof a->tag);
        FUZZ_CHECK(a->last_ct == b->last_ct && a->has_cont_usage == b->has_cont_usage);
        FUZZ_CHECK(a->bad_events == b->bad_events && a->slow_events == b->slow_events);
        FUZZ_CHECK(a->bad_events <= a->slow_events);
        FUZZ_CHECK(a->usage_prompt == b->usage_prompt);
        FUZZ_CHECK(a->usage_completion == b->usage_completion);
        FUZZ_CHECK(a->usage_reasoning == b->usage_reasoning);
        FUZZ_CHECK(a->api_mark == b->api_mark);
        FUZZ_CHECK(buf_eq(&a->think_text, &b->think_text));
        FUZZ_CHECK(buf_eq(&a->answer_text, &b->answer_text));
        check_outputs(a->out, b->out);
    }
    parse_free(&whole);
    parse_free(&cut);
    return 0;
}
