"""eval.attention_reach: its heads' scores are the formulas its docstring gives, and a head learns a small offset task."""

import pytest
import torch
import torch.nn.functional as F

import eval.attention_reach as reach
from eval.attention_reach import head_scores, make_task, train_head


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


def test_each_task_names_its_target():
    """offset: query i, at the last position, names the key i + 1 before it (keys alike); index: the query's code
    names its key k < n and its own position t >= n; content: the target key holds the letter the query names."""
    g, T, n = torch.Generator().manual_seed(0), 12, 4
    x_q, tq, x_k, target = make_task('offset', T, n, g)
    assert (tq == T - 1).all() and target.tolist() == [T - 1 - (i + 1) for i in range(n)]
    assert torch.equal(x_q.argmax(1), torch.arange(n)) and (x_k == 1).all()
    x_q, tq, x_k, target = make_task('index', T, n, g)
    assert len(target) == n * (T - n) and (target < n).all() and (tq >= n).all()
    assert torch.equal(x_q[:, :n].argmax(1), target) and torch.equal(x_q[:, n:].argmax(1), tq - n)
    x_q, tq, x_k, target = make_task('content', T, n, g)
    assert torch.equal(x_k[target].argmax(1), x_q.argmax(1)) and sorted(target.tolist()) == list(range(T))
    assert not torch.equal(target, torch.arange(T))  # (the letters are shuffled: the test can fail)


def test_accuracy_and_attention_are_read_off_the_last_scores(monkeypatch):
    """acc: the share of queries whose largest score is at the target; mass: the mean softmax weight on it."""
    seen, real = [], reach.head_scores
    monkeypatch.setattr(reach, 'head_scores', lambda *args, **kw: seen.append(real(*args, **kw)) or seen[-1])
    r = train_head('rope', 'offset', seed=0, d=16, T=12, n=4, steps=60)
    att, target = seen[-1].detach().softmax(-1), torch.tensor([10, 9, 8, 7])  # offsets 1..4 before key 11
    assert r['acc'] == (att.argmax(-1) == target).double().mean().item()
    assert r['mass'] == pytest.approx(att[torch.arange(4), target].mean().item(), rel=1e-12)
    assert 0 < r['mass'] < 1
