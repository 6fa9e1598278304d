/* profile_wait.c: the wait after a profiled level (lg_internal.h lg_prof),
 * so that no later level is measured against a server still writing its
 * trace or still slowed by its profiler.
 *
 * Two conditions, in turn, on the driver thread (no level runs meanwhile):
 *   1. the trace files stopped growing: where the server's trace folder is
 *      seen from here (lg_config.profile_dir), the files new or changed
 *      since before the level, polled every PROF_POLL_NS, until their count
 *      and sizes held for PROF_STILL_NS. A server that writes nothing for
 *      PROF_FIRST_NS has written all it will (vLLM answered its stop only
 *      when its worker had written; SGLang starts at once after num_steps).
 *      While they grow the wait goes on, up to PROF_FILES_MAX_NS.
 *   2. the server's pace: a probe (as many short streamed requests of the
 *      run's API as the next level's C, at most LG_PROF_BURST_MAX, at once;
 *      PROF_PROBE_TOK tokens each; the slowest timed whole) until one takes
 *      at most LG_PROF_PACE_FACTOR times the quickest of the probes before
 *      the level. A burst, not one request: after vLLM's profiler stopped,
 *      one request came back at its old pace while the next level's first
 *      16 then waited 4.3 s for their first token (a pause under load that
 *      one request did not meet; docs/profiling.md). It gives up after the
 *      level's pace_wait_s (scenario.h; 120 s by default, 0: no probe at
 *      all) plus PROF_PACE_S_PER_MB for each MB the capture wrote (a bigger
 *      trace, a longer flush), at most PROF_PACE_MAX_S, and says so; the
 *      record keeps settled false.
 * Progress goes to stderr every PROF_SAY_NS. */
#include "lg_internal.h"

#include <dirent.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "http1.h"

#define PROF_POLL_NS 500000000LL
#define PROF_STILL_NS 3000000000LL
#define PROF_FIRST_NS 10000000000LL
#define PROF_FILES_MAX_NS (30LL * 60 * 1000000000)
#define PROF_SAY_NS 5000000000LL
#define PROF_PROBE_TOK 16
#define PROF_PROBE_TIMEOUT_MS 120000L
#define PROF_PACE_S_PER_MB 2.0
#define PROF_PACE_MAX_S 1800.0
/* A probe within this factor of the idle server's quickest is back at its
 * pace: a probe's spread on an idle server is ~10-30% on a shared machine,
 * a profiler still writing or capturing slows one several-fold. */
#define LG_PROF_PACE_FACTOR 1.5

/* A trace's name: a .json or .json.gz (torch's *.pt.trace.json.gz, the
 * engine's loadlaw-*.pt.trace.json), not a run's records.jsonl beside it. */
static int is_trace(const char *name)
{
    size_t n = strlen(name);
    return (n > 5 && !strcmp(name + n - 5, ".json")) || (n > 8 && !strcmp(name + n - 8, ".json.gz"));
}

static void scan_into(const char *dir, int depth, lg_prof_files *out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) && out->n < LG_PROF_MAX_FILES) {
        char p[sizeof out->f[0].path];
        struct stat st;
        if (e->d_name[0] == '.' || snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p ||
            lstat(p, &st))
            continue;
        if (S_ISDIR(st.st_mode) && depth < 1) {
            scan_into(p, depth + 1, out);
        } else if (S_ISREG(st.st_mode) && is_trace(e->d_name)) {
            lg_prof_file *f = &out->f[out->n++];
            memcpy(f->path, p, sizeof p);
            f->bytes = (int64_t)st.st_size;
            f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
    }
    closedir(d);
}

void lg_prof_scan(const char *dir, lg_prof_files *out)
{
    out->n = 0;
    scan_into(dir, 0, out);
}

static const lg_prof_file *find(const lg_prof_files *fs, const char *path)
{
    for (size_t i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].path, path))
            return &fs->f[i];
    return NULL;
}

/* The folder's files new or changed since `before`, added to w (a path
 * already there, the engine's answer, gets its size); their total bytes. */
static int64_t changed(const lg_prof_files *now, const lg_prof_files *before, lg_prof_files *w)
{
    int64_t total = 0;
    for (size_t i = 0; i < now->n; i++) {
        const lg_prof_file *f = &now->f[i], *b = find(before, f->path);
        if (b && b->bytes == f->bytes && b->mtime_ns == f->mtime_ns)
            continue;
        lg_prof_file *k = (lg_prof_file *)find(w, f->path);
        if (!k && w->n < LG_PROF_MAX_FILES)
            k = &w->f[w->n++];
        if (k)
            *k = *f;
        total += f->bytes;
    }
    return total;
}

/* The sizes of the files named without a folder (the bundled engine's
 * answer, when no --profile-dir was given). */
static void stat_named(lg_prof_files *w)
{
    for (size_t i = 0; i < w->n; i++) {
        struct stat st;
        if (stat(w->f[i].path, &st) == 0)
            w->f[i].bytes = (int64_t)st.st_size;
    }
}

void lg_prof_wait_files(const lg_run *r, int level, lg_prof *p)
{
    if (!r->profile_dir) {
        stat_named(&p->wrote);
        return;
    }
    int64_t t0 = ll_now_ns(), still_since = t0, said = t0, last_total = -1;
    size_t last_n = 0;
    for (;;) {
        lg_prof_files now;
        lg_prof_scan(r->profile_dir, &now);
        int64_t total = changed(&now, &p->before, &p->wrote), t = ll_now_ns();
        if (total != last_total || p->wrote.n != last_n) {
            last_total = total;
            last_n = p->wrote.n;
            still_since = t;
        }
        if ((p->wrote.n > 0 && t - still_since >= PROF_STILL_NS) || (p->wrote.n == 0 && t - t0 >= PROF_FIRST_NS) ||
            t - t0 >= PROF_FILES_MAX_NS)
            break;
        if (t - said >= PROF_SAY_NS) {
            fprintf(stderr, "loadlaw: level %d: the server is writing its trace: %zu file(s), %.1f MB in %s (%.0f s)\n",
                    level, p->wrote.n, (double)total / 1e6, r->profile_dir, (double)(t - t0) / 1e9);
            said = t;
        }
        ll_sleep_until_ns(t + PROF_POLL_NS);
    }
}

/* The probe's body: the scenario's API, model and limits, a short prompt,
 * streamed (so it is asked the way the level's requests were). */
static int probe_body(const lg_run *r, ll_buf *b)
{
    const lg_api *api = r->api;
    int rc;
    LL_TRY(ll_buf_append(b, "{", 1));
    if (api->sends_model) {
        LL_TRY(lg_body_key(b, "model"));
        LL_TRY(ll_json_escape(b, r->model));
    }
    LL_TRY(api->put_prompt(b, r->scn, "", "Count from one to twenty.", 0));
    LL_TRY(api->put_limits(b, r->scn, PROF_PROBE_TOK, 0));
    LL_TRY(lg_body_key(b, "stream") || ll_buf_printf(b, "true"));
    LL_TRY(ll_buf_append(b, "}", 1));
fail:
    return rc;
}

static double probe_one(const lg_run *r)
{
    char err[320];
    ll_buf body = {0}, resp = {0};
    long status = 0;
    double ms = NAN;
    if (probe_body(r, &body) == 0) {
        ll_http1_opts o = {.url = r->url_full, .content_type = "application/json", .api_key = r->api_key,
                           .headers = r->scn->headers, .n_headers = r->scn->n_headers, .max_bytes = 4096,
                           .keep_head = 1, .timeout_ms = PROF_PROBE_TIMEOUT_MS};
        int64_t t0 = ll_now_ns();
        if (ll_http1_once(&o, body.p, &resp, &status, err, sizeof err) == 0 && status == 200)
            ms = (double)(ll_now_ns() - t0) / 1e6;
    }
    ll_buf_free(&body);
    ll_buf_free(&resp);
    return ms;
}

typedef struct probe_job {
    const lg_run *r;
    pthread_t thread;
    double ms;
} probe_job;

static void *probe_main(void *arg)
{
    probe_job *j = arg;
    j->ms = probe_one(j->r);
    return NULL;
}

double lg_prof_probe(const lg_run *r, int n)
{
    probe_job jobs[LG_PROF_BURST_MAX];
    int started = 0;
    double worst = 0;
    n = n < 1 ? 1 : n > LG_PROF_BURST_MAX ? LG_PROF_BURST_MAX : n;
    for (int i = 0; i < n; i++) {
        jobs[i] = (probe_job){.r = r, .ms = NAN};
        if (i > 0 && pthread_create(&jobs[i].thread, NULL, probe_main, &jobs[i]) == 0)
            started |= 1 << i;
    }
    jobs[0].ms = probe_one(r); /* the caller's own thread takes one */
    for (int i = 1; i < n; i++)
        if (started & (1 << i))
            pthread_join(jobs[i].thread, NULL);
    for (int i = 0; i < n; i++) {
        if (!(i == 0 || (started & (1 << i))) || !isfinite(jobs[i].ms))
            return NAN; /* a probe failed or was not sent: no pace to read */
        worst = fmax(worst, jobs[i].ms);
    }
    return worst;
}

int lg_prof_wait_pace(const lg_run *r, int level, double base_s, const lg_prof *p, double *last_ms)
{
    int64_t bytes = 0;
    for (size_t i = 0; i < p->wrote.n; i++)
        bytes += p->wrote.f[i].bytes;
    double limit_s = fmin(base_s + PROF_PACE_S_PER_MB * (double)bytes / 1e6, PROF_PACE_MAX_S);
    double want_ms = LG_PROF_PACE_FACTOR * p->probe_ref_ms;
    int64_t t0 = ll_now_ns(), said = t0;
    *last_ms = NAN;
    if (!isfinite(p->probe_ref_ms))
        return 0;
    for (;;) {
        *last_ms = lg_prof_probe(r, p->burst);
        int64_t t = ll_now_ns();
        double s = (double)(t - t0) / 1e9;
        if (*last_ms <= want_ms) {
            fprintf(stderr, "loadlaw: level %d: the server is back at its pace (a probe %.0f ms, %.0f before the "
                    "capture) after %.1f s; the next level starts\n", level, *last_ms, p->probe_ref_ms, s);
            return 1;
        }
        if (s >= limit_s) {
            ll_warn("level %d: the server is not back at its pace after %.0f s (a probe %.0f ms, %.0f before the "
                    "capture): the next level starts all the same", level, s, *last_ms, p->probe_ref_ms);
            return 0;
        }
        if (t - said >= PROF_SAY_NS) {
            fprintf(stderr, "loadlaw: level %d: waiting for the server's pace: a probe %.0f ms, want %.0f "
                    "(%.0f s of at most %.0f)\n", level, *last_ms, want_ms, s, limit_s);
            said = t;
        }
        ll_sleep_until_ns(t + PROF_POLL_NS);
    }
}
