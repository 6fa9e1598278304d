#!/usr/bin/env bash
# build.sh: the CUDA attention test and benchmark with nvcc alone, for a bare
# GPU machine (CUDA toolkit only: no CMake project, no OpenBLAS, cJSON, curl).
# attn_ref.c is compiled against tests/cuda/refshim/common.h (error codes and
# ll_errf only). Run from anywhere:
#
#   bash bench/cuda/standalone/build.sh [OUTDIR]      # default /tmp/loadlaw-attn
#   ARCH="-gencode arch=compute_90,code=sm_90" bash bench/cuda/standalone/build.sh
#
# -> OUTDIR/test_cuda_kv_host and OUTDIR/test_cuda_split_policy (CPU only), OUTDIR/test_cuda_attn (exit 77 =
# no device), OUTDIR/bench_attn_cuda (needs libcublas, part of the toolkit).
# OUTDIR/ptxas.log keeps the -Xptxas -v output (registers, smem, spills).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-/tmp/loadlaw-attn}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${ARCH:-"-gencode arch=compute_90,code=[sm_90,compute_90] -gencode arch=compute_120,code=sm_120"}
mkdir -p "$out"
inc=(-I"$root/tests/cuda/refshim" -I"$root/engine/cuda" -I"$root/tests/cuda" -I"$root/engine/cpu" -I"$root/engine" -I"$root/tests"
     -I"$root/common/include")
common=(-O2 -std=c++17 -lineinfo $arch "${inc[@]}")
ref=("$root/engine/cuda/cuda_kv_host.c" "$root/engine/cuda/cuda_attn_sched.c" "$root/tests/cuda/cuda_attn_check.c" "$root/engine/cpu/attn_ref.c")

# the kernels once (ptxas report kept), then each program links the object
"$nvcc" "${common[@]}" -Xptxas -v -c "$root/engine/cuda/cuda_attn.cu" -o "$out/cuda_attn.o" 2>"$out/ptxas.log"
"$nvcc" "${common[@]}" -Xptxas -v -c "$root/engine/cuda/cuda_attn_naive.cu" -o "$out/cuda_attn_naive.o" 2>>"$out/ptxas.log"
"$nvcc" "${common[@]}" -Xptxas -v -c "$root/engine/cuda/cuda_attn_v2.cu" -o "$out/cuda_attn_v2.o" 2>>"$out/ptxas.log"
kern=("$out/cuda_attn.o" "$out/cuda_attn_naive.o" "$out/cuda_attn_v2.o")
"$nvcc" "${common[@]}" "$root/tests/cuda/test_cuda_kv_host.c" \
    "$root/tests/cuda/cuda_fp8_toolkit.cu" "${ref[@]}" "${kern[@]}" -o "$out/test_cuda_kv_host"
"$nvcc" "${common[@]}" "$root/tests/cuda/test_cuda_attn.c" "${ref[@]}" "${kern[@]}" -o "$out/test_cuda_attn"
"$nvcc" "${common[@]}" "$root/tests/cuda/test_cuda_split_policy.c" "$root/engine/cuda/cuda_kv_host.c" \
    "$root/engine/cuda/cuda_attn_sched.c" -o "$out/test_cuda_split_policy"
"$nvcc" "${common[@]}" "$root/bench/cuda/bench_attn_cuda.cu" "${ref[@]}" "${kern[@]}" -lcublas \
    -o "$out/bench_attn_cuda"
# one line per kernel and arch: arch, registers, static smem, spills, mangled name
awk '/Compiling entry function/ { split($0, a, "'"'"'"); fn = a[2]; match($0, /sm_[0-9]+/); arch = substr($0, RSTART, RLENGTH) }
     /spill stores/ { sp = $5 " B spill stores, " $9 " B spill loads" }
     /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); r = substr($0, RSTART + 5, RLENGTH - 15)
                               sm = match($0, /[0-9]+ bytes smem/) ? substr($0, RSTART, RLENGTH) : "0 bytes smem"
                               print arch, r " regs", sm " (static)", sp, fn }' "$out/ptxas.log" >"$out/ptxas.summary" || true
echo "built: $out/{test_cuda_kv_host,test_cuda_split_policy,test_cuda_attn,bench_attn_cuda} (ptxas: $out/ptxas.summary)"
