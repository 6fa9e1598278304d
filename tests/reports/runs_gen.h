/* runs_gen.h (tests/reports): write a run directory whose records follow a
 * known law, as the bundled synthetic engine would produce them.
 *
 * Closed loop, lockstep waves: the C requests of a wave are sent together,
 * prefill for prefill_ms, then receive one token per engine step of
 * (a + b*C) * (1 + jitter*N(0,1)) ms; each stream sees the step a few
 * microseconds apart. The next wave is sent when the last one ends. Step times
 * are exactly the law up to the seeded jitter, so the steady throughput at C is
 * 1000*C/(a + b*C) tokens/s and the slope is b. With c_ms_per_ktok the step
 * also grows with the context: step k (the one that brings each stream its
 * token k, k tokens after its first) adds c * C * (100 + k) / 1000, the C
 * streams' 100-token prompts plus the k tokens each has had. */
#ifndef LOADLAW_RUNS_GEN_H
#define LOADLAW_RUNS_GEN_H

#include <stdio.h>
#include <stdlib.h>

#include "common.h"

typedef struct gen_spec {
    double a_ms, b_ms, jitter, prefill_ms;
    int tokens;          /* per request */
    int waves;           /* per level */
    int think;           /* first `think` tokens are thinking */
    const int *levels;
    int n_levels;
    uint64_t seed;
    int with_steps;      /* also write engine step records */
    double c_ms_per_ktok;/* context term (header comment); 0: none */
} gen_spec;

static int gen_run(const char *dir, const gen_spec *g)
{
    char path[1024], err[256];
    if (ll_mkdir_p(dir, err, sizeof err))
        return -1;
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    ll_rng r;
    ll_rng_seed(&r, g->seed);
    fprintf(f, "{\"type\":\"run\",\"schema\":1,\"tool\":\"loadlaw\",\"version\":\"0.1.0\","
               "\"epoch_wall_ns\":1764430000000000000,\"host\":\"testbox\",\"ranks\":1,"
               "\"target\":{\"url\":\"http://127.0.0.1:1\",\"model\":\"synthetic\",\"endpoint\":\"chat\",\"bundled\":true},"
               "\"engine\":\"backend=synthetic,law=%g+%gn\","
               "\"engine_law\":{\"a_ms\":%g,\"b_ms\":%g,\"c_ms_per_ktok\":%g,\"p_ms_per_tok\":0},"
               "\"scenario\":\"generated\",\"config\":{\"max_tokens\":%d}}\n",
            g->a_ms, g->b_ms, g->a_ms, g->b_ms, g->c_ms_per_ktok, g->tokens);
    int64_t t = 1000000; /* ns */
    long id = 0;
    for (int li = 0; li < g->n_levels; li++) {
        int c = g->levels[li];
        fprintf(f, "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"closed\",\"rate_per_s\":null,"
                   "\"n_requests\":%d,\"warmup\":0,\"start_ns\":%lld}\n",
                li, c, c * g->waves, (long long)t);
        for (int w = 0; w < g->waves; w++) {
            int64_t send = t;
            int64_t first = send + (int64_t)(g->prefill_ms * 1e6);
            int64_t *chunk_t = malloc(sizeof(int64_t) * (size_t)g->tokens);
            int64_t step_end = chunk_t[0] = first;
            for (int k = 1; k < g->tokens; k++) {
                double step = (g->a_ms + g->b_ms * c + g->c_ms_per_ktok * c * (100 + k) / 1000.0) *
                              (1 + g->jitter * ll_rng_normal(&r));
                if (step < 0.1)
                    step = 0.1;
                step_end += (int64_t)(step * 1e6);
                chunk_t[k] = step_end;
                if (g->with_steps)
                    fprintf(f, "{\"type\":\"step\",\"start_ns\":%lld,\"dur_ns\":%lld,\"n_decode\":%d,"
                               "\"n_running\":%d,\"prefill_tok\":0,\"ctx_tok\":%d}\n",
                            (long long)(step_end - (int64_t)(step * 1e6)), (long long)(step * 1e6), c, c,
                            c * (100 + k));
            }
            int64_t end = 0;
            for (int q = 0; q < c; q++) {
                int64_t d = (int64_t)(ll_rng_uniform(&r) * 20000); /* 0-20 µs per stream */
                int64_t last = chunk_t[g->tokens - 1] + d;
                int64_t fth = g->think > 0 ? first + d : -1;
                int64_t fan = g->think < g->tokens ? chunk_t[g->think] + d : -1;
                fprintf(f, "{\"type\":\"request\",\"level\":%d,\"rank\":0,\"id\":%ld,\"warmup\":false,"
                           "\"status\":\"ok\",\"error_class\":null,\"http_status\":200,\"error\":null,"
                           "\"intended_ns\":null,\"send_ns\":%lld,\"header_ns\":%lld,\"first_token_ns\":%lld,",
                        li, id++, (long long)send, (long long)send + 100000, (long long)(first + d));
                if (fth >= 0)
                    fprintf(f, "\"first_think_ns\":%lld,", (long long)fth);
                else
                    fprintf(f, "\"first_think_ns\":null,");
                if (fan >= 0)
                    fprintf(f, "\"first_answer_ns\":%lld,", (long long)fan);
                else
                    fprintf(f, "\"first_answer_ns\":null,");
                fprintf(f, "\"end_ns\":%lld,\"prompt_tok\":100,\"think_tok\":%d,\"answer_tok\":%d,"
                           "\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"reasoning_tokens\":%d},"
                           "\"chunks\":[",
                        (long long)last + 50000, g->think, g->tokens - g->think, g->tokens, g->think);
                for (int k = 0; k < g->tokens; k++)
                    fprintf(f, "%s[%lld,1,\"%s\"]", k ? "," : "", (long long)(chunk_t[k] + d),
                            k < g->think ? "t" : "a");
                fprintf(f, "]}\n");
                if (last + 50000 > end)
                    end = last + 50000;
            }
            free(chunk_t);
            t = end + 1000000;
        }
        fprintf(f, "{\"type\":\"level_end\",\"level\":%d,\"end_ns\":%lld,\"interrupted\":false,\"ok\":%d,"
                   "\"failed\":0}\n",
                li, (long long)t, c * g->waves);
    }
    fclose(f);
    return 0;
}

#endif
