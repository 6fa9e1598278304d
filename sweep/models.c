/* models.c: the model name a sweep asks for when none was given: the
 * server's only one, from GET /v1/models.
 *
 * DESIGN: one blocking libcurl request before the run starts (5 s at most),
 * with the requests' credentials (the bearer key, the secret-named headers:
 * the same origin as the requests by construction). llama.cpp's server and
 * most single-model deployments list exactly one model; a server listing
 * none or several still needs --model, and the message lists what it
 * offers. */
#include <curl/curl.h>
#include <string.h>

#include "common.h"
#include "internal.h"

#define MODELS_MAX_BYTES (1u << 20)

static size_t on_body(char *p, size_t sz, size_t nm, void *ctx)
{
    ll_buf *b = ctx;
    size_t n = sz * nm;
    if (b->len + n > MODELS_MAX_BYTES || ll_buf_append(b, p, n))
        return 0;
    return n;
}

/* GET url into body with the credentials; 0, or LL_EIO with why. */
static int fetch(const char *url, const char *api_key, char *const *headers, size_t n_headers, ll_buf *body,
                 char *err, size_t errlen)
{
    char cerr[CURL_ERROR_SIZE] = "";
    struct curl_slist *hl = NULL, *t;
    int rc = LL_ENOMEM;
    CURL *e = curl_easy_init();
    char *bearer = api_key ? ll_bearer_header(api_key) : NULL;
    if (!e || (api_key && !bearer) || (bearer && !(hl = curl_slist_append(hl, bearer))))
        goto done;
    for (size_t i = 0; i < n_headers; i++) {
        if (!ll_secret_name(headers[i], strcspn(headers[i], ":")))
            continue;
        if (!(t = curl_slist_append(hl, headers[i])))
            goto done;
        hl = t;
    }
    long status = 0;
    CURLcode cc;
    if ((cc = curl_easy_setopt(e, CURLOPT_URL, url)) || (cc = curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L)) ||
        (cc = curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl)) ||
        (cc = curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body)) ||
        (cc = curl_easy_setopt(e, CURLOPT_WRITEDATA, body)) ||
        (cc = curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr)) ||
        (cc = curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L)) || (cc = curl_easy_perform(e))) {
        ll_errf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(cc));
        rc = LL_EIO;
        goto done;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    rc = status == 200 ? 0 : LL_EIO;
    if (rc)
        ll_errf(err, errlen, "HTTP %ld", status);
done:
    for (struct curl_slist *h = hl; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data)); /* keys: not left in freed memory */
    curl_slist_free_all(hl);
    ll_wipe_free(bearer);
    if (e)
        curl_easy_cleanup(e);
    return rc;
}

int sweep_only_model(const char *url, const char *api_key, char *const *headers, size_t n_headers, char *out,
                     size_t n, char *err, size_t errlen)
{
    char models_url[2048];
    ll_buf body = {0};
    int rc;
    if (ll_url_join(url, "/v1", "/v1/models", models_url, sizeof models_url)) {
        ll_errf(err, errlen, "the URL is too long");
        return LL_ERANGE;
    }
    char why[CURL_ERROR_SIZE + 32] = "";
    if ((rc = fetch(models_url, api_key, headers, n_headers, &body, why, sizeof why))) {
        ll_errf(err, errlen, "GET /v1/models: %s", rc == LL_ENOMEM ? "out of memory" : why);
        ll_buf_free(&body);
        return rc;
    }
    cJSON *root = cJSON_ParseWithLength(body.p ? body.p : "", body.len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data"), *m;
    size_t k = 0, len = 0;
    char listed[256] = "";
    if (!cJSON_IsArray(data))
        data = NULL;
    cJSON_ArrayForEach(m, data)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
        if (!cJSON_IsString(id))
            continue;
        if (k++ == 0)
            snprintf(out, n, "%s", id->valuestring);
        if (len < sizeof listed)
            len += (size_t)snprintf(listed + len, sizeof listed - len, "%s%s", k > 1 ? ", " : "", id->valuestring);
    }
    cJSON_Delete(root);
    ll_buf_free(&body);
    if (k == 1 && strlen(out) < n - 1)
        return 0;
    if (k == 0)
        ll_errf(err, errlen, "GET /v1/models listed no model");
    else if (k > 1)
        ll_errf(err, errlen, "the server lists %zu models (%s)", k, listed);
    else
        ll_errf(err, errlen, "the model's name is too long");
    return LL_EINVAL;
}
