/* gen_records.c: a synthetic run of N token events written through the
 * records writer (common/records.h), streamed to disk: what the records of a
 * long, large run cost in bytes, and a file for timing `loadlaw fit` on it
 * (bench/records/records.sh).
 *
 * The run: closed-loop levels C = 1, 2, 4, ... up to --max-c, the same number
 * of events each; every stream of a level sends its requests back to back in
 * lockstep with the others (a prefill of --ttft-ms, then --tokens tokens, one
 * a step), and a step lasts a + b*C ms (--law, played) with a seeded +/-2%
 * jitter, so steady decode holds D = C between the prefills and the fit finds
 * the law. One token an event, answer tokens.
 *
 *   gen_records OUT.jsonl --events N [--tokens T] [--max-c C] [--law A+Bn]
 *                         [--ttft-ms MS] [--seed S]
 * Prints events, requests, bytes and bytes per event. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"

typedef struct gen_opts {
    const char *out;
    double events, a_ms, b_ms, ttft_ms;
    int tokens, max_c;
    uint64_t seed;
} gen_opts;

/* -1 when the options make a run, else 2 after saying why. */
static int check_args(const gen_opts *o)
{
    if (o->out && o->events >= 1 && o->tokens >= 2 && o->max_c >= 1 && o->a_ms > 0 && o->b_ms >= 0 && o->ttft_ms > 0)
        return -1;
    fprintf(stderr, "gen_records: need OUT, --events >= 1, --tokens >= 2, --max-c >= 1, a law A+Bn with A > 0\n");
    return 2;
}

/* -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, gen_opts *o)
{
    *o = (gen_opts){.events = 1e7, .a_ms = 2.6, .b_ms = 1.5, .ttft_ms = 20, .tokens = 1000, .max_c = 64, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help")) {
            printf("usage: gen_records OUT.jsonl --events N [--tokens T] [--max-c C] [--law A+Bn] "
                   "[--ttft-ms MS] [--seed S]\n");
            return 0;
        } else if (v && !strcmp(argv[i], "--events")) {
            o->events = atof(v), i++;
        } else if (v && !strcmp(argv[i], "--tokens")) {
            o->tokens = atoi(v), i++;
        } else if (v && !strcmp(argv[i], "--max-c")) {
            o->max_c = atoi(v), i++;
        } else if (v && !strcmp(argv[i], "--law")) {
            if (sscanf(v, "%lf+%lfn", &o->a_ms, &o->b_ms) != 2)
                o->a_ms = -1;
            i++;
        } else if (v && !strcmp(argv[i], "--ttft-ms")) {
            o->ttft_ms = atof(v), i++;
        } else if (v && !strcmp(argv[i], "--seed")) {
            o->seed = strtoull(v, NULL, 10), i++;
        } else if (argv[i][0] != '-' && !o->out) {
            o->out = argv[i];
        } else {
            fprintf(stderr, "gen_records: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    return check_args(o);
}

static double jitter(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return 0.98 + 0.04 * (double)(*s >> 11) / 9007199254740992.0;
}

/* One round of a level: C requests decoding in lockstep from t0; returns
 * its end. The chunk arrays go to the writer (it frees them). */
static int64_t put_round(ll_rec_writer *w, const gen_opts *o, int level, int c, uint64_t *id, int64_t t0,
                         uint64_t *seed, int *rc)
{
    int64_t first = t0 + (int64_t)(o->ttft_ms * 1e6), t = first;
    int64_t *times = malloc((size_t)o->tokens * sizeof *times);
    if (!times) {
        *rc = LL_ENOMEM;
        return t0;
    }
    for (int k = 0; k < o->tokens; k++) {
        times[k] = t;
        t += (int64_t)((o->a_ms + o->b_ms * c) * 1e6 * jitter(seed));
    }
    for (int s = 0; s < c && *rc == 0; s++) {
        ll_rec_chunk *ch = malloc((size_t)o->tokens * sizeof *ch);
        if (!ch) {
            *rc = LL_ENOMEM;
            break;
        }
        for (int k = 0; k < o->tokens; k++) /* each stream's read lands a little apart */
            ch[k] = (ll_rec_chunk){times[k] + s * 1000 + (int64_t)(*seed >> 60), 1, LL_CHUNK_ANSWER};
        int64_t end = ch[o->tokens - 1].t_ns + 1;
        ll_rec_request rq = {.level = level, .id = (*id)++, .send_ns = t0, .header_ns = t0 + 100000,
                             .first_token_ns = ch[0].t_ns, .first_think_ns = -1, .first_answer_ns = ch[0].t_ns,
                             .end_ns = end, .intended_ns = -1, .prompt_tok = 256, .answer_tok = o->tokens,
                             .usage_prompt = 256, .usage_completion = o->tokens, .usage_reasoning = -1,
                             .http_status = 200, .cached_tok = -1, .max_tokens = o->tokens,
                             .srv = ll_rec_srv_timing_none(), .n_chunks = (size_t)o->tokens, .chunks = ch};
        *rc = ll_rec_put_request(w, &rq);
    }
    free(times);
    return t + 1000000;
}

/* Levels C = 1, 2, 4, ... <= max_c, events split evenly. */
static int gen_levels(ll_rec_writer *w, const gen_opts *o, uint64_t *n_rq, uint64_t *n_ev)
{
    int n_levels = 0, rc = 0;
    for (int c = 1; c <= o->max_c; c *= 2)
        n_levels++;
    double per_level = o->events / n_levels;
    uint64_t seed = o->seed, id = 0;
    int64_t t = 1000000;
    for (int c = 1, level = 0; c <= o->max_c && rc == 0; c *= 2, level++) {
        int rounds = (int)(per_level / ((double)c * o->tokens) + 0.5);
        rounds = rounds < 1 ? 1 : rounds;
        ll_rec_level lv = {.level = level, .concurrency = c, .n_requests = rounds * c, .start_ns = t,
                           .repeat = -1, .pair = -1, .seq = -1};
        rc = ll_rec_put_level(w, &lv);
        for (int r = 0; r < rounds && rc == 0; r++)
            t = put_round(w, o, level, c, &id, t, &seed, &rc);
        ll_rec_level_end le = {.level = level, .end_ns = t, .ok = rounds * c};
        le.client.reads_kstamp = -1;
        if (rc == 0)
            rc = ll_rec_put_level_end(w, &le);
        *n_ev += (uint64_t)rounds * c * o->tokens;
    }
    *n_rq = id;
    return rc;
}

int main(int argc, char **argv)
{
    gen_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr >= 0)
        return pr;
    char err[512];
    ll_rec_writer *w = NULL;
    if (ll_rec_open(o.out, 0, &w, err, sizeof err)) {
        fprintf(stderr, "gen_records: %s\n", err);
        return 1;
    }
    ll_rec_run run = {.ranks = 1, .threads = 1, .url = "http://synthetic.invalid", .model = "synthetic",
                      .endpoint = "chat", .scenario = "bench/records/gen_records"};
    uint64_t n_rq = 0, n_ev = 0;
    int rc = ll_rec_put_run(w, &run);
    if (rc == 0)
        rc = gen_levels(w, &o, &n_rq, &n_ev);
    int crc = ll_rec_close(w);
    struct stat st;
    if (rc || crc || stat(o.out, &st) != 0) {
        fprintf(stderr, "gen_records: writing %s failed (%s)\n", o.out, ll_strerror(rc ? rc : crc));
        return 1;
    }
    printf("events=%" PRIu64 " requests=%" PRIu64 " bytes=%lld bytes_per_event=%.3f\n", n_ev, n_rq,
           (long long)st.st_size, (double)st.st_size / (double)n_ev);
    return 0;
}
