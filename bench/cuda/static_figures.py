#!/usr/bin/env python3
"""static_figures.py: the attention kernels' static figures, from a ptxas -v
log and (when given) cuobjdump -sass of the same cubin. Run by
static_figures.sh, which compiles engine/cuda/cuda_attn.cu; no GPU.

Per kernel: registers, spill stores/loads (bytes: ptxas prints "N bytes spill
stores, N bytes spill loads"), static shared memory, dynamic shared memory
(cuda_attn_tiled_plan's, passed in --smem), threads per block and the blocks
per SM the limits allow (registers, shared memory, threads: the occupancy a
launch can reach, not a measurement).

Per tiled and v2 kernel, the hot loop: the loop over KV tiles, found as the
longest backward branch whose body issues mma and holds no other such loop
(one iteration = one 16-row tile per warp; v2 inlines it inside its loop
over units). A warp serves 4 heads in both kernels, so the per-warp figures
compare directly; they are also printed per KV row per head. Printed: its static instructions, their mix, and an estimate of the
instructions a warp issues per tile: the loop's static count with each
inner loop (the cp.async gather, fp8's dequantisation) replaced by its cost
per marker instruction (cp.async, or the dequantisation's 16-byte shared
store) times the markers a warp issues per tile, and the copies the
compiler peeled off those loops taken out likewise. Markers per warp come
from the kernel's constants and mappings, which this script repeats from
cuda_attn_dev.cuh (change them together): the gather, a warp per row, 16 rows /
warps x ceil(72 (bf16) or 41 (fp8) 16-byte chunks / 32 lanes); the
dequantisation, a warp per row too, 16 rows / warps x 3 stores (the 64
latent chunks over 32 lanes, then the 8 rope chunks).
"""
import argparse
import collections
import re
import sys

# sm -> (registers per SM, max threads per SM, max blocks per SM, shared
# memory per SM in bytes, shared memory the driver reserves per block)
SM_LIMITS = {"90": (65536, 2048, 32, 233472, 1024), "120": (65536, 1536, 32, 102400, 1024)}
ROWS, CH_BF16, CH_FP8, CH_LATENT = 16, 72, 41, 64


def parse_ptxas(path):
    """{(arch, mangled name): {regs, spill_st, spill_ld, smem, stack}}"""
    out, cur = {}, None
    with open(path) as f:
        for line in f:
            m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+)'", line)
            if m:
                cur = (m.group(2), m.group(1))
                out[cur] = {"regs": 0, "spill_st": 0, "spill_ld": 0, "smem": 0, "stack": 0}
                continue
            if cur is None:
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m:
                out[cur].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            m = re.search(r"Used (\d+) registers", line)
            if m:
                out[cur]["regs"] = int(m.group(1))
                s = re.search(r"(\d+) bytes smem", line)
                out[cur]["smem"] = int(s.group(1)) if s else 0
    return out


def kernel_shape(name):
    """(pretty name, layout 'bf16'|'fp8'|'', threads per block)"""
    m = re.match(r"_Z\d+mla_decode_tiled_kernelILi(\d)ELi(\d)E", name)
    if m:
        lay = "bf16" if m.group(1) == "0" else "fp8"
        hg = int(m.group(2))
        return "tiled %s %d heads" % (lay, 16 * hg), lay, 128 * hg
    m = re.match(r"_Z\d+mla_decode_v2_kernelILi(\d)ELi(\d)E", name)
    if m:
        lay = "bf16" if m.group(1) == "0" else "fp8"
        hg = int(m.group(2))
        return "v2 %s %d heads" % (lay, 16 * hg), lay, 128 * hg
    m = re.match(r"_Z\d+mla_decode_naive_kernelILi(\d)E", name)
    if m:
        return "naive %s" % ("bf16" if m.group(1) == "0" else "fp8"), "", 128
    if "v2_combine" in name:
        return "v2 combine", "", 128
    if "combine" in name:
        return "combine", "", 128
    return name, "", 0


def blocks_per_sm(arch, regs, threads, smem):
    lim = SM_LIMITS.get(arch)
    if not lim or threads == 0:
        return None, ""
    regs_sm, thr_sm, blk_sm, smem_sm, smem_rsv = lim
    warps = (threads + 31) // 32
    per_warp = -(-max(regs, 1) * 32 // 256) * 256  # allocated per warp in units of 256
    by_regs = (regs_sm // per_warp) // warps
    by_smem = smem_sm // (smem + smem_rsv)
    by_thr = thr_sm // threads
    n = min(by_regs, by_smem, by_thr, blk_sm)
    why = min((by_regs, "registers"), (by_smem, "shared memory"), (by_thr, "threads"))[1]
    return n, why


def parse_sass(path):
    """{mangled name: [(address, instruction text)]}"""
    funcs, cur = {}, None
    with open(path) as f:
        for line in f:
            m = re.search(r"Function : (\S+)", line)
            if m:
                cur = m.group(1)
                funcs[cur] = []
                continue
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
            if m and cur:
                funcs[cur].append((int(m.group(1), 16), m.group(2)))
    return funcs


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def loops(ins):
    """backward branches as (first index, last index), self-loops (the trap after EXIT) left out"""
    at = {a: i for i, (a, _) in enumerate(ins)}
    out = []
    for i, (a, t) in enumerate(ins):
        # "BRA 0x..", "BRA `(0x..)", or sm_120's uniform "BRA.U !UP0, 0x.."
        m = re.search(r"\bBRA(?:\.\w+)*\s+(?:!?U?P\w+,\s*)?(?:`\()?0x([0-9a-f]+)", t)
        if m:
            tgt = int(m.group(1), 16)
            if tgt < a and tgt in at:
                out.append((at[tgt], i))
    return out


CLASSES = [
    ("gather", lambda o: o.startswith("LDGSTS") or o.startswith("LDGDEPBAR") or o.startswith("DEPBAR")),
    ("tensor", lambda o: o.startswith("HMMA")),
    ("smem", lambda o: o.split(".")[0] in ("LDS", "STS", "LDSM")),
    ("global", lambda o: o.split(".")[0] in ("LDG", "STG", "LDC", "ULDC")),
    ("fp32", lambda o: o.split(".")[0] in ("FMUL", "FADD", "FFMA", "FMNMX", "FSETP", "FSEL", "MUFU", "F2FP", "HADD2",
                                           "HFMA2", "F2F", "I2F", "F2I")),
    ("sync", lambda o: o.split(".")[0] in ("BAR", "SHFL", "WARPSYNC", "BSSY", "BSYNC")),
    ("control", lambda o: o.split(".")[0] in ("BRA", "EXIT", "NOP", "CALL", "RET")),
]


def klass(op):
    for name, test in CLASSES:
        if test(op):
            return name
    return "int/addr"


def hot_loop(ins, layout, threads):
    """the loop over KV tiles: the longest loop that issues mma (HMMA) and
    holds no other such loop (v2 inlines its tile loop twice, inside loops
    over units)"""
    ls = loops(ins)
    mma = [(a, b) for a, b in ls if any(opcode(t).startswith("HMMA") for _, t in ins[a:b + 1])]
    inner_mma = [(a, b) for a, b in mma if not any((c, d) != (a, b) and a <= c and d <= b for c, d in mma)]
    if not inner_mma:
        return None
    s, e = max(inner_mma, key=lambda x: x[1] - x[0])
    body = [t for _, t in ins[s:e + 1]]
    inner = [(a, b) for a, b in ls if s <= a and b <= e and (a, b) != (s, e)]
    est = float(len(body))
    in_inner = set()
    notes = []
    for a, b in inner:
        in_inner.update(range(a, b + 1))
    for a, b in inner:
        ops = [opcode(t) for _, t in ins[a:b + 1]]
        if any(o.startswith("LDGSTS") for o in ops):
            # a warp copies ROWS / warps whole rows, ceil(chunks / 32) cp.async each
            marker, what = "LDGSTS", "gather"
            trips = ROWS / (threads // 32) * -(-(CH_BF16 if layout == "bf16" else CH_FP8) // 32)
        elif any(o.startswith("STS.128") for o in ops):
            # a warp converts ROWS / warps whole rows: 2 latent stores (64 chunks) + 1 rope store
            marker, what = "STS.128", "fp8 dequant"
            trips = ROWS / (threads // 32) * (CH_LATENT // 32 + 1)
        else:
            notes.append("inner loop of %d counted once" % (b - a + 1))
            continue
        per_iter = (b - a + 1) / sum(o.startswith(marker) for o in ops)
        peeled = sum(opcode(ins[i][1]).startswith(marker) for i in range(s, e + 1) if i not in in_inner)
        est += -(b - a + 1) - peeled * per_iter + trips * per_iter
        notes.append("%s: %.0f instr per %s x %.2f per warp" % (what, per_iter, marker, trips))
    mix = collections.Counter(klass(opcode(t)) for t in body)
    return {"static": len(body), "est": est, "mix": mix, "notes": notes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--sass", help="cuobjdump -sass output of the same cubin")
    ap.add_argument("--smem", default="", help="kind-layout:heads:bytes,... dynamic shared memory of the tiled and v2 kernels")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    dyn = {}
    for item in filter(None, a.smem.split(",")):
        lay, heads, b = item.split(":")
        dyn[(lay, int(heads))] = int(b)
    kernels = parse_ptxas(a.ptxas)
    sass = parse_sass(a.sass) if a.sass else {}
    spilled = 0
    print("%-5s %-22s %5s %8s %8s %9s %9s %7s  %s" % ("arch", "kernel", "regs", "spill-st", "spill-ld", "smem-st",
                                                     "smem-dyn", "thr", "blocks/SM (limit)"))
    rows = []
    for (arch, name), k in kernels.items():
        pretty, lay, thr = kernel_shape(name)
        d = 0
        m = re.match(r"(tiled|v2) \S+ (\d+) heads", pretty)
        if m:
            d = dyn.get((m.group(1) + "-" + lay, int(m.group(2))), 0)
        n, why = blocks_per_sm(arch, k["regs"], thr, k["smem"] + d)
        spilled += (k["spill_st"] + k["spill_ld"]) > 0
        rows.append((arch, pretty, name, lay, thr))
        print("sm_%-2s %-22s %5d %7dB %7dB %8dB %8dB %7d  %s" % (arch, pretty, k["regs"], k["spill_st"], k["spill_ld"],
                                                               k["smem"], d, thr,
                                                               "%d (%s)" % (n, why) if n is not None else "?"))
    print("spills: %d kernel(s) with spill stores or loads" % spilled)
    if not a.sass:
        print("sass: skipped (no cuobjdump)")
        return 0
    print("\nhot loop of the tiled and v2 kernels (per warp per 16-row KV tile)%s:" % (" " + a.label if a.label else ""))
    for arch, pretty, name, lay, thr in rows:
        if not (pretty.startswith("tiled") or pretty.startswith("v2 b") or pretty.startswith("v2 f")) or name not in sass:
            continue
        h = hot_loop(sass[name], lay, thr)
        if not h:
            print("sm_%s %-22s no loop found" % (arch, pretty))
            continue
        mix = ", ".join("%s %d" % (c, h["mix"][c]) for c, _ in CLASSES + [("int/addr", 0)] if h["mix"][c])
        # a warp serves 4 heads in both kernels (4 warps per 16 heads), so
        # per warp per tile = per 16 KV rows x 4 heads; per row and head:
        print("sm_%s %-22s static %4d, est. issued per tile %4.0f (%.2f per KV row per head)  [%s]"
              % (arch, pretty, h["static"], h["est"], h["est"] / (ROWS * 4), mix))
        for note in h["notes"]:
            print("      %s" % note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
