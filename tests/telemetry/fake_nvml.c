/* fake_nvml.c: a stand-in libnvidia-ml for test_gpu_sample (loaded through
 * $LOADLAW_NVML_LIB): two GPUs with fixed power, limit, clocks and GPM
 * activities, and an energy counter that climbs 1000 mJ per reading. It
 * checks the sweep's plumbing (dlopen, the calls, the records, the fit) on a
 * machine without a GPU; it cannot check that real NVML agrees with the
 * prototypes declared in telemetry/gpu_sample.c. The signatures are NVML's, with
 * plain C types. */
#include <string.h>

typedef struct {
    unsigned int gpu, memory;
} util_t;
typedef struct {
    unsigned int version, is_supported;
} gpm_support_t;
typedef struct {
    unsigned int metric_id;
    int ret;
    double value;
    char *names[3];
} gpm_metric_t;
typedef struct {
    unsigned int version, num_metrics;
    void *s1, *s2;
    gpm_metric_t metrics[];  /* num_metrics of them */
} gpm_get_t;

static int devs[2];
static int samples[8];
static unsigned long long energy[2];

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r ? "fake error" : "success"; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d)
{
    if (i > 1)
        return 2;
    *d = &devs[i];
    return 0;
}
static int idx(void *d) { return (int *)d - devs; }
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) { (void)d; *mw = 170000; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(void *d, unsigned int *mw) { (void)d; *mw = 300000; return 0; }
int nvmlDeviceGetTotalEnergyConsumption(void *d, unsigned long long *mj)
{
    *mj = 1000000 + (energy[idx(d)] += 1000);
    return 0;
}
int nvmlDeviceGetClockInfo(void *d, int type, unsigned int *mhz) { (void)d; *mhz = type == 1 ? 1980 : 2619; return 0; }
int nvmlDeviceGetUtilizationRates(void *d, util_t *u) { (void)d; u->gpu = 100; u->memory = 30; return 0; }
int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r) { (void)d; *r = 0; return 0; }
int nvmlGpmQueryDeviceSupport(void *d, gpm_support_t *s)
{
    (void)d;
    s->is_supported = s->version == 1;
    return 0;
}
int nvmlGpmSampleAlloc(void **s)
{
    for (int i = 0; i < 8; i++)
        if (!samples[i]) {
            samples[i] = 1;
            *s = &samples[i];
            return 0;
        }
    return 2;
}
int nvmlGpmSampleFree(void *s) { *(int *)s = 0; return 0; }
int nvmlGpmSampleGet(void *d, void *s) { (void)d; (void)s; return 0; }
int nvmlGpmMetricsGet(gpm_get_t *g)
{
    if (g->version != 1 || !g->s1 || !g->s2 || g->s1 == g->s2)
        return 2;
    for (unsigned int i = 0; i < g->num_metrics; i++) {
        gpm_metric_t *m = &g->metrics[i];
        m->ret = 0;
        switch (m->metric_id) {
        case 2: m->value = 95; break;   /* SM_UTIL */
        case 3: m->value = 40; break;   /* SM_OCCUPANCY */
        case 5: m->value = 10; break;   /* ANY_TENSOR_UTIL */
        case 10: m->value = 20; break;  /* DRAM_BW_UTIL */
        default: m->ret = 2;
        }
    }
    return 0;
}
