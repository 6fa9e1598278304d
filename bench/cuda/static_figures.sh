#!/usr/bin/env bash
# static_figures.sh: the attention kernels' static figures, on any machine
# with nvcc (no GPU): registers, spills, shared memory and the occupancy they
# allow per kernel (ptxas -v), and the SASS instructions of the tiled
# and v2 kernels' hot loop per KV tile (cuobjdump -sass, counted by
# static_figures.py). A benchmark, not a test: it prints figures and fails
# only when it cannot compile.
#
#   bash bench/cuda/static_figures.sh [OUTDIR]        # default /tmp/loadlaw-static
#   ARCHS="90 120" bash bench/cuda/static_figures.sh   # default: 90
#
# cuobjdump (and the nvdisasm it runs) from PATH, the toolkit's bin, or pip's
# nvidia-cuda-cuobjdump + nvidia-cuda-nvdisasm (nvidia/cu13/bin); without
# them the SASS part is reported skipped. OUTDIR keeps ptxas.log, the cubins
# and their .sass.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/loadlaw-static}
archs=${ARCHS:-90}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cc=${CC:-cc}
mkdir -p "$out"

find_tool() { # $1: name; PATH, beside nvcc, pip's nvidia/cu13/bin
    local t
    t=$(command -v "$1" 2>/dev/null) && { echo "$t"; return 0; }
    t=$(dirname "$nvcc")/$1
    [ -x "$t" ] && { echo "$t"; return 0; }
    t=$(python3 -c 'import nvidia, os, sys; p = [os.path.join(d, "cu13", "bin") for d in nvidia.__path__]; print(p[0])' 2>/dev/null)/$1
    [ -x "$t" ] && { echo "$t"; return 0; }
    return 1
}

# dynamic shared memory of the tiled kernels: the plan's (cuda_kv_host.c), the one definition
cat >"$out/plan_smem.c" <<'EOF'
#include <stdio.h>
#include "cuda_attn.h"
int main(void)
{
    const char *sep = "";
    for (int l = 0; l < 2; l++)
        for (int h = 16; h <= 32; h += 16) {
            cuda_attn_plan p;
            if (cuda_attn_tiled_plan(1, h, 64, 0, (cuda_kv_layout)l, &p) != 0)
                return 1;
            printf("%stiled-%s:%d:%zu", sep, cuda_kv_layout_name((cuda_kv_layout)l), h, p.smem_bytes);
            sep = ",";
        }
    for (int l = 0; l < 2; l++)
        for (int h = 16; h <= 64; h *= 2) {
            cuda_attn_v2_plan p;
            if (cuda_attn_v2_plan_make(1, h, 64, 0, (cuda_kv_layout)l, &p) != 0)
                return 1;
            printf(",v2-%s:%d:%zu", cuda_kv_layout_name((cuda_kv_layout)l), h, p.smem_bytes);
        }
    printf("\n");
    return 0;
}
EOF
"$cc" -O1 -I"$root/engine/cuda" -I"$root/engine" "$out/plan_smem.c" "$root/engine/cuda/cuda_kv_host.c" \
    "$root/engine/cuda/cuda_attn_sched.c" -lm \
    -o "$out/plan_smem"
smem=$("$out/plan_smem")

cuobjdump=$(find_tool cuobjdump || true)
nvdisasm=$(find_tool nvdisasm || true)
echo "nvcc: $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'); cuobjdump: ${cuobjdump:-none}"
for a in $archs; do
    : >"$out/ptxas.sm_$a.log"
    : >"$out/cuda_attn.sm_$a.sass"
    sass_ok=1
    for f in cuda_attn cuda_attn_naive cuda_attn_v2; do
        "$nvcc" -O2 -std=c++17 -lineinfo -gencode "arch=compute_$a,code=sm_$a" -I"$root/engine/cuda" -I"$root/engine" \
            -Xptxas -v -cubin -o "$out/$f.sm_$a.cubin" "$root/engine/cuda/$f.cu" 2>>"$out/ptxas.sm_$a.log"
        if [ -n "$cuobjdump" ] && [ -n "$nvdisasm" ]; then
            PATH="$(dirname "$nvdisasm"):$PATH" "$cuobjdump" -sass "$out/$f.sm_$a.cubin" >>"$out/cuda_attn.sm_$a.sass" \
                2>"$out/cuobjdump.log" || sass_ok=0
        fi
    done
    sass=()
    if [ -n "$cuobjdump" ] && [ -n "$nvdisasm" ] && [ "$sass_ok" = 1 ]; then
        sass=(--sass "$out/cuda_attn.sm_$a.sass")
    elif [ -n "$cuobjdump" ]; then
        echo "sass: cuobjdump failed ($(head -c 200 "$out/cuobjdump.log")); pip install nvidia-cuda-nvdisasm"
    else
        echo "sass: no cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
    fi
    echo
    python3 "$root/bench/cuda/static_figures.py" --ptxas "$out/ptxas.sm_$a.log" --smem "$smem" "${sass[@]}"
done
