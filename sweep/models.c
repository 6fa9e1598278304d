/* models.c: the model name a sweep asks for when none was given: the
 * server's only one, from GET /v1/models.
 *
 * DESIGN: one blocking request before the run starts (5 s at most, common's
 * http1.h), with the requests' credentials (the bearer key, the secret-named
 * headers: the same origin as the requests by construction). llama.cpp's server and
 * most single-model deployments list exactly one model; a server listing
 * none or several still needs --model, and the message lists what it
 * offers. */
#include <string.h>

#include "common.h"
#include "http1.h"
#include "internal.h"

#define MODELS_MAX_BYTES (1u << 20)
#define MODELS_TIMEOUT_MS 5000L

/* GET url into body with the credentials; 0, or LL_EIO with why. */
static int fetch(const char *url, const char *api_key, char *const *headers, size_t n_headers, ll_buf *body,
                 char *err, size_t errlen)
{
    ll_http1_opts o = {.url = url, .api_key = api_key, .headers = headers, .n_headers = n_headers,
                       .max_bytes = MODELS_MAX_BYTES, .timeout_ms = MODELS_TIMEOUT_MS};
    long status = 0;
    int rc = ll_http1_once(&o, NULL, body, &status, err, errlen);
    if (rc == 0 && status != 200) {
        ll_errf(err, errlen, "HTTP %ld", status);
        rc = LL_EIO;
    }
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
    char why[320] = "";
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
