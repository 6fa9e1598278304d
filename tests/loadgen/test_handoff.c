/* test_handoff.c: every request names itself, and the engine's handoff
 * records split a token's delay into server fan-out and client lag.
 *
 * The real load generator (libcurl) drives the bundled engine over loopback
 * with handoff_sample=3 and the records writer attached to both, as a sweep
 * with a bundled engine does. Read back:
 *   - each request sent "X-Request-Id: loadlaw-<16 hex>-<id>", the same run
 *     tag for all, id = its request record's id (the engine's records say
 *     what the engine received);
 *   - each request has exactly the handoff records of tokens 0, 3, 6, ...
 *     below its token count, each once;
 *   - each handoff's step end is the end of a recorded step;
 *   - causality on one clock: step end <= write <= the token's arrival at
 *     the client (no bound on how long either took: the machine is shared),
 *     the arrival within CLOCK_SLACK_NS: it is the kernel's realtime stamp
 *     put on the run's monotonic clock by an offset read between two
 *     monotonic readings up to 20 us apart (netstamp/include/netstamp.h), and the
 *     engine hands a token to MHD microseconds before it is written;
 *   - every sample has the time its bytes' socket write returned (send_ns,
 *     the engine's send()), not before it was handed to MHD; and since a
 *     loopback packet is stamped by the receiving kernel inside the sender's
 *     write, the token's arrival (that stamp) comes just before send_ns:
 *     the median of send_ns - arrival is in [-CLOCK_SLACK, WIRE_MAX_MS], where
 *     a send_ns taken at a later write would be off by a step (15-24 ms
 *     here: steps that long leave room for a writer the host holds up). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common.h"
#include "engine.h"
#include "loadgen.h"
#include "scenario.h"
#include "tclient.h"
#include "testutil.h"

#define N_REQ 12
#define N_TOK 10
#define SAMPLE 3
#define MAX_HO 256
#define MAX_STEPS 4096
#define CLOCK_SLACK_NS 50000
#define WIRE_MAX_MS 5.0

typedef struct ho {
    char req[LL_REC_HANDOFF_REQ_MAX + 1];
    int tok;
    int64_t step_end_ns, write_ns, send_ns;
} ho;

typedef struct rq {
    uint64_t id;
    int n_chunks;
    int64_t arr[N_TOK]; /* arrival of token i (one token per chunk here) */
    int tokens;
} rq;

typedef struct back {
    ho h[MAX_HO];
    int n_h;
    rq r[N_REQ];
    int n_r;
    int64_t step_end[MAX_STEPS];
    int n_steps;
} back;

static int on_handoff(const ll_rec_handoff *h, void *ctx)
{
    back *b = ctx;
    if (b->n_h < MAX_HO) {
        snprintf(b->h[b->n_h].req, sizeof b->h[b->n_h].req, "%s", h->req);
        b->h[b->n_h].tok = h->tok;
        b->h[b->n_h].step_end_ns = h->step_end_ns;
        b->h[b->n_h].write_ns = h->write_ns;
        b->h[b->n_h].send_ns = h->send_ns;
    }
    b->n_h++;
    return 0;
}

static int on_request(const ll_rec_request *r, void *ctx)
{
    back *b = ctx;
    if (b->n_r < N_REQ) {
        rq *q = &b->r[b->n_r];
        q->id = r->id;
        q->n_chunks = (int)r->n_chunks;
        for (size_t i = 0; i < r->n_chunks; i++) {
            for (int64_t k = 0; k < r->chunks[i].tokens && q->tokens < N_TOK; k++)
                q->arr[q->tokens++] = r->chunks[i].t_ns;
        }
    }
    b->n_r++;
    return 0;
}

static int on_step(const ll_rec_step *s, void *ctx)
{
    back *b = ctx;
    if (b->n_steps < MAX_STEPS)
        b->step_end[b->n_steps++] = s->start_ns + s->dur_ns;
    return 0;
}

int main(void)
{
    char dir[] = "/tmp/test_handoff-XXXXXX", path[256], err[512] = "";
    if (!mkdtemp(dir) || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    eng_config ec;
    eng_engine *eng = NULL;
    scn_scenario *scn = NULL;
    scn_prompts *pr = NULL;
    lg_run *run = NULL;
    ll_rec_writer *rec = NULL;
    eng_config_default(&ec);
    int rc = eng_parse_spec("backend=synthetic,law=4+1n,time_scale=3,handoff_sample=3", &ec, err,
                            sizeof err);
    rc = rc ? rc : eng_start(&ec, &eng, err, sizeof err);
    char json[256];
    snprintf(json, sizeof json,
             "{\"levels\":[{\"concurrency\":4,\"requests\":%d}],\"request\":{\"max_tokens\":%d,"
             "\"ignore_eos\":true}}", N_REQ, N_TOK);
    rc = rc ? rc : scn_load_string(json, "handoff", &scn, err, sizeof err);
    rc = rc ? rc : scn_prompts_load(scn, &pr, err, sizeof err);
    rc = rc ? rc : ll_rec_open(path, 0, &rec, err, sizeof err);
    lg_config lc = {.scn = scn, .prompts = pr, .url = eng ? eng_url(eng) : "", .model = ec.model,
                    .records = rec};
    rc = rc ? rc : lg_run_create(&lc, &run, err, sizeof err);
    if (!rc)
        eng_set_records(eng, rec);
    rc = rc ? rc : lg_run_sweep(run, err, sizeof err);
    CHECK(rc == 0, "sweep: %s", err);
    if (eng)
        eng_set_records(eng, NULL);
    lg_run_free(run);
    CHECK(rec && ll_rec_close(rec) == 0, "records closed");

    static back b;
    ll_rec_handlers h = {.on_handoff = on_handoff, .on_request = on_request, .on_step = on_step};
    ll_rec_read_stats st;
    CHECK(ll_rec_read(path, &h, &b, &st, err, sizeof err) == 0, "read back: %s", err);
    CHECK(st.n_rejected == 0 && st.n_unknown == 0, "no record rejected (%zu) or unknown (%zu)",
          (size_t)st.n_rejected, (size_t)st.n_unknown);
    CHECK(b.n_r == N_REQ, "%d request records", b.n_r);
    const int per_req = (N_TOK + SAMPLE - 1) / SAMPLE; /* tokens 0, 3, 6, 9 */
    CHECK(b.n_h == N_REQ * per_req, "%d handoff records, want %d", b.n_h, N_REQ * per_req);

    /* one run tag for all: "loadlaw-" + 16 hex + "-" */
    char tag[32] = "";
    int bad_name = 0, bad_step = 0, bad_order = 0, unmatched = 0, no_send = 0, send_before = 0;
    double wire[MAX_HO];
    int n_wire = 0;
    for (int i = 0; i < b.n_h && i < MAX_HO; i++) {
        const ho *x = &b.h[i];
        const char *dash = strrchr(x->req, '-');
        if (strncmp(x->req, "loadlaw-", 8) != 0 || !dash || dash - x->req != 8 + 16) {
            bad_name++;
            continue;
        }
        if (!tag[0])
            snprintf(tag, sizeof tag, "%.*s", (int)(dash - x->req), x->req);
        else if (strncmp(tag, x->req, (size_t)(dash - x->req)) != 0)
            bad_name++;
        uint64_t id = strtoull(dash + 1, NULL, 10);
        const rq *q = NULL;
        for (int k = 0; k < b.n_r && k < N_REQ; k++)
            if (b.r[k].id == id)
                q = &b.r[k];
        int on_step_end = 0;
        for (int s = 0; s < b.n_steps; s++)
            on_step_end |= b.step_end[s] == x->step_end_ns;
        bad_step += !on_step_end;
        if (!q || x->tok % SAMPLE != 0 || x->tok >= q->tokens) {
            unmatched++;
            continue;
        }
        if (!(x->step_end_ns <= x->write_ns && x->write_ns <= q->arr[x->tok] + CLOCK_SLACK_NS)) {
            if (bad_order++ == 0)
                fprintf(stderr, "%s tok %d: step end %" PRId64 ", write %" PRId64 ", arrival %" PRId64 "\n",
                        x->req, x->tok, x->step_end_ns, x->write_ns, q->arr[x->tok]);
        }
        if (x->send_ns < 0) {
            no_send++;
            continue;
        }
        send_before += x->send_ns < x->write_ns;
        wire[n_wire++] = (double)(x->send_ns - q->arr[x->tok]) / 1e6;
    }
    CHECK(no_send == 0, "%d handoff records without send_ns", no_send);
    CHECK(send_before == 0, "%d handoffs sent before they were handed to MHD", send_before);
    if (n_wire > 0) {
        ll_sort_doubles(wire, (size_t)n_wire);
        double med = wire[n_wire / 2];
        CHECK(med >= -CLOCK_SLACK_NS / 1e6 && med <= WIRE_MAX_MS,
              "send_ns - arrival: median %.3f ms over %d samples (want [-%.3f, %.0f ms])", med, n_wire,
              CLOCK_SLACK_NS / 1e6, WIRE_MAX_MS);
        printf("send_ns - kernel arrival stamp: median %.4f ms, min %.4f, max %.4f (%d samples)\n", med,
               wire[0], wire[n_wire - 1], n_wire);
    }
    CHECK(bad_name == 0, "%d handoff records without one loadlaw-<tag>-<id> name", bad_name);
    CHECK(unmatched == 0, "%d handoff records name no request record or a token not sampled",
          unmatched);
    CHECK(bad_step == 0, "%d handoff records whose step end is no recorded step's end", bad_step);
    CHECK(bad_order == 0, "%d handoffs out of order (step end <= write <= arrival + %d us)", bad_order,
          CLOCK_SLACK_NS / 1000);
    /* each request: its sampled tokens, each once */
    int dup_or_missing = 0;
    for (int k = 0; k < b.n_r && k < N_REQ; k++) {
        char want[80];
        snprintf(want, sizeof want, "%s-%" PRIu64, tag, b.r[k].id);
        for (int t = 0; t < N_TOK; t += SAMPLE) {
            int n = 0;
            for (int i = 0; i < b.n_h && i < MAX_HO; i++)
                n += strcmp(b.h[i].req, want) == 0 && b.h[i].tok == t;
            dup_or_missing += n != 1;
        }
    }
    CHECK(dup_or_missing == 0, "%d (request, sampled token) pairs without exactly one record",
          dup_or_missing);

    /* /metrics counts what was not recorded: nothing while the writer was
     * attached; a stream after the detach drops its samples (tokens 0, 3). */
    if (eng) {
        char url[256], body[160];
        tc_resp m, r;
        snprintf(url, sizeof url, "%s/metrics", eng_url(eng));
        tc_request("GET", url, NULL, -1, &m);
        CHECK(tc_metric(m.body.p, "loadlaw_handoff_dropped_total") == 0,
              "no sample dropped while recording (%g)", tc_metric(m.body.p, "loadlaw_handoff_dropped_total"));
        tc_resp_free(&m);
        snprintf(url, sizeof url, "%s/v1/completions", eng_url(eng));
        snprintf(body, sizeof body, "{\"prompt\":\"a b\",\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true}");
        CHECK(tc_request("POST", url, body, -1, &r) == 0 && r.status == 200, "a stream after the detach");
        tc_resp_free(&r);
        snprintf(url, sizeof url, "%s/metrics", eng_url(eng));
        tc_request("GET", url, NULL, -1, &m);
        CHECK(tc_metric(m.body.p, "loadlaw_handoff_dropped_total") == 2,
              "its 2 samples counted as dropped (%g)", tc_metric(m.body.p, "loadlaw_handoff_dropped_total"));
        tc_resp_free(&m);
        eng_stop(eng);
    }
    scn_prompts_free(pr);
    scn_free(scn);
    if (tu_fail == 0) {
        unlink(path);
        rmdir(dir);
    } else {
        fprintf(stderr, "records kept: %s\n", path);
    }
    curl_global_cleanup();
    TEST_MAIN_END();
}
