/* share.c: what rank 0 of a K-rank sweep tells the others before any
 * level runs (dist.h carries it): the job (the effective scenario, the
 * run directory, the key, the output switches) and the target (the bundled
 * engine's URL and model, which only rank 0 hosts). Every rank ends with
 * rank 0's outcome, so a usage error on rank 0 ends them all alike; a rank
 * that fails on its own is not synced (dist_end then aborts the job). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "dist.h"
#include "internal.h"

/* A rank on another host than rank 0 reaches rank 0's bundled engine by
 * rank 0's host name (the engine must then listen beyond loopback: --engine
 * host=0.0.0.0). url is malloc'ed; returns it or a malloc'ed rewrite. */
static char *engine_url_from_here(char *url, const char *host0)
{
    static const char loop[] = "http://127.0.0.1:";
    char here[256] = "";
    if (gethostname(here, sizeof here) != 0 || strcmp(here, host0) == 0 || strncmp(url, loop, sizeof loop - 1) != 0)
        return url;
    size_t n = strlen(host0) + strlen(url) + 16;
    char *named = malloc(n);
    if (!named)
        return url;
    snprintf(named, n, "http://%s:%s", host0, url + sizeof loop - 1);
    free(url);
    return named;
}

/* K ranks: rank 0's target (its outcome, URL, model and host name) to every
 * rank; the bundled engine runs on rank 0 only. *hold_url and *hold_model
 * keep the strings on the others (caller frees). Returns rank 0's outcome on
 * every rank. */
int sweep_share_target(const sweep_job *j, int ret, const char **url, const char **model, char **hold_url,
                        char **hold_model)
{
    char err[512] = "", *text = NULL, host[256] = "";
    int rank = dist_rank(j->mpi);
    if (rank == 0) {
        const char *u = ret == SWEEP_OK ? *url : "", *m = ret == SWEEP_OK ? *model : "";
        if (gethostname(host, sizeof host) != 0)
            host[0] = '\0';
        host[sizeof host - 1] = '\0';
        size_t n = strlen(u) + strlen(m) + strlen(host) + 32;
        if (!(text = malloc(n)))
            return SWEEP_FAIL; /* the others then wait for a job that never comes: dist_end aborts */
        snprintf(text, n, "%d\n%s\n%s\n%s", ret, u, m, host);
    }
    if (dist_bcast(j->mpi, &text, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: rank %d: %s\n", rank, err);
        if (rank == 0)
            free(text);
        return SWEEP_FAIL;
    }
    if (rank == 0) {
        free(text);
        return ret;
    }
    char *u = strchr(text, '\n'), *m = u ? strchr(u + 1, '\n') : NULL, *h = m ? strchr(m + 1, '\n') : NULL;
    ret = (int)strtol(text, NULL, 10);
    if (h) {
        *u = *m = *h = '\0';
        *hold_url = strdup(u + 1);
        *hold_model = strdup(m + 1);
        if (*hold_url)
            *hold_url = engine_url_from_here(*hold_url, h + 1);
    }
    free(text);
    if (!h || !*hold_url || !*hold_model)
        return SWEEP_FAIL;
    *url = *hold_url;
    *model = *hold_model;
    return ret;
}

/* The scenario's headers as rank 0 sends them: scn_to_json redacts the
 * values of secret-looking ones ("X-Api-Key: (hidden)"), which the others
 * would then send. The job carries them whole, as it carries the key, and
 * the others put them back. */
static int add_headers(cJSON *job, const scn_scenario *s)
{
    cJSON *a = cJSON_AddArrayToObject(job, "headers");
    for (size_t i = 0; a && i < s->n_headers; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(s->headers[i])))
            return -1;
    return a ? 0 : -1;
}

static int restore_headers(scn_scenario *s, const cJSON *a)
{
    size_t n = (size_t)cJSON_GetArraySize(a);
    if (!cJSON_IsArray(a) || n != s->n_headers)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *h = cJSON_GetStringValue(cJSON_GetArrayItem(a, (int)i));
        char *d = h ? strdup(h) : NULL;
        if (!d)
            return -1;
        free(s->headers[i]);
        s->headers[i] = d;
    }
    return 0;
}

/* The job's members after the scenario, when prepare went on; 0 or -1
 * (out of memory). */
static int add_job_fields(cJSON *job, const scn_scenario *s, const char *run_dir, const char *key,
                          int quiet, int no_report)
{
    if (!cJSON_AddStringToObject(job, "run_dir", run_dir) ||
        (s->path && !cJSON_AddStringToObject(job, "path", s->path)) ||
        (key && key[0] && !cJSON_AddStringToObject(job, "api_key", key)) || add_headers(job, s) ||
        !cJSON_AddBoolToObject(job, "quiet", quiet) || !cJSON_AddBoolToObject(job, "no_report", no_report))
        return -1;
    return 0;
}

/* Rank 0's job as text (cJSON_free), or NULL when it could not be built:
 * its outcome ret and, when ret is SWEEP_GO_ON, the scenario and the rest. */
static char *print_job(int ret, const scn_scenario *s, const char *run_dir, const char *key, int quiet,
                       int no_report)
{
    int go_on = ret == SWEEP_GO_ON;
    cJSON *job = cJSON_CreateObject(), *sj = go_on ? scn_to_json(s) : NULL;
    int bad = !job || !cJSON_AddNumberToObject(job, "rc", ret) || (go_on && !sj);
    if (sj && !bad) {
        if (cJSON_AddItemToObject(job, "scenario", sj))
            sj = NULL; /* job owns it now */
        else
            bad = 1;
    }
    if (!bad && go_on && add_job_fields(job, s, run_dir, key, quiet, no_report))
        bad = 1;
    char *text = bad ? NULL : cJSON_PrintUnformatted(job);
    cJSON_Delete(sj);
    cJSON_Delete(job);
    return text;
}

/* Rank 0: broadcast printed (taken and freed) and return the outcome every
 * rank ends with. It broadcasts even when it could not build the job:
 * every rank must learn that there is none. */
static int send_job(dist_world *mpi, int ret, char *printed)
{
    char err[1024] = "", no_job[] = "{\"rc\":1}", *text = printed;
    if (!text) {
        text = no_job;
        ret = SWEEP_FAIL;
    }
    int brc = dist_bcast(mpi, &text, err, sizeof err);
    cJSON_free(printed);
    if (brc)
        fprintf(stderr, "loadlaw sweep: %s\n", err);
    else if (ret != SWEEP_GO_ON)
        dist_synced(mpi); /* every rank ends with this code */
    return brc ? SWEEP_FAIL : ret;
}

/* Another rank: rebuild rank 0's scenario from the job into *scn; 0, or -1
 * with err. scn_to_json's text loads back as the same scenario ("defaults"
 * included); the headers come back whole. */
static int load_job_scenario(const cJSON *job, scn_scenario **scn, char *err, size_t errlen)
{
    const cJSON *sj = cJSON_GetObjectItemCaseSensitive(job, "scenario");
    char *sj_text = sj ? cJSON_PrintUnformatted(sj) : NULL;
    int bad = !sj_text || scn_load_string(sj_text, "rank 0's scenario", scn, err, errlen) ||
              scn_set_str(&(*scn)->path, ll_json_str(job, "path", NULL)) ||
              (restore_headers(*scn, cJSON_GetObjectItemCaseSensitive(job, "headers")) &&
               snprintf(err, errlen, "its headers do not match its scenario's")) ||
              scn_validate(*scn, err, errlen);
    cJSON_free(sj_text);
    return bad ? -1 : 0;
}

/* Another rank: receive the job and take what it says; returns rank 0's
 * outcome (SWEEP_FAIL when the job is missing or malformed). The parsed job
 * goes to *hold once received. */
static int take_job(dist_world *mpi, int rank, int *quiet, int *no_report, scn_scenario **scn,
                    char *run_dir, size_t n, const char **key, cJSON **hold)
{
    char err[1024] = "", *text = NULL;
    if (dist_bcast(mpi, &text, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: rank %d: %s\n", rank, err);
        return SWEEP_FAIL;
    }
    cJSON *job = cJSON_ParseWithOpts(text, NULL, 1);
    free(text);
    *hold = job;
    int ret = job ? (int)ll_json_num(job, "rc", SWEEP_FAIL) : SWEEP_FAIL;
    if (job && ret != SWEEP_GO_ON)
        dist_synced(mpi); /* rank 0's own outcome: all ranks end alike */
    if (ret != SWEEP_GO_ON)
        return ret;
    if (load_job_scenario(job, scn, err, sizeof err)) {
        fprintf(stderr, "loadlaw sweep: rank %d: the job from rank 0: %s\n", rank, err[0] ? err : "malformed");
        return SWEEP_FAIL;
    }
    snprintf(run_dir, n, "%s", ll_json_str(job, "run_dir", "."));
    *key = ll_json_str(job, "api_key", NULL);
    *quiet = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(job, "quiet"));
    *no_report = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(job, "no_report"));
    return SWEEP_GO_ON;
}

/* K ranks: rank 0's outcome of prepare and, when it went on, the effective
 * scenario (scn_to_json: flags already laid over it), its headers whole,
 * the run directory, the key and the output switches, to every rank. The others rebuild the
 * scenario with scn_load_string. Returns rank 0's outcome everywhere (so a
 * usage error ends every rank with 2); strings the others need stay in
 * *hold (cJSON; caller deletes). */
int sweep_share_job(dist_world *mpi, int ret, int *quiet, int *no_report, scn_scenario **scn, char *run_dir,
                    size_t n, const char **key, cJSON **hold)
{
    int rank = dist_rank(mpi);
    if (rank == 0)
        return send_job(mpi, ret, print_job(ret, *scn, run_dir, *key, *quiet, *no_report));
    return take_job(mpi, rank, quiet, no_report, scn, run_dir, n, key, hold);
}
