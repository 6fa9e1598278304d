#!/usr/bin/env bash
# fetch_sglang_ref.sh: put SGLang's own Triton sparse-MLA decode kernel(s),
# UNMODIFIED, into .sglang_ref/ at the repository root, so that the GPU check
# can run them beside ours as a reference (bench/cuda/sglang_ref.py):
#
#   bash bench/cuda/fetch_sglang_ref.sh   # on the build machine (network or a mirror)
#   # then copy .sglang_ref/ beside .devpack/ into the checkout on the GPU host
#   # and run bash bench/cuda/device_check.sh there
#
# .sglang_ref/ is ignored by git (/.sglang_ref/ in .gitignore): these are a
# peer project's files (SGLang, Apache-2.0). They are NEVER committed, never
# copied into the project's own files, and never edited; our code only
# imports them from there on the GPU machine. Delete the folder at will.
#
# Where the files come from, first found wins:
#   1. a git mirror of github:sgl-project/sglang: the git dir named by
#      SGLANG_GIT_DIR (bare or .git). `git show HEAD:<path>` of
#        python/sglang/srt/layers/attention/flash_mla_sm120_triton.py
#          (the seed's per-(sequence, head) kernel _tiled_sparse_decode_kernel)
#        python/sglang/srt/layers/attention/sm120_mhead_kernel.py
#          (the multi-head rewrite; only on recent main, optional)
#      and the newer location python/sglang/kernels/ops/attention/ of the same.
#      (The whole repository is ~1.2 GB as of 2026-12.)
#   2. the released wheel on PyPI, through pip: `pip download --no-deps
#      sglang==$SGLANG_VERSION` (default 0.5.23, ~39 MB, into a temp dir that
#      is removed), from which only sglang/kernels/ops/attention/
#      flash_mla_sm120_triton.py (and sm120_mhead_kernel.py, if a release
#      ships it; 0.5.23 does not) is extracted.
# .sglang_ref/SOURCE.txt records the source, version/commit and sha256 of each.
# Exit 0 when at least flash_mla_sm120_triton.py is in place, 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$root/.sglang_ref
version=${SGLANG_VERSION:-0.5.23}
files=(flash_mla_sm120_triton.py sm120_mhead_kernel.py)
dirs=(python/sglang/srt/layers/attention python/sglang/kernels/ops/attention)

git -C "$root" check-ignore -q .sglang_ref/x ||
    { echo "fetch_sglang_ref: .sglang_ref/ is not ignored by git (add /.sglang_ref/ to .gitignore)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/sglang-ref.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out"
source_note=""

# 1. a mirror
gitdir=""
for g in ${SGLANG_GIT_DIR:-}; do
    [ -n "$g" ] && git --git-dir="$g" rev-parse -q --verify HEAD >/dev/null 2>&1 && { gitdir=$g; break; }
done
if [ -n "$gitdir" ]; then
    commit=$(git --git-dir="$gitdir" rev-parse HEAD)
    for f in "${files[@]}"; do
        for d in "${dirs[@]}"; do
            if git --git-dir="$gitdir" show "HEAD:$d/$f" >"$tmp/out/$f" 2>/dev/null; then
                echo "$f  mirror $gitdir  commit $commit  $d/$f" >>"$tmp/SOURCE.txt"
                break
            fi
            rm -f "$tmp/out/$f"
        done
    done
    [ -s "$tmp/out/${files[0]}" ] && source_note="mirror $gitdir @ $commit"
fi

# 2. the PyPI wheel
if [ ! -s "$tmp/out/${files[0]}" ]; then
    echo "fetch_sglang_ref: no mirror with ${files[0]}; pip download --no-deps sglang==$version"
    if ! python3 -m pip download --no-deps --only-binary=:all: "sglang==$version" -d "$tmp/whl" >"$tmp/pip.log" 2>&1; then
        tail -5 "$tmp/pip.log" >&2
        echo "fetch_sglang_ref: pip download failed (no network to PyPI?)" >&2
        exit 1
    fi
    whl=$(find "$tmp/whl" -name "sglang-*.whl" | head -1)
    python3 - "$whl" "$tmp/out" "${files[@]}" >>"$tmp/SOURCE.txt" <<'EOF'
import os, sys, zipfile
whl, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(whl) as z:
    members = z.namelist()
    for name in names:
        hits = [m for m in members if m.endswith("/ops/attention/" + name)
                or m.endswith("/srt/layers/attention/" + name)]
        if not hits:
            continue
        with open(os.path.join(out, name), "wb") as f:
            f.write(z.read(hits[0]))
        print(f"{name}  pypi {os.path.basename(whl)}  {hits[0]}")
EOF
    source_note="PyPI $(basename "$whl")"
fi

[ -s "$tmp/out/${files[0]}" ] || { echo "fetch_sglang_ref: ${files[0]} not found in $source_note" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
cp "$tmp"/out/*.py "$dest/"
{
    echo "# SGLang reference kernels, unmodified; never committed (see bench/cuda/fetch_sglang_ref.sh)"
    echo "# fetched $(date -u +%Y-%m-%dT%H:%M:%SZ) from $source_note"
    cat "$tmp/SOURCE.txt"
    (cd "$dest" && sha256sum ./*.py)
} >"$dest/SOURCE.txt"
cat "$dest/SOURCE.txt"
[ -s "$dest/${files[1]}" ] || echo "fetch_sglang_ref: ${files[1]} not in this source (only the per-head kernel will run)"
echo "fetch_sglang_ref: $(cd "$dest" && echo *) in $dest ($(du -sh "$dest" | cut -f1))"
