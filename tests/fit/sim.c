/* sim.c (tests/fit): the discrete-event engine of sim.h, writing records.jsonl
 * with plain fprintf so the reader under test never checks its own writer. */
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { R_UNSENT, R_WAITING, R_DECODING, R_DONE };

typedef struct sreq {
    int id, state, tokens, failing, warmup, ok, prompt;
    int64_t send, first, end;
    int64_t *chunk_t;
    int n_chunks;
} sreq;

void sim_default(sim_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->a_ms = 2.5;
    c->b_ms = 0.75;
    c->prompt_tok = 100;
    c->max_tokens = 20;
    c->think_tok = 5;
    c->seed = 1;
    c->write_steps = 1;
    c->write_truth = 1;
}

void sim_set_levels(sim_cfg *c, const int *conc, int n, int per_c)
{
    c->n_levels = n;
    for (int i = 0; i < n; i++) {
        c->conc[i] = conc[i];
        c->n_requests[i] = per_c * conc[i];
    }
}

void sim_set_open(sim_cfg *c, int n, int requests, double interval_ms)
{
    c->n_levels = n;
    for (int i = 0; i < n; i++)
        c->n_requests[i] = requests;
    c->open_interval_ms = interval_ms;
}

double sim_law(const sim_cfg *c, double n)
{
    if (c->buckets)
        n = n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8 * ceil(n / 8);
    double s = c->a_ms + c->b_ms * n;
    if (c->knee_n > 0 && n > c->knee_n)
        s += (c->b2_ms - c->b_ms) * (n - c->knee_n);
    if (c->knee2_n > 0 && n > c->knee2_n)
        s += (c->b3_ms - c->b2_ms) * (n - c->knee2_n);
    return s + c->c2_ms * n * n;
}

double sim_mean_step(const sim_cfg *c, double n)
{
    double j = c->jitter_frac;
    if (c->jitter_kind == SIM_JITTER_EXP)
        return sim_law(c, n) * (1 + j);
    if (c->jitter_kind == SIM_JITTER_LOGNORMAL)
        return sim_law(c, n) * exp(j * j / 2);
    return sim_law(c, n);
}

/* One step's factor around law(N): sim.h, SIM_JITTER_*. */
static double jitter_factor(const sim_cfg *c, ll_rng *rng)
{
    double j = c->jitter_frac;
    if (j <= 0)
        return 1.0;
    if (c->jitter_kind == SIM_JITTER_EXP)
        return 1.0 + j * ll_rng_exponential(rng, 1.0);
    if (c->jitter_kind == SIM_JITTER_LOGNORMAL)
        return exp(j * ll_rng_normal(rng));
    return 1.0 + j * ll_rng_normal(rng);
}

static void write_request(FILE *f, int level, const sreq *q, const sim_cfg *c)
{
    int think = q->tokens < c->think_tok ? q->tokens : c->think_tok;
    char answer[32] = "null";
    if (q->n_chunks > think)
        snprintf(answer, sizeof answer, "%lld", (long long)q->chunk_t[think]);
    fprintf(f,
            "{\"type\":\"request\",\"level\":%d,\"rank\":0,\"id\":%d,\"warmup\":%s,"
            "\"status\":\"%s\",\"error_class\":%s,\"http_status\":200,\"error\":%s,"
            "\"intended_ns\":null,\"send_ns\":%lld,\"header_ns\":%lld,\"first_token_ns\":%lld,"
            "\"first_think_ns\":%lld,\"first_answer_ns\":%s,\"end_ns\":%lld,"
            "\"prompt_tok\":%d,\"think_tok\":%d,\"answer_tok\":%d,",
            level, q->id, q->warmup ? "true" : "false", q->ok ? "ok" : "error",
            q->ok ? "null" : "\"stream_error\"", q->ok ? "null" : "\"injected\"",
            (long long)q->send, (long long)q->send, (long long)q->first,
            (long long)q->first, answer,
            (long long)q->end, q->prompt, think, q->tokens - think);
    if (c->usage_prompt_tok > 0)
        fprintf(f, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d},", c->usage_prompt_tok,
                q->tokens);
    else
        fprintf(f, "\"usage\":null,");
    if (c->prompt_tok_target > 0)
        fprintf(f, "\"prompt_tok_target\":%d,", c->prompt_tok_target);
    if (c->attributed_every > 0 && (q->id + 1) % c->attributed_every == 0)
        fprintf(f, "\"counts\":\"attributed\",\"stream_tok\":{\"think\":%d,\"answer\":%d},",
                think / 2, (q->tokens - think) / 2);
    fprintf(f, "\"chunks\":[");
    for (int k = 0; k < q->n_chunks; k++)
        fprintf(f, "%s[%lld,1,\"%s\"]", k ? "," : "", (long long)q->chunk_t[k],
                k < c->think_tok ? "t" : "a");
    fprintf(f, "]}\n");
}

/* sim.h, burst_every: group the chunks after the first token into reads of
 * k; each read happens when its last chunk arrives and stamps the chunks it
 * collected microseconds apart, as a client's write callback would. */
static void burst_stamps(sreq *q, int k)
{
    for (int g0 = 1; g0 < q->n_chunks; g0 += k) {
        int g1 = g0 + k < q->n_chunks ? g0 + k : q->n_chunks;
        int64_t read_t = q->chunk_t[g1 - 1];
        for (int j = g0; j < g1; j++)
            q->chunk_t[j] = read_t + (int64_t)(j - g0) * 20000;
    }
    if (q->n_chunks > 0 && q->end < q->chunk_t[q->n_chunks - 1])
        q->end = q->chunk_t[q->n_chunks - 1];
}

/* sim.h, loss: a lost chunk arrives loss_delay_ms late and its stream's
 * later chunks wait behind it (TCP delivers in order). The draws come from
 * their own generator, so that a run with loss differs from one without
 * only in its arrival times. */
static void net_stamps(sreq *q, const sim_cfg *c, ll_rng *net)
{
    int64_t prev = 0;
    for (int k = 0; k < q->n_chunks; k++) {
        int64_t t = q->chunk_t[k];
        if (ll_rng_uniform(net) < c->loss_share)
            t += llround(c->loss_delay_ms * 1e6);
        q->chunk_t[k] = prev = t > prev ? t : prev;
    }
    if (q->n_chunks > 0) {
        q->first = q->chunk_t[0];
        if (q->end < prev)
            q->end = prev;
    }
}

static int add_chunk(sreq *q, int64_t t, int cap)
{
    if (q->n_chunks >= cap)
        return -1;
    q->chunk_t[q->n_chunks++] = t;
    q->tokens++;
    return 0;
}

int sim_write(const char *path, const sim_cfg *c, sim_stats *st)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    memset(st, 0, sizeof *st);
    ll_rng rng, net;
    ll_rng_seed(&rng, c->seed);
    ll_rng_seed(&net, c->seed ^ 0x6e6574776f726bULL);
    fprintf(f, "{\"type\":\"run\",\"schema\":%d,\"tool\":\"loadlaw\",\"version\":\"test\","
               "\"host\":\"sim\",\"ranks\":1,\"target\":{\"url\":\"sim://\",\"model\":\"sim\","
               "\"endpoint\":\"%s\",\"bundled\":true},\"engine\":\"backend=sim\"",
            c->schema ? c->schema : 1, c->endpoint ? c->endpoint : "chat");
    if (c->write_truth) {
        fprintf(f, ",\"engine_law\":{\"a_ms\":%.17g,\"b_ms\":%.17g,\"c_ms_per_ktok\":0,"
                   "\"p_ms_per_tok\":%.17g",
                c->a_ms, c->b_ms, c->p_ms_per_tok);
        if (c->time_scale > 0)
            fprintf(f, ",\"time_scale\":%.17g", c->time_scale);
        if (c->knee_n > 0 && !(c->knee2_n > 0)) /* the engine has one knee */
            fprintf(f, ",\"knee_n\":%d,\"knee_b_ms\":%.17g", (int)c->knee_n, c->b2_ms);
        fputc('}', f);
    }
    fprintf(f, ",\"scenario\":null,\"config\":{}}\n");

    int64_t t = 1000000;
    int killed = 0, gid = 0, rc = 0, partitioned = 0;
    for (int l = 0; l < c->n_levels && !killed; l++) {
        int C = c->conc[l], n = c->n_requests[l];
        sim_level_stats *ls = &st->lv[l];
        sreq *rq = calloc((size_t)n, sizeof *rq);
        int *order = calloc((size_t)n, sizeof *order);
        if (!rq || !order) {
            free(rq);
            free(order);
            fclose(f);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            rq[i].id = gid++;
            rq[i].warmup = i < c->warmup[l];
            rq[i].failing = c->fail_every > 0 && (rq[i].id + 1) % c->fail_every == 0;
            rq[i].ok = 1;
            rq[i].chunk_t = malloc((size_t)c->max_tokens * sizeof(int64_t));
            rq[i].first = rq[i].end = -1;
            rq[i].prompt = c->prompt_tok;
            if (c->prompt_spread > 0)
                rq[i].prompt = (int)lround(c->prompt_tok * (1 - c->prompt_spread +
                                                            2 * c->prompt_spread * ll_rng_uniform(&rng)));
        }
        int open = c->open_interval_ms > 0;
        if (open)
            C = 0;
        fprintf(f, "{\"type\":\"level\",\"level\":%d,\"concurrency\":%d,\"mode\":\"%s\","
                   "\"rate_per_s\":null,\"n_requests\":%d,\"warmup\":%d,\"start_ns\":%lld}\n",
                l, C, open ? "open" : "closed", n, c->warmup[l], (long long)t);
        ls->start_ns = t;
        ls->ramp_end_ns = -1;
        int sent = 0, n_done = 0;
        double tokens_so_far = 0;
        for (; sent < n && (open || sent < C); sent++) {
            rq[sent].state = R_WAITING;
            rq[sent].send = t + (open ? llround(sent * c->open_interval_ms * 1e6) : 0);
        }
        while (n_done < n) {
            int64_t ts = t;
            int n_dec = 0, n_pre = 0, inc = 0;
            double k_ctx = 0;
            for (int i = 0; i < sent; i++)
                if (rq[i].state == R_DECODING) {
                    n_dec++;
                    k_ctx += rq[i].prompt + rq[i].tokens;
                    inc += rq[i].ok && !rq[i].failing && !rq[i].warmup;
                }
            int pre[4096];
            for (int i = 0; i < sent && n_pre < 4096; i++)
                if (rq[i].state == R_WAITING && rq[i].send <= ts &&
                    (c->prefill_per_step <= 0 || n_pre < c->prefill_per_step))
                    pre[n_pre++] = i;
            if (n_dec == 0 && n_pre == 0) {
                /* open loop: idle until the next arrival */
                int64_t next = INT64_MAX;
                for (int i = 0; i < sent; i++)
                    if (rq[i].state == R_WAITING && rq[i].send < next)
                        next = rq[i].send;
                t = next;
                continue;
            }
            double dur_ms = sim_law(c, n_dec) + c->c_ms_per_ktok * k_ctx / 1000 + c->p_ms_per_tok * c->prompt_tok * n_pre;
            dur_ms *= jitter_factor(c, &rng);
            if (c->stall_every > 0 && (st->steps + 1) % c->stall_every == 0)
                dur_ms += c->stall_ms;
            if (c->partition_ms > 0 && l == c->partition_level && !partitioned &&
                ts >= ls->start_ns + llround(c->partition_at_ms * 1e6)) {
                dur_ms += c->partition_ms; /* sim.h: the link down, as the client sees it */
                partitioned = 1;
            }
            int64_t dur = llround(dur_ms * 1e6);
            if (dur < 1000)
                dur = 1000;
            int64_t te = ts + dur;
            if (c->kill_ns > 0 && te > c->kill_ns) {
                killed = 1;
                break;
            }
            st->steps++;
            if (n_pre == 0)
                st->prefill_free_steps++;
            ls->samples += inc;
            if (n_pre == 0) {
                ls->steady += inc;
                if (n_dec == C)
                    ls->steady_at_c += inc;
            }
            if (c->write_steps)
                fprintf(f, "{\"type\":\"step\",\"start_ns\":%lld,\"dur_ns\":%lld,\"n_decode\":%d,"
                           "\"n_running\":%d,\"prefill_tok\":%d,\"ctx_tok\":0}\n",
                        (long long)ts, (long long)dur, n_dec, n_dec + n_pre,
                        n_pre * c->prompt_tok);
            int ended[4096], n_end = 0;
            for (int i = 0; i < sent; i++) {
                sreq *q = &rq[i];
                if (q->state != R_DECODING)
                    continue;
                add_chunk(q, te, c->max_tokens);
                tokens_so_far++;
                if (q->failing && q->tokens == c->max_tokens / 2)
                    q->ok = 0;
                if (!q->ok || q->tokens == c->max_tokens)
                    ended[n_end++] = i;
            }
            for (int k = 0; k < n_pre; k++) {
                sreq *q = &rq[pre[k]];
                q->state = R_DECODING;
                q->first = te;
                add_chunk(q, te, c->max_tokens);
                tokens_so_far++;
                if (q->tokens == c->max_tokens)
                    ended[n_end++] = pre[k];
            }
            for (int k = 0; k < n_end; k++) {
                sreq *q = &rq[ended[k]];
                q->state = R_DONE;
                q->end = te;
                order[n_done++] = ended[k];
                if (!q->ok)
                    ls->failed++;
                if (sent < n) {
                    rq[sent].state = R_WAITING;
                    rq[sent].send = te;
                    sent++;
                }
            }
            int d_now = 0;
            for (int i = 0; i < sent; i++)
                d_now += rq[i].state == R_DECODING;
            if (ls->ramp_end_ns < 0 && d_now >= C) {
                ls->ramp_end_ns = te;
                ls->ramp_tokens = tokens_so_far;
            }
            t = te;
        }
        for (int k = 0; k < n_done; k++) {
            if (c->burst_every > 0 && l == c->burst_level)
                burst_stamps(&rq[order[k]], c->burst_every);
            if (c->loss_share > 0)
                net_stamps(&rq[order[k]], c, &net);
            write_request(f, l, &rq[order[k]], c);
        }
        if (!killed) {
            fprintf(f, "{\"type\":\"level_end\",\"level\":%d,\"end_ns\":%lld,"
                       "\"interrupted\":false,\"ok\":%d,\"failed\":%d",
                    l, (long long)t, n_done - ls->failed, ls->failed);
            if (c->write_client) {
                double wall_s = (double)(t - ls->start_ns) / 1e9, epr = c->client_events_per_read[l];
                long events = (long)tokens_so_far;
                long reads = epr > 0 ? (long)(events / epr) : events;
                fprintf(f, ",\"client\":{\"threads\":1,\"wall_s\":%.9g,\"cpu_s_max\":%.9g,"
                           "\"cpu_s_sum\":%.9g,\"reads\":%ld,\"events\":%ld}",
                        wall_s, wall_s * c->client_busy[l], wall_s * c->client_busy[l], reads, events);
            }
            fprintf(f, "}\n");
        }
        st->levels_written = l + 1;
        for (int i = 0; i < n; i++)
            free(rq[i].chunk_t);
        free(rq);
        free(order);
        t += 1000000;
    }
    if (c->truncate_tail)
        fprintf(f, "{\"type\":\"request\",\"level\":0,\"send_ns\":12");
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

int sim_load_fit(const char *path, const fit_options *opt, fit_run **run, fit_result **res, char *err,
                 size_t errlen)
{
    *run = NULL;
    *res = NULL;
    if (fit_load_run(path, run, err, errlen))
        return -1;
    if (fit_analyze(*run, opt, res, err, errlen)) {
        fit_run_free(*run);
        *run = NULL;
        return -1;
    }
    return 0;
}

int sim_fit(const char *path, const sim_cfg *c, const fit_options *opt, sim_stats *st, fit_run **run,
            fit_result **res, char *err, size_t errlen)
{
    *run = NULL;
    *res = NULL;
    if (sim_write(path, c, st)) {
        snprintf(err, errlen, "sim_write %s: %s", path, strerror(errno));
        return -1;
    }
    return sim_load_fit(path, opt, run, res, err, errlen);
}
