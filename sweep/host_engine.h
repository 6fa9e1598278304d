/* host_engine.h (internal to sweep/): the bundled engine hosted inside
 * `loadlaw sweep` on a loopback port, and what the run line says about it.
 *
 * The engine's own step log reaches the records through the records module
 * (eng_set_records), never through this file: host_engine_attach hands the
 * run's writer to the scheduler, host_engine_detach takes it back before the
 * writer is closed. */
#ifndef LOADLAW_SWEEP_HOST_ENGINE_H
#define LOADLAW_SWEEP_HOST_ENGINE_H

#include <stddef.h>

#include "engine.h"
#include "records.h"

typedef struct host_engine {
    eng_engine *eng;
    char model[256];           /* the served model name */
    char spec[1024];           /* run line "engine": the spec as given */
    const char *backend;       /* run line "backend": eng_backend_name */
    ll_rec_engine_law law;     /* run line "engine_law" (present: synthetic only) */
} host_engine;

/* Parse spec (NULL: engine defaults), start the engine on an ephemeral
 * loopback port with room for many connections. profile_dir: the engine's
 * /start_profile default folder (NULL: its own default). on_failure: called
 * once from the scheduler thread if a backend step fails (eng_config).
 * LL_EINVAL with a message for a bad spec (a usage error), other codes when
 * the engine cannot start. */
int host_engine_start(host_engine *h, const char *spec, const char *profile_dir,
                      void (*on_failure)(void *arg, const char *msg), char *err, size_t errlen);
const char *host_engine_url(const host_engine *h);
/* From now on every engine step that starts at or after the writer's epoch
 * becomes a step record. */
void host_engine_attach(host_engine *h, ll_rec_writer *w);
/* No more step records after this returns (the writer may then be closed). */
void host_engine_detach(host_engine *h);
/* 0, or the engine's failure code with its reason in msg (eng_failed). */
int host_engine_failed(const host_engine *h, char *msg, size_t len);
/* Stop the engine (no-op when it never started). */
void host_engine_stop(host_engine *h);

#endif
