"""eval.attention_reach: its heads' scores are the formulas its docstring gives, and a head learns a small offset task."""

import pytest
import torch
import torch.nn.functional as F

from eval.attention_reach import head_scores, train_head


@pytest.mark.parametrize('kind', ['pope', 'pope_signed', 'rope'])
def test_head_scores_are_the_formulas(kind):
    """PoPE: a_ts = sum_c mu(q_t)[c] mu(k_s)[c] cos((s - t) theta_c + delta_c), theta_c = 10000^(-c/d), mu softplus
    (pope_signed: mu = x); RoPE: q_t . R((s - t) theta) k_s on the pairs (i, i + d/2), theta_i = 10000^(-2i/d), as
    complex numbers Re(z_q conj(z_k) e^(i (t - s) theta)); keys after the query masked."""
    T, d = 9, 8
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(T, d, generator=g, dtype=torch.float64) for _ in range(2))
    delta = -2 * torch.pi * torch.rand(d, generator=g, dtype=torch.float64)
    t = torch.arange(T, dtype=torch.float64)
    offset = t[None, :] - t[:, None]  # [query t, key s]: s - t
    if kind == 'rope':
        theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
        zq, zk = (torch.complex(x[:, :d // 2], x[:, d // 2:]) for x in (q, k))
        want = (zq[:, None] * zk[None].conj() * torch.exp(-1j * offset[..., None] * theta)).real.sum(-1)
    else:
        theta = 10000.0 ** (-torch.arange(d, dtype=torch.float64) / d)
        mu = F.softplus if kind == 'pope' else (lambda x: x)
        want = (mu(q)[:, None] * mu(k)[None] * torch.cos(offset[..., None] * theta + delta)).sum(-1)
    want = want.masked_fill(offset > 0, float('-inf'))
    torch.testing.assert_close(head_scores(kind, q, k, torch.arange(T), delta), want, rtol=1e-10, atol=1e-12)


def test_heads_learn_a_small_offset_task():
    for kind in ('pope', 'rope'):
        r = train_head(kind, "offset", seed=0, d=16, T=12, n=4, steps=400)
        assert r['acc'] == 1.0 and r['step_90'] is not None, (kind, r)
    assert train_head('rope', 'offset', seed=0, d=16, T=12, n=4, steps=0)['acc'] < 1.0  # it had to learn
