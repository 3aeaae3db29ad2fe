"""pretrained.py: GPT-2 read from Hugging Face's files (a tiny one, written here by transformers
itself: no network), and models converted to PoPE, as train.py and sample.py use them."""

import io
import json
import os
import pickle
import re
import subprocess
import sys
import zipfile
from dataclasses import asdict

import numpy as np
import pytest
import torch

import pretrained
from model import GPT, GPTConfig
from test_train import ROOT, run, train_here, write_data

transformers = pytest.importorskip('transformers')
TINY = ['--batch_size=8', '--eval_iters=2', '--log_interval=1', '--warmup_iters=2',
        '--learning_rate=0.003', '--device=cpu', '--compile=False', '--eval_contexts=']
N_POSITIONS = 64
CYCLE = dict(vocab_size=20, dtype='uint8', kind='stream', tokenizer='itos',
             itos=[chr(65 + i) for i in range(20)])  # the meta.json of the tiny data set 'cycle'


def tiny_gpt2(folder, **config):
    """(folder, model): a 2-layer GPT-2 of GPT-2's vocabulary in Hugging Face's layout (config.json,
    model.safetensors), every weight drawn at random so that each one shows in the logits."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=50257,
                                  n_positions=N_POSITIONS, **config)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():  # (the tied wte/lm_head once)
            p.add_(torch.randn_like(p) * 0.2)
    hf.save_pretrained(folder)
    return folder, hf


@pytest.fixture(scope='module')
def hf_gpt2(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp('hf') / 'tiny-gpt2')


@pytest.fixture(scope='module')
def workdir(tmp_path_factory, hf_gpt2):
    """Data sets: GPT-2 tokens, and a cycle of 20 tokens (next = current + 1), quickly learnt."""
    d = tmp_path_factory.mktemp('run')
    rng = np.random.default_rng(0)
    gpt2 = dict(vocab_size=50257, dtype='uint16', kind='stream', tokenizer='gpt2')
    write_data(d, 'gpt2_tokens', gpt2, rng.integers(0, 50257, 1000).astype(np.uint16),
               rng.integers(0, 50257, 300).astype(np.uint16))
    write_data(d, 'cycle', CYCLE, (np.arange(4000) % 20).astype(np.uint8),
               (np.arange(1000) % 20).astype(np.uint8))
    return d


def hf_logits(hf, idx):
    with torch.no_grad():
        return hf(idx).logits


def our_logits(model, idx):
    with torch.no_grad():
        return model(idx, idx)[0]  # (with targets: the logits at every position)


def test_gpt2_logits_equal_transformers(hf_gpt2):
    folder, hf = hf_gpt2
    model, ckpt = pretrained.load(str(folder))
    cfg = model.config
    assert (cfg.norm, cfg.bias, cfg.pos_emb, cfg.tie_embeddings, cfg.gelu_approximate,
            cfg.block_size) == ('layernorm', True, 'learned', True, 'tanh', N_POSITIONS)
    assert ckpt['meta']['tokenizer'] == 'gpt2'
    idx = torch.randint(0, 50257, (2, N_POSITIONS), generator=torch.Generator().manual_seed(1))
    ref = hf_logits(hf, idx)
    assert ref.abs().max() > 1  # weights large enough that a wrong one shows
    torch.testing.assert_close(our_logits(model, idx), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('activation', ['gelu', 'gelu_pytorch_tanh'])
def test_gpt2_logits_equal_transformers_with_each_gelu(tmp_path, activation):
    """Hugging Face's 'gelu' is the exact (erf) GELU, the others its tanh form: at these weights the
    two differ by ~2e-3 in the logits."""
    folder, hf = tiny_gpt2(tmp_path, activation_function=activation)
    model, _ = pretrained.load(str(folder))
    idx = torch.randint(0, 50257, (2, N_POSITIONS), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(our_logits(model, idx), hf_logits(hf, idx), atol=1e-5, rtol=1e-5)
    assert model.config.gelu_approximate == ('none' if activation == 'gelu' else 'tanh')


def test_gpt2_from_pytorch_model_bin_in_openai_names(hf_gpt2, tmp_path):
    """The older layout: pytorch_model.bin, names without 'transformer.', the mask buffers saved."""
    folder, hf = hf_gpt2
    state = {k.removeprefix('transformer.'): v for k, v in hf.state_dict().items()}
    for i in range(hf.config.n_layer):
        state[f'h.{i}.attn.bias'] = torch.tril(torch.ones(1, 1, N_POSITIONS, N_POSITIONS))
        state[f'h.{i}.attn.masked_bias'] = torch.tensor(-1e4)
    torch.save(state, tmp_path / 'pytorch_model.bin')
    (tmp_path / 'config.json').write_text((folder / 'config.json').read_text())
    model, _ = pretrained.load(str(tmp_path))
    idx = torch.randint(0, 50257, (1, 20), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(our_logits(model, idx), hf_logits(hf, idx), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('layout', ['model.safetensors', 'pytorch_model.bin'])
def test_a_head_untied_from_the_embedding_is_refused(hf_gpt2, tmp_path, layout):
    """GPT-2 ties lm_head to wte: a file whose lm_head (saved beside wte, as older files do)
    differs by one value is another model, refused with one line."""
    folder, hf = hf_gpt2
    state = {k: v.clone() for k, v in hf.state_dict().items()}
    state['lm_head.weight'][7, 3] += 1.0
    if layout == 'model.safetensors':
        from safetensors.torch import save_file
        save_file(state, tmp_path / layout)
    else:
        torch.save(state, tmp_path / layout)
    (tmp_path / 'config.json').write_text((folder / 'config.json').read_text())
    with pytest.raises(SystemExit, match=r"lm_head\.weight differs from wte\.weight, but GPT-2 "
                                         "ties them"):
        pretrained.load(str(tmp_path))


class Payload:
    """Pickled, it runs os.mkdir(marker) when read without weights_only: code in a pickle."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def damaged(case, hf, good, marker):
    """(file name, bytes) of a damaged weights file; good: a valid model.safetensors's bytes."""
    def saved(obj, **kw):
        buf = io.BytesIO()
        torch.save(obj, buf, **kw)
        return buf.getvalue()

    def zipped():
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, 'w') as z:
            z.writestr('readme.txt', 'not weights')
        return buf.getvalue()
    whole, code = saved(hf.state_dict()), {**hf.state_dict(), 'x': Payload(marker)}
    st, pt = 'model.safetensors', 'pytorch_model.bin'
    return {'safetensors cut short': (st, good[:len(good) // 2]),
            'safetensors of random bytes': (st, np.random.default_rng(0).bytes(5000)),
            'safetensors empty': (st, b''),
            'safetensors header past the end': (st, len(good).to_bytes(8, 'little') + good[8:]),
            'bin of random bytes': (pt, np.random.default_rng(1).bytes(5000)),
            'bin cut short': (pt, whole[:len(whole) // 2]),
            'bin with code': (pt, saved(code)),
            'bin with code, older format': (pt, saved(code, _use_new_zipfile_serialization=False)),
            'bin, a bare pickle with code': (pt, pickle.dumps(Payload(marker), protocol=2)),
            'bin, a pickle of protocol 4': (pt, pickle.dumps(Payload(marker), protocol=4)),
            'bin of a list': (pt, saved([torch.zeros(2)])),
            'bin, a zip of another kind': (pt, zipped())}[case]


@pytest.mark.parametrize('case, what', [
    ('safetensors cut short', 'is cut short'),
    ('safetensors of random bytes', 'is not a checkpoint'),
    ('safetensors empty', 'is empty'), ('safetensors header past the end', 'is cut short'),
    ('bin of random bytes', 'is not a checkpoint'), ('bin cut short', 'is cut short'),
    ('bin with code', 'holds code'), ('bin with code, older format', 'holds code'),
    ('bin, a bare pickle with code', 'holds code'),
    ('bin, a pickle of protocol 4', 'is not a checkpoint'),
    ('bin of a list', 'is not a checkpoint'),
    ('bin, a zip of another kind', 'is not a checkpoint')])
def test_a_damaged_weights_file_is_one_line_and_loads_nothing(hf_gpt2, tmp_path, recwarn, case,
                                                             what):
    """Each damage ends in one line that names the file, says what is wrong and what to do; a
    pickle's code never runs (its os.mkdir leaves no folder); no warning of torch's adds lines."""
    folder, hf = hf_gpt2
    marker = str(tmp_path / 'the code ran')
    name, data = damaged(case, hf, (folder / 'model.safetensors').read_bytes(), marker)
    (tmp_path / 'hf').mkdir()
    (tmp_path / 'hf' / name).write_bytes(data)
    (tmp_path / 'hf' / 'config.json').write_text((folder / 'config.json').read_text())
    with pytest.raises(SystemExit) as stop:
        pretrained.load(str(tmp_path / 'hf'))
    line = str(stop.value.code)
    assert line.startswith(f"{tmp_path / 'hf' / name} {what} (") and '\n' not in line, line
    assert line.endswith('download the model from a source you trust' if what == 'holds code' else
                         'download it again'), line
    assert not os.path.exists(marker) and not [str(w.message) for w in recwarn]


def test_a_shorter_context_keeps_gpt2s_first_positions(hf_gpt2):
    """Cropped to block_size 32 of its 64 positions, GPT-2 keeps the table's first 32 rows: its
    logits on 32 tokens are transformers' own."""
    folder, hf = hf_gpt2
    ckpt = pretrained.read_source(str(folder))
    args = pretrained.fine_tune_args(ckpt, {**ckpt['model_args'], 'block_size': 32}, {'block_size'},
                                     folder, ckpt['meta'], 'data/gpt2_tokens')
    model = GPT(GPTConfig(**args)).eval()
    model.load_state_dict(pretrained.convert(ckpt, model, folder, say=lambda line: None))
    assert torch.equal(model.wpe.weight, hf.transformer.wpe.weight[:32])
    idx = torch.randint(0, 50257, (2, 32), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(our_logits(model, idx), hf_logits(hf, idx), atol=1e-5, rtol=1e-5)


def test_a_config_without_vocab_size_is_gpt2s_50257_as_in_transformers(hf_gpt2, tmp_path):
    """transformers' GPT2Config defaults vocab_size to 50257, GPT-2's BPE: a config.json without it
    is read so (and a weight file of another vocabulary is then refused by its shape)."""
    folder, hf = hf_gpt2
    cfg = json.loads((folder / 'config.json').read_text())
    del cfg['vocab_size']
    (tmp_path / 'config.json').write_text(json.dumps(cfg))
    os.symlink(folder / 'model.safetensors', tmp_path / 'model.safetensors')
    assert transformers.GPT2Config.from_pretrained(tmp_path).vocab_size == 50257
    model, ckpt = pretrained.load(str(tmp_path))
    assert model.config.vocab_size == ckpt['meta']['vocab_size'] == 50257
    idx = torch.randint(0, 50257, (1, 20), generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(our_logits(model, idx), hf_logits(hf, idx), atol=1e-5, rtol=1e-5)


def test_sample_generates_from_a_hugging_face_folder(hf_gpt2, tmp_path):
    """sample.py's greedy continuation (--top_k=1) of a Hugging Face folder is transformers' own."""
    try:
        from prepare.common import gpt2_encoding
        enc = gpt2_encoding()
    except Exception as e:  # no offline BPE files
        pytest.skip(f'no GPT-2 tokenizer: {e}')
    folder, hf = hf_gpt2
    p = run(tmp_path, 'sample.py', f'--init_from={folder}', '--device=cpu', '--start=Hello there',
            '--max_new_tokens=8', '--num_samples=2', '--top_k=1')
    samples = p.stdout.split('---------------\n')
    with torch.no_grad():
        greedy = hf.generate(torch.tensor([enc.encode('Hello there')]), max_new_tokens=8,
                             min_new_tokens=8, do_sample=False, pad_token_id=50256)[0]
    assert len(greedy) == 2 + 8 and len(samples) == 3 and samples[2] == '', p.stdout
    assert samples[:2] == [enc.decode(greedy.tolist()) + '\n'] * 2, (p.stdout, greedy)


def test_train_fine_tunes_gpt2_at_a_shorter_context_and_converts_it_to_pope(workdir, hf_gpt2,
                                                                           capsys):
    folder, hf = hf_gpt2
    common = [f'--init_from={folder}', '--dataset=gpt2_tokens', '--max_iters=2',
              '--eval_interval=2', *TINY, '--batch_size=2']
    assert train_here(workdir, *common, '--block_size=32', '--out_dir=ft') is None
    said = capsys.readouterr().out
    assert (f"init_from={folder}: 29 tensors copied (learned -> learned, wpe.weight cropped to 32 "
            "of 64 positions), dropped: none, new: none") in said, said
    ckpt = torch.load(workdir / 'ft' / 'ckpt.pt', weights_only=False)
    assert ckpt['model_args']['block_size'] == 32 and ckpt['model']['wpe.weight'].shape == (32, 32)
    assert ckpt['model_args']['gelu_approximate'] == 'tanh' and ckpt['model_args']['dropout'] == 0.0
    assert train_here(workdir, *common, '--pos_emb=pope', '--block_size=128',
                      '--out_dir=ft_pope') is None
    said = capsys.readouterr().out
    assert (f"init_from={folder}: 28 tensors copied (learned -> pope), dropped: wpe.weight, new: "
            "h.*.attn.delta, init zero") in said, said
    ckpt = torch.load(workdir / 'ft_pope' / 'ckpt.pt', weights_only=False)
    assert ckpt['model_args']['pos_emb'] == 'pope' and ckpt['model_args']['block_size'] == 128
    assert 'wpe.weight' not in ckpt['model'] and 'h.1.attn.delta' in ckpt['model']


def checkpoint(path, pos_emb, seed=0, **kw):
    """A train.py-style checkpoint of a tiny model on 'cycle' data, weights as GPT draws them."""
    args = asdict(GPTConfig(block_size=16, vocab_size=20, n_layer=1, n_head=2, n_embd=32,
                            pos_emb=pos_emb, pope_delta='uniform', **kw))
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**args))
    torch.save({'model': model.state_dict(), 'model_args': args, 'meta': CYCLE,
                'config': {'dataset': 'cycle'}}, path)
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize('pos_emb', ['learned', 'rope'])
def test_conversion_to_pope_copies_every_other_weight_exactly(workdir, pos_emb):
    path = workdir / f'{pos_emb}.pt'
    old = checkpoint(path, pos_emb)
    ckpt = pretrained.read_source(str(path))
    args = {**ckpt['model_args'], 'pos_emb': 'pope', 'block_size': 48}
    new_args = pretrained.fine_tune_args(ckpt, args, {'pos_emb', 'block_size'}, path, ckpt['meta'],
                                         'data/cycle')
    assert new_args == {**args, 'pope_delta': 'zero'}
    lines = []
    model = GPT(GPTConfig(**new_args))
    state = pretrained.convert(ckpt, model, path, lines.append)
    model.load_state_dict(state)
    new = model.state_dict()
    own = {'wpe.weight'} if pos_emb == 'learned' else set()
    assert set(old) - set(new) == own and set(new) - set(old) == {'h.0.attn.delta'}
    for k in set(old) & set(new):
        assert torch.equal(new[k], old[k]), k
    assert torch.equal(new['h.0.attn.delta'], torch.zeros(2, 16))  # the init of a conversion
    dropped = 'wpe.weight' if pos_emb == 'learned' else 'none'
    assert lines == [f"init_from={path}: {len(set(old) & set(new))} tensors copied ({pos_emb} -> "
                     f"pope), dropped: {dropped}, new: h.*.attn.delta, init zero"]


@pytest.mark.parametrize('pos_emb', ['learned', 'rope'])
def test_a_converted_model_trains(workdir, pos_emb, capsys):
    checkpoint(workdir / f'trains_{pos_emb}.pt', pos_emb)
    out = f'converted_{pos_emb}'
    assert train_here(workdir, f'--init_from=trains_{pos_emb}.pt', '--pos_emb=pope',
                      '--dataset=cycle', '--block_size=16', '--max_iters=30', '--eval_interval=30',
                      f'--out_dir={out}', *TINY) is None
    assert f'({pos_emb} -> pope)' in capsys.readouterr().out
    first, last = [json.loads(line)['val_loss'] for line in open(workdir / out / 'eval_log.jsonl')]
    assert last < first - 1, (first, last)
    ckpt = torch.load(workdir / out / 'ckpt.pt', weights_only=False)
    assert ckpt['model_args']['pos_emb'] == 'pope'


def test_what_a_fine_tune_cannot_do_is_refused_with_one_line(workdir, hf_gpt2):
    folder = hf_gpt2[0]
    checkpoint(workdir / 'refuse.pt', 'learned')
    (workdir / 'not_gpt2').mkdir()
    (workdir / 'not_gpt2' / 'config.json').write_text(json.dumps({'model_type': 'llama'}))
    (workdir / 'run_folder').mkdir()
    (workdir / 'run_folder' / 'ckpt.pt').write_bytes((workdir / 'refuse.pt').read_bytes())
    (workdir / 'no_weights').mkdir()
    (workdir / 'no_weights' / 'config.json').write_text((folder / 'config.json').read_text())
    (workdir / 'smol.gguf').mkdir()  # a folder named after the model file it holds
    (workdir / 'smol.gguf' / 'smol-q4.gguf').write_bytes(b'GGUF')
    cycle = ['--dataset=cycle', '--block_size=16', '--out_dir=refused', *TINY]
    for args, message in (
            (['--init_from=refuse.pt', '--n_layer=2', '--norm=layernorm', *cycle],
             "init_from=refuse.pt keeps its architecture, but n_layer=2 (the model's: 1), "
             "norm='layernorm' (the model's: 'rmsnorm'): drop these flags"),
            (['--init_from=refuse.pt', '--dataset=cycle', '--block_size=32', '--out_dir=refused',
              *TINY], "init_from=refuse.pt has learned positions up to block_size=16: give "
             "--block_size=16 or less, or convert it to an encoding without a table "
             "(--pos_emb=pope)"),
            ([f'--init_from={folder}', *cycle],
             f"init_from={folder} reads 'gpt2' tokens, data/cycle holds 'itos' ones: fine-tune on "
             "a data set of its tokenizer"),
            ([f'--init_from={folder}', '--dataset=gpt2_tokens', '--block_size=128',
              '--out_dir=refused', *TINY],
             f"init_from={folder} has learned positions up to block_size={N_POSITIONS}"),
            (['--init_from=run_folder', *cycle], "run_folder is the folder of a train.py run: give "
             "--init_from=run_folder/ckpt.pt (or best.pt)"),
            (['--init_from=not_gpt2', *cycle],
             "not_gpt2/config.json is of model_type='llama': only GPT-2 ('gpt2') is read here"),
            (['--init_from=no_weights', *cycle],
             "no_weights holds no model.safetensors or pytorch_model.bin"),
            (['--init_from=smol.gguf', *cycle], "smol.gguf is a folder, not a GGUF file: give the "
             ".gguf model file itself, e.g. smol.gguf/smol-q4.gguf")):
        msg = train_here(workdir, *args)
        assert isinstance(msg, str) and message in msg and '\n' not in msg, msg
        assert not (workdir / 'refused').exists()


def test_gpt2_by_name_offline_without_a_cache_is_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, HF_HOME=str(tmp_path / 'hf'), HF_HUB_OFFLINE='1')
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'sample.py'), '--init_from=gpt2',
                        '--device=cpu'], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)  # (HF_HOME: an empty cache)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith("could not fetch openai-community/gpt2 from the Hugging Face hub (")
    assert lines[0].endswith("): go online, or put its config.json and model.safetensors into a "
                             "folder and give --init_from=<that folder>")


def test_a_weight_file_of_another_model_is_one_line(hf_gpt2, tmp_path):
    folder, hf = hf_gpt2
    cfg = json.loads((folder / 'config.json').read_text())
    (tmp_path / 'config.json').write_text(json.dumps({**cfg, 'n_layer': 3}))
    os.symlink(folder / 'model.safetensors', tmp_path / 'model.safetensors')
    with pytest.raises(SystemExit, match=r"is not the model its config describes: missing "
                                         r"h\.2\.ln_1\.weight"):
        pretrained.load(str(tmp_path))
    (tmp_path / 'config.json').write_text(json.dumps({**cfg, 'activation_function': 'relu'}))
    with pytest.raises(SystemExit, match=r"has activation_function='relu': this repository "
                                         r"builds GPT-2 as OpenAI"):
        pretrained.load(str(tmp_path))


def test_a_config_json_is_read_as_gpt2_or_refused_by_the_key_that_differs():
    cfg = {'model_type': 'gpt2', 'n_layer': 2, 'n_head': 4, 'n_embd': 32, 'n_positions': 64}
    args = pretrained.gpt2_model_args({**cfg, 'n_inner': 128, 'activation_function': 'gelu'}, 'f')
    want = dict(n_layer=2, n_head=4, n_kv_head=0, n_embd=32, block_size=64, vocab_size=50257,
                gelu_approximate='none', pos_emb='learned', norm='layernorm', bias=True,
                tie_embeddings=True, dropout=0.0)  # (n_inner 128: 4 x n_embd, as GPT-2's)
    assert {k: args[k] for k in want} == want
    for key, value in (('n_inner', 64), ('layer_norm_epsilon', 1e-6),
                       ('tie_word_embeddings', False), ('scale_attn_weights', False),
                       ('scale_attn_by_inverse_layer_idx', True),
                       ('add_cross_attention', True), ('vocab_size', 50304),
                       ('activation_function', 'silu')):
        with pytest.raises(SystemExit, match=re.escape(f"f/config.json has {key}={value!r}: this "
                                                       "repository builds")):
            pretrained.gpt2_model_args({**cfg, key: value}, 'f')
    with pytest.raises(SystemExit, match=r"f/config.json gives no n_head: write the model's sizes"):
        pretrained.gpt2_model_args({k: v for k, v in cfg.items() if k != 'n_head'}, 'f')


@pytest.mark.parametrize('layout', ['model.safetensors', 'pytorch_model.bin'])
def test_gpt2_by_name_is_fetched_from_the_hub_and_checked_against_its_sizes(hf_gpt2, monkeypatch,
                                                                           tmp_path, layout):
    """model.safetensors first; an upload that has only the pickled weights is fetched again."""
    huggingface_hub = pytest.importorskip('huggingface_hub')
    folder, hf = hf_gpt2
    if layout == 'pytorch_model.bin':
        torch.save(hf.state_dict(), tmp_path / layout)
        (tmp_path / 'config.json').write_text((folder / 'config.json').read_text())
        folder = tmp_path
    fetched = []

    def snapshot_download(repo, allow_patterns):  # the hub, answered by the tiny model's folder
        fetched.append((repo, allow_patterns))
        return str(folder)
    monkeypatch.setattr(huggingface_hub, 'snapshot_download', snapshot_download)
    with pytest.raises(SystemExit, match=r"the cached gpt2-medium is of n_layer, n_head, n_embd = "
                                         r"\(2, 2, 32\), not \(24, 16, 1024\): delete it"):
        pretrained.read_source('gpt2-medium')
    files = ['model.safetensors'] + (['pytorch_model.bin'] if layout == 'pytorch_model.bin' else [])
    assert fetched == [('openai-community/gpt2-medium', ['config.json', f]) for f in files]


def test_conversion_table_is_made_from_the_published_runs(tmp_path):
    """results/conversion/table.md is table.py's output on the committed runs (not typed by hand),
    and a cell is the mean of the seeds' perplexities in their extrapolation.csv files."""
    import csv
    import shutil
    published = os.path.join(ROOT, 'results', 'conversion')
    shutil.copytree(os.path.join(published, 'runs'), tmp_path / 'runs')
    subprocess.run([sys.executable, os.path.join(published, 'table.py'), str(tmp_path)], check=True,
                   capture_output=True)
    made = (tmp_path / 'table.md').read_text()
    assert made == open(os.path.join(published, 'table.md')).read()
    assert made in open(os.path.join(published, 'README.md')).read()  # the page shows this table
    ppl = []
    for seed in os.listdir(tmp_path / 'runs'):
        with open(tmp_path / 'runs' / seed / 'extrapolation' / 'extrapolation.csv') as f:
            ppl += [float(r['ppl']) for r in csv.DictReader(f)
                    if r['label'].startswith('rope-pope30-') and r['length'] == '2560']
    assert len(ppl) == 3
    row = next(line for line in made.splitlines() if line.startswith('| RoPE -> PoPE, 30 %'))
    assert row.split(' | ')[-1].startswith(f'{sum(ppl) / 3:.1f} ({min(ppl):.1f}-{max(ppl):.1f})')


def test_smollm2_table_is_the_published_runs():
    """The SmolLM2 table of results/conversion/README.md: each perplexity is its run's in
    smollm2/extrapolation/extrapolation.csv, each whole-split loss its final.json's, each budget
    its steps' tokens."""
    import csv
    published = os.path.join(ROOT, 'results', 'conversion')
    with open(os.path.join(published, 'smollm2', 'extrapolation', 'extrapolation.csv')) as f:
        ppl = {(r['label'], int(r['length'])): float(r['ppl']) for r in csv.DictReader(f)}
    page = open(os.path.join(published, 'README.md')).read()
    page = page[page.index('## A real pretrained model: SmolLM2-135M'):]
    rows = {'RoPE (the file)': 'rope', 'RoPE + YaRN s=4 (no fine-tune)': 'rope+yarn4',
            'RoPE, fine-tuned': 'rope-ft-s1337', 'RoPE + YaRN s=4, fine-tuned': 'yarn-ft-s1337',
            'RoPE -> PoPE, recalibrated': 'pope-s1337'}
    for name, label in rows.items():
        row = next(line for line in page.splitlines() if line.startswith(f'| {name} |'))
        cells = row.split(' | ')[1:]
        assert cells[1:4] == [f'{ppl[label, L]:.2f}' for L in (8192, 16384, 32768)], name
        if label.endswith('-s1337'):
            final = json.load(open(os.path.join(published, 'smollm2', label, 'final.json')))
            assert cells[0] == f"{final['iter'] * 16 * 8192 / 1e6:.1f}M"
            assert cells[4] == f"{final['val_loss']:.4f} / {final['test_loss']:.4f} |"
        else:
            assert cells[0] == '-' and cells[4] == '- |'
