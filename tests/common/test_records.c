/* test_records.c: the records module (common/records.h): every record type
 * through the writer and back through the reader with exact values, the
 * writer's drain/close and write-error semantics, many producer threads
 * (no line lost, none interleaved), and hostile files for the reader. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "testutil.h"

static char g_dir[256];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) < 0;
    return fclose(f) != 0 || bad ? -1 : 0;
}

/* ---- round trip ----------------------------------------------------------------- */

typedef struct got {
    int runs, levels, level_ends, requests, steps, profiles, others;
    ll_rec_run run;
    char version[32], url[64], model[32], endpoint[16], engine[128], backend[16], scenario[64];
    int config_seed;
    ll_rec_level lv[2];
    ll_rec_level_end le;
    ll_rec_request rq[2];
    char rq_error[2][128];
    ll_rec_chunk chunks[2][8];
    ll_rec_step st;
    ll_rec_profile pr;
    char pr_style[16], pr_detail[128], other_type[32];
} got;

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : "(null)"); }

static int on_run(const ll_rec_run *run, void *ctx)
{
    got *g = ctx;
    g->runs++;
    g->run = *run;
    copy_str(g->version, sizeof g->version, run->version);
    copy_str(g->url, sizeof g->url, run->url);
    copy_str(g->model, sizeof g->model, run->model);
    copy_str(g->endpoint, sizeof g->endpoint, run->endpoint);
    copy_str(g->engine, sizeof g->engine, run->engine);
    copy_str(g->backend, sizeof g->backend, run->backend);
    copy_str(g->scenario, sizeof g->scenario, run->scenario);
    g->config_seed = (int)ll_json_i64(run->config, "seed", -1);
    return 0;
}

static int on_level(const ll_rec_level *lv, void *ctx)
{
    got *g = ctx;
    if (g->levels < 2)
        g->lv[g->levels] = *lv;
    g->levels++;
    return 0;
}

static int on_level_end(const ll_rec_level_end *le, void *ctx)
{
    got *g = ctx;
    g->level_ends++;
    g->le = *le;
    return 0;
}

static int on_request(const ll_rec_request *rq, void *ctx)
{
    got *g = ctx;
    if (g->requests < 2) {
        int i = g->requests;
        g->rq[i] = *rq;
        copy_str(g->rq_error[i], sizeof g->rq_error[i], rq->error);
        for (size_t k = 0; k < rq->n_chunks && k < 8; k++)
            g->chunks[i][k] = rq->chunks[k];
    }
    g->requests++;
    return 0;
}

static int on_step(const ll_rec_step *st, void *ctx)
{
    got *g = ctx;
    g->steps++;
    g->st = *st;
    return 0;
}

static int on_profile(const ll_rec_profile *pr, void *ctx)
{
    got *g = ctx;
    g->profiles++;
    g->pr = *pr;
    copy_str(g->pr_style, sizeof g->pr_style, pr->style);
    copy_str(g->pr_detail, sizeof g->pr_detail, pr->detail);
    return 0;
}

static int on_other(const cJSON *obj, const char *type, void *ctx)
{
    got *g = ctx;
    g->others++;
    copy_str(g->other_type, sizeof g->other_type, type);
    (void)obj;
    return 0;
}

static const ll_rec_handlers all_handlers = {.on_run = on_run, .on_level = on_level, .on_level_end = on_level_end,
                                             .on_request = on_request, .on_step = on_step,
                                             .on_profile = on_profile, .on_other = on_other};

static void test_round_trip(void)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "round.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    cJSON *config = cJSON_CreateObject();
    cJSON_AddNumberToObject(config, "seed", 42);
    ll_rec_run run = {.host = "box", .ranks = 1, .threads = 3, .url = "http://127.0.0.1:1", .model = "m",
                      .endpoint = "chat", .bundled = 1, .engine = "backend=synthetic,law=52+30n,time_scale=0.05",
                      .backend = "synthetic", .law = {1, 2.6, 1.5, 0.25, 0.125, 0.05}, .scenario = "s.json",
                      .config = config};
    CHECK(ll_rec_put_run(w, &run) == 0, "put run");
    cJSON_Delete(config); /* copied by the put */
    ll_rec_level closed = {0, 8, 0, 0, 0, 12, 2, 1000, 0, -1, -1, -1, NULL, {0}};
    ll_rec_level open = {1, 0, 1, 20.5, 1, 100, 0, 950000000, 0, -1, -1, -1, NULL, {0}};
    /* what was done to the prefix cache before it; a server's words escaped */
    open.cache = (ll_rec_cache){.present = 1, .asked = "auto", .action_reset = 1, .done = 1, .status = 200,
                                .how = "POST /reset_prefix_cache", .server = "vllm", .note = "{\"success\":true}"};
    CHECK(ll_rec_put_level(w, &closed) == 0 && ll_rec_put_level(w, &open) == 0, "put levels");
    ll_rec_chunk *ch = malloc(3 * sizeof *ch);
    ch[0] = (ll_rec_chunk){52000000, 1, LL_CHUNK_THINK};
    ch[1] = (ll_rec_chunk){INT64_C(4000000000000), 2, LL_CHUNK_ANSWER};
    ch[2] = (ll_rec_chunk){INT64_C(4000000000000), 5, LL_CHUNK_ANSWER};
    ll_rec_request ok = {.level = 0, .rank = 0, .id = 17, .warmup = 0, .cls = LL_ERRC_OK, .http_status = 200,
                         .intended_ns = -1, .send_ns = 1000, .header_ns = 2000, .first_token_ns = 52000000,
                         .first_think_ns = 52000000, .first_answer_ns = INT64_C(4000000000000),
                         .end_ns = INT64_C(4000000000001), .prompt_tok = 120, .think_tok = 1, .answer_tok = 7,
                         .usage_prompt = 120, .usage_completion = 8, .usage_reasoning = 1, .n_chunks = 3,
                         .chunks = ch, .cached_tok = 96, .finish = "length", .srv = ll_rec_srv_timing_none()};
    ok.srv.present = 1;
    ok.srv.prompt_ms = 12.5;
    ok.srv.decode_ms = 700;
    ok.srv.tpot_ms = 100;
    ok.srv.prompt_n = 24;
    ok.srv.decode_n = 7;
    CHECK(ll_rec_put_request(w, &ok) == 0 && ok.chunks == NULL, "put request (chunks taken)");
    /* A message with a quote, a newline and a byte that is not UTF-8. */
    ll_rec_request bad = {.level = 1, .rank = 2, .id = 18, .warmup = 1, .cls = LL_ERRC_STREAM, .http_status = 0,
                          .error = strdup("KV \"cache\"\nfull \xff"), .intended_ns = 5, .send_ns = 6,
                          .header_ns = -1, .first_token_ns = -1, .first_think_ns = -1, .first_answer_ns = -1,
                          .end_ns = 9, .prompt_tok = 3, .usage_prompt = -1, .usage_completion = -1,
                          .usage_reasoning = -1, .cached_tok = -1};
    CHECK(ll_rec_put_request(w, &bad) == 0 && bad.error == NULL, "put failed request (error taken)");
    ll_rec_level_end le = {.level = 1, .end_ns = 1200000000, .interrupted = 1, .ok = 12, .failed = 3};
    ll_rec_step st = {5000, 2650000, 8, 9, 17, 4096, 0};
    ll_rec_profile pr = {.level = 1, .t_ns = 4100000000, .num_steps = 12, .style = "sglang", .http_status = 200,
                         .ok = 1, .detail = "{\"path\":\"/tmp/t.json\"}"};
    CHECK(ll_rec_put_level_end(w, &le) == 0 && ll_rec_put_step(w, &st) == 0 && ll_rec_put_profile(w, &pr) == 0,
          "put level_end, step, profile");
    cJSON *tel = cJSON_CreateObject();
    cJSON_AddStringToObject(tel, "type", "telemetry");
    CHECK(ll_rec_put_json(w, tel) == 0, "put other");
    CHECK(ll_rec_drain(w, 0) == 0 && ll_rec_written(w) == 9, "drain: %llu written",
          (unsigned long long)ll_rec_written(w));
    CHECK(ll_rec_close(w) == 0, "close");

    /* The request line, byte for byte as docs/records.md shows it. */
    char *text = NULL;
    size_t len;
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "read back: %s", err);
    if (text) {
        CHECK(strstr(text, "{\"type\":\"request\",\"level\":0,\"rank\":0,\"id\":17,\"warmup\":false,\"status\":\"ok\","
                           "\"error_class\":null,\"http_status\":200,\"error\":null,\"intended_ns\":null,"
                           "\"send_ns\":1000,\"header_ns\":2000,\"first_token_ns\":52000000,"
                           "\"first_think_ns\":52000000,\"first_answer_ns\":4000000000000,"
                           "\"end_ns\":4000000000001,\"prompt_tok\":120,\"think_tok\":1,\"answer_tok\":7,"
                           "\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":8,\"reasoning_tokens\":1},"
                           "\"cached_tok\":96,\"finish\":\"length\",\"server\":{\"prompt_ms\":12.5,\"decode_ms\":700,"
                           "\"tpot_ms\":100,\"prompt_n\":24,\"decode_n\":7},"
                           "\"chunks_packed\":\"gaiXYwOB2Kzv09EDBAEK\"}\n") != NULL,
              "request line shape");
        CHECK(strstr(text, "\"error_class\":\"stream_error\",\"http_status\":null,"
                           "\"error\":\"KV \\\"cache\\\"\\nfull \\ufffd\"") != NULL,
              "failed request: class, null status, escaped message");
        CHECK(strstr(text, "{\"type\":\"level\",\"level\":0,\"concurrency\":8,\"mode\":\"closed\",\"rate_per_s\":null,"
                           "\"n_requests\":12,\"warmup\":2,\"start_ns\":1000}\n") != NULL,
              "closed level line");
        CHECK(strstr(text, "\"mode\":\"open\",\"rate_per_s\":20.5,\"arrival\":\"poisson\"") != NULL, "open level line");
        CHECK(strstr(text, "\"start_ns\":950000000,\"cache\":{\"asked\":\"auto\",\"action\":\"reset\",\"done\":true,"
                           "\"status\":200,\"how\":\"POST /reset_prefix_cache\",\"server\":\"vllm\","
                           "\"note\":\"{\\\"success\\\":true}\"}}\n") != NULL,
              "level line's cache");
        CHECK(strstr(text, "{\"type\":\"level_end\",\"level\":1,\"end_ns\":1200000000,\"interrupted\":true,"
                           "\"ok\":12,\"failed\":3}\n") != NULL,
              "level_end line");
        CHECK(strstr(text, "{\"type\":\"step\",\"start_ns\":5000,\"dur_ns\":2650000,\"n_decode\":8,\"n_running\":9,"
                           "\"prefill_tok\":17,\"ctx_tok\":4096}\n") != NULL,
              "step line");
        CHECK(strstr(text, "\"engine\":\"backend=synthetic,law=52+30n,time_scale=0.05\",\"backend\":\"synthetic\","
                           "\"engine_law\":{\"a_ms\":2.6,\"b_ms\":1.5,\"c_ms_per_ktok\":0.25,\"p_ms_per_tok\":0.125,"
                           "\"time_scale\":0.05}") != NULL,
              "run line engine, backend, engine_law");
            const char *head = "{\"type\":\"run\",\"schema\":1,\"tool\":\"loadlaw\"";
        CHECK(strncmp(text, head, strlen(head)) == 0, "run line first: %.60s", text);
        free(text);
    }

    got g;
    ll_rec_read_stats rs;
    memset(&g, 0, sizeof g);
    CHECK(ll_rec_read(path, &all_handlers, &g, &rs, err, sizeof err) == 0, "read: %s", err);
    CHECK(g.runs == 1 && g.levels == 2 && g.level_ends == 1 && g.requests == 2 && g.steps == 1 && g.profiles == 1 &&
              g.others == 1,
          "record counts %d %d %d %d %d %d %d", g.runs, g.levels, g.level_ends, g.requests, g.steps, g.profiles,
          g.others);
    CHECK(rs.n_lines == 9 && rs.n_truncated == 0 && rs.n_unknown == 1 && rs.n_rejected == 0 &&
              rs.n_out_of_range == 0,
          "stats lines %zu trunc %zu unknown %zu rejected %zu oor %zu", rs.n_lines, rs.n_truncated, rs.n_unknown,
          rs.n_rejected, rs.n_out_of_range);
    CHECK(g.run.schema == LL_RECORDS_SCHEMA && g.run.ranks == 1 && g.run.threads == 3 && g.run.bundled == 1 &&
              g.run.epoch_wall_ns > 0,
          "run numbers");
    CHECK(strcmp(g.version, LOADLAW_VERSION) == 0 && strcmp(g.url, "http://127.0.0.1:1") == 0 &&
              strcmp(g.model, "m") == 0 && strcmp(g.endpoint, "chat") == 0 &&
              strcmp(g.engine, "backend=synthetic,law=52+30n,time_scale=0.05") == 0 &&
              strcmp(g.backend, "synthetic") == 0 && strcmp(g.scenario, "s.json") == 0 && g.config_seed == 42,
          "run strings");
    CHECK(g.run.law.present && g.run.law.a_ms == 2.6 && g.run.law.b_ms == 1.5 && g.run.law.c_ms_per_ktok == 0.25 &&
              g.run.law.p_ms_per_tok == 0.125 && g.run.law.time_scale == 0.05,
          "run law");
    CHECK(g.lv[0].level == 0 && g.lv[0].concurrency == 8 && !g.lv[0].open_loop && g.lv[0].rate_per_s == 0 &&
              g.lv[0].n_requests == 12 && g.lv[0].warmup == 2 && g.lv[0].start_ns == 1000,
          "closed level exact");
    CHECK(g.lv[1].level == 1 && g.lv[1].open_loop == 1 && g.lv[1].rate_per_s == 20.5 && g.lv[1].poisson == 1 &&
              g.lv[1].n_requests == 100 && g.lv[1].start_ns == 950000000 && g.lv[1].cache.present &&
              g.lv[1].cache.action_reset && g.lv[1].cache.done && g.lv[1].cache.status == 200 &&
              !g.lv[0].cache.present,
          "open level exact");
    CHECK(g.le.level == 1 && g.le.end_ns == 1200000000 && g.le.interrupted == 1 && g.le.ok == 12 && g.le.failed == 3,
          "level_end exact");
    CHECK(g.st.start_ns == 5000 && g.st.dur_ns == 2650000 && g.st.n_decode == 8 && g.st.n_running == 9 &&
              g.st.prefill_tok == 17 && g.st.ctx_tok == 4096,
          "step exact");
    CHECK(g.pr.level == 1 && g.pr.t_ns == 4100000000 && g.pr.num_steps == 12 && g.pr.http_status == 200 &&
              g.pr.ok == 1 && strcmp(g.pr_style, "sglang") == 0 &&
              strcmp(g.pr_detail, "{\"path\":\"/tmp/t.json\"}") == 0,
          "profile exact");
    CHECK(strcmp(g.other_type, "telemetry") == 0, "other type");
    const ll_rec_request *a = &g.rq[0], *b = &g.rq[1];
    CHECK(a->level == 0 && a->id == 17 && !a->warmup && a->cls == LL_ERRC_OK && a->http_status == 200 &&
              a->intended_ns == -1 && a->send_ns == 1000 && a->header_ns == 2000 && a->first_token_ns == 52000000 &&
              a->first_think_ns == 52000000 && a->first_answer_ns == INT64_C(4000000000000) &&
              a->end_ns == INT64_C(4000000000001) && a->prompt_tok == 120 && a->think_tok == 1 &&
              a->answer_tok == 7 && a->usage_prompt == 120 && a->usage_completion == 8 && a->usage_reasoning == 1 &&
              a->n_chunks == 3 && strcmp(g.rq_error[0], "(null)") == 0,
          "ok request exact");
    CHECK(a->cached_tok == 96 && strcmp(a->finish, "length") == 0 && a->srv.present && a->srv.prompt_ms == 12.5 &&
              a->srv.decode_ms == 700 && a->srv.tpot_ms == 100 && a->srv.prompt_n == 24 && a->srv.decode_n == 7 &&
              isnan(a->srv.ttft_ms) && isnan(a->srv.queue_ms),
          "ok request: cached tokens, finish, the server's timing");
    CHECK(b->cached_tok == -1 && b->finish[0] == '\0' && !b->srv.present, "failed request: none of them");
    CHECK(g.chunks[0][0].t_ns == 52000000 && g.chunks[0][0].tokens == 1 && g.chunks[0][0].kind == 't' &&
              g.chunks[0][1].t_ns == INT64_C(4000000000000) && g.chunks[0][1].tokens == 2 &&
              g.chunks[0][1].kind == 'a' && g.chunks[0][2].tokens == 5,
          "chunks exact");
    CHECK(b->level == 1 && b->rank == 2 && b->id == 18 && b->warmup && b->cls == LL_ERRC_STREAM &&
              b->http_status == 0 && b->intended_ns == 5 && b->send_ns == 6 && b->header_ns == -1 &&
              b->first_token_ns == -1 && b->first_answer_ns == -1 && b->end_ns == 9 && b->usage_completion == -1 &&
              b->usage_prompt == -1 && b->n_chunks == 0 &&
              strcmp(g.rq_error[1], "KV \"cache\"\nfull \xef\xbf\xbd") == 0,
          "failed request exact (error '%s')", g.rq_error[1]);
}

/* ---- a K-rank run: clock records and lines formatted elsewhere ----------------------- */

typedef struct clocks {
    int n_clock, n_request;
    ll_rec_clock ck;
    uint64_t ids[4];
    int ranks[4];
} clocks;

static int on_clock_rec(const ll_rec_clock *ck, void *ctx)
{
    clocks *c = ctx;
    c->n_clock++;
    c->ck = *ck;
    return 0;
}

static int on_request_rank(const ll_rec_request *rq, void *ctx)
{
    clocks *c = ctx;
    if (c->n_request < 4) {
        c->ids[c->n_request] = rq->id;
        c->ranks[c->n_request] = rq->rank;
    }
    c->n_request++;
    return 0;
}

static void test_clock_and_lines(void)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "ranks.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.ranks = 2, .threads = 1, .url = "http://127.0.0.1:1", .model = "m", .endpoint = "chat"};
    /* a rank's clock behind rank 0's: the offset is negative, and exact */
    ll_rec_clock ck = {.level = 3, .rank = 1, .offset_ns = -123456789012, .rtt_ns = 4321, .samples = 64,
                       .start_ns = 777};
    /* two request lines as another rank's writer formats them (whole lines) */
    static const char lines[] =
        "{\"type\":\"request\",\"level\":3,\"rank\":1,\"id\":5,\"warmup\":false,\"status\":\"ok\","
        "\"send_ns\":10,\"end_ns\":20,\"chunks\":[]}\n"
        "{\"type\":\"request\",\"level\":3,\"rank\":1,\"id\":7,\"warmup\":false,\"status\":\"ok\","
        "\"send_ns\":11,\"end_ns\":21,\"chunks\":[]}\n";
    CHECK(ll_rec_put_run(w, &run) == 0 && ll_rec_put_clock(w, &ck) == 0, "put run, clock");
    CHECK(ll_rec_put_lines(w, lines, sizeof lines - 1) == 0, "put lines");
    CHECK(ll_rec_put_lines(w, "{\"type\":\"request\"}", 18) == LL_EINVAL, "a piece without its newline is refused");
    CHECK(ll_rec_put_lines(w, "", 0) == 0, "nothing to put");
    CHECK(ll_rec_drain(w, 0) == 0 && ll_rec_written(w) == 4, "written %llu lines, want 4",
          (unsigned long long)ll_rec_written(w));
    CHECK(ll_rec_close(w) == 0, "close");
    clocks c = {0};
    ll_rec_read_stats rs;
    ll_rec_handlers h = {.on_clock = on_clock_rec, .on_request = on_request_rank};
    CHECK(ll_rec_read(path, &h, &c, &rs, err, sizeof err) == 0, "read: %s", err);
    CHECK(c.n_clock == 1 && c.ck.level == 3 && c.ck.rank == 1 && c.ck.offset_ns == -123456789012 &&
              c.ck.rtt_ns == 4321 && c.ck.samples == 64 && c.ck.start_ns == 777,
          "clock exact (offset %lld)", (long long)c.ck.offset_ns);
    CHECK(c.n_request == 2 && c.ids[0] == 5 && c.ids[1] == 7 && c.ranks[0] == 1, "the rank's lines read as requests");
    CHECK(rs.n_lines == 4 && rs.n_unknown == 0 && rs.n_rejected == 0, "stats lines %zu unknown %zu rejected %zu",
          rs.n_lines, rs.n_unknown, rs.n_rejected);
}

/* ---- drain, close, write errors ----------------------------------------------------- */

static void test_drain_close(void)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "drain.jsonl");
    /* A queue of 2: producers wait for the writer, nothing is dropped. */
    CHECK(ll_rec_open(path, 2, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.url = "u", .model = "m", .endpoint = "chat"};
    int rc = ll_rec_put_run(w, &run);
    for (int i = 0; i < 500 && rc == 0; i++) {
        ll_rec_step st = {i, 1, 1, 1, 0, 0, 0};
        rc = ll_rec_put_step(w, &st);
    }
    CHECK(rc == 0, "500 puts through a queue of 2");
    CHECK(ll_rec_drain(w, 5000000000) == 0, "bounded drain");
    CHECK(ll_rec_written(w) == 501, "all on disk after drain: %llu", (unsigned long long)ll_rec_written(w));
    /* Drained means flushed: another reader sees every line now. */
    got g;
    memset(&g, 0, sizeof g);
    CHECK(ll_rec_read(path, &all_handlers, &g, NULL, err, sizeof err) == 0 && g.steps == 500,
          "read while open: %d steps (%s)", g.steps, err);
    CHECK(ll_rec_drain(w, 0) == 0, "drain with nothing queued");
    CHECK(ll_rec_close(w) == 0, "close");
    CHECK(ll_rec_close(NULL) == 0, "close NULL");

    /* A write error is kept: later puts and the drain say LL_EIO, close reports it. */
    if (access("/dev/full", W_OK) == 0) {
        CHECK(ll_rec_open("/dev/full", 0, &w, err, sizeof err) == 0, "open /dev/full: %s", err);
        if (w) {
            CHECK(ll_rec_put_run(w, &run) == 0, "first put queued");
            CHECK(ll_rec_drain(w, 0) == LL_EIO, "drain reports the write error");
            ll_rec_request rq = {.chunks = malloc(sizeof(ll_rec_chunk)), .n_chunks = 1, .error = strdup("x")};
            CHECK(ll_rec_put_request(w, &rq) == LL_EIO && rq.chunks == NULL && rq.error == NULL,
                  "put after failure: LL_EIO, chunks still taken (freed)");
            CHECK(ll_rec_written(w) == 0, "nothing written");
            CHECK(ll_rec_close(w) == LL_EIO, "close reports LL_EIO");
        }
    }
    CHECK(ll_rec_open("/nonexistent-dir/x.jsonl", 0, &w, err, sizeof err) == LL_EIO && strstr(err, "nonexistent"),
          "open in a missing folder: %s", err);
}

/* A records file deleted (or replaced) under the writer: at the level's end
 * the writer saves what it wrote beside the path, fails, and counts the
 * request records that came after. */
static void gone_case(int replace)
{
    char path[512], saved[600], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, replace ? "replaced.jsonl" : "gone.jsonl");
    snprintf(saved, sizeof saved, "%s.recovered", path);
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.url = "u", .model = "m", .endpoint = "chat"};
    ll_rec_level lv = {.level = 0, .concurrency = 2, .n_requests = 3};
    int rc = ll_rec_put_run(w, &run) || ll_rec_put_level(w, &lv);
    for (int i = 0; i < 3 && !rc; i++) {
        ll_rec_request rq = {.level = 0, .id = (uint64_t)i, .send_ns = 1, .end_ns = 2, .intended_ns = -1,
                             .header_ns = -1, .first_token_ns = -1, .first_think_ns = -1, .first_answer_ns = -1,
                             .usage_prompt = -1, .usage_completion = -1, .usage_reasoning = -1};
        rc = ll_rec_put_request(w, &rq);
    }
    CHECK(rc == 0 && ll_rec_drain(w, 5000000000) == 0 && ll_rec_written(w) == 5, "5 lines written");
    CHECK(unlink(path) == 0, "records file deleted");
    if (replace)
        CHECK(write_text(path, "someone else's file\n") == 0, "another file in its place");
    ll_rec_level_end le = {.level = 0, .end_ns = 10};
    CHECK(ll_rec_put_level_end(w, &le) == 0, "the level's end is queued");
    CHECK(ll_rec_drain(w, 5000000000) == LL_EIO, "the level's end finds the file gone: the writer fails");
    ll_rec_request late = {.level = 1, .id = 9, .intended_ns = -1};
    CHECK(ll_rec_put_request(w, &late) == LL_EIO, "a later request is refused");
    CHECK(ll_rec_lost_requests(w) == 1, "and counted as not written: %llu",
          (unsigned long long)ll_rec_lost_requests(w));
    CHECK(ll_rec_close(w) == LL_EIO, "close reports the failure");
    got g;
    memset(&g, 0, sizeof g);
    CHECK(ll_rec_read(saved, &all_handlers, &g, NULL, err, sizeof err) == 0 && g.runs == 1 && g.levels == 1 &&
              g.requests == 3 && g.level_ends == 1,
          "%s holds every line written, the level's end too: %d runs, %d levels, %d requests, %d ends (%s)",
          saved, g.runs, g.levels, g.requests, g.level_ends, err);
    if (replace) {
        char *text = NULL;
        size_t len = 0;
        CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0 && strcmp(text, "someone else's file\n") == 0,
              "the file that took its place is left alone");
        free(text);
    }
}

static void test_file_gone(void)
{
    gone_case(0);
    gone_case(1);
}

/* ---- many producers ------------------------------------------------------------------ */

enum { N_PROD = 8, PER_PROD = 2500 };

typedef struct prod {
    ll_rec_writer *w;
    int index, rc;
} prod;

static void *producer(void *arg)
{
    prod *p = arg;
    for (int i = 0; i < PER_PROD && p->rc == 0; i++) {
        uint64_t id = (uint64_t)p->index * PER_PROD + (uint64_t)i;
        size_t n = id % 7;
        ll_rec_chunk *ch = n ? malloc(n * sizeof *ch) : NULL;
        for (size_t k = 0; k < n; k++)
            ch[k] = (ll_rec_chunk){(int64_t)(id * 1000 + k), (int32_t)(k + 1), k % 2 ? 'a' : 't'};
        ll_rec_request rq = {.level = p->index, .id = id, .cls = id % 5 ? LL_ERRC_OK : LL_ERRC_TIMEOUT,
                             .send_ns = (int64_t)id, .end_ns = (int64_t)id + 10, .intended_ns = -1,
                             .header_ns = -1, .first_token_ns = -1, .first_think_ns = -1, .first_answer_ns = -1,
                             .think_tok = (int64_t)n, .usage_prompt = -1, .usage_completion = -1,
                             .usage_reasoning = -1, .n_chunks = n, .chunks = ch,
                             .error = id % 5 ? NULL : strdup("timed out")};
        p->rc = ll_rec_put_request(p->w, &rq);
    }
    return NULL;
}

typedef struct seen {
    unsigned char *hit;
    int dup, bad;
} seen;

static int count_request(const ll_rec_request *rq, void *ctx)
{
    seen *s = ctx;
    if (rq->id >= (uint64_t)N_PROD * PER_PROD || rq->level != (int)(rq->id / PER_PROD)) {
        s->bad++;
        return 0;
    }
    if (s->hit[rq->id]++)
        s->dup++;
    size_t n = rq->id % 7;
    int ok = rq->n_chunks == n && rq->send_ns == (int64_t)rq->id && (rq->cls == LL_ERRC_OK) == (rq->id % 5 != 0);
    for (size_t k = 0; ok && k < n; k++)
        ok = rq->chunks[k].t_ns == (int64_t)(rq->id * 1000 + k) && rq->chunks[k].tokens == (int32_t)(k + 1);
    s->bad += !ok;
    return 0;
}

/* queue_cap 64: producers wait for room; 0 (65,536): the writer moves its
 * backlog back to the ring's front now and then (records.c, Memory), which
 * must lose, repeat or tear no record. */
static void test_many_producers(size_t queue_cap)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "many.jsonl");
    CHECK(ll_rec_open(path, queue_cap, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.url = "u", .model = "m", .endpoint = "chat"};
    CHECK(ll_rec_put_run(w, &run) == 0, "run");
    prod p[N_PROD];
    pthread_t th[N_PROD];
    for (int i = 0; i < N_PROD; i++) {
        p[i] = (prod){w, i, 0};
        CHECK(pthread_create(&th[i], NULL, producer, &p[i]) == 0, "thread %d", i);
    }
    int rc_sum = 0;
    for (int i = 0; i < N_PROD; i++) {
        pthread_join(th[i], NULL);
        rc_sum |= p[i].rc;
    }
    CHECK(rc_sum == 0, "every put accepted");
    CHECK(ll_rec_close(w) == 0, "close");
    seen s = {calloc(N_PROD * PER_PROD, 1), 0, 0};
    ll_rec_handlers h = {.on_request = count_request};
    ll_rec_read_stats rs;
    CHECK(s.hit && ll_rec_read(path, &h, &s, &rs, err, sizeof err) == 0, "read: %s", err);
    int missing = 0;
    for (int i = 0; s.hit && i < N_PROD * PER_PROD; i++)
        missing += s.hit[i] == 0;
    CHECK(rs.n_lines == 1 + N_PROD * PER_PROD && rs.n_rejected == 0 && rs.n_truncated == 0,
          "lines %zu rejected %zu (a torn line would fail to parse)", rs.n_lines, rs.n_rejected);
    CHECK(missing == 0 && s.dup == 0 && s.bad == 0, "queue %zu: missing %d duplicated %d wrong %d", queue_cap,
          missing, s.dup, s.bad);
    free(s.hit);
}

/* ---- hostile files ---------------------------------------------------------------------- */

#define RUN_LINE "{\"type\":\"run\",\"schema\":1,\"target\":{\"url\":\"u\"}}\n"
#define REQ_HEAD "{\"type\":\"request\",\"level\":0,\"id\":1,\"status\":\"ok\","

static int read_text(const char *name, const char *text, got *g, ll_rec_read_stats *rs, char *err, size_t errlen)
{
    char path[512];
    path_of(path, sizeof path, name);
    if (write_text(path, text))
        return -100;
    memset(g, 0, sizeof *g);
    return ll_rec_read(path, &all_handlers, g, rs, err, errlen);
}

static void test_hostile(void)
{
    char err[256];
    got g;
    ll_rec_read_stats rs;
    int rc;

    rc = read_text("huge_time.jsonl",
                   RUN_LINE REQ_HEAD "\"send_ns\":1e300,\"end_ns\":5,\"chunks\":[]}\n"
                   REQ_HEAD "\"send_ns\":1,\"end_ns\":5,\"chunks\":[[4.7e18,1,\"a\"]]}\n"
                   REQ_HEAD "\"send_ns\":1,\"end_ns\":5,\"chunks\":[[2,1,\"a\"]]}\n",
                   &g, &rs, err, sizeof err);
    CHECK(rc == 0 && g.requests == 1 && rs.n_rejected == 2 && rs.n_out_of_range == 2,
          "1e300 and 2^62+ times: rc %d requests %d rejected %zu oor %zu", rc, g.requests, rs.n_rejected,
          rs.n_out_of_range);
    CHECK(g.rq[0].n_chunks == 1 && g.chunks[0][0].t_ns == 2, "the good request is whole");

    rc = read_text("neg_tokens.jsonl",
                   RUN_LINE REQ_HEAD "\"send_ns\":1,\"end_ns\":5,\"think_tok\":-3,\"answer_tok\":-1,\"chunks\":[]}\n"
                   REQ_HEAD "\"send_ns\":1,\"end_ns\":5,\"chunks\":[[2,3000000000,\"a\"]]}\n"
                   REQ_HEAD "\"send_ns\":1,\"end_ns\":5,\"chunks\":[[2,-1,\"t\"]]}\n"
                   "{\"type\":\"step\",\"start_ns\":1,\"dur_ns\":-5,\"n_decode\":1}\n"
                   "{\"type\":\"level_end\",\"level\":0,\"end_ns\":9,\"ok\":-2,\"failed\":0}\n",
                   &g, &rs, err, sizeof err);
    CHECK(rc == 0 && g.requests == 0 && g.steps == 0 && g.level_ends == 0 && rs.n_rejected == 5 &&
              rs.n_out_of_range == 6,
          "negative counts, tokens > INT32_MAX: rc %d requests %d rejected %zu oor %zu", rc, g.requests,
          rs.n_rejected, rs.n_out_of_range);

    rc = read_text("missing_key.jsonl", RUN_LINE REQ_HEAD "\"end_ns\":5}\n" "{\"level\":3}\n", &g, &rs, err, sizeof err);
    CHECK(rc == 0 && g.requests == 0 && rs.n_rejected == 2 && rs.n_out_of_range == 0,
          "missing send_ns, missing type: rejected %zu oor %zu", rs.n_rejected, rs.n_out_of_range);

    rc = read_text("truncated.jsonl",
                   RUN_LINE REQ_HEAD "\"send_ns\":1,\"end_ns\":5,\"chunks\":[]}\n" REQ_HEAD "\"send_ns\":1,\"end",
                   &g, &rs, err, sizeof err);
    CHECK(rc == 0 && g.requests == 1 && rs.n_truncated == 1 && rs.n_lines == 2,
          "truncated last line skipped: rc %d requests %d truncated %zu lines %zu", rc, g.requests, rs.n_truncated,
          rs.n_lines);

    rc = read_text("malformed.jsonl", RUN_LINE "{\"type\":\"request\",\n" REQ_HEAD "\"send_ns\":1,\"end_ns\":5}\n",
                   &g, &rs, err, sizeof err);
    CHECK(rc == LL_EPARSE && strstr(err, "malformed.jsonl:2"), "malformed middle line: rc %d (%s)", rc, err);

    rc = read_text("newer.jsonl", "{\"type\":\"run\",\"schema\":2}\n", &g, &rs, err, sizeof err);
    CHECK(rc == LL_EINVAL && strstr(err, "newer") && g.runs == 0, "newer schema refused: rc %d (%s)", rc, err);

    rc = read_text("no_run.jsonl", REQ_HEAD "\"send_ns\":1,\"end_ns\":5}\n", &g, &rs, err, sizeof err);
    CHECK(rc == LL_EINVAL && g.requests == 0 && strstr(err, "run line"), "missing run line: rc %d (%s)", rc, err);

    rc = read_text("empty.jsonl", "", &g, &rs, err, sizeof err);
    CHECK(rc == LL_EINVAL && strstr(err, "no run line"), "empty file: rc %d (%s)", rc, err);

    rc = read_text("classes.jsonl",
                   RUN_LINE "{\"type\":\"request\",\"level\":0,\"status\":\"error\",\"error_class\":\"reset\","
                            "\"send_ns\":1,\"end_ns\":2}\n"
                            "{\"type\":\"request\",\"level\":0,\"status\":\"error\",\"error_class\":\"gremlins\","
                            "\"send_ns\":1,\"end_ns\":2}\n"
                            "{\"type\":\"gpu\",\"watts\":300}\n",
                   &g, &rs, err, sizeof err);
    CHECK(rc == 0 && g.requests == 2 && g.rq[0].cls == LL_ERRC_RESET && g.rq[1].cls == LL_ERRC_OTHER &&
              g.others == 1 && rs.n_unknown == 1,
          "error classes parsed, unknown class is other, unknown type to on_other");
    CHECK(g.run.law.present == 0 && isnan(g.run.law.time_scale), "no law: present 0, time_scale NAN");
}

/* The law's shape in N (buckets, knee): written only when set, read back
 * exactly, and a shape that cannot be an engine's drops the law rather than
 * passing on a wrong one. The plain law's line stays as it was (round trip). */
static void test_law_shape(void)
{
    char path[512], err[256] = "", *text = NULL;
    size_t len;
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "shape.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.host = "box", .ranks = 1, .threads = 1, .url = "u", .model = "m", .endpoint = "chat",
                      .bundled = 1, .engine = "law=10+2n,buckets=1,2,4,8,knee=8:0.5,time_scale=0.5",
                      .backend = "synthetic",
                      .law = {.present = 1, .a_ms = 5, .b_ms = 1, .time_scale = 0.5, .n_buckets = 4,
                              .buckets = {1, 2, 4, 8}, .knee_n = 8, .knee_b_ms = 0.25}};
    CHECK(ll_rec_put_run(w, &run) == 0 && ll_rec_close(w) == 0, "put run, close");
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "read back: %s", err);
    if (text)
        CHECK(strstr(text, "\"engine_law\":{\"a_ms\":5,\"b_ms\":1,\"c_ms_per_ktok\":0,\"p_ms_per_tok\":0,"
                           "\"time_scale\":0.5,\"buckets\":[1,2,4,8],\"knee_n\":8,\"knee_b_ms\":0.25}") != NULL,
              "engine_law with buckets and knee: %.300s", text);
    free(text);
    got g;
    ll_rec_read_stats rs;
    memset(&g, 0, sizeof g);
    CHECK(ll_rec_read(path, &all_handlers, &g, &rs, err, sizeof err) == 0, "read: %s", err);
    const ll_rec_engine_law *l = &g.run.law;
    CHECK(l->present && l->a_ms == 5 && l->b_ms == 1 && l->n_buckets == 4 && l->buckets[0] == 1 &&
              l->buckets[3] == 8 && l->knee_n == 8 && l->knee_b_ms == 0.25 && l->time_scale == 0.5,
          "shape read back: %d buckets, knee %d at %g", l->n_buckets, l->knee_n, l->knee_b_ms);

#define LAW_LINE(x) "{\"type\":\"run\",\"schema\":1,\"target\":{\"url\":\"u\"},\"engine_law\":{\"a_ms\":1," \
                    "\"b_ms\":2,\"time_scale\":1" x "}}\n"
    static const struct {
        const char *line;
        int present;
    } cases[] = {
        {LAW_LINE(""), 1},
        {LAW_LINE(",\"buckets\":[1,3]"), 1},
        {LAW_LINE(",\"knee_n\":4,\"knee_b_ms\":0"), 1},
        {LAW_LINE(",\"buckets\":[2,2]"), 0},          /* not increasing */
        {LAW_LINE(",\"buckets\":[0,4]"), 0},          /* a bucket below 1 */
        {LAW_LINE(",\"buckets\":[1.5]"), 0},          /* not an integer */
        {LAW_LINE(",\"buckets\":[]"), 0},
        {LAW_LINE(",\"buckets\":\"1,2\""), 0},
        {LAW_LINE(",\"buckets\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]"), 0},
        {LAW_LINE(",\"knee_n\":4"), 0},               /* a knee without its slope */
        {LAW_LINE(",\"knee_n\":0,\"knee_b_ms\":1"), 0},
        {LAW_LINE(",\"knee_n\":4,\"knee_b_ms\":-1"), 0},
        {LAW_LINE(",\"knee_n\":1e300,\"knee_b_ms\":1"), 0},
    };
#undef LAW_LINE
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = read_text("shape_case.jsonl", cases[i].line, &g, &rs, err, sizeof err);
        CHECK(rc == 0 && g.runs == 1 && g.run.law.present == cases[i].present &&
                  (cases[i].present || (g.run.law.n_buckets == 0 && g.run.law.knee_n == 0)),
              "law shape case %zu: rc %d, present %d (want %d)", i, rc, g.run.law.present, cases[i].present);
    }
}

static void test_err_class_names(void)
{
    int ok = 1;
    for (int c = 0; c < LL_ERRC__COUNT; c++) {
        ll_err_class back;
        ok &= ll_err_class_parse(ll_err_class_name((ll_err_class)c), &back) == 0 && back == (ll_err_class)c;
    }
    ll_err_class x;
    CHECK(ok, "every class name parses back");
    CHECK(ll_err_class_parse("nope", &x) == LL_EINVAL && x == LL_ERRC_OTHER, "unknown name");
    CHECK(strcmp(ll_err_class_name(LL_ERRC_STREAM), "stream_error") == 0 &&
              strcmp(ll_err_class_name((ll_err_class)99), "other") == 0,
          "names");
}

typedef struct metrics_got {
    int n;
    ll_rec_metric m[4];
    char labels[4][64], name[4][64];
} metrics_got;

static int on_metric_rec(const ll_rec_metric *m, void *ctx)
{
    metrics_got *g = ctx;
    if (g->n < 4) {
        g->m[g->n] = *m;
        snprintf(g->labels[g->n], sizeof g->labels[0], "%s", m->labels);
        snprintf(g->name[g->n], sizeof g->name[0], "%s", m->name);
    }
    g->n++;
    return 0;
}

/* metric records: exact round trip of value and labels (quotes escaped
 * twice: once by the exposition form, once by JSON), non-finite refused,
 * hostile lines dropped and counted. */
static void test_metric(void)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "metric.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.ranks = 1, .threads = 1, .url = "http://127.0.0.1:1", .model = "m", .endpoint = "chat"};
    ll_rec_metric a = {.t_ns = 500000000, .src = "http://h:8000/metrics", .name = "vllm:num_requests_running",
                       .labels = "engine=\"0\",model_name=\"a\\\"b\"", .value = 12};
    ll_rec_metric b = {.t_ns = 1000000000, .src = "http://h:8000/metrics", .name = "vllm:iteration_tokens_total_sum",
                       .labels = "", .value = 9007199254740993.0 /* 2^53 + 1: rounds to 2^53, kept exactly */};
    ll_rec_metric c = {.t_ns = 1, .src = "x", .name = "up", .labels = "", .value = NAN};
    CHECK(ll_rec_put_run(w, &run) == 0 && ll_rec_put_metric(w, &a) == 0 && ll_rec_put_metric(w, &b) == 0,
          "put metrics");
    CHECK(ll_rec_put_metric(w, &c) == LL_EINVAL, "NaN refused");
    static const char hostile[] = "{\"type\":\"metric\",\"t_ns\":1,\"name\":\"x\",\"value\":\"1\"}\n"
                                  "{\"type\":\"metric\",\"t_ns\":1e300,\"name\":\"x\",\"value\":1}\n"
                                  "{\"type\":\"metric\",\"t_ns\":1,\"value\":1}\n";
    CHECK(ll_rec_put_lines(w, hostile, sizeof hostile - 1) == 0, "hostile lines");
    CHECK(ll_rec_close(w) == 0, "close");
    metrics_got g = {0};
    ll_rec_read_stats rs;
    ll_rec_handlers h = {.on_metric = on_metric_rec};
    CHECK(ll_rec_read(path, &h, &g, &rs, err, sizeof err) == 0, "read: %s", err);
    CHECK(g.n == 2, "two metrics read, got %d", g.n);
    CHECK(g.m[0].t_ns == 500000000 && g.m[0].value == 12 && !strcmp(g.name[0], "vllm:num_requests_running") &&
              !strcmp(g.labels[0], a.labels),
          "metric exact: %s", g.labels[0]);
    CHECK(g.m[1].value == b.value && g.labels[1][0] == '\0', "a large counter exactly");
    CHECK(rs.n_rejected == 3 && rs.n_unknown == 0, "hostile metric lines dropped: rejected %zu", rs.n_rejected);
}

/* level_end "client": the kernel-stamped reads and the read lag round-trip;
 * a client without them (user stamps) and a level_end without a client read
 * back as "not recorded" (-1, NaN), and are not written as zeros. */
typedef struct les {
    int n;
    ll_rec_client c[3];
} les;

static int on_le(const ll_rec_level_end *le, void *ctx)
{
    les *l = ctx;
    if (l->n < 3)
        l->c[l->n++] = le->client;
    return 0;
}

static void test_level_end_client(void)
{
    char path[300], err[256] = "", *text = NULL;
    size_t len;
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "le_client.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_level_end k = {.level = 0, .end_ns = 10, .client = {.present = 1, .threads = 2, .wall_s = 1.5,
                          .cpu_s_max = 0.25, .cpu_s_sum = 0.5, .reads = 100, .reads_kstamp = 99, .events = 120,
                          .read_lag_p50_ms = 0.125, .read_lag_p99_ms = 2.5, .read_lag_max_ms = 4}};
    ll_rec_level_end u = {.level = 1, .end_ns = 20, .client = {.present = 1, .threads = 1, .reads = 7,
                          .reads_kstamp = 0, .events = 7, .read_lag_p50_ms = NAN, .read_lag_p99_ms = NAN,
                          .read_lag_max_ms = NAN}};
    ll_rec_level_end none = {.level = 2, .end_ns = 30};
    ll_rec_run run = {.ranks = 1, .threads = 2, .url = "http://127.0.0.1:1", .model = "m", .endpoint = "chat"};
    CHECK(ll_rec_put_run(w, &run) == 0 && ll_rec_put_level_end(w, &k) == 0 && ll_rec_put_level_end(w, &u) == 0 &&
              ll_rec_put_level_end(w, &none) == 0 && ll_rec_close(w) == 0,
          "put three level_ends");
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "read back: %s", err);
    if (text) {
        CHECK(strstr(text, "\"reads\":100,\"events\":120,\"reads_kstamp\":99,"
                           "\"read_lag_ms\":{\"p50\":0.125,\"p99\":2.5,\"max\":4}}}\n") != NULL,
              "kernel-stamped client line: %s", text);
        CHECK(strstr(text, "\"reads\":7,\"events\":7,\"reads_kstamp\":0}}\n") != NULL,
              "user-stamped client line: no read lag");
        free(text);
    }
    les l = {0};
    ll_rec_handlers h = {.on_level_end = on_le};
    CHECK(ll_rec_read(path, &h, &l, NULL, err, sizeof err) == 0 && l.n == 3, "read %d level_ends: %s", l.n, err);
    CHECK(l.c[0].reads_kstamp == 99 && l.c[0].read_lag_p50_ms == 0.125 && l.c[0].read_lag_p99_ms == 2.5 &&
              l.c[0].read_lag_max_ms == 4,
          "kstamp and lag read back");
    CHECK(l.c[1].present && l.c[1].reads_kstamp == 0 && isnan(l.c[1].read_lag_p50_ms), "user stamps read back");
    CHECK(!l.c[2].present && l.c[2].reads_kstamp == -1 && isnan(l.c[2].read_lag_p99_ms),
          "no client: not recorded (-1, NaN)");
}

typedef struct hos {
    ll_rec_handoff h[4];
    char req[4][LL_REC_HANDOFF_REQ_MAX + 1];
    int n;
} hos;

static int on_ho(const ll_rec_handoff *h, void *ctx)
{
    hos *s = ctx;
    if (s->n < 4) {
        s->h[s->n] = *h;
        snprintf(s->req[s->n], sizeof s->req[s->n], "%s", h->req);
        s->h[s->n].req = s->req[s->n];
    }
    s->n++;
    return 0;
}

/* handoff: send_ns written when known, read back -1 when absent (an older
 * engine's records, or a sample whose bytes never went out) */
static void test_handoff_send(void)
{
    char path[300], err[256] = "", *text = NULL;
    size_t len;
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "handoff.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_handoff a = {.req = "loadlaw-00ff-7", .tok = 8, .step_end_ns = 1000, .write_ns = 1500, .send_ns = 4200};
    ll_rec_handoff b = {.req = "engine-3", .tok = 0, .step_end_ns = 2000, .write_ns = 2100, .send_ns = -1};
    ll_rec_run run = {.ranks = 1, .threads = 1, .url = "http://127.0.0.1:1", .model = "m", .endpoint = "chat"};
    CHECK(ll_rec_put_run(w, &run) == 0 && ll_rec_put_handoff(w, &a) == 0 && ll_rec_put_handoff(w, &b) == 0 &&
              ll_rec_close(w) == 0,
          "put two handoffs");
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "read back: %s", err);
    if (text) {
        CHECK(strstr(text, "{\"type\":\"handoff\",\"req\":\"loadlaw-00ff-7\",\"tok\":8,\"step_end_ns\":1000,"
                           "\"write_ns\":1500,\"send_ns\":4200}\n") != NULL,
              "with send_ns: %s", text);
        CHECK(strstr(text, "\"tok\":0,\"step_end_ns\":2000,\"write_ns\":2100}\n") != NULL,
              "without send_ns: %s", text);
        free(text);
    }
    hos s = {0};
    ll_rec_handlers h = {.on_handoff = on_ho};
    CHECK(ll_rec_read(path, &h, &s, NULL, err, sizeof err) == 0 && s.n == 2, "read %d handoffs: %s", s.n, err);
    CHECK(s.h[0].send_ns == 4200 && s.h[0].write_ns == 1500 && strcmp(s.h[0].req, "loadlaw-00ff-7") == 0,
          "send_ns read back: %" PRId64, s.h[0].send_ns);
    CHECK(s.h[1].send_ns == -1 && s.h[1].tok == 0, "absent send_ns reads -1: %" PRId64, s.h[1].send_ns);
}

/* ---- request "outputs" ------------------------------------------------------ */

typedef struct got_out {
    int n, n_with;
    ll_rec_outputs *o;          /* a copy of the first one with outputs */
} got_out;

static int on_request_out(const ll_rec_request *rq, void *ctx)
{
    got_out *g = ctx;
    g->n++;
    if (rq->outputs && !g->o) {
        g->o = ll_rec_outputs_dup(rq->outputs);
        g->n_with++;
    }
    return 0;
}

static ll_rec_outputs *make_outputs(void)
{
    ll_rec_outputs *o = calloc(1, sizeof *o);
    snprintf(o->key, sizeof o->key, "p12-s7");
    o->n_tok = 3;
    o->ids = malloc(3 * sizeof *o->ids);
    o->tok = calloc(3, sizeof *o->tok);
    o->lp = malloc(3 * sizeof *o->lp);
    o->top_k = 2;
    o->top_tok = calloc(6, sizeof *o->top_tok);
    o->top_lp = malloc(6 * sizeof *o->top_lp);
    const char *toks[3] = {"He", "llo \"w\"", "\xc3\xa9t\xc3\xa9"};
    for (int i = 0; i < 3; i++) {
        o->ids[i] = 1000 + i;
        o->tok[i] = strdup(toks[i]);
        o->lp[i] = -0.125 * i;
        o->top_tok[2 * i] = strdup(toks[i]);
        o->top_lp[2 * i] = o->lp[i];
        o->top_tok[2 * i + 1] = i == 2 ? NULL : strdup("alt"); /* the server sent one alternative there */
        o->top_lp[2 * i + 1] = i == 2 ? NAN : -2.5;
    }
    o->lp[1] = NAN; /* not said */
    o->text = strdup("Hello \"w\"\xc3\xa9t\xc3\xa9");
    o->text_bytes = 5000;
    o->text_hash = UINT64_C(0x0123456789abcdef);
    return o;
}

/* outputs: exact round trip (ids, tokens with quotes and UTF-8, a logprob not
 * said, a top-k row shorter than k, text, its length and hash); a request
 * without them reads NULL and writes no "outputs" key; a member of the wrong
 * shape drops its record (counted). */
static void test_outputs(void)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "outputs.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.host = "box", .ranks = 1, .threads = 1, .url = "u", .model = "m", .endpoint = "chat"};
    CHECK(ll_rec_put_run(w, &run) == 0, "put run");
    ll_rec_request rq = {.level = 0, .cls = LL_ERRC_OK, .intended_ns = -1, .send_ns = 1, .header_ns = -1,
                         .first_token_ns = -1, .first_think_ns = -1, .first_answer_ns = -1, .end_ns = 2,
                         .usage_prompt = -1, .usage_completion = -1, .usage_reasoning = -1, .cached_tok = -1,
                         .srv = ll_rec_srv_timing_none()};
    ll_rec_request plain = rq;
    rq.id = 1;
    rq.outputs = make_outputs();
    CHECK(ll_rec_put_request(w, &plain) == 0, "put a request without outputs");
    CHECK(ll_rec_put_request(w, &rq) == 0 && rq.outputs == NULL, "put one with outputs (taken)");
    CHECK(ll_rec_close(w) == 0, "close");
    char *text = NULL;
    size_t len = 0;
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "read the file back: %s", err);
    char *first = text ? strstr(text, "\"type\":\"request\"") : NULL;
    char *second = first ? strstr(first + 1, "\"type\":\"request\"") : NULL;
    int in_second = second && strstr(second, "\"outputs\"") != NULL;
    if (second)
        *second = '\0'; /* the first request line alone */
    CHECK(first && in_second && !strstr(first, "outputs"), "only the second request line has outputs");
    free(text);
    got_out g = {0};
    ll_rec_handlers h = {.on_request = on_request_out};
    ll_rec_read_stats rs = {0};
    CHECK(ll_rec_read(path, &h, &g, &rs, err, sizeof err) == 0 && g.n == 2 && g.n_with == 1, "read: %s (%d, %d)",
          err, g.n, g.n_with);
    ll_rec_outputs *o = g.o, *e = make_outputs();
    if (o) {
        CHECK(strcmp(o->key, "p12-s7") == 0 && o->n_tok == 3 && o->top_k == 2, "key, n, k");
        int same = o->ids && o->tok && o->lp && o->top_tok && o->top_lp;
        for (size_t i = 0; same && i < 3; i++)
            same = o->ids[i] == e->ids[i] && strcmp(o->tok[i], e->tok[i]) == 0 &&
                   (i == 1 ? isnan(o->lp[i]) : o->lp[i] == e->lp[i]);
        for (size_t i = 0; same && i < 6; i++)
            same = (e->top_tok[i] ? o->top_tok[i] && strcmp(o->top_tok[i], e->top_tok[i]) == 0 : !o->top_tok[i]) &&
                   (isnan(e->top_lp[i]) ? isnan(o->top_lp[i]) : o->top_lp[i] == e->top_lp[i]);
        CHECK(same, "ids, tokens, logprobs and top-k read back exactly");
        CHECK(o->text && strcmp(o->text, e->text) == 0 && o->text_bytes == 5000 &&
                  o->text_hash == UINT64_C(0x0123456789abcdef),
              "text, its length and hash");
    }
    ll_rec_outputs_free(o);
    ll_rec_outputs_free(e);
    /* the wrong shape: 3 tokens, 2 ids */
    path_of(path, sizeof path, "outputs_bad.jsonl");
    write_text(path, "{\"type\":\"run\",\"schema\":1}\n"
                     "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":1,\"end_ns\":2,"
                     "\"outputs\":{\"key\":\"p0-s1\",\"n\":3,\"ids\":[1,2]}}\n");
    memset(&g, 0, sizeof g);
    memset(&rs, 0, sizeof rs);
    CHECK(ll_rec_read(path, &h, &g, &rs, err, sizeof err) == 0 && g.n == 0 && rs.n_rejected == 1,
          "an outputs member of the wrong shape drops its record: %d read, %zu rejected", g.n, rs.n_rejected);
}

/* The workload keys (records.h ll_rec_work) and max_tokens: each written
 * only where it applies, in the order docs/records.md shows, and read back
 * as they were; a "session" without its "turn" drops the record. */
typedef struct got_work {
    ll_rec_work w[4];
    int max_tokens[4];
    int n;
} got_work;

static size_t count_of(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static int on_request_work(const ll_rec_request *rq, void *ctx)
{
    got_work *g = ctx;
    if (g->n < 4) {
        g->w[g->n] = rq->work;
        g->max_tokens[g->n++] = rq->max_tokens;
    }
    return 0;
}

static void test_work_keys(void)
{
    char path[512], err[256] = "";
    ll_rec_writer *w = NULL;
    path_of(path, sizeof path, "work.jsonl");
    CHECK(ll_rec_open(path, 0, &w, err, sizeof err) == 0, "open: %s", err);
    if (!w)
        return;
    ll_rec_run run = {.host = "box", .ranks = 1, .threads = 1, .url = "u", .model = "m", .endpoint = "chat"};
    CHECK(ll_rec_put_run(w, &run) == 0, "put run");
    ll_rec_request rq = {.level = 0, .cls = LL_ERRC_OK, .intended_ns = -1, .send_ns = 1, .header_ns = -1,
                         .first_token_ns = -1, .first_think_ns = -1, .first_answer_ns = -1, .end_ns = 2,
                         .usage_prompt = -1, .usage_completion = -1, .usage_reasoning = -1, .cached_tok = -1,
                         .srv = ll_rec_srv_timing_none()};
    ll_rec_request r[4] = {rq, rq, rq, rq};
    r[0].work = (ll_rec_work){LL_WORK_SESSION, 3, 2};
    r[0].max_tokens = 48;
    r[1].work = (ll_rec_work){LL_WORK_TRACE, 199, 0};
    r[1].max_tokens = 7;
    r[2].work = (ll_rec_work){LL_WORK_PREFIX, 2, 0};
    for (int i = 0; i < 4; i++)
        CHECK(ll_rec_put_request(w, &r[i]) == 0, "put request %d", i);
    CHECK(ll_rec_close(w) == 0, "close");
    char *text = NULL;
    size_t len = 0;
    CHECK(ll_read_file(path, &text, &len, err, sizeof err) == 0, "read the file back: %s", err);
    CHECK(text && strstr(text, "\"max_tokens\":48,\"session\":3,\"turn\":2,\"chunks_packed\"") &&
              strstr(text, "\"max_tokens\":7,\"trace_row\":199,\"chunks_packed\"") &&
              strstr(text, ",\"prefix_group\":2,\"chunks_packed\"") &&
              count_of(text, "max_tokens") == 2 && count_of(text, "session") == 1,
          "each key where it applies, none elsewhere");
    free(text);
    got_work g = {0};
    ll_rec_handlers h = {.on_request = on_request_work};
    ll_rec_read_stats rs = {0};
    CHECK(ll_rec_read(path, &h, &g, &rs, err, sizeof err) == 0 && g.n == 4, "read: %s (%d)", err, g.n);
    CHECK(g.w[0].kind == LL_WORK_SESSION && g.w[0].index == 3 && g.w[0].turn == 2 && g.max_tokens[0] == 48 &&
              g.w[1].kind == LL_WORK_TRACE && g.w[1].index == 199 && g.max_tokens[1] == 7 &&
              g.w[2].kind == LL_WORK_PREFIX && g.w[2].index == 2 && g.max_tokens[2] == 0 &&
              g.w[3].kind == LL_WORK_NONE,
          "session/turn, trace row, prefix group, max_tokens read back");
    path_of(path, sizeof path, "work_bad.jsonl");
    write_text(path, "{\"type\":\"run\",\"schema\":1}\n"
                     "{\"type\":\"request\",\"level\":0,\"status\":\"ok\",\"send_ns\":1,\"end_ns\":2,\"session\":1}\n");
    memset(&g, 0, sizeof g);
    memset(&rs, 0, sizeof rs);
    CHECK(ll_rec_read(path, &h, &g, &rs, err, sizeof err) == 0 && g.n == 0 && rs.n_rejected == 1,
          "a session without its turn drops its record: %d read, %zu rejected", g.n, rs.n_rejected);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s/ll_records_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    char err[256];
    if (ll_mkdir_p(g_dir, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_err_class_names();
    test_round_trip();
    test_outputs();
    test_work_keys();
    test_law_shape();
    test_level_end_client();
    test_handoff_send();
    test_clock_and_lines();
    test_metric();
    test_drain_close();
    test_file_gone();
    test_many_producers(64);
    test_many_producers(0);
    test_hostile();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_MAIN_END();
}
