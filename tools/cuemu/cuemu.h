/* cuemu.h: the device side of cuemu, a host emulation of the CUDA execution
 * model that runs a project's real kernel source on the CPU, so the kernels
 * are checked against the double reference in CI, where there is no GPU.
 *
 * A .cu file is compiled as host C++ (g++) with -DCUEMU; it then includes
 * this header instead of defining its PTX helpers, and launches with
 * CUEMU_LAUNCH instead of <<<...>>>. Everything else in the kernel is the
 * source nvcc compiles.
 *
 * How it runs (cuemu.cc): one fiber per GPU thread, a block at a time, all
 * on the calling host thread. A fiber runs until it reaches __syncthreads()
 * or a warp-collective instruction (shuffle, vote, mma.sync, ldmatrix), which
 * completes when every live thread of the block (or lane of the warp) has
 * arrived. So the emulation checks what a transcription of the kernel
 * cannot:
 *   - the kernel's own index arithmetic, per lane, as compiled;
 *   - barriers: the scheduling order between two barriers is a knob
 *     (CUEMU_ORDER=forward|reverse|random[:seed]); a missing __syncthreads
 *     between a write and another thread's read gives a different answer in
 *     one of the orders, and the reference check fails;
 *   - cp.async: copies land at their cp.async.wait_group (CUEMU_CPASYNC=late,
 *     the latest the hardware may) or at the cp.async itself (early, the
 *     soonest): a read before the wait sees the poison the shared memory is
 *     filled with (NaN), an overwrite of a stage still being read shows up
 *     in the early mode;
 *   - divergence the hardware does not allow: lanes of a warp at different
 *     collective instructions (told apart by the kernel's call site, so two
 *     shuffles in the two arms of a branch are caught), a full-mask
 *     collective with an exited lane, a barrier some threads never reach
 *     (deadlock) -- each a launch failure;
 *   - addresses: ldmatrix and cp.async targets inside the block's shared
 *     memory and 16-byte aligned; global buffers are plain heap blocks, so
 *     an AddressSanitizer build catches out-of-bounds reads.
 * The runtime (cuemu_runtime.cc) is the subset of cudart the project calls: memory
 * is host memory counted per device against CUEMU_MEM_MIB (16384); there are
 * CUEMU_DEVICES devices (1) of CUEMU_SMS SMs (132, an H200's) with sm_90's
 * launch limits; work runs when enqueued, streams order their events, and
 * cudaEventQuery says "not ready" CUEMU_EVENT_POLLS times (1) after each
 * record, leaving it as the last error as cudart does. cuBLAS and NCCL are
 * cublas_cuemu.cc and nccl_cuemu.cc, loaded where the backend dlopens the
 * real ones (LOADLAW_CUBLAS_LIB, LOADLAW_NCCL_LIB).
 *
 * The PTX instructions are emulated from their definitions in the PTX ISA
 * (fragment layouts in cuemu.cc), written apart from the kernels. What it
 * cannot see: timing, bank conflicts, register limits, memory-model
 * subtleties beyond barriers, and the hardware's own mma rounding (products
 * of bf16 are exact in fp32; the emulation sums in fp32, in k order).
 */
#ifndef LOADLAW_CUEMU_H
#define LOADLAW_CUEMU_H

#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* ---- the qualifiers, as host C++ ----------------------------------------- */

#undef __shared__
#define __shared__ static /* one block runs at a time: a static is the block's */
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

namespace cuemu {

struct thread_ids {
    uint3 tid;
    int linear; /* threadIdx in x-fastest order */
};
struct block_ids {
    uint3 bid;
    dim3 bdim, gdim;
    uint8_t *smem; /* dynamic shared memory */
    size_t smem_bytes;
};
extern const thread_ids *cur_thread; /* the running fiber (launches are serialised) */
extern const block_ids *cur_block;

/* warp collectives and barriers (cuemu.cc) */
void syncthreads();
uint32_t shfl_xor(uint32_t mask, uint32_t v, int lane_mask, int width);
int any(uint32_t mask, int pred);
void mma_m16n8k16_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row);
void ldmatrix_x4(uint32_t r[4], const void *smem_row);
void cp_async16(void *smem_dst, const void *gsrc, int src_bytes);
void cp_async_commit();
void cp_async_wait(int n);

/* ---- launch ------------------------------------------------------------------ */

/* Runs body() as every thread of grid x block; records the launch error
 * (cudaGetLastError) or a kernel fault (cudaDeviceSynchronize). */
void launch(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx);

template <class... P>
struct launcher {
    void (*k)(P...);
    dim3 grid, block;
    size_t smem;
    /* the kernel's own parameter types: the call converts as a launch does
     * (NULL to a pointer included), and the values are copied once */
    void operator()(P... a) const
    {
        struct pack {
            void (*k)(P...);
            std::tuple<typename std::decay<P>::type...> args;
        } pk{k, std::tuple<typename std::decay<P>::type...>(a...)};
        launch((const void *)k, grid, block, smem,
               [](void *c) {
                   pack *p = static_cast<pack *>(c);
                   std::apply(p->k, p->args);
               },
               &pk);
    }
};
template <class... P>
launcher<P...> launch_of(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t)
{
    return launcher<P...>{k, grid, block, smem};
}

} /* namespace cuemu */

#define CUEMU_LAUNCH(k, grid, block, smem, stream) cuemu::launch_of(k, dim3(grid), dim3(block), smem, stream)

/* nvcc's cuda_runtime.h has this overload for kernels; host C++ only the C API */
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value)
{
    return ::cudaFuncSetAttribute((const void *)entry, attr, value);
}

/* ---- built-in variables and functions --------------------------------------- */

#define threadIdx (cuemu::cur_thread->tid)
#define blockIdx (cuemu::cur_block->bid)
#define blockDim (cuemu::cur_block->bdim)
#define gridDim (cuemu::cur_block->gdim)

static inline void __syncthreads(void) { cuemu::syncthreads(); }

/* The collectives' wrappers are always inlined: cuemu tells two instructions
 * apart by the return address of its own call (a divergent warp has lanes at
 * two sites), which must lie in the kernel, not in one shared wrapper, at
 * every optimisation level (tests/cuda/cuemu_controls.cc: shuffle). */
#define CUEMU_INLINE static inline __attribute__((always_inline))

template <class T>
CUEMU_INLINE T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    uint32_t u;
    memcpy(&u, &v, 4);
    u = cuemu::shfl_xor(mask, u, lane_mask, width);
    memcpy(&v, &u, 4);
    return v;
}
CUEMU_INLINE int __any_sync(unsigned mask, int pred) { return cuemu::any(mask, pred); }

template <class T>
static inline T __ldg(const T *p) { return *p; }

static inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

/* ---- the PTX helpers a kernel file defines with inline asm ------------------ */

CUEMU_INLINE void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    cuemu::mma_m16n8k16_bf16(c, a, b0, b1);
}
CUEMU_INLINE void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row) { cuemu::ldmatrix_x4_trans(r, smem_row); }
CUEMU_INLINE void ldmatrix_x4(uint32_t r[4], const void *smem_row) { cuemu::ldmatrix_x4(r, smem_row); }
static inline void cp_async16(void *smem_dst, const void *gsrc, int src_bytes)
{
    cuemu::cp_async16(smem_dst, gsrc, src_bytes);
}
static inline void cp_async_commit(void) { cuemu::cp_async_commit(); }
template <int N>
static inline void cp_async_wait(void) { cuemu::cp_async_wait(N); }
/* extern __shared__ uint8_t smem[] */
static inline uint8_t *dyn_smem(void) { return cuemu::cur_block->smem; }

#endif
