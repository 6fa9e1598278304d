/* server_root.c: one-shot requests to the server's root, beside /metrics
 * (a base's "/v1" is not its root), for the hooks between and around levels
 * (the profile hook, the prefix-cache reset): on the driver thread, through
 * common's one-shot HTTP helper (http1.h) with the run's key, since a server
 * with a key guards its control endpoints too (vLLM, `loadlaw serve
 * --api-key`). And which server it is, as its /metrics page names it. */
#include "lg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "dialect.h"
#include "http1.h"

/* A /metrics page is read this far to tell the server (its families come
 * first: vLLM's page is ~60 KiB). */
#define ROOT_METRICS_BYTES (256 * 1024)
#define ROOT_METRICS_TIMEOUT_MS 10000L

int lg_root_ask(const lg_run *r, const char *path, const char *body, long timeout_ms, size_t max_bytes,
                ll_buf *resp, long *status, char *err, size_t errlen)
{
    size_t un = strlen(r->url_base) + strlen(path) + 2;
    char *url = malloc(un);
    int rc;
    *status = 0;
    if (!url) {
        ll_errf(err, errlen, "out of memory");
        return LL_ENOMEM;
    }
    if ((rc = ll_url_join(r->url_base, "/v1", path, url, un)) == 0) {
        ll_http1_opts o = {.url = url, .content_type = body ? "application/json" : NULL, .api_key = r->api_key,
                           .max_bytes = max_bytes, .keep_head = 1, .timeout_ms = timeout_ms};
        rc = ll_http1_once(&o, body, resp, status, err, errlen);
    } else {
        ll_errf(err, errlen, "the URL is too long");
    }
    free(url);
    return rc;
}

/* The server the page names first in dialect.h's order (the bundled engine
 * before vLLM before SGLang before llama.cpp: the engine's page may carry
 * vLLM's names too); LL_SRV__COUNT: none of them. */
static ll_srv page_server(const char *page)
{
    ll_srv best = LL_SRV__COUNT;
    for (const char *l = page; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char name[128];
        size_t n = strcspn(l, "{ \n");
        if (*l == '#' || n == 0 || n >= sizeof name)
            continue;
        memcpy(name, l, n);
        name[n] = '\0';
        ll_srv s = ll_srv_of_prefix(name);
        if ((s == LL_SRV_LOADLAW || s == LL_SRV_VLLM || s == LL_SRV_SGLANG || s == LL_SRV_LLAMACPP) && s < best)
            best = s;
    }
    return best;
}

ll_srv lg_root_server(const lg_run *r)
{
    char err[320] = "";
    ll_buf page = {0};
    long status = 0;
    ll_srv s = LL_SRV__COUNT;
    if (lg_root_ask(r, "/metrics", NULL, ROOT_METRICS_TIMEOUT_MS, ROOT_METRICS_BYTES, &page, &status, err,
                    sizeof err) == 0 && status == 200)
        s = page_server(page.p);
    ll_buf_free(&page);
    return s;
}
