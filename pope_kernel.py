"""
PoPE attention (Polar Coordinate Positional Embeddings, arXiv 2509.10534) as one fused Triton kernel,
forward and backward, in the style of the Triton fused-attention tutorial (FlashAttention-2).

For head h, query t, key s and frequency c = 0..d-1 (d frequencies, not d/2):

    mu_q = softplus(q[t, c])      phi_q = t * theta_c                 theta_c = base ** (-c / d)
    mu_k = softplus(k[s, c])      phi_k = s * theta_c + delta[h, c]
    score[t, s] = sm_scale * sum_c mu_q mu_k cos(phi_k - phi_q)
                = sm_scale * (Qc . Kc + Qs . Ks)      Qc = mu_q cos phi_q, Qs = mu_q sin phi_q  (same for K)
    out = softmax(score, causally masked) @ v

So each K/V tile costs two tl.dot's of width d into one fp32 accumulator. Qc, Qs, Kc, Ks are formed from the
raw q and k inside the kernel (softplus and phases on the fly) and live only in registers / shared memory;
neither the 2d-wide Cartesian q/k nor the T x T scores reach GPU memory. Extra memory: the log-sum-exp and
D = rowsum(dO * O) (O(B*H*T)), the ddelta partial sums, and one position table shared by all batches and heads.

Phases: cos(p theta_c), sin(p theta_c) come from a (T, d) float32 table computed in float64, so the phase at
position 100000 is as accurate as at position 10 (an fp32 angle near 1e5 rad has an ulp of ~0.008 rad).
The per-head delta enters by the angle-addition rule: cos(a + delta) = cos a cos delta - sin a sin delta.

Backward (P recomputed from the log-sum-exp, dS = P * (dO V^T - D), d softplus / dx = sigmoid):
    dq = sigmoid(q) * (dQc cos phi_q + dQs sin phi_q),   dQc = sm_scale dS Kc,    dQs = sm_scale dS Ks
    dk = sigmoid(k) * (dKc cos phi_k + dKs sin phi_k),   dKc = sm_scale dS^T Qc,  dKs = sm_scale dS^T Qs
    ddelta[h, c] = sum_{b, s} mu_k (dKs cos phi_k - dKc sin phi_k),    dv = P^T dO
Scores are kept in base 2 (sm_scale * log2(e) is folded into Qc, Qs) so the softmax uses exp2.
"""

import math
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
HEAD_DIMS = (32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# the CPU interpreter's tl.dot reads bf16 as raw integers: there, dots get the (exactly) upcast operands
_UPCAST_DOTS = tl.constexpr(INTERPRET)

# -----------------------------------------------------------------------------
# Small helpers, inlined into the kernels


@triton.jit
def _softplus(x):
    # log(1 + e^x) = max(x, 0) + log(1 + e^-|x|), in base 2 for the fast special-function units
    return tl.maximum(x, 0.0) + 0.6931471805599453 * tl.log2(1.0 + tl.exp2(-tl.abs(x) * 1.4426950408889634))


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp2(-x * 1.4426950408889634))


@triton.jit
def _dot(a, b, acc, FP32: tl.constexpr):
    # fp32 inputs get true fp32 products (no tf32), half inputs bf16/fp16 tensor-core dots
    if _UPCAST_DOTS:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    if FP32:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _load_rows(ptr, offs, offs_d, stride, n, MASK: tl.constexpr):
    # a (len(offs), D) tile of rows offs; rows >= n read as 0 when MASK
    ptrs = ptr + offs[:, None] * stride + offs_d[None, :]
    if MASK:
        return tl.load(ptrs, mask=(offs < n)[:, None], other=0.0)
    else:
        return tl.load(ptrs)


@triton.jit
def _phase(COS, SIN, pos, offs_d, D: tl.constexpr):
    # cos(p theta), sin(p theta) from the float64-made table (padded, so no mask is needed)
    ptrs = pos[:, None] * D + offs_d[None, :]
    return tl.load(COS + ptrs), tl.load(SIN + ptrs)


@triton.jit
def _key_phase(COS, SIN, pos, offs_d, cos_delta, sin_delta, D: tl.constexpr):
    # cos / sin of phi_k = p theta + delta by the angle-addition rule
    c, s = _phase(COS, SIN, pos, offs_d, D)
    return c * cos_delta[None, :] - s * sin_delta[None, :], s * cos_delta[None, :] + c * sin_delta[None, :]


@triton.jit
def _head_delta(DELTA, h, offs_d, D: tl.constexpr):
    delta = tl.load(DELTA + h * D + offs_d)
    return tl.cos(delta), tl.sin(delta)


@triton.jit
def _key_ranges(q0, Tk, q_offset, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # For the query rows [q0, q0 + BLOCK_M): key tiles [0, full) need no mask, tiles [full, hi) need the
    # causal / ragged mask, later tiles are skipped. Query row i sits at position q_offset + i.
    Tk_full = Tk // BLOCK_N * BLOCK_N
    if CAUSAL:
        p0 = q_offset + q0  # position of the first row: keys 0..p0 are visible to every row
        full = tl.minimum((p0 + 1) // BLOCK_N * BLOCK_N, Tk_full)
        hi = tl.minimum(Tk, p0 + BLOCK_M)
    else:
        full = Tk_full
        hi = Tk
    return full, hi


# -----------------------------------------------------------------------------
# Forward


@triton.jit
def _fwd_inner(acc, m_i, l_i, Qc, Qs, pos_m, K, V, COS, SIN, cos_delta, sin_delta, skt, svt, Tk, lo, hi,
               offs_n, offs_d, D: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
               FP32: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_s = start_n + offs_n
        k = _load_rows(K, offs_s, offs_d, skt, Tk, MASK).to(tl.float32)
        v = _load_rows(V, offs_s, offs_d, svt, Tk, MASK)
        cos_k, sin_k = _key_phase(COS, SIN, offs_s, offs_d, cos_delta, sin_delta, D)
        mu_k = _softplus(k)
        Kc = (mu_k * cos_k).to(v.dtype)
        Ks = (mu_k * sin_k).to(v.dtype)
        # S = Qc Kc^T + Qs Ks^T, already scaled by sm_scale * log2(e)
        qk = _dot(Qc, tl.trans(Kc), tl.zeros([Qc.shape[0], BLOCK_N], tl.float32), FP32)
        qk = _dot(Qs, tl.trans(Ks), qk, FP32)
        if MASK:
            keep = offs_s[None, :] < Tk
            if CAUSAL:
                keep = keep & (offs_s[None, :] <= pos_m[:, None])
            qk = tl.where(keep, qk, float("-inf"))
        # online softmax
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], FP32)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit(do_not_specialize=["Tq", "Tk", "q_offset", "Q_BUCKET", "K_BUCKET"])
def _pope_fwd(Q, K, V, DELTA, COS, SIN, O, LSE,
              sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sob, soh, sot,
              H, Tq, Tk, q_offset, qk_scale, Q_BUCKET, K_BUCKET,
              D: tl.constexpr, CAUSAL: tl.constexpr, FP32: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # the heaviest (last) causal query blocks are launched first
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    Q += b * sqb + h * sqh
    K += b * skb + h * skh
    V += b * svb + h * svh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    pos_m = q_offset + offs_m

    # the resident query tile in Cartesian form
    q = _load_rows(Q, offs_m, offs_d, sqt, Tq, True).to(tl.float32)
    cos_q, sin_q = _phase(COS, SIN, pos_m, offs_d, D)
    mu_q = _softplus(q) * qk_scale
    Qc = (mu_q * cos_q).to(V.dtype.element_ty)
    Qs = (mu_q * sin_q).to(V.dtype.element_ty)
    cos_delta, sin_delta = _head_delta(DELTA, h, offs_d, D)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    full, hi = _key_ranges(start_m * BLOCK_M, Tk, q_offset, CAUSAL, BLOCK_M, BLOCK_N)
    acc, m_i, l_i = _fwd_inner(acc, m_i, l_i, Qc, Qs, pos_m, K, V, COS, SIN, cos_delta, sin_delta, skt, svt, Tk,
                               0, full, offs_n, offs_d, D, BLOCK_N, False, CAUSAL, FP32)
    acc, m_i, l_i = _fwd_inner(acc, m_i, l_i, Qc, Qs, pos_m, K, V, COS, SIN, cos_delta, sin_delta, skt, svt, Tk,
                               full, hi, offs_n, offs_d, D, BLOCK_N, True, CAUSAL, FP32)

    # every valid row sees key 0, so l_i > 0 there; rows >= Tq are never stored
    row_ok = offs_m < Tq
    tl.store(LSE + bh * Tq + offs_m, m_i + tl.log2(l_i), mask=row_ok)
    O += b * sob + h * soh
    tl.store(O + offs_m[:, None] * sot + offs_d[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty),
             mask=row_ok[:, None])


# -----------------------------------------------------------------------------
# Backward: D = rowsum(dO * O), then dk/dv/ddelta per key block and dq per query block


@triton.jit(do_not_specialize=["Tq"])
def _pope_bwd_preprocess(O, DO, DELTA_O, sob, soh, sot, sdb, sdh, sdt, H, Tq,
                         D: tl.constexpr, BLOCK_M: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    o = _load_rows(O + b * sob + h * soh, offs_m, offs_d, sot, Tq, True).to(tl.float32)
    do = _load_rows(DO + b * sdb + h * sdh, offs_m, offs_d, sdt, Tq, True).to(tl.float32)
    tl.store(DELTA_O + bh * Tq + offs_m, tl.sum(o * do, 1), mask=offs_m < Tq)


@triton.jit
def _dkdv_inner(dKc, dKs, dv, Kc, Ks, v, offs_s, Q, DO, LSE, DELTA_O, COS, SIN, sqt, sdt, Tq, q_offset,
                qk_scale, lo, hi, offs_d, D: tl.constexpr, BLOCK_M: tl.constexpr, MASK: tl.constexpr,
                CAUSAL: tl.constexpr, FP32: tl.constexpr):
    # the key block is resident; stream query tiles, working with transposed scores S^T (BLOCK_N x BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _load_rows(Q, offs_m, offs_d, sqt, Tq, MASK).to(tl.float32)
        do = _load_rows(DO, offs_m, offs_d, sdt, Tq, MASK)
        if MASK:
            lse = tl.load(LSE + offs_m, mask=offs_m < Tq, other=0.0)
            Di = tl.load(DELTA_O + offs_m, mask=offs_m < Tq, other=0.0)
        else:
            lse = tl.load(LSE + offs_m)
            Di = tl.load(DELTA_O + offs_m)
        cos_q, sin_q = _phase(COS, SIN, q_offset + offs_m, offs_d, D)
        mu_q = _softplus(q) * qk_scale
        Qc = (mu_q * cos_q).to(v.dtype)
        Qs = (mu_q * sin_q).to(v.dtype)
        sT = _dot(Kc, tl.trans(Qc), tl.zeros([Kc.shape[0], BLOCK_M], tl.float32), FP32)
        sT = _dot(Ks, tl.trans(Qs), sT, FP32)
        pT = tl.exp2(sT - lse[None, :])
        if MASK:
            keep = offs_m[None, :] < Tq
            if CAUSAL:
                keep = keep & (offs_s[:, None] <= q_offset + offs_m[None, :])
            pT = tl.where(keep, pT, 0.0)
        dv = _dot(pT.to(v.dtype), do, dv, FP32)
        dpT = _dot(v, tl.trans(do), tl.zeros([Kc.shape[0], BLOCK_M], tl.float32), FP32)
        dsT = (pT * (dpT - Di[None, :])).to(v.dtype)
        dKc = _dot(dsT, Qc, dKc, FP32)
        dKs = _dot(dsT, Qs, dKs, FP32)
    return dKc, dKs, dv


@triton.jit(do_not_specialize=["Tq", "Tk", "q_offset", "NB", "Q_BUCKET", "K_BUCKET"])
def _pope_bwd_dkdv(Q, K, V, DELTA, COS, SIN, DO, LSE, DELTA_O, DK, DV, DDELTA_PART,
                   sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sdb, sdh, sdt,
                   H, Tq, Tk, q_offset, qk_scale, NB, Q_BUCKET, K_BUCKET,
                   D: tl.constexpr, CAUSAL: tl.constexpr, FP32: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    Q += b * sqb + h * sqh
    DO += b * sdb + h * sdh
    LSE += bh * Tq
    DELTA_O += bh * Tq
    offs_s = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)

    # the resident key block in Cartesian form
    K += b * skb + h * skh
    k = _load_rows(K, offs_s, offs_d, skt, Tk, True).to(tl.float32)
    v = _load_rows(V + b * svb + h * svh, offs_s, offs_d, svt, Tk, True)
    cos_delta, sin_delta = _head_delta(DELTA, h, offs_d, D)
    cos_k, sin_k = _key_phase(COS, SIN, offs_s, offs_d, cos_delta, sin_delta, D)
    mu_k = _softplus(k)
    Kc = (mu_k * cos_k).to(v.dtype)
    Ks = (mu_k * sin_k).to(v.dtype)

    dKc = tl.zeros([BLOCK_N, D], tl.float32)
    dKs = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    # query tiles: masked [m_lo, u_lo) near the diagonal, unmasked [u_lo, Tq_full), masked ragged tail
    if CAUSAL:
        k0 = start_n * BLOCK_N
        m_lo = tl.maximum(k0 - q_offset, 0) // BLOCK_M * BLOCK_M  # first row that sees any key of the block
        m_full = tl.cdiv(tl.maximum(k0 + BLOCK_N - 1 - q_offset, 0), BLOCK_M) * BLOCK_M  # rows seeing all
    else:
        m_lo = 0
        m_full = 0
    Tq_full = Tq // BLOCK_M * BLOCK_M
    u_lo = tl.minimum(m_full, Tq_full)
    dKc, dKs, dv = _dkdv_inner(dKc, dKs, dv, Kc, Ks, v, offs_s, Q, DO, LSE, DELTA_O, COS, SIN, sqt, sdt, Tq,
                               q_offset, qk_scale, m_lo, u_lo, offs_d, D, BLOCK_M, True, CAUSAL, FP32)
    dKc, dKs, dv = _dkdv_inner(dKc, dKs, dv, Kc, Ks, v, offs_s, Q, DO, LSE, DELTA_O, COS, SIN, sqt, sdt, Tq,
                               q_offset, qk_scale, u_lo, Tq_full, offs_d, D, BLOCK_M, False, CAUSAL, FP32)
    dKc, dKs, dv = _dkdv_inner(dKc, dKs, dv, Kc, Ks, v, offs_s, Q, DO, LSE, DELTA_O, COS, SIN, sqt, sdt, Tq,
                               q_offset, qk_scale, Tq_full, Tq, offs_d, D, BLOCK_M, True, CAUSAL, FP32)

    # back from the base-2, sm_scale*log2(e)-scaled Qc / Qs to d score
    dKc = dKc * 0.6931471805599453
    dKs = dKs * 0.6931471805599453
    # k, mu_k and the phases again (cheaper than keeping them in registers through the loop)
    k = _load_rows(K, offs_s, offs_d, skt, Tk, True).to(tl.float32)
    cos_k, sin_k = _key_phase(COS, SIN, offs_s, offs_d, cos_delta, sin_delta, D)
    mu_k = _softplus(k)
    dk = _sigmoid(k) * (dKc * cos_k + dKs * sin_k)
    row_ok = (offs_s < Tk)[:, None]
    out = bh * Tk * D + offs_s[:, None] * D + offs_d[None, :]
    tl.store(DK + out, dk.to(DK.dtype.element_ty), mask=row_ok)
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=row_ok)
    # this block's share of ddelta, reduced over the batch and the blocks afterwards in fp32
    dd = tl.where(row_ok, mu_k * (dKs * cos_k - dKc * sin_k), 0.0)
    tl.store(DDELTA_PART + ((b * NB + start_n) * H + h) * D + offs_d, tl.sum(dd, 0))


@triton.jit
def _dq_inner(dQc, dQs, Qc, Qs, do, lse, Di, pos_m, K, V, COS, SIN, cos_delta, sin_delta, skt, svt, Tk, lo, hi,
              offs_n, offs_d, D: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
              FP32: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_s = start_n + offs_n
        k = _load_rows(K, offs_s, offs_d, skt, Tk, MASK).to(tl.float32)
        v = _load_rows(V, offs_s, offs_d, svt, Tk, MASK)
        cos_k, sin_k = _key_phase(COS, SIN, offs_s, offs_d, cos_delta, sin_delta, D)
        mu_k = _softplus(k)
        Kc = (mu_k * cos_k).to(v.dtype)
        Ks = (mu_k * sin_k).to(v.dtype)
        s = _dot(Qc, tl.trans(Kc), tl.zeros([Qc.shape[0], BLOCK_N], tl.float32), FP32)
        s = _dot(Qs, tl.trans(Ks), s, FP32)
        p = tl.exp2(s - lse[:, None])
        if MASK:
            keep = offs_s[None, :] < Tk
            if CAUSAL:
                keep = keep & (offs_s[None, :] <= pos_m[:, None])
            p = tl.where(keep, p, 0.0)
        dp = _dot(do, tl.trans(v), tl.zeros([Qc.shape[0], BLOCK_N], tl.float32), FP32)
        ds = (p * (dp - Di[:, None])).to(v.dtype)
        dQc = _dot(ds, Kc, dQc, FP32)
        dQs = _dot(ds, Ks, dQs, FP32)
    return dQc, dQs


@triton.jit(do_not_specialize=["Tq", "Tk", "q_offset", "Q_BUCKET", "K_BUCKET"])
def _pope_bwd_dq(Q, K, V, DELTA, COS, SIN, DO, LSE, DELTA_O, DQ,
                 sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sdb, sdh, sdt,
                 H, Tq, Tk, q_offset, qk_scale, Q_BUCKET, K_BUCKET,
                 D: tl.constexpr, CAUSAL: tl.constexpr, FP32: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b, h = bh // H, bh % H
    K += b * skb + h * skh
    V += b * svb + h * svh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    pos_m = q_offset + offs_m
    row_ok = offs_m < Tq

    Q += b * sqb + h * sqh
    q = _load_rows(Q, offs_m, offs_d, sqt, Tq, True).to(tl.float32)
    do = _load_rows(DO + b * sdb + h * sdh, offs_m, offs_d, sdt, Tq, True)
    lse = tl.load(LSE + bh * Tq + offs_m, mask=row_ok, other=0.0)
    Di = tl.load(DELTA_O + bh * Tq + offs_m, mask=row_ok, other=0.0)
    cos_q, sin_q = _phase(COS, SIN, pos_m, offs_d, D)
    mu_q = _softplus(q) * qk_scale
    Qc = (mu_q * cos_q).to(V.dtype.element_ty)
    Qs = (mu_q * sin_q).to(V.dtype.element_ty)
    cos_delta, sin_delta = _head_delta(DELTA, h, offs_d, D)

    dQc = tl.zeros([BLOCK_M, D], tl.float32)
    dQs = tl.zeros([BLOCK_M, D], tl.float32)
    full, hi = _key_ranges(start_m * BLOCK_M, Tk, q_offset, CAUSAL, BLOCK_M, BLOCK_N)
    dQc, dQs = _dq_inner(dQc, dQs, Qc, Qs, do, lse, Di, pos_m, K, V, COS, SIN, cos_delta, sin_delta, skt, svt, Tk,
                         0, full, offs_n, offs_d, D, BLOCK_N, False, CAUSAL, FP32)
    dQc, dQs = _dq_inner(dQc, dQs, Qc, Qs, do, lse, Di, pos_m, K, V, COS, SIN, cos_delta, sin_delta, skt, svt, Tk,
                         full, hi, offs_n, offs_d, D, BLOCK_N, True, CAUSAL, FP32)

    sm_scale = qk_scale * 0.6931471805599453
    q = _load_rows(Q, offs_m, offs_d, sqt, Tq, True).to(tl.float32)
    cos_q, sin_q = _phase(COS, SIN, pos_m, offs_d, D)
    dq = _sigmoid(q) * (dQc * cos_q + dQs * sin_q) * sm_scale
    tl.store(DQ + bh * Tq * D + offs_m[:, None] * D + offs_d[None, :], dq.to(DQ.dtype.element_ty),
             mask=row_ok[:, None])


# -----------------------------------------------------------------------------
# Block sizes per head dim. The first entry is the default, picked so the fp32 accumulators and the resident
# Cartesian tiles fit the register file; POPE_AUTOTUNE=1 benchmarks the list instead (choice cached per length
# bucket, dtype, causal). One small config under TRITON_INTERPRET=1 keeps the CPU tests fast.
# (BLOCK_M, BLOCK_N, num_warps, num_stages)

_CONFIGS = {  # first entries: the autotuner's picks on an H200 at T = 4096..16384 (results/kernel_bench.log)
    "fwd": {32: [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3)],
            64: [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3)],
            128: [(128, 64, 8, 2), (128, 32, 8, 3), (128, 64, 8, 3)]},
    "dkdv": {32: [(64, 128, 8, 3), (32, 128, 8, 3), (32, 128, 4, 3)],
             64: [(64, 128, 8, 3), (32, 128, 8, 3), (32, 128, 4, 3)],
             128: [(32, 128, 8, 2), (32, 64, 4, 2), (16, 128, 8, 2)]},
    "dq": {32: [(128, 64, 8, 3), (128, 32, 8, 3), (64, 32, 4, 3)],
           64: [(128, 64, 8, 3), (128, 32, 8, 3), (64, 32, 4, 3)],
           128: [(128, 32, 8, 2), (64, 32, 4, 2), (128, 64, 8, 2)]},
}
_INTERPRET_CONFIGS = {"fwd": (16, 32, 1, 1), "dkdv": (16, 32, 1, 1), "dq": (32, 16, 1, 1)}
_KERNELS = {"fwd": _pope_fwd, "dkdv": _pope_bwd_dkdv, "dq": _pope_bwd_dq}
_tuned = {}


def _kernel(kind, D):
    """The autotuned kernel `kind` for head dim D (built once)."""
    if (kind, D) not in _tuned:
        table = [_INTERPRET_CONFIGS[kind]] if INTERPRET else _CONFIGS[kind][D]
        if os.environ.get("POPE_AUTOTUNE", "0") != "1":
            table = table[:1]
        configs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s) for bm, bn, w, s in table]
        reset = ["DDELTA_PART"] if kind == "dkdv" else None
        _tuned[kind, D] = triton.autotune(configs, key=["Q_BUCKET", "K_BUCKET", "D", "CAUSAL", "FP32"],
                                          reset_to_zero=reset)(_KERNELS[kind])
    return _tuned[kind, D]


def _min_block_n(D):
    return min(c[1] for c in ([_INTERPRET_CONFIGS["dkdv"]] if INTERPRET else _CONFIGS["dkdv"][D]))


def _bucket(n):
    return 1 << max(n - 1, 0).bit_length()  # next power of two: one tuning per length bucket


_tables = {}


def _phase_table(D, base, n, device):
    """cos(p theta_c), sin(p theta_c) for p < n (float64 maths, float32 storage), cached and grown in steps."""
    key = (str(device), D, float(base))
    if key not in _tables or _tables[key][0].shape[0] < n:
        n = triton.cdiv(n, 4096) * 4096
        f64 = dict(dtype=torch.float64, device=device)
        theta = float(base) ** (-torch.arange(D, **f64) / D)
        angle = torch.arange(n, **f64)[:, None] * theta[None, :]
        _tables[key] = (angle.cos().float().contiguous(), angle.sin().float().contiguous())
    return _tables[key]


# -----------------------------------------------------------------------------
# Autograd function and entry point


class _PoPEAttention(torch.autograd.Function):

    @staticmethod
    def forward(ctx, q, k, v, delta, causal, sm_scale, base, q_offset):
        B, H, Tq, D = q.shape
        Tk = k.shape[2]
        # the table must cover every position a (padded) tile can touch: keys < Tk, queries < q_offset + Tq
        cos, sin = _phase_table(D, base, max(Tk, q_offset + Tq) + 256, q.device)
        delta32 = delta.detach().to(torch.float32).contiguous()
        qk_scale = sm_scale * 1.4426950408889634
        o = torch.empty((B, H, Tq, D), dtype=v.dtype, device=q.device)
        lse = torch.empty((B * H, Tq), dtype=torch.float32, device=q.device)
        fp32 = q.dtype == torch.float32
        grid = lambda META: (triton.cdiv(Tq, META["BLOCK_M"]), B * H)
        _kernel("fwd", D)[grid](q, k, v, delta32, cos, sin, o, lse, *q.stride()[:3], *k.stride()[:3],
                                *v.stride()[:3], *o.stride()[:3], H, Tq, Tk, q_offset, qk_scale,
                                _bucket(Tq), _bucket(Tk), D=D, CAUSAL=causal, FP32=fp32)
        ctx.save_for_backward(q, k, v, delta32, o, lse)
        ctx.args = (causal, qk_scale, base, q_offset, delta.dtype)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, delta32, o, lse = ctx.saved_tensors
        causal, qk_scale, base, q_offset, delta_dtype = ctx.args
        B, H, Tq, D = q.shape
        Tk = k.shape[2]
        do = do if do.stride(-1) == 1 else do.contiguous()
        cos, sin = _phase_table(D, base, max(Tk, q_offset + Tq) + 256, q.device)
        fp32 = q.dtype == torch.float32

        delta_o = torch.empty_like(lse)  # D = rowsum(dO * O)
        _pope_bwd_preprocess[(triton.cdiv(Tq, 64), B * H)](o, do, delta_o, *o.stride()[:3], *do.stride()[:3], H,
                                                           Tq, D=D, BLOCK_M=64)
        dq = torch.empty((B, H, Tq, D), dtype=q.dtype, device=q.device)
        dk = torch.empty((B, H, Tk, D), dtype=k.dtype, device=q.device)
        dv = torch.empty((B, H, Tk, D), dtype=v.dtype, device=q.device)
        nb = triton.cdiv(Tk, _min_block_n(D))  # partial-sum slots, enough for the smallest key block
        ddelta_part = torch.zeros((B, nb, H, D), dtype=torch.float32, device=q.device)
        strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3])
        buckets = (_bucket(Tq), _bucket(Tk))

        grid = lambda META: (triton.cdiv(Tk, META["BLOCK_N"]), B * H)
        _kernel("dkdv", D)[grid](q, k, v, delta32, cos, sin, do, lse, delta_o, dk, dv, ddelta_part, *strides,
                                 H, Tq, Tk, q_offset, qk_scale, nb, *buckets, D=D, CAUSAL=causal, FP32=fp32)
        grid = lambda META: (triton.cdiv(Tq, META["BLOCK_M"]), B * H)
        _kernel("dq", D)[grid](q, k, v, delta32, cos, sin, do, lse, delta_o, dq, *strides,
                               H, Tq, Tk, q_offset, qk_scale, *buckets, D=D, CAUSAL=causal, FP32=fp32)
        ddelta = ddelta_part.sum(dim=(0, 1)).to(delta_dtype)
        return dq, dk, dv, ddelta, None, None, None, None


def _check_inputs(q, k, v, delta, q_offset):
    tensors = dict(q=q, k=k, v=v, delta=delta)
    for name, x in tensors.items():
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"pope_attention: {name} must be a torch.Tensor, got {type(x).__name__}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("pope_attention: q, k, v must be 4-d (B, H, T, d); got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    if D not in HEAD_DIMS:
        raise ValueError(f"pope_attention: head dim d={D} is not supported; supported d: {HEAD_DIMS}")
    if k.shape != (B, H, Tk, D) or v.shape != (B, H, Tk, D):
        raise ValueError(f"pope_attention: expected k and v of shape (B, H, Tk, d) = ({B}, {H}, Tk, {D}) "
                         f"matching q {tuple(q.shape)}; got k {tuple(k.shape)}, v {tuple(v.shape)}")
    if min(B, H, Tq, Tk) < 1:
        raise ValueError(f"pope_attention: empty input (B={B}, H={H}, Tq={Tq}, Tk={Tk}); need all >= 1")
    if Tq > Tk:
        raise ValueError(f"pope_attention: Tq={Tq} > Tk={Tk}; queries must be a suffix-sized slice (Tq <= Tk)")
    if delta.shape != (H, D):
        raise ValueError(f"pope_attention: delta must have shape (H, d) = ({H}, {D}), got {tuple(delta.shape)}")
    if not delta.is_floating_point():
        raise ValueError(f"pope_attention: delta must be a floating tensor, got {delta.dtype}")
    if q.dtype not in DTYPES or q.dtype != k.dtype or q.dtype != v.dtype:
        raise ValueError(f"pope_attention: q, k, v must share one dtype among {DTYPES}; "
                         f"got {q.dtype}, {k.dtype}, {v.dtype}")
    if len({x.device for x in tensors.values()}) != 1:
        raise ValueError(f"pope_attention: all inputs must be on one device, got "
                         f"{[str(x.device) for x in tensors.values()]}")
    if q.device.type != "cuda" and not INTERPRET:
        raise ValueError(f"pope_attention: inputs on {q.device} need a CUDA device "
                         "(or TRITON_INTERPRET=1 for the slow CPU interpreter)")
    if not isinstance(q_offset, int) or q_offset < 0:
        raise ValueError(f"pope_attention: q_offset must be a non-negative int, got {q_offset!r}")
    if max(Tk, q_offset + Tq) > 2**24:
        raise ValueError("pope_attention: positions up to 2**24 are supported")


def pope_attention(q, k, v, delta, *, causal=True, sm_scale=None, base=10000.0, q_offset=0):
    """PoPE attention. q (B, H, Tq, d), k and v (B, H, Tk, d), delta (H, d) -> out (B, H, Tq, d) in v's dtype.
    Query i sits at position q_offset + i, key s at position s; causal: key s is visible to query i iff
    s <= q_offset + i. sm_scale defaults to 1/sqrt(d). Differentiable w.r.t. q, k, v and delta."""
    if hasattr(q_offset, "__index__") and not isinstance(q_offset, bool):
        q_offset = int(q_offset)
    _check_inputs(q, k, v, delta, q_offset)
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    return _PoPEAttention.apply(q, k, v, delta, bool(causal), sm_scale, float(base), q_offset)
