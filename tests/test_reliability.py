"""Bad input to sample.py and the eval tools, each one line that says what to do (no traceback, no silently wrong
answer): ill-posed indirect-indexing questions, checkpoints whose weights do not fit their model, data of another
vocabulary or layout, bad devices, sizes below 1, allocations that cannot fit, a read-only --out, data rewritten
under a running evaluation. Tiny models and data made here (CPU)."""

import json
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig
from prepare import indirect_indexing as ii
from prepare.common import read_meta

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def save_ckpt(folder, meta, pos_emb='pope', block_size=None, dataset='x'):
    """A tiny untrained model for meta's data set in train.py's ckpt.pt format; the path."""
    torch.manual_seed(0)
    args = dict(n_layer=1, n_head=2, n_embd=16, block_size=block_size or meta.get('row_len', 17) - 1,
                vocab_size=meta['vocab_size'], pos_emb=pos_emb, attn_impl='sdpa', bias=False, dropout=0.0)
    model = GPT(GPTConfig(**args))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, 'ckpt.pt')
    torch.save(dict(model=model.state_dict(), model_args=args, config={'dataset': dataset}, meta=meta, iter_num=0),
               path)
    return path


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """Two small indirect-indexing data sets (right-padded; '<bos>' first) and a character stream."""
    d = tmp_path_factory.mktemp('data')
    for variant in ('indirect_indexing', 'indirect_indexing_bos'):
        ii.prepare(str(d / variant), sizes={'train': 40, 'val': 20, 'test': 20}, variant=variant)
    stream = d / 'chars'
    stream.mkdir()
    np.random.default_rng(0).integers(0, 8, 500).astype(np.uint8).tofile(stream / 'val.bin')
    (stream / 'meta.json').write_text(json.dumps(dict(vocab_size=8, dtype='uint8', kind='stream', tokenizer='itos',
                                                      itos=list('abcdefgh'), sep='', eot=None)))
    return d


def sample(monkeypatch, capsys, *argv):
    """sample.py run in this process: (exit message or None, stdout)."""
    monkeypatch.setattr(sys, 'argv', ['sample.py', *argv])
    monkeypatch.chdir(ROOT)
    try:
        runpy.run_path(os.path.join(ROOT, 'sample.py'), run_name='__main__')
        code = None
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr()


# ----------------------------------------------------------------------------------------------------
# indirect-indexing questions (prepare/indirect_indexing.py's question, sample.py's --start)

@pytest.mark.parametrize('text,says', [
    ('ABCDEFGHIJKLMNOPQRST,Z,+1,', "the source 'Z' is not a letter of the string"),
    ('ABCDEFGHIJKLMNOPQRST,A,-1,', 'outside the string'),
    ('ABCDEFGHIJKLMNOPQRST,T,+3,', 'outside the string'),
    ('ABCDEFGHIJKLMNOPQRSTUVWXYZ,A,+20,', 'a shift of +20 is not one this data set was made with (-15 to +15'),
    ('ABCDEFGHIJKLMNOPQRST,C,0,', 'a shift of +0 is not one'),
    ('ABCDEFGHIJKLMNOPQRSA,C,+1,', 'A repeat in the string'),
    ('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz,A,+1,', 'longer than the 47 before'),
    ('ABC1,A,+1,', 'are letters'),
])
def test_an_ill_posed_question_is_refused(data, text, says):
    meta = read_meta(str(data / 'indirect_indexing'))
    with pytest.raises(ValueError) as err:
        ii.question(text, meta)
    assert says in str(err.value)


def test_a_well_posed_question_still_passes(data):
    meta = read_meta(str(data / 'indirect_indexing'))
    assert len(ii.question('ABCDEFGHIJKLMNOPQRST,C,-2,', meta)) == 20 + 1 + 1 + 1 + 2 + 1
    assert ii.question('ABCDEFGHIJKLMNOPQRST, T, -15', meta)[-5:] == [ii.ITOS.index(c) for c in ',-15,']


def test_sample_refuses_an_ill_posed_question_in_one_line(data, tmp_path, monkeypatch, capsys):
    save_ckpt(str(tmp_path / 'run'), read_meta(str(data / 'indirect_indexing')))
    code, out = sample(monkeypatch, capsys, f'--out_dir={tmp_path / "run"}', '--start=ABCDEFGHIJKLMNOPQRST,Z,+1,',
                       '--device=cpu')
    assert code == "--start: the source 'Z' is not a letter of the string 'ABCDEFGHIJKLMNOPQRST': ask for one of " \
                   "its letters" and out.out == ''


def test_sample_prints_no_bos_in_the_answer(data, tmp_path, monkeypatch, capsys):
    meta = read_meta(str(data / 'indirect_indexing_bos'))
    save_ckpt(str(tmp_path / 'bos'), meta)
    code, out = sample(monkeypatch, capsys, f'--out_dir={tmp_path / "bos"}', '--start=ABCDEFGHIJKLMNOPQRST,C,+2,',
                       '--device=cpu')
    assert code is None, code
    answer = out.out.splitlines()[0]
    assert '<bos>' not in answer and answer.startswith('ABCDEFGHIJKLMNOPQRST,C,+2,') and len(answer) == 27


# ----------------------------------------------------------------------------------------------------
# sample.py: devices, sizes, checkpoints

@pytest.mark.parametrize('device,says', [('foo', "'foo': use cpu, cuda or cuda:<n>"),
                                         ('cuda:7' if torch.cuda.device_count() else 'cuda', 'torch finds')])
def test_sample_bad_device_is_one_line(data, tmp_path, monkeypatch, capsys, device, says):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    code, out = sample(monkeypatch, capsys, f'--out_dir={tmp_path / "run"}', f'--device={device}', '--start=abc')
    assert code == 2 and says in out.err.splitlines()[-1] and 'Traceback' not in out.err  # argparse's error line


@pytest.mark.parametrize('argv', [['--max_new_tokens=1000000000'], ['--num_samples=100000000'],
                                  ['--num_samples=100000', '--max_new_tokens=100000']])
def test_sample_refuses_what_cannot_fit(data, tmp_path, monkeypatch, capsys, argv):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    code, out = sample(monkeypatch, capsys, f'--out_dir={tmp_path / "run"}', '--device=cpu', '--start=abc', *argv)
    assert isinstance(code, str) and 'ask for fewer tokens or samples' in code and 'GiB free on cpu' in code


@pytest.mark.parametrize('pos_emb', ['learned', 'sinusoidal'])
def test_sample_refuses_a_prompt_beyond_an_absolute_context(data, tmp_path, monkeypatch, capsys, pos_emb):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), pos_emb, block_size=16)
    code, _ = sample(monkeypatch, capsys, f'--out_dir={tmp_path / "run"}', '--device=cpu', '--start=' + 'a' * 17)
    assert code == f"--start is 17 tokens, longer than the 16 this model reads ({pos_emb} positions stop at " \
                   "block_size): give a shorter prompt"


def broken_ckpt(tmp_path, data):
    """A checkpoint with the right keys and the wrong contents: weights of another width than its model_args."""
    path = save_ckpt(str(tmp_path / 'broken'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    ckpt = torch.load(path, weights_only=False)
    ckpt['model_args']['n_embd'] = 32
    torch.save(ckpt, path)
    return path


def test_sample_on_weights_that_do_not_fit_is_one_line(data, tmp_path, monkeypatch, capsys):
    broken_ckpt(tmp_path, data)
    code, _ = sample(monkeypatch, capsys, f'--out_dir={tmp_path / "broken"}', '--device=cpu', '--start=abc')
    assert isinstance(code, str) and 'its weights do not fit the model its model_args describe' in code
    assert 'use another checkpoint, or train again' in code and '\n' not in code
