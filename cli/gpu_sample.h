/* gpu_sample.h (internal to cli/): `sweep`'s sampler of the local GPUs
 * through NVML, into `metric` records named nvml_* (docs/records.md), which
 * the fit reads as it reads a DCGM exporter's (fit.h "GPU figures and
 * diagnosis").
 *
 * NVML is loaded with dlopen (libnvidia-ml.so.1, or $LOADLAW_NVML_LIB), never
 * linked, so the binary runs where no driver is installed. Threads: one
 * sampler thread of its own, never a loadgen worker; start/stop from the
 * sweep's thread. Errors: 0 or a negative LL_E* code with a message. */
#ifndef LOADLAW_CLI_GPU_SAMPLE_H
#define LOADLAW_CLI_GPU_SAMPLE_H

#include <stddef.h>

#include "common.h"
#include "records.h"

typedef struct sweep_gpu sweep_gpu;

/* Load NVML and start sampling every GPU every interval_s. Without NVML or
 * without a GPU this is not an error: it returns 0 with *out = NULL and a
 * one-line reason in why (the caller says it once). A failure after NVML
 * loaded (no thread, no memory) returns the code, with the message in why. */
int gpu_sample_start(double interval_s, ll_rec_writer *w, sweep_gpu **out, char *why, size_t whylen);
/* Stop and join the thread, shut NVML down, free. NULL: no-op. */
void gpu_sample_stop(sweep_gpu *g);

#endif
