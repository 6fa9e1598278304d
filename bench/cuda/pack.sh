#!/usr/bin/env bash
# pack.sh: build `loadlaw` and the cuda backend's tests on the build machine
# (Debian, with the project's packages) and pack them, with every shared
# library they need that a bare GPU host lacks, into .devpack/ (git-ignored),
# for bench/cuda/device_check.sh to run on the GPU host: copy .devpack/ into
# the checkout there.
#
#   bash bench/cuda/pack.sh            # -> .devpack/{programs.tar.xz,MANIFEST,SOURCES.sha256}
#   PACK_BUILD=/tmp/x PACK_ARCH=90 bash bench/cuda/pack.sh
#
# What goes in: bin/loadlaw, bin/test_backends (the conformance suite: the
# cuda backend's backend, engine, rescore and tp paths),
# bin/test_cuda_{start,engine_plp,engine_kernels}, the tp checks
# test_cuda_tp_host, test_comm_nccl (NCCL itself is
# not packed: it is dlopen'ed from the machine's pip nvidia-nccl-cu13 or
# toolkit, LOADLAW_NCCL_LIB) and, when the kernels' targets exist, their
# tests and bench; lib/: the libraries ldd
# resolves for those, except what every Linux with an NVIDIA driver has or
# must take from its own install: glibc's (libc, libm, libdl, librt,
# libpthread, libresolv, ld-linux), libgcc_s, libstdc++, the driver's
# (libcuda, libnvidia-*) and cuBLAS (libcublas*, CUDA 13 is there: the
# device check finds it). Built with -DLOADLAW_MPI=OFF and
# -DLOADLAW_OPENBLAS=OFF (the cuda backend needs neither; OpenBLAS alone is
# 37 MB), for sm_90 (H100/H200) plus compute_90 PTX.
# The pack is meant to travel light (a copy to a GPU host): bin/ and lib/
# go into one xz archive, programs.tar.xz, and this script fails above
# 20 MiB.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${PACK_BUILD:-/tmp/loadlaw-devpack-build}
arch=${PACK_ARCH:-90}
pack=$root/.devpack
limit_mib=20
command -v xz >/dev/null || { echo "pack: needs xz for programs.tar.xz (apt-get install xz-utils)" >&2; exit 1; }

gen=()
# a new build dir uses ninja when there is one; an existing one keeps its generator
[ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
echo "pack: configuring $build (sm_$arch, MPI off, OpenBLAS off)" >&2
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLOADLAW_MPI=OFF \
    -DLOADLAW_OPENBLAS=OFF -DLOADLAW_SANITIZE=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$build.configure.log" 2>&1 ||
    { tail -20 "$build.configure.log" >&2; echo "pack: configure failed (log: $build.configure.log)" >&2; exit 1; }
if ! grep -q "CUDA (nvcc)  : found" "$build.configure.log"; then
    echo "pack: nvcc was not found: the packed loadlaw would have no cuda backend" >&2
    exit 1
fi

# the targets this tree has (the kernels' tests and bench may not exist yet)
want=(loadlaw test_backends test_cuda_start test_cuda_attn test_cuda_kv_host test_cuda_split_policy
      test_cuda_attn_fault test_cuda_engine_plp test_cuda_engine_kernels
      bench_attn_cuda test_cuda_tp_host test_comm_nccl)
have=()
# (ninja's `help` lists only phony targets; `-t targets all` has the rest)
targets=$({ cmake --build "$build" --target help; [ -f "$build/build.ninja" ] && ninja -C "$build" -t targets all; } 2>/dev/null || true)
for t in "${want[@]}"; do
    if grep -qE "(^|[ .:])$t(:|$| )" <<<"$targets"; then have+=("$t"); else echo "pack: no target $t here, skipped" >&2; fi
done
jobs=${PACK_JOBS:-$(nproc)}
echo "pack: building ${have[*]} (-j$jobs)" >&2
cmake --build "$build" -j "$jobs" --target "${have[@]}" >"$build.build.log" 2>&1 ||
    { grep -E "error|Error" "$build.build.log" | head -20 >&2; echo "pack: build failed (log: $build.build.log)" >&2; exit 1; }

rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib"
bins=()
for t in "${have[@]}"; do
    f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] || { echo "pack: built $t but cannot find it" >&2; exit 1; }
    cp "$f" "$pack/bin/$t"
    strip --strip-debug "$pack/bin/$t" 2>/dev/null || true
    bins+=("$pack/bin/$t")
done

# libraries: what ldd resolves, less the base system, the driver and cuBLAS
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libresolv\.so|libutil\.so|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so|libnvidia-|libcublas|libcublasLt|libcudart|libnccl)'
declare -A seen=()
for b in "${bins[@]}"; do
    while read -r name _ path _; do
        [ -n "${path:-}" ] && [ -f "$path" ] || continue
        [[ $name =~ $skip ]] && continue
        [ -n "${seen[$name]:-}" ] && continue
        seen[$name]=1
        cp -L "$path" "$pack/lib/$name"
    done < <(ldd "$b" | grep "=> /")
done
missing=$(for b in "${bins[@]}"; do ldd "$b" | grep "not found" || true; done | sort -u)
[ -z "$missing" ] || { echo "pack: unresolved here: $missing" >&2; exit 1; }

# The sources the programs were built from (tracked and new, not ignored):
# device_check.sh checks them against its tree at start (sha256sum -c), so a
# pack from another commit, or from edits since, is caught before it runs.
(cd "$root" && git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' '*.cc' '*.cuh' \
    '*CMakeLists.txt' '*.cmake' | sort -u | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done |
    xargs -d '\n' sha256sum) >"$pack/SOURCES.sha256"
{
    echo "loadlaw device pack: $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?'), $(date -u +%FT%TZ)"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo '?'); sources: $(wc -l <"$pack/SOURCES.sha256") files in SOURCES.sha256"
    echo "built on: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1), nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_$arch"
    echo "run there: mkdir -p P && tar -xJf .devpack/programs.tar.xz -C P (device_check.sh does this);"
    echo "           LD_LIBRARY_PATH=P/lib:<dir of libcublas.so.13> P/bin/loadlaw ..."
    echo
    (cd "$pack" && find bin lib -type f -printf '%s\t%p\n' | sort -k2)
} >"$pack/MANIFEST"

# bin/ and lib/ travel as one xz archive: every program carries the same
# kernels' fatbin and runtime, which xz finds across the files (53 MB of
# programs and libraries pack into about 9 MB); device_check.sh unpacks it
# with tar, or with python3's tarfile where the host has no xz.
raw=$(du -sb "$pack/bin" "$pack/lib" | awk '{ s += $1 } END { print s }')
n_bin=$(ls "$pack/bin" | wc -l)
n_lib=$(ls "$pack/lib" | wc -l)
tar -C "$pack" -cf - bin lib | xz -T0 -6 >"$pack/programs.tar.xz"
rm -rf "$pack/bin" "$pack/lib"

bytes=$(du -sb "$pack" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "pack: .devpack/ = $mib MiB ($n_bin programs, $n_lib libraries, $(awk -v b="$raw" 'BEGIN { printf "%.1f", b / 1048576 }') MiB unpacked; list in .devpack/MANIFEST)"
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
    echo "pack: over $limit_mib MiB: the pack is copied with the source tree to the GPU host, kept under this size" >&2
    exit 1
fi
