/* analyze_notes.c: the notes of a fit_result, steps of fit_analyze
 * (analyze.c) after the figures and the law: per level (failures, pauses,
 * bursts, a client that set the pace, the server's cache and counts, what its
 * metrics say), run-wide (how the law was fitted, what it and the reader left
 * out), and why there is no law (fit_result.no_law), in the user's terms.
 * Each note is one fit_note line with its numbers. Definitions: atop each figure's file. */
#include "fit_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The note of a client-bound level: each sign that held, in numbers. */
int fit_note_client_bound(fit_result *res, const fit_run *run, size_t l)
{
    const fit_level *L = &res->levels[l];
    const ll_rec_client *c = &fit_run_level(run, l)->client;
    char why[400] = "";
    size_t n = 0;
    if (L->client_busy_frac >= FIT_CLIENT_BUSY_FRAC)
        n += (size_t)snprintf(why + n, sizeof why - n,
                              "its busiest thread was %.0f%% busy (%.3g s CPU in %.3g s, %d threads)",
                              100 * L->client_busy_frac, c->cpu_s_max, c->wall_s, c->threads);
    if (n < sizeof why && L->client_events_per_read >= FIT_CLIENT_EVENTS_PER_READ &&
        L->burst_gap_frac > FIT_BURST_NOTE_FRAC)
        n += (size_t)snprintf(why + n, sizeof why - n,
                              "%s%.3g token chunks per read with %.0f%% of gaps bursts",
                              n ? "; " : "", L->client_events_per_read, 100 * L->burst_gap_frac);
    if (n < sizeof why && L->client_gap_vs_step < FIT_CLIENT_GAP_FRAC)
        snprintf(why + n, sizeof why - n,
                 "%sits median gap %.3g ms is %.0f%% of the engine's step at C (%.3g ms)",
                 n ? "; " : "", L->itl.p50_ms, 100 * L->client_gap_vs_step,
                 L->itl.p50_ms / L->client_gap_vs_step);
    return fit_note(res, "level %d (C=%d): the client set the pace: %s; its gaps are the client's "
                         "reading, the law is not the server's at this level",
                    L->level, L->concurrency, why);
}

/* Per level: prompts the server's cache served (its responses' cached tokens,
 * else its /metrics), and requests it ended short of what the run asked.
 * chat: the endpoint wraps prompts in a chat template. */
static int notes_said(fit_result *res, const fit_level *L, int chat)
{
    int rc = 0;
    double share = isfinite(L->cache_share) ? L->cache_share : L->server_cache_share;
    if (share > FIT_CACHE_NOTE_FRAC)
        LL_TRY(fit_note(res, "level %d (C=%d): the server served %.0f%% of the prompt tokens from its prefix "
                             "cache (%s): TTFT measures the cache, not prefill; prompts repeated across levels "
                             "or runs, or a shared prefix",
                        L->level, L->concurrency, 100 * share,
                        isfinite(L->cache_share) ? "its responses' cached tokens" : "its /metrics"));
    /* prompts fitted to their lengths carry targets: the estimate's note is not theirs */
    double a = L->prompt_tok_asked, got = L->prompt_tok_server_mean;
    if (a > 0 && isfinite(got) && !isfinite(L->prompt_tok_target_mean) && fabs(got / a - 1) > FIT_PROMPT_EST_DRIFT_FRAC)
        LL_TRY(fit_note(res, "level %d (C=%d): prompts asked for %.0f tokens, built as words without a "
                             "tokenizer (an estimate: the server has no /tokenize); the server counted %.1f "
                             "(%+.1f%%%s): give --tokenizer for exact lengths",
                        L->level, L->concurrency, a, got, 100 * (got / a - 1),
                        chat ? ", its chat template included" : ""));
    if (L->n_cut_short)
        LL_TRY(fit_note(res, "level %d (C=%d): %zu of %zu ok requests ended before max_tokens, not by the "
                             "client's asking (finish: %s): a server limit (context, slot size) or EOS "
                             "despite ignore_eos; their TPOT counts fewer tokens",
                        L->level, L->concurrency, L->n_cut_short, L->n_sent - L->n_sent_failed, L->cut_short_why));
fail:
    return rc;
}

/* Chat: each level's template tokens (the server's count less the bodies'
 * built length), said once for the run with their range. Elsewhere a drift
 * between the built length and the server's count is the tokenizer's. */
static int notes_prompt_len(fit_result *res, int chat)
{
    double lo = INFINITY, hi = -INFINITY, body = NAN, server = NAN;
    int rc = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        fit_level *L = &res->levels[i];
        double t = L->prompt_tok_target_mean, s = L->prompt_tok_server_mean;
        L->prompt_tok_template = NAN;
        if (!(t > 0) || !isfinite(s))
            continue;
        if (chat) {
            L->prompt_tok_template = s - t;
            lo = fmin(lo, s - t);
            hi = fmax(hi, s - t);
            if (!isfinite(body))
                body = t, server = s;
        } else if (fabs(s / t - 1) > FIT_PROMPT_DRIFT_FRAC) {
            LL_TRY(fit_note(res, "level %d (C=%d): prompts built to %.1f tokens on average (the request's head "
                                 "inside), the server counted %.1f (%+.1f%%): its tokenizer differs from the "
                                 "one used, or it adds special tokens",
                            L->level, L->concurrency, t, s, 100 * (s / t - 1)));
        }
    }
    if (isfinite(body) && fabs(lo) < 0.5 && fabs(hi) < 0.5)
        return 0; /* no template (the bundled engine counts the bodies' words alone) */
    if (isfinite(body) && lo == hi)
        LL_TRY(fit_note(res, "the chat template: %.1f tokens per request on top of the prompt's body, at every "
                             "level (the server counted %.1f for bodies built to %.1f)",
                        lo, server, body));
    else if (isfinite(body))
        LL_TRY(fit_note(res, "the chat template: %.1f to %.1f tokens per request on top of the prompt's body over "
                             "the levels (the first: the server counted %.1f for bodies built to %.1f)",
                        lo, hi, server, body));
fail:
    return rc;
}

/* Per level: prompt-length drift and token counts that were not the stream's
 * own, warned once per level with the numbers (not once per request). */
int fit_notes_counts(const fit_run *run, fit_result *res)
{
    const char *ep = fit_run_get_info(run)->endpoint;
    int chat = ep && (strcmp(ep, "chat") == 0 || strcmp(ep, "responses") == 0), rc = 0;
    LL_TRY(notes_prompt_len(res, chat));
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        LL_TRY(notes_said(res, L, chat));
        if (L->n_counts_attributed)
            LL_TRY(fit_note(res, "level %d (C=%d): %zu requests' final usage disagreed with their "
                                 "streams (%zu requests: stream %lld tokens, usage %lld): the "
                                 "usage was attributed over the chunks, the gaps use it",
                            L->level, L->concurrency, L->n_counts_attributed,
                            L->n_counts_attributed + L->n_counts_tokenizer,
                            (long long)L->counts_stream_tok, (long long)L->counts_recorded_tok));
        if (L->n_counts_tokenizer)
            LL_TRY(fit_note(res, "level %d (C=%d): %zu requests without usage were counted with "
                                 "the tokenizer (stream %lld tokens, counted %lld over the %zu "
                                 "requests not counted by their streams)",
                            L->level, L->concurrency, L->n_counts_tokenizer,
                            (long long)L->counts_stream_tok, (long long)L->counts_recorded_tok,
                            L->n_counts_attributed + L->n_counts_tokenizer));
    }
fail:
    return rc;
}

/* Distinct concurrencies among the levels that ran; *c0 the first. */
static int distinct_concurrencies(const fit_result *res, int *c0)
{
    int n = 0;
    *c0 = -1;
    for (size_t l = 0; l < res->n_levels; l++) {
        int c = res->levels[l].concurrency, seen = 0;
        if (!res->levels[l].n_requests || c <= 0)
            continue;
        for (size_t k = 0; k < l; k++)
            seen |= res->levels[k].n_requests && res->levels[k].concurrency == c;
        if (!seen && n++ == 0)
            *c0 = c;
    }
    return n;
}

/* Why law (against the server's N when server) was not fitted, in the
 * user's terms. */
static void law_reason(const fit_result *res, const fit_law *law, int server, char *why, size_t len)
{
    int c0, distinct_c = distinct_concurrencies(res, &c0);
    size_t n_req = 0;
    for (size_t l = 0; l < res->n_levels; l++)
        n_req += res->levels[l].n_requests;
    if (res->n_levels == 0 || n_req == 0)
        /* what a sweep stopped before its first level ended leaves behind */
        snprintf(why, len, "no request was recorded in any level: nothing to fit step(N) = a + b*N to");
    else if (law->n_points == 0 && server && !res->law_server_scrapes)
        snprintf(why, len, "no scrape of the server's running-requests gauge inside any level: nothing to "
                           "fit to");
    else if (law->n_points == 0 && server)
        snprintf(why, len, "no steady step between two consecutive scrapes of the server's running gauge "
                           "that agree (%zu scrapes in the levels): its N at no step is known",
                 res->law_server_scrapes);
    else if (law->n_points == 0)
        snprintf(why, len, "no steady step (prefill or a change of N in every gap): nothing to fit "
                           "step(N) = a + b*N to");
    else if (distinct_c == 1 && law->n_distinct <= 1)
        snprintf(why, len, "one concurrency swept (C=%d): a line needs at least two distinct N", c0);
    else if (law->n_distinct <= 1 && server)
        snprintf(why, len, "one server N (%zu steady step points between agreeing scrapes): a line needs "
                           "at least two distinct N; longer levels give more scrapes",
                 law->n_points);
    else if (law->n_distinct <= 1)
        snprintf(why, len, "steady steps at one N only (%zu points): a line needs at least two distinct N",
                 law->n_points);
    else
        snprintf(why, len, "%zu steady step points over %zu distinct N: a line needs 3 points and 2 distinct N",
                 law->n_points, law->n_distinct);
}

/* Why there is no law, in the user's terms (fit_result.no_law). */
void fit_no_law_reason(fit_result *res)
{
    res->no_law[0] = '\0';
    if (!res->law.ok)
        law_reason(res, &res->law, fit_law_n_is_server(res), res->no_law, sizeof res->no_law);
}

/* The law against the server's N beside the client's (analyze_law.c "The law
 * against the server's N"): the steps no agreeing scrapes described, and
 * why it was not fitted when the client's was. */
static int notes_server_law(fit_result *res)
{
    int rc = 0, server = fit_law_n_is_server(res);
    const fit_law *srv = server ? &res->law : &res->law_other, *cli = server ? &res->law_other : &res->law;
    char why[sizeof res->no_law];
    if (!res->law_server_scrapes)
        return 0;
    if (cli->n_samples > srv->n_samples)
        LL_TRY(fit_note(res, "%zu of %zu steady step samples not between two consecutive scrapes of the "
                             "server's running gauge that agree: left out of the law against the server's N",
                        cli->n_samples - srv->n_samples, cli->n_samples));
    if (!server && res->law.ok && !srv->ok) {
        law_reason(res, srv, 1, why, sizeof why);
        LL_TRY(fit_note(res, "no law against the server's N: %s", why));
    }
fail:
    return rc;
}

int fit_notes_for_levels(fit_result *res)
{
    int rc = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (L->n_failed)
            LL_TRY(fit_note(res, "level %d (C=%d): %zu failed requests left out of the samples "
                                 "(their time still counts as occupancy)",
                            L->level, L->concurrency, L->n_failed));
        if (L->interrupted)
            LL_TRY(fit_note(res, "level %d (C=%d): interrupted; %zu samples after the last full "
                                 "occupancy left out (requests in flight were never recorded)",
                            L->level, L->concurrency, L->n_samples_after_cut));
        double typical = 1000.0 * L->concurrency / L->steady_step_ms;
        if (isfinite(L->steady_tok_per_s) && isfinite(typical) &&
            fabs(L->steady_tok_per_s / typical - 1) > 0.05)
            LL_TRY(fit_note(res, "level %d (C=%d): steady throughput %.4g tok/s is %.0f%% off the "
                                 "typical step's %.4g: pauses (server or client) inside steady "
                                 "decode; the law leaves steps beyond %g robust sd out, the throughput "
                                 "keeps them",
                            L->level, L->concurrency, L->steady_tok_per_s,
                            100 * (L->steady_tok_per_s / typical - 1), typical, FIT_TRIM_SD));
        if (L->burst_gap_frac > FIT_BURST_NOTE_FRAC)
            LL_TRY(fit_note(res, "level %d (C=%d): %.0f%% of gaps under %.3g ms (a tenth of the "
                                 "level's 90th-percentile gap): the client read in bursts; "
                                 "timing at this level is unreliable",
                            L->level, L->concurrency, 100 * L->burst_gap_frac, L->burst_gap_ms));
        if (L->n_steady_samples == 0 && L->n_samples)
            LL_TRY(fit_note(res, "level %d (C=%d): no steady sample (prefill in every gap)",
                            L->level, L->concurrency));
        if (L->closed_loop && L->concurrency > 0 && !L->ramp_reached && L->n_requests)
            LL_TRY(fit_note(res, "level %d (C=%d): D never reached C; no ramp end, no steady window",
                            L->level, L->concurrency));
    }
fail:
    return rc;
}

/* What the server's own metrics say against the client's view (server.c
 * "Server figures"). */
int fit_notes_server(fit_result *res)
{
    int rc = 0;
    for (size_t i = 0; i < res->n_levels; i++) {
        const fit_level *L = &res->levels[i];
        if (L->server_n_disagrees)
            LL_TRY(fit_note(res, "level %d (C=%d): the server ran N = %.3g sequences while the client held "
                                 "D = %d (more than %.0f%% + %.0f apart): another tenant on the server, or it "
                                 "caps its batch; the law's N is the client's",
                            L->level, L->concurrency, L->server_n, L->concurrency, 100 * FIT_SERVER_N_REL,
                            FIT_SERVER_N_ABS));
        if (L->server_stale_s > FIT_SGLANG_STALE_S)
            LL_TRY(fit_note(res, "level %d (C=%d): SGLang's gauges held one value for %.3g s while the "
                                 "level ran: it refreshes them every --decode-log-interval steps (default "
                                 "40); start it with --decode-log-interval 1 for per-level server figures",
                            L->level, L->concurrency, L->server_stale_s));
    }
fail:
    return rc;
}

/* Measured ok requests that got more tokens than the max_tokens they asked
 * (request "max_tokens", fit_request_tokens_got; counted while the run was
 * read: fit_run_tally): a server that does not honour the cap sends longer
 * outputs, and a heavier load, than the scenario asked; the figures hold for
 * what it sent, not for the workload named. */
static int note_over_max(const fit_run *run, fit_result *res)
{
    const fit_run_tally *t = fit_run_get_tally(run);
    if (!t->n_over_max)
        return 0;
    return fit_note(res, "%zu of %zu ok requests got more tokens than the max_tokens they asked (up to %lld "
                         "for %lld): the server does not honour max_tokens; outputs, and the load, were longer "
                         "than the scenario asked",
                    t->n_over_max, t->n_ok_measured, (long long)t->over_got_tok, (long long)t->over_cap_tok);
}

/* Run-wide notes: what the server sent beyond what was asked, how the law was
 * fitted and what it or the reader left out. */
int fit_notes_left_out(const fit_run *run, const fit_options *opt, fit_result *res)
{
    const fit_law *law = &res->law;
    const fit_run_info *info = fit_run_get_info(run);
    size_t ns = res->n_samples, n_steady = 0, n_used = law->n_samples;
    int rc = 0;
    LL_TRY(note_over_max(run, res));
    for (size_t l = 0; l < res->n_levels; l++)
        n_steady += res->levels[l].n_steady_samples;
    if (!law->ok)
        LL_TRY(fit_note(res, "no law: %s", res->no_law));
    if (law->ok && res->law_client_bound)
        LL_TRY(fit_note(res, "the law is not the server's: levels whose steps made it were "
                             "client-bound (notes above); rerun with more threads, fewer "
                             "streams, or a slower server"));
    if (law->ok && law->note[0])
        LL_TRY(fit_note(res, "law fitted by %s: %s", law->method, law->note));
    if (law->ok && !law->converged && strcmp(law->method, "trimmed-wls") == 0)
        LL_TRY(fit_note(res, "robust pass: iteration limit reached; outliers were marked from its "
                             "last iterate"));
    if (law->n_trimmed)
        LL_TRY(fit_note(res, "%zu of %zu step points more than %g robust sd from the healthy steps at their N "
                             "(stalls, burst reads) left out of the law", law->n_trimmed, law->n_points,
                        FIT_TRIM_SD));
    if (law->ok && !(law->b_ms > 0))
        LL_TRY(fit_note(res, "slope b <= 0: step time does not grow with N here; no asymptote"));
    else if (law->ok && !fit_law_slope_resolved(law))
        LL_TRY(fit_note(res, "slope b's 95%% interval [%.4g, %.4g] ms includes 0: step time does not measurably "
                             "grow with N over these levels; no ceiling (1/b) or N1/2 claimed",
                        law->b_ci_ms[0], law->b_ci_ms[1]));
    if (res->n_warmup && !opt->include_warmup)
        LL_TRY(fit_note(res, "%zu warmup requests: no samples from them", res->n_warmup));
    if (res->n_truncated_lines)
        LL_TRY(fit_note(res, "truncated last line of records.jsonl skipped (interrupted writer)"));
    if (res->n_rejected_records)
        LL_TRY(fit_note(res, "%zu records rejected by the reader (%zu values out of range)",
                        res->n_rejected_records, res->n_out_of_range));
    if (info->n_bad_requests)
        LL_TRY(fit_note(res, "%zu request lines without usable times or chunks dropped",
                        info->n_bad_requests));
    if (res->n_clamped)
        LL_TRY(fit_note(res, "%zu request times clamped to keep send <= first token <= end "
                             "(a first token before the send, or an end before a token)",
                        res->n_clamped));
    if (ns > n_steady)
        LL_TRY(fit_note(res, "%zu of %zu step samples not steady (prefill in the gap or D "
                             "changed): left out of the law, kept in the naive fit",
                        ns - n_steady, ns));
    if (fit_law_n_is_server(res))
        n_used = res->law_other.n_samples; /* the client's steps: the server's are counted below */
    LL_TRY(notes_server_law(res));
    if (n_steady > n_used)
        LL_TRY(fit_note(res, "%zu steady step samples of closed-loop levels at N below C (the "
                             "ramp-down, where N falls every step and the client's read lag "
                             "with it) left out of the law",
                        n_steady - n_used));
fail:
    return rc;
}
