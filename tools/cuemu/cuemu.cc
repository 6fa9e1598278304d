/* cuemu.cc: fibers, barriers, warp collectives, cp.async and kernel
 * launches, on the host (cuemu.h says what it checks and what it cannot
 * see); the subset of the CUDA runtime API the kernels' tests use is
 * cuemu_runtime.cc.
 *
 * DESIGN
 * A launch runs its blocks one after another on the calling thread. A block
 * is one fiber per thread, switched by a few instructions of assembly
 * (x86-64; elsewhere, or with -DCUEMU_UCONTEXT, ucontext: slower): a fiber
 * runs until it blocks at a barrier or a warp collective, the scheduler then
 * resumes the next runnable fiber in the order CUEMU_ORDER names. A
 * collective completes in the lane that arrives last, which computes every
 * lane's result from the inputs the lanes left in the warp's slot; the other
 * lanes read theirs when resumed
 * (no lane can overwrite the slot before all have read it: that needs all
 * of them at the next collective). A fault stops the block where it is; its
 * fibers are dropped, not unwound (kernels own no host resources).
 *
 * Under AddressSanitizer every switch is announced with
 * __sanitizer_start/finish_switch_fiber, so ASan checks the kernels' reads
 * of the (heap) global buffers across the fiber stacks.
 */
#include "cuemu.h"
#include "cuemu_internal.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#endif
#ifdef CUEMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* The switch: assembly on x86-64, ucontext elsewhere or where CUEMU_UCONTEXT
 * asks for it (tests/cuda/CMakeLists.txt builds one test so, to keep the
 * fallback tested on the x86-64 hosts that run CI). */
#if defined(__x86_64__) && !defined(CUEMU_UCONTEXT)
#define CUEMU_ASM_SWITCH 1
#endif
#ifndef CUEMU_ASM_SWITCH
#include <ucontext.h>
#endif

namespace cuemu {

const thread_ids *cur_thread;
const block_ids *cur_block;

/* the runtime's state (cuemu_internal.h), shared with cuemu_runtime.cc */
std::mutex g_mu;
thread_local cudaError_t g_last = cudaSuccess; /* per host thread, as cudart: cleared by cudaGetLastError */
cudaError_t g_sticky = cudaSuccess; /* a kernel fault: the context is lost */
std::map<const void *, int> g_max_dyn;

namespace {

/* ---- context switch ----------------------------------------------------------- */

#ifdef CUEMU_ASM_SWITCH
extern "C" void cuemu_swap(void **save_sp, void *load_sp);
extern "C" void cuemu_trampoline(void);
/* Saves the callee-saved registers, mxcsr and the x87 control word on the
 * current stack, stores the stack pointer in *save_sp, loads load_sp and
 * restores what it points at. cuemu_trampoline starts a new fiber: r12 is
 * its argument, r13 its entry (set up by fiber_init); the entry never returns. */
asm(R"(
    .text
    .globl cuemu_swap
    .type cuemu_swap, @function
cuemu_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuemu_swap, .-cuemu_swap
    .globl cuemu_trampoline
    .type cuemu_trampoline, @function
cuemu_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size cuemu_trampoline, .-cuemu_trampoline
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif

struct fiber;
void fiber_main(fiber *f);

enum state { READY, WAIT_BAR, WAIT_WARP, DONE };

struct cp_op {
    uint8_t *dst;
    const uint8_t *src;
    int n;
};

struct fiber {
    thread_ids ids;
    int warp, lane;
    state st;
    /* cp.async: copies since the last commit, and the committed groups */
    std::vector<cp_op> open;
    std::vector<std::vector<cp_op>> groups;
    /* stack and saved context */
    uint8_t *stack;
    size_t stack_bytes;
#ifdef CUEMU_ASM_SWITCH
    void *sp;
#else
    ucontext_t uc;
#endif
    void *asan_fake;
};

enum coll { C_NONE, C_SHFL, C_ANY, C_MMA, C_LDM };
const char *const coll_name[] = {"none", "__shfl_xor_sync", "__any_sync", "mma.sync", "ldmatrix"};

struct warp_slot {
    int arrived, live, lanes; /* lanes: threads of the block in this warp */
    coll kind;
    const void *site; /* the kernel's instruction: the caller's return address */
    uint32_t in[32][10];
    const void *ptr[32];
    uint32_t out[32][4];
};

enum order { O_FORWARD, O_REVERSE, O_RANDOM };

struct launch_state {
    block_ids blk;
    std::vector<fiber> f;
    std::vector<warp_slot> w;
    int live, bar_arrived;
    void (*body)(void *);
    void *ctx;
    bool faulted;
    char fault_msg[512];
    fiber *running;
#ifdef CUEMU_ASM_SWITCH
    void *sched_sp;
#else
    ucontext_t sched_uc;
#endif
    const void *sched_stack_bottom;
    size_t sched_stack_size;
};

launch_state *L; /* the launch in progress (one at a time: g_mu) */

int env_order(unsigned *seed)
{
    const char *e = getenv("CUEMU_ORDER");
    *seed = 1;
    if (!e || !*e || !strcmp(e, "forward"))
        return O_FORWARD;
    if (!strcmp(e, "reverse"))
        return O_REVERSE;
    if (!strncmp(e, "random", 6)) {
        if (e[6] == ':')
            *seed = (unsigned)strtoul(e + 7, NULL, 10);
        return O_RANDOM;
    }
    fprintf(stderr, "cuemu: CUEMU_ORDER=%s: expected forward, reverse or random[:seed]\n", e);
    exit(2);
}

bool env_cp_early()
{
    const char *e = getenv("CUEMU_CPASYNC");
    if (!e || !*e || !strcmp(e, "late"))
        return false;
    if (!strcmp(e, "early"))
        return true;
    fprintf(stderr, "cuemu: CUEMU_CPASYNC=%s: expected late or early\n", e);
    exit(2);
}

/* ---- switching ------------------------------------------------------------------ */

void to_fiber(fiber *f)
{
    L->running = f;
    cur_thread = &f->ids;
#ifdef CUEMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->stack, f->stack_bytes);
#endif
#ifdef CUEMU_ASM_SWITCH
    cuemu_swap(&L->sched_sp, f->sp);
#else
    swapcontext(&L->sched_uc, &f->uc);
#endif
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    L->running = NULL;
    cur_thread = NULL;
}

/* From a fiber back to the scheduler; returns when the fiber is resumed. */
void to_sched(bool exiting)
{
    fiber *f = L->running;
#ifdef CUEMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? NULL : &f->asan_fake, L->sched_stack_bottom, L->sched_stack_size);
#else
    (void)exiting;
#endif
#ifdef CUEMU_ASM_SWITCH
    cuemu_swap(&f->sp, L->sched_sp);
#else
    swapcontext(&f->uc, &L->sched_uc);
#endif
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(f->asan_fake, NULL, NULL);
#endif
}

extern "C" void cuemu_fiber_entry(fiber *f)
{
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &L->sched_stack_bottom, &L->sched_stack_size);
#endif
    fiber_main(f);
}

#ifndef CUEMU_ASM_SWITCH
void uc_entry(unsigned hi, unsigned lo)
{
    cuemu_fiber_entry((fiber *)(((uintptr_t)hi << 32) | lo));
}
#endif

void fiber_init(fiber *f)
{
#ifdef CUEMU_ASAN
    /* a stack is reused by the next block: its last frames never returned */
    __asan_unpoison_memory_region(f->stack, f->stack_bytes);
#endif
#ifdef CUEMU_ASM_SWITCH
    uintptr_t top = ((uintptr_t)f->stack + f->stack_bytes) & ~(uintptr_t)15;
    uint64_t *s = (uint64_t *)top;
    uint32_t csr[2] = {0, 0};
    uint16_t cw;
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(cw));
    csr[1] = cw;
    s[-1] = 0;                              /* S-8 */
    s[-2] = 0;                              /* S-16: rsp after ret, 16-aligned */
    s[-3] = (uint64_t)&cuemu_trampoline;    /* ret target */
    s[-4] = 0;                              /* rbp */
    s[-5] = 0;                              /* rbx */
    s[-6] = (uint64_t)f;                    /* r12: argument */
    s[-7] = (uint64_t)&cuemu_fiber_entry;   /* r13: entry */
    s[-8] = 0;                              /* r14 */
    s[-9] = 0;                              /* r15 */
    memcpy(&s[-10], csr, 8);                /* mxcsr, x87 control word */
    f->sp = &s[-10];
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = f->stack_bytes;
    f->uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)f;
    makecontext(&f->uc, (void (*)(void))uc_entry, 2, (unsigned)(p >> 32), (unsigned)p);
#endif
}

/* Fiber stacks, kept between launches; a PROT_NONE page under each. */
struct stack_pool {
    std::vector<uint8_t *> s;
    size_t bytes = 0;
    uint8_t *get(size_t i)
    {
        while (s.size() <= i) {
            size_t page = 4096, total = bytes + page;
            void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) {
                fprintf(stderr, "cuemu: out of memory for fiber stacks\n");
                abort();
            }
            mprotect(p, page, PROT_NONE);
            s.push_back((uint8_t *)p + page);
        }
        return s[i];
    }
};
stack_pool g_stacks;

/* ---- faults -------------------------------------------------------------------- */

[[noreturn]] void fault(const char *fmt, ...)
{
    fiber *f = L->running;
    va_list ap;
    va_start(ap, fmt);
    char m[400];
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (!L->faulted) {
        snprintf(L->fault_msg, sizeof L->fault_msg, "block (%u,%u,%u) thread %d: %s", L->blk.bid.x, L->blk.bid.y,
                 L->blk.bid.z, f ? f->ids.linear : -1, m);
        L->faulted = true;
    }
    f->st = DONE;
    to_sched(true);
    abort(); /* never resumed */
}

/* ---- the block ------------------------------------------------------------------ */

void fiber_main(fiber *f)
{
    L->body(L->ctx);
    f->st = DONE;
    L->live--;
    warp_slot &w = L->w[f->warp];
    w.live--;
    if (w.arrived > 0)
        fault("exited while %d lane(s) of warp %d wait in %s", w.arrived, f->warp, coll_name[w.kind]);
    /* a barrier the exited thread will not reach completes without it */
    if (L->bar_arrived > 0 && L->bar_arrived == L->live) {
        for (fiber &g : L->f)
            if (g.st == WAIT_BAR)
                g.st = READY;
        L->bar_arrived = 0;
    }
    to_sched(true);
    abort();
}

bool in_smem(const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    return b >= L->blk.smem && b + n <= L->blk.smem + L->blk.smem_bytes;
}

void perform(const cp_op &o)
{
    if (o.n > 0)
        memcpy(o.dst, o.src, (size_t)o.n);
    if (o.n < 16)
        memset(o.dst + o.n, 0, (size_t)(16 - o.n));
}

/* Arrive at a warp collective; returns when it has completed, with this
 * lane's result in out. */
void collective(coll kind, const void *site, uint32_t mask, const uint32_t *in, int nin, const void *ptr,
                uint32_t *out, int nout, void (*compute)(warp_slot &))
{
    fiber *f = L->running;
    warp_slot &w = L->w[f->warp];
    uint32_t full = w.lanes == 32 ? 0xffffffffu : ((1u << w.lanes) - 1);
    if (mask != full)
        fault("%s with mask 0x%08x: only full-warp collectives are emulated (0x%08x here)", coll_name[kind], mask,
              full);
    if (w.live != w.lanes)
        fault("%s in warp %d after %d of its lanes exited", coll_name[kind], f->warp, w.lanes - w.live);
    if (w.arrived == 0) {
        w.kind = kind;
        w.site = site;
    } else if (w.kind != kind) {
        fault("lanes of warp %d at different collectives (%s, %s): divergent warp", f->warp, coll_name[w.kind],
              coll_name[kind]);
    } else if (w.site != site) {
        /* .aligned: every lane executes the same instruction */
        fault("lanes of warp %d at two different %s instructions (%p, %p): divergent warp", f->warp,
              coll_name[kind], w.site, site);
    }
    memcpy(w.in[f->lane], in, (size_t)nin * 4);
    w.ptr[f->lane] = ptr;
    if (++w.arrived == w.live) {
        compute(w);
        w.arrived = 0;
        w.kind = C_NONE;
        for (int i = 32 * f->warp; i < 32 * f->warp + w.lanes; i++)
            if (L->f[i].st == WAIT_WARP)
                L->f[i].st = READY;
    } else {
        f->st = WAIT_WARP;
        to_sched(false);
    }
    memcpy(out, w.out[f->lane], (size_t)nout * 4);
}

float bits_f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}
uint32_t f_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
/* element e of a list of .b32 registers holding bf16 pairs: even e = low half */
float reg_bf16(const uint32_t *regs, int e)
{
    uint32_t w = regs[e >> 1];
    return bits_f(((e & 1) ? w >> 16 : w & 0xffffu) << 16);
}

} /* namespace */

/* ---- the device API (cuemu.h) ---------------------------------------------------- */

void syncthreads()
{
    fiber *f = L->running;
    if (++L->bar_arrived == L->live) {
        L->bar_arrived = 0;
        for (fiber &g : L->f)
            if (g.st == WAIT_BAR)
                g.st = READY;
        return;
    }
    f->st = WAIT_BAR;
    to_sched(false);
}

uint32_t shfl_xor(uint32_t mask, uint32_t v, int lane_mask, int width)
{
    if (width < 1 || width > 32 || (width & (width - 1)))
        fault("__shfl_xor_sync width %d", width);
    /* the hardware takes the lane mask's low 5 bits (shfl.bfly b[4:0]) */
    uint32_t in[3] = {v, (uint32_t)lane_mask & 31u, (uint32_t)width}, out;
    collective(C_SHFL, __builtin_return_address(0), mask, in, 3, NULL, &out, 1, [](warp_slot &w) {
        for (int l = 0; l < w.lanes; l++) {
            if (w.in[l][1] != w.in[0][1] || w.in[l][2] != w.in[0][2])
                fault("__shfl_xor_sync: lanes disagree on the lane mask or width");
            int width = (int)w.in[l][2], src = l ^ (int)w.in[l][1];
            if (src >= ((l & ~(width - 1)) + width) || src >= w.lanes)
                src = l; /* a later group: own value (CUDA C++ Programming Guide) */
            w.out[l][0] = w.in[src][0];
        }
    });
    return out;
}

int any(uint32_t mask, int pred)
{
    uint32_t in = pred != 0, out;
    collective(C_ANY, __builtin_return_address(0), mask, &in, 1, NULL, &out, 1, [](warp_slot &w) {
        uint32_t r = 0;
        for (int l = 0; l < w.lanes; l++)
            r |= w.in[l][0];
        for (int l = 0; l < w.lanes; l++)
            w.out[l][0] = r;
    });
    return (int)out;
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, PTX ISA "Matrix
 * Fragments for mma.m16n8k16 with floating point type"; g = lane >> 2,
 * t = lane & 3; element e of a fragment, the lower e in the low half:
 *   A (16x16) e = 0..7: row g + 8*((e>>1)&1), col 2t + (e&1) + 8*(e>>2)
 *   B (16x8)  e = 0..3: k 2t + (e&1) + 8*(e>>1), n g
 *   C (16x8)  e = 0..3: row g + 8*(e>>1), col 2t + (e&1) */
void mma_m16n8k16_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    uint32_t in[10] = {a[0], a[1], a[2], a[3], b0, b1, f_bits(c[0]), f_bits(c[1]), f_bits(c[2]), f_bits(c[3])};
    uint32_t out[4];
    collective(C_MMA, __builtin_return_address(0), 0xffffffffu, in, 10, NULL, out, 4, [](warp_slot &w) {
        if (w.lanes != 32)
            fault("mma.sync needs a full warp");
        float A[16][16], B[16][8], C[16][8];
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3;
            for (int e = 0; e < 8; e++)
                A[g + 8 * ((e >> 1) & 1)][2 * t + (e & 1) + 8 * (e >> 2)] = reg_bf16(w.in[l], e);
            for (int e = 0; e < 4; e++)
                B[2 * t + (e & 1) + 8 * (e >> 1)][g] = reg_bf16(w.in[l] + 4, e);
            for (int e = 0; e < 4; e++)
                C[g + 8 * (e >> 1)][2 * t + (e & 1)] = bits_f(w.in[l][6 + e]);
        }
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 8; n++) {
                float acc = C[m][n];
                for (int k = 0; k < 16; k++)
                    acc += A[m][k] * B[k][n]; /* bf16 x bf16 is exact in fp32 */
                C[m][n] = acc;
            }
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3;
            for (int e = 0; e < 4; e++)
                w.out[l][e] = f_bits(C[g + 8 * (e >> 1)][2 * t + (e & 1)]);
        }
    });
    for (int e = 0; e < 4; e++)
        c[e] = bits_f(out[e]);
}

/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (PTX ISA, "ldmatrix"):
 * lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j (8 b16 each,
 * 16-byte aligned); with .trans, register j of lane l holds elements
 * (2t, g) and (2t+1, g) of matrix j, g = l >> 2, t = l & 3, low half first. */
void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
    if (((uintptr_t)smem_row & 15) || !in_smem(smem_row, 16))
        fault("ldmatrix row address %p: not 16-byte aligned inside the block's %zu B of dynamic shared memory",
              smem_row, L->blk.smem_bytes);
    uint32_t none = 0;
    collective(C_LDM, __builtin_return_address(0), 0xffffffffu, &none, 0, smem_row, r, 4, [](warp_slot &w) {
        if (w.lanes != 32)
            fault("ldmatrix .x4 needs a full warp");
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3;
            for (int j = 0; j < 4; j++) {
                uint16_t lo, hi;
                memcpy(&lo, (const uint8_t *)w.ptr[8 * j + 2 * t] + 2 * g, 2);
                memcpy(&hi, (const uint8_t *)w.ptr[8 * j + 2 * t + 1] + 2 * g, 2);
                w.out[l][j] = lo | (uint32_t)hi << 16;
            }
        }
    });
}

/* ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans): register j of lane
 * l holds elements (g, 2t) and (g, 2t+1) of matrix j, low half first: the
 * 4 bytes at 4t of the row lane 8j + g points at. */
void ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    if (((uintptr_t)smem_row & 15) || !in_smem(smem_row, 16))
        fault("ldmatrix row address %p: not 16-byte aligned inside the block's %zu B of dynamic shared memory",
              smem_row, L->blk.smem_bytes);
    uint32_t none = 0;
    collective(C_LDM, __builtin_return_address(0), 0xffffffffu, &none, 0, smem_row, r, 4, [](warp_slot &w) {
        if (w.lanes != 32)
            fault("ldmatrix .x4 needs a full warp");
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3;
            for (int j = 0; j < 4; j++)
                memcpy(&w.out[l][j], (const uint8_t *)w.ptr[8 * j + g] + 4 * t, 4);
        }
    });
}

static bool g_cp_early;

void cp_async16(void *smem_dst, const void *gsrc, int src_bytes)
{
    fiber *f = L->running;
    if (((uintptr_t)smem_dst & 15) || !in_smem(smem_dst, 16))
        fault("cp.async destination %p: not 16-byte aligned inside the block's %zu B of dynamic shared memory",
              smem_dst, L->blk.smem_bytes);
    if (src_bytes < 0 || src_bytes > 16)
        fault("cp.async src-size %d (0..16)", src_bytes);
    if ((uintptr_t)gsrc & 15) /* the address must be aligned to cp-size, read or not */
        fault("cp.async source %p not 16-byte aligned", gsrc);
    cp_op o = {(uint8_t *)smem_dst, (const uint8_t *)gsrc, src_bytes};
    if (g_cp_early)
        perform(o);
    else
        f->open.push_back(o);
}

void cp_async_commit()
{
    fiber *f = L->running;
    f->groups.push_back(std::move(f->open));
    f->open.clear();
}

void cp_async_wait(int n)
{
    fiber *f = L->running;
    while ((int)f->groups.size() > n) {
        for (const cp_op &o : f->groups.front())
            perform(o);
        f->groups.erase(f->groups.begin());
    }
}

/* ---- launch ---------------------------------------------------------------------- */

#ifdef CUEMU_ASAN
static const size_t fiber_stack_bytes = 512 * 1024; /* ASan's frames are larger */
#else
static const size_t fiber_stack_bytes = 64 * 1024; /* the kernels' frames are a few KB */
#endif

/* The launch's shape and shared memory as cudart checks them: cudaSuccess, or
 * the error the launch leaves for cudaGetLastError. */
static cudaError_t check_config(const void *kernel, dim3 grid, dim3 block, size_t smem)
{
    uint64_t nt = (uint64_t)block.x * block.y * block.z;
    if (nt < 1 || nt > 1024 || block.z > 64 || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 ||
        grid.z > 65535 || grid.x > 0x7fffffffu)
        return cudaErrorInvalidConfiguration;
    auto it = g_max_dyn.find(kernel);
    size_t max_dyn = it != g_max_dyn.end() ? (size_t)it->second : 48 * 1024;
    if (smem > max_dyn)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* The linear index of the b-th block run, in CUEMU_ORDER's order; random
 * shuffles the whole grid once, at the launch's first block. */
static uint64_t block_at(uint64_t b, uint64_t nblk, int ord, std::vector<uint64_t> &border, std::mt19937 &rng)
{
    if (ord != O_RANDOM)
        return ord == O_REVERSE ? nblk - 1 - b : b;
    if (border.empty()) {
        border.resize(nblk);
        for (uint64_t i = 0; i < nblk; i++)
            border[i] = i;
        std::shuffle(border.begin(), border.end(), rng);
    }
    return border[b];
}

/* The block's starting state: poisoned shared memory, empty warp slots, and
 * one READY fiber per thread at the kernel's entry; torder is the order the
 * scheduler visits them (random reshuffles it each round). */
static void reset_block(launch_state &st, dim3 block, size_t smem, int ord, std::vector<int> &torder)
{
    int nthr = (int)st.f.size(), nwarp = (int)st.w.size();
    if (smem)
        memset(st.blk.smem, 0xff, smem); /* poison: a bf16/fp32 NaN, an int -1 */
    for (int w = 0; w < nwarp; w++) {
        st.w[w] = warp_slot();
        st.w[w].lanes = std::min(32, nthr - 32 * w);
        st.w[w].live = st.w[w].lanes;
    }
    for (int i = 0; i < nthr; i++) {
        fiber &f = st.f[i];
        f.ids.linear = i;
        f.ids.tid = make_uint3((unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
                               (unsigned)(i / (block.x * block.y)));
        f.warp = i / 32;
        f.lane = i % 32;
        f.st = READY;
        f.open.clear();
        f.groups.clear();
        f.stack = g_stacks.get((size_t)i);
        f.stack_bytes = fiber_stack_bytes;
        f.asan_fake = NULL;
        fiber_init(&f);
        torder[i] = ord == O_REVERSE ? nthr - 1 - i : i;
    }
    st.live = nthr;
    st.bar_arrived = 0;
}

/* A round in which no fiber could run: every live thread waits on the others. */
static void fault_deadlock(launch_state &st, int done)
{
    int bar = 0, wrp = 0;
    for (fiber &f : st.f)
        bar += f.st == WAIT_BAR, wrp += f.st == WAIT_WARP;
    snprintf(st.fault_msg, sizeof st.fault_msg,
             "block (%u,%u,%u): deadlock: %d thread(s) at __syncthreads, %d in warp collectives, "
             "%d exited",
             st.blk.bid.x, st.blk.bid.y, st.blk.bid.z, bar, wrp, done);
    st.faulted = true;
}

/* Rounds over the block's fibers, each READY one resumed until it blocks or
 * exits, until all have exited or one faulted. */
static void run_block(launch_state &st, int ord, std::vector<int> &torder, std::mt19937 &rng)
{
    int nthr = (int)st.f.size();
    int done = 0;
    while (done < nthr && !st.faulted) {
        if (ord == O_RANDOM)
            std::shuffle(torder.begin(), torder.end(), rng);
        bool ran = false;
        for (int k = 0; k < nthr && !st.faulted; k++) {
            fiber &f = st.f[torder[k]];
            if (f.st != READY)
                continue;
            ran = true;
            to_fiber(&f);
            if (f.st == DONE)
                done++;
        }
        if (!ran && !st.faulted)
            fault_deadlock(st, done);
    }
}

void launch(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx)
{
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_sticky != cudaSuccess)
        return;
    cudaError_t bad = check_config(kernel, grid, block, smem);
    if (bad != cudaSuccess) {
        g_last = bad;
        return;
    }
    unsigned seed;
    int ord = env_order(&seed);
    g_cp_early = env_cp_early();
    std::mt19937 rng(seed);

    static launch_state st; /* reused: its vectors keep their memory */
    L = &st;
    st.body = body;
    st.ctx = ctx;
    st.faulted = false;
    st.blk.bdim = block;
    st.blk.gdim = grid;
    st.blk.smem_bytes = smem;
    std::vector<uint8_t> smem_buf(smem ? smem : 16);
    st.blk.smem = smem ? smem_buf.data() : NULL;
    cur_block = &st.blk;
    g_stacks.bytes = fiber_stack_bytes;
    int nthr = (int)((uint64_t)block.x * block.y * block.z), nwarp = (nthr + 31) / 32;
    st.f.resize((size_t)nthr);
    st.w.assign((size_t)nwarp, warp_slot());

    uint64_t nblk = (uint64_t)grid.x * grid.y * grid.z;
    std::vector<uint64_t> border;
    std::vector<int> torder((size_t)nthr);
    for (uint64_t b = 0; b < nblk && !st.faulted; b++) {
        uint64_t bi = block_at(b, nblk, ord, border, rng);
        st.blk.bid = make_uint3((unsigned)(bi % grid.x), (unsigned)(bi / grid.x % grid.y),
                                (unsigned)(bi / ((uint64_t)grid.x * grid.y)));
        reset_block(st, block, smem, ord, torder);
        run_block(st, ord, torder, rng);
    }
    cur_block = NULL;
    if (st.faulted) {
        fprintf(stderr, "cuemu: kernel fault: %s\n", st.fault_msg);
        g_sticky = cudaErrorLaunchFailure;
    }
    L = NULL;
}

} /* namespace cuemu */
