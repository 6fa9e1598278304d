#!/usr/bin/env python3
"""ncu_summary.py: one line per attention kernel from Nsight Compute's CSV
(`ncu --csv --metrics ...`, the details page: a row per kernel launch and
metric), for device_check.sh's ncu step. Per kernel (the demangled name with
its template arguments: <layout 0 = bf16 / 1 = fp8, head groups>): the
launches profiled and the mean over them of achieved DRAM bandwidth (% of
peak sustained, elapsed), issue-slot utilisation (instructions issued, % of
peak sustained, active), achieved occupancy (warps active, % of peak) and
duration.

    python3 bench/cuda/ncu_summary.py ncu.csv > ncu.txt
"""
import collections
import csv
import sys

METRICS = [
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram %", 1.0),
    ("sm__inst_issued.avg.pct_of_peak_sustained_active", "issue %", 1.0),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy %", 1.0),
    ("gpu__time_duration.sum", "us", None),  # unit from the CSV (ns, us, ms)
]
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu prints its own log lines before the CSV
    rows = list(csv.DictReader(lines))
    if not rows or "Metric Name" not in rows[0]:
        print("ncu_summary: no metric rows in %s" % sys.argv[1])
        return 1
    acc = collections.defaultdict(lambda: collections.defaultdict(list))
    launches = collections.defaultdict(set)
    for r in rows:
        name = r.get("Kernel Name", "?").split("(")[0].strip()
        if not name.startswith("mla_decode"):
            continue
        launches[name].add(r.get("ID"))
        m = r["Metric Name"]
        try:
            v = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        if m == "gpu__time_duration.sum":
            v *= TO_US.get(r.get("Metric Unit", "ns").strip(), 1e-3)
        acc[name][m].append(v)
    for name in sorted(acc):
        parts = []
        for m, label, _ in METRICS:
            vs = acc[name].get(m)
            parts.append("%s %s" % (label, "%.1f" % (sum(vs) / len(vs)) if vs else "n/a"))
        print("%-36s launches %2d  %s" % (name, len(launches[name]), "  ".join(parts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
