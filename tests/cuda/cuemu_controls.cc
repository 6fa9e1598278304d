/* cuemu_controls.cc: negative controls for cuemu (tools/cuemu/cuemu.h). Each
 * case runs a small kernel twice on the emulator: as written (it must pass:
 * no fault, the expected values) and with one bug injected that cuemu exists
 * to catch (it must be reported: a launch failure, or values that differ
 * because the emulation did what the hardware may do). A case fails when
 * cuemu stays silent about its bug.
 *
 *   barrier      a missing __syncthreads between a shared-memory write and
 *                another thread's read (forward and reverse orders)
 *   cp_async     a missing cp.async.wait_group before the copied data is read
 *                (CUEMU_CPASYNC=late; early mode cannot see it, by design)
 *   ldmatrix     a wrong ldmatrix row address: another lane's row (values),
 *                a row past the block's shared memory and a misaligned one
 *                (launch failures)
 *   shuffle      a divergent __shfl_xor_sync: the two halves of a warp at two
 *                different shuffle instructions (launch failure)
 *   ldmatrix_plain
 *                ldmatrix .x4 without .trans (the v2 kernel's K fragments)
 *                against .x4.trans, the form checked against CUTLASS: the
 *                plain load of four 8x8 matrices must give every lane the
 *                registers the .trans load of their transposes gives (PTX:
 *                plain delivers element (g, 2t), .trans (2t, g) of what is
 *                stored); the bug, lane 8 at row 0, must break that
 *
 * A kernel fault is sticky in cuemu, as it is in cudart (the context is
 * lost), so each case runs in its own process: `test_cuemu_controls CASE`.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_launch.h"
#include "testutil.h"

#define FULL 0xffffffffu

/* ---- kernels ------------------------------------------------------------------ */

/* out[t] = in[(t + 1) % n] through shared memory. */
__global__ void neighbour_kernel(const float *in, float *out, int bug)
{
    float *s = (float *)dyn_smem();
    int t = threadIdx.x, n = blockDim.x;
    s[t] = in[t];
    if (!bug)
        __syncthreads();
    out[t] = s[(t + 1) % n];
}

/* Each of 32 threads copies 4 floats into shared memory with cp.async;
 * out[4t + j] = the next thread's floats. */
__global__ void cp_async_kernel(const float *in, float *out, int bug)
{
    uint8_t *s = dyn_smem();
    int t = threadIdx.x;
    cp_async16(s + 16 * t, in + 4 * t, 16);
    cp_async_commit();
    if (!bug)
        cp_async_wait<0>();
    __syncthreads();
    const float *f = (const float *)s;
    for (int j = 0; j < 4; j++)
        out[4 * t + j] = f[(4 * (t + 1) + j) % 128];
}

/* One warp: shared memory holds 32 rows of 8 bf16 (the four 8x8 matrices of
 * ldmatrix .x4), element e = e; lane l points at row l, except under `bug`:
 * 1 lane 8 at row 0 (a wrong row), 2 lane 31 one row past the end, 3 lane 5
 * 8 bytes into its row (misaligned). out[l*4 + j] = register j of lane l. */
__global__ void ldmatrix_kernel(uint32_t *out, int bug)
{
    uint16_t *s = (uint16_t *)dyn_smem();
    int l = threadIdx.x;
    for (int e = 0; e < 8; e++)
        s[8 * l + e] = (uint16_t)(8 * l + e);
    __syncthreads();
    int row = l;
    size_t off = 0;
    if (bug == 1 && l == 8)
        row = 0;
    if (bug == 2 && l == 31)
        row = 32;
    if (bug == 3 && l == 5)
        off = 8;
    uint32_t r[4];
    ldmatrix_x4_trans(r, (const uint8_t *)(s + 8 * row) + off);
    for (int j = 0; j < 4; j++)
        out[4 * l + j] = r[j];
}

/* One warp: M (four 8x8 b16 matrices, element e of row l = 8l + e) at
 * s[0, 256), their transposes at s[256, 512); out[l*4 + j] = register j of
 * the plain load of M xor that of the .trans load of the transposes (0 when
 * they agree). bug: lane 8 points at row 0 in the plain load. */
__global__ void ldmatrix_plain_kernel(uint32_t *out, int bug)
{
    uint16_t *s = (uint16_t *)dyn_smem();
    int l = threadIdx.x; /* matrix l >> 3, row l & 7 */
    for (int e = 0; e < 8; e++) {
        s[8 * l + e] = (uint16_t)(8 * l + e);
        s[256 + 8 * ((l & ~7) + e) + (l & 7)] = (uint16_t)(8 * l + e);
    }
    __syncthreads();
    uint32_t a[4], b[4];
    ldmatrix_x4(a, s + 8 * (bug && l == 8 ? 0 : l));
    ldmatrix_x4_trans(b, s + 256 + 8 * l);
    for (int j = 0; j < 4; j++)
        out[4 * l + j] = a[j] ^ b[j];
}

/* One warp: out[l] = in[l ^ 1], with the halves of the warp at two different
 * shuffle instructions under `bug`. The asm statements keep the compiler
 * from merging the two arms into one call. */
__global__ void shuffle_kernel(const float *in, float *out, int bug)
{
    int l = threadIdx.x;
    float v = in[l], r;
    if (bug && l >= 16) {
        asm volatile("" ::: "memory");
        r = __shfl_xor_sync(FULL, v, 1);
    } else {
        r = __shfl_xor_sync(FULL, v, 1);
        asm volatile("" ::: "memory");
    }
    out[l] = r;
}

/* ---- cases ---------------------------------------------------------------------- */

/* cudaSuccess, or the launch's error or kernel fault. */
static cudaError_t finish(void)
{
    cudaError_t e = cudaGetLastError();
    cudaError_t f = cudaDeviceSynchronize();
    return e != cudaSuccess ? e : f;
}

static int neighbour_ok(const std::vector<float> &in, const std::vector<float> &out)
{
    int n = (int)in.size();
    for (int t = 0; t < n; t++)
        if (out[t] != in[(t + 1) % n])
            return 0;
    return 1;
}

static void case_barrier(void)
{
    const int n = 64;
    std::vector<float> in(n), out(n);
    for (int t = 0; t < n; t++)
        in[t] = (float)t + 0.5f;
    const char *orders[] = {"forward", "reverse"};
    for (const char *ord : orders) {
        setenv("CUEMU_ORDER", ord, 1);
        LAUNCH(neighbour_kernel, 1, n, n * sizeof(float), 0)(in.data(), out.data(), 0);
        CHECK(finish() == cudaSuccess && neighbour_ok(in, out), "%s: with the barrier: right", ord);
        LAUNCH(neighbour_kernel, 1, n, n * sizeof(float), 0)(in.data(), out.data(), 1);
        CHECK(finish() == cudaSuccess && !neighbour_ok(in, out),
              "%s: without the barrier a thread reads a row not yet written", ord);
    }
}

static void case_cp_async(void)
{
    std::vector<float> in(128), out(128);
    for (int i = 0; i < 128; i++)
        in[i] = (float)i;
    setenv("CUEMU_ORDER", "forward", 1);
    int ok_cnt[2];
    for (int bug = 0; bug < 2; bug++) {
        setenv("CUEMU_CPASYNC", "late", 1);
        LAUNCH(cp_async_kernel, 1, 32, 512, 0)(in.data(), out.data(), bug);
        cudaError_t e = finish();
        int ok = e == cudaSuccess;
        for (int i = 0; i < 128 && ok; i++)
            ok = out[i] == in[(i + 4) % 128];
        ok_cnt[bug] = ok;
    }
    CHECK(ok_cnt[0], "with cp.async.wait_group: right");
    CHECK(!ok_cnt[1], "without cp.async.wait_group (late copies): the poison is read");
}

static int ldmatrix_values_once(const std::vector<uint32_t> &out)
{
    /* every element of the 32 x 8 rows appears exactly once across the warp */
    std::vector<int> seen(256, 0);
    for (uint32_t w : out)
        for (int h = 0; h < 2; h++) {
            unsigned v = h ? w >> 16 : w & 0xffffu;
            if (v >= 256 || seen[v]++)
                return 0;
        }
    return 1;
}

static void case_ldmatrix(const char *which)
{
    std::vector<uint32_t> out(128, 0);
    LAUNCH(ldmatrix_kernel, 1, 32, 512, 0)(out.data(), 0);
    CHECK(finish() == cudaSuccess && ldmatrix_values_once(out), "right row addresses: every element once");
    if (strcmp(which, "row") == 0) {
        LAUNCH(ldmatrix_kernel, 1, 32, 512, 0)(out.data(), 1);
        CHECK(finish() == cudaSuccess && !ldmatrix_values_once(out),
              "lane 8 at row 0: row 0 read twice, row 8 never");
    } else {
        LAUNCH(ldmatrix_kernel, 1, 32, 512, 0)(out.data(), strcmp(which, "oob") == 0 ? 2 : 3);
        CHECK(finish() != cudaSuccess, "ldmatrix %s row address: a launch failure",
              strcmp(which, "oob") == 0 ? "out-of-range" : "misaligned");
    }
}

static void case_ldmatrix_plain(void)
{
    std::vector<uint32_t> out(128, 1);
    int same[2];
    for (int bug = 0; bug < 2; bug++) {
        LAUNCH(ldmatrix_plain_kernel, 1, 32, 1024, 0)(out.data(), bug);
        same[bug] = finish() == cudaSuccess;
        for (uint32_t w : out)
            same[bug] = same[bug] && w == 0;
    }
    CHECK(same[0], "plain ldmatrix of M = .trans ldmatrix of its transpose, every lane and register");
    CHECK(!same[1], "lane 8 at row 0: the plain load differs");
}

static void case_shuffle(void)
{
    std::vector<float> in(32), out(32);
    for (int l = 0; l < 32; l++)
        in[l] = (float)l;
    LAUNCH(shuffle_kernel, 1, 32, 0, 0)(in.data(), out.data(), 0);
    int ok = finish() == cudaSuccess;
    for (int l = 0; l < 32 && ok; l++)
        ok = out[l] == in[l ^ 1];
    CHECK(ok, "a convergent shuffle: right");
    LAUNCH(shuffle_kernel, 1, 32, 0, 0)(in.data(), out.data(), 1);
    CHECK(finish() != cudaSuccess, "a divergent shuffle: a launch failure");
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (strcmp(c, "barrier") == 0)
        case_barrier();
    else if (strcmp(c, "cp_async") == 0)
        case_cp_async();
    else if (strcmp(c, "ldmatrix_row") == 0)
        case_ldmatrix("row");
    else if (strcmp(c, "ldmatrix_oob") == 0)
        case_ldmatrix("oob");
    else if (strcmp(c, "ldmatrix_misaligned") == 0)
        case_ldmatrix("misaligned");
    else if (strcmp(c, "shuffle") == 0)
        case_shuffle();
    else if (strcmp(c, "ldmatrix_plain") == 0)
        case_ldmatrix_plain();
    else {
        fprintf(stderr, "usage: test_cuemu_controls barrier|cp_async|ldmatrix_row|ldmatrix_oob|"
                        "ldmatrix_misaligned|shuffle|ldmatrix_plain\n");
        return 2;
    }
    TEST_MAIN_END();
}
