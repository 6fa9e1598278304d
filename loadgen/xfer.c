/* xfer.c: one streaming request's life: start it (its id, prompt head and
 * body, xfer_body.c; its easy handle, xfer_recv.c), and when it ends classify
 * it and hand it to the records writer (xfer_record.c), or resend it once
 * without continuous_usage_stats after a 400 naming that field (which then
 * stays off for the run). lg_xfer_done is the one place a finished transfer
 * is counted, unlinked and freed.
 *
 * Nothing here formats JSON for the records or touches the records file:
 * lg_xfer_done fills an ll_rec_request and queues it (common/records.h). */
#include "lg_internal.h"

#include "api.h"
#include "outputs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The head of a fresh prompt: the request's id, then this run's tag, e.g.
 * "[17-7f3a9c21] " (the id first: what differs comes before what a run's
 * requests share). A prefix cache matches from a prompt's first token, so
 * a head no earlier request had makes the whole prompt a miss: TTFT then
 * measures prefill, whatever ran on the server before, and two identical
 * runs agree. A few tokens long; a tokenizer counts them into the target.
 * A run that records outputs for an A/B compares the same prompts on both
 * sides: its head names the prompt set's seed instead of the run ("[17-s1] "),
 * the same in A and B and still unique within each (a second run against
 * the same server may then meet its own prompts in the cache). */
static void fresh_head(const lg_run *r, uint64_t id, char *out, size_t n)
{
    if (r->scn->record_outputs)
        snprintf(out, n, "[%" PRIu64 "-s%" PRIu64 "] ", id, r->scn->seed);
    else
        snprintf(out, n, "[%" PRIu64 "-%.8s] ", id, r->run_tag);
}

int lg_run_prompt_head(void *run, size_t i, char *out, size_t size)
{
    const lg_run *r = run;
    out[0] = '\0';
    if (r->scn->trace || r->scn->session_turns > 0 || i % (size_t)r->ranks != (size_t)r->rank)
        return 0;
    if (!r->scn->prompts_reuse) /* a fresh prompt's index is its first request's id */
        fresh_head(r, (uint64_t)i, out, size);
    return 1;
}

size_t lg_run_prompts_sent(const lg_run *r)
{
    size_t sum = 0, most = 0;
    for (size_t l = 0; l < r->scn->n_levels; l++) {
        const scn_level *L = &r->scn->levels[l];
        size_t n = (size_t)L->n_requests + (size_t)(L->warmup > 0 ? L->warmup : 0);
        if (L->duration_s > 0)
            return SIZE_MAX;
        sum += n;
        most = n > most ? n : most;
    }
    return r->scn->prompts_reuse ? most : sum;
}

int lg_xfer_start(lg_worker *w, int req_index, int64_t intended_ns, lg_sess *sess)
{
    lg_run *r = w->run;
    lg_xfer *x = calloc(1, sizeof *x);
    int rc;
    if (!x)
        return LL_ENOMEM;
    x->w = w;
    x->req_index = req_index;
    x->sess = sess;
    x->warmup = req_index < w->lvl->warmup;
    /* unique across ranks: rank r takes r, r+K, r+2K, ... */
    x->id = atomic_fetch_add(&r->next_id, 1) * (uint64_t)r->ranks + (uint64_t)r->rank;
    /* Fresh prompts: the run's n-th request takes the set's n-th prompt
     * (mod its size), behind a head no other request of any run has; a
     * scenario that reuses prompts starts each level at the set's first. */
    if (r->scn->prompts_reuse || sess) {
        /* a conversation's turns carry its own head (session.c) */
        x->prompt_index = (size_t)req_index * (size_t)r->ranks + (size_t)r->rank;
        x->head[0] = '\0';
    } else if (r->scn->trace) {
        /* a trace's request k is row k, sent at its time (worker.c) */
        x->prompt_index = (size_t)req_index * (size_t)r->ranks + (size_t)r->rank;
        fresh_head(r, x->id, x->head, sizeof x->head);
    } else {
        x->prompt_index = (size_t)x->id;
        fresh_head(r, x->id, x->head, sizeof x->head);
    }
    x->intended_ns = intended_ns;
    /* Every request names itself (vLLM and others log X-Request-Id; the
     * bundled engine's handoff records carry it): unique across runs and
     * ranks, so two clients on one server never collide. */
    snprintf(x->rid_line, sizeof x->rid_line, "X-Request-Id: loadlaw-%s-%" PRIu64, r->run_tag, x->id);
    x->rid_hdr.data = x->rid_line;
    x->rid_hdr.next = w->headers;
    x->header_ns = x->first_tok_ns = x->first_think_ns = x->first_answer_ns = x->end_ns = -1;
    x->fd = -1;
    x->empty_ns = x->read_ns = x->counted_ns = -1;
    lg_xfer_init_parsers(x);
    LL_TRY(lg_xfer_build_body(x));
    if (x->delta.out) /* outputs recorded: the prompt as sent, for check-decode */
        lg_out_prompt(x->delta.out, x->body.p, x->body.len, r->api->prompt_key);
    LL_TRY((x->easy = curl_easy_init()) ? 0 : LL_ENOMEM);
    LL_TRY(lg_xfer_setup_easy(x));
    x->send_ns = ll_now_ns();
    LL_TRY(curl_multi_add_handle(w->multi, x->easy) == CURLM_OK ? 0 : LL_EIO);
    x->next = w->head;
    if (w->head)
        w->head->prev = x;
    w->head = x;
    w->inflight++;
    atomic_fetch_add(&r->inflight, 1);
    return 0;
fail:
    if (x->easy)
        curl_easy_cleanup(x->easy);
    ll_buf_free(&x->body);
    lg_sse_free(&x->sse);
    lg_delta_free(&x->delta);
    free(x);
    return rc;
}

/* A 400 whose message names continuous_usage_stats (or stream_options):
 * strict OpenAI-compatible servers reject the field. Turn it off for the run
 * (said once) and send this request again without it, under the same id. */
static int retry_without_cont_usage(lg_xfer *x, const char *msg)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    int rc;
    if (x->http_status != 400 || !x->sent_cont_usage || x->retried || x->aborted ||
        (!strstr(msg, "continuous_usage_stats") && !strstr(msg, "stream_options")))
        return LL_EINVAL;
    if (atomic_exchange(&r->no_cont_usage, 1) == 0)
        fprintf(stderr, "loadlaw: the server rejected stream_options.continuous_usage_stats (\"%.200s\"); "
                        "not asking for it for the rest of the run (token counts come from the final usage)\n",
                msg);
    LL_TRY(curl_multi_remove_handle(w->multi, x->easy) == CURLM_OK ? 0 : LL_EIO);
    x->retried = 1;
    ll_buf_reset(&x->errbody);
    lg_sse_free(&x->sse);
    lg_delta_free(&x->delta);
    lg_xfer_init_parsers(x);
    x->chunks.n = x->chunk_bytes.n = 0;
    x->think_tok = x->answer_tok = 0;
    x->header_ns = x->first_tok_ns = x->first_think_ns = x->first_answer_ns = x->end_ns = -1;
    x->fd = -1; /* curl may send the retry on another connection */
    x->empty_ns = x->read_ns = x->counted_ns = -1;
    x->http_status = 0;
    x->status_known = 0;
    x->curl_err[0] = '\0';
    LL_TRY(lg_xfer_build_body(x));
    LL_TRY(curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body.p) ||
                   curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body.len)
               ? LL_EINVAL
               : 0);
    x->send_ns = ll_now_ns();
    LL_TRY(curl_multi_add_handle(w->multi, x->easy) == CURLM_OK ? 0 : LL_EIO);
fail:
    return rc;
}

/* Counters for level_end, lg_run_counts and the progress line. */
static void count_finished(lg_xfer *x, ll_err_class cls)
{
    lg_worker *w = x->w;
    lg_run *r = w->run;
    if (!x->warmup) {
        if (cls == LL_ERRC_OK)
            w->n_ok++;
        else
            w->n_failed++;
        atomic_fetch_add(cls == LL_ERRC_OK ? &r->total_ok : &r->total_failed, 1);
    }
    atomic_fetch_add(&r->done, 1);
    atomic_fetch_add(&r->tokens, x->think_tok + x->answer_tok);
    if (cls != LL_ERRC_OK)
        atomic_fetch_add(&r->errors, 1);
    if (x->first_tok_ns >= 0)
        atomic_fetch_sub(&r->decoding, 1);
    atomic_fetch_sub(&r->inflight, 1);
    if (atomic_load(&r->watch))
        lg_run_notify(r);
}

static void unlink_and_free(lg_xfer *x)
{
    lg_worker *w = x->w;
    if (x->prev)
        x->prev->next = x->next;
    else
        w->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    w->inflight--;
    if (curl_multi_remove_handle(w->multi, x->easy) != CURLM_OK)
        ll_warn("curl_multi_remove_handle failed for request %llu", (unsigned long long)x->id);
    curl_easy_cleanup(x->easy);
    ll_buf_free(&x->body);
    ll_buf_free(&x->errbody);
    lg_sse_free(&x->sse);
    lg_delta_free(&x->delta);
    ll_vec_free(&x->chunks);
    ll_vec_free(&x->chunk_bytes);
    free(x);
}

/* When the response ended: the arrival stamp of its last bytes (the kernel's,
 * like the header's and every chunk's, xfer_recv.c arrival_ns) when it ended
 * well, so a worker that is late to notice the end (a busy or descheduled
 * thread, a stopped process) does not stretch E2E by its lateness; else now,
 * when the client saw it fail or gave up. */
static int64_t end_stamp(const lg_xfer *x, CURLcode res)
{
    int64_t last = x->now_ns > x->header_ns ? x->now_ns : x->header_ns;
    return res == CURLE_OK && last >= x->send_ns && x->header_ns >= 0 ? last : ll_now_ns();
}

void lg_xfer_done(lg_xfer *x, CURLcode res)
{
    lg_worker *w = x->w;
    char msg[512];
    ll_rec_request rq;
    x->end_ns = end_stamp(x, res);
    if (!x->status_known && curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->http_status) != CURLE_OK)
        x->http_status = 0;
    if (x->http_status == 200)
        lg_sse_finish(&x->sse);
    ll_err_class cls = lg_xfer_classify(x, res, msg, sizeof msg);
    if (cls == LL_ERRC_HTTP_4XX && x->http_status == 400 && x->sent_cont_usage && !x->retried) {
        long status = x->http_status;
        int rrc = retry_without_cont_usage(x, msg);
        if (rrc == 0)
            return; /* in flight again; recorded when the retry ends */
        if (rrc != LL_EINVAL) {
            /* The resend failed part-way: record the 400 as it was. */
            x->http_status = status;
            x->status_known = 1;
            x->end_ns = ll_now_ns();
        }
    }
    lg_worker_connect_result(w, x, cls);
    int64_t st_think, st_answer;
    ll_counts counts = lg_xfer_reconcile(x, &st_think, &st_answer);
    lg_xfer_fill_record(x, cls, msg, counts, st_think, st_answer, &rq);
    int prc = ll_rec_put_request(w->run->rec, &rq);
    if (prc && w->rc == 0) {
        w->rc = prc;
        snprintf(w->err, sizeof w->err, "queueing a request record: %s", ll_strerror(prc));
    }
    if (x->sess)
        lg_sess_end(w, x->sess, &x->delta.answer_text, cls == LL_ERRC_OK, ll_now_ns());
    count_finished(x, cls);
    unlink_and_free(x);
}
