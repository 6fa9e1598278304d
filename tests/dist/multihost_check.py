#!/usr/bin/env python3
"""multihost_check.py: the checks of multihost.sh on a run's records.

  merged RUN SHIFT_S SHIFTED_HOST   a K-rank run: every level complete with
      each rank's requests once; each clock record's offset is the truth
      (SHIFT_S for the ranks whose rank-<r>.jsonl names SHIFTED_HOST, else 0)
      within half its round trip; each rank's first send of a level by rank
      0's and not before the agreed start
  law ONE.json RUN.json             `loadlaw fit --json` of two runs: the 95%
      intervals of a and of b overlap
  partition RUN RANK LEVEL          RANK was lost in LEVEL: the levels before
      are complete, LEVEL has its level_end and every request of the other
      ranks, none of RANK's

Exit 0 when every check holds, 1 with each failure on stdout. What holds is
printed too: ctest's log is the test's report."""
import json
import os
import sys

failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL: " + msg)
    return ok


def read(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    return recs


def run_host(path):
    for r in read(path):
        if r.get("type") == "run":
            return r.get("host")
    return None


def by_level(recs):
    levels, ends, reqs, clocks = {}, {}, {}, {}
    for r in recs:
        t = r.get("type")
        if t == "level":
            levels[r["level"]] = r
        elif t == "level_end":
            ends[r["level"]] = r
        elif t == "request":
            reqs.setdefault(r["level"], []).append(r)
        elif t == "clock":
            clocks.setdefault(r["level"], []).append(r)
    return levels, ends, reqs, clocks


def rank_share(n, c, rank, ranks):
    """loadgen's share() of a closed level: rank's part of n requests."""
    lo = rank * (c // ranks) + min(rank, c % ranks)
    hi = lo + c // ranks + (1 if rank < c % ranks else 0)
    return n * hi // c - n * lo // c


def merged(run, shift_s, shifted_host):
    recs = read(os.path.join(run, "records.jsonl"))
    ranks = next(r["ranks"] for r in recs if r.get("type") == "run")
    hosts = {0: run_host(os.path.join(run, "records.jsonl"))}
    for r in range(1, ranks):
        hosts[r] = run_host(os.path.join(run, "rank-%d.jsonl" % r))
    print("%s: %d ranks on %s" % (os.path.basename(run), ranks,
                                  ", ".join("%d@%s" % (r, hosts[r]) for r in sorted(hosts))))
    check(hosts[0] != shifted_host, "rank 0 is on the shifted host %s: nothing to undo" % shifted_host)
    check(any(h == shifted_host for h in hosts.values()), "no rank on the shifted host %s" % shifted_host)
    levels, ends, reqs, clocks = by_level(recs)
    check(len(levels) >= 2, "%d levels" % len(levels))
    ids = []
    worst = None  # nearest its bound: (error, half round trip, level, rank, offset)
    clock_ok = True
    for L in sorted(levels):
        lv, got = levels[L], reqs.get(L, [])
        check(L in ends, "level %d has no level_end" % L)
        check(len(got) == lv["n_requests"], "level %d: %d requests, planned %d" % (L, len(got), lv["n_requests"]))
        check(ends.get(L, {}).get("ok") == len(got), "level %d: level_end ok %s of %d"
              % (L, ends.get(L, {}).get("ok"), len(got)))
        ids += [q["id"] for q in got]
        first = {}
        for q in got:
            first[q["rank"]] = min(first.get(q["rank"], q["send_ns"]), q["send_ns"])
        for r in range(min(ranks, lv["concurrency"])):
            check(r in first, "level %d: nothing from rank %d" % (L, r))
        cks = {c["rank"]: c for c in clocks.get(L, [])}
        check(sorted(cks) == list(range(1, ranks)), "level %d: clock records for ranks %s" % (L, sorted(cks)))
        for r, ck in sorted(cks.items()):
            truth = int(shift_s * 1e9) if hosts.get(r) == shifted_host else 0
            err, half = abs(ck["offset_ns"] - truth), ck["rtt_ns"] / 2.0
            # the estimate's midpoint is an integer division: a nanosecond more
            clock_ok &= check(err <= half + 1, "level %d rank %d: offset %d ns, truth %d: off by %d ns, more "
                              "than half the round trip (%.0f ns)" % (L, r, ck["offset_ns"], truth, err, half))
            if worst is None or err / max(half, 1) > worst[0] / max(worst[1], 1):
                worst = (err, half, L, r, ck["offset_ns"])
            if r in first and 0 in first:
                # 500 ms: a rank held up by a busy host is not a clock error;
                # an offset left undone is SHIFT_S
                d = first[r] - first[0]
                check(abs(d) < 500e6, "level %d: rank %d's first send %.1f ms from rank 0's" % (L, r, d / 1e6))
                # its start is the agreed one converted with an offset that may
                # be off by half the round trip
                check(first[r] >= ck["start_ns"] - max(1e6, half), "level %d: rank %d sent %.1f ms before the "
                      "agreed start" % (L, r, (ck["start_ns"] - first[r]) / 1e6))
    check(len(ids) == len(set(ids)), "%d duplicate request ids" % (len(ids) - len(set(ids))))
    for L in sorted(clocks):
        for c in sorted(clocks[L], key=lambda c: c["rank"]):
            truth = int(shift_s * 1e9) if hosts.get(c["rank"]) == shifted_host else 0
            print("  level %d rank %d: offset %d ns, truth %d: off by %d ns, half round trip %.0f ns"
                  % (L, c["rank"], c["offset_ns"], truth, abs(c["offset_ns"] - truth), c["rtt_ns"] / 2.0))
    if worst and clock_ok:
        print("  clock: every offset within half its round trip of the truth (closest: level %d rank %d, "
              "off by %d ns, half round trip %.0f ns)" % (worst[2], worst[3], worst[0], worst[1]))
    if not failures:
        print("  merged: every level has its requests once, from every rank, started together")


def law(one_path, run_path):
    with open(one_path) as f:
        one = json.load(f)["law"]
    with open(run_path) as f:
        run = json.load(f)["law"]
    if not (check(one.get("ok"), "1 process: no law") and check(run.get("ok"), "%s: no law" % run_path)):
        return

    def fmt(l):
        return "a = %.3f [%.3f, %.3f] ms, b = %.4f [%.4f, %.4f] ms (%d samples)" % (
            l["a_ms"], l["a_ci_ms"][0], l["a_ci_ms"][1], l["b_ms"], l["b_ci_ms"][0], l["b_ci_ms"][1],
            l["n_samples"])

    print("  law, 1 process: " + fmt(one))
    print("  law, 3 ranks:   " + fmt(run))
    for k in ("a", "b"):
        x, y = one[k + "_ci_ms"], run[k + "_ci_ms"]
        check(x[0] <= y[1] and y[0] <= x[1], "%s's interval misses the 1-process one" % k)


def partition(run, lost, level):
    recs = read(os.path.join(run, "records.jsonl"))
    ranks = next(r["ranks"] for r in recs if r.get("type") == "run")
    levels, ends, reqs, _ = by_level(recs)
    err = open(run + ".err").read()
    named = "rank %d did not" % lost
    check(named in err and ("level %d" % level) in err, "stderr does not name rank %d and level %d" % (lost, level))
    for L in range(level):
        got = reqs.get(L, [])
        check(L in ends and len(got) == levels[L]["n_requests"],
              "level %d (before the partition) not complete: %d of %d requests" % (L, len(got), levels[L]["n_requests"]))
        check(any(q["rank"] == lost for q in got), "level %d lacks rank %d's requests" % (L, lost))
    check(level in levels and level in ends, "level %d or its level_end missing" % level)
    if level not in levels:
        return
    lv, got = levels[level], reqs.get(level, [])
    n, c = lv["n_requests"], lv["concurrency"]
    kept = []
    for r in range(ranks):
        mine = sum(1 for q in got if q["rank"] == r)
        if r == lost:
            check(mine == 0, "level %d holds %d requests of the lost rank %d" % (level, mine, r))
        else:
            want = rank_share(n, c, r, ranks)
            check(mine == want, "level %d: rank %d's %d requests, its share is %d" % (level, r, mine, want))
            kept.append("rank %d %d of %d" % (r, mine, want))
    print("  partition: stderr names rank %d in level %d; level %d keeps %s; levels 0..%d complete"
          % (lost, level, level, ", ".join(kept), level - 1))
    line = next((l for l in err.splitlines() if named in l), "")
    print("  stderr: " + line.strip())


def main():
    a = sys.argv[1:]
    if a[:1] == ["merged"] and len(a) == 4:
        merged(a[1], float(a[2]), a[3])
    elif a[:1] == ["law"] and len(a) == 3:
        law(a[1], a[2])
    elif a[:1] == ["partition"] and len(a) == 4:
        partition(a[1], int(a[2]), int(a[3]))
    else:
        print(__doc__)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
