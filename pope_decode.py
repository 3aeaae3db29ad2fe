"""
Generation's one-token step, pope::decode: a query per sequence over a KV cache of mu(k) (d wide,
as RoPE's keys) and v. Split-K: a program per (split, b, query head) runs an online softmax over its
range of whole tiles of the visible positions [0, n), a second kernel merges the splits. The keys
are never formed: for q' = [qc, qs] (delta in its phase) the key s = DECODE_BLOCK a + b_ scores
sum_c mu_k[s, c] (u_c cos(b_ theta_c) + w_c sin(b_ theta_c)), [u, w] the query rotated by
-DECODE_BLOCK a theta (a row of the table T1), T2[b_] = e^{i b_ theta} the same for every tile: HBM
traffic is mu_k and v alone. Without tables it is plain decoding, q . k[s] (RoPE's step).
"""

from typing import Optional

import torch
import triton
import triton.language as tl

from pope_kernel import DTYPES, LOG2E, refuse

DECODE_BLOCK = 16  # positions of a tile
DECODE_HEAD_DIMS = (16, 32, 64, 128)
# Small programs, many of them (a step waits on its loads): tiles of 16 positions, one warp up to d
# 64, splits for 8 programs per SM (results/speed/bench_decode_tiles.py, results/speed/README.md)
DECODE_WARPS = {16: 1, 32: 1, 64: 1, 128: 2}
MIN_PROGRAMS = 8 * 132  # splits are chosen so that B * H * splits reaches this (132: an H100's SMs)


@torch.library.custom_op("pope::decode", mutates_args=())
def decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n: torch.Tensor,
           t1: Optional[torch.Tensor], t2: Optional[torch.Tensor], sm_scale: float) -> torch.Tensor:
    """Attention of a query (B, H, w) over the first n positions of a cache k, v (B, n_kv_head, L,
    d) -> (B, H, d) in v's dtype. PoPE: the query q' (2d wide), k the cached mu(k), t1, t2 =
    decode_tables; plain keys: t1 = t2 = None, the query d wide. n: a 1-element device tensor (no
    host sync: a CUDA graph), taken as L where it exceeds L."""
    _check_decode(q, k, v, n, t1, t2)
    (B, H, _), (Hkv, L, d) = q.shape, k.shape[1:]
    splits = decode_splits(B, H, L)
    m, l_sum, acc = (v.new_empty(shape, dtype=torch.float32) for shape in
                     ((B * H * splits,), (B * H * splits,), (B * H * splits, d)))
    _decode_split[(splits, B * H)](q, k, v, n, t1, t2, m, l_sum, acc, *q.stride()[:2],
                                   *k.stride()[:3], *v.stride()[:3], H, H // Hkv, L,
                                   sm_scale * LOG2E.value, SPLITS=splits, d=d, BLOCK=DECODE_BLOCK,
                                   num_warps=DECODE_WARPS[d])
    o = v.new_empty((B, H, d))
    _decode_combine[(B * H,)](m, l_sum, acc, o, *o.stride()[:2], H, SPLITS=splits, d=d, num_warps=4)
    return o


@decode.register_fake
def _(q, k, v, n, t1, t2, sm_scale):
    _check_decode(q, k, v, n, t1, t2)  # (as the kernel: meta tensors, compiling)
    return v.new_empty((q.shape[0], q.shape[1], v.shape[3]))


def decode_tables(theta, max_len):
    """T1 (cdiv(max_len, DECODE_BLOCK), 2d) of the phases DECODE_BLOCK a theta and T2 (DECODE_BLOCK,
    2d) of b theta, rows [cos | sin] computed in float64, stored float32, on theta's device."""
    theta = theta.detach().double()
    phis = (torch.arange(0, stop, step, dtype=theta.dtype, device=theta.device)[:, None] * theta
            for stop, step in ((max_len, DECODE_BLOCK), (DECODE_BLOCK, 1)))
    return tuple(torch.cat([phi.cos(), phi.sin()], -1).float().contiguous() for phi in phis)


def decode_splits(B, H, L):
    """Splits (a power of two): enough for B * H * splits >= MIN_PROGRAMS, at most one a tile."""
    want = triton.cdiv(MIN_PROGRAMS, B * H)
    return min(triton.next_power_of_2(want), triton.next_power_of_2(triton.cdiv(L, DECODE_BLOCK)))


def _check_decode(q, k, v, n, t1, t2):
    (B, H, w), (_, Hkv, L, d), dims = q.shape, k.shape, DECODE_HEAD_DIMS
    tensors = [x for x in (q, k, v, n, t1, t2) if x is not None]
    shape = [tuple(x.shape) for x in tensors]  # (q, k, v, n[, t1, t2])
    want = "2d wide, with the tables" if t1 is not None else "d wide, without tables"
    refuse("pope decode", [
        (d not in dims or w != (2 * d if t1 is not None else d),
         "head dim d={d}, query {w} wide; need d in {dims}, the query {want}"),
        (v.shape != k.shape or k.shape[0] != B or H % Hkv, "k and v must be (B, n_kv_head, L, d), "
         "n_kv_head dividing H, for a query {shape[0]}; got {shape[1]}, {shape[2]}"),
        (any(x.stride(-1) != 1 for x in (q, k, v)), "q, k, v need a contiguous last dimension"),
        (n.numel() != 1 or n.dtype not in (torch.int32, torch.int64),
         "n must be a 1-element integer tensor, got {n.dtype} {shape[3]}"),
        ((t1 is None) != (t2 is None), "pass both phase tables (PoPE) or neither (plain keys)"),
        (t1 is not None and t2 is not None and (t1.shape[0] < triton.cdiv(L, DECODE_BLOCK)
         or t1.shape[1] != 2 * d or t2.shape != (DECODE_BLOCK, 2 * d)), "tables {shape[4]}, "
         "{shape[5]} do not fit L={L}, d={d}: build them with decode_tables(theta, {L})"),
        (len({x.device for x in tensors}) != 1, "all inputs must be on one device"),
        (v.dtype not in DTYPES or k.dtype != v.dtype or q.dtype not in DTYPES,
         "q, k, v must be among {DTYPES}, k and v of one dtype; got {q.dtype}, {k.dtype}, "
         "{v.dtype}")],
        locals())


@triton.jit(do_not_specialize=["L"])
def _decode_split(Q, K, V, N, T1, T2, M_OUT, L_OUT, ACC, stride_qz, stride_qh, stride_kz, stride_kh,
                  stride_kn, stride_vz, stride_vh, stride_vk, H, G, L, qk_scale,
                  SPLITS: tl.constexpr, d: tl.constexpr, BLOCK: tl.constexpr):
    # program (split, b * H + h): (max, sum, acc) of the base-2 online softmax over its tiles
    split, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    offs_d, offs_b = tl.arange(0, d), tl.arange(0, BLOCK)
    q = Q + b * stride_qz + h * stride_qh
    qc = tl.load(q + offs_d).to(tl.float32)
    if T1 is not None:
        qs = tl.load(q + d + offs_d).to(tl.float32)
        t2 = T2 + offs_b[:, None] * (2 * d) + offs_d[None, :]
        cos_b, sin_b = tl.load(t2), tl.load(t2 + d)  # (BLOCK, d): e^{i b_ theta}, for every tile
    n = tl.minimum(tl.load(N), L).to(tl.int32)  # visible positions: input_pos + 1, on the device
    tiles, per_split = tl.cdiv(n, BLOCK), tl.cdiv(tl.cdiv(n, BLOCK), SPLITS)
    first = split * per_split
    last = tl.minimum(first + per_split, tiles)
    k = K + b * stride_kz + (h // G) * stride_kh  # grouped-query attention: kv head h // G
    v = V + b * stride_vz + (h // G) * stride_vh
    m_i, l_i = tl.full((), float("-inf"), tl.float32), tl.full((), 0.0, tl.float32)
    acc = tl.zeros((d,), tl.float32)
    for a in range(first, last):
        pos = a * BLOCK + offs_b
        keep = pos < n
        rows = pos.to(tl.int64)[:, None]
        kt = tl.load(k + rows * stride_kn + offs_d[None, :], mask=keep[:, None], other=0.0)
        kt = kt.to(tl.float32)
        if T1 is not None:  # PoPE: kt is mu(k)
            t1 = T1 + a * (2 * d) + offs_d
            cos_a, sin_a = tl.load(t1), tl.load(t1 + d)  # e^{i alpha}
            u = qc * cos_a + qs * sin_a  # the query rotated by -alpha
            w = qs * cos_a - qc * sin_a
            x = tl.sum(kt * (cos_b * u[None, :] + sin_b * w[None, :]), 1) * qk_scale
        else:
            x = tl.sum(kt * qc[None, :], 1) * qk_scale
        x = tl.where(keep, x, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(x, 0))  # finite: a tile holds at least one visible position
        p = tl.exp2(x - m_new)
        alpha_i = tl.exp2(m_i - m_new)
        vt = tl.load(v + rows * stride_vk + offs_d[None, :], mask=keep[:, None], other=0.0)
        acc = acc * alpha_i + tl.sum(p[:, None] * vt.to(tl.float32), 0)
        l_i = l_i * alpha_i + tl.sum(p, 0)
        m_i = m_new
    out = bh * SPLITS + split
    tl.store(M_OUT + out, m_i)  # an empty split (past n): max -inf, sum 0, acc 0
    tl.store(L_OUT + out, l_i)
    tl.store(ACC + out * d + offs_d, acc)


@triton.jit
def _decode_combine(M_IN, L_IN, ACC, O, stride_oz, stride_oh, H, SPLITS: tl.constexpr,
                    d: tl.constexpr):
    # program b * H + h: softmax-weighted merge of its splits (split 0 holds position 0: max finite)
    bh = tl.program_id(0).to(tl.int64)
    rows = bh * SPLITS + tl.arange(0, SPLITS)
    offs_d = tl.arange(0, d)
    m = tl.load(M_IN + rows)
    weight = tl.exp2(m - tl.max(m, 0))  # 0 for the empty splits
    l_sum = tl.sum(tl.load(L_IN + rows) * weight, 0)
    acc = tl.sum(tl.load(ACC + rows[:, None] * d + offs_d[None, :]) * weight[:, None], 0)
    tl.store(O + (bh // H) * stride_oz + (bh % H) * stride_oh + offs_d,
             (acc / l_sum).to(O.dtype.element_ty))
