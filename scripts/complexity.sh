#!/usr/bin/env bash
# Report functions that grew past a screen or a readable number of paths.
# Usage: scripts/complexity.sh [DIR...]     (default: the library folders, cli,
#                                            bench and tools)
#
# A function over MAX_LINES lines (default 80, first line to closing brace) or
# over MAX_CCN cyclomatic complexity (default 25, lizard's count: each if,
# loop, case, && and || adds one) is listed with its figures. It is accepted
# when the comment just above it says why it must be so, with the marker
# "complexity:" (for example "complexity: one table of every option, read
# top to bottom"); the others are split into named steps. Exit status: 0 when
# every function over the limits carries the marker, 1 otherwise, 2 on a
# usage or tool error. Measured with lizard (PyPI), installed when missing,
# over C, C++ and CUDA sources (.c .h .cc .cu .cuh ...).
set -euo pipefail
cd "$(dirname "$0")/.."
max_lines=${MAX_LINES:-80}
max_ccn=${MAX_CCN:-25}
if [ $# -gt 0 ]; then
  dirs=("$@")
else
  dirs=()
  for d in common scenarios loadgen netstamp dist telemetry engine fit reports sweep cli bench tools; do
    [ -d "$d" ] && dirs+=("$d")
  done
fi
for d in "${dirs[@]}"; do
  [ -d "$d" ] || { echo "complexity.sh: $d: no such folder" >&2; exit 2; }
done

if ! python3 -c 'import lizard' 2>/dev/null; then
  echo "loadlaw: installing lizard (pip)" >&2
  python3 -m pip install --quiet --user lizard >&2 2>/dev/null ||
    python3 -m pip install --quiet --user --break-system-packages lizard >&2 ||
    { echo "complexity.sh: could not install lizard (pip install lizard)" >&2; exit 2; }
fi

csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
# lizard exits non-zero when it warns; its CSV is what counts here. It picks
# a file's reader by extension and knows no CUDA: .cu and .cuh are C++ with
# qualifiers (__global__, __device__, __launch_bounds__) that its C++ reader
# passes over, so they are added to that reader's list and the kernels are
# measured like any other function.
python3 - "${dirs[@]}" >"$csv" <<'PY' || true
import sys
import lizard
from lizard_languages import CLikeReader

CLikeReader.ext = CLikeReader.ext + ["cu", "cuh"]
lizard.main(["lizard", "-l", "c", "--csv"] + sys.argv[1:])
PY

python3 - "$csv" "$max_lines" "$max_ccn" <<'EOF'
import csv, sys

path, max_lines, max_ccn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MARK = "complexity:"

def justified(file, start):
    """The marker in the comment lines that end just above line start."""
    try:
        lines = open(file, encoding="utf-8", errors="replace").read().split("\n")
    except OSError:
        return False
    i = start - 2  # the line above the function's first, 0-based
    # lizard's first line is the one with the name: step over the rest of the
    # head above it (a template line, __global__ and __launch_bounds__)
    while i >= 0:
        t = lines[i].strip()
        if not t or t.startswith(("/*", "*", "//", "#")) or t.endswith((";", "{", "}", "*/")):
            break
        i -= 1
    while i >= 0:
        t = lines[i].strip()
        if not (t.startswith(("/*", "*", "//")) or t.endswith("*/")):
            break  # code or a blank line: the comment (if any) ended
        if MARK in t:
            return True
        i -= 1
    return False

over, bad = [], 0
with open(path, newline="") as f:
    for row in csv.reader(f):
        # NLOC, CCN, token, PARAM, length, location, file, function, long name, start, end
        if len(row) < 11 or not row[1].isdigit():
            continue
        ccn, length, file, name, start = int(row[1]), int(row[4]), row[6], row[7], int(row[9])
        if length <= max_lines and ccn <= max_ccn:
            continue
        ok = justified(file, start)
        bad += not ok
        over.append((not ok, -ccn, file, start, name, length, ccn, ok))

over.sort()
print(f"functions over {max_lines} lines or cyclomatic complexity {max_ccn}: {len(over)}, "
      f"{bad} without a '{MARK}' comment")
for _, _, file, start, name, length, ccn, ok in over:
    print(f"  {'ok  ' if ok else 'FAIL'} {file}:{start}: {name}: {length} lines, complexity {ccn}")
sys.exit(1 if bad else 0)
EOF
