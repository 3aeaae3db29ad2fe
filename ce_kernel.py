"""
The training loss in two Triton kernels, one pass over the logits each. For rows of logits z (N, Vp:
the vocabulary padded to a multiple of 64, its first V columns real), targets t (-1: ignored):

    lse_i  = log sum_{j < V} exp(z_ij)             forward: one read of the row (running max, sum)
    loss_i = lse_i - z_{i, t_i}                    0 if t_i = -1; NaN outside 0..V-1 (unchecked)
    dz_ij  = g_i (exp(z_ij - lse_i) - [j = t_i])   backward (g: the loss's grad): a read, a write

The 124M step's logits are 3.3 GB in bf16: the loss is bandwidth alone (results/speed/README.md).
"""

import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
BLOCK_V = 1024 if INTERPRET else 4096  # columns a step of the forward's loop, a backward program


def cross_entropy(z, targets, V):
    """F.cross_entropy(z[:, :V], targets, ignore_index=-1) of (N, Vp) logits and (N,) targets."""
    if z.stride(1) != 1 or targets.dtype != torch.int64:
        raise ValueError("ce_kernel.cross_entropy takes logits with contiguous rows and int64 "
                         f"targets; got strides {tuple(z.stride())} and {targets.dtype}")
    loss, _ = cross_entropy_rows(z, targets.contiguous(), V)
    return loss.sum() / (targets != -1).sum()


# Custom ops, one opaque node each for torch.compile
@torch.library.custom_op("gpt::cross_entropy_rows", mutates_args=())
def cross_entropy_rows(z: torch.Tensor, targets: torch.Tensor,
                       V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss (0 for target -1) and log-sum-exp over the first V columns of z, in float32."""
    loss, lse = _rows_empty(z, targets, V)
    _ce_fwd[(z.shape[0],)](z, targets, loss, lse, V, z.stride(0), BLOCK_V=BLOCK_V)
    return loss, lse


@cross_entropy_rows.register_fake
def _rows_empty(z, targets, V):
    return tuple(z.new_empty(z.shape[0], dtype=torch.float32) for _ in range(2))


@torch.library.custom_op("gpt::cross_entropy_rows_backward", mutates_args=())
def cross_entropy_rows_backward(dloss: torch.Tensor, z: torch.Tensor, targets: torch.Tensor,
                                lse: torch.Tensor, V: int) -> torch.Tensor:
    dz, (N, Vp) = torch.empty_like(z), z.shape
    _ce_bwd[(N, triton.cdiv(Vp, BLOCK_V))](z, targets, lse, dloss.contiguous(), dz, V, Vp,
                                           z.stride(0), BLOCK_V=BLOCK_V)
    return dz


cross_entropy_rows_backward.register_fake(lambda dloss, z, targets, lse, V: torch.empty_like(z))


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1], output[1])  # z, targets, lse
    ctx.V = inputs[2]


def _grad(ctx, dloss, dlse):  # lse is an output for the backward alone: its gradient is ignored
    z, targets, lse = ctx.saved_tensors
    return cross_entropy_rows_backward(dloss, z, targets, lse, ctx.V), None, None


cross_entropy_rows.register_autograd(_grad, setup_context=_setup)


@triton.jit
def _ce_fwd(Z, TARGETS, LOSS, LSE, V, stride, BLOCK_V: tl.constexpr):
    # a program a row: the running max m of the row and the sum s of exp(z - m), block by block
    row = tl.program_id(0).to(tl.int64)
    z_row = Z + row * stride
    m, s = tl.full([], float("-inf"), tl.float32), tl.zeros([], tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        z = tl.load(z_row + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(z, 0))  # finite from the first block on (a real column)
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
    # program (row, block of columns): dz = g (softmax - onehot), 0 in the padding and ignored rows
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    z = tl.load(Z + row * stride + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
    t = tl.load(TARGETS + row)
    g = tl.where(t >= 0, tl.load(DLOSS + row), 0.0)
    dz = g * (tl.exp(z - tl.load(LSE + row)) - tl.where(cols == t, 1.0, 0.0))
    tl.store(DZ + row * stride + cols, dz.to(DZ.dtype.element_ty), mask=cols < Vp)
