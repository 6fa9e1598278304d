#!/usr/bin/env bash
# Install the Debian packages loadlaw needs, only those missing.
# Usage: scripts/deps.sh [--test] [--fuzz] [--interop]
#   --test adds what the test suite needs; --fuzz adds clang and its libFuzzer
#   runtime for scripts/fuzz.sh (which CI runs after the suite); --interop
#   what scripts/interop.sh needs to build llama.cpp's server and write its
#   test model (a C++ compiler comes with build-essential), and to make vLLM's
#   virtual environment (scripts/vllm_env.sh: python3-venv).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcurl4-openssl-dev libcjson-dev libgsl-dev
      libmicrohttpd-dev zlib1g-dev libopenblas-dev libjs-chart.js libyajl-dev libpcre2-dev curl
      openmpi-bin libopenmpi-dev)  # MPI: `mpirun -np K loadlaw sweep` (optional at build time)
for a in "$@"; do
  case $a in
    # Headless Chromium renders the HTML report in the report test; promtool
    # (Debian's prometheus package) lints the engine's /metrics.
    # pip: lizard for scripts/complexity.sh. The multi-host MPI test
    # (tests/dist/multihost.sh) runs its own sshd and ip in network namespaces.
    --test) pkgs+=(chromium prometheus python3-pip openssh-server iproute2) ;;
    --fuzz) pkgs+=(clang libclang-rt-dev) ;;
    --interop) pkgs+=(python3 python3-venv python3-pip) ;;
    *) echo "usage: scripts/deps.sh [--test] [--fuzz] [--interop]" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "loadlaw: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
