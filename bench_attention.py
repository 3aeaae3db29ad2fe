"""
Speed of PoPE attention (pope_kernel.py) against RoPE attention through SDPA, on one GPU.

    python bench_attention.py    # sanity check, table, GQA, decoding, torch.compile and CUDA-graph checks
    python bench_attention.py --sections graphed,sweep    # GPU time alone; block sizes of the Triton kernels

Compared, causal bf16, 16k tokens a batch (B = 16384 / T), 12 heads, d 64 and 128, T 1024 / 4096 / 16384:
  RoPE      F.scaled_dot_product_attention on already-rotated q, k (cuDNN): the attention call alone
  expanded  model.pope_attention_sdpa: PoPE's 2d-wide q', k' formed in PyTorch (float64 phases), then SDPA
  hybrid    pope_kernel.pope_attention(impl='sdpa'): Triton prologue, SDPA on q', k', Triton epilogue
  triton    pope_kernel.pope_attention(impl='triton'): the same prologue / epilogue around FlashAttention-2 in Triton
Times are medians of triton.testing.do_bench. FLOPs per head: PoPE fwd 6 Tq Tk d, bwd 16 Tq Tk d; RoPE fwd 4,
bwd 10 (recompute counted); causal halves them. Memory: peak allocated during forward+backward beyond the inputs.
Correctness is the tests' job (tests/test_pope_kernel.py, also on a GPU with TRITON_INTERPRET=0); here one line per
path checks the benchmark's block sizes against the float64 reference. The log also goes to $OUT/bench_attention.log
when OUT is set.
"""
import argparse
import functools
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import model
import pope_kernel

H, TOKENS, DTYPE = 12, 16384, torch.bfloat16  # heads, tokens a batch, dtype of the benchmark
IMPLS = ("hybrid", "triton")
ALL_BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
SECTIONS = ("check", "table", "gqa", "decode", "compile", "graphed", "sweep")


def log(*args):
    line = " ".join(str(a) for a in args)
    print(line, flush=True)
    if os.environ.get("OUT"):  # written as we go, so a cut-short run still leaves its log
        with open(os.path.join(os.environ["OUT"], "bench_attention.log"), "a") as f:
            f.write(line + "\n")


def inputs(B, H, Hkv, Tq, Tk, d, dtype=DTYPE, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, H, Tq, d, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(B, Hkv, Tk, d, device="cuda", generator=gen).to(dtype) for _ in range(2))
    delta = torch.rand(H, d, device="cuda", generator=gen) * -2 * math.pi
    return [x.requires_grad_() for x in (q, k, v, delta)]


def pope(impl):
    return lambda q, k, v, delta, **kw: pope_kernel.pope_attention(q, k, v, delta, impl="sdpa" if impl == "hybrid"
                                                                   else impl, **kw)


def sanity_check():
    """Both paths at the benchmark's block sizes (bf16, GQA, Tq < Tk) against model.pope_attention in float64."""
    ok = True
    for impl in IMPLS:
        for (B, Hq, Hkv, Tq, Tk, d, off, dtype) in [(1, 4, 2, 700, 1000, 64, 300, torch.bfloat16),
                                                    (2, 2, 2, 1000, 1000, 128, 0, torch.bfloat16),
                                                    (1, 4, 1, 300, 300, 64, 0, torch.float32)]:
            xs = inputs(B, Hq, Hkv, Tq, Tk, d, dtype, seed=Tk + d)
            out = pope(impl)(*xs, q_offset=off)
            dout = torch.randn_like(out)
            out.backward(dout)
            rs = [x.detach().double().requires_grad_() for x in xs]
            g = Hq // Hkv
            ref = model.pope_attention(rs[0], rs[1].repeat_interleave(g, 1), rs[2].repeat_interleave(g, 1), rs[3],
                                       q_offset=off)
            ref.backward(dout.double())
            errs = [(a.double() - b).norm().item() / b.norm().item()
                    for a, b in [(out, ref)] + [(x.grad, r.grad) for x, r in zip(xs, rs)]]
            good = max(errs) < (3e-2 if dtype == torch.bfloat16 else 1e-4)
            ok &= good
            log(f"  {'ok ' if good else 'BAD'} {impl:6s} {str(dtype)[6:]:8s} B{B} H{Hq} Hkv{Hkv} Tq{Tq} Tk{Tk} d{d} "
                f"q_offset={off}: rel err out / dq / dk / dv / ddelta " + " / ".join(f"{e:.1e}" for e in errs))
    return ok


def bench(fn, grads):
    """(fwd ms, fwd+bwd ms, peak MB beyond the inputs) of fn()."""
    out = fn()
    dout = torch.randn_like(out)
    fwd = triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")
    step = lambda: fn().backward(dout)
    both = triton.testing.do_bench(step, warmup=10, rep=50, grad_to_none=grads, return_mode="median")
    for x in grads:
        x.grad = None
    del out
    torch.cuda.synchronize()
    base_mem = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base_mem) / 2**20
    for x in grads:
        x.grad = None
    return fwd, both, peak


def run_bench():
    log("\n## Benchmark: causal bf16, 16k tokens a batch, 12 heads (fwd / fwd+bwd ms, median)")
    rows = []
    for d in (64, 128):
        for T in (1024, 4096, 16384):
            B = TOKENS // T
            q, k, v, delta = inputs(B, H, H, T, T, d)
            r = dict(d=d, T=T, B=B, unit=B * H * T * T * d / 2)  # causal: half the score matrix
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                r["rope"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])
                r["expanded"] = bench(lambda: model.pope_attention_sdpa(q, k, v, delta), [q, k, v, delta])
                r["hybrid"] = bench(lambda: pope("hybrid")(q, k, v, delta), [q, k, v, delta])
            r["hybrid_default"] = bench(lambda: pope("hybrid")(q, k, v, delta), [q, k, v, delta])
            r["triton"] = bench(lambda: pope("triton")(q, k, v, delta), [q, k, v, delta])
            rows.append(r)
            log(f"d={d} T={T}: " + " | ".join(f"{n} {r[n][0]:.3f} / {r[n][1]:.3f} ms {r[n][2]:.0f} MB"
                                              for n in ("rope", "expanded", "hybrid", "hybrid_default", "triton")))
            del q, k, v, delta
            torch.cuda.empty_cache()

    tf = lambda r, ms, n: n * r["unit"] / (ms * 1e-3) / 1e12
    log("\n| d | T | B | RoPE cuDNN fwd / fwd+bwd ms | PoPE expanded SDPA (model) | PoPE hybrid | PoPE all-Triton "
        "| hybrid / RoPE fwd, fwd+bwd | triton / RoPE fwd, fwd+bwd | hybrid / expanded fwd+bwd "
        "| TFLOP/s fwd+bwd RoPE, expanded, hybrid, triton | peak MB RoPE, expanded, hybrid, triton |")
    log("|" + "---|" * 12)
    for r in rows:
        ms = lambda n: f"{r[n][0]:.3f} / {r[n][1]:.3f}"
        ratio = lambda n: f"{r[n][0] / r['rope'][0]:.2f}x, {r[n][1] / r['rope'][1]:.2f}x"
        log(f"| {r['d']} | {r['T']} | {r['B']} | {ms('rope')} | {ms('expanded')} | {ms('hybrid')} | {ms('triton')} "
            f"| {ratio('hybrid')} | {ratio('triton')} | {r['hybrid'][1] / r['expanded'][1]:.2f}x "
            f"| {tf(r, r['rope'][1], 14):.0f}, " + ", ".join(f"{tf(r, r[n][1], 22):.0f}" for n in
                                                              ("expanded", "hybrid", "triton"))
            + " | " + ", ".join(f"{r[n][2]:.0f}" for n in ("rope", "expanded", "hybrid", "triton")) + " |")
    log("(hybrid: SDPA restricted to cuDNN, as RoPE and expanded; with PyTorch's default backend choice it measured "
        + ", ".join(f"d{r['d']}/T{r['T']} {r['hybrid_default'][0]:.3f} / {r['hybrid_default'][1]:.3f}" for r in rows)
        + " ms)")


def run_gqa():
    log("\n## GQA: d 64, T 4096, B 4, 12 query heads on 4 kv heads, causal bf16 (fwd / fwd+bwd ms)")
    q, k, v, delta = inputs(4, 12, 4, 4096, 4096, 64)
    for how in ("expand", "enable_gqa"):
        pope_kernel.SDPA_GQA = how
        for backend in ("cudnn", "default"):
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION] if backend == "cudnn" else ALL_BACKENDS):
                    r = bench(lambda: pope("hybrid")(q, k, v, delta), [q, k, v, delta])
                log(f"  hybrid, SDPA_GQA={how}, {backend}: {r[0]:.3f} / {r[1]:.3f} ms, {r[2]:.0f} MB")
            except RuntimeError as e:
                log(f"  hybrid, SDPA_GQA={how}, {backend}: fails ({str(e).splitlines()[0][:100]})")
    pope_kernel.SDPA_GQA = "expand"
    r = bench(lambda: pope("triton")(q, k, v, delta), [q, k, v, delta])
    log(f"  triton: {r[0]:.3f} / {r[1]:.3f} ms, {r[2]:.0f} MB")


def run_decode():
    log("\n## Decoding: one query (Tq 1, q_offset Tk - 1) on Tk cached keys, batch 16, 12 heads, bf16, fwd ms "
        "(PoPE includes k' of the whole cache, recomputed each step)")
    log("| d | Tk | RoPE SDPA | PoPE hybrid | PoPE triton | hybrid / RoPE | triton / RoPE |")
    log("|---|---|---|---|---|---|---|")
    for d in (64, 128):
        for Tk in (4096, 8192, 16384, 32768):
            q, k, v, delta = (x.detach() for x in inputs(16, H, H, 1, Tk, d))
            rope = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v), return_mode="median")
            t = {impl: triton.testing.do_bench(lambda: pope(impl)(q, k, v, delta, q_offset=Tk - 1),
                                               return_mode="median") for impl in IMPLS}
            log(f"| {d} | {Tk} | {rope:.3f} | {t['hybrid']:.3f} | {t['triton']:.3f} | {t['hybrid'] / rope:.2f}x "
                f"| {t['triton'] / rope:.2f}x |")


def run_compile_checks():
    log("\n## torch.compile and CUDA graphs")
    cfg = model.GPTConfig(block_size=256, vocab_size=512, n_layer=2, n_head=4, n_kv_head=2, n_embd=256,
                          pos_emb="pope", attn_impl="triton")
    for impl in IMPLS:
        torch.manual_seed(0)
        gpt = model.GPT(cfg).cuda()
        for m in gpt.modules():  # the model's attention calls pope_kernel.pope_attention; pin the path
            if hasattr(m, "attend"):
                m.attend = functools.partial(pope_kernel.pope_attention, impl="sdpa" if impl == "hybrid" else impl)
        idx = torch.randint(0, 512, (4, 256), device="cuda")
        with torch.autocast("cuda", torch.bfloat16):
            explain = torch._dynamo.explain(lambda i: gpt(i, i)[1])(idx)
        log(f"  {impl}: torch._dynamo.explain(model.GPT, 2 layers, GQA 4/2 heads, attn_impl='triton'): "
            f"graph_count={explain.graph_count}, graph_break_count={explain.graph_break_count}, "
            f"break_reasons={explain.break_reasons}")
        torch._dynamo.reset()
        compiled = torch.compile(gpt)
        t0 = time.time()
        with torch.autocast("cuda", torch.bfloat16):
            loss_c = compiled(idx, idx)[1]
            loss_c.backward()
            grads_c = [p.grad.clone() for p in gpt.parameters()]
            gpt.zero_grad(set_to_none=True)
            loss_e = gpt(idx, idx)[1]
            loss_e.backward()
        err = max(((a - p.grad).norm() / p.grad.norm().clamp_min(1e-12)).item()
                  for a, p in zip(grads_c, gpt.parameters()))
        log(f"  {impl}: torch.compile(model.GPT) fwd+bwd ran ({time.time() - t0:.0f}s incl. compiling): loss "
            f"{loss_c.item():.4f} vs eager {loss_e.item():.4f}, max rel grad diff {err:.1e}")
        torch._dynamo.reset()

        # CUDA graph of forward + backward (as train.py's cuda_graph=True): warm up on a side stream, capture, replay
        q, k, v, delta = inputs(2, 8, 4, 512, 512, 64)
        dout = torch.randn(2, 8, 512, 64, device="cuda", dtype=DTYPE)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                pope(impl)(q, k, v, delta).backward(dout)
        torch.cuda.current_stream().wait_stream(side)
        eager = [x.grad.clone() / 2 for x in (q, k, v, delta)]
        for x in (q, k, v, delta):
            x.grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = pope(impl)(q, k, v, delta)
            out.backward(dout)
        for x in (q, k, v, delta):
            x.grad.zero_()
        graph.replay()
        torch.cuda.synchronize()
        err = max(((x.grad - e).norm() / e.norm()).item() for x, e in zip((q, k, v, delta), eager))
        log(f"  {impl}: CUDA graph capture + replay of fwd+bwd: max rel grad diff vs eager {err:.1e}")


def graphed_ms(fn, grads):
    """(fwd ms, fwd+bwd ms) of fn as CUDA-graph replays: the GPU's time alone, without the host's launch overhead."""
    dout = torch.randn_like(fn())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (compiles kernels, builds the phase table) before any capture
        for _ in range(2):
            fn().backward(dout)
    torch.cuda.current_stream().wait_stream(side)
    for x in grads:
        x.grad = None
    fwd, both = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(fwd):
        fn()
    with torch.cuda.graph(both):
        fn().backward(dout)
    return tuple(triton.testing.do_bench(g.replay, warmup=10, rep=50, return_mode="median") for g in (fwd, both))


def run_graphed():
    log("\n## GPU time alone (CUDA-graph replay of fwd and of fwd+bwd), causal bf16, 16k tokens a batch, 12 heads, ms")
    log("| d | T | RoPE cuDNN fwd / fwd+bwd | PoPE hybrid | PoPE all-Triton | hybrid / RoPE fwd, fwd+bwd "
        "| triton / RoPE fwd, fwd+bwd |")
    log("|---|---|---|---|---|---|---|")
    for d in (64, 128):
        for T in (1024, 4096):
            q, k, v, delta = inputs(TOKENS // T, H, H, T, T, d)
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                rope = graphed_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])
            t = {impl: graphed_ms(lambda: pope(impl)(q, k, v, delta), [q, k, v, delta]) for impl in IMPLS}
            ratio = lambda n: f"{t[n][0] / rope[0]:.2f}x, {t[n][1] / rope[1]:.2f}x"
            log(f"| {d} | {T} | {rope[0]:.3f} / {rope[1]:.3f} | {t['hybrid'][0]:.3f} / {t['hybrid'][1]:.3f} "
                f"| {t['triton'][0]:.3f} / {t['triton'][1]:.3f} | {ratio('hybrid')} | {ratio('triton')} |")


def run_sweep():
    log("\n## Block-size alternatives of the all-Triton kernels, T 4096, B 4 (fwd / fwd+bwd ms)")
    alternatives = {"fwd": [(128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 4, 4)],
                    "dkdv": [(32, 128, 4, 3), (64, 64, 4, 3), (32, 64, 4, 3), (64, 128, 8, 2)],
                    "dq": [(64, 64, 4, 3), (128, 32, 4, 3), (64, 32, 4, 3)]}
    for d in (64, 128):
        q, k, v, delta = inputs(4, H, H, 4096, 4096, d)
        base = bench(lambda: pope("triton")(q, k, v, delta), [q, k, v, delta])
        log(f"  d{d} default {pope_kernel._BLOCKS['fwd'][d]} {pope_kernel._BLOCKS['dkdv'][d]} "
            f"{pope_kernel._BLOCKS['dq'][d]}: {base[0]:.3f} / {base[1]:.3f}")
        for kind, configs in alternatives.items():
            default = pope_kernel._BLOCKS[kind][d]
            for c in configs:
                pope_kernel._BLOCKS[kind][d] = c
                try:
                    r = bench(lambda: pope("triton")(q, k, v, delta), [q, k, v, delta])
                    log(f"  d{d} {kind} {c}: {r[0]:.3f} / {r[1]:.3f}")
                except Exception as e:  # out of shared memory, say
                    log(f"  d{d} {kind} {c}: fails ({type(e).__name__})")
            pope_kernel._BLOCKS[kind][d] = default


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="check,table,gqa,decode,compile",
                    help=f"comma-separated, from {SECTIONS} ('graphed': GPU time alone, through CUDA-graph replay; "
                    "'sweep': block-size alternatives of the Triton kernels)")
    args = ap.parse_args()
    sections = args.sections.split(",")
    if not set(sections) <= set(SECTIONS):
        sys.exit(f"--sections: choose from {SECTIONS}")
    log(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__} | "
        f"python {sys.version.split()[0]} | cuDNN {torch.backends.cudnn.version()} | sections {args.sections}")
    ok = True
    if "check" in sections:
        t0 = time.time()
        ok = sanity_check()
        log(f"sanity check: {'ok' if ok else 'FAILED'} ({time.time() - t0:.0f}s incl. compiling)")
    for name, run in [("table", run_bench), ("gqa", run_gqa), ("decode", run_decode),
                      ("compile", run_compile_checks), ("graphed", run_graphed), ("sweep", run_sweep)]:
        if name in sections:
            run()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
