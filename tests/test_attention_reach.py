"""eval.attention_reach: its PoPE head is the model's PoPE attention, and a head learns a small offset task."""

import torch

from eval.attention_reach import head_scores, train_head
from model import pope_attention_reference, pope_frequencies


def test_pope_head_scores_are_the_models_attention():
    T, d = 9, 8
    q, k = torch.randn(T, d, dtype=torch.float64), torch.randn(T, d, dtype=torch.float64)
    delta = -2 * torch.pi * torch.rand(d, dtype=torch.float64)
    att = head_scores('pope', q, k, torch.arange(T), delta).softmax(-1)
    v = torch.eye(T, dtype=torch.float64)[None, None]  # identity values: the output is the attention matrix
    ref = pope_attention_reference(q[None, None], k[None, None], v, delta[None], pope_frequencies(d),
                                   sm_scale=1.0)[0, 0]
    torch.testing.assert_close(att, ref, rtol=1e-10, atol=1e-12)


def test_heads_learn_a_small_offset_task():
    for kind in ('pope', 'rope'):
        r = train_head(kind, "offset", seed=0, d=16, T=12, n=4, steps=400)
        assert r['acc'] == 1.0 and r['step_90'] is not None, (kind, r)
    assert train_head('rope', 'offset', seed=0, d=16, T=12, n=4, steps=0)['acc'] < 1.0  # it had to learn
