"""The model: PoPE against its formula, the fast forms against the reference, every encoding."""

import itertools
import math
import os
import types

import pytest
import torch
import torch.nn.functional as F

import model
from eval import sequence_nll
from generate import KVCache, generate
from model import (ENCODINGS, GPT, POPE_MUS, GPTConfig, alibi_slopes, pope_attention_reference, pope_frequencies,
                   pope_polar, rope_angles, rope_frequencies, rope_rotate)

F64 = torch.float64


def pope_attention(q, k, v, delta, base=10000.0, **kw):
    """model.pope_attention_reference at frequency base `base`, explicit scores (the ground truth)."""
    return pope_attention_reference(q, k, v, delta, pope_frequencies(q.shape[-1], base), **kw)


def pope_attention_sdpa(q, k, v, delta, base=10000.0, **kw):
    """model.pope_attention_reference through SDPA (explicit=False): the model's path off the GPU."""
    return pope_attention_reference(q, k, v, delta, pope_frequencies(q.shape[-1], base), explicit=False, **kw)


def rand_qkvd(B=2, H=3, Tq=7, Tk=7, d=8, dtype=F64, seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else torch.seed() % 2**31)
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=dtype) for T in (Tq, Tk, Tk))
    delta = -2 * math.pi * torch.rand(H, d, generator=g, dtype=dtype)
    return q, k, v, delta


def naive_pope(q, k, v, delta, causal, base, q_offset):
    """The paper's formula, one score at a time."""
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    out = torch.zeros(B, H, Tq, d, dtype=F64)
    sp = lambda x: math.log1p(math.exp(x))
    for b in range(B):
        for h in range(H):
            for i in range(Tq):
                t = q_offset + i
                scores = []
                for s in range(Tk):
                    a = sum(sp(q[b, h, i, c].item()) * sp(k[b, h, s, c].item())
                            * math.cos((s - t) * base ** (-c / d) + delta[h, c].item()) for c in range(d))
                    scores.append(a / math.sqrt(d) if not causal or s <= t else -math.inf)
                p = torch.softmax(torch.tensor(scores, dtype=F64), 0)
                out[b, h, i] = p @ v[b, h].to(F64)
    return out


@pytest.mark.parametrize("causal,Tq,Tk,q_offset", [(True, 5, 5, 0), (False, 4, 6, 0), (True, 2, 6, 4), (True, 3, 9, 2)])
def test_reference_equals_naive_formula(causal, Tq, Tk, q_offset):
    q, k, v, delta = rand_qkvd(B=1, H=2, Tq=Tq, Tk=Tk, d=6)
    base = 100.0  # a small base makes every frequency turn visibly
    ref = pope_attention(q, k, v, delta, causal=causal, base=base, q_offset=q_offset)
    torch.testing.assert_close(ref, naive_pope(q, k, v, delta, causal, base, q_offset), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("causal,Tq,Tk,q_offset", [(True, 9, 9, 0), (False, 9, 9, 0), (True, 3, 11, 8), (True, 1, 11, 10), (True, 4, 11, 5)])
def test_sdpa_form_equals_reference_values_and_grads(causal, Tq, Tk, q_offset):
    q, k, v, delta = (t.requires_grad_() for t in rand_qkvd(Tq=Tq, Tk=Tk, d=16))
    outs, grads = [], []
    for fn in (pope_attention, pope_attention_sdpa):
        o = fn(q, k, v, delta, causal=causal, q_offset=q_offset)
        do = torch.randn_like(o, generator=torch.Generator().manual_seed(1))
        outs.append(o)
        grads.append(torch.autograd.grad(o, (q, k, v, delta), do))
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-9, atol=1e-9)
    for g_sdpa, g_ref in zip(grads[1], grads[0]):
        torch.testing.assert_close(g_sdpa, g_ref, rtol=1e-8, atol=1e-9)
        assert g_ref.abs().sum() > 0


def test_reference_in_float32_close_to_float64():
    q, k, v, delta = rand_qkvd(Tq=20, Tk=20, d=16)
    ref = pope_attention(q, k, v, delta)
    out = pope_attention(q.float(), k.float(), v.float(), delta.float())
    assert out.dtype == torch.float32
    assert ((out.double() - ref).norm() / ref.norm()) < 1e-5


def scores_pope(q, k, delta, tq, tk):
    theta = pope_frequencies(q.shape[-1])
    return pope_polar(q, tq, theta, delta) @ pope_polar(k, tk, theta).transpose(-2, -1)


def scores_rope(q, k, tq, tk):
    theta = rope_frequencies(q.shape[-1] // 2, 10000.0)
    return rope_rotate(q, *rope_angles(tq, theta)) @ rope_rotate(k, *rope_angles(tk, theta)).transpose(-2, -1)


@pytest.mark.parametrize("shift", [1, 37, 100_000])
def test_shifting_all_positions_leaves_scores_unchanged(shift):
    q, k, _, delta = rand_qkvd(Tq=6, Tk=6, d=16)
    tq, tk = torch.tensor([0, 1, 2, 5, 9, 20]), torch.arange(6)
    torch.testing.assert_close(scores_pope(q, k, delta, tq + shift, tk + shift), scores_pope(q, k, delta, tq, tk), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(scores_rope(q, k, tq + shift, tk + shift), scores_rope(q, k, tq, tk), rtol=1e-9, atol=1e-9)
    # and the scores do depend on relative position (so the test can fail)
    assert not torch.allclose(scores_pope(q, k, delta, tq + shift, tk), scores_pope(q, k, delta, tq, tk))


def test_pope_phase_exact_at_large_positions():
    """float32 inputs, positions near 1e5: the phase is formed in float64, so cos(phi) is exact."""
    x = torch.ones(1, 1, 1, 4)
    for p in (10, 100_003):
        re, im = pope_polar(x, torch.tensor([p]), pope_frequencies(4)).split(4, -1)
        phi = p * (10000.0 ** (-torch.arange(4, dtype=F64) / 4))
        mu = math.log1p(math.e)
        torch.testing.assert_close(re[0, 0, 0].double(), mu * phi.cos(), rtol=0, atol=1e-6)
        torch.testing.assert_close(im[0, 0, 0].double(), mu * phi.sin(), rtol=0, atol=1e-6)


def tiny(pos_emb, impl='sdpa', **kw):
    torch.manual_seed(0)
    cfg = dict(block_size=32, vocab_size=17, n_layer=2, n_head=2, n_embd=32, pos_emb=pos_emb, attn_impl=impl,
               pope_delta='uniform')
    cfg.update(kw)
    return GPT(GPTConfig(**cfg))


def test_delta_is_used_as_is_and_every_value_has_a_gradient():
    # a forward pass that clamped delta would give a value outside [-2pi, 0] zero gradient, frozen there; train.py
    # projects delta onto the range after each optimizer step instead (tests/test_train.py), the forward uses it as is
    m = tiny('pope')
    idx = torch.randint(0, 17, (2, 10))
    attn = m.h[0].attn
    with torch.no_grad():
        attn.delta[0, :4] = torch.tensor([0.7, -7.0, 3.0, -20.0])
        out = m(idx, idx)[0]
        attn.delta[0, 0] = 0.0
        assert not torch.allclose(m(idx, idx)[0], out)  # 0.7 is not read as 0
    m(idx, idx)[1].backward()
    assert (attn.delta.grad != 0).all()


@pytest.mark.parametrize("pos_emb", ENCODINGS)
def test_torch_and_sdpa_paths_agree_in_the_model(pos_emb):
    idx = torch.randint(0, 17, (2, 12))
    a, b = tiny(pos_emb, 'torch').double(), tiny(pos_emb, 'sdpa').double()
    la, lb = a(idx, idx)[1], b(idx, idx)[1]
    torch.testing.assert_close(la, lb, rtol=1e-9, atol=1e-9)
    la.backward(), lb.backward()
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-7, atol=1e-9, msg=n)


@pytest.mark.parametrize("pos_emb", ENCODINGS)
def test_every_encoding_trains(pos_emb):
    m = tiny(pos_emb)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    x = torch.randint(0, 17, (4, 16), generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(25):
        _, loss = m(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.85 * losses[0], losses


@pytest.mark.parametrize("pos_emb", ENCODINGS)
@pytest.mark.parametrize("impl", ['torch', 'sdpa'])
def test_grouped_query_attention_equals_repeated_kv_heads(pos_emb, impl):
    """n_kv_head=2 of 4 heads is the 4-head model whose key/value projections repeat each kv head for its 2 query
    heads (query head h reads kv head h // 2); checked on a cached decode too."""
    gqa = tiny(pos_emb, impl, n_head=4, n_kv_head=2).double().eval()
    full = tiny(pos_emb, impl, n_head=4).double().eval()
    state = gqa.state_dict()
    hd, C = 8, 32
    for i in range(2):
        w = state[f'h.{i}.attn.c_attn.weight']  # rows: q (4 heads), k (2 heads), v (2 heads), hd each
        q, k, v = w[:C], w[C:C + 2 * hd], w[C + 2 * hd:]
        rep = lambda m: m.view(2, hd, C).repeat_interleave(2, dim=0).reshape(4 * hd, C)  # noqa: E731
        state[f'h.{i}.attn.c_attn.weight'] = torch.cat([q, rep(k), rep(v)])
    full.load_state_dict(state)
    idx = torch.randint(0, 17, (2, 20))
    torch.testing.assert_close(gqa(idx, idx)[0], full(idx, idx)[0], rtol=1e-9, atol=1e-9)
    cache = KVCache(gqa, 2, 20, 'cpu', F64)
    gqa(idx[:, :19], cache=cache, input_pos=torch.arange(19))
    assert cache.k[0].shape[1] == cache.v[0].shape[1] == 2  # the cache holds the 2 kv heads only
    logits = gqa(idx[:, 19:], cache=cache, input_pos=torch.tensor([19]))[0]
    torch.testing.assert_close(logits[:, -1], full(idx, idx)[0][:, -1], rtol=1e-9, atol=1e-9)


def test_padded_vocabulary_is_never_scored():
    """The tied vocabulary matrix has 64-row padding (17 -> 64 rows); the padding rows never change the logits
    (17 wide) nor the loss."""
    m = tiny('rope').eval()
    assert m.lm_head.weight.shape == (64, 32) and m.wte.weight is m.lm_head.weight
    idx = torch.randint(0, 17, (2, 12))
    logits, loss = m(idx, idx)
    assert logits.shape == (2, 12, 17)
    assert loss.requires_grad and not logits.requires_grad  # a logits gradient would be filled and read each step
    with torch.no_grad():
        m.lm_head.weight[17:] = 100.0  # large logits, if they were scored
    logits2, loss2 = m(idx, idx)
    torch.testing.assert_close(loss2, loss, rtol=0, atol=0)
    assert m(idx)[0].shape == (2, 1, 17)


@pytest.mark.parametrize("untied", [False, True])
def test_sequence_nll_is_the_summed_loss_of_the_models_logits(untied):
    """eval.sequence_nll (float32 log-probabilities over the tokenizer's vocabulary, a few positions at a time), as
    eval/ and train.py's longer contexts use it, is the summed cross-entropy of the model's own logits; an untied
    output layer keeps its bias."""
    m = tiny('rope', bias=untied, tie_embeddings=not untied).double()
    if untied:
        torch.nn.init.normal_(m.lm_head.bias)
    idx, targets = torch.randint(0, 17, (2, 12)), torch.randint(0, 17, (2, 12))
    with torch.no_grad():
        want = F.cross_entropy(m(idx, targets)[0].transpose(1, 2), targets, reduction='none').sum(1)
    torch.testing.assert_close(sequence_nll(m, idx, targets, chunk=5), want, rtol=1e-5, atol=0)


def test_loss_equals_cross_entropy_over_the_vocabulary():
    """The model's loss off CUDA (F.cross_entropy over the padded logits, the padding masked to -inf) is
    F.cross_entropy over the tokenizer's 17 logits, ignore_index=-1 included, in value and in gradient."""
    m = tiny('rope').double()
    idx, targets = torch.randint(0, 17, (2, 12)), torch.randint(0, 17, (2, 12))
    targets[0, :5] = -1
    _, loss = m(idx, targets)
    logits = m.lm_head(m.hidden_states(idx))[..., :17]
    ref = F.cross_entropy(logits.reshape(-1, 17), targets.reshape(-1), ignore_index=-1)
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=1e-12)
    g, g_ref = (torch.autograd.grad(f, m.lm_head.weight, retain_graph=True)[0] for f in (loss, ref))
    torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the loss kernel is the model's loss on CUDA")
def test_the_models_loss_on_cuda_is_its_loss_on_the_cpu():
    """On CUDA the model's loss is ce_kernel's (tests/test_ce_kernel.py tests the kernels); here its wiring: the
    same model and batch give the CPU's loss and gradient."""
    m = tiny('rope')
    idx, targets = torch.randint(0, 17, (2, 12)), torch.randint(0, 17, (2, 12))
    targets[0, :5] = -1
    out = {}
    for device in ('cpu', 'cuda'):
        m.to(device).zero_grad()
        loss = m(idx.to(device), targets.to(device))[1]
        loss.backward()
        out[device] = loss.item(), m.lm_head.weight.grad.to('cpu', copy=True)  # (m.to moves .grad)
    assert model.ce_kernel is not None
    assert abs(out['cuda'][0] - out['cpu'][0]) < 1e-4
    torch.testing.assert_close(out['cuda'][1], out['cpu'][1], rtol=1e-3, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a capturable optimizer (cuda_graph=True) is CUDA's")
def test_a_capturable_optimizer_follows_the_schedule_like_a_plain_one():
    """cuda_graph=True: every param group reads one learning-rate tensor on the GPU, which train.py fills at each
    step; the weights must follow the same schedule as with a Python float."""
    out = []
    for capturable in (False, True):
        torch.manual_seed(0)
        m = tiny('pope').cuda()
        opt = m.configure_optimizers(0.1, 1e-3, (0.9, 0.95), 'cuda', capturable=capturable)
        for lr in (1e-3, 5e-4, 0.0, 2e-3):
            for group in opt.param_groups:
                if torch.is_tensor(group['lr']):
                    group['lr'].fill_(lr)
                else:
                    group['lr'] = lr
            idx = torch.randint(0, 17, (2, 12), device='cuda', generator=torch.Generator('cuda').manual_seed(1))
            m(idx, idx)[1].backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        out.append(torch.cat([p.detach().flatten() for p in m.parameters()]))
    torch.testing.assert_close(out[1], out[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('pos_emb,kw', [('pope', dict(bias=True, tie_embeddings=False)), ('learned', {})])
def test_weight_decay_shrinks_the_matrices_of_the_blocks_only(pos_emb, kw):
    """AdamW's step at zero gradient moves a parameter only by its weight decay: the Linear layers' matrices in the
    blocks shrink by lr * weight_decay, and nothing else moves (embeddings, positions, head, norms, biases, PoPE's
    delta)."""
    m = tiny(pos_emb, **kw)
    linear = {f'{n}.weight' for n, mod in m.h.named_modules(prefix='h') if isinstance(mod, torch.nn.Linear)}
    assert len(linear) == 4 * m.config.n_layer
    opt = m.configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu')
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    moved = {n for n, p in m.named_parameters() if not torch.equal(p, before[n])}
    assert moved == linear, sorted(moved ^ linear)
    for n in linear:
        torch.testing.assert_close(m.get_parameter(n), before[n] * (1 - 1e-2 * 0.1), rtol=1e-6, atol=0)
    if pos_emb == 'pope':
        assert torch.equal(m.h[0].attn.delta, before['h.0.attn.delta']) and before['h.0.attn.delta'].abs().min() > 0


def test_weight_decay_on_the_blocks_matrices_or_on_every_parameter():
    """One AdamW step with zero gradients is weight decay alone: it shrinks exactly the parameters it decays, by
    1 - lr * weight_decay. 'matrices': the blocks' Linear weights; 'all' (the replication's AdamW(model.parameters())):
    every parameter, norms, biases, the embedding, the untied output layer and PoPE's delta among them."""
    lr, wd = 0.1, 0.5
    decayed = {}
    for on in ('matrices', 'all'):
        m = tiny('pope', norm='layernorm', bias=True, tie_embeddings=False, init='torch')
        opt = m.configure_optimizers(wd, lr, (0.9, 0.99), 'cpu', decay_all=on == 'all')
        with torch.no_grad():
            for p in m.parameters():
                p.fill_(-1.0)  # (inside delta's range; no parameter at 0, where decay changes nothing)
                p.grad = torch.zeros_like(p)
        opt.step()
        for n, p in m.named_parameters():
            assert torch.all(p == -1.0) or torch.allclose(p, torch.full_like(p, -(1 - lr * wd))), n
        decayed[on] = {n for n, p in m.named_parameters() if torch.all(p != -1.0)}
    names = {n for n, _ in m.named_parameters()}
    rest = {'wte.weight', 'lm_head.weight', 'lm_head.bias', 'ln_f.weight', 'ln_f.bias', 'h.0.ln_1.weight',
            'h.1.ln_2.bias', 'h.0.attn.c_attn.bias', 'h.1.mlp.c_proj.bias', 'h.0.attn.delta', 'h.1.attn.delta'}
    assert rest <= names and decayed['all'] == names
    assert decayed['matrices'] == {f'h.{i}.{w}.weight' for i in range(2)
                                   for w in ('attn.c_attn', 'attn.c_proj', 'mlp.c_fc', 'mlp.c_proj')}


def test_alibi_half_and_yarn_details():
    s = alibi_slopes(8)
    assert torch.all(s[4:] == 0) and torch.allclose(s[:4], torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]))
    assert torch.equal(rope_frequencies(16, 10000.0, yarn_scale=1.0), rope_frequencies(16, 10000.0))
    th, th4 = rope_frequencies(32, 10000.0), rope_frequencies(32, 10000.0, yarn_scale=4.0, yarn_orig_ctx=1024)
    assert th4[0] == th[0] and torch.isclose(th4[-1], th[-1] / 4)  # high frequencies kept, low ones scaled


# -----------------------------------------------------------------------------
# the baselines against their definitions, written here independently of model.py, through the model's forward


def rotate(x, n, theta, pos):
    """The first 2n channels of x as n complex numbers x_i + i x_(i+n), times e^(i pos theta_i); the rest unchanged."""
    z = torch.complex(x[..., :n], x[..., n:2 * n]) * torch.polar(torch.ones(len(pos), n, dtype=F64),
                                                                 pos[:, None].double() * theta)
    return torch.cat([z.real, z.imag, x[..., 2 * n:]], -1)


def forward_by_definition(m, idx, scores):
    """The GPT's logits with each layer's attention scores (B, H, T, T) from scores(q, k, positions, n_head):
    embeddings, pre-norm blocks, causal softmax, the tokenizer's vocabulary."""
    B, T = idx.shape
    pos, x = torch.arange(T), m.wte(idx)
    for block in m.h:
        h, C = block.ln_1(x), x.shape[-1]
        H = block.attn.n_head
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in block.attn.c_attn(h).split(C, dim=2))
        a = scores(q, k, pos, H).masked_fill(pos[None, :] > pos[:, None], float('-inf'))
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + block.attn.c_proj(y)
        x = x + block.mlp(block.ln_2(x))
    return m.lm_head(m.ln_f(x))[..., :m.config.vocab_size]


def rope_scores(theta, mscale=1.0):
    """q.k / sqrt(d) after rotating the first 2 * len(theta) channels of q and k, each also times mscale."""
    def scores(q, k, pos, H):
        n = len(theta)
        qr, kr = rotate(q, n, theta, pos) * mscale, rotate(k, n, theta, pos) * mscale
        return qr @ kr.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores


def yarn_theta(theta, s, L, alpha=1.0, beta=32.0):
    """YaRN (Peng et al. 2023): r = L / wavelength = L theta / 2pi; gamma(r) = 0 below alpha, 1 above beta, linear
    between; theta' = (1 - gamma) theta / s + gamma theta."""
    out = []
    for th in theta.tolist():
        r = L * th / (2 * math.pi)
        gamma = 0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha)
        out.append((1 - gamma) * th / s + gamma * th)
    return torch.tensor(out, dtype=F64)


@pytest.mark.parametrize("impl", ['torch', 'sdpa'])
@pytest.mark.parametrize("pos_emb", ['rope', 'rope_half', 'rope_yarn', 'alibi_half'])
def test_baselines_equal_their_definitions(pos_emb, impl):
    """RoPE rotates every channel pair (i, i + d/2) by t base^(-2i/d); RoPE-half only the first d/2 channels, as a RoPE
    of dimension d/2; YaRN stretches RoPE's frequencies by its ramp and scales the logits by (0.1 ln s + 1)^2; ALiBi
    adds -m_h (t - s) to the scores of the first half of the heads, m_h = 2^(-8 (h + 1) / (H / 2)), none to the rest."""
    d, base, T, H = 32, 10000.0, 24, 4
    kw = dict(yarn_scale=4.0, yarn_orig_ctx=1024) if pos_emb == 'rope_yarn' else {}
    m = tiny(pos_emb.removesuffix('_yarn'), impl, n_embd=H * d, n_head=H, **kw).double().eval()
    idx = torch.randint(0, 17, (2, T), generator=torch.Generator().manual_seed(3))
    if pos_emb == 'alibi_half':
        slopes = torch.tensor([2 ** (-8 * (h + 1) / (H // 2)) for h in range(H // 2)] + [0.0] * (H // 2), dtype=F64)
        scores = lambda q, k, pos, H: (q @ k.transpose(-2, -1) / math.sqrt(d)  # noqa: E731
                                       - slopes[:, None, None] * (pos[:, None] - pos[None, :]))
    else:
        n = d // 2 if pos_emb != 'rope_half' else d // 4
        theta = base ** (-2 * torch.arange(n, dtype=F64) / (2 * n))
        mscale = 1.0
        if pos_emb == 'rope_yarn':
            plain, theta, mscale = theta, yarn_theta(theta, 4.0, 1024), 0.1 * math.log(4.0) + 1
            ramped = (theta > plain / 4 * (1 + 1e-9)) & (theta < plain * (1 - 1e-9))
            assert 3 <= ramped.sum() <= n - 6  # frequencies kept, divided by s and ramped between: all are checked
            torch.testing.assert_close(m.h[0].attn.theta, theta, rtol=1e-12, atol=0)
        scores = rope_scores(theta, mscale)
    with torch.no_grad():
        got, want = m(idx, idx)[0], forward_by_definition(m, idx, scores)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_flops_count_pope_attention_at_1_5x():
    a, b = tiny('pope'), tiny('rope')
    attn_a = a.flops_per_token(1024) - 6 * a.get_num_params()
    attn_b = b.flops_per_token(1024) - 6 * b.get_num_params()
    assert attn_a == 1.5 * attn_b


def test_bad_config_raises():
    with pytest.raises(ValueError, match="pos_emb"):
        GPT(GPTConfig(pos_emb='xpos'))
    with pytest.raises(ValueError, match="attn_impl"):
        GPT(GPTConfig(attn_impl='flash'))
    with pytest.raises(ValueError, match="n_kv_head"):
        GPT(GPTConfig(n_head=8, n_kv_head=3))
    with pytest.raises(ValueError, match="n_embd=512 is not a multiple of n_head=12"):
        GPT(GPTConfig(n_head=12))
    with pytest.raises(ValueError, match="block_size"):
        tiny('learned')(torch.zeros(1, 40, dtype=torch.long))


def test_every_encoding_changes_the_logits():
    """Every registered encoding (model.ENCODINGS) gives logits of its own: against 'none' on the same weights (its
    own parameters, PoPE's delta and learned positions, as initialised), and against every other encoding. A name
    registered without an implementation of its own (a copy of another's) fails here."""
    idx = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(0))
    weights = tiny('none').state_dict()
    logits = {}
    for pos_emb in ENCODINGS:
        m = tiny(pos_emb).double().eval()
        missing, unexpected = m.load_state_dict(weights, strict=False)
        assert not unexpected and all(k.endswith(('attn.delta', 'wpe.weight')) for k in missing), missing
        with torch.no_grad():
            logits[pos_emb] = m(idx, idx)[0]
    for a, b in itertools.combinations(ENCODINGS, 2):
        assert (logits[a] - logits[b]).abs().max() > 1e-6, f'{a} and {b} give the same logits'


def test_a_name_without_an_implementation_is_refused():
    """pos_emb names an entry of model.ENCODINGS, or the model refuses it in one line that lists them."""
    with pytest.raises(ValueError, match=r"^pos_emb='pope_quarter'; choose one of \('pope', .*'none'\)$"):
        GPT(GPTConfig(pos_emb='pope_quarter'))


SHORT_T = model.pope_kernel.SHORT_T if model.pope_kernel else 128  # (no Triton: 'auto' is always 'sdpa')


@pytest.mark.parametrize('cuda,dtype,d,T,path', [
    (True, torch.bfloat16, 64, SHORT_T, 'triton'),  # short sequences at d 64: the all-Triton path's small tiles
    (True, torch.float32, 64, 47, 'triton'),
    (True, torch.bfloat16, 64, SHORT_T + 1, 'fused'),  # else Triton around cuDNN's attention
    (True, torch.bfloat16, 128, 47, 'fused'),
    (True, torch.float16, 32, 47, 'fused'),
    (True, torch.float64, 64, 47, 'sdpa'),  # the kernels take no float64: the reference through SDPA
    (False, torch.float32, 64, 47, 'sdpa'),  # no GPU
])
def test_auto_picks_the_attention_path_from_device_dtype_head_dim_and_length(cuda, dtype, d, T, path):
    """model.pope_path, the one place that picks PoPE's attention: 'auto' by device, dtype, head dim and length (a
    stand-in for q, as the CPU has no CUDA tensor); any other attn_impl is taken as given."""
    q = types.SimpleNamespace(is_cuda=cuda, dtype=dtype, shape=(2, 4, T, d))
    assert model.pope_path('auto', q) == (path if model.pope_kernel else 'sdpa')
    assert [model.pope_path(impl, q) for impl in model.CHOICES['attn_impl'][1:]] == ['torch', 'sdpa', 'fused', 'triton']


@pytest.mark.parametrize('impl', ['sdpa', 'triton'])
def test_pope_model_is_one_graph(impl):
    """torch.compile traces the PoPE model, its attention included (the kernel's stages are opaque custom ops), as
    one graph with no break."""
    if impl == 'triton' and os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('the kernel on CPU tensors needs TRITON_INTERPRET=1')
    m = tiny('pope', impl, n_embd=64)  # head dim 32
    idx = torch.randint(0, 17, (2, 12))
    explain = torch._dynamo.explain(m)(idx, idx)
    assert explain.graph_count == 1 and explain.graph_break_count == 0, explain.break_reasons


DEVICE_CASES = [(p, 'sdpa') for p in ENCODINGS] + [('pope', 'torch'), ('pope', 'triton')]


@pytest.mark.parametrize('pos_emb,impl', DEVICE_CASES, ids=lambda x: str(x))
def test_every_path_runs_on_the_device_of_the_model(pos_emb, impl):
    """The model moved to another device runs every path of its encoding there: forward and backward within and past
    block_size (a longer context builds its own tables), a KV cache with the decode kernel and without, and generate.
    The device is 'meta' (shapes alone): a table built on the CPU meets tensors on 'meta' and fails, as it would meet
    CUDA tensors on a GPU, which the CPU tests cannot."""
    if impl == 'triton' and os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('the kernel on CPU tensors needs TRITON_INTERPRET=1')
    m = tiny(pos_emb, impl, n_embd=128, n_head=4, n_kv_head=2, block_size=16).to('meta')  # head dim 32
    T = 16 if pos_emb in ('learned', 'sinusoidal') else 24
    for n in (12, T):  # within block_size, and past it
        idx = torch.randint(0, 17, (2, n)).to('meta')
        logits, loss = m(idx, idx)
        loss.backward()
        assert logits.device.type == 'meta' and all(p.grad.device.type == 'meta' for p in m.parameters())
    for decode_kernel in (False, True) if model.ENCODINGS[pos_emb].decodes else (False,):
        if decode_kernel and os.environ.get('TRITON_INTERPRET') != '1':
            continue
        cache = KVCache(m, 2, T, 'meta', torch.float32, decode_kernel=decode_kernel)
        m(idx[:, :T - 2], cache=cache, input_pos=torch.arange(T - 2).to('meta'))
        assert m(idx[:, :1], cache=cache, input_pos=torch.tensor([T - 2]).to('meta'))[0].device.type == 'meta'
    assert generate(m.eval(), idx[:, :5], 4).device.type == 'meta'


@pytest.mark.parametrize('switches', [{}, {'pope_mu': 'relu', 'pope_delta': 'none'}, {'pope_mu': 'identity'}],
                         ids=['pope', 'relu-nodelta', 'identity'])
def test_triton_path_agrees_in_the_model(switches):
    """The fused kernel (the CPU interpreter in CI, else the GPU) inside the model: same loss and gradients as sdpa,
    for PoPE and its ablations."""
    pytest.importorskip('triton')
    device = 'cpu' if os.environ.get('TRITON_INTERPRET') == '1' else 'cuda'
    if device == 'cuda' and not torch.cuda.is_available():
        pytest.skip('the Triton kernel needs TRITON_INTERPRET=1 or a GPU')
    idx = torch.randint(0, 17, (2, 12), device=device)
    a, b = (tiny('pope', impl, n_embd=64, **switches).to(device) for impl in ('triton', 'sdpa'))  # head dim 32
    la, lb = a(idx, idx)[1], b(idx, idx)[1]
    torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-5)
    la.backward(), lb.backward()
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-3, atol=1e-5, msg=n)

# -----------------------------------------------------------------------------
# the paper's ablations: the magnitude mu = relu(x) or mu = x, and no delta

MU_DEFINITIONS = {'softplus': lambda x: math.log1p(math.exp(x)), 'relu': lambda x: max(x, 0.0),
                  'identity': lambda x: x}
MU_TORCH = {'softplus': lambda x: torch.log(1 + torch.exp(x)), 'relu': lambda x: torch.where(x > 0, x, 0.0),
            'identity': lambda x: x}
ABLATIONS = [('softplus', False), ('relu', False), ('identity', False), ('softplus', True), ('relu', True)]


def naive_pope_ablation(q, k, v, delta, base, mu):
    """Causal PoPE from the formula, one score at a time, with magnitude mu (a float function); delta None: zero."""
    B, H, T, d = q.shape
    out = torch.zeros(B, H, T, d, dtype=F64)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                scores = [sum(mu(q[b, h, t, c].item()) * mu(k[b, h, s, c].item())
                              * math.cos((s - t) * base ** (-c / d) + (0.0 if delta is None else delta[h, c].item()))
                              for c in range(d)) / math.sqrt(d) for s in range(t + 1)]
                out[b, h, t] = torch.softmax(torch.tensor(scores, dtype=F64), 0) @ v[b, h, :t + 1]
    return out


@pytest.mark.parametrize('mu,no_delta', ABLATIONS)
def test_ablations_equal_the_formula(mu, no_delta):
    q, k, v, delta = rand_qkvd(B=1, H=2, Tq=5, Tk=5, d=8, seed=11)
    delta = None if no_delta else delta
    want = naive_pope_ablation(q, k, v, delta, 10.0, MU_DEFINITIONS[mu])
    for attend in (pope_attention, pope_attention_sdpa):
        torch.testing.assert_close(attend(q, k, v, delta, base=10.0, mu=mu), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('mu,no_delta', ABLATIONS)
def test_ablations_are_their_definition_in_values_and_gradients(mu, no_delta):
    """mu(x) is PoPE with mu = x on the inputs mu(q), mu(k); no delta is a delta of zeros: the reference and the SDPA
    form, values and gradients (q, k, v; delta where there is one), with causal and q_offset > 0 queries."""
    q, k, v, delta = (t.requires_grad_() for t in rand_qkvd(Tq=4, Tk=9, d=16))
    zeros = torch.zeros_like(delta, requires_grad=True)
    do = torch.randn(2, 3, 4, 16, dtype=F64)
    want = pope_attention(MU_TORCH[mu](q), MU_TORCH[mu](k), v, zeros if no_delta else delta, q_offset=5, mu='identity')
    want_grads = torch.autograd.grad(want, (q, k, v, delta) if not no_delta else (q, k, v), do)
    for attend in (pope_attention, pope_attention_sdpa):
        got = attend(q, k, v, None if no_delta else delta, q_offset=5, mu=mu)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
        for g, w in zip(torch.autograd.grad(got, (q, k, v, delta) if not no_delta else (q, k, v), do), want_grads):
            torch.testing.assert_close(g, w, rtol=1e-8, atol=1e-10)
    if mu != 'softplus' or no_delta:  # the switch changes the function
        assert not torch.allclose(pope_attention(q, k, v, delta, q_offset=5), want)


def test_ablation_switches_in_the_model():
    """pope_mu and pope_delta reach every path of the model; pope_delta='none' leaves no delta: no parameter, no
    state_dict entry, nothing for the optimizer; with the same weights it is the model of a zero delta."""
    idx = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(0))
    for impl in ('torch', 'sdpa', 'auto'):
        nodelta, zero = tiny('pope', impl, pope_delta='none', pope_mu='relu'), tiny('pope', impl, pope_delta='zero',
                                                                                   pope_mu='relu')
        assert not any('delta' in n for n, _ in nodelta.named_parameters())
        assert not any('delta' in n for n in nodelta.state_dict())
        assert nodelta.h[0].attn.delta is None
        opt = nodelta.configure_optimizers(0.1, 1e-3, (0.9, 0.99), 'cpu')
        assert sorted(id(p) for g in opt.param_groups for p in g['params']) == sorted(map(id, nodelta.parameters()))
        assert len([n for n, _ in zero.named_parameters() if n.endswith('delta')]) == 2
        zero.load_state_dict(nodelta.state_dict(), strict=False)  # the same weights, delta = 0
        torch.testing.assert_close(nodelta(idx, idx)[1], zero(idx, idx)[1], rtol=1e-6, atol=1e-6)
        nodelta.project_delta()  # nothing to project
        softplus = tiny('pope', impl, pope_delta='zero')
        softplus.load_state_dict(zero.state_dict())
        # same weights, another mu: other logits (the loss of a tiny model, near log 17 for both, may not show it)
        assert (softplus(idx, idx)[0] - zero(idx, idx)[0]).abs().max() > 1e-4
    with pytest.raises(ValueError, match='pope_mu'):
        tiny('pope', pope_mu='gelu')
    with pytest.raises(ValueError, match='pope_delta'):
        tiny('pope', pope_delta='learned')


def test_kernel_and_model_name_the_same_magnitudes():
    pope_kernel = pytest.importorskip('pope_kernel')
    assert tuple(POPE_MUS) == pope_kernel.MUS


def test_replication_model_flags_norm_untied_head_and_init():
    """norm='layernorm' with bias=True has LayerNorm biases; tie_embeddings=False gives the output layer its own
    weights and bias, padded like the tied one (the loss still ignores the padding); init='torch' keeps PyTorch's
    initialisation (embedding N(0, 1)) instead of GPT-2's N(0, 0.02), 0.02 / sqrt(2 n_layer) on the residual
    projections."""
    kw = dict(block_size=16, vocab_size=70, n_layer=2, n_head=2, n_embd=32, pos_emb='pope', attn_impl='sdpa')
    torch.manual_seed(0)
    m = GPT(GPTConfig(**kw, norm='layernorm', bias=True, tie_embeddings=False, init='torch'))
    assert isinstance(m.h[0].ln_1, torch.nn.LayerNorm) and m.h[0].ln_1.bias is not None
    assert m.wte.weight is not m.lm_head.weight and m.wte.weight.shape == (70, 32)
    assert m.lm_head.weight.shape == (128, 32) and m.lm_head.bias.shape == (128,)
    assert 0.8 < m.wte.weight.std() < 1.2  # nn.Embedding's N(0, 1)
    idx, y = torch.randint(0, 70, (3, 16)), torch.randint(0, 70, (3, 16))
    logits, loss = m(idx, y)
    assert logits.shape == (3, 16, 70) and torch.allclose(loss, F.cross_entropy(logits.flatten(0, 1), y.flatten()))
    g = GPT(GPTConfig(**kw))  # the defaults: RMSNorm, tied, GPT-2 init
    assert isinstance(g.h[0].ln_1, torch.nn.RMSNorm) and g.wte.weight is g.lm_head.weight and g.lm_head.bias is None
    assert 0.015 < g.wte.weight[:70].std() < 0.025
    deep = GPT(GPTConfig(**{**kw, 'n_layer': 8, 'n_embd': 128}))  # GPT-2's residual projections: 0.02 / sqrt(2 L)
    for name, p in deep.named_parameters():
        if name.endswith('c_proj.weight') or name.endswith('c_fc.weight'):
            want = 0.02 / 4 if name.endswith('c_proj.weight') else 0.02
            assert abs(p.std().item() / want - 1) < 0.05, (name, p.std().item(), want)
    with pytest.raises(ValueError, match='norm'):
        GPT(GPTConfig(**kw, norm='batchnorm'))


# ----------------------------------------------------------------------------------------------------
# each baseline's positions against its published formula, written out here element by element

def test_sinusoidal_table_is_vaswanis():
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (Vaswani et al. 2017, 3.5)."""
    from model import sinusoidal_table
    T, d = 12, 10
    table = sinusoidal_table(T, d)
    assert table.shape == (T, d)
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    m = GPT(GPTConfig(block_size=T, vocab_size=11, n_layer=1, n_head=2, n_embd=d, pos_emb='sinusoidal'))
    assert torch.equal(m.sin_table, table)
    idx = torch.randint(0, 11, (2, 7))
    assert torch.allclose(block_input(m, idx), m.wte(idx) + table[:7])  # added to the token embeddings


def block_input(m, idx):
    """What the first block of m receives for idx (dropout off): the token embeddings plus the position ones."""
    seen = []
    handle = m.h[0].register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach()))
    try:
        m.eval()(idx)
    finally:
        handle.remove()
    return seen[0]


def test_learned_positions_are_a_table_of_block_size_rows_added_to_the_tokens():
    m = GPT(GPTConfig(block_size=9, vocab_size=11, n_layer=1, n_head=2, n_embd=8, pos_emb='learned'))
    assert m.wpe.weight.shape == (9, 8) and m.wpe.weight.requires_grad
    with torch.no_grad():
        m.wpe.weight.copy_(torch.arange(72.).view(9, 8))
    idx = torch.randint(0, 11, (3, 6))
    assert torch.allclose(block_input(m, idx), m.wte(idx) + torch.arange(72.).view(9, 8)[:6])
    with pytest.raises(ValueError, match='stop at block_size=9'):
        m(torch.zeros(1, 10, dtype=torch.long))
    total = sum(p.numel() for p in m.parameters())  # the count leaves the position table out, as nanoGPT's
    assert m.get_num_params() == total - 9 * 8 and m.get_num_params(non_embedding=False) == total


def test_rope_frequencies_are_base_to_the_minus_2i_over_d():
    """theta_i = base^(-2i/d), i = 0..d/2-1 (Su et al. 2021), for d/2 = n pairs."""
    for n, base in ((4, 10000.0), (8, 500.0)):
        theta = rope_frequencies(n, base)
        assert theta.dtype == torch.float64
        assert theta.tolist() == pytest.approx([base ** (-2 * i / (2 * n)) for i in range(n)], rel=1e-12)


def test_rope_frequencies_with_yarn_are_peng_et_al():
    """YaRN (Peng et al. 2023, 'NTK-by-parts'): r_i = L / lambda_i with lambda_i = 2 pi / theta_i; gamma = 0 for
    r < alpha (the frequency divided by s), 1 for r > beta (kept), linear between; theta'_i = (1-gamma) theta_i / s
    + gamma theta_i."""
    n, base, s, L, alpha, beta = 32, 10000.0, 4.0, 256, 1.0, 32.0
    got = rope_frequencies(n, base, yarn_scale=s, yarn_orig_ctx=L, alpha=alpha, beta=beta).tolist()
    want, kinds = [], set()
    for i in range(n):
        theta = base ** (-2 * i / (2 * n))
        r = L / (2 * math.pi / theta)
        gamma = 0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha)
        kinds.add('kept' if gamma == 1 else 'divided' if gamma == 0 else 'ramped')
        want.append((1 - gamma) * theta / s + gamma * theta)
    assert got == pytest.approx(want, rel=1e-12) and kinds == {'kept', 'divided', 'ramped'}
    assert rope_frequencies(n, base, yarn_scale=1.0).tolist() == rope_frequencies(n, base).tolist()


@pytest.mark.parametrize('n_head', [2, 4, 8, 16])
def test_alibi_slopes_are_press_et_al_on_half_the_heads(n_head):
    """ALiBi (Press et al. 2022): for n heads (a power of 2) the slopes 2^(-8/n), 2^(-16/n), ..., 2^(-8); here on
    the first half of the heads (n = n_head / 2), 0 on the rest; the bias of query t on key s is -m (t - s)."""
    n = n_head // 2
    slopes = alibi_slopes(n_head)
    assert slopes.tolist() == pytest.approx([2 ** (-8 * k / n) for k in range(1, n + 1)] + [0.0] * n, rel=1e-7)
    assert slopes[n - 1].item() == pytest.approx(2 ** -8)
    m = GPT(GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=n_head, n_embd=4 * n_head, pos_emb='alibi_half'))
    t, s = torch.arange(5), torch.arange(5)
    bias = m.h[0].attn.bias(t, s)
    for h in range(n_head):
        for i in range(5):
            for j in range(5):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * (i - j))


def test_pope_delta_inits():
    """'zero': delta exactly 0; 'uniform': drawn from all of [-2 pi, 0]; 'none': no delta parameter at all."""
    kw = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=32, pos_emb='pope')
    torch.manual_seed(0)
    zero = GPT(GPTConfig(**kw, pope_delta='zero'))
    for b in zero.h:
        assert isinstance(b.attn.delta, torch.nn.Parameter) and torch.equal(b.attn.delta, torch.zeros(2, 16))
    uniform = GPT(GPTConfig(**kw, pope_delta='uniform'))
    for b in uniform.h:
        d = b.attn.delta.detach()
        assert d.shape == (2, 16) and d.min() >= -2 * math.pi and d.max() <= 0
        assert d.unique().numel() == d.numel()  # drawn, not a constant
    drawn = torch.cat([b.attn.delta.detach().flatten() for b in uniform.h])  # 64 draws span the range
    assert drawn.min() < -1.5 * math.pi and drawn.max() > -0.5 * math.pi
    none = GPT(GPTConfig(**kw, pope_delta='none'))
    assert all(b.attn.delta is None for b in none.h)
    assert not any(name.endswith('delta') for name, _ in none.named_parameters())
    assert sum(p.numel() for p in zero.parameters()) - sum(p.numel() for p in none.parameters()) == 2 * 2 * 16


@pytest.mark.parametrize('impl', ['torch', 'sdpa', 'triton'])
def test_pope_half_is_pope_with_positions_on_half_the_frequencies(impl):
    """pope_half's scores written out here: sum_c mu_q mu_k cos((s - t) theta_c + delta_c) / sqrt(d) with
    theta_c = base^(-c/d) over the first d/2 frequencies, and sum_c mu_q mu_k cos(delta_c) / sqrt(d) over the other
    d/2 (no position), through the model's forward, for every attn_impl (the kernel's under the Triton interpreter,
    in float32), and through its cache (with the decode kernel, in float32)."""
    if impl == 'triton' and os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('the kernel on CPU tensors needs TRITON_INTERPRET=1')
    d, H, T = 32, 2, 20
    dtype, tol = (torch.float32, 1e-5) if impl == 'triton' else (F64, 1e-9)  # (the kernels: fp16, bf16, fp32)
    m = tiny('pope_half', impl, n_layer=1, n_embd=H * d, n_head=H).to(dtype).eval()
    delta = m.h[0].attn.delta.detach().double()
    theta = torch.cat([10000.0 ** (-torch.arange(d // 2, dtype=F64) / d), torch.zeros(d // 2, dtype=F64)])

    def scores(q, k, pos, H):
        mu_q, mu_k = F.softplus(q.double()), F.softplus(k.double())
        phase = (pos[None, :] - pos[:, None]).double()[None, :, :, None] * theta + delta[:, None, None, :]
        return (torch.einsum('bhtc,bhsc,htsc->bhts', mu_q, mu_k, phase.cos()) / math.sqrt(d)).to(q.dtype)

    idx = torch.randint(0, 17, (2, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        got = m(idx, idx)[0]
        torch.testing.assert_close(got, forward_by_definition(m, idx, scores), rtol=tol, atol=tol)
        for decode_kernel in (False, True) if dtype == torch.float32 else (False,):
            cache = KVCache(m, 2, T, 'cpu', dtype, decode_kernel=decode_kernel)
            m(idx[:, :T - 1], cache=cache, input_pos=torch.arange(T - 1))
            step = m(idx[:, T - 1:], cache=cache, input_pos=torch.tensor([T - 1]))[0]
            torch.testing.assert_close(step[:, -1], got[:, -1], rtol=tol, atol=tol)

# -----------------------------------------------------------------------------
# a fork: PoPE with learnable frequencies (docs/encodings.md's second worked example)


class LearnedThetaAttention(model.PoPEAttention):
    """PoPE whose frequencies are a parameter, initialised at PoPE's."""

    def __init__(self, config, layer):
        super().__init__(config, layer)
        self.theta = torch.nn.Parameter(self.theta)


@pytest.fixture
def learned_theta(monkeypatch):
    monkeypatch.setitem(model.ENCODINGS, 'pope_learned', LearnedThetaAttention)


@pytest.mark.parametrize('impl', ['torch', 'sdpa', 'triton'])
def test_learnable_frequencies_train_through_every_path(learned_theta, impl):
    """A subclass whose theta is an nn.Parameter gets theta's gradient on every attention path (the
    kernel's under the Triton interpreter, in float32), equal to the explicit reference's, and an
    optimizer step moves it."""
    if impl == 'triton' and os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('the kernel on CPU tensors needs TRITON_INTERPRET=1')
    dtype, tol = (torch.float32, 2e-4) if impl == 'triton' else (F64, 1e-9)
    idx = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(3))
    grads = {}
    for path in ('torch', impl):
        m = tiny('pope_learned', path, n_embd=64, n_kv_head=1).to(dtype)  # head dim 32, 2 heads
        m(idx, idx)[1].backward()
        grads[path] = [b.attn.theta.grad for b in m.h]
    for ref, got in zip(grads['torch'], grads[impl]):
        assert got is not None and ref.abs().max() > 0
        torch.testing.assert_close(got.to(F64), ref.to(F64), rtol=tol, atol=tol * ref.abs().max())
    theta = m.h[0].attn.theta.detach().clone()
    torch.optim.SGD(m.parameters(), lr=1e-3).step()
    assert not torch.equal(m.h[0].attn.theta.detach(), theta)


@pytest.mark.parametrize('decode_kernel', [False, True])
def test_cached_decoding_follows_changed_frequencies(learned_theta, decode_kernel):
    """After the frequencies change (as training would change them), decoding through a KV cache
    (the plain path, and the decode kernel's tables under the Triton interpreter) gives the logits
    of the uncached forward pass with the new frequencies."""
    if decode_kernel and os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('the decode kernel on CPU tensors needs TRITON_INTERPRET=1')
    dtype, tol = (torch.float32, 1e-4) if decode_kernel else (F64, 1e-9)
    m = tiny('pope_learned', 'sdpa', n_embd=64).to(dtype).eval()  # head dim 32
    with torch.no_grad():
        for b in m.h:
            b.attn.theta.mul_(1.7)
    idx = torch.randint(0, 17, (2, 14), generator=torch.Generator().manual_seed(5))
    T = idx.shape[1]
    with torch.no_grad():
        want = m(idx, idx)[0][:, -1]
        cache = KVCache(m, 2, T, 'cpu', dtype, decode_kernel=decode_kernel)
        m(idx[:, :T - 1], cache=cache, input_pos=torch.arange(T - 1))
        got = m(idx[:, T - 1:], cache=cache, input_pos=torch.tensor([T - 1]))[0][:, -1]
        plain = tiny('pope', 'sdpa', n_embd=64).to(dtype).eval()
        plain.load_state_dict(m.state_dict(), strict=False)  # the same weights, PoPE's frequencies
        assert not torch.allclose(plain(idx, idx)[0][:, -1], want, atol=1e-3)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize('impl', ['torch', 'sdpa', 'triton'])
def test_pope_follows_pos_base_on_every_path(impl):
    """PoPE at pos_base 100: the model's forward (every attn_impl; the kernel's under the Triton
    interpreter, in float32) is the formula's with theta_c = 100^(-c/d), not the default base's."""
    if impl == 'triton' and os.environ.get('TRITON_INTERPRET') != '1':
        pytest.skip('the kernel on CPU tensors needs TRITON_INTERPRET=1')
    d, H, T = 32, 2, 20
    dtype, tol = (torch.float32, 1e-5) if impl == 'triton' else (F64, 1e-9)
    m = tiny('pope', impl, n_layer=1, n_embd=H * d, n_head=H, pos_base=100.0).to(dtype).eval()
    delta = m.h[0].attn.delta.detach().double()

    def scores_at(base):
        theta = base ** (-torch.arange(d, dtype=F64) / d)

        def scores(q, k, pos, H):
            mu_q, mu_k = F.softplus(q.double()), F.softplus(k.double())
            phase = (pos[None, :] - pos[:, None]).double()[None, :, :, None] * theta + delta[:, None, None, :]
            return (torch.einsum('bhtc,bhsc,htsc->bhts', mu_q, mu_k, phase.cos()) / math.sqrt(d)).to(q.dtype)
        return scores

    idx = torch.randint(0, 17, (2, T), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        got = m(idx, idx)[0]
        torch.testing.assert_close(got, forward_by_definition(m, idx, scores_at(100.0)), rtol=tol, atol=tol)
        assert not torch.allclose(got, forward_by_definition(m, idx, scores_at(10000.0)), atol=1e-3)
