#!/usr/bin/env python3
"""sglang_ref.py: SGLang's own Triton sparse-MLA decode kernel, run as a side-by-side
reference for loadlaw's CUDA kernels on the GPU machine.

    bash bench/cuda/fetch_sglang_ref.sh            # build machine: SGLang's file(s) -> .sglang_ref/
    bash bench/cuda/device_check.sh                # GPU host, with .sglang_ref/ copied there
    python3 bench/cuda/sglang_ref.py [--ns 1,8,32,64,128] [--heads 64] [--topk 2048]

This file is ours. SGLang's file(s) are imported, unmodified, from .sglang_ref/
(never committed, never copied here). What is run:
  perhead  _tiled_sparse_decode_kernel, one program per (sequence, head), fp32 SIMT
           (the seed's kernel; launched through SGLang's own Python launcher,
           _run_triton_sparse_decode_legacy when the file has it, else
           _run_triton_sparse_decode, which is the per-head launcher in releases
           up to 0.5.23);
  mhead    run_mhead_sparse_decode from sm120_mhead_kernel.py (H_TILE heads per
           program, tl.dot on tensor cores), only when that file was fetched.

Their interface (read from the file, not assumed):
  q        [B, 1, H, 512] bf16: 448 "nope" + 64 rope dims (DeepSeek-V4 MLA: the
           query/key dim is 512, NOT loadlaw's 576);
  k_cache  [num_pages, page_size, 1, 584] float8_e4m3fn (or uint8) view of a
           paged buffer; page_bytes = stride(0) = page_size * 584. In a page:
           first page_size * 576 data bytes, per token [0:448] e4m3 nope values
           and [448:576] 64 bf16 rope values; then page_size * 8 scale bytes, per
           token 7 UE8M0 bytes (one per group of 64 nope dims: 2^(byte-127)) + 1
           unused. A token's global index = page * page_size + slot.
  indices  [B, topk] int32 global token indices; -1 (or past topk_length) = skip.
  topk_length  optional [B] int32 (None here).
  out      [B, 1, H, 512] bf16 = sum_j p_j * k_j[0:512] (V = the whole 512-dim
           dequantised row, rope included: K = V); lse [B, 1, H] fp32, natural log
           of sum_j exp(scale * q.k_j); a sequence with no valid entry: out 0,
           lse -inf.
So the only KV layout it reads is DeepSeek-V4's FP8 one (584 B/token); it has no
bf16 path, and loadlaw's 576-dim bf16 (1152 B) and V3.2 FP8 (656 B) rows cannot
be fed to it. The script therefore builds the honest nearest problem: same N,
H = 64, top-k 2048, the same index pattern as bench_attn_cuda (each sequence owns
top-k rows of the pool, a random permutation of them, ~3% of entries -1), the
same softmax scale 1/sqrt(576), in SGLang's own V4 layout with exactly
representable values (e4m3 values, power-of-two UE8M0 scales, bf16 rope), so the
float64 torch reference on the dequantised rows is exact truth:
    s_j = scale * q . k_j (512 dims)   p = softmax over the valid j   out = sum p_j k_j[0:512]
Checked before any timing (llm.c style) on every N timed, plus an edge case
(a sequence of only -1 entries, top-k not a multiple of the tile).
Timed with triton.testing.do_bench (median; it flushes L2 between calls, as
bench_attn_cuda's timing holds no previous call's rows). Unique KV bytes =
valid entries * 584 (sequences share no rows); GB/s over those; FLOPs =
2 * H * valid * (512 + 512).

Our kernels on the same N/H/k are bench_attn_cuda's table (bf16 1152 B/row, fp8
656 B/row; q fp32 [N, H, 576]); device_check.sh's sglang-ref step prints both on
one line per N. Calling ours from Python would need a shared library, which
bench/cuda/standalone/build.sh does not build; not done.

Exit: 0 checks passed, 1 a check failed or their kernel raised, 77 SKIP (no
torch/CUDA/triton, or .sglang_ref/ missing), printing "SKIP: <reason>".
"""
import argparse
import importlib.util
import math
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF_DIR = os.path.join(ROOT, ".sglang_ref")
NOPE, ROPE, D = 448, 64, 512
DATA_STRIDE, SCALE_STRIDE = 576, 8
ROW_BYTES = DATA_STRIDE + SCALE_STRIDE  # 584 B per token (DeepSeek-V4 FP8)
OUR_DQK = 576  # loadlaw's q.k dim: the softmax scale is 1/sqrt(576)


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def shim_sglang_package(leaf_name, module):
    """Make `from sglang.srt.layers.attention.<leaf_name> import ...` (the lazy import in
    the mirror's flash_mla_sm120_triton.py) resolve to the carried file: empty package
    modules of our own, only when no real sglang is installed."""
    try:
        import sglang  # noqa: F401
        return
    except ImportError:
        pass
    parts = ["sglang", "srt", "layers", "attention"]
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = []
            sys.modules[name] = pkg
    sys.modules["sglang.srt.layers.attention." + leaf_name] = module


def build_inputs(torch, n_seq, heads, topk, page_size, dev, seed=1234, invalid_frac=1 / 32):
    """SGLang's V4 paged cache for n_seq sequences owning topk rows each, q, indices,
    and the float64 dequantised rows (the truth)."""
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    rows = n_seq * topk
    num_pages = (rows + page_size - 1) // page_size
    rows_alloc = num_pages * page_size
    page_bytes = page_size * ROW_BYTES
    # e4m3 values from N(0,1) (finite by construction), UE8M0 scales 2^-2..2^1, bf16 rope
    nope = torch.randn(rows_alloc, NOPE, generator=g, device=dev).to(torch.float8_e4m3fn)
    sexp = torch.randint(-2, 2, (rows_alloc, NOPE // 64), generator=g, device=dev)
    rope = (torch.randn(rows_alloc, ROPE, generator=g, device=dev) * 0.5).to(torch.bfloat16)

    buf = torch.zeros(num_pages, page_bytes, dtype=torch.uint8, device=dev)
    data = buf[:, : page_size * DATA_STRIDE].view(num_pages, page_size, DATA_STRIDE)
    scales = buf[:, page_size * DATA_STRIDE:].view(num_pages, page_size, SCALE_STRIDE)
    data[:, :, :NOPE] = nope.view(torch.uint8).view(num_pages, page_size, NOPE)
    data[:, :, NOPE:] = rope.view(num_pages, page_size, ROPE).view(torch.uint8)
    scales[:, :, : NOPE // 64] = (sexp + 127).to(torch.uint8).view(num_pages, page_size, NOPE // 64)
    scales[:, :, NOPE // 64:] = 127
    k_cache = buf.view(torch.float8_e4m3fn).view(num_pages, page_size, 1, ROW_BYTES)

    scale_f64 = torch.pow(2.0, sexp.double()).repeat_interleave(64, dim=1)
    kv64 = torch.cat([nope.double() * scale_f64, rope.double()], dim=1)  # [rows_alloc, 512]

    # each sequence: a permutation of its own topk rows, ~invalid_frac of entries -1
    idx = torch.empty(n_seq, topk, dtype=torch.int32, device=dev)
    for n in range(n_seq):
        idx[n] = (n * topk + torch.randperm(topk, generator=g, device=dev)).to(torch.int32)
    drop = torch.rand(n_seq, topk, generator=g, device=dev) < invalid_frac
    idx[drop] = -1
    q = torch.randn(n_seq, 1, heads, D, generator=g, device=dev).to(torch.bfloat16)
    return q, k_cache, idx, kv64


def reference(torch, q, idx, kv64, scale, chunk=8):
    """float64: softmax over the valid selected rows, out = sum p * row[0:512], lse."""
    n_seq, _, heads, _ = q.shape
    out = torch.zeros(n_seq, heads, D, dtype=torch.float64, device=q.device)
    lse = torch.full((n_seq, heads), -math.inf, dtype=torch.float64, device=q.device)
    for a in range(0, n_seq, chunk):
        b = min(n_seq, a + chunk)
        ii = idx[a:b].long()
        valid = ii >= 0
        rows = kv64[ii.clamp(min=0)]  # [c, topk, 512]
        s = scale * torch.einsum("chd,ctd->cht", q[a:b, 0].double(), rows)
        s = s.masked_fill(~valid[:, None, :], -math.inf)
        l = torch.logsumexp(s, dim=-1)  # -inf where no valid entry
        p = torch.exp(s - l[..., None]).nan_to_num(0.0)
        out[a:b] = torch.einsum("cht,ctd->chd", p, rows)
        lse[a:b] = l
    return out, lse


def compare(torch, out, lse, ref_out, ref_lse, atol, rtol, lse_tol):
    o = out.reshape(ref_out.shape).double()
    l = lse.reshape(ref_lse.shape).double()
    err = (o - ref_out).abs()
    bad = int((err > atol + rtol * ref_out.abs()).sum())
    fin = torch.isfinite(ref_lse)
    lse_bad = int(((l[fin] - ref_lse[fin]).abs() > lse_tol).sum()) + int((torch.isfinite(l) != fin).sum())
    return float(err.max()), bad, lse_bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ns", default="1,8,32,64,128")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--rep-ms", type=int, default=100, help="do_bench rep (ms per N and kernel)")
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x]

    try:
        import torch
    except Exception as e:  # noqa: BLE001
        skip(f"no CUDA/torch (import torch: {e.__class__.__name__}: {e})")
    if not torch.cuda.is_available():
        skip("no CUDA/torch (torch.cuda.is_available() is False)")
    try:
        import triton
        import triton.testing
    except Exception as e:  # noqa: BLE001
        skip(f"no triton ({e.__class__.__name__}: {e})")
    main_file = os.path.join(REF_DIR, "flash_mla_sm120_triton.py")
    if not os.path.isfile(main_file):
        skip(f"{main_file} missing: run bench/cuda/fetch_sglang_ref.sh and copy .sglang_ref here")

    dev = torch.device("cuda")
    kernels = []
    mhead_file = os.path.join(REF_DIR, "sm120_mhead_kernel.py")
    mh = None
    if os.path.isfile(mhead_file):
        mh = load_module("sglang_ref_sm120_mhead_kernel", mhead_file)
        shim_sglang_package("sm120_mhead_kernel", mh)
    fm = load_module("sglang_ref_flash_mla_sm120_triton", main_file)
    src = open(main_file).read()
    if hasattr(fm, "_run_triton_sparse_decode_legacy"):
        kernels.append(("perhead", fm._run_triton_sparse_decode_legacy, (1e-3, 2.01 / 128, 1e-3)))
    elif "sm120_mhead_kernel" not in src:
        kernels.append(("perhead", fm._run_triton_sparse_decode, (1e-3, 2.01 / 128, 1e-3)))
    else:
        print("note: this flash_mla_sm120_triton.py routes its launcher to the mhead kernel and has no legacy one")
    if mh is not None:
        # bf16 tensor-core dots on bf16(q * scale) and bf16(p): looser than the fp32 kernel
        kernels.append(("mhead", mh.run_mhead_sparse_decode, (1e-2, 2.01 / 128, 2e-2)))
    if not kernels:
        skip("no usable SGLang launcher in .sglang_ref")

    props = torch.cuda.get_device_properties(dev)
    print(f"device: {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}, "
          f"triton {triton.__version__}; SGLang file(s): "
          + ", ".join(os.path.basename(f) for f in (main_file, mhead_file) if os.path.isfile(f)))
    heads, topk = args.heads, args.topk
    scale = 1.0 / math.sqrt(OUR_DQK)
    nmax = max(ns)
    q, k_cache, idx, kv64 = build_inputs(torch, nmax, heads, topk, args.page_size, dev)
    print(f"inputs (theirs, DeepSeek-V4 FP8): q [N,1,{heads},{D}] bf16 (448 nope + 64 rope); "
          f"k_cache {list(k_cache.shape)} float8_e4m3fn view, page_size {args.page_size}, "
          f"{ROW_BYTES} B/token (576 data + 8 UE8M0 scale); indices [N,{topk}] int32, "
          f"{100.0 * float((idx < 0).double().mean()):.1f}% -1; scale 1/sqrt({OUR_DQK}); topk_length None")
    print(f"inputs (ours, bench_attn_cuda): q [N,{heads},{OUR_DQK}] fp32; kv bf16 1152 B/row or fp8 V3.2 "
          f"656 B/row; same N, H={heads}, k={topk}, each sequence its own {topk} rows, -1 entries")

    failed = 0
    # edge case first: a sequence of only -1 entries, top-k not a multiple of the tile
    eq, ek, ei, ekv = build_inputs(torch, 2, heads, 100, args.page_size, dev, seed=7)
    ei[1] = -1
    ro, rl = reference(torch, eq, ei, ekv, scale)
    for name, fn, (atol, rtol, ltol) in kernels:
        try:
            o, l = fn(eq, ek, ei, None, scale)
            torch.cuda.synchronize()
            mx, bad, lbad = compare(torch, o, l, ro, rl, atol, rtol, ltol)
            ok = bad == 0 and lbad == 0 and float(o[1].abs().max()) == 0.0
            print(f"check {name} edge (N=2, k=100, one sequence all -1): max|err| {mx:.2e}, "
                  f"{bad} out / {lbad} lse outside tol: {'ok' if ok else 'FAIL'}")
            failed |= not ok
        except Exception as e:  # noqa: BLE001
            print(f"check {name} edge: raised {e.__class__.__name__}: {e}")
            failed = 1
    if not hasattr(fm, "flash_mla_sparse_decode_triton"):
        print("note: no flash_mla_sparse_decode_triton in the file (public entry not checked)")
    else:
        try:  # the public entry once (whatever launcher it routes to), output [B,1,H,512], lse [B,H,1]
            n8 = min(8, nmax)
            o, l = fm.flash_mla_sparse_decode_triton(q[:n8], k_cache, idx[:n8], None, None, D, scale)
            torch.cuda.synchronize()
            ro, rl = reference(torch, q[:n8], idx[:n8], kv64, scale)
            atol, rtol, ltol = kernels[-1][2] if mh is not None else kernels[0][2]
            mx, bad, lbad = compare(torch, o, l.permute(0, 2, 1), ro, rl, atol, rtol, ltol)
            ok = bad == 0 and lbad == 0
            print(f"check public flash_mla_sparse_decode_triton N={n8}: max|err| {mx:.2e}: {'ok' if ok else 'FAIL'}")
            failed |= not ok
        except Exception as e:  # noqa: BLE001
            print(f"check public flash_mla_sparse_decode_triton: raised {e.__class__.__name__}: {e}")
            failed = 1

    print(f"\n{'kernel':<8} {'N':>4} {'H':>3} {'k':>5} {'us':>10} {'uniq_MB':>9} {'GB/s':>7} "
          f"{'TFLOP/s':>8} {'max|err|':>9} check")
    for n in ns:
        qn, in_ = q[:n], idx[:n]
        ro, rl = reference(torch, qn, in_, kv64, scale)
        valid = int((in_ >= 0).sum())
        ubytes = valid * ROW_BYTES
        flops = 2.0 * heads * valid * (D + D)
        for name, fn, (atol, rtol, ltol) in kernels:
            try:
                o, l = fn(qn, k_cache, in_, None, scale)
                torch.cuda.synchronize()
                mx, bad, lbad = compare(torch, o, l, ro, rl, atol, rtol, ltol)
                ok = bad == 0 and lbad == 0
                failed |= not ok
                if not ok:  # never time a kernel that gave a wrong answer
                    print(f"{name:<8} {n:>4} {heads:>3} {topk:>5} {'-':>10} {ubytes / 1e6:>9.2f} {'-':>7} "
                          f"{'-':>8} {mx:>9.2e} FAIL ({bad} out, {lbad} lse outside tol)")
                    continue
                ms = triton.testing.do_bench(lambda: fn(qn, k_cache, in_, None, scale),
                                             warmup=25, rep=args.rep_ms, return_mode="median")
                print(f"{name:<8} {n:>4} {heads:>3} {topk:>5} {ms * 1e3:>10.1f} {ubytes / 1e6:>9.2f} "
                      f"{ubytes / (ms * 1e-3) / 1e9:>7.0f} {flops / (ms * 1e-3) / 1e12:>8.2f} {mx:>9.2e} ok")
            except Exception as e:  # noqa: BLE001
                print(f"{name:<8} {n:>4} raised {e.__class__.__name__}: {str(e)[:200]}")
                failed = 1
        sys.stdout.flush()
    print(f"\nsglang_ref: {'FAIL' if failed else 'all checks ok'} "
          f"(tol: perhead out atol 1e-3 rtol 2.01/128, lse 1e-3; mhead out atol 1e-2, lse 2e-2)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
