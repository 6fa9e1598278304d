/* host_engine.c: the bundled engine inside `loadlaw sweep` (host_engine.h):
 * parse the spec, start the engine, describe it for the run line, hand it
 * the records writer, stop it; and the key its spec asks the requests for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "host_engine.h"
#include "sweep.h"

/* One socket per in-flight stream: a sweep's levels reach thousands. */
#define HOST_MIN_CONNECTIONS 16384

int host_engine_start(host_engine *h, const char *spec, const char *profile_dir,
                      void (*on_failure)(void *arg, const char *msg), char *err, size_t errlen)
{
    eng_config ec;
    int rc;
    memset(h, 0, sizeof *h);
    eng_config_default(&ec);
    if (eng_parse_spec(spec, &ec, err, errlen)) {
        rc = LL_EINVAL;
        goto fail;
    }
    if (ec.max_connections < HOST_MIN_CONNECTIONS)
        ec.max_connections = HOST_MIN_CONNECTIONS;
    if (profile_dir)
        ec.profile_dir = profile_dir; /* borrowed: eng_start copies it */
    ec.on_failure = on_failure;
    if ((rc = eng_start(&ec, &h->eng, err, errlen))) {
        h->eng = NULL;
        rc = rc == LL_EINVAL ? LL_EIO : rc; /* the spec parsed: a failed start is no usage error */
        goto fail;
    }
    snprintf(h->model, sizeof h->model, "%s", eng_model(h->eng));
    snprintf(h->spec, sizeof h->spec, "%s", spec ? spec : "backend=synthetic");
    h->backend = eng_backend_name(h->eng);
    eng_law(h->eng, &h->law); /* present = 0 unless the backend plays a law */
fail:
    eng_config_free(&ec);
    return rc;
}

const char *host_engine_url(const host_engine *h) { return eng_url(h->eng); }

void host_engine_attach(host_engine *h, ll_rec_writer *w)
{
    if (h->eng)
        eng_set_records(h->eng, w);
}

void host_engine_detach(host_engine *h)
{
    if (h->eng)
        eng_set_records(h->eng, NULL);
}

int host_engine_failed(const host_engine *h, char *msg, size_t len)
{
    return h->eng ? eng_failed(h->eng, msg, len) : 0;
}

void host_engine_stop(host_engine *h)
{
    if (h->eng)
        eng_stop(h->eng);
    h->eng = NULL;
}

int sweep_engine_key(const char *spec, const char *given, int own_auth, char **key, char *err, size_t errlen)
{
    eng_config ec;
    char perr[256];
    int rc = 0;
    *key = NULL;
    eng_config_default(&ec);
    if (own_auth || eng_parse_spec(spec, &ec, perr, sizeof perr) || !ec.api_key)
        goto out;
    if (given && strcmp(given, ec.api_key) != 0) {
        ll_errf(err, errlen, "--api-key differs from the api_key in the bundled engine's spec (--engine or the "
                             "scenario's \"engine\"): drop --api-key (the engine's key is then sent), or give "
                             "the same key to both");
        rc = LL_EINVAL;
    } else if (!(*key = strdup(ec.api_key))) {
        rc = LL_ENOMEM;
    }
out:
    eng_config_free(&ec);
    return rc;
}
