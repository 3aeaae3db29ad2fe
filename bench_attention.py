"""
Correctness on the GPU, then speed, of the fused PoPE kernel against attention through PyTorch SDPA.

    python bench_attention.py            # checks + benchmark (one H200: a few minutes, mostly compiling)
    python bench_attention.py --check    # only the correctness checks
    POPE_AUTOTUNE=0 python bench_attention.py   # the kernel's default block sizes instead of autotuned ones

Compared, causal bf16, 16k tokens a batch (B = 16384 / T), 12 heads, d 64 and 128, T in 1024/4096/16384:
  (1) pope_kernel.pope_attention (this repo's fused Triton kernel)
  (2) PoPE through SDPA on the expanded 2d form: q' = [mu_q cos phi_q, mu_q sin phi_q], k' likewise, v unchanged,
      the fastest SDPA backend that accepts it (v padded to 2d where a backend needs equal head dims);
      the time includes forming q', k' from q, k (with cached cos/sin tables)
  (3) RoPE attention through SDPA, fastest backend, on already-rotated q, k (the attention call alone)
Times are medians of triton.testing.do_bench. FLOPs per head: PoPE fwd 6 Tq Tk d, bwd 16 Tq Tk d; RoPE fwd 4,
bwd 10 (recompute counted); causal halves them. Memory: peak allocated during forward+backward beyond the inputs.
Logs go to $OUT/bench_attention.log when OUT is set.
"""
import argparse
import math
import os
import sys
import time

os.environ.setdefault("POPE_AUTOTUNE", "1")  # benchmark the kernel with its block sizes autotuned

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import pope_kernel
from model import pope_attention

LINES = []


def log(*args):
    line = " ".join(str(a) for a in args)
    print(line, flush=True)
    LINES.append(line)
    if os.environ.get("OUT"):  # written as we go, so a cut-short run still leaves its log
        with open(os.path.join(os.environ["OUT"], "bench_attention.log"), "a") as f:
            f.write(line + "\n")


def check(B, H, Tq, Tk, d, causal, q_offset, dtype):
    gen = torch.Generator(device="cuda").manual_seed(Tq + Tk + d)
    q, k, v = (torch.randn(B, H, T, d, device="cuda", generator=gen).to(dtype) for T in (Tq, Tk, Tk))
    delta = torch.rand(H, d, device="cuda", generator=gen) * -2 * math.pi
    xs = [x.clone().requires_grad_() for x in (q, k, v, delta)]
    out = pope_kernel.pope_attention(*xs, causal=causal, q_offset=q_offset)
    dout = torch.randn(out.shape, device="cuda", generator=gen).to(dtype)
    out.backward(dout)
    rs = [x.detach().double().requires_grad_() for x in (q, k, v, delta)]
    ref = pope_attention(*rs, causal=causal, q_offset=q_offset)  # model.py's float64 reference
    ref.backward(dout.double())
    rel = lambda a, b: ((a.double() - b).norm() / b.norm()).item()
    errs = [rel(out, ref)] + [rel(x.grad, r.grad) for x, r in zip(xs, rs)]
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    ok = all(e < tol for e in errs) and all(torch.isfinite(x.grad).all() for x in xs)
    log(f"  {'ok ' if ok else 'BAD'} {str(dtype)[6:]:8s} B{B} H{H} Tq{Tq} Tk{Tk} d{d} {'causal' if causal else 'full  '} "
        f"q_offset={q_offset:<5d} rel err out {errs[0]:.1e} dq {errs[1]:.1e} dk {errs[2]:.1e} dv {errs[3]:.1e} "
        f"ddelta {errs[4]:.1e}")
    return ok


def run_checks():
    log("## Correctness on the GPU against the float64 reference (relative L2 error)")
    # causal bf16, the variants the benchmark compiles anyway (the CPU tests cover non-causal, fp16, fp32, d 32)
    cases = [(2, 3, 1000, 1000, 64, True, 0, torch.bfloat16), (1, 2, 1, 333, 64, True, 332, torch.bfloat16),
             (1, 2, 257, 513, 128, True, 256, torch.bfloat16)]
    if os.environ.get("BENCH_ALL_CHECKS") == "1":
        cases += [(1, 2, 130, 200, 32, False, 9, torch.float16), (1, 2, 500, 500, 64, True, 0, torch.float32),
                  (1, 2, 129, 300, 128, False, 171, torch.float32)]
    return all([check(*c) for c in cases])


# -----------------------------------------------------------------------------
# The three contenders

_tab = {}


def phase_table(T, d, device, base=10000.0):
    if (T, d) not in _tab:
        theta = base ** (-torch.arange(d, dtype=torch.float64, device=device) / d)
        ang = torch.arange(T, dtype=torch.float64, device=device)[:, None] * theta
        _tab[T, d] = (ang.cos().float(), ang.sin().float())
    return _tab[T, d]


def pope_expanded_sdpa(q, k, v, delta, pad_v):
    """PoPE as plain attention on q' = [Qc, Qs], k' = [Kc, Ks] (2d wide), scale 1/sqrt(d)."""
    T, d = q.shape[-2], q.shape[-1]
    cos, sin = phase_table(T, d, q.device)
    cd, sd = delta.cos()[:, None, :], delta.sin()[:, None, :]
    cos_k, sin_k = cos * cd - sin * sd, sin * cd + cos * sd
    mq, mk = F.softplus(q.float()), F.softplus(k.float())
    q2 = torch.cat([mq * cos, mq * sin], -1).to(q.dtype)
    k2 = torch.cat([mk * cos_k, mk * sin_k], -1).to(k.dtype)
    if pad_v:
        return F.scaled_dot_product_attention(q2, k2, F.pad(v, (0, d)), is_causal=True,
                                              scale=1 / math.sqrt(d))[..., :d]
    return F.scaled_dot_product_attention(q2, k2, v, is_causal=True, scale=1 / math.sqrt(d))


def bench(fn, inputs):
    """(fwd ms, fwd+bwd ms, peak MB beyond the inputs), or None when fn fails."""
    try:
        out = fn()
        dout = torch.randn_like(out)
        fwd = triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
        step = lambda: fn().backward(dout)
        both = triton.testing.do_bench(step, warmup=10, rep=40, grad_to_none=inputs, return_mode="median")
        for x in inputs:
            x.grad = None
        del out
        torch.cuda.synchronize()
        base_mem = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base_mem) / 2**20
        for x in inputs:
            x.grad = None
        return fwd, both, peak
    except Exception as e:  # a backend that does not take these shapes
        print(f"    (skipped: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})", flush=True)
        return None


def best_backend(make_fn, inputs, backends):
    best = None
    for name, backend, kw in backends:
        with sdpa_kernel([backend]):
            r = bench(make_fn(**kw), inputs)
        if r is not None and (best is None or r[1] < best[1][1]):
            best = (name, r)
    return best


def run_bench():
    H, tokens, dtype = 12, 16384, torch.bfloat16
    rows = []
    log("\n## Benchmark: causal bf16, 16k tokens a batch, 12 heads (fwd / fwd+bwd ms, median)")
    for d in (64, 128):
        for T in (1024, 4096, 16384):
            B = tokens // T
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
            delta = (torch.rand(H, d, device="cuda") * -2 * math.pi).requires_grad_()
            flop_unit = B * H * T * T * d / 2  # causal
            t0 = time.time()
            ours = bench(lambda: pope_kernel.pope_attention(q, k, v, delta), [q, k, v, delta])
            t_tune = time.time() - t0
            pope_backends = [("cudnn", SDPBackend.CUDNN_ATTENTION, dict(pad_v=False)),
                             ("cudnn+padv", SDPBackend.CUDNN_ATTENTION, dict(pad_v=True)),
                             ("flash+padv", SDPBackend.FLASH_ATTENTION, dict(pad_v=True)),
                             ("efficient", SDPBackend.EFFICIENT_ATTENTION, dict(pad_v=False))]
            if T <= 1024:
                pope_backends.append(("math", SDPBackend.MATH, dict(pad_v=False)))
            expanded = best_backend(lambda pad_v: (lambda: pope_expanded_sdpa(q, k, v, delta, pad_v)),
                                    [q, k, v, delta], pope_backends)
            rope_backends = [("cudnn", SDPBackend.CUDNN_ATTENTION, {}), ("flash", SDPBackend.FLASH_ATTENTION, {}),
                             ("efficient", SDPBackend.EFFICIENT_ATTENTION, {})]
            rope = best_backend(lambda: (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                                [q, k, v], rope_backends)
            row = dict(d=d, T=T, B=B, ours=ours, expanded=expanded, rope=rope, unit=flop_unit)
            rows.append(row)
            tf = lambda ms, n: n * flop_unit / (ms * 1e-3) / 1e12
            log(f"d={d} T={T} B={B}: ours {ours[0]:.3f} / {ours[1]:.3f} ms ({tf(ours[0], 6):.0f} / "
                f"{tf(ours[1], 22):.0f} TFLOP/s, {ours[2]:.0f} MB; first call incl. tuning {t_tune:.1f}s) | "
                f"expanded SDPA[{expanded[0]}] {expanded[1][0]:.3f} / {expanded[1][1]:.3f} ms | "
                f"RoPE SDPA[{rope[0]}] {rope[1][0]:.3f} / {rope[1][1]:.3f} ms | "
                f"ratio ours/RoPE fwd+bwd {ours[1] / rope[1][1]:.2f}x")
            del q, k, v, delta
            torch.cuda.empty_cache()

    log("\n| d | T | B | PoPE kernel fwd / fwd+bwd ms | TFLOP/s | mem MB | PoPE expanded SDPA fwd / fwd+bwd ms "
        "(backend) | TFLOP/s | mem MB | RoPE SDPA fwd / fwd+bwd ms (backend) | TFLOP/s | mem MB "
        "| ours / RoPE fwd+bwd | ours / expanded fwd+bwd |")
    log("|" + "---|" * 14)
    for r in rows:
        tf = lambda ms, n: n * r["unit"] / (ms * 1e-3) / 1e12
        o, (en, e), (rn, rp) = r["ours"], r["expanded"], r["rope"]
        log(f"| {r['d']} | {r['T']} | {r['B']} | {o[0]:.3f} / {o[1]:.3f} | {tf(o[0], 6):.0f} / {tf(o[1], 22):.0f} "
            f"| {o[2]:.0f} | {e[0]:.3f} / {e[1]:.3f} ({en}) | {tf(e[0], 6):.0f} / {tf(e[1], 22):.0f} | {e[2]:.0f} "
            f"| {rp[0]:.3f} / {rp[1]:.3f} ({rn}) | {tf(rp[0], 4):.0f} / {tf(rp[1], 14):.0f} | {rp[2]:.0f} "
            f"| {o[1] / rp[1]:.2f}x | {o[1] / e[1]:.2f}x |")
    log("\nkernel configs (BLOCK_M x BLOCK_N, warps, stages): " + "; ".join(
        f"{kind} d{D}: " + ", ".join(f"Tq{key[0]}/Tk{key[1]} {c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']} w{c.num_warps} "
                                    f"s{c.num_stages}" for key, c in (tuner.cache.items() if tuner.cache
                                                                      else [(("-", "-"), tuner.configs[0])]))
        for (kind, D), tuner in pope_kernel._tuned.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="only the correctness checks")
    args = ap.parse_args()
    log(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__} | "
        f"python {sys.version.split()[0]} | cuDNN {torch.backends.cudnn.version()}")
    t0 = time.time()
    ok = run_checks()
    log(f"correctness: {'all ok' if ok else 'FAILURES'} ({time.time() - t0:.0f}s incl. compiling)")
    if not args.check:
        run_bench()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
