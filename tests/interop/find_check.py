#!/usr/bin/env python3
"""find_check.py: the interop suite's `sweep --find` step.

objective RUN_DIR: print a TPOT p90 objective derived from a run's own levels:
  between the two neighbouring closed levels up to C = 4 whose TPOT p90 differ
  most (their geometric mean), so the boundary sits in the middle of the
  largest step the server showed, not where its TPOT is flat (a CPU server's
  TPOT barely moves from C = 4 to 6 while its slots fill: a boundary there is
  the machine's noise), and it is neither trivially met nor missed on a
  slower machine.
check RUN_DIR: the --find run's summary.json "find": found, with the answer's
  last measurement meeting the objective and C + 1's failing it (both
  re-measured: sustain, re-measure), or within noise with both levels'
  figures printed. Exit 0 or 1 with why.
"""
import json
import math
import sys


def objective(run):
    levels = [l for l in json.load(open(run + "/summary.json"))["levels"]
              if l.get("concurrency") and l["concurrency"] <= 4]
    levels.sort(key=lambda l: l["concurrency"])
    pairs = [(b["tpot_ms"]["p90"] / a["tpot_ms"]["p90"], a, b) for a, b in zip(levels, levels[1:])]
    _, a, b = max(pairs, key=lambda p: p[0])
    pa, pb = a["tpot_ms"]["p90"], b["tpot_ms"]["p90"]
    sys.stderr.write("find objective: between C=%d (TPOT p90 %.2f ms) and C=%d (%.2f ms)\n"
                     % (a["concurrency"], pa, b["concurrency"], pb))
    print("tpot_p90<=%.2fms" % math.sqrt(pa * pb))


def check(run):
    f = json.load(open(run + "/summary.json"))["find"]
    print("find %s: outcome %s, C = %s, predicted %s, %d levels in %.1f s" %
          (f["objective"], f["outcome"], f["answer_c"], f["predicted_c"], f["n_levels"], f["elapsed_s"]))
    for l in f["levels"]:
        print("  C=%d %-10s %s %s" % (l["concurrency"], l["role"], "meets" if l["meets"] else "fails",
                                       json.dumps(l["figures"])))
    c = f["answer_c"]
    last = {}
    for l in f["levels"]:
        last[l["concurrency"]] = l
    if f["outcome"] == "within noise":
        print("within noise: C=%d %s, C=%d %s" % (c, json.dumps(last[c]["figures"]), c + 1,
                                                  json.dumps(last.get(c + 1, {}).get("figures"))))
        return 0
    if f["outcome"] != "found":
        print("FAIL: --find did not pin the boundary: %s" % f["outcome"])
        return 1
    if not last[c]["meets"] or last[c]["role"] != "sustain":
        print("FAIL: C=%d's last measurement (%s) does not meet the objective" % (c, last[c]["role"]))
        return 1
    if last[c + 1]["meets"] or last[c + 1]["role"] != "re-measure":
        print("FAIL: C=%d's last measurement (%s) meets the objective" % (c + 1, last[c + 1]["role"]))
        return 1
    print("find: C=%d meets it re-measured, C=%d fails it re-measured (ok)" % (c, c + 1))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "objective":
        objective(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
