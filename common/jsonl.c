/* jsonl.c: line-per-object JSON files, flushed per line, read back tolerantly.
 *
 * The writer is shared by loadgen workers, which write one line per finished
 * request: a mutex per line is off the per-token hot path. */
#include "common.h"

#include <math.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct ll_jsonl_writer {
    FILE *f;
    pthread_mutex_t mu;
    int failed;
};

int ll_jsonl_open(const char *path, int append, ll_jsonl_writer **out, char *err, size_t errlen)
{
    ll_jsonl_writer *w = calloc(1, sizeof *w);
    if (!w)
        return LL_ENOMEM;
    w->f = fopen(path, append ? "a" : "w");
    if (!w->f) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        free(w);
        return LL_EIO;
    }
    pthread_mutex_init(&w->mu, NULL);
    *out = w;
    return 0;
}

int ll_jsonl_write_raw(ll_jsonl_writer *w, const char *line)
{
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    if (fputs(line, w->f) < 0 || fputc('\n', w->f) < 0 || fflush(w->f) != 0) {
        w->failed = 1;
        rc = LL_EIO;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int ll_jsonl_write(ll_jsonl_writer *w, const cJSON *obj)
{
    char *s = cJSON_PrintUnformatted(obj);
    if (!s)
        return LL_ENOMEM;
    int rc = ll_jsonl_write_raw(w, s);
    cJSON_free(s);
    return rc;
}

int ll_jsonl_close(ll_jsonl_writer *w)
{
    if (!w)
        return 0;
    int rc = fclose(w->f) != 0 || w->failed ? LL_EIO : 0;
    pthread_mutex_destroy(&w->mu);
    free(w);
    return rc;
}

int ll_jsonl_foreach(const char *path, ll_jsonl_cb cb, void *ctx, size_t *skipped,
                     char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        return LL_EIO;
    }
    char *line = NULL;
    size_t cap = 0, line_no = 0;
    ssize_t n;
    int rc = 0;
    if (skipped)
        *skipped = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        line_no++;
        int complete = line[n - 1] == '\n';
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0)
            continue;
        const char *end = NULL;
        cJSON *obj = cJSON_ParseWithOpts(line, &end, 1);
        if (!obj || !cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            if (!complete) {
                /* The last line of a killed writer: drop it, keep the rest. */
                ll_warn("%s:%zu: truncated last line skipped", path, line_no);
                if (skipped)
                    (*skipped)++;
                break;
            }
            size_t at = end && end >= line ? (size_t)(end - line) : 0;
            ll_errf(err, errlen, "%s:%zu: malformed JSON line near byte %zu", path, line_no, at);
            rc = LL_EPARSE;
            break;
        }
        rc = cb(obj, line_no, ctx);
        cJSON_Delete(obj);
        if (rc)
            break;
    }
    free(line);
    fclose(f);
    return rc;
}

double ll_json_num(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

int64_t ll_json_i64(const cJSON *obj, const char *key, int64_t dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    /* cJSON keeps numbers as double: exact for integers below 2^53 ns (104 days).
     * Outside +-2^63 the cast is undefined: a corrupt file gets the default. */
    if (!cJSON_IsNumber(it) || !(it->valuedouble > -9.2e18 && it->valuedouble < 9.2e18))
        return dflt;
    return (int64_t)it->valuedouble;
}

const char *ll_json_str(const cJSON *obj, const char *key, const char *dflt)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? it->valuestring : dflt;
}

int ll_json_add_num(cJSON *obj, const char *key, double v)
{
    cJSON *x = isfinite(v) ? cJSON_AddNumberToObject(obj, key, v) : cJSON_AddNullToObject(obj, key);
    return x ? 0 : LL_ENOMEM;
}
