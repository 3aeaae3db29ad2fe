"""Tests of pope_kernel.py (prologue / epilogue, SDPA and all-Triton attention) and pope_decode.py (the decode
kernel) on the CPU through TRITON_INTERPRET=1.

Ground truth: model.pope_attention_reference (the plain explicit-score reference) on float64 inputs, with k, v
repeated per query head for grouped-query attention; its gradients, the frequencies' among them, by autograd; plus a
tiny naive loop over t, s, c that shares no code with it.
"""
import ast
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton (tests/conftest.py does it too)

import functools
import math
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytest.importorskip("triton")
import pope_decode  # noqa: E402
import pope_kernel  # noqa: E402

if not pope_kernel.INTERPRET and not torch.cuda.is_available():
    pytest.skip("pope_kernel was imported without TRITON_INTERPRET=1 and there is no GPU: set "
                "TRITON_INTERPRET=1 before anything imports triton (tests/conftest.py does)", allow_module_level=True)
DEVICE = "cpu" if pope_kernel.INTERPRET else "cuda"
IMPLS = ("sdpa", "triton")

from model import pope_attention_reference, pope_frequencies  # noqa: E402
from pope_kernel import phase_table  # noqa: E402


def ground_truth(q, k, v, delta, base=10000.0, theta=None, **kw):
    theta = pope_frequencies(q.shape[-1], base, q.device) if theta is None else theta
    return pope_attention_reference(q, k, v, delta, theta, **kw)


def fast(q, k, v, delta, base=10000.0, theta=None, **kw):
    """pope_kernel.pope_attention_fast at PoPE's frequencies of base `base` (or the frequencies theta)."""
    theta = pope_frequencies(q.shape[-1], base, q.device) if theta is None else theta
    return pope_kernel.pope_attention_fast(q, k, v, delta, theta, **kw)


def make_inputs(B, H, Tq, Tk, d, dtype, seed=0, n_kv_head=None):
    g = torch.Generator().manual_seed(seed)
    Hkv = n_kv_head or H
    q = torch.randn(B, H, Tq, d, generator=g).to(dtype)
    k, v = (torch.randn(B, Hkv, Tk, d, generator=g).to(dtype) for _ in range(2))
    q.view(-1)[::7], k.view(-1)[::5] = 0.0, 0.0  # exact zeros, where relu's gradient is torch's 0
    delta = torch.rand(H, d, generator=g) * -2 * math.pi  # Uniform(-2pi, 0), as clamped by the model
    return [x.to(DEVICE) for x in (q, k, v, delta)]


def rel_err(x, ref):
    x, ref = x.detach().double().cpu(), ref.detach().double().cpu()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(impl, B, H, Tq, Tk, d, causal, q_offset, dtype, tol, grad_tol, n_kv_head=None, mu="softplus",
          no_delta=False, learn_theta=False):
    """The kernel against the reference in float64, values and gradients; mu and no_delta: the paper's ablations;
    learn_theta: the frequencies a float32 leaf that requires grad (a learnable theta), its gradient checked too."""
    q, k, v, delta = make_inputs(B, H, Tq, Tk, d, dtype, seed=Tq * 1000 + Tk + d, n_kv_head=n_kv_head)
    tensors = (q, k, v) if no_delta else (q, k, v, delta)
    if learn_theta:  # PoPE's frequencies, moved off their values as a trained theta would be
        g = torch.Generator().manual_seed(d)
        tensors += (pope_frequencies(d, device=DEVICE).float() * (1 + 0.1 * torch.randn(d, generator=g)).to(DEVICE),)
    names = "q k v".split() + ["delta"] * (not no_delta) + ["theta"] * learn_theta
    inputs = [x.clone().requires_grad_() for x in tensors]
    theta = inputs[-1] if learn_theta else None
    delta_in = None if no_delta else inputs[3]
    out = fast(*inputs[:3], delta_in, theta=theta, causal=causal, q_offset=q_offset, impl=impl, mu=mu)
    assert out.shape == (B, H, Tq, d) and out.dtype == v.dtype
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
    out.backward(dout)

    ref_inputs = [x.detach().cpu().double().requires_grad_() for x in tensors]
    g = H // k.shape[1]  # query heads per kv head: the reference gets k, v repeated per query head
    rq, rk, rv = ref_inputs[:3]
    ref = ground_truth(rq, rk.repeat_interleave(g, 1), rv.repeat_interleave(g, 1), None if no_delta else ref_inputs[3],
                       theta=ref_inputs[-1] if learn_theta else None, causal=causal, q_offset=q_offset, mu=mu)
    ref.backward(dout.cpu().double())
    assert rel_err(out, ref) < tol, f"out rel err {rel_err(out, ref):.2e}"
    for name, x, r in zip(names, inputs, ref_inputs):
        assert x.grad.shape == x.shape and torch.isfinite(x.grad).all(), name
        if r.grad.norm() < 1e-9:  # e.g. one visible key: softmax is constant, the q/k/delta grads are 0
            assert x.grad.double().cpu().abs().max() < 1e-3, name
        else:
            assert rel_err(x.grad, r.grad) < grad_tol, f"d{name} rel err {rel_err(x.grad, r.grad):.2e}"


# (B, H, Tq, Tk, d, causal, q_offset): odd lengths, every head dim, Tq < Tk with q_offset, one decode step
SHAPES = [
    (1, 2, 17, 17, 32, True, 0),
    (2, 1, 100, 100, 64, True, 0),
    (1, 2, 100, 100, 128, False, 0),
    (1, 1, 1, 1, 64, True, 0),
    (1, 2, 17, 100, 64, True, 83),
    (1, 1, 1, 100, 32, True, 99),
    (1, 2, 33, 50, 32, False, 10),
    (1, 1, 40, 70, 128, True, 5),  # queries not at the end of the keys
    (1, 1, 80, 110, 32, True, 30),  # a key block's last row one before a query tile's edge (the dk, dv tile bounds)
    (1, 1, 20, 37, 64, True, 17),  # a query tile's last key the first of a key tile (the forward's, dq's last tile)
]
shape_id = lambda s: "B{}H{}Tq{}Tk{}d{}{}off{}".format(*s[:5], "causal" if s[5] else "full", s[6])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_fp32_matches_reference(shape, impl):
    check(impl, *shape, torch.float32, tol=1e-5, grad_tol=1e-4)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n_kv_head", [1, 2, 4])
def test_gqa_matches_reference(n_kv_head, impl):
    """8 query heads (each its own delta) reading n_kv_head shared k, v heads; Tq < Tk with q_offset."""
    check(impl, 2, 8, 12, 20, 32, True, 8, torch.float32, tol=1e-5, grad_tol=1e-4, n_kv_head=n_kv_head)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", [(1, 2, 100, 100, 64, True, 0), (1, 1, 17, 40, 128, True, 23),
                                   (1, 2, 30, 30, 32, False, 0)], ids=["d64", "d128-offset", "d32-full"])
def test_bf16_matches_reference(shape, impl):
    check(impl, *shape, torch.bfloat16, tol=2e-2, grad_tol=3e-2)


@pytest.mark.skipif(pope_kernel.INTERPRET, reason="long sequences: on a GPU only (too slow for the interpreter)")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("d", [64, 128])
def test_bf16_long_sequence_on_gpu(d, impl):
    """T = 1000 > SHORT_T: the all-Triton path's large tiles (_BLOCKS), the prologue's many time blocks."""
    check(impl, 1, 2, 1000, 1000, d, True, 0, torch.bfloat16, tol=2e-2, grad_tol=3e-2, n_kv_head=1)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mu,no_delta", [("relu", False), ("identity", False), ("softplus", True), ("relu", True)])
def test_ablations_match_reference(mu, no_delta, impl):
    """The paper's ablations (mu = relu(x), mu = x, no delta) through the prologue and epilogue: grouped keys,
    Tq < Tk with q_offset, rows past a tile."""
    check(impl, 1, 4, 9, 20, 32, True, 11, torch.float32, tol=1e-5, grad_tol=1e-4, n_kv_head=2, mu=mu,
          no_delta=no_delta)


@pytest.mark.parametrize("impl", IMPLS)
def test_bf16_ablation_matches_reference(impl):
    check(impl, 1, 2, 30, 30, 64, True, 0, torch.bfloat16, tol=2e-2, grad_tol=3e-2, mu="identity", no_delta=True)


@pytest.mark.parametrize("impl", IMPLS)
def test_bf16_gqa_matches_reference(impl):
    check(impl, 1, 4, 30, 30, 64, True, 0, torch.bfloat16, tol=2e-2, grad_tol=3e-2, n_kv_head=2)


@pytest.mark.parametrize("impl", IMPLS)
def test_fp16_matches_reference(impl):
    check(impl, 1, 2, 50, 50, 64, True, 0, torch.float16, tol=5e-3, grad_tol=1e-2)


def test_sdpa_any_head_dim():
    """The SDPA path takes head dims the Triton attention does not (MAESTRO's is 48)."""
    check("sdpa", 1, 2, 20, 20, 48, True, 0, torch.float32, tol=1e-5, grad_tol=1e-4)
    check("sdpa", 1, 2, 9, 20, 48, True, 11, torch.float32, tol=1e-5, grad_tol=1e-4)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mu,no_delta", [("softplus", False), ("relu", False), ("identity", False),
                                         ("softplus", True)])
def test_learnable_theta_gradient_matches_reference(mu, no_delta, impl):
    """theta a leaf that requires grad: the epilogue's dtheta (the position-weighted sums of the queries' and the
    keys' -dL/dphi) against autograd through the float64 reference; grouped kv heads, Tq < Tk with q_offset > 0,
    rows past a tile, each mu, with and without delta."""
    check(impl, 2, 4, 9, 20, 32, True, 11, torch.float32, tol=1e-5, grad_tol=1e-4, n_kv_head=2, mu=mu,
          no_delta=no_delta, learn_theta=True)


@pytest.mark.parametrize("impl", IMPLS)
def test_learnable_theta_far_positions_and_bf16(impl):
    """dtheta with queries at positions ~1e5 (the position weights large, in fp32 sums) and in bf16."""
    check(impl, 1, 2, 4, 24, 64, True, 100000, torch.float32, tol=1e-5, grad_tol=1e-4, learn_theta=True)
    check(impl, 1, 2, 30, 30, 64, True, 0, torch.bfloat16, tol=2e-2, grad_tol=3e-2, n_kv_head=1, learn_theta=True)


@pytest.mark.parametrize("learn", [False, True])
def test_theta_gradient_work_only_when_asked(learn, monkeypatch):
    """The epilogue is asked for dtheta only when theta requires grad (plain PoPE: its frequencies a buffer, no
    extra work, no gradient); and for ddelta only when delta requires grad."""
    asked = []
    backward = pope_kernel.cartesian_backward
    monkeypatch.setattr(pope_kernel, "cartesian_backward", lambda *a: asked.append(a[-2:]) or backward(*a))
    q, k, v, delta = (x.requires_grad_() for x in make_inputs(1, 2, 8, 8, 32, torch.float32))
    theta = pope_frequencies(32, device=DEVICE).float().requires_grad_(learn)
    fast(q, k, v, delta, theta=theta, impl="sdpa").sum().backward()
    assert asked == [(True, learn)] and (theta.grad is not None) == learn
    fast(q, k, v, delta.detach(), theta=theta.detach(), impl="sdpa").sum().backward()
    assert asked[1] == (False, False)


def test_kernel_files_import_nothing_from_model():
    """The kernel files stand alone: no import of model.py (pope_decode.py may take pope_kernel.py's names)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ("pope_kernel.py", "pope_decode.py", "ce_kernel.py"):
        tree = ast.parse(open(os.path.join(root, name)).read())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert "model" not in imported, name
        assert imported <= {"math", "os", "typing", "torch", "triton", "pope_kernel"}, (name, imported)


@pytest.mark.parametrize("impl", IMPLS)
def test_naive_loop(impl):
    """score[t, s] = sm_scale * sum_c softplus(q) softplus(k) cos((s - t) theta_c + delta_c), by hand."""
    B, H, Tq, Tk, d, q_offset, base = 1, 1, 3, 5, 32, 2, 500.0  # not the default base: it must reach the kernel
    q, k, v, delta = make_inputs(B, H, Tq, Tk, d, torch.float32, seed=7)
    out = fast(q, k, v, delta, causal=True, q_offset=q_offset, base=base, impl=impl).cpu()
    sp = lambda x: math.log1p(math.exp(x))
    q, k, v, delta = (x.cpu().double().tolist() for x in (q, k, v, delta))
    for t in range(Tq):
        pos = q_offset + t
        scores = []
        for s in range(pos + 1):
            a = sum(sp(q[0][0][t][c]) * sp(k[0][0][s][c]) * math.cos((s - pos) * base ** (-c / d) + delta[0][c])
                    for c in range(d))
            scores.append(a / math.sqrt(d))
        m = max(scores)
        w = [math.exp(x - m) for x in scores]
        o = [sum(w[s] * v[0][0][s][c] for s in range(len(w))) / sum(w) for c in range(d)]
        assert max(abs(o[c] - out[0, 0, t, c].item()) for c in range(d)) < 1e-5


@pytest.mark.parametrize("impl", IMPLS)
def test_large_positions_end_to_end(impl):
    """Queries at positions ~1e5 attending to keys at 0..23: relative phases of ~1e5 rad must stay exact."""
    check(impl, 1, 2, 4, 24, 64, True, 100000, torch.float32, tol=1e-5, grad_tol=1e-4)


def test_phase_table_precision():
    """The position table at p ~ 1e5 (and ~131072) is as accurate as at p ~ 10."""
    d, base = 64, 10000.0
    cos, sin = phase_table(pope_frequencies(d, base), 131100)
    assert cos.dtype == sin.dtype == torch.float32 and cos.is_contiguous() and sin.is_contiguous()
    theta = base ** (-torch.arange(d, dtype=torch.float64) / d)
    for p0 in (10, 100000, 131000):
        p = torch.arange(p0, p0 + 16, dtype=torch.float64)[:, None]
        err = max((cos[p0:p0 + 16].double() - (p * theta).cos()).abs().max().item(),
                  (sin[p0:p0 + 16].double() - (p * theta).sin()).abs().max().item())
        assert err < 1e-7, (p0, err)  # fp32 rounding of the value; a float32 angle would be off by ~4e-3
    # what the table avoids: the float32 angle itself at p = 1e5
    naive = (torch.tensor(100000.0) * theta.float()).cos().double()
    assert (naive - (100000.0 * theta).cos()).abs().max() > 1e-4


@pytest.mark.parametrize("time_major", [False, True])
def test_prologue_matches_polar_form(time_major):
    """q' = [mu cos phi, mu sin phi] with phi = (q_offset + t) theta - delta and k' with phi = s theta, against
    float64 by hand; k has fewer heads and more positions than q (grouped-query attention, a KV cache);
    laid out (B, T, heads, 2d) in memory if time_major."""
    q, k, _, delta = make_inputs(2, 3, 7, 50, 32, torch.float32, seed=5, n_kv_head=1)
    theta = pope_frequencies(32, device=DEVICE)
    qp, kp = pope_kernel.cartesian(q, k, delta, theta, *phase_table(theta, 50), 40, time_major, "softplus")
    assert qp.transpose(1, 2).is_contiguous() == time_major and qp.is_contiguous() != time_major
    polar = lambda x, phi: torch.cat([F.softplus(x.double()) * phi.cos(), F.softplus(x.double()) * phi.sin()], -1)
    pos = torch.arange(50, device=DEVICE, dtype=torch.float64)[:, None]
    want_q = polar(q, pos[40:47] * theta - delta.double()[:, None, :])
    assert rel_err(qp, want_q) < 1e-6 and rel_err(kp, polar(k, pos * theta)) < 1e-6


@pytest.mark.parametrize("impl, d", [("sdpa", 48), ("triton", 32)])  # q', k' time-major / contiguous
@pytest.mark.parametrize("blocks", [(4, 4), (16, 1)], ids=["tiles4x4", "tiles16x1"])
def test_prologue_tiles_run_past_heads_and_rows(blocks, impl, d, monkeypatch):
    """Prologue / epilogue tiles of BLOCK_T positions x BLOCK_H heads x d: head blocks that run past the heads
    (6 of 8), several time blocks per sequence, rows past T, d = 48 in a 64-wide tile, two sequences, grouped keys."""
    monkeypatch.setattr(pope_kernel, "BLOCK_T", blocks[0])
    monkeypatch.setattr(pope_kernel, "BLOCK_H", blocks[1])
    check(impl, 2, 6, 13, 21, d, True, 8, torch.float32, tol=1e-5, grad_tol=1e-4, n_kv_head=3)


@pytest.mark.parametrize("impl", IMPLS)
def test_noncontiguous_inputs(impl):
    """(B, T, H, d) storage viewed as (B, H, T, d), as model.py passes it."""
    q, k, v, delta = make_inputs(1, 2, 20, 20, 32, torch.float32, seed=3)
    qt, kt, vt = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v))
    assert not qt.is_contiguous()
    a = fast(qt, kt, vt, delta, impl=impl)
    b = fast(q, k, v, delta, impl=impl)
    assert torch.allclose(a, b)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", ["delta", "no_delta", "learn_theta"])
def test_torch_compile_one_graph(impl, case):
    """The ops are opaque to dynamo: one graph, no break at attention (the phase tables built inside); compiled
    grads equal eager ones, a learnable theta's among them."""
    q, k, v, delta = (x.requires_grad_() for x in make_inputs(1, 4, 16, 16, 32, torch.float32, n_kv_head=2))
    theta = pope_frequencies(32, device=DEVICE).float().requires_grad_(case == "learn_theta")
    attend = functools.partial(pope_kernel.pope_attention_fast, impl=impl)
    if case == "no_delta":  # the ablation: no delta, mu = relu(x)
        fn = lambda q, k, v: attend(q * 2, k, v, None, theta, mu="relu").square().sum()
        inputs = (q, k, v)
    else:
        fn = lambda q, k, v, delta, theta: attend(q * 2, k, v, delta.clamp(-2 * math.pi, 0), theta).square().sum()
        inputs = (q, k, v, delta, theta) if case == "learn_theta" else (q, k, v, delta)
        if case == "delta":
            fn = functools.partial(fn, theta=theta)
    explain = torch._dynamo.explain(fn)(*inputs)
    assert explain.graph_count == 1 and explain.graph_break_count == 0, explain.break_reasons
    eager = torch.autograd.grad(fn(*inputs), inputs)
    compiled = torch.autograd.grad(torch.compile(fn, backend="aot_eager", fullgraph=True)(*inputs), inputs)
    for a, b in zip(eager, compiled):
        assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("mu,no_delta,learn_theta", [("softplus", False, False), ("relu", True, True),
                                                     ("identity", False, True)])
def test_custom_op_registrations(time_major, mu, no_delta, learn_theta):
    """Schema, fake (meta) implementation (its strides too) and autograd registration of the prologue op, with a
    theta that requires grad (dtheta) or not."""
    q, k, delta = (torch.randn(*shape, device=DEVICE, requires_grad=True) for shape in ((1, 2, 5, 32), (1, 1, 9, 32),
                                                                                      (2, 32)))
    theta = pope_frequencies(32, device=DEVICE).float().requires_grad_(learn_theta)
    cos, sin = phase_table(theta.detach(), 9)
    torch.library.opcheck(torch.ops.pope.cartesian.default,
                          (q, k, None if no_delta else delta, theta, cos, sin, 3, time_major, mu))


@pytest.mark.parametrize("case", ["head_dim_triton", "head_dim_large", "dtype_mismatch", "ndim", "kv_shape",
                                  "tq_gt_tk", "delta_shape", "q_offset", "int_dtype", "kv_heads", "no_kv_heads",
                                  "impl", "impl_auto", "mu", "too_large", "theta_shape", "theta_dtype",
                                  "theta_device", "no_theta", "delta_type"])
def test_rejects_unsupported_input(case):
    q, k, v, delta = make_inputs(1, 2, 8, 8, 32, torch.float32)
    kw = {}
    if case == "head_dim_triton":
        q, k, v, delta = make_inputs(1, 2, 8, 8, 48, torch.float32)
        kw = dict(impl="triton")
    elif case == "head_dim_large":
        q, k, v, delta = make_inputs(1, 2, 8, 8, 512, torch.float32)
    elif case == "dtype_mismatch":
        k = k.half()
    elif case == "ndim":
        q = q[0]
    elif case == "kv_shape":
        v = v[:, :, :5]
    elif case == "tq_gt_tk":
        q = torch.cat([q, q], 2)
    elif case == "delta_shape":
        delta = delta[0]
    elif case == "int_dtype":
        q, k, v = (x.long() for x in (q, k, v))
    elif case == "kv_heads":
        q, k, v, delta = make_inputs(1, 4, 8, 8, 32, torch.float32, n_kv_head=3)
    elif case == "no_kv_heads":
        k, v = k[:, :0], v[:, :0]
    elif case == "impl":
        kw = dict(impl="flash")
    elif case == "impl_auto":  # the model, not the kernel, picks the path
        kw = dict(impl="auto")
    elif case == "delta_type":
        delta = delta.tolist()
    elif case == "mu":
        kw = dict(mu="gelu")
    elif case == "q_offset":
        kw = dict(q_offset=-1)
    elif case == "too_large":  # q' of 64 x 12 x 16384 x 256 bf16 (6.4 GB) is past 32-bit offsets; no memory on "meta"
        q, k, v = (torch.empty(64, 12, 16384, 128, dtype=torch.bfloat16, device="meta") for _ in range(3))
        delta = torch.empty(12, 128, device="meta")
    theta = pope_frequencies(q.shape[-1], device=q.device)
    thetas = {"theta_shape": theta[:31], "theta_dtype": torch.arange(32, device=DEVICE),
              "theta_device": theta.to("meta"), "no_theta": None}
    match = {"too_large": "q .* 32-bit", "theta_shape": r"theta must be the d frequencies, .* \(32,\); got",
             "theta_dtype": "theta must be the d frequencies", "theta_device": "all inputs must be on one device",
             "no_theta": "theta must be a torch.Tensor, got NoneType", "impl_auto": "impl='auto'; choose one of",
             "no_kv_heads": "empty input", "delta_type": r"delta must be a torch.Tensor, got list \(or None"
             }.get(case, "")
    with pytest.raises(ValueError, match="pope_attention_fast: " + match):
        pope_kernel.pope_attention_fast(q, k, v, delta, thetas.get(case, theta), **kw)


@pytest.mark.skipif(not pope_kernel.INTERPRET, reason="only meaningful on the CPU interpreter")
def test_rejects_cpu_tensor_without_interpreter(monkeypatch):
    monkeypatch.setattr(pope_kernel, "INTERPRET", False)
    q, k, v, delta = make_inputs(1, 1, 4, 4, 32, torch.float32)
    with pytest.raises(ValueError, match="CUDA"):
        fast(q, k, v, delta)


# -----------------------------------------------------------------------------
# The decoding kernel (pope::decode): one query a sequence over a cache of mu(k) and v, or of plain keys and v


def decode_reference(qp, mu_k, v, n, sm_scale, base=10000.0, phases=True):
    """Plain float64 decoding: k' = [mu_k cos(s theta), mu_k sin(s theta)] formed explicitly for every cache position
    (phases=False: the keys as given, k' = mu_k), kv heads repeated per query head, scores q' . k' * sm_scale, the
    positions >= n masked, softmax, @ v (on the inputs' device; returned on the CPU)."""
    qp, mu_k, v = (x.detach().double() for x in (qp, mu_k, v))
    L, d = mu_k.shape[2:]
    theta = base ** (-torch.arange(d, dtype=torch.float64, device=v.device) / d)
    phi = torch.arange(L, dtype=torch.float64, device=v.device)[:, None] * theta
    g = qp.shape[1] // mu_k.shape[1]
    kp = torch.cat([mu_k * phi.cos(), mu_k * phi.sin()], -1) if phases else mu_k
    kp = kp.repeat_interleave(g, 1)  # (B, H, L, 2d or d)
    att = (kp @ qp[..., None])[..., 0] * sm_scale  # (B, H, L)
    att[..., n:] = float("-inf")
    return (att.softmax(-1)[..., None, :] @ v.repeat_interleave(g, 1))[..., 0, :].cpu()


def decode_inputs(B, H, Hkv, L, d, dtype, seed=0):
    """q' as the model forms it (mu(q) e^{i phi}, delta in phi), mu(k) = softplus(k) >= 0, v; mu_k, v in dtype."""
    g = torch.Generator().manual_seed(seed)
    mu_q, phi = torch.nn.functional.softplus(torch.randn(B, H, d, generator=g)), torch.rand(B, H, d, generator=g) * 50
    qp = torch.cat([mu_q * phi.cos(), mu_q * phi.sin()], -1)
    mu_k = torch.nn.functional.softplus(torch.randn(B, Hkv, L, d, generator=g)).to(dtype)
    v = torch.randn(B, Hkv, L, d, generator=g).to(dtype)
    return [x.to(DEVICE) for x in (qp, mu_k, v)]


@pytest.mark.parametrize("B,H,Hkv,L,d,n", [
    (2, 4, 2, 150, 16, 64),  # n at a tile boundary, L not a multiple of the tile, grouped-query attention
    (2, 4, 2, 150, 16, 100),  # n inside a tile
    (1, 4, 2, 150, 32, 1),  # the first step: one visible position
    (2, 4, 4, 130, 32, 130),  # every position visible, the last tile ragged
    (1, 2, 1, 4100, 16, 4097),  # positions past 4096: the per-tile rotation of the query at large angles
])
@pytest.mark.parametrize("one_split", [False, True])
def test_decode_matches_reference(B, H, Hkv, L, d, n, one_split, monkeypatch):
    """pope::decode against the float64 reference on fresh inputs, float32 cache: the splits that decode_splits picks
    (several, some past n and empty), and one split that runs its online softmax over every tile."""
    if one_split:
        monkeypatch.setattr(pope_decode, "MIN_PROGRAMS", 1)
    assert (pope_decode.decode_splits(B, H, L) == 1) == one_split or L <= pope_decode.DECODE_BLOCK
    qp, mu_k, v = decode_inputs(B, H, Hkv, L, d, torch.float32, seed=L + n + d)
    t1, t2 = pope_decode.decode_tables(pope_frequencies(d, device=DEVICE), L)
    out = pope_decode.decode(qp, mu_k, v, torch.tensor([n], device=DEVICE), t1, t2, 1 / math.sqrt(d))
    assert out.shape == (B, H, d) and out.dtype == v.dtype
    ref = decode_reference(qp, mu_k, v, n, 1 / math.sqrt(d))
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("B,H,Hkv,L,d,n", [(2, 4, 2, 150, 16, 100), (1, 4, 4, 130, 64, 130), (1, 2, 1, 70, 32, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_plain_keys_match_reference(B, H, Hkv, L, d, n, dtype):
    """Without tables pope::decode is plain decoding (RoPE's step, its keys already rotated): the query d wide,
    scores q . k; against the float64 reference on fresh signed keys, grouped heads, a ragged tail, one position."""
    g = torch.Generator().manual_seed(L + n + d)
    q, k, v = (torch.randn(*shape, generator=g).to(DEVICE) for shape in ((B, H, d), (B, Hkv, L, d), (B, Hkv, L, d)))
    q, k, v = (x.to(dtype) for x in (q, k, v))
    out = pope_decode.decode(q, k, v, torch.tensor([n], device=DEVICE), None, None, 1 / math.sqrt(d))
    assert out.shape == (B, H, d) and out.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(out.double().cpu(), decode_reference(q, k, v, n, 1 / math.sqrt(d), phases=False),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("q_dtype", [torch.float32, torch.bfloat16])
def test_decode_bf16_cache(q_dtype):
    """A bf16 cache (as on the GPU) and a float32 q' (the model's) or a bf16 one: the kernel computes in float32 on
    the values given, the output in bf16 (rounding ~4e-3)."""
    qp, mu_k, v = decode_inputs(2, 4, 2, 200, 32, torch.bfloat16, seed=5)
    qp = qp.to(q_dtype)
    t1, t2 = pope_decode.decode_tables(pope_frequencies(32, device=DEVICE), 200)
    out = pope_decode.decode(qp, mu_k, v, torch.tensor([170], device=DEVICE), t1, t2, 1 / math.sqrt(32))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double().cpu(), decode_reference(qp, mu_k, v, 170, 1 / math.sqrt(32)), rtol=1e-2,
                               atol=1e-2)


def test_decode_tables_of_a_learnable_theta_hold_no_graph():
    """decode_tables detaches theta: the tables of a learnable theta (a fork's, docs/encodings.md) are data, as the
    cache they are read with, and the model passes its theta as it is."""
    t1, t2 = pope_decode.decode_tables(pope_frequencies(16, device=DEVICE).requires_grad_(), 40)
    assert not t1.requires_grad and not t2.requires_grad


@pytest.mark.skipif(pope_kernel.INTERPRET, reason="long caches: on a GPU only (too slow for the interpreter)")
@pytest.mark.parametrize("d", [64, 128])
def test_decode_long_bf16_cache_on_gpu(d):
    """The 124M model's decoding shapes (batch 8, 12 heads) over a 32k bf16 cache, n inside a tile; and grouped
    heads at batch 1 (many splits)."""
    for B, H, Hkv, n in ((8, 12, 12, 30001), (1, 12, 4, 32768)):
        qp, mu_k, v = decode_inputs(B, H, Hkv, 32768, d, torch.bfloat16, seed=d + B)
        t1, t2 = pope_decode.decode_tables(pope_frequencies(d, device=DEVICE), 32768)
        out = pope_decode.decode(qp, mu_k, v, torch.tensor([n], device=DEVICE), t1, t2, 1 / math.sqrt(d))
        ref = decode_reference(qp, mu_k, v, n, 1 / math.sqrt(d))
        torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-2, atol=1e-2)


def test_decode_reads_no_position_past_n():
    """Garbage (huge finite values) in the cache past n changes nothing; an n past the cache's length reads the whole
    cache and no further (n is never read on the host, so it cannot be refused there)."""
    qp, mu_k, v = decode_inputs(1, 2, 2, 150, 16, torch.float32)
    t1, t2 = pope_decode.decode_tables(pope_frequencies(16, device=DEVICE), 150)
    whole = pope_decode.decode(qp, mu_k[:, :, :100], v[:, :, :100], torch.tensor([100], device=DEVICE), t1, t2, 0.25)
    past = pope_decode.decode(qp, mu_k[:, :, :100], v[:, :, :100], torch.tensor([140], device=DEVICE), t1, t2, 0.25)
    assert torch.equal(whole, past)  # (a view of the first 100 positions: the next 40 are real memory)
    n = torch.tensor([70], device=DEVICE)
    a = pope_decode.decode(qp, mu_k, v, n, t1, t2, 0.25)
    mu_k[:, :, 70:], v[:, :, 70:] = 1e4, 1e4
    assert torch.equal(a, pope_decode.decode(qp, mu_k, v, n, t1, t2, 0.25))


def test_decode_custom_op():
    """Schema and fake implementation of pope::decode, and one graph with no break under torch.compile."""
    qp, mu_k, v = decode_inputs(1, 4, 2, 80, 16, torch.float32)
    t1, t2 = pope_decode.decode_tables(pope_frequencies(16, device=DEVICE), 80)
    n = torch.tensor([75], device=DEVICE)
    torch.library.opcheck(torch.ops.pope.decode.default, (qp, mu_k, v, n, t1, t2, 0.25))
    fn = lambda qp, mu_k, v, n: pope_decode.decode(qp * 2, mu_k, v, n, t1, t2, 0.25)  # noqa: E731
    explain = torch._dynamo.explain(fn)(qp, mu_k, v, n)
    assert explain.graph_count == 1 and explain.graph_break_count == 0, explain.break_reasons
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)(qp, mu_k, v, n)
    assert torch.equal(compiled, fn(qp, mu_k, v, n))


@pytest.mark.parametrize("case", ["head_dim", "width", "plain_width", "one_table", "n", "tables", "dtype"])
def test_decode_rejects_unsupported_input(case):
    qp, mu_k, v = decode_inputs(1, 2, 1, 70, 16, torch.float32)
    t1, t2 = pope_decode.decode_tables(pope_frequencies(16, device=DEVICE), 70)
    n = torch.tensor([3], device=DEVICE)
    if case == "head_dim":
        qp, mu_k, v = decode_inputs(1, 2, 1, 70, 24, torch.float32)
    elif case == "width":
        qp = qp[..., :16].contiguous()
    elif case == "plain_width":  # q' (2d wide) with no tables: plain keys want a d-wide query
        t1, t2 = None, None
    elif case == "one_table":
        t2 = None
    elif case == "n":
        n = torch.tensor([3.0], device=DEVICE)
    elif case == "tables":
        t1, t2 = pope_decode.decode_tables(pope_frequencies(16, device=DEVICE), 64)
    else:
        v = v.double()
    with pytest.raises(ValueError, match="pope decode"):
        pope_decode.decode(qp, mu_k, v, n, t1, t2, 0.25)
