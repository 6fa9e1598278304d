/* cuda_attn_check.h: inputs and the reference check shared by
 * tests/cuda/test_cuda_attn, tests/cuda/test_cuda_kv_host and
 * bench/cuda/bench_attn_cuda (host code only, plain C).
 *
 * The truth is engine/cpu/attn_ref.c's attn_decode_ref (double precision, the
 * textbook softmax) on the bf16 rows (for FP8: the exact dequantised rows).
 * attn_ref.c has no LSE and no -1 entries, so here each sequence's valid
 * entries are compacted before the call and the LSE is a separate double
 * loop (cac_ref_lse).
 *
 * Tolerances (FlashMLA's tests): out |got - ref| <= 1e-3 + 2.01/128 |ref| + perr;
 * lse |got - ref| <= 8/65536 |ref| + 1e-5 + qerr, where
 *   1e-5: rtol alone is meaningless near lse = 0 (top-k 1 gives lse = one
 *         score); 1e-5 is ~50x the fp32 error of a 576-term dot of O(1)
 *         terms times the 1/24 scale;
 *   qerr: the kernels may round q to bf16 (tiled does); |d lse| <= max_j
 *         |d s_j| <= scale * sum_d |q_d - bf16(q_d)| * max|kv| (max|kv| <= 1
 *         for these inputs). 0 when the case's q is bf16-exact.
 * perr = 2^-8 sum_j p_j |v_j[e]|: the tiled kernel rounds P to bf16 for the
 * P.V mma (as FlashMLA does), |bf16(p) - p| <= 2^-8 p, and its l sums the
 * unrounded p, so |d out[e]| <= 2^-8 sum_j p_j |v_j[e]| (split-k included).
 * Without it the check fails the exact lane emulation at small valid counts
 * (k = 17..100: err/tol up to 1.3; with fp32 P the same emulation gives 0.000).
 * A NaN (or an unwritten, NaN-poisoned element) never passes; a sequence
 * without valid entries must give out = 0 and lse = -inf exactly.
 */
#ifndef LOADLAW_CUDA_ATTN_CHECK_H
#define LOADLAW_CUDA_ATTN_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cac_case {
    int n_seq, heads, topk;
    cuda_kv_layout layout;
    int ragged;         /* 1: per sequence a random number (0..topk) of valid entries at random
                           positions, the rest -1 (a few >= kv_rows); 0: all valid */
    int all_invalid;    /* every entry -1 */
    int q_fp32;         /* 1: q ~ U[-1,1) not bf16-exact; 0: q = q_amp * U[-1,1) rounded to bf16 */
    float q_amp;        /* 0 -> 3 */
    int64_t ctx_rows;   /* rows each sequence owns in the pool (0 -> max(1.25*topk, 256)); sequences
                           get disjoint rows, so valid entries = unique rows */
    uint64_t seed;
} cac_case;

typedef struct cac_data {
    cac_case c;
    float scale;
    int64_t kv_rows;
    size_t row_bytes;
    float *q;           /* (N, H, 576) */
    uint8_t *kv;        /* (kv_rows, row_bytes) in c.layout */
    uint16_t *kv_bf16;  /* (kv_rows, 576): the exact values the kernels see */
    int32_t *idx;       /* (N, topk) */
    float *ref_out;     /* (N, H, 512), valid where ref_done[n] */
    float *ref_lse;     /* (N, H) */
    float *ref_pabs;    /* (N, H, 512): sum_j p_j |v_j[e]| (perr's scale) */
    unsigned char *ref_done; /* (N) */
    float kv_absmax;    /* max |value| over the pool (the qerr bound's max|kv|) */
} cac_data;

/* Allocate and fill inputs. 0 or -1 (out of memory; d is then freed). */
int cac_make(const cac_case *c, cac_data *d);
void cac_free(cac_data *d);

/* Reference out/lse of the valid entries j in [j0, j1) of sequence n:
 * out_h (H, 512) and lse_h (H). 0 or -1 (out of memory). */
int cac_ref_range(const cac_data *d, int n, int j0, int j1, float *out_h, float *lse_h);
/* Reference for the listed sequences (seqs NULL: all). 0 or -1. */
int cac_reference(cac_data *d, const int *seqs, int n_seqs);

/* Compare got (N, H, 512) and got_lse (N, H; NULL: not checked) with the
 * reference over the listed sequences (NULL: all, each must have
 * ref_done). Returns the number of failing elements; msg gets the first
 * failure and the worst errors. */
long cac_compare(const cac_data *d, const float *got, const float *got_lse, const int *seqs, int n_seqs,
                 char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif
