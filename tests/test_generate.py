"""Generation: the preallocated KVCache against full forward passes, GPT.generate, the compiled decoding step and the
generation benchmark's smoke run."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from model import GPT, POPE_MUS, POS_EMBS, GPTConfig, KVCache

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


CASES = [dict(pos_emb=p, n_kv_head=h) for p in POS_EMBS for h in (0, 2)] + [
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
    cache = KVCache(m.config, 2, T, 'cpu', F64)
    torch.testing.assert_close(prefill_then_decode(m, idx, cache, 7), full, rtol=1e-9, atol=1e-9)


def test_pope_caches_the_cartesian_keys_of_its_kv_heads():
    """PoPE's cache holds k' = [mu(k) cos(s theta), mu(k) sin(s theta)] (2 hd wide) per kv head, with no delta (it
    sits on the query side), written in place: the same tensors at the same addresses from the prompt to the last
    step, and positions not yet reached still zero."""
    m = small('pope', n_kv_head=2, pope_mu='relu').double().eval()
    idx = torch.randint(0, 17, (2, 12))
    cache = KVCache(m.config, 2, 16, 'cpu', F64)
    tensors = [*cache.k, *cache.v]
    pointers = [t.data_ptr() for t in tensors]
    prefill_then_decode(m, idx, cache, 4, chunk=3)
    assert all(a is b for a, b in zip([*cache.k, *cache.v], tensors))
    assert [t.data_ptr() for t in tensors] == pointers
    assert cache.k[0].shape == (2, 2, 16, 16) and cache.v[0].shape == (2, 2, 16, 8)
    for t in tensors:
        assert t[:, :, :12].abs().sum() > 0 and not t[:, :, 12:].any()
    attn = m.h[0].attn
    with torch.no_grad():
        k = attn.c_attn(m.h[0].ln_1(m.wte(idx)))[..., 32:48].view(2, 12, 2, 8).transpose(1, 2)  # (B, kv heads, T, hd)
    phi = torch.arange(12, dtype=F64)[:, None] * 10000.0 ** (-torch.arange(8, dtype=F64) / 8)
    mu = POPE_MUS['relu'](k)
    torch.testing.assert_close(cache.k[0][:, :, :12], torch.cat([mu * phi.cos(), mu * phi.sin()], -1), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize('pos_emb', ['pope', 'rope', 'alibi_half'])
def test_positions_past_the_current_length_are_masked(pos_emb):
    """A cache filled with large (finite) garbage before the prompt gives the logits of a zeroed one: no query reads a
    position after its own."""
    m = small(pos_emb, n_kv_head=2).double().eval()
    idx = torch.randint(0, 17, (2, 14))
    caches = [KVCache(m.config, 2, 20, 'cpu', F64) for _ in range(2)]
    for t in caches[1].k + caches[1].v:
        t.normal_(0, 1e3)
    a, b = (prefill_then_decode(m, idx, cache, 6) for cache in caches)
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("pos_emb", POS_EMBS)
def test_generate_logits_equal_recomputation(pos_emb):
    """Every step's logits in generate (the KV cache; absolute positions re-encoded past block_size) are those of a
    plain forward pass over the sequence so far: all of it, or for learned/sinusoidal positions its last block_size
    tokens."""
    m = small(pos_emb, block_size=16).double().eval()
    seen = []  # the last position's logits of every forward pass that generate makes
    hook = m.register_forward_hook(lambda module, args, out: seen.append(out[0][:, -1]))
    torch.manual_seed(1)
    out = m.generate(torch.randint(0, 17, (2, 5)), 24)  # sampled: the sequence runs past block_size
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
    batched = m.generate(idx, 15, top_k=1)
    assert batched.shape == (3, idx.size(1) + 15) and torch.equal(batched[:, :idx.size(1)], idx)
    for i in range(3):
        assert torch.equal(m.generate(idx[i:i + 1], 15, top_k=1), batched[i:i + 1])


def test_bad_cache_use_raises():
    m = small('learned')
    with pytest.raises(ValueError, match='input_pos'):
        m(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(m.config, 1, 8, 'cpu', torch.float32))
    with pytest.raises(ValueError, match='block_size=32, got 40 positions'):
        m(torch.zeros(1, 3, dtype=torch.long), cache=KVCache(m.config, 1, 40, 'cpu', torch.float32),
          input_pos=torch.arange(3))
    assert torch.equal(m.generate(torch.ones(1, 3, dtype=torch.long), 0), torch.ones(1, 3, dtype=torch.long))


def decode_logits(m, step, idx, n_prompt):
    """The logits of one-token steps step(token, cache=, input_pos=) after an eager prompt, through a fresh cache."""
    cache = KVCache(m.config, idx.size(0), idx.size(1), idx.device, m.wte.weight.dtype)
    m(idx[:, :n_prompt], cache=cache, input_pos=torch.arange(n_prompt, device=idx.device))
    return torch.stack([step(idx[:, t:t + 1], cache=cache, input_pos=torch.tensor([t], device=idx.device))[0].clone()
                        for t in range(n_prompt, idx.size(1))])  # (a CUDA graph's output is overwritten by the next)


@pytest.mark.parametrize('pos_emb', ['pope', 'alibi_half'])
def test_compiled_decoding_step_gives_the_eager_logits(pos_emb):
    """The decoding step traced by torch.compile as one graph (fullgraph: a graph break is an error; the cache's
    in-place writes go through the graph), here with the aot_eager backend (inductor's CPU compile takes ~1 minute in
    CI; the GPU test below runs the real one): the eager logits, in generate too."""
    m = small(pos_emb, n_kv_head=2).eval()
    torch._dynamo.reset()
    m._compiled_forward = torch.compile(m.forward, backend='aot_eager', fullgraph=True)  # what compile=True calls
    idx = torch.randint(0, 17, (2, 12))
    with torch.no_grad():
        eager, compiled = decode_logits(m, m, idx, 5), decode_logits(m, m.compiled_forward(), idx, 5)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-6)
    outs = []
    for compile in (False, True):
        torch.manual_seed(3)
        outs.append(m.generate(idx[:, :5], 10, top_k=3, compile=compile))
    assert torch.equal(*outs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='inductor and CUDA graphs: on a GPU')
@pytest.mark.parametrize('pos_emb', ['pope', 'rope'])
def test_compiled_generate_on_a_gpu(pos_emb):
    """generate(compile=True) as sample.py --compile=True runs it (inductor, one CUDA graph a step, two cache lengths
    and two batch sizes): the eager logits in float32, and no step left out of the CUDA graphs."""
    from torch._dynamo.utils import counters
    m = small(pos_emb, n_kv_head=2, attn_impl='auto').cuda().eval()
    torch._dynamo.reset()
    counters.clear()
    for B, T in ((2, 12), (2, 20), (3, 20)):
        idx = torch.randint(0, 17, (B, T), device='cuda')
        with torch.no_grad():
            eager, compiled = decode_logits(m, m, idx, 5), decode_logits(m, m.compiled_forward(), idx, 5)
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4)
        assert m.generate(idx[:, :5], T - 5, top_k=1, compile=True).shape == (B, T)
    assert counters['inductor']['cudagraph_skips'] == 0  # e.g. the cache's writes as mutated non-static inputs


def test_generation_benchmark_smoke_run(tmp_path):
    """results/speed/bench_generate.py --smoke: a tiny model and lengths on the CPU, eager; every row measured, the
    table written as JSON and Markdown."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'results', 'speed', 'bench_generate.py'), '--smoke',
                        '--device=cpu', '--modes=eager', f'--out={tmp_path}'], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads((tmp_path / 'generate.json').read_text())
    rows = result['decode_attention'] + result['generate']
    assert rows and not [r for r in rows if r.get('error')], rows
    assert {r['pos_emb'] for r in result['generate']} == {'pope', 'rope'}
    assert all(r['tokens_per_s'] > 0 and math.isfinite(r['tokens_per_s']) for r in result['generate'])
    assert '| batch |' in (tmp_path / 'generate.md').read_text()
