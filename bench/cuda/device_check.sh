#!/usr/bin/env bash
# device_check.sh: the GPU check of the cuda backend and its kernels, as ONE
# prepared run on a bare NVIDIA GPU host (e.g. an H200 with nvcc 13, CMake,
# ninja, PyTorch; none of this project's Debian libraries; no network).
# Run from the repository root on the GPU host, after bench/cuda/pack.sh on
# the build machine and with its .devpack/ copied into the checkout there:
#
#   bash bench/cuda/pack.sh                  # build machine: .devpack/
#   bash bench/cuda/device_check.sh          # GPU host; ~6 minutes (DEVICE_CHECK_BUDGET_S)
#   # with SGLang's kernel beside ours: bash bench/cuda/fetch_sglang_ref.sh on
#   # the build machine, and .sglang_ref/ copied beside .devpack/
#
# Steps, in order of value (each bounded in time; the default budget of
# 330 s leaves room for a second run inside 15 minutes of machine time, and a
# step that no longer fits is skipped, not started):
#   gpu            nvidia-smi: the device, driver, memory (none -> every GPU
#                  step below is skipped, with the reason, in seconds)
#   toolchain      nvcc, cmake, gcc, glibc, python versions
#   cublas         where libcublas.so.13 is (the toolkit's or the pip wheel's)
#   manifest       the carried .devpack/ was built from this tree: every
#                  source file pack.sh hashed (.devpack/SOURCES.sha256) is
#                  unchanged here (a stale pack is a failed step; the kernels
#                  are then rebuilt from this tree by kernels-build)
#   kernels-build  only when the carried kernel programs are missing or
#                  stale: the standalone nvcc build (bench/cuda/standalone/)
#   quick          test_cuda_attn --quick, 30 s: three small cases, the first
#                  sign of life of the kernels on this GPU
#   memcheck       compute-sanitizer --tool memcheck on --quick, when the
#                  host has compute-sanitizer
#   kernel-tests   the kernels against the cpu reference (test_cuda_attn,
#                  test_cuda_kv_host, test_cuda_split_policy), and the tiled
#                  kernel's testing faults caught (test_cuda_attn_fault)
#   bench          bench_attn_cuda: roofs, then naive/tiled/v2 over N
#   racecheck, synccheck
#                  compute-sanitizer's other two tools on --quick
#   ncu            optional: Nsight Compute (ncu, when the host has it;
#                  skipped with a message otherwise) on bench_attn_cuda
#                  --only-n 64 (H=64, k=2048, both layouts): per kernel
#                  (naive, tiled, v2) achieved DRAM bandwidth %, issue-slot
#                  utilisation %, occupancy and duration, into ncu.csv and
#                  ncu.txt; <= 120 s; a failure (no counter permission, an
#                  unknown metric) is a warning, never a failed run
#   loadlaw        the carried loadlaw (.devpack/programs.tar.xz, unpacked
#                  first) starts (glibc, libraries)
#   backend-tests  the carried cuda backend tests (cuda_start, cuda_tp_host,
#                  the conformance suite's backend, engine and rescore paths
#                  on cuda: test_backends PATH cuda; prompt logprobs over
#                  HTTP: cuda_engine_plp; the three kernels' outputs alike:
#                  cuda_engine_kernels)
#   ab             loadlaw sweep scenarios/kernel-ab-cuda.json: naive vs
#                  tiled end to end, compare, the two gates: expect_speedup
#                  and expect_same_outputs (greedy tokens recorded on both sides)
#   nccl-tp        only where it can work: two GPUs, or one GPU and NCCL >=
#                  2.30 (two ranks on it, NCCL_MULTI_RANK_GPU_ENABLE=1);
#                  otherwise skipped with the NCCL version found. An
#                  all-reduce with K=1 and K=2, the cuda backend's tp=2
#                  against tp=1 (test_backends tp cuda), and if tp=2 initialised a
#                  short sweep of scenarios/tp-ab-cuda.json
#   sglang-ref     optional: SGLang's Triton sparse decode kernel (carried in
#                  .sglang_ref/ by bench/cuda/fetch_sglang_ref.sh, never
#                  committed) checked and timed beside ours (bench/cuda/sglang_ref.py);
#                  <= 90 s, only when that much budget is left; never fails the run
# then ONE summary block: a line per step, and the figures to paste into
# engine/cuda/README.md (its format: there, "The GPU check"). Logs under $OUT
# (default /tmp/loadlaw-device-check; a few files, folders as tarballs):
# summary.txt, device_check.log, logs.tar.gz, ab.tar.gz, bench.csv, tp-ab.tar.gz,
# ncu.csv and ncu.txt.
# Exit status: 0 when no step failed (skips allowed), 1 otherwise.
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
OUT=${OUT:-/tmp/loadlaw-device-check}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/loadlaw-dc.XXXXXX)
logs=$work/logs
mkdir -p "$logs"
exec 3>&1 4>&2 > >(tee "$OUT/device_check.log") 2>&1
tee_pid=$!

t_start=$(date +%s)
budget_s=${DEVICE_CHECK_BUDGET_S:-330} # 5.5 minutes of steps: a second run still fits in 15 minutes
nccl_reserve_s=${DEVICE_CHECK_NCCL_RESERVE_S:-120} # kept back from the kernel A/B for nccl-tp, when it can run
pack=$root/.devpack

declare -a s_name=() s_state=() s_note=()
record() { s_name+=("$1"); s_state+=("$2"); s_note+=("$3"); }
left() { echo $((budget_s - ($(date +%s) - t_start))); }
section() { printf '\n==== %s ====\n' "$*"; }

# run_bounded NAME MAX_S CMD...: run with a time bound (the smaller of MAX_S
# and what is left), output to $logs/NAME.log and the terminal; sets rc and
# dur. rc 124 = stopped at its bound; rc 200 = not started (no time left).
run_bounded() {
    local name=$1 max=$2
    shift 2
    local l
    l=$(left)
    if [ "$l" -lt 20 ]; then
        rc=200
        dur=0
        return
    fi
    [ "$max" -gt "$l" ] && max=$l
    local t0
    t0=$(date +%s)
    timeout -k 5 "$max" "$@" >"$logs/$name.log" 2>&1
    rc=$?
    dur=$(($(date +%s) - t0))
    tail -n 40 "$logs/$name.log"
    [ "$rc" -eq 124 ] && echo "($name: stopped at its ${max}s bound)"
}

# "N passed, M failed" of a test log, or its last line
test_line() { grep -E "passed, [0-9]+ failed|^SKIP" "$1" | tail -1 || tail -1 "$1"; }

# ---- gpu ---------------------------------------------------------------------
section gpu
gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi >"$logs/nvidia-smi.log" 2>&1; then
    cat "$logs/nvidia-smi.log"
    q=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
    gpu=1
    record gpu ok "${q:-nvidia-smi answered}"
else
    why="no nvidia-smi"
    command -v nvidia-smi >/dev/null 2>&1 && why="nvidia-smi failed: $(head -1 "$logs/nvidia-smi.log" 2>/dev/null)"
    echo "no GPU: $why"
    record gpu skip "no GPU ($why): every GPU step is skipped"
fi

# ---- toolchain ---------------------------------------------------------------------
section toolchain
nvcc_bin=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
v_nvcc=$([ -n "$nvcc_bin" ] && "$nvcc_bin" --version | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p')
v_cmake=$(cmake --version 2>/dev/null | head -1 | awk '{print $3}')
v_gcc=$(gcc -dumpfullversion 2>/dev/null)
v_glibc=$(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')
v_py=$(timeout 20 python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)
note="nvcc ${v_nvcc:-none}, cmake ${v_cmake:-none}, gcc ${v_gcc:-none}, glibc ${v_glibc:-?}, python ${v_py:-none}"
echo "$note"
record toolchain ok "$note"

# ---- cublas --------------------------------------------------------------------------
section cublas
cublas_dir=""
# the toolkit (lib64, or lib where it was assembled from wheels as here),
# then CUDA 13's pip wheels, which install to nvidia/cu13/lib (there is no
# nvidia.cublas module any more: nvidia-cublas 13 ships nvidia/cu13/...)
venv_nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/lib \
    /usr/local/cuda/targets/x86_64-linux/lib "$venv_nv/cu13/lib" "$venv_nv/cublas/lib"; do
    [ -e "$d/libcublas.so.13" ] && { cublas_dir=$d; break; }
done
if [ -z "$cublas_dir" ]; then
    for d in $(timeout 30 python3 -c 'import os, nvidia
for p in nvidia.__path__:
    print(os.path.join(p, "cu13", "lib")); print(os.path.join(p, "cublas", "lib"))' 2>/dev/null); do
        [ -e "$d/libcublas.so.13" ] && { cublas_dir=$d; break; }
    done
fi
if [ -z "$cublas_dir" ]; then
    f=$(timeout 30 find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -1)
    [ -n "$f" ] && cublas_dir=$(dirname "$f")
fi
if [ -n "$cublas_dir" ]; then
    echo "libcublas.so.13 in $cublas_dir"
    record cublas ok "$cublas_dir"
else
    echo "libcublas.so.13 not found: the carried loadlaw and backend tests cannot start"
    record cublas fail "libcublas.so.13 not found (toolkit lib64, pip nvidia-cublas, find /)"
fi
export LOADLAW_SOURCE_DIR=$root # the carried tests read scenarios/ from this tree
# Library paths per program, never exported: the pack's Debian libz, libssl,
# ... must not reach the machine's own nvcc, cmake or python.
k_env=(env "LD_LIBRARY_PATH=${cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# The carried programs: pack.sh puts bin/ and lib/ in one xz archive,
# unpacked here into $prog (tar with xz, else python3's tarfile: the host
# may lack xz); a pack with bin/ beside its MANIFEST is used as it is.
prog=$pack
unpack_note=""
if [ -f "$pack/programs.tar.xz" ] && [ ! -d "$pack/bin" ]; then
    prog=$work/devpack
    mkdir -p "$prog"
    t0=$(date +%s)
    if command -v xz >/dev/null 2>&1 && timeout 120 tar -xJf "$pack/programs.tar.xz" -C "$prog" 2>"$logs/unpack.log"; then
        unpack_note="programs.tar.xz unpacked by tar in $(($(date +%s) - t0))s"
    elif rm -rf "${prog:?}"/* && timeout 120 python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
        "$pack/programs.tar.xz" "$prog" 2>>"$logs/unpack.log"; then
        unpack_note="programs.tar.xz unpacked by python3's tarfile in $(($(date +%s) - t0))s"
    else
        unpack_note="programs.tar.xz could not be unpacked (unpack.log in logs.tar.gz)"
    fi
    echo "$unpack_note"
fi
ll_env=(env "LD_LIBRARY_PATH=$prog/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# ---- manifest: was the carried pack built from this tree? ------------------------------------
section manifest
pack_fresh=0
pack_id=$(sed -n 's/^loadlaw device pack: \([^,]*\),.*/\1/p' "$pack/MANIFEST" 2>/dev/null | head -1)
if [ ! -f "$pack/MANIFEST" ]; then
    record manifest fail "no .devpack/: run bench/cuda/pack.sh on the build machine and copy .devpack here"
elif [ ! -f "$pack/SOURCES.sha256" ]; then
    record manifest fail "pack ${pack_id:-?} has no SOURCES.sha256 (an older pack.sh): rebuild it"
else
    # sha256sum -c: "path: FAILED" (changed) or "path: FAILED open or read" (gone)
    bad=$(sha256sum -c --quiet "$pack/SOURCES.sha256" 2>/dev/null | sed -n 's/: FAILED.*//p')
    nsrc=$(wc -l <"$pack/SOURCES.sha256")
    nbad=$(printf '%s' "$bad" | grep -c . || true)
    if [ "$nbad" -eq 0 ]; then
        pack_fresh=1
        record manifest ok "pack ${pack_id:-?} built from this tree ($nsrc source files match)${unpack_note:+; $unpack_note}"
    else
        record manifest fail "pack ${pack_id:-?} was built from other sources: $nbad of $nsrc files differ here ($(printf '%s' "$bad" | head -3 | paste -sd ' ' -)); kernels rebuilt here, loadlaw and backend tests are the pack's${unpack_note:+; $unpack_note}"
    fi
fi
echo "${s_note[${#s_note[@]}-1]}"

# ---- kernels: build (only when the pack cannot serve), quick test, sanitizers, tests, bench ------
kbin=$work/kernels
mkdir -p "$kbin"
sa=$root/bench/cuda/standalone
kbuilt=""
section kernels-build
if [ "$gpu" -eq 0 ]; then
    record kernels-build skip "no GPU"
elif [ "$pack_fresh" -eq 1 ] && [ -x "$prog/bin/test_cuda_attn" ] && [ -x "$prog/bin/bench_attn_cuda" ]; then
    record kernels-build skip "not needed: the pack's kernel programs are this tree's"
elif [ -z "$nvcc_bin" ]; then
    record kernels-build fail "no nvcc, and the pack's kernel programs are missing or stale"
else
    # sm_90 only: the H200's, and half the compile time (README-device.txt)
    run_bounded kernels-build 180 env ARCH="-gencode arch=compute_90,code=sm_90" bash "$sa/build.sh" "$kbin"
    if [ "$rc" -eq 0 ]; then
        kbuilt=$kbin
        # ptxas.summary: "... N B spill stores, N B spill loads ..." per kernel
        spills=$(grep -cE "[1-9][0-9]* B spill" "$kbin/ptxas.summary" 2>/dev/null)
        record kernels-build ok "bench/cuda/standalone/build.sh, ${dur}s; ptxas: ${spills:-?} kernel(s) with spills (ptxas.summary in logs)"
        cp "$kbin/ptxas.summary" "$logs/" 2>/dev/null
    elif [ "$rc" -eq 200 ]; then
        record kernels-build skip "out of time"
    else
        record kernels-build fail "exit $rc after ${dur}s (logs.tar.gz: kernels-build.log)"
    fi
fi

# what to run: the fresh build's programs, else the carried ones ($prog/bin)
kfind() {
    local n=$1 f=""
    [ -n "$kbuilt" ] && f=$(find "$kbuilt" -type f -name "$n" -perm -u+x 2>/dev/null | head -1)
    [ -z "$f" ] && [ -x "$prog/bin/$n" ] && f=$prog/bin/$n
    echo "$f"
}

# compute-sanitizer: PATH, the toolkit, pip's nvidia-cuda-sanitizer-api
sanitizer=$(command -v compute-sanitizer 2>/dev/null || ls /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda-13*/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
quick_ok=0
section quick
tca=$(kfind test_cuda_attn)
if [ "$gpu" -eq 0 ]; then
    record quick skip "no GPU"
elif [ -z "$tca" ]; then
    record quick fail "no test_cuda_attn (not built, not carried)"
else
    run_bounded quick 30 "${k_env[@]}" "$tca" --quick
    case $rc in
    0) quick_ok=1; record quick ok "${dur}s: $(test_line "$logs/quick.log")" ;;
    77) record quick skip "$(test_line "$logs/quick.log")" ;;
    124) record quick fail "stopped at its 30s bound" ;;
    200) record quick skip "out of time" ;;
    *) record quick fail "exit $rc: $(test_line "$logs/quick.log")" ;;
    esac
fi

# sanitize TOOL: compute-sanitizer --tool TOOL on test_cuda_attn --quick, 45 s
sanitize() {
    local tool=$1
    section "$tool"
    if [ "$gpu" -eq 0 ]; then
        record "$tool" skip "no GPU"
    elif [ -z "$sanitizer" ]; then
        record "$tool" skip "no compute-sanitizer on this host (PATH, /usr/local/cuda*/bin)"
    elif [ -z "$tca" ]; then
        record "$tool" skip "no test_cuda_attn"
    else
        run_bounded "$tool" 45 "${k_env[@]}" "$sanitizer" --tool "$tool" --error-exitcode 1 "$tca" --quick
        local verdict
        verdict=$(grep -m1 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$tool.log" | sed 's/^=* *//')
        case $rc in
        0) record "$tool" ok "${dur}s: ${verdict:-no errors}" ;;
        124) record "$tool" fail "stopped at its 45s bound" ;;
        200) record "$tool" skip "out of time" ;;
        *) record "$tool" fail "exit $rc: ${verdict:-$(tail -1 "$logs/$tool.log")}" ;;
        esac
    fi
}
sanitize memcheck

section kernel-tests
if [ "$gpu" -eq 0 ]; then
    record kernel-tests skip "no GPU"
else
    ran=0
    notes=""
    state=ok
    for t in test_cuda_attn test_cuda_kv_host test_cuda_split_policy test_cuda_attn_fault; do
        f=$(kfind $t)
        [ -n "$f" ] || { notes+="$t: missing; "; continue; }
        ran=1
        run_bounded "$t" 90 "${k_env[@]}" "$f"
        line=$(test_line "$logs/$t.log")
        case $rc in
        0) notes+="$t: $line; " ;;
        77) notes+="$t: skipped ($line); " ;;
        200) notes+="$t: out of time; " ;;
        *) notes+="$t: exit $rc ($line); "; state=fail ;;
        esac
    done
    if [ "$ran" -eq 1 ]; then
        record kernel-tests "$state" "$notes"
    else
        record kernel-tests fail "no kernels test program (not built, not carried)"
    fi
fi

section bench
if [ "$gpu" -eq 0 ]; then
    record bench skip "no GPU"
else
    f=$(kfind bench_attn_cuda)
    if [ -z "$f" ]; then
        record bench fail "no bench_attn_cuda (not built, not carried)"
    else
        run_bounded bench 100 "${k_env[@]}" "$f" --csv "$OUT/bench.csv"
        # the roofs, then per layout N = 1, 64, 256: times, % of copy bandwidth, naive/tiled
        key=$({
            grep -E "^roofs:" "$logs/bench.log" | cut -c1-90
            awk '$1 ~ /^(bf16|fp8)$/ && ($2 == 1 || $2 == 64 || $2 == 256) {
                printf "%s N=%s: naive %sus tiled %sus (%s of copy) n/t %s v2 %sus (%s)\n", $1, $2, $3, $4, $9, $13, $14, $16 }' \
                "$logs/bench.log"
        } | paste -sd ';' -)
        case $rc in
        0) record bench ok "${dur}s: ${key:-see bench.log}" ;;
        77) record bench skip "$(test_line "$logs/bench.log")" ;;
        200) record bench skip "out of time" ;;
        *) record bench fail "exit $rc after ${dur}s: $(tail -1 "$logs/bench.log")" ;;
        esac
    fi
fi
sanitize racecheck
sanitize synccheck

# ---- ncu: achieved DRAM bandwidth and issue-slot utilisation per kernel ----------------------
# One representative shape (N = 64, H = 64, k = 2048, bf16 and fp8: every
# kernel at one batch, --iters 1: a check, three warm-ups and one timed call
# per kernel and layout, each replayed by ncu for its metrics). The metrics:
# DRAM throughput (% of peak, elapsed) and issued instructions (% of the
# issue slots, active cycles): is a kernel bound by memory or by issue.
section ncu
ncu_bin=$(command -v ncu 2>/dev/null || ls /usr/local/cuda/bin/ncu /usr/local/cuda-13*/bin/ncu \
    /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "$gpu" -eq 0 ]; then
    record ncu skip "no GPU"
elif [ -z "$ncu_bin" ]; then
    record ncu skip "no ncu on this host (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute): Nsight Compute figures not recorded"
elif [ -z "$(kfind bench_attn_cuda)" ]; then
    record ncu skip "no bench_attn_cuda"
else
    run_bounded ncu 120 "${k_env[@]}" "$ncu_bin" --csv --kernel-name regex:'mla_decode_(naive|tiled|v2)_kernel' \
        --launch-count 60 --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum \
        "$(kfind bench_attn_cuda)" --no-roofs --only-n 64 --iters 1
    cp "$logs/ncu.log" "$OUT/ncu.csv" 2>/dev/null
    python3 "$root/bench/cuda/ncu_summary.py" "$OUT/ncu.csv" >"$OUT/ncu.txt" 2>&1
    ncu_rc=$?
    case $rc in
    0) if [ "$ncu_rc" -eq 0 ]; then
           record ncu ok "${dur}s: ncu.txt ($(wc -l <"$OUT/ncu.txt") kernels)"
       else
           record ncu warn "${dur}s: ncu ran, its CSV gave no figures: $(head -1 "$OUT/ncu.txt")"
       fi ;;
    200) record ncu skip "out of time" ;;
    124) record ncu warn "stopped at its bound; partial ncu.csv kept" ;;
    *) record ncu warn "exit $rc: $(grep -m1 -E "ERR|rror" "$logs/ncu.log" | cut -c1-160)" ;;
    esac
fi

# ---- the carried loadlaw ------------------------------------------------------------------
section loadlaw
ll_ok=0
if [ ! -x "$prog/bin/loadlaw" ]; then
    record loadlaw fail "no carried loadlaw (.devpack/programs.tar.xz): run bench/cuda/pack.sh on the build machine and copy .devpack here"
else
    if timeout 20 "${ll_env[@]}" "$prog/bin/loadlaw" --version >"$logs/loadlaw-version.log" 2>&1; then
        ll_ok=1
        record loadlaw ok "$(head -1 "$logs/loadlaw-version.log" | cut -c1-60)"
    else
        record loadlaw fail "the carried binary does not start here: $(head -1 "$logs/loadlaw-version.log")"
    fi
    cat "$logs/loadlaw-version.log"
fi

section backend-tests
if [ "$ll_ok" -eq 0 ]; then
    record backend-tests skip "the carried programs do not start (see loadlaw)"
else
    notes=""
    state=ok
    for c in test_cuda_start test_cuda_tp_host "test_backends backend cuda" "test_backends engine cuda" \
             "test_backends rescore cuda" test_cuda_engine_plp test_cuda_engine_kernels; do
        read -r -a argv <<<"$c"
        t=$(tr ' ' _ <<<"$c") # its log's name: test_backends_backend_cuda, ...
        [ -x "$prog/bin/${argv[0]}" ] || { notes+="$t: not carried; "; state=fail; continue; }
        run_bounded "$t" 120 "${ll_env[@]}" "$prog/bin/${argv[0]}" "${argv[@]:1}"
        line=$(test_line "$logs/$t.log")
        case $rc in
        0) notes+="$t: $line; " ;;
        77) notes+="$t: skip; " ;;
        200) notes+="$t: out of time; " ;;
        *) notes+="$t: exit $rc ($line); "; state=fail ;;
        esac
    done
    [ "$gpu" -eq 0 ] && [ "$state" = ok ] && notes+="(GPU tests skip without a GPU)"
    record backend-tests "$state" "$notes"
fi

# ---- can the NCCL step work here? (decided before the A/B, which leaves it its share) -----------
# libnccl.so.2 (pip nvidia-nccl-cu13, the venv, the toolkit) and its version
# (test_comm_nccl load, 30 s): tensor parallelism needs two GPUs, or one GPU
# and NCCL 2.30+ (two ranks on it, NCCL_MULTI_RANK_GPU_ENABLE=1).
ngpu=0
[ "$gpu" -eq 1 ] && ngpu=$(timeout 20 nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
nccl=""
# pip nvidia-nccl-cu13 installs nvidia/nccl/lib/libnccl.so.2 (a namespace
# package: no __file__); the venv's path first, then python's, the toolkit's
for f in "$venv_nv/nccl/lib/libnccl.so.2" "$venv_nv/cu13/lib/libnccl.so.2"; do
    [ -e "$f" ] && { nccl=$f; break; }
done
if [ -z "$nccl" ]; then
    for d in $(timeout 30 python3 -c 'import os, nvidia
for p in nvidia.__path__:
    print(os.path.join(p, "nccl", "lib")); print(os.path.join(p, "cu13", "lib"))' 2>/dev/null); do
        [ -e "$d/libnccl.so.2" ] && { nccl=$d/libnccl.so.2; break; }
    done
fi
if [ -z "$nccl" ]; then
    for f in /usr/local/cuda*/lib64/libnccl.so.2 /usr/local/cuda*/lib/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
        [ -e "$f" ] && { nccl=$f; break; }
    done
fi
if [ -z "$nccl" ] && [ "$gpu" -eq 1 ] && [ "$(left)" -ge 60 ]; then
    # a venv's or conda's site-packages, bounded
    nccl=$(timeout 30 find / -xdev \( -path /proc -o -path /sys \) -prune -o -name 'libnccl.so.2' -print 2>/dev/null | head -1)
fi
tcn=$prog/bin/test_comm_nccl
tct=$prog/bin/test_backends
nccl_ver=""
nccl_can=0
nccl_why="no GPU${nccl:+; NCCL at $nccl}"
if [ "$gpu" -eq 1 ]; then
    if [ -z "$nccl" ]; then
        nccl_why="libnccl.so.2 not found (pip nvidia-nccl-cu13, /usr/local/cuda*, find /)"
    elif [ "$ll_ok" -eq 0 ] || [ ! -x "$tcn" ] || [ ! -x "$tct" ]; then
        nccl_why="NCCL at $nccl; the carried test_comm_nccl / test_backends are missing or do not start (pack.sh)"
    else
        section "nccl version"
        run_bounded nccl-version 30 "${ll_env[@]}" env "LOADLAW_NCCL_LIB=$nccl" NCCL_DEBUG=WARN "$tcn" load
        nccl_ver=$(sed -n 's/^NCCL \([0-9.]*\) loaded.*/\1/p' "$logs/nccl-version.log" | head -1)
        # 2.30+ as one number: major * 100 + minor
        vnum=$(awk -F. -v v="$nccl_ver" 'BEGIN { split(v, a, "."); print (a[1] + 0) * 100 + (a[2] + 0) }')
        if [ -z "$nccl_ver" ]; then
            nccl_why="NCCL at $nccl did not load: $(tail -1 "$logs/nccl-version.log" | cut -c1-120)"
        elif [ "$ngpu" -ge 2 ] || [ "$vnum" -ge 230 ]; then
            nccl_can=1
        else
            nccl_why="1 GPU and NCCL $nccl_ver ($nccl): two ranks on one GPU need NCCL 2.30+"
        fi
    fi
fi
echo "nccl: ${nccl_ver:-?} at ${nccl:-none}; ${ngpu} GPU(s); $([ "$nccl_can" -eq 1 ] && echo "the nccl-tp step runs" || echo "$nccl_why")"

# ---- end to end ------------------------------------------------------------------------------
section ab
if [ "$gpu" -eq 0 ]; then
    record ab skip "no GPU"
elif [ "$ll_ok" -eq 0 ]; then
    record ab skip "the carried loadlaw does not start"
else
    ab=$work/ab
    # leave nccl-tp (next), when it can run, its share of the budget
    ab_max=$(left)
    [ "$nccl_can" -eq 1 ] && ab_max=$((ab_max - nccl_reserve_s))
    [ "$ab_max" -gt 150 ] && ab_max=150
    [ "$ab_max" -lt 60 ] && ab_max=60
    run_bounded ab "$ab_max" "${ll_env[@]}" "$prog/bin/loadlaw" sweep scenarios/kernel-ab-cuda.json -o "$ab" -q
    # the two laws, slope B/A, attention's share, the C=64 row, the two gates
    key=$(grep -iE "step = |slope B/A|attention share|^ +64 +[0-9]|expect|speedup" "$logs/ab.log" |
        head -10 | tr -s ' ' | cut -c1-110 | paste -sd ';' -)
    (cd "$work" && tar czf "$OUT/ab.tar.gz" ab 2>/dev/null)
    case $rc in
    0) record ab ok "${dur}s: ${key:-see ab.log}" ;;
    3) record ab fail "a gate failed (exit 3: expect_speedup or expect_same_outputs): ${key:-see ab.log}" ;;
    200) record ab skip "out of time" ;;
    124) record ab fail "stopped at its bound after ${dur}s" ;;
    *) record ab fail "exit $rc after ${dur}s: $(tail -1 "$logs/ab.log")" ;;
    esac
fi

# ---- NCCL tensor parallelism ------------------------------------------------------------------
section "nccl-tp"
# Each part time-bounded (a collective that never completes hangs, it does
# not fail): a real all-reduce with K=1, then K=2 (two GPUs, or both ranks
# on this one with NCCL_MULTI_RANK_GPU_ENABLE=1), the cuda backend's tp=2
# against tp=1 (test_backends tp cuda), and when tp=2 initialised a short `loadlaw
# sweep scenarios/tp-ab-cuda.json`. One summary line: NCCL's version and
# where, ok/fail/skip of each part, the two laws.
if [ "$nccl_can" -eq 0 ]; then
    echo "$nccl_why"
    if [ "$gpu" -eq 1 ] && [ -z "$nccl" ]; then
        record nccl-tp fail "$nccl_why"
    else
        record nccl-tp skip "$nccl_why"
    fi
else
    n_env=(env "LOADLAW_NCCL_LIB=$nccl" NCCL_DEBUG=WARN)
    multi=()
    [ "$ngpu" -lt 2 ] && multi=(NCCL_MULTI_RANK_GPU_ENABLE=1)
    state=ok
    notes="NCCL $nccl_ver ($nccl), ${ngpu} GPU(s); "
    # K=1: the communicator and a collective on this GPU
    run_bounded nccl-k1 45 "${ll_env[@]}" "${n_env[@]}" "$tcn" allreduce 1
    case $rc in
    0) notes+="allreduce K=1 ok; " ;;
    77) notes+="allreduce K=1 skip ($(test_line "$logs/nccl-k1.log")); " ;;
    124) notes+="allreduce K=1 HUNG (>45s); "; state=fail ;;
    200) notes+="allreduce K=1 out of time; " ;;
    *) notes+="allreduce K=1 fail: $(grep -m1 -E "CHECK|nccl" "$logs/nccl-k1.log" | cut -c1-120); "; state=fail ;;
    esac
    # K=2: two GPUs, or two ranks on this one (what NCCL says is the finding)
    run_bounded nccl-k2 60 "${ll_env[@]}" "${n_env[@]}" "${multi[@]}" "$tcn" allreduce 2
    k2=$rc
    where="on 2 GPUs"
    [ "$ngpu" -lt 2 ] && where="2 ranks on 1 GPU (NCCL_MULTI_RANK_GPU_ENABLE=1)"
    case $rc in
    0) notes+="allreduce K=2 $where ok; " ;;
    124) notes+="allreduce K=2 $where HUNG (stopped at 60s); " ;;
    200) notes+="allreduce K=2 out of time; " ;;
    *) notes+="allreduce K=2 $where refused/failed: $(grep -m1 -iE "ncclCommInitAll|error|CHECK" "$logs/nccl-k2.log" | cut -c1-140); " ;;
    esac
    # a K=2 that fails on two real GPUs is a failure; on one GPU it is what
    # this NCCL does (2.30+ needed), reported, not failed
    [ "$ngpu" -ge 2 ] && [ "$k2" -ne 0 ] && [ "$k2" -ne 200 ] && state=fail
    # the cuda backend: tp=2 against tp=1 (skips itself when NCCL refuses)
    run_bounded cuda-tp 90 "${ll_env[@]}" "${n_env[@]}" "${multi[@]}" "$tct" tp cuda
    tp2=0
    case $rc in
    0) tp2=1; notes+="cuda tp=2 vs tp=1: $(test_line "$logs/cuda-tp.log"), $(grep -m1 "tokens agree:" "$logs/cuda-tp.log" | sed 's/^ *//'); " ;;
    77) notes+="cuda tp=2: skip ($(grep -m1 "^SKIP" "$logs/cuda-tp.log" | cut -c1-160)); " ;;
    124) notes+="cuda tp=2: HUNG (stopped at 90s); "; state=fail ;;
    200) notes+="cuda tp=2: out of time; " ;;
    *) notes+="cuda tp=2: exit $rc ($(test_line "$logs/cuda-tp.log")); "; state=fail ;;
    esac
    # the laws, tp=1 against tp=2, when tp=2 runs here
    if [ "$tp2" -eq 1 ]; then
        tpab=$work/tp-ab
        run_bounded tp-ab 150 "${ll_env[@]}" "${n_env[@]}" "${multi[@]}" "$prog/bin/loadlaw" sweep scenarios/tp-ab-cuda.json -o "$tpab" -q
        key=$(grep -iE "step = |slope B/A|nccl|communication" "$logs/tp-ab.log" | head -8 | tr -s ' ' | cut -c1-110 | paste -sd ';' -)
        (cd "$work" && tar czf "$OUT/tp-ab.tar.gz" tp-ab 2>/dev/null)
        case $rc in
        0) notes+="sweep tp1/tp2 ${dur}s: ${key:-see tp-ab.log}" ;;
        200) notes+="sweep: out of time" ;;
        124) notes+="sweep: stopped at its bound after ${dur}s"; state=fail ;;
        *) notes+="sweep: exit $rc: $(tail -1 "$logs/tp-ab.log" | cut -c1-120)"; state=fail ;;
        esac
    else
        notes+="sweep not run (tp=2 did not initialise)"
    fi
    echo "$notes"
    record nccl-tp "$state" "$notes"
fi

# ---- optional: SGLang's own Triton kernel beside ours ----------------------------------------
section "sglang-ref (optional)"
# bench/cuda/sglang_ref.py runs SGLang's _tiled_sparse_decode_kernel (and the
# multi-head one when fetched) from the carried .sglang_ref/ (never committed:
# bench/cuda/fetch_sglang_ref.sh), checks it against a float64 torch reference
# and times it for N = 1, 8, 32, 64, 128. Their kernel reads only DeepSeek-V4's
# FP8 cache (584 B/token, q.k over 512 dims), so its rows are the nearest
# problem, not our exact inputs: same N, H, k, index pattern and scale. One
# summary line per N puts theirs beside bench_attn_cuda's rows at that N.
# Optional: it never fails the check (a problem is recorded as "warn").
sg_max=90
if [ "$gpu" -eq 0 ]; then
    record sglang-ref skip "no GPU"
elif [ ! -f "$root/.sglang_ref/flash_mla_sm120_triton.py" ]; then
    record sglang-ref skip ".sglang_ref/ not carried (bash bench/cuda/fetch_sglang_ref.sh on the build machine; copy .sglang_ref here)"
elif [ "$(left)" -lt "$sg_max" ]; then
    record sglang-ref skip "out of budget: $(left)s left, the step needs ${sg_max}s"
else
    run_bounded sglang-ref "$sg_max" env PYTHONUNBUFFERED=1 python3 bench/cuda/sglang_ref.py
    sg_checks=$(grep -E "^check " "$logs/sglang-ref.log" | sed 's/^check //; s/ (N=2, k=100, one sequence all -1)//' |
        cut -c1-70 | paste -sd ';' -)
    case $rc in
    0) record sglang-ref ok "${dur}s, checks: ${sg_checks:-none}" ;;
    77) record sglang-ref skip "$(grep -m1 '^SKIP' "$logs/sglang-ref.log")" ;;
    124) record sglang-ref warn "stopped at its ${sg_max}s bound; rows timed before that below" ;;
    200) record sglang-ref skip "out of time" ;;
    *) record sglang-ref warn "exit $rc after ${dur}s: $(tail -1 "$logs/sglang-ref.log" | cut -c1-100); ${sg_checks}" ;;
    esac
    # one line per N: theirs (us, GB/s over 584 B/row), ours from the bench step (bf16, fp8 V3.2)
    while read -r n; do
        theirs=$(awk -v n="$n" '$1 ~ /^(perhead|mhead)$/ && $2 == n && $10 == "ok" {
            printf "%s%s %sus %sGB/s", sep, $1, $5, $7; sep = ", " }' "$logs/sglang-ref.log")
        ours=$(awk -v n="$n" '$1 ~ /^(bf16|fp8)$/ && $2 == n {
            printf "%s%s naive %sus tiled %sus %sGB/s", sep, $1, $3, $4, $8; sep = ", " }' "$logs/bench.log" 2>/dev/null)
        record "sglang N=$n" info "theirs (V4 fp8 584B): $theirs | ours: ${ours:-no bench row}"
    done < <(awk '$1 ~ /^(perhead|mhead)$/ && $10 == "ok" { print $2 }' "$logs/sglang-ref.log" | sort -nu)
fi

# ---- summary ------------------------------------------------------------------------------------
(cd "$work" && tar czf "$OUT/logs.tar.gz" logs 2>/dev/null)
failed=0
for st in "${s_state[@]}"; do [ "$st" = fail ] && failed=1; done
# step NAME: "state: note" of a recorded step ("not run" when none)
step() {
    local i
    for i in "${!s_name[@]}"; do
        [ "${s_name[$i]}" = "$1" ] && { echo "${s_state[$i]}: ${s_note[$i]}"; return; }
    done
    echo "not run"
}
# The figures block, one fixed format (engine/cuda/README.md): a line per
# figure; a figure not measured says why, from its step's note.
figures() {
    echo "device: $(step gpu)"
    echo "pack: $(step manifest)"
    if [ -f "$logs/bench.log" ] && grep -q "^roofs:" "$logs/bench.log"; then
        echo "$(grep -m1 "^roofs:" "$logs/bench.log")"
        echo "kernels (H=64, k=2048; GB/s over unique KV bytes, % of the copy roof):"
        printf '  %-5s %4s %10s %10s %10s %6s %8s %10s %10s %6s %7s\n' kv N naive_us tiled_us tiled_GBs %copy naive/t \
            v2_us v2_GBs %copy t/v2
        awk '$1 ~ /^(bf16|fp8)$/ && $2 ~ /^[0-9]+$/ {
            printf "  %-5s %4s %10s %10s %10s %6s %8s %10s %10s %6s %7s\n", $1, $2, $3, $4, $8, $9, $13, $14, $15, $16, $17 }' \
            "$logs/bench.log"
    else
        echo "kernels: not measured ($(step bench))"
    fi
    if [ -f "$logs/ab.log" ]; then
        grep -iE "step = |slope B/A|attention share|expect|speedup" "$logs/ab.log" | head -10 | tr -s ' ' |
            sed 's/^ */law: /' | cut -c1-160
    else
        echo "law: not measured ($(step ab))"
    fi
    echo "sanitizers (test_cuda_attn --quick): memcheck $(step memcheck); racecheck $(step racecheck); synccheck $(step synccheck)"
    if [ -s "$OUT/ncu.txt" ] && grep -q "^mla_decode" "$OUT/ncu.txt"; then
        echo "ncu (N=64, H=64, k=2048; <layout 0 bf16 / 1 fp8, head groups>):"
        sed 's/^/  /' "$OUT/ncu.txt"
    else
        echo "ncu: not measured ($(step ncu))"
    fi
    echo "nccl-tp: $(step nccl-tp)" | cut -c1-300
}
{
    printf '\n==== loadlaw device check: summary (%ss of a %ss budget) ====\n' "$(($(date +%s) - t_start))" "$budget_s"
    for i in "${!s_name[@]}"; do
        printf '%-14s %-5s %s\n' "${s_name[$i]}" "${s_state[$i]}" "${s_note[$i]}"
    done
    echo "---- figures (paste into engine/cuda/README.md) ----"
    figures
    echo "---- end of figures ----"
    echo "logs: $OUT (summary.txt, device_check.log, logs.tar.gz; ab.tar.gz / tp-ab.tar.gz when the A/Bs ran)"
} | tee "$OUT/summary.txt"
rm -rf "$work"
# let tee write its last lines (the summary) before the command returns
exec 1>&3 2>&4 3>&- 4>&-
wait "$tee_pid" 2>/dev/null
exit $failed
