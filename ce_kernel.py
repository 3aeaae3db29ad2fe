"""
The training loss as two Triton kernels, one pass over the logits each: the cross-entropy of a row of logits z
(N rows, Vp columns: the vocabulary padded to a multiple of 64, of which the first V are the tokenizer's) and its
target t (-1: ignored).

    lse_i  = log sum_{j < V} exp(z_ij)               forward: one read of the row (running max and sum)
    loss_i = lse_i - z_{i, t_i}                      (0 where t_i = -1; NaN for a target outside 0..V-1:
                                                     F.cross_entropy raises, a check here would cost a host sync)
    dz_ij  = g_i (exp(z_ij - lse_i) - [j = t_i])     backward: one read and one write of the row
                                                     (0 in the padding and in ignored rows)

Why a kernel: the 124M step's logits are 32k x 50304 (3.3 GB in bf16), and the loss is bandwidth alone.
These read the logits once forward and once backward (their time in the step: results/speed/README.md).
model.py uses them for CUDA tensors and F.cross_entropy for the rest; tests/test_ce_kernel.py checks the two agree.
"""

import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
BLOCK_V = 1024 if INTERPRET else 4096  # columns per step of the forward's loop, per program of the backward


@triton.jit
def _ce_fwd(Z, TARGETS, LOSS, LSE, V, stride, BLOCK_V: tl.constexpr):
    # one program per row: the running max m of the row and the sum s of exp(z - m), a block of columns at a time
    row = tl.program_id(0).to(tl.int64)
    z_row = Z + row * stride
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.zeros([], tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        z = tl.load(z_row + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(z, 0))  # finite from the first block on (it holds a real column)
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), 0)
        m = m_new
    lse = m + tl.log(s)
    t = tl.load(TARGETS + row)
    valid = (t >= 0) & (t < V)
    z_t = tl.load(z_row + tl.where(valid, t, 0)).to(tl.float32)
    tl.store(LOSS + row, tl.where(valid, lse - z_t, tl.where(t == -1, 0.0, float("nan"))))
    tl.store(LSE + row, lse)


@triton.jit
def _ce_bwd(Z, TARGETS, LSE, DLOSS, DZ, V, Vp, stride, BLOCK_V: tl.constexpr):
    # program (row, block of columns): dz = g (softmax - onehot), 0 in the padding and in ignored rows
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    z = tl.load(Z + row * stride + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
    t = tl.load(TARGETS + row)
    g = tl.where(t >= 0, tl.load(DLOSS + row), 0.0)
    dz = g * (tl.exp(z - tl.load(LSE + row)) - tl.where(cols == t, 1.0, 0.0))
    tl.store(DZ + row * stride + cols, dz.to(DZ.dtype.element_ty), mask=cols < Vp)


# Custom ops (as in pope_kernel.py): torch.compile keeps each launch as one opaque node in its graph.
@torch.library.custom_op("gpt::cross_entropy_rows", mutates_args=())
def cross_entropy_rows(z: torch.Tensor, targets: torch.Tensor, V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss (0 for target -1) and log-sum-exp over the first V columns of z (N, Vp), in float32."""
    N = z.shape[0]
    loss = torch.empty(N, dtype=torch.float32, device=z.device)
    lse = torch.empty(N, dtype=torch.float32, device=z.device)
    _ce_fwd[(N,)](z, targets, loss, lse, V, z.stride(0), BLOCK_V=BLOCK_V)
    return loss, lse


@cross_entropy_rows.register_fake
def _(z, targets, V):
    return z.new_empty(z.shape[0], dtype=torch.float32), z.new_empty(z.shape[0], dtype=torch.float32)


@torch.library.custom_op("gpt::cross_entropy_rows_backward", mutates_args=())
def cross_entropy_rows_backward(dloss: torch.Tensor, z: torch.Tensor, targets: torch.Tensor, lse: torch.Tensor,
                                V: int) -> torch.Tensor:
    dz = torch.empty_like(z)
    N, Vp = z.shape
    _ce_bwd[(N, triton.cdiv(Vp, BLOCK_V))](z, targets, lse, dloss.contiguous(), dz, V, Vp, z.stride(0),
                                           BLOCK_V=BLOCK_V)
    return dz


@cross_entropy_rows_backward.register_fake
def _(dloss, z, targets, lse, V):
    return torch.empty_like(z)


def _setup(ctx, inputs, output):
    z, targets, V = inputs
    ctx.save_for_backward(z, targets, output[1])
    ctx.V = V


def _grad(ctx, dloss, dlse):  # lse is an output for the backward alone: its gradient is ignored
    z, targets, lse = ctx.saved_tensors
    return cross_entropy_rows_backward(dloss, z, targets, lse, ctx.V), None, None


cross_entropy_rows.register_autograd(_grad, setup_context=_setup)


def cross_entropy(z, targets, V):
    """F.cross_entropy(z[:, :V], targets, ignore_index=-1) for (N, Vp) logits z with contiguous rows, (N,) targets."""
    if z.stride(1) != 1 or targets.dtype != torch.int64:
        raise ValueError(f"ce_kernel.cross_entropy takes logits with contiguous rows and int64 targets; got strides "
                         f"{tuple(z.stride())} and {targets.dtype}")
    loss, _ = cross_entropy_rows(z, targets.contiguous(), V)
    return loss.sum() / (targets != -1).sum()
