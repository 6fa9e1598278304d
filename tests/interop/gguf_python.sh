#!/usr/bin/env bash
# Print the path of a python3 that can import the gguf package (pinned to
# GGUF_PY_VERSION), installing it the first time on a machine.
#
# Tried in order: a virtual environment under $LOADLAW_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/loadlaw)/py-gguf-<version>, made with
# `python3 -m venv` (Debian splits that into python3-venv, which may be
# missing); the system python3 when it already imports that gguf version;
# `pip install --user --break-system-packages`. Progress on stderr.
# Exit status: 0 found or installed, 77 cannot install here (the reason on
# stderr).
set -euo pipefail
version=${GGUF_PY_VERSION:-0.19.0}
cache=${LOADLAW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loadlaw}
venv="$cache/py-gguf-$version"
check="import gguf, importlib.metadata as m, sys; sys.exit(m.version('gguf') != '$version')"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
command -v python3 >/dev/null || { echo "gguf_python.sh: no python3" >&2; exit 77; }

mkdir -p "$cache"
# One installer at a time per machine: a second caller waits for the first.
exec 9>"$cache/py-gguf-$version.lock"
flock 9
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi

why=""
rm -rf "$venv"
if python3 -m venv "$venv" >"$cache/py-gguf-$version.log" 2>&1; then
  echo "gguf_python.sh: installing gguf==$version into $venv" >&2
  if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "gguf==$version" \
      >>"$cache/py-gguf-$version.log" 2>&1 && "$venv/bin/python" -c "$check"; then
    echo "$venv/bin/python"
    exit 0
  fi
  why="pip install gguf==$version into a venv failed ($(tail -1 "$cache/py-gguf-$version.log"))"
  rm -rf "$venv"
else
  why="python3 -m venv failed (python3-venv missing?)"
  rm -rf "$venv"
fi

if python3 -c "$check" 2>/dev/null; then
  command -v python3
  exit 0
fi
echo "gguf_python.sh: $why; trying pip install --user" >&2
if python3 -m pip install --quiet --disable-pip-version-check --user --break-system-packages \
    "gguf==$version" >>"$cache/py-gguf-$version.log" 2>&1 && python3 -c "$check" 2>/dev/null; then
  command -v python3
  exit 0
fi
echo "gguf_python.sh: cannot install gguf==$version: $why; pip install --user failed too" \
  "(see $cache/py-gguf-$version.log)" >&2
exit 77
