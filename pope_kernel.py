"""
PoPE attention (Polar Coordinate Positional Embeddings, arXiv 2509.10534) at the speed of ordinary
attention, model.pope_attention_reference's function. For head h, query t (at position q_offset +
t), key s and frequency c = 0..d-1, with mu = softplus (or the ablations relu, identity):

    q' = [mu(q) cos phi_q, mu(q) sin phi_q]    phi_q = (q_offset + t) theta - delta[h]   (2d wide)
    k' = [mu(k) cos phi_k, mu(k) sin phi_k]    phi_k = s theta                           (2d wide)
    score[t, s] = sm_scale q' . k' = sm_scale sum_c mu(q) mu(k) cos((s - t) theta_c + delta_c)
    out = softmax(score, causally masked) @ v

pope_attention_fast runs custom ops, one opaque node each for torch.compile: the prologue
pope::cartesian forms q', k'; attention is SDPA's (impl='sdpa', any d) or pope::flash_attention's
(impl='triton': FlashAttention-2 in Triton, d 32, 64, 128); the epilogue pope::cartesian_backward
gives dq, dk, ddelta and dtheta. Speed: results/kernel/README.md.
"""

import math
import os
from typing import Optional

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
# the CPU interpreter has exact log2, cos, sin and division only, and its tl.dot reads bf16 as raw
# integers; the GPU's fast ones in the prologue / epilogue err by ~5e-7, far below bf16's 4e-3
ON_CPU = tl.constexpr(INTERPRET)
IMPLS = ("sdpa", "triton")
MUS = ("softplus", "relu", "identity")  # the magnitude mu(x): PoPE's, and the paper's ablations
TRITON_HEAD_DIMS, MAX_HEAD_DIM = (32, 64, 128), 256  # the all-Triton attention's d; the sdpa path's
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LN2, LOG2E = tl.constexpr(0.6931471805599453), tl.constexpr(1.4426950408889634)  # (for kernels)


def pope_attention_fast(q, k, v, delta, theta, *, causal=True, sm_scale=None, q_offset=0,
                        impl="sdpa", mu="softplus"):
    """q (B, H, Tq, d); k, v (B, Hkv, Tk, d), query head h reading kv head h // (H / Hkv); delta
    (H, d) used as given (clamp it before) or None; theta (d,) -> (B, H, Tq, d) in v's dtype. Query
    i sits at position q_offset + i, key s at s (causal: s <= q_offset + i visible). sm_scale:
    1/sqrt(d) by default. Differentiable in q, k, v, delta and theta."""
    if hasattr(q_offset, "__index__") and not isinstance(q_offset, bool):
        q_offset = int(q_offset)
    if not torch.compiler.is_compiling():  # (eager calls; a compiled graph keeps no checks)
        _check_inputs(q, k, v, delta, theta, q_offset, impl, mu)
    (H, Tq, d), Tk = q.shape[1:], k.shape[2]
    sm_scale = 1.0 / math.sqrt(d) if sm_scale is None else float(sm_scale)
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    delta = None if delta is None else delta.contiguous()  # (read as H rows of d)
    cos, sin = phase_table(theta.detach(), max(Tk, q_offset + Tq))  # (theta's grad: the epilogue's)
    # q', k' time-major for cuDNN (its output then needs no copy), contiguous for the Triton kernels
    qp, kp = cartesian(q, k, delta, theta, cos, sin, q_offset, impl == "sdpa", mu)
    if impl == "triton":
        return flash_attention(qp, kp, v, bool(causal), sm_scale, q_offset)[0]
    # grouped k', v copied per query head (faster than SDPA's enable_gqa: bench_attention.py)
    kp, v = (x if x.shape[1] == H else x.repeat_interleave(H // x.shape[1], 1) for x in (kp, v))
    mask = {}  # (none where every query sees every key; SDPA's is_causal is top-left aligned)
    if causal and q_offset == 0 and Tq == Tk:
        mask = {"is_causal": True}
    elif causal and q_offset < Tk - 1:
        pos = torch.arange(max(Tk, q_offset + Tq), device=q.device)
        mask = {"attn_mask": pos[None, :Tk] <= pos[q_offset:q_offset + Tq, None]}
    return F.scaled_dot_product_attention(qp, kp, v, scale=sm_scale, **mask)


def phase_table(theta, n):
    """cos and sin of the phases p theta of positions p = 0..n-1, (n, d) each: computed in float64
    (a float32 angle near 1e5 rad is off by up to 0.008 rad), stored float32, contiguous."""
    phi = torch.arange(n, dtype=torch.float64, device=theta.device)[:, None] * theta.double()
    return phi.cos().float().contiguous(), phi.sin().float().contiguous()


def _check_inputs(q, k, v, delta, theta, q_offset, impl, mu):
    for name, x in dict(q=q, k=k, v=v, theta=theta, delta=delta).items():
        if not isinstance(x, torch.Tensor) and not (name == "delta" and x is None):
            raise ValueError(f"pope_attention_fast: {name} must be a torch.Tensor, got "
                             f"{type(x).__name__}" + " (or None: no delta)" * (name == "delta"))
    tensors = dict(q=q, k=k, v=v, theta=theta) | ({} if delta is None else dict(delta=delta))
    shape = {name: tuple(x.shape) for name, x in tensors.items()}
    devices = [str(x.device) for x in tensors.values()]
    refuse("pope_attention_fast", [
        (impl not in IMPLS, "impl={impl!r}; choose one of {IMPLS}"),
        (mu not in MUS, "mu={mu!r}; choose one of {MUS}"),
        (q.dim() != 4 or k.dim() != 4 or v.dim() != 4,
         "q, k, v must be 4-d (B, H, T, d); got shapes {shape[q]}, {shape[k]}, {shape[v]}")],
        locals())
    (B, H, Tq, d), (Hkv, Tk) = q.shape, k.shape[1:3]
    n = max(Tk, q_offset + Tq) if isinstance(q_offset, int) else 0  # positions read
    span = lambda x: sum((size - 1) * st for size, st in zip(x.shape, x.stride())) + 1  # elements
    refuse("pope_attention_fast", [
        (not 1 <= d <= MAX_HEAD_DIM or impl == "triton" and d not in TRITON_HEAD_DIMS, "head dim "
         "d={d}: impl 'triton' takes d in {TRITON_HEAD_DIMS}, 'sdpa' 1 <= d <= {MAX_HEAD_DIM}"),
        (k.shape != (B, Hkv, Tk, d) or v.shape != k.shape, "k and v must share one shape ({B}, "
         "n_kv_head, Tk, {d}) for q {shape[q]}; got k {shape[k]}, v {shape[v]}"),
        (min(B, H, Hkv, Tq, Tk) < 1, "empty input: q {shape[q]}, k {shape[k]}"),
        (H % max(Hkv, 1), "n_kv_head={Hkv} (k, v) must divide the {H} query heads"),
        (Tq > Tk, "Tq={Tq} > Tk={Tk}: there must be at least as many keys as queries"),
        (delta is not None and (delta.shape != (H, d) or not delta.is_floating_point()),
         "delta must be a floating tensor of shape ({H}, {d}); got {delta.dtype} {shape[delta]}"),
        (theta.shape != (d,) or not theta.is_floating_point(), "theta must be the d frequencies, "
         "a floating tensor of shape ({d},); got {theta.dtype} {shape[theta]}"),
        (q.dtype not in DTYPES or q.dtype != k.dtype or q.dtype != v.dtype,
         "q, k, v must share one dtype among {DTYPES}; got {q.dtype}, {k.dtype}, {v.dtype}"),
        (max(2 * q.numel(), 2 * k.numel(), span(q), span(k), span(v)) >= 2**31, "q {shape[q]}, "
         "k {shape[k]}: q', k' and the inputs are addressed with 32-bit offsets: split the batch"),
        (len(set(devices)) != 1, "all inputs must be on one device, got {devices}"),
        (q.device.type != "cuda" and not INTERPRET, "inputs on {q.device} need a CUDA device (or "
         "TRITON_INTERPRET=1 for the slow CPU interpreter)"),
        (not isinstance(q_offset, int) or q_offset < 0, "q_offset={q_offset!r}: need an int >= 0"),
        (n > 2**24, "positions up to 2**24 are supported")], locals())


def refuse(who, checks, names):
    """Raises ValueError("who: " the first message of checks whose condition holds), formatted from
    names then only (a string made of a traced shape would fix that shape under torch.compile)."""
    for bad, why in checks:
        if bad:
            raise ValueError(f"{who}: " + why.format_map({**globals(), **names}))


# -----------------------------------------------------------------------------
# Custom ops (opaque to torch.compile; no host sync, the same allocations each time: CUDA graphs)


@torch.library.custom_op("pope::cartesian", mutates_args=())
def cartesian(q: torch.Tensor, k: torch.Tensor, delta: Optional[torch.Tensor], theta: torch.Tensor,
              cos: torch.Tensor, sin: torch.Tensor, q_offset: int, time_major: bool,
              mu: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The prologue: q' (B, H, Tq, 2d) and k' (B, Hkv, Tk, 2d) in q's dtype, laid out (B, T, heads,
    2d) if time_major; cos, sin: theta's phase_table (theta is read by the backward alone)."""
    qp, kp = _cartesian_empty(q, k, delta, theta, cos, sin, q_offset, time_major, mu)
    _prologue_epilogue(q, qp, None, cos, sin, delta, None, None, q_offset, mu)
    _prologue_epilogue(k, kp, None, cos, sin, None, None, None, 0, mu)
    return qp, kp


@cartesian.register_fake
def _cartesian_empty(q, k, delta, theta, cos, sin, q_offset, time_major, mu):
    if time_major:  # (B, T, heads, 2d) storage seen as (B, heads, T, 2d)
        return tuple(x.new_empty((x.shape[0], x.shape[2], x.shape[1], 2 * x.shape[3]))
                     .transpose(1, 2) for x in (q, k))
    return tuple(x.new_empty((*x.shape[:3], 2 * x.shape[3])) for x in (q, k))


@torch.library.custom_op("pope::cartesian_backward", mutates_args=())
def cartesian_backward(dqp: torch.Tensor, dkp: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                       delta: Optional[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor,
                       q_offset: int, mu: str, ddelta: bool, dtheta: bool
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The epilogue: dq, dk laid out (B, T, heads, d) as the model's q, k (views of one projection:
    their gradient joins it by a plain copy); if asked (else empty), float32 ddelta (H, d) = sum g_q
    and dtheta (d,) = -(sum (q_offset + t) g_q + sum s g_k), g = -dL/dphi, of per-tile sums."""
    dqp, dkp = (g if g.stride(-1) == 1 else g.contiguous() for g in (dqp, dkp))  # (SDPA's: any)
    dq, dk, no_ddelta, no_dtheta = _backward_empty(dqp, dkp, q, k, delta, cos, sin, q_offset, mu,
                                                   False, False)
    rows = lambda x: (triton.cdiv(x.shape[2], BLOCK_T), x.shape[0], x.shape[1], x.shape[3])
    dd = q.new_empty(rows(q), dtype=torch.float32) if ddelta else None
    dtq, dtk = (x.new_empty(rows(x), dtype=torch.float32) if dtheta else None for x in (q, k))
    _prologue_epilogue(q, dqp, dq, cos, sin, delta, dd, dtq, q_offset, mu)
    _prologue_epilogue(k, dkp, dk, cos, sin, None, None, dtk, 0, mu)
    return (dq, dk, dd.sum((0, 1)) if ddelta else no_ddelta,
            -(dtq.sum((0, 1, 2)) + dtk.sum((0, 1, 2))) if dtheta else no_dtheta)


@cartesian_backward.register_fake
def _backward_empty(dqp, dkp, q, k, delta, cos, sin, q_offset, mu, ddelta, dtheta):
    (B, H, Tq, d), (Hkv, Tk) = q.shape, k.shape[1:3]
    return (q.new_empty((B, Tq, H, d)).transpose(1, 2),
            k.new_empty((B, Tk, Hkv, d)).transpose(1, 2),
            q.new_empty((H, d) if ddelta else 0, dtype=torch.float32),
            q.new_empty(d if dtheta else 0, dtype=torch.float32))


def _cartesian_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:6])  # q, k, delta, theta, cos, sin
    ctx.q_offset, ctx.mu = inputs[6], inputs[8]


def _cartesian_grad(ctx, dqp, dkp):
    q, k, delta, theta, cos, sin = ctx.saved_tensors
    want_ddelta, want_dtheta = ctx.needs_input_grad[2:4]  # (a theta without grad: no work)
    dq, dk, ddelta, dtheta = cartesian_backward(dqp, dkp, q, k, delta, cos, sin, ctx.q_offset,
                                                ctx.mu, want_ddelta, want_dtheta)
    return (dq, dk, ddelta.to(delta.dtype) if want_ddelta else None,
            dtheta.to(theta.dtype) if want_dtheta else None, None, None, None, None, None)


cartesian.register_autograd(_cartesian_grad, setup_context=_cartesian_setup)


def _prologue_epilogue(x, xp, dx, cos, sin, delta, dd, dt, pos0, mu):
    # x (B, heads, T, d) -> x' (dx None), or dx' in xp -> dx and the partial sums dd, dt if given
    B, heads, T, d = x.shape
    grid = (triton.cdiv(T, BLOCK_T), triton.cdiv(heads, BLOCK_H), B)
    _cartesian[grid](x, xp, dx, cos, sin, delta, dd, dt, *x.stride()[:3], *xp.stride()[:3], heads,
                     T, pos0, d=d, BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H,
                     BLOCK_D=triton.next_power_of_2(d), MU=mu, num_warps=WARPS)


@torch.library.custom_op("pope::flash_attention", mutates_args=())
def flash_attention(qp: torch.Tensor, kp: torch.Tensor, v: torch.Tensor, causal: bool,
                    sm_scale: float, q_offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2 forward on q' (B, H, Tq, 2d), k' (B, Hkv, Tk, 2d), v (B, Hkv, Tk, d), q', k'
    contiguous: (out (B, H, Tq, d) in v's dtype, base-2 log-sum-exp (B, H, Tq) fp32)."""
    o, lse = _attention_empty(qp, kp, v, causal, sm_scale, q_offset)
    _attend("fwd", qp, kp, v, o, lse, None, None, None, None, causal, sm_scale, q_offset)
    return o, lse


@flash_attention.register_fake
def _attention_empty(qp, kp, v, causal, sm_scale, q_offset):
    B, H, Tq = qp.shape[:3]
    return v.new_empty((B, H, Tq, v.shape[3])), v.new_empty((B, H, Tq), dtype=torch.float32)


@torch.library.custom_op("pope::flash_attention_backward", mutates_args=())
def flash_attention_backward(do: torch.Tensor, qp: torch.Tensor, kp: torch.Tensor, v: torch.Tensor,
                             o: torch.Tensor, lse: torch.Tensor, causal: bool, sm_scale: float,
                             q_offset: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq', dk', dv (dk', dv summed over each kv head's group of query heads)."""
    D = torch.empty_like(lse)  # FlashAttention-2's D = rowsum(dO * O), of the dq' pass
    dqp, dkp, dv = _attention_backward_empty(do, qp, kp, v, o, lse, causal, sm_scale, q_offset)
    _attend("dq", qp, kp, v, o, lse, do, D, dqp, None, causal, sm_scale, q_offset)
    _attend("dkdv", qp, kp, v, o, lse, do, D, dkp, dv, causal, sm_scale, q_offset)
    return dqp, dkp, dv


@flash_attention_backward.register_fake
def _attention_backward_empty(do, qp, kp, v, o, lse, causal, sm_scale, q_offset):
    return torch.empty_like(qp), torch.empty_like(kp), v.new_empty((*kp.shape[:3], v.shape[3]))


def _attention_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3], *output)  # q', k', v, o, lse
    ctx.args = inputs[3:]  # causal, sm_scale, q_offset


def _attention_grad(ctx, do, dlse):
    qp, kp, v, o, lse = ctx.saved_tensors
    do = do if do.stride(-1) == 1 else do.contiguous()
    return *flash_attention_backward(do, qp, kp, v, o, lse, *ctx.args), None, None, None


flash_attention.register_autograd(_attention_grad, setup_context=_attention_setup)


# -----------------------------------------------------------------------------
# Prologue and epilogue, elementwise: a program takes a (BLOCK_T, BLOCK_H, BLOCK_D) tile (positions
# x heads x d) of one sequence; its rows of d numbers load and store as vectors, the tables' once.


@triton.jit
def _mu(x, MU: tl.constexpr):
    # mu(x) and mu'(x); softplus log(1 + e^x) = max(x, 0) + log(1 + e^-|x|), its derivative the
    # sigmoid, in base 2 for the fast special-function units
    if MU == "softplus":
        y = 1.0 + tl.exp2(-tl.abs(x) * LOG2E)
        log2_y = tl.log2(y) if ON_CPU else libdevice.fast_log2f(y)
        one = tl.full(x.shape, 1.0, tl.float32)
        sigmoid = tl.fdiv(one, 1.0 + tl.exp2(-x * LOG2E), ieee_rounding=False)
        return tl.maximum(x, 0.0) + LN2 * log2_y, sigmoid
    elif MU == "relu":
        return tl.maximum(x, 0.0), tl.where(x > 0.0, 1.0, 0.0)  # (0 at x = 0, as torch's relu)
    else:
        return x, tl.full(x.shape, 1.0, tl.float32)


@triton.jit(do_not_specialize=["T", "pos0"])
def _cartesian(X, XP, DX, COS, SIN, DELTA, DDELTA_PART, DTHETA_PART, stride_xz, stride_xh,
               stride_xt, stride_pz, stride_ph, stride_pt, heads, T, pos0, d: tl.constexpr,
               BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
               MU: tl.constexpr):
    # x' = [mu cos phi, mu sin phi] into XP, phi = (pos0 + t) theta_c (- delta[h, c]); with DX: dx =
    # (dX cos phi + dY sin phi) mu'(x) of dx' = [dX, dY] in XP, stored (B, T, heads, d), and the
    # tile's sums over positions of g = mu (dX sin phi - dY cos phi) = -dL/dphi and of pos g
    b = tl.program_id(2).to(tl.int64)
    t = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T))[:, None, None]
    h = (tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H))[None, :, None]
    c = tl.arange(0, BLOCK_D)[None, None, :]
    keep = (t < T) & (h < heads) & (c < d)
    x = tl.load(X + b * stride_xz + h * stride_xh + t * stride_xt + c, mask=keep, other=0.0)
    x = x.to(tl.float32)
    cos_phi = tl.load(COS + (pos0 + t) * d + c, mask=(t < T) & (c < d), other=0.0)  # (T, 1, d)
    sin_phi = tl.load(SIN + (pos0 + t) * d + c, mask=(t < T) & (c < d), other=0.0)
    if DELTA is not None:  # cos(a - delta) = cos a cos delta + sin a sin delta, sin likewise
        delta = tl.load(DELTA + h * d + c, mask=(h < heads) & (c < d), other=0.0).to(tl.float32)
        cos_delta = tl.cos(delta) if ON_CPU else libdevice.fast_cosf(delta)  # (delta in [-2pi, 0])
        sin_delta = tl.sin(delta) if ON_CPU else libdevice.fast_sinf(delta)
        cos_phi, sin_phi = (cos_phi * cos_delta + sin_phi * sin_delta,
                            sin_phi * cos_delta - cos_phi * sin_delta)
    xp = XP + b * stride_pz + h * stride_ph + t * stride_pt + c
    mu, dmu_dx = _mu(x, MU)
    if DX is not None:
        dX = tl.load(xp, mask=keep, other=0.0).to(tl.float32)
        dY = tl.load(xp + d, mask=keep, other=0.0).to(tl.float32)
        dx = (dX * cos_phi + dY * sin_phi) * dmu_dx
        tl.store(DX + ((b * T + t) * heads + h) * d + c, dx.to(DX.dtype.element_ty), mask=keep)
        g = mu * (dX * sin_phi - dY * cos_phi)  # zero outside `keep` (dX, dY are 0 there)
        row = (tl.program_id(0) * tl.num_programs(2) + b) * heads * d + h * d + c
        if DDELTA_PART is not None:
            tl.store(DDELTA_PART + row, tl.sum(g, 0)[None, :, :], mask=(h < heads) & (c < d))
        if DTHETA_PART is not None:  # (positions below 2**24: exact in fp32)
            pos_g = (pos0 + t).to(tl.float32) * g
            tl.store(DTHETA_PART + row, tl.sum(pos_g, 0)[None, :, :], mask=(h < heads) & (c < d))
    else:
        tl.store(xp, (mu * cos_phi).to(XP.dtype.element_ty), mask=keep)
        tl.store(xp + d, (mu * sin_phi).to(XP.dtype.element_ty), mask=keep)


# -----------------------------------------------------------------------------
# The all-Triton attention on q', k' (2d wide) and v (d wide), in the structure and names of the
# Triton fused-attention tutorial (FlashAttention-2), apart from: ragged lengths (masked tails);
# queries at q_offset > 0 among Tk >= Tq keys (a KV cache); grouped-query attention, dk' and dv
# summed over a kv head's query heads in one program; the forward's kernel computes dq' too (DQ);
# fp32 inputs get true fp32 dots; no TMA, warp specialisation or fp8. Scores are kept in base 2
# (qk_scale = sm_scale log2(e)) so the softmax uses exp2; LSE is a row's base-2 log-sum-exp.


@triton.jit
def _dot(a, b, acc, FP32: tl.constexpr):
    # fp32 inputs get true fp32 products (no tf32), half inputs bf16/fp16 tensor-core dots
    if ON_CPU:
        a, b = a.to(tl.float32), b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision="ieee" if FP32 else None)


@triton.jit
def _load_rows(ptr, offs, offs_d, stride, n, MASK: tl.constexpr):
    # a (len(offs), len(offs_d)) tile of rows offs; rows >= n read as 0 when MASK
    return _load(ptr + offs[:, None] * stride + offs_d[None, :], (offs < n)[:, None], MASK)


@triton.jit
def _load(ptrs, ok, MASK: tl.constexpr):
    # entries where not ok read as 0, if MASK
    return tl.load(ptrs, mask=ok, other=0.0) if MASK else tl.load(ptrs)


@triton.jit
def _causal_keep(offs_m, offs_s, Tk, q_offset, CAUSAL: tl.constexpr):
    # (BLOCK_M, BLOCK_N): key s is visible to query row i (a real key, s <= q_offset + i if causal);
    # rows past Tq read zeros and are never stored, and every row sees key 0 (no all -inf row)
    keep = (offs_s < Tk)[None, :]
    if CAUSAL:
        keep = keep & (offs_s[None, :] <= q_offset + offs_m[:, None])
    return keep


@triton.jit(do_not_specialize=["Tq", "Tk", "q_offset"])
def _attn_fwd(Q, K, V, O, LSE, DO, D, DQ, DV, stride_vz, stride_vh, stride_vk, stride_doz,
              stride_doh, stride_dom, H, G, Tq, Tk, q_offset, sm_scale, qk_scale,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, FP32: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # a query block of a head: out O and LSE; with DQ (the backward), D = rowsum(dO * O) (for the
    # dk', dv pass after this one) and dq' (DV: unread)
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)  # the heaviest (last) causal blocks first
    bh = tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    K += (b * (H // G) + h // G) * Tk * 2 * HEAD_DIM  # the kv head of query head h
    V += b * stride_vz + (h // G) * stride_vh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_qk, offs_d = tl.arange(0, 2 * HEAD_DIM), tl.arange(0, HEAD_DIM)
    row_ok = offs_m < Tq
    q = _load_rows(Q + bh * Tq * 2 * HEAD_DIM, offs_m, offs_qk, 2 * HEAD_DIM, Tq, True)
    if DQ is not None:  # m_i, l_i: the rows' LSE and D
        do = _load_rows(DO + b * stride_doz + h * stride_doh, offs_m, offs_d, stride_dom, Tq, True)
        o = _load_rows(O + bh * Tq * HEAD_DIM, offs_m, offs_d, HEAD_DIM, Tq, True)
        m_i = tl.load(LSE + bh * Tq + offs_m, mask=row_ok, other=0.0)
        l_i = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
        tl.store(D + bh * Tq + offs_m, l_i, mask=row_ok)
        acc = tl.zeros([BLOCK_M, 2 * HEAD_DIM], tl.float32)
    else:  # the online softmax's running max, sum and output
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # key tiles [0, full) need no mask, [full, hi) one; none after
    full, hi = Tk // BLOCK_N * BLOCK_N, Tk
    if CAUSAL:  # keys 0..p0 are visible to every row, p0 the position of the first
        p0 = q_offset + start_m * BLOCK_M
        full, hi = tl.minimum((p0 + 1) // BLOCK_N * BLOCK_N, full), tl.minimum(Tk, p0 + BLOCK_M)
    bounds = (0, full, hi)
    for MASK in tl.static_range(2):
        for start_n in range(bounds[MASK], bounds[MASK + 1], BLOCK_N):
            offs_s = start_n + tl.arange(0, BLOCK_N)
            k = _load_rows(K, offs_s, offs_qk, 2 * HEAD_DIM, Tk, MASK)
            v = _load_rows(V, offs_s, offs_d, stride_vk, Tk, MASK)
            qk = _dot(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), FP32) * qk_scale
            if MASK:
                qk = tl.where(_causal_keep(offs_m, offs_s, Tk, q_offset, CAUSAL), qk, float("-inf"))
            if DQ is not None:
                p = tl.exp2(qk - m_i[:, None])
                dp = _dot(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), FP32)
                acc = _dot((p * (dp - l_i[:, None])).to(k.dtype), k, acc, FP32)
            else:
                m_new = tl.maximum(m_i, tl.max(qk, 1))
                p = tl.exp2(qk - m_new[:, None])
                alpha = tl.exp2(m_i - m_new)
                l_i = l_i * alpha + tl.sum(p, 1)
                acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], FP32)
                m_i = m_new
    if DQ is not None:
        tl.store(DQ + bh * Tq * 2 * HEAD_DIM + offs_m[:, None] * 2 * HEAD_DIM + offs_qk[None, :],
                 (acc * sm_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])
    else:  # every row sees key 0, so l_i > 0; rows >= Tq are never stored
        tl.store(LSE + bh * Tq + offs_m, m_i + tl.log2(l_i), mask=row_ok)
        tl.store(O + bh * Tq * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                 (acc / l_i[:, None]).to(O.dtype.element_ty), mask=row_ok[:, None])


@triton.jit(do_not_specialize=["Tq", "Tk", "q_offset", "G"])
def _attn_bwd_dkdv(Q, K, V, O, LSE, DO, D, DK, DV, stride_vz, stride_vh, stride_vk, stride_doz,
                   stride_doh, stride_dom, H, G, Tq, Tk, q_offset, sm_scale, qk_scale,
                   HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, FP32: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # one key block of one kv head, resident, streaming the query tiles of the G query heads that
    # read it; dk', dv summed over them, with transposed scores S^T (O: unread)
    start_n = tl.program_id(0)
    bkv = tl.program_id(1).to(tl.int64)
    b, hkv = bkv // (H // G), bkv % (H // G)
    offs_s = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_qk, offs_d = tl.arange(0, 2 * HEAD_DIM), tl.arange(0, HEAD_DIM)
    k = _load_rows(K + bkv * Tk * 2 * HEAD_DIM, offs_s, offs_qk, 2 * HEAD_DIM, Tk, True)
    v = _load_rows(V + b * stride_vz + hkv * stride_vh, offs_s, offs_d, stride_vk, Tk, True)
    dk = tl.zeros([BLOCK_N, 2 * HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    # query tiles: masked [m_lo, u_lo) near the diagonal, unmasked [u_lo, Tq_full), masked tail
    m_lo, m_full, Tq_full = 0, 0, Tq // BLOCK_M * BLOCK_M
    if CAUSAL:
        k0 = start_n * BLOCK_N
        m_lo = tl.maximum(k0 - q_offset, 0) // BLOCK_M * BLOCK_M  # first row seeing a key of it
        m_full = tl.cdiv(tl.maximum(k0 + BLOCK_N - 1 - q_offset, 0), BLOCK_M) * BLOCK_M  # all
    bounds = (m_lo, tl.minimum(m_full, Tq_full), Tq_full, Tq)
    for g in range(G):
        bh = b * H + hkv * G + g
        DOh = DO + b * stride_doz + (hkv * G + g) * stride_doh
        for part in tl.static_range(3):
            MASK = part != 1
            for start_m in range(bounds[part], bounds[part + 1], BLOCK_M):
                offs_m = start_m + tl.arange(0, BLOCK_M)
                q = _load_rows(Q + bh * Tq * 2 * HEAD_DIM, offs_m, offs_qk, 2 * HEAD_DIM, Tq, MASK)
                do = _load_rows(DOh, offs_m, offs_d, stride_dom, Tq, MASK)
                lse = _load(LSE + bh * Tq + offs_m, offs_m < Tq, MASK)
                Di = _load(D + bh * Tq + offs_m, offs_m < Tq, MASK)
                qkT = _dot(k, tl.trans(q), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), FP32)
                pT = tl.exp2(qkT * qk_scale - lse[None, :])
                if MASK:
                    keep = _causal_keep(offs_m, offs_s, Tk, q_offset, CAUSAL)
                    pT = tl.where(tl.trans(keep), pT, 0.0)
                dv = _dot(pT.to(v.dtype), do, dv, FP32)
                dpT = _dot(v, tl.trans(do), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), FP32)
                dk = _dot((pT * (dpT - Di[None, :])).to(q.dtype), q, dk, FP32)
    row_ok = (offs_s < Tk)[:, None]
    tl.store(DK + bkv * Tk * 2 * HEAD_DIM + offs_s[:, None] * 2 * HEAD_DIM + offs_qk[None, :],
             (dk * sm_scale).to(DK.dtype.element_ty), mask=row_ok)
    tl.store(DV + bkv * Tk * HEAD_DIM + offs_s[:, None] * HEAD_DIM + offs_d[None, :],
             dv.to(DV.dtype.element_ty), mask=row_ok)


# -----------------------------------------------------------------------------
# Launch parameters: (BLOCK_M, BLOCK_N, num_warps, num_stages) per pass and head dim, for lengths
# above SHORT_T; the autotuner's picks for the first kernel (same footprint: 2d-wide q/k, d-wide v)
_BLOCKS = {
    "fwd": {32: (128, 64, 4, 3), 64: (128, 64, 8, 3), 128: (128, 64, 8, 2)},
    "dkdv": {32: (64, 128, 8, 3), 64: (64, 128, 8, 3), 128: (32, 128, 8, 2)},
    "dq": {32: (128, 64, 8, 3), 64: (128, 64, 8, 3), 128: (128, 32, 8, 2)},
}
SHORT_T = 128  # up to this length (the indirect-indexing task's T = 47) a 128-row tile is waste
_SMALL_BLOCKS = (32, 32, 4, 2)  # short T, and fp32 (whose 2d-wide tiles need twice the memory)
_INTERPRET_BLOCKS = {"fwd": (16, 32, 1, 1), "dkdv": (16, 32, 1, 1), "dq": (32, 16, 1, 1)}  # (tests)
BLOCK_T, BLOCK_H, WARPS = 32, 1, 4  # prologue / epilogue: a program's positions, heads, warps


def _attend(kind, qp, kp, v, o, lse, do, D, dx, dv, causal, sm_scale, q_offset):
    # one pass of the attention: kind 'fwd' (o, lse), 'dq' (D, dq' in dx) or 'dkdv' (dk' in dx, dv)
    (B, H, Tq), (Hkv, Tk, d) = qp.shape[:3], v.shape[1:]
    fp32 = v.dtype == torch.float32
    bm, bn, warps, stages = (_INTERPRET_BLOCKS[kind] if INTERPRET else _SMALL_BLOCKS
                             if Tk <= SHORT_T or fp32 else _BLOCKS[kind][d])
    kernel, grid = ((_attn_bwd_dkdv, (triton.cdiv(Tk, bn), B * Hkv)) if kind == "dkdv"
                    else (_attn_fwd, (triton.cdiv(Tq, bm), B * H)))
    strides = (*v.stride()[:3], *(o if do is None else do).stride()[:3])
    kernel[grid](qp, kp, v, o, lse, do, D, dx, dv, *strides, H, H // Hkv, Tq, Tk, q_offset,
                 sm_scale, sm_scale * LOG2E.value, HEAD_DIM=d, CAUSAL=causal, FP32=fp32,
                 BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
