"""Generation: the preallocated KVCache against full forward passes, generate(), the compiled decoding step and the
generation benchmark's smoke run."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F

import generate as gen
from eval import code_commit
from generate import KVCache, decode_step, generate, sample
from model import ENCODINGS, GPT, POPE_MUS, GPTConfig, pope_frequencies

F64 = torch.float64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABSOLUTE = ('learned', 'sinusoidal')


def small(pos_emb, **kw):
    """A 2-layer model of 4 query heads, head dim 8; attn_impl='torch': its full forward is the plain reference."""
    torch.manual_seed(0)
    cfg = dict(block_size=32, vocab_size=17, n_layer=2, n_head=4, n_embd=32, pos_emb=pos_emb, attn_impl='torch',
               pope_delta='uniform')
    return GPT(GPTConfig(**{**cfg, **kw}))


def prefill_then_decode(m, idx, cache, n_prompt, chunk=5):
    """Logits of every position of idx (B, T) through cache: the prompt in one pass, a chunk of tokens in one pass
    (queries past the cache's start among unwritten positions), then one token a step."""
    cut = [0, n_prompt, n_prompt + chunk, *range(n_prompt + chunk + 1, idx.size(1) + 1)]
    out = []
    for a, b in zip(cut[:-1], cut[1:]):
        logits, _ = m(idx[:, a:b], torch.zeros_like(idx[:, a:b]), cache=cache, input_pos=torch.arange(a, b))
        out.append(logits)
    return torch.cat(out, 1)


CASES = [dict(pos_emb=p, n_kv_head=h) for p in ENCODINGS for h in (0, 2)] + [
    dict(pos_emb='pope', n_kv_head=2, pope_mu='relu', pope_delta='none'),
    dict(pos_emb='pope', n_kv_head=2, pope_mu='identity'),
    dict(pos_emb='pope', pope_delta='none')]


@pytest.mark.parametrize('cfg', CASES, ids=lambda c: '-'.join(str(v) for v in c.values()))
def test_cached_logits_equal_the_full_forward_at_every_step(cfg):
    """Every encoding, grouped-query attention (n_kv_head 2 of 4) and PoPE's ablations: the logits through the cache
    (prompt, a chunk, then one token a step; relative encodings past block_size) equal a full forward pass's."""
    m = small(**cfg).double().eval()
    T = m.config.block_size if cfg['pos_emb'] in ABSOLUTE else 45
    idx = torch.randint(0, 17, (2, T))
    full, _ = m(idx, torch.zeros_like(idx))  # logits at every position
    cache = KVCache(m, 2, T, 'cpu', F64)
    torch.testing.assert_close(prefill_then_decode(m, idx, cache, 7), full, rtol=1e-9, atol=1e-9)


def test_pope_caches_mu_of_its_keys():
    """PoPE's cache holds mu(k) per kv head (hd wide, as RoPE's keys), with no delta (it sits on the query side) and
    no phase (attention forms k' = mu(k) e^{i s theta}), written in place: the same tensors at the same addresses from
    the prompt to the last step, and positions not yet reached still zero. On the CPU it holds no kernel tables."""
    m = small('pope', n_kv_head=2, pope_mu='relu').double().eval()
    idx = torch.randint(0, 17, (2, 12))
    cache = KVCache(m, 2, 16, 'cpu', F64)
    tensors = [*cache.k, *cache.v]
    pointers = [t.data_ptr() for t in tensors]
    prefill_then_decode(m, idx, cache, 4, chunk=3)
    assert all(a is b for a, b in zip([*cache.k, *cache.v], tensors))
    assert [t.data_ptr() for t in tensors] == pointers
    assert cache.k[0].shape == cache.v[0].shape == (2, 2, 16, 8)
    assert not cache.decode_kernel and cache.decode_tables == [None, None]
    for t in tensors:
        assert t[:, :, :12].abs().sum() > 0 and not t[:, :, 12:].any()
    attn = m.h[0].attn
    with torch.no_grad():
        k = attn.c_attn(m.h[0].ln_1(m.wte(idx)))[..., 32:48].view(2, 12, 2, 8).transpose(1, 2)  # (B, kv heads, T, hd)
    torch.testing.assert_close(cache.k[0][:, :, :12], POPE_MUS['relu'](k), rtol=1e-12, atol=1e-12)


def kernel_cache(m, B, L):
    """A KVCache whose one-token steps run pope_decode.decode, as on a GPU (here the Triton interpreter on the CPU):
    built by KVCache itself, PoPE's tables too."""
    pytest.importorskip('pope_decode')
    if os.environ.get('TRITON_INTERPRET', '0') != '1':  # compiled Triton needs CUDA tensors (a GPU runs the gpu tests)
        pytest.skip('the decode kernel on CPU tensors needs TRITON_INTERPRET=1')
    return KVCache(m, B, L, 'cpu', torch.float32, decode_kernel=True)


def test_the_decode_kernel_runs_on_a_gpu_for_every_encoding_but_alibi():
    """decode_kernel_for, the choice KVCache makes by default: on a GPU (CUDA, whatever its index), in the kernel's
    dtypes and head dims, every encoding but ALiBi (the kernel has no bias); never on the CPU or in float64."""
    pope_decode = pytest.importorskip('pope_decode')
    from generate import decode_kernel_for
    for pos_emb in ENCODINGS:
        cfg = GPTConfig(n_embd=64, n_head=4, pos_emb=pos_emb)  # head dim 16
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for device in ('cuda', torch.device('cuda', 1)):
                assert decode_kernel_for(cfg, device, dtype) == ENCODINGS[pos_emb].decodes, (pos_emb, dtype, device)
            assert not decode_kernel_for(cfg, 'cpu', dtype)
        assert not decode_kernel_for(cfg, 'cuda', torch.float64)
        for hd in (8, 16, 128, 256):
            assert decode_kernel_for(GPTConfig(n_embd=2 * hd, n_head=2, pos_emb=pos_emb), 'cuda', torch.float32) == (
                hd in pope_decode.DECODE_HEAD_DIMS and ENCODINGS[pos_emb].decodes)
    m = small('pope', n_embd=64)
    assert not KVCache(m, 1, 8, 'cpu', torch.float32).decode_kernel  # the CPU default: the plain path


def test_the_kernel_cache_tables_are_at_the_model_pos_base():
    """A KVCache with the kernel on (forced: CPU tensors, the Triton interpreter) builds PoPE's phase tables at the
    model's pos_base (here 500: the default base's tables differ), 2 tiles' rows at least; RoPE's step needs no
    tables; ALiBi's cannot run the kernel (no bias in it), and a cache forced to is refused in one line."""
    pope_decode = pytest.importorskip('pope_decode')
    m = small('pope', n_embd=64, pos_base=500.0)
    cache = kernel_cache(m, 1, 20)
    want = pope_decode.decode_tables(pope_frequencies(16, 500.0), 2 * pope_decode.DECODE_BLOCK)
    assert cache.decode_kernel and len(cache.decode_tables) == m.config.n_layer
    for tables in cache.decode_tables:
        assert all(torch.equal(a, b) for a, b in zip(tables, want, strict=True))
    default = pope_decode.decode_tables(pope_frequencies(16), 32)[0]
    assert not torch.allclose(cache.decode_tables[0][0], default, atol=0.1)
    assert not any(kernel_cache(small('rope', n_embd=64), 1, 20).decode_tables)
    with pytest.raises(ValueError, match=r"^decode_kernel=True with pos_emb='alibi_half': the decode kernel has no "
                                         r"score bias; leave decode_kernel None \(or False\)$"):
        kernel_cache(small('alibi_half', n_embd=64), 1, 20)


@pytest.mark.parametrize('base', [10000.0, 500.0])
def test_decode_tables_phases_are_exact_at_long_positions(base):
    """decode_tables for a cache of 2^20 + 5 positions: every phase e^{i s theta} the kernel forms (T1 of the tiles'
    starts 16 a, T2 of the offsets b) within 1e-6 of float64 maths (float32 storage: ~6e-8), checked
    for every table entry and at positions 1e5 to 1e6 against Python's own float64 cos and sin. In float32 the angle
    s theta at s = 1e5 is already off by up to ~0.008 rad (at 1e6 ~0.06)."""
    pope_decode = pytest.importorskip('pope_decode')
    d, L, block = 16, 2 ** 20 + 5, pope_decode.DECODE_BLOCK
    t1, t2 = pope_decode.decode_tables(pope_frequencies(d, base), L)
    assert t1.shape == (-(-L // block), 2 * d) and t2.shape == (block, 2 * d) and t1.dtype == t2.dtype == torch.float32
    theta = base ** (-torch.arange(d, dtype=F64) / d)
    for table, pos in ((t1, block * torch.arange(t1.shape[0], dtype=F64)), (t2, torch.arange(block, dtype=F64))):
        angle = pos[:, None] * theta
        err = (table.double() - torch.cat([angle.cos(), angle.sin()], -1)).abs()
        assert err.max() < 1e-6, (err.max().item(), pos[err.amax(-1).argmax()].item())
    for s in (100_000, 123_457, 524_287, 999_999, L - 1):  # phase at s: e^{i 16 a theta} e^{i b theta}
        a, b = divmod(s, block)
        phase = torch.complex(*t1[a].double().view(2, d)) * torch.complex(*t2[b].double().view(2, d))
        ref = torch.tensor([complex(math.cos(s * base ** (-c / d)), math.sin(s * base ** (-c / d))) for c in range(d)])
        assert (phase - ref).abs().max() < 1e-6, s


@pytest.mark.parametrize('pos_emb', ['pope', 'rope'])
def test_decode_kernel_step_equals_the_plain_path(pos_emb, monkeypatch):
    """The one-token steps through pope_decode.decode (PoPE's with its phase tables; RoPE's on its plain keys, as
    every encoding's but ALiBi's; float32, head dim 16, grouped-query attention, pos_base 500 (PoPE's tables built
    by KVCache at the model's base), a cache of 70 positions: tiles of 16, the last ragged; steps that see 61 to 70
    of them, across a tile boundary) give the logits of the plain path (for PoPE k' formed from the cache), and of a
    full forward pass, to float32's rounding."""
    pope_decode = pytest.importorskip('pope_decode')
    assert 64 % pope_decode.DECODE_BLOCK == 0 and 70 % pope_decode.DECODE_BLOCK
    m = small(pos_emb, n_embd=64, block_size=128, n_kv_head=2, pos_base=500.0).eval()
    idx = torch.randint(0, 17, (2, 70))
    caches = [KVCache(m, 2, 70, 'cpu', torch.float32), kernel_cache(m, 2, 70)]
    assert not caches[0].decode_kernel
    calls, decode = [], pope_decode.decode
    monkeypatch.setattr(pope_decode, 'decode', lambda *a: calls.append(a[4] is None) or decode(*a))
    with torch.no_grad():
        plain = prefill_then_decode(m, idx, caches[0], 55)
        assert not calls
        kernel = prefill_then_decode(m, idx, caches[1], 55)
        full, _ = m(idx, torch.zeros_like(idx))
    assert calls == [pos_emb != 'pope'] * 2 * 10  # 2 layers, the one-token steps at 60 to 69
    torch.testing.assert_close(kernel, plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kernel, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('pos_emb', ['pope', 'rope'])
def test_compiled_step_through_the_decode_kernel(pos_emb):
    """decode_step with pope_decode.decode inside (kernel_cache: the interpreter on the CPU) traced by
    torch.compile as one graph (fullgraph, aot_eager): the eager step's tokens, sampled."""
    m = small(pos_emb, n_embd=64, block_size=128, n_kv_head=2).eval()
    idx = torch.randint(0, 17, (2, 64))

    def three_steps(step):
        cache = kernel_cache(m, 2, 64)
        out, input_pos = idx.clone(), torch.tensor([60])
        with torch.no_grad():
            m(out[:, :60], cache=cache, input_pos=torch.arange(60))
            torch.manual_seed(1)
            for _ in range(3):
                step(m, out, cache, input_pos, torch.tensor(1.0), 3)
        return out
    assert torch.equal(three_steps(decode_step),
                       three_steps(torch.compile(decode_step, backend='aot_eager', fullgraph=True)))


@pytest.mark.parametrize('pos_emb', ['pope', 'rope', 'alibi_half'])
def test_positions_past_the_current_length_are_masked(pos_emb):
    """A cache filled with large (finite) garbage before the prompt gives the logits of a zeroed one: no query reads a
    position after its own."""
    m = small(pos_emb, n_kv_head=2).double().eval()
    idx = torch.randint(0, 17, (2, 14))
    caches = [KVCache(m, 2, 20, 'cpu', F64) for _ in range(2)]
    for t in caches[1].k + caches[1].v:
        t.normal_(0, 1e3)
    a, b = (prefill_then_decode(m, idx, cache, 6) for cache in caches)
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("pos_emb", ENCODINGS)
def test_generate_logits_equal_recomputation(pos_emb):
    """Every step's logits in generate (the KV cache; absolute positions re-encoded past block_size) are those of a
    plain forward pass over the sequence so far: all of it, or for learned/sinusoidal positions its last block_size
    tokens."""
    m = small(pos_emb, block_size=16).double().eval()
    seen = []  # the last position's logits of every forward pass that generate makes
    hook = m.register_forward_hook(lambda module, args, out: seen.append(out[0][:, -1]))
    torch.manual_seed(1)
    out = generate(m, torch.randint(0, 17, (2, 5)), 24)  # sampled: the sequence runs past block_size
    hook.remove()
    assert len(seen) == 24
    for i, logits in enumerate(seen):
        idx = out[:, :5 + i]
        window = idx[:, -16:] if pos_emb in ABSOLUTE else idx
        torch.testing.assert_close(logits, m(window)[0][:, -1], rtol=1e-9, atol=1e-9, msg=f'step {i}')


@pytest.mark.parametrize('pos_emb', ['pope', 'rope', 'learned'])
def test_batched_generation_equals_one_sequence_at_a_time(pos_emb):
    """Greedy (top_k=1) generation of 3 prompts at once gives each prompt's own generation; learned positions run past
    block_size (re-encoded windows); a prompt longer than block_size starts from its last block_size tokens."""
    m = small(pos_emb, n_kv_head=2, block_size=16).double().eval()
    idx = torch.randint(0, 17, (3, 6 if pos_emb != 'learned' else 20))
    batched = generate(m, idx, 15, top_k=1)
    assert batched.shape == (3, idx.size(1) + 15) and torch.equal(batched[:, :idx.size(1)], idx)
    for i in range(3):
        assert torch.equal(generate(m, idx[i:i + 1], 15, top_k=1), batched[i:i + 1])


def test_bad_cache_use_raises():
    m = small('learned')
    with pytest.raises(ValueError, match='input_pos'):
        m(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(m, 1, 8, 'cpu', torch.float32))
    with pytest.raises(ValueError, match='block_size=32, got 40 positions'):
        m(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(m, 1, 40, 'cpu', torch.float32),
          input_pos=torch.arange(3))
    assert torch.equal(generate(m, torch.ones(1, 3, dtype=torch.long), 0), torch.ones(1, 3, dtype=torch.long))


@pytest.mark.parametrize('pos_emb', ['pope', 'rope', 'alibi_half', 'learned'])
@pytest.mark.parametrize('T', [5, 20])
def test_greedy_tokens_are_the_argmax_of_full_forward_passes(pos_emb, T):
    """top_k=1: every token generate writes is the argmax of a full forward pass over the sequence before it (its
    last block_size tokens for learned positions, past block_size, and from a prompt longer than it), and the output
    starts with the prompt, unchanged (the prompt tensor too)."""
    m = small(pos_emb, n_kv_head=2, block_size=16).double().eval()
    idx = torch.randint(0, 17, (3, T))
    prompt = idx.clone()
    out = generate(m, idx, 14, top_k=1)
    assert out.shape == (3, T + 14) and torch.equal(out[:, :T], prompt) and torch.equal(idx, prompt)
    for n in range(T, T + 14):
        window = out[:, max(0, n - 16):n] if pos_emb == 'learned' else out[:, :n]
        assert torch.equal(out[:, n], m(window)[0][:, -1].argmax(-1)), f'token {n}'


def test_sample_draws_from_the_softmax_of_the_top_k():
    """sample's draws (200k rows of the same logits at once) follow softmax(logits / temperature) over the top k:
    each token's frequency within 6 standard errors of its probability, tokens outside the top k never drawn."""
    torch.manual_seed(0)
    logits = torch.tensor([1.0, -0.5, 2.0, 0.3, 1.5, -2.0, 0.8])
    N, temperature, k = 200_000, 0.7, 4
    p = torch.softmax(logits / temperature, -1)
    p = torch.where(logits >= logits.topk(k).values[-1], p, 0.0)
    p = (p / p.sum()).double()
    draws = sample(logits.expand(N, -1), torch.tensor(temperature), top_k=k)
    freq = torch.bincount(draws, minlength=7).double() / N
    assert torch.equal(freq == 0, p == 0)
    assert ((freq - p).abs() <= 6 * (p * (1 - p) / N).sqrt()).all(), (freq, p)


@pytest.mark.parametrize('temperature', [0, -1.0, float('nan'), float('inf')])
def test_temperature_not_above_0_is_refused(temperature, monkeypatch):
    """generate (eager and compiled) and sample refuse a temperature that is not a finite number above 0 with one
    line that names greedy decoding (top_k=1), before any forward pass (at 0 the draws would be token 0 in every
    row, silently)."""
    m = small('rope').eval()
    passes = []
    m.register_forward_hook(lambda *a: passes.append(1))
    monkeypatch.setattr(gen, 'compiled_step', lambda *a: pytest.fail('compiled a refused generation'))
    line = r'^temperature=\S+: must be a finite number above 0; for greedy decoding use top_k=1$'
    for compile in (False, True):
        with pytest.raises(ValueError, match=line):
            generate(m, torch.zeros(2, 3, dtype=torch.long), 4, temperature=temperature, compile=compile)
    with pytest.raises(ValueError, match=line):
        sample(torch.randn(2, 17), temperature)
    assert not passes


@pytest.mark.parametrize('temperature', [0.6, 1.7])
def test_every_token_is_drawn_at_the_given_temperature(temperature):
    """Each of the 3 tokens that generate draws (the first after the prompt's pass, then the cached steps) follows
    softmax(logits / temperature) of the model's logits before it. In 4000 sequences from one prompt, at each step:
    the sum of the drawn tokens' logits (what the temperature acts on: a step at temperature 1 is off by over 30
    standard errors) and each token's count are within 6 standard errors of their expectations."""
    m = small('pope', n_kv_head=2).double().eval()
    with torch.no_grad():  # untied from wte and 5x: logits about 1 apart, so that the temperature matters
        m.lm_head.weight = torch.nn.Parameter(m.lm_head.weight * 5)
    N, T = 4000, 4
    torch.manual_seed(2)
    out = generate(m, torch.randint(0, 17, (1, T)).expand(N, -1), 3, temperature=temperature)
    with torch.no_grad():
        logits = m(out, torch.zeros_like(out))[0][:, T - 1:-1]  # (N, 3, V): those that predict the 3 tokens
    p = torch.softmax(logits / temperature, -1)
    drawn = logits.gather(-1, out[:, T:, None])[..., 0].sum(0)  # (3,)
    mean = (p * logits).sum(-1)
    z = (drawn - mean.sum(0)) / ((p * logits ** 2).sum(-1) - mean ** 2).sum(0).sqrt()
    assert (z.abs() <= 6).all(), z
    counts = F.one_hot(out[:, T:], 17).double().sum(0)  # (3, V)
    expected, sd = p.sum(0), (p * (1 - p)).sum(0).sqrt()
    assert ((counts - expected).abs() <= 6 * sd + 1e-9).all(), (counts - expected) / sd


@pytest.mark.parametrize('pos_emb', ['pope', 'alibi_half', 'learned'])
def test_compiled_step_gives_the_eager_tokens(pos_emb, monkeypatch):
    """decode_step traced by torch.compile as one graph (fullgraph: a graph break is an error; the writes into the
    cache, the output and input_pos go through the graph), here with the aot_eager backend, which draws the same
    random numbers as eager (inductor's CPU compile takes over half a minute; the GPU test below runs the real one):
    generate gives the eager tokens, sampled and greedy (learned positions: steps, then windows past block_size), and
    a new length and temperature compile no new graph."""
    from torch._dynamo.utils import counters
    m = small(pos_emb, n_kv_head=2, block_size=16).eval()
    torch._dynamo.reset()
    counters.clear()
    step = torch.compile(decode_step, backend='aot_eager', fullgraph=True)
    monkeypatch.setattr(gen, 'compiled_step', step)  # what compile=True calls
    idx = torch.randint(0, 17, (2, 5))
    for new, temperature, top_k in ((9, 1.0, 3), (14, 0.5, 3), (14, 1.0, 1)):
        outs = []
        for compile in (False, True):
            torch.manual_seed(3)
            outs.append(generate(m, idx, new, temperature, top_k, compile=compile))
        assert torch.equal(*outs), (new, temperature, top_k)
    assert counters['stats']['unique_graphs'] == 2  # top_k 3, then 1: one graph each


@pytest.mark.skipif(not torch.cuda.is_available(), reason='inductor and CUDA graphs: on a GPU')
@pytest.mark.parametrize('pos_emb', ['pope', 'rope'])
def test_compiled_generate_on_a_gpu(pos_emb):
    """generate(compile=True) as sample.py --compile=True runs it (inductor, the step one CUDA graph; two lengths and
    two batch sizes), float32: greedy tokens the argmax of full forward passes (up to float32's rounding), sampled
    tokens among the top k, one graph per batch size and top_k, and no step left out of the CUDA graphs."""
    from torch._dynamo.utils import counters
    m = small(pos_emb, n_kv_head=2, n_embd=64).cuda().eval()  # head dim 16: PoPE's steps run pope_decode.decode
    torch._dynamo.reset()
    counters.clear()
    for top_k in (1, 3):
        for B, T in ((2, 12), (2, 20), (3, 20)):
            idx = torch.randint(0, 17, (B, 5), device='cuda')
            out = generate(m, idx, T - 5, temperature=0.8, top_k=top_k, compile=True)
            assert out.shape == (B, T) and torch.equal(out[:, :5], idx)
            with torch.no_grad():
                logits = m(out, torch.zeros_like(out))[0][:, 4:-1]  # those that predict tokens 5 to T - 1
            drawn = logits.gather(-1, out[:, 5:, None])
            assert ((logits > drawn + 1e-4).sum(-1) < top_k).all(), (top_k, B, T)
    assert counters['stats']['unique_graphs'] == 3  # batch 2, 3 (dynamic from then on), top_k 3 (dynamic too)
    assert counters['inductor']['cudagraph_skips'] == 0  # e.g. the in-place writes as mutated non-static inputs


@pytest.mark.skipif(not torch.cuda.is_available(), reason='inductor and CUDA graphs: on a GPU')
def test_compiled_sampling_on_a_gpu_draws_new_noise_every_step():
    """Every token equally likely (a zeroed vocabulary matrix: all logits 0): the compiled step's draws, replayed from
    its CUDA graph, are uniform and change from step to step (a graph that replayed its first random numbers would
    repeat each row's token): frequencies and the rate of repeats within 6 standard errors."""
    m = small('rope').cuda().eval()
    with torch.no_grad():
        m.lm_head.weight.zero_()
    torch._dynamo.reset()
    tokens = generate(m, torch.zeros(64, 1, dtype=torch.long, device='cuda'), 64, compile=True)[:, 2:].cpu()
    n, p = tokens.numel(), 1 / 17
    freq = torch.bincount(tokens.flatten(), minlength=17) / n
    assert ((freq - p).abs() < 6 * math.sqrt(p * (1 - p) / n)).all(), freq
    repeats = (tokens[:, 1:] == tokens[:, :-1]).double().mean().item()
    assert abs(repeats - p) < 6 * math.sqrt(p * (1 - p) / tokens[:, 1:].numel()), repeats


def test_generation_benchmark_smoke_run(tmp_path, monkeypatch):
    """results/speed/bench_generate.py --smoke: a tiny model and lengths on the CPU, eager, two timed calls a cell;
    every row measured, the table written as JSON and Markdown with the commit of the script's own repository."""
    monkeypatch.delenv('POPE_COMMIT', raising=False)  # the script's and this test's commit both from git
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'results', 'speed', 'bench_generate.py'), '--smoke',
                        '--device=cpu', '--modes=eager', '--eager_repeats=2', f'--out={tmp_path}'], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads((tmp_path / 'generate.json').read_text())
    rows = result['decode_attention'] + result['generate']
    assert rows and not [r for r in rows if r.get('error')], rows
    assert {r['pos_emb'] for r in result['generate']} == {'pope', 'rope'}
    # run from another folder, it records the commit of its own code (the repository of the script)
    assert result['meta']['commit'] == code_commit(ROOT)
    for r in result['generate']:  # the median and spread of two timed calls, RoPE's and PoPE's in turn
        assert len(r['runs_s']) == 2 and 0 < r['tokens_per_s_min'] <= r['tokens_per_s'] <= r['tokens_per_s_max']
        assert math.isfinite(r['tokens_per_s_max'])
    assert all(math.isfinite(r['pope_vs_rope']) for r in result['generate'] if r['pos_emb'] == 'pope')
    assert '| batch |' in (tmp_path / 'generate.md').read_text()
