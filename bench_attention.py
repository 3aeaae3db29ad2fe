"""
Speed of PoPE attention (pope_kernel.py) on one GPU, causal bf16, 12 heads, medians of
triton.testing.do_bench (results/kernel/README.md): RoPE (SDPA on rotated q, k), PoPE expanded
(model.pope_attention_reference(explicit=False)), hybrid (pope_attention_fast(impl='sdpa')) and
triton (impl='triton').

    python bench_attention.py                           # table, GQA, decoding, compile + graphs
    python bench_attention.py --sections graphed,gqa    # GPU time alone (CUDA-graph replays); GQA
    python bench_attention.py --sections options        # every way to run d 128, against RoPE
"""
import contextlib
import functools
import itertools
import math
import os
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import model
import pope_kernel
from eval import code_commit
from prepare.common import parser

H, TOKENS, DTYPE = 12, 16384, torch.bfloat16  # heads, tokens a batch, dtype of the benchmark
median_ms = functools.partial(triton.testing.do_bench, return_mode="median")
theta = functools.cache(lambda d: model.pope_frequencies(d, device="cuda"))  # PoPE's frequencies
ms = lambda t: f"{t[0]:.3f} / {t[1]:.3f}"
ratio = lambda t, rope: f"{t[0] / rope[0]:.2f}x, {t[1] / rope[1]:.2f}x"


def fast(impl):  # pope_attention_fast through impl at PoPE's frequencies
    return lambda q, k, v, delta, **kw: pope_kernel.pope_attention_fast(
        q, k, v, delta, theta(q.shape[-1]), impl=impl, **kw)


PATHS = {"hybrid": fast("sdpa"), "triton": fast("triton")}


def inputs(B, Hq, Hkv, Tq, Tk, d):
    """q (B, Hq, Tq, d), k and v (B, Hkv, Tk, d) in DTYPE, delta (Hq, d) in [-2pi, 0]; grads on."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(B, Hq, Tq, d, device="cuda", generator=gen).to(DTYPE)
    k, v = (torch.randn(B, Hkv, Tk, d, device="cuda", generator=gen).to(DTYPE) for _ in range(2))
    delta = torch.rand(Hq, d, device="cuda", generator=gen) * -2 * math.pi
    return [x.requires_grad_() for x in (q, k, v, delta)]


def bench(fn, xs):
    """(fwd ms, fwd+bwd ms, peak MB that one fwd+bwd allocates) of fn(), the grads of xs."""
    dout = torch.randn_like(fn())
    step = lambda: torch.autograd.grad(fn(), xs, dout)
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    return median_ms(fn), median_ms(step), peak


def cuda_graph(fn):
    """(graph, what fn returned): fn() captured, after two warm-up runs that compile kernels."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(), fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def run_table():
    print("\n## Benchmark: causal bf16, 16k tokens a batch, 12 heads (fwd / fwd+bwd ms, median)")
    print("| d | T | B | RoPE cuDNN fwd / fwd+bwd ms | PoPE expanded SDPA (model) | PoPE hybrid | "
          "PoPE all-Triton | hybrid / RoPE fwd, fwd+bwd | triton / RoPE fwd, fwd+bwd | hybrid / "
          "expanded fwd+bwd | TFLOP/s fwd+bwd RoPE, expanded, hybrid, triton | peak MB RoPE, "
          "expanded, hybrid, triton | the model's path |")
    print("|" + "---|" * 13)
    default_backend = []  # the hybrid with PyTorch's own choice of SDPA backend
    for d, T in itertools.product((64, 128), (1024, 4096, 16384)):
        B = TOKENS // T
        q, k, v, delta = xs = inputs(B, H, H, T, T, d)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            r = {"rope": bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               [q, k, v]),
                 "expanded": bench(lambda: model.pope_attention_reference(
                     *xs, theta(d), explicit=False), xs),
                 "hybrid": bench(lambda: PATHS["hybrid"](*xs), xs)}
        r["triton"] = bench(lambda: PATHS["triton"](*xs), xs)
        default_backend.append(f"d{d}/T{T} {ms(bench(lambda: PATHS['hybrid'](*xs), xs))}")
        # fwd + bwd FLOPs per head: RoPE (4 + 10) Tq Tk d, PoPE (6 + 16) Tq Tk d; causal halves
        flops = {n: (14 if n == "rope" else 22) * B * H * T * T * d / 2 for n in r}
        path = model.pope_path('auto', q)  # the path the model runs here
        print(f"| {d} | {T} | {B} | " + " | ".join(ms(r[n]) for n in r)
              + f" | {ratio(r['hybrid'], r['rope'])} | {ratio(r['triton'], r['rope'])} "
              f"| {r['hybrid'][1] / r['expanded'][1]:.2f}x | "
              + ", ".join(f"{flops[n] / (r[n][1] * 1e-3) / 1e12:.0f}" for n in r) + " | "
              + ", ".join(f"{r[n][2]:.0f}" for n in r) + f" | {path} |")
    print("(hybrid: SDPA restricted to cuDNN, as RoPE and expanded; with PyTorch's default backend "
          "choice it measured " + ", ".join(default_backend) + " ms)")


def prologue(q, k, delta):
    """pope_attention_fast's q', k' (time-major, as it gives cuDNN), for the variants below."""
    th = theta(q.shape[-1])
    return pope_kernel.cartesian(q, k, delta, th, *pope_kernel.phase_table(th, k.shape[2]), 0,
                                 True, "softplus")


def hybrid_enable_gqa(q, k, v, delta):
    """The hybrid path with SDPA's enable_gqa, where pope_attention_fast copies k', v per head."""
    qp, kp = prologue(q, k, delta)
    return F.scaled_dot_product_attention(qp, kp, v, is_causal=True, scale=q.shape[-1] ** -0.5,
                                          enable_gqa=True)


def padded_v(q, k, v, delta):
    """The hybrid with v zero-padded to the width of q', k' (2d): a shape whose backward cuDNN and
    flash attention take at d 128 (q'/k' 256, v 256), at twice the PV FLOPs."""
    qp, kp = prologue(q, k, delta)
    vp = F.pad(v, (0, qp.shape[-1] - v.shape[-1]))
    out = F.scaled_dot_product_attention(qp, kp, vp, is_causal=True, scale=q.shape[-1] ** -0.5)
    return out[..., :v.shape[-1]]


@functools.cache
def flex_causal(T):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, T, T, device="cuda")
    return torch.compile(flex_attention), mask


def flex(q, k, v, delta):
    """The hybrid with FlexAttention (compiled) in place of SDPA: it takes q', k' 2d and v d."""
    qp, kp = prologue(q, k, delta)
    attend, mask = flex_causal(q.shape[2])
    return attend(qp, kp, v, block_mask=mask, scale=q.shape[-1] ** -0.5)


def fa4(q, k, v, delta):
    """The hybrid with FlashAttention-4 (pip install flash-attn-4; Hopper, Blackwell) in place of
    SDPA: it takes q', k' 2d and v d, forward and backward, in (B, T, heads, width) layout."""
    from flash_attn.cute import flash_attn_func
    qp, kp = prologue(q, k, delta)
    out, _ = flash_attn_func(qp.transpose(1, 2), kp.transpose(1, 2), v.transpose(1, 2),
                             softmax_scale=q.shape[-1] ** -0.5, causal=True)
    return out.transpose(1, 2)


def run_options(d=128):
    """Every way to run PoPE attention at head dim d against RoPE's cuDNN attention on the same
    inputs; TFLOP/s on the useful FLOPs (RoPE's 14, PoPE's 22 T^2 d a head, halved by causality)."""
    print(f"\n## Options at d {d}: causal bf16, 16k tokens a batch, 12 heads (fwd / fwd+bwd ms, "
          "median)")
    print("| T | option | fwd / fwd+bwd ms | / RoPE cuDNN fwd, fwd+bwd | TFLOP/s fwd+bwd | "
          "rel. error of out, grads vs the hybrid |")
    print("|---|---|---|---|---|---|")
    cudnn, flash = SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION
    options = {"hybrid (SDPA on q', k', v), cuDNN": (PATHS["hybrid"], cudnn),
               "hybrid, default SDPA backend": (PATHS["hybrid"], None),
               "all-Triton": (PATHS["triton"], None),
               "v padded to 2d, cuDNN": (padded_v, cudnn),
               "v padded to 2d, flash": (padded_v, flash),
               "FlexAttention (compiled)": (flex, None),
               "FlashAttention-4": (fa4, None)}
    for T in (1024, 4096, 16384):
        q, k, v, delta = xs = inputs(TOKENS // T, H, H, T, T, d)
        useful = lambda n: n * (TOKENS // T) * H * T * T * d / 2
        with sdpa_kernel(cudnn):
            rope = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])
        print(f"| {T} | RoPE, cuDNN | {ms(rope)} | 1.00x, 1.00x | "
              f"{useful(14) / (rope[1] * 1e-3) / 1e12:.0f} | |")
        dout = torch.randn_like(q)
        out_and_grads = lambda fn: [fn(*xs).detach(), *torch.autograd.grad(fn(*xs), xs, dout)]
        with sdpa_kernel(cudnn):  # an option that runs but is wrong shows here
            ref = out_and_grads(PATHS["hybrid"])
        for name, (fn, backend) in options.items():
            try:
                with sdpa_kernel(backend) if backend else contextlib.nullcontext():
                    r = bench(lambda: fn(*xs), xs)
                    error = max(((a.float() - b.float()).norm() / b.float().norm()).item()
                              for a, b in zip(out_and_grads(fn), ref))
            except Exception as err:  # an option this GPU or library cannot run: say so
                print(f"| {T} | {name} | cannot run: {type(err).__name__}: "
                      f"{str(err).splitlines()[0][:120]} | | | |")
                continue
            print(f"| {T} | {name} | {ms(r)} | {ratio(r, rope)} | "
                  f"{useful(22) / (r[1] * 1e-3) / 1e12:.0f} | {error:.1e} |")
        print(f"(the model's path at d {d}, T {T}: {model.pope_path('auto', q)})")


def run_gqa():
    print("\n## GQA: d 64, T 4096, B 4, 12 query heads on 4 kv heads, causal bf16 (fwd / fwd+bwd "
          "ms)")
    xs = inputs(4, 12, 4, 4096, 4096, 64)
    for how, fn in (("expand", PATHS["hybrid"]), ("enable_gqa", hybrid_enable_gqa)):
        for backend in ("cudnn", "default"):
            cudnn = backend == "cudnn"
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION) if cudnn else contextlib.nullcontext():
                r = bench(lambda: fn(*xs), xs)
            print(f"  hybrid, GQA={how}, {backend}: {ms(r)} ms, {r[2]:.0f} MB")
    r = bench(lambda: PATHS["triton"](*xs), xs)
    print(f"  triton: {ms(r)} ms, {r[2]:.0f} MB")


def run_decode():
    print("\n## Decoding: one query at q_offset Tk - 1 on Tk cached keys (PoPE recomputes their "
          "k'), batch 16, fwd ms")
    print("| d | Tk | RoPE SDPA | PoPE hybrid | PoPE triton | hybrid / RoPE | triton / RoPE |")
    print("|---|---|---|---|---|---|---|")
    for d, Tk in itertools.product((64, 128), (4096, 8192, 16384, 32768)):
        q, k, v, delta = (x.detach() for x in inputs(16, H, H, 1, Tk, d))
        rope = median_ms(lambda: F.scaled_dot_product_attention(q, k, v))
        t = {name: median_ms(lambda: attend(q, k, v, delta, q_offset=Tk - 1))
             for name, attend in PATHS.items()}
        print(f"| {d} | {Tk} | {rope:.3f} | {t['hybrid']:.3f} | {t['triton']:.3f} "
              f"| {t['hybrid'] / rope:.2f}x | {t['triton'] / rope:.2f}x |")


def run_compile():
    print("\n## torch.compile and CUDA graphs")
    cfg = model.GPTConfig(block_size=256, vocab_size=512, n_layer=2, n_head=4, n_kv_head=2,
                          n_embd=256, pos_emb="pope", attn_impl="triton")
    idx = torch.randint(0, 512, (4, 256), device="cuda")
    for (name, attend), impl in zip(PATHS.items(), ("fused", "triton")):
        gpt = model.GPT(cfg).cuda()
        for block in gpt.h:  # pin the path
            block.attn.attn_impl = impl
        with torch.autocast("cuda", torch.bfloat16):  # compiled (fullgraph), then eager
            losses = [net(idx, idx)[1] for net in (torch.compile(gpt, fullgraph=True), gpt)]
        grads = [torch.autograd.grad(loss, list(gpt.parameters())) for loss in losses]
        err = max(((a - b).norm() / b.norm().clamp_min(1e-12)).item() for a, b in zip(*grads))
        print(f"  {name}: torch.compile(model.GPT, fullgraph=True) fwd+bwd, 2 layers, GQA 4/2 "
              f"heads: one graph, loss {losses[0].item():.4f} vs eager {losses[1].item():.4f}, "
              f"max rel grad diff {err:.1e}")
        torch._dynamo.reset()
        xs = inputs(2, 8, 4, 512, 512, 64)  # fwd + bwd as one CUDA graph (train.py's cuda_graph)
        dout = torch.randn_like(xs[0])  # the output's shape: that of q
        eager = torch.autograd.grad(attend(*xs), xs, dout)
        graph, graphed = cuda_graph(lambda: torch.autograd.grad(attend(*xs), xs, dout))
        graph.replay()
        err = max(((g - e).norm() / e.norm()).item() for g, e in zip(graphed, eager))
        print(f"  {name}: CUDA graph capture + replay of fwd+bwd: max rel grad diff vs eager "
              f"{err:.1e}")


def graphed_ms(fn, xs):
    """(fwd ms, fwd+bwd ms) of fn as CUDA-graph replays: the GPU's time alone, without launches."""
    dout = torch.randn_like(fn())
    fwd, _ = cuda_graph(fn)
    both, _ = cuda_graph(lambda: torch.autograd.grad(fn(), xs, dout))
    return median_ms(fwd.replay), median_ms(both.replay)


def run_graphed():
    print("\n## GPU time alone (CUDA-graph replays of fwd, of fwd+bwd), causal bf16, 16k tokens a "
          "batch, 12 heads, ms")
    print("| d | T | RoPE cuDNN fwd / fwd+bwd | PoPE hybrid | PoPE all-Triton | hybrid / RoPE fwd, "
          "fwd+bwd | triton / RoPE fwd, fwd+bwd |")
    print("|---|---|---|---|---|---|---|")
    for d, T in itertools.product((64, 128), (1024, 4096)):
        q, k, v, delta = xs = inputs(TOKENS // T, H, H, T, T, d)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            rope = graphed_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                              [q, k, v])
        t = {name: graphed_ms(lambda: attend(*xs), xs) for name, attend in PATHS.items()}
        print(f"| {d} | {T} | {ms(rope)} | {ms(t['hybrid'])} | {ms(t['triton'])} "
              f"| {ratio(t['hybrid'], rope)} | {ratio(t['triton'], rope)} |")


if __name__ == "__main__":
    sections = dict(table=run_table, options=run_options, gqa=run_gqa, decode=run_decode,
                    compile=run_compile, graphed=run_graphed)
    p = parser(__doc__)
    p.add_argument("--sections", default="table,gqa,decode,compile",
                   help="comma-separated: " + ",".join(sections))
    chosen = p.parse_args().sections.split(",")
    if not set(chosen) <= set(sections):
        sys.exit(f"--sections: choose from {', '.join(sections)}")
    sys.stdout.reconfigure(line_buffering=True)  # a run cut short leaves every line it finished
    commit = code_commit(os.path.dirname(os.path.abspath(__file__)))
    print(f"# {torch.cuda.get_device_name()} | torch {torch.__version__} | triton "
          f"{triton.__version__} | python {sys.version.split()[0]} | cuDNN "
          f"{torch.backends.cudnn.version()} | commit {commit} | sections {','.join(chosen)}")
    for name, run in sections.items():
        if name in chosen:
            run()
