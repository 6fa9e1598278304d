/* gpu_sample.c: the sweep's NVML sampler (telemetry.h): what the local
 * GPUs drew and did while the levels ran, beside the client's stamps.
 *
 * DESIGN: one thread; each tick reads every GPU and writes one `metric`
 * record per figure, all of one tick stamped with one t_ns (the fit sums
 * or averages a tick over GPUs by grouping equal t_ns). Figures, src "nvml",
 * labels gpu="<index>":
 *   nvml_power_w, nvml_power_limit_w   power (NVML: ~1 s average) and the
 *                                      enforced limit, watts
 *   nvml_energy_mj                     total energy counter, millijoules
 *                                      (cumulative; the fit differences it)
 *   nvml_sm_clock_mhz, nvml_mem_clock_mhz
 *   nvml_gpu_util_ratio, nvml_mem_util_ratio  NVML "utilization": the time
 *                                      any kernel ran / memory was read or
 *                                      written, 0..1; not SM activity
 *   nvml_clock_event_reasons           the clock-event (throttle) bit mask
 *   nvml_sm_active_ratio, nvml_sm_occupancy_ratio, nvml_tensor_active_ratio,
 *   nvml_dram_active_ratio             Hopper+ GPM metrics over the interval
 *                                      since the previous tick, 0..1 (NVML
 *                                      gives percent)
 * A figure the driver does not support is not written. The prototypes and
 * types below are NVML's (nvml.h), declared here because no nvml.h ships
 * with the toolkit we build against and the library is loaded, not linked.
 *
 * Unverified here: the machine this was written on has no GPU and no NVML;
 * only the absent path (one line, no error) is tested. */
#include "telemetry.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- NVML, as declared in nvml.h ------------------------------------------ */
typedef int nvml_ret;                       /* nvmlReturn_t; 0 = NVML_SUCCESS */
typedef struct nvml_dev_st *nvml_dev;       /* nvmlDevice_t */
typedef struct nvml_gpm_sample_st *nvml_gpm_sample; /* nvmlGpmSample_t */
typedef struct {
    unsigned int gpu, memory;               /* percent */
} nvml_util;                                /* nvmlUtilization_t */
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
typedef struct {
    unsigned int version, is_supported;     /* nvmlGpmSupport_t, version 1 */
} nvml_gpm_support;
typedef struct {
    unsigned int metric_id;
    nvml_ret ret;
    double value;
    struct {
        char *short_name, *long_name, *unit;
    } info;
} nvml_gpm_metric;                          /* nvmlGpmMetric_t */
/* nvmlGpmMetricsGet_t, version 1. NVML fills metrics[0..num_metrics); the
 * array is as long as any nvml.h's NVML_GPM_METRIC_MAX (98, later 210). */
typedef struct {
    unsigned int version, num_metrics;
    nvml_gpm_sample sample1, sample2;
    nvml_gpm_metric metrics[256];
} nvml_gpm_get;
/* nvmlGpmMetricId_t: the four the fit reads, and the names they are written as. */
static const struct {
    unsigned int id;
    const char *name;
} gpm_metrics[] = {
    {2, "nvml_sm_active_ratio"},      /* NVML_GPM_METRIC_SM_UTIL */
    {3, "nvml_sm_occupancy_ratio"},   /* NVML_GPM_METRIC_SM_OCCUPANCY */
    {5, "nvml_tensor_active_ratio"},  /* NVML_GPM_METRIC_ANY_TENSOR_UTIL */
    {10, "nvml_dram_active_ratio"},   /* NVML_GPM_METRIC_DRAM_BW_UTIL */
};
#define N_GPM (sizeof gpm_metrics / sizeof gpm_metrics[0])

typedef struct nvml_api {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*count)(unsigned int *);
    nvml_ret (*handle)(unsigned int, nvml_dev *);
    /* optional: NULL when this driver lacks them */
    nvml_ret (*power_mw)(nvml_dev, unsigned int *);
    nvml_ret (*energy_mj)(nvml_dev, unsigned long long *);
    nvml_ret (*limit_mw)(nvml_dev, unsigned int *);
    nvml_ret (*clock_mhz)(nvml_dev, int, unsigned int *);
    nvml_ret (*util)(nvml_dev, nvml_util *);
    nvml_ret (*reasons)(nvml_dev, unsigned long long *);
    nvml_ret (*gpm_support)(nvml_dev, nvml_gpm_support *);
    nvml_ret (*gpm_alloc)(nvml_gpm_sample *);
    nvml_ret (*gpm_free)(nvml_gpm_sample);
    nvml_ret (*gpm_sample)(nvml_dev, nvml_gpm_sample);
    nvml_ret (*gpm_get)(nvml_gpm_get *);
} nvml_api;

typedef struct gpu {
    nvml_dev dev;
    char labels[32];
    nvml_gpm_sample prev, cur;  /* GPM: NULL when unsupported */
    int have_prev;
} gpu;

struct tel_gpu {
    nvml_api api;
    gpu *gpus;
    unsigned int n_gpus;
    int64_t interval_ns, epoch_ns;
    ll_rec_writer *w;
    ll_ticker *ticker;
    int put_failed;             /* sampler thread only */
};

/* dlsym into a typed pointer without a cast that -Wpedantic would refuse. */
static void sym(void *lib, const char *name, void *fp)
{
    void *p = dlsym(lib, name);
    memcpy(fp, &p, sizeof p);
}

static int api_load(nvml_api *a, char *why, size_t whylen)
{
    const char *path = getenv("LOADLAW_NVML_LIB");
    memset(a, 0, sizeof *a);
    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    if (!(a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        const char *e = dlerror();
        ll_errf(why, whylen, "no NVML (%s)", e ? e : path);
        return -1;
    }
    sym(a->lib, "nvmlInit_v2", &a->init);
    sym(a->lib, "nvmlShutdown", &a->shutdown);
    sym(a->lib, "nvmlErrorString", &a->error_string);
    sym(a->lib, "nvmlDeviceGetCount_v2", &a->count);
    sym(a->lib, "nvmlDeviceGetHandleByIndex_v2", &a->handle);
    sym(a->lib, "nvmlDeviceGetPowerUsage", &a->power_mw);
    sym(a->lib, "nvmlDeviceGetTotalEnergyConsumption", &a->energy_mj);
    sym(a->lib, "nvmlDeviceGetEnforcedPowerLimit", &a->limit_mw);
    sym(a->lib, "nvmlDeviceGetClockInfo", &a->clock_mhz);
    sym(a->lib, "nvmlDeviceGetUtilizationRates", &a->util);
    /* renamed in CUDA 12.x; the old name stays for older drivers */
    sym(a->lib, "nvmlDeviceGetCurrentClocksEventReasons", &a->reasons);
    if (!a->reasons)
        sym(a->lib, "nvmlDeviceGetCurrentClocksThrottleReasons", &a->reasons);
    sym(a->lib, "nvmlGpmQueryDeviceSupport", &a->gpm_support);
    sym(a->lib, "nvmlGpmSampleAlloc", &a->gpm_alloc);
    sym(a->lib, "nvmlGpmSampleFree", &a->gpm_free);
    sym(a->lib, "nvmlGpmSampleGet", &a->gpm_sample);
    sym(a->lib, "nvmlGpmMetricsGet", &a->gpm_get);
    if (!a->init || !a->shutdown || !a->count || !a->handle) {
        ll_errf(why, whylen, "%s lacks nvmlInit_v2 or the device calls", path);
        dlclose(a->lib);
        a->lib = NULL;
        return -1;
    }
    return 0;
}

static const char *nvml_err(const nvml_api *a, nvml_ret r)
{
    const char *s = a->error_string ? a->error_string(r) : NULL;
    return s ? s : "NVML error";
}

static void put(tel_gpu *g, int64_t t_ns, const gpu *d, const char *name, double v)
{
    ll_rec_metric m = {.t_ns = t_ns, .src = "nvml", .name = name, .labels = d->labels, .value = v};
    if (!g->put_failed && ll_rec_put_metric(g->w, &m))
        g->put_failed = 1;
}

static void sample_gpm(tel_gpu *g, int64_t t_ns, gpu *d)
{
    const nvml_api *a = &g->api;
    if (!d->cur || a->gpm_sample(d->dev, d->cur) != 0)
        return;
    if (d->have_prev) {
        nvml_gpm_get mg;
        memset(&mg, 0, sizeof mg);
        mg.version = 1;
        mg.num_metrics = N_GPM;
        mg.sample1 = d->prev;
        mg.sample2 = d->cur;
        for (size_t i = 0; i < N_GPM; i++)
            mg.metrics[i].metric_id = gpm_metrics[i].id;
        if (a->gpm_get(&mg) == 0)
            for (size_t i = 0; i < N_GPM; i++)
                if (mg.metrics[i].ret == 0)
                    put(g, t_ns, d, gpm_metrics[i].name, mg.metrics[i].value / 100);
    }
    /* the newest sample becomes the start of the next interval */
    nvml_gpm_sample t = d->prev;
    d->prev = d->cur;
    d->cur = t;
    d->have_prev = 1;
}

static void sample_all(tel_gpu *g)
{
    const nvml_api *a = &g->api;
    int64_t t_ns = ll_now_ns() - g->epoch_ns;
    for (unsigned int i = 0; i < g->n_gpus; i++) {
        gpu *d = &g->gpus[i];
        unsigned int u;
        unsigned long long ull;
        nvml_util ut;
        if (a->power_mw && a->power_mw(d->dev, &u) == 0)
            put(g, t_ns, d, "nvml_power_w", u / 1000.0);
        if (a->limit_mw && a->limit_mw(d->dev, &u) == 0)
            put(g, t_ns, d, "nvml_power_limit_w", u / 1000.0);
        if (a->energy_mj && a->energy_mj(d->dev, &ull) == 0)
            put(g, t_ns, d, "nvml_energy_mj", (double)ull);
        if (a->clock_mhz && a->clock_mhz(d->dev, NVML_CLOCK_SM, &u) == 0)
            put(g, t_ns, d, "nvml_sm_clock_mhz", u);
        if (a->clock_mhz && a->clock_mhz(d->dev, NVML_CLOCK_MEM, &u) == 0)
            put(g, t_ns, d, "nvml_mem_clock_mhz", u);
        if (a->util && a->util(d->dev, &ut) == 0) {
            put(g, t_ns, d, "nvml_gpu_util_ratio", ut.gpu / 100.0);
            put(g, t_ns, d, "nvml_mem_util_ratio", ut.memory / 100.0);
        }
        if (a->reasons && a->reasons(d->dev, &ull) == 0)
            put(g, t_ns, d, "nvml_clock_event_reasons", (double)ull);
        sample_gpm(g, t_ns, d);
    }
}

/* One tick (an ll_ticker): every GPU; nonzero (the records writer refused)
 * ends the ticker. */
static int gpu_tick(void *arg)
{
    tel_gpu *g = arg;
    sample_all(g);
    return g->put_failed;
}

static void gpu_free(tel_gpu *g)
{
    for (unsigned int i = 0; g->gpus && i < g->n_gpus; i++) {
        if (g->gpus[i].prev)
            g->api.gpm_free(g->gpus[i].prev);
        if (g->gpus[i].cur)
            g->api.gpm_free(g->gpus[i].cur);
    }
    free(g->gpus);
    if (g->api.lib) {
        g->api.shutdown();
        dlclose(g->api.lib);
    }
    free(g);
}

/* GPM needs two sample buffers per GPU and a device that says it can. */
static void gpm_init(const nvml_api *a, gpu *d)
{
    nvml_gpm_support s = {.version = 1};
    if (!a->gpm_support || !a->gpm_alloc || !a->gpm_free || !a->gpm_sample || !a->gpm_get ||
        a->gpm_support(d->dev, &s) != 0 || !s.is_supported)
        return;
    if (a->gpm_alloc(&d->prev) != 0 || a->gpm_alloc(&d->cur) != 0) {
        if (d->prev)
            a->gpm_free(d->prev);
        d->prev = d->cur = NULL;
    }
}

int tel_gpu_start(double interval_s, ll_rec_writer *w, tel_gpu **out, char *why, size_t whylen)
{
    int rc = 0;
    nvml_ret r;
    tel_gpu *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g)
        return LL_ENOMEM;
    if (api_load(&g->api, why, whylen))
        goto absent;
    if ((r = g->api.init()) != 0) {
        ll_errf(why, whylen, "NVML did not start (%s)", nvml_err(&g->api, r));
        dlclose(g->api.lib);
        g->api.lib = NULL; /* nothing to shut down */
        goto absent;
    }
    if ((r = g->api.count(&g->n_gpus)) != 0 || g->n_gpus == 0) {
        ll_errf(why, whylen, "NVML sees no GPU%s%s", r ? ": " : "", r ? nvml_err(&g->api, r) : "");
        goto absent;
    }
    LL_TRY((g->gpus = calloc(g->n_gpus, sizeof *g->gpus)) ? 0 : LL_ENOMEM);
    for (unsigned int i = 0; i < g->n_gpus; i++) {
        if ((r = g->api.handle(i, &g->gpus[i].dev)) != 0) {
            ll_errf(why, whylen, "NVML: GPU %u: %s", i, nvml_err(&g->api, r));
            goto absent;
        }
        snprintf(g->gpus[i].labels, sizeof g->gpus[i].labels, "gpu=\"%u\"", i);
        gpm_init(&g->api, &g->gpus[i]);
    }
    g->w = w;
    g->epoch_ns = ll_rec_epoch_ns(w);
    g->interval_ns = (int64_t)(interval_s * 1e9);
    if ((rc = ll_ticker_start(g->interval_ns, gpu_tick, g, &g->ticker))) {
        ll_errf(why, whylen, "gpu: cannot start the sampler thread");
        goto fail;
    }
    *out = g;
    return 0;
absent:
    rc = 0;
fail:
    gpu_free(g);
    return rc;
}

void tel_gpu_stop(tel_gpu *g)
{
    if (!g)
        return;
    ll_ticker_stop(g->ticker);
    gpu_free(g);
}
