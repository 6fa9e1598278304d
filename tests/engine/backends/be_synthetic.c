/* be_synthetic.c: the synthetic backend's adapter (conformance.h). It plays
 * a law and computes no tokens: its phases are "prefill" and "decode"; it
 * keeps no per-slot state to check; fault_fail_step fails that one step. */
#define TESTUTIL_SHARED
#include "conformance.h"

static int syn_phases(const char *attn, int prefill, int decode, const char **names)
{
    (void)attn;
    int n = 0;
    if (prefill)
        names[n++] = "prefill";
    if (decode)
        names[n++] = "decode";
    return n;
}

const tb_backend tb_synthetic = {
    .id = TB_SYN,
    .name = "synthetic",
    .ops = &eng_backend_synthetic,
    .phases = syn_phases,
    .fault_step = 1,
};
