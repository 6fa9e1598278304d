/* test_engine_streams.c: 1024 concurrent streams from one curl multi handle,
 * all admitted at once; every one must end with exactly its tokens and
 * [DONE], and the engine must have run them in one batch. */
#include <stdlib.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    enum { N = 1024, TOK = 64 };
    /* 50 ms steps: the engine's one HTTP thread takes the requests in
     * between steps; at 2 ms steps, under the sanitizers on a busy host, it
     * was still admitting them when the first had finished (peak 343) */
    eng_engine *e = tc_start("law=50+0.005n,max_running=1024,prefill_budget=100000");
    char url[160];
    snprintf(url, sizeof url, "%s/v1/chat/completions", eng_url(e));
    char body[256];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"many streams at once\"}],"
             "\"max_tokens\":%d,\"think_tokens\":4,\"ignore_eos\":true,\"stream\":true}", TOK);
    tc_stream *st = calloc(N, sizeof *st);
    int64_t t0 = ll_now_ns();
    /* all N held until every one is connected, then sent together: how
     * fast this host opens connections is not what is tested */
    CHECK(tc_streams_together(url, body, N, st) == 0, "multi transfer ran");
    double s = (double)(ll_now_ns() - t0) * 1e-9;
    int ok = 0, first_bad = -1;
    for (int i = 0; i < N; i++) {
        if (st[i].status == 200 && st[i].curl_rc == 0 && st[i].tokens == TOK && st[i].done)
            ok++;
        else if (first_bad < 0)
            first_bad = i;
    }
    CHECK(ok == N, "%d of %d streams complete with exactly %d tokens (first bad %d: status %ld rc %d tokens %d)",
          ok, N, TOK, first_bad, first_bad >= 0 ? st[first_bad].status : 0L,
          first_bad >= 0 ? st[first_bad].curl_rc : 0, first_bad >= 0 ? st[first_bad].tokens : 0);
    size_t n = eng_step_count(e);
    eng_step *log = calloc(n ? n : 1, sizeof *log);
    size_t got = eng_steps(e, 0, log, n);
    int peak = 0;
    long tokens = 0;
    for (size_t i = 0; i < got; i++) {
        if (log[i].n_running > peak)
            peak = log[i].n_running;
        tokens += log[i].n_decode;
    }
    printf("%d streams x %d tokens in %.2f s, %zu steps, peak batch %d\n", N, TOK, s, got, peak);
    CHECK(peak >= N / 2, "streams shared the batch (peak %d)", peak);
    /* each stream's first token comes from its prefill step, the rest decode */
    CHECK(tokens == (long)N * (TOK - 1), "decode tokens in the log %ld want %ld", tokens, (long)N * (TOK - 1));
    free(log);
    free(st);
    eng_stop(e);
    curl_global_cleanup();
    TEST_MAIN_END();
}
