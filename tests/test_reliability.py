"""Bad input to sample.py and the eval tools, each one line that says what to do (no traceback, no silently wrong
answer): ill-posed indirect-indexing questions, checkpoints whose weights do not fit their model, data of another
vocabulary or layout, bad devices, sizes below 1, allocations that cannot fit, a read-only --out, data rewritten
under a running evaluation. Tiny models and data made here (CPU)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig
from prepare import indirect_indexing as ii
from prepare.data import read_meta
from test_train import sample_here

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


def sample(capsys, *argv):
    """sample.py run in this process, in the repository's folder: (exit message or None, what it printed)."""
    return sample_here(ROOT, *argv), capsys.readouterr()


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


def test_sample_refuses_an_ill_posed_question_in_one_line(data, tmp_path, capsys):
    save_ckpt(str(tmp_path / 'run'), read_meta(str(data / 'indirect_indexing')))
    code, out = sample(capsys, f'--out_dir={tmp_path / "run"}', '--start=ABCDEFGHIJKLMNOPQRST,Z,+1,',
                       '--device=cpu')
    assert code == "--start: the source 'Z' is not a letter of the string 'ABCDEFGHIJKLMNOPQRST': ask for one of " \
                   "its letters" and out.out == ''


def test_sample_prints_no_bos_in_the_answer(data, tmp_path, capsys):
    meta = read_meta(str(data / 'indirect_indexing_bos'))
    save_ckpt(str(tmp_path / 'bos'), meta)
    code, out = sample(capsys, f'--out_dir={tmp_path / "bos"}', '--start=ABCDEFGHIJKLMNOPQRST,C,+2,',
                       '--device=cpu')
    assert code is None, code
    answer = out.out.splitlines()[0]
    assert '<bos>' not in answer and answer.startswith('ABCDEFGHIJKLMNOPQRST,C,+2,') and len(answer) == 27


# ----------------------------------------------------------------------------------------------------
# sample.py: its flags, devices, sizes, checkpoints

def test_sample_prints_what_generate_draws_at_its_flags(data, tmp_path, capsys):
    """--seed, --temperature, --top_k and --max_new_tokens reach generate: sample.py prints the tokens generate draws
    from the same model, seeded alike, at those settings (a model of peaked logits: each flag changes the draws)."""
    from checkpoint import load_checkpoint
    from generate import generate
    meta = read_meta(str(data / 'chars'))
    path = save_ckpt(str(tmp_path / 'run'), meta, block_size=64)
    ckpt = torch.load(path, weights_only=False)
    ckpt['model']['wte.weight'] *= 10  # (tied to the output layer)
    torch.save(ckpt, path)
    for seed, temperature, top_k, n in ((7, 2.5, None, 30), (3, 2.5, 2, 24)):
        flags = [f'--seed={seed}', f'--temperature={temperature}', f'--max_new_tokens={n}'] + \
            [f'--top_k={top_k}'] * (top_k is not None)
        code, out = sample(capsys, f'--out_dir={tmp_path / "run"}', '--start=abc', '--device=cpu', *flags)
        torch.manual_seed(seed)  # as sample.py: seeded, then the model made (its init draws too) and run
        model, _ = load_checkpoint(path)
        want = generate(model, torch.tensor([[0, 1, 2]]), n, temperature=temperature, top_k=top_k)[0]
        assert code is None and out.out.splitlines()[0] == ''.join(meta['itos'][i] for i in want), out.out

@pytest.mark.parametrize('device,says', [('foo', "'foo': use cpu, cuda or cuda:<n>"),
                                         ('cuda:7' if torch.cuda.device_count() else 'cuda', 'torch finds')])
def test_sample_bad_device_is_one_line(data, tmp_path, capsys, device, says):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    code, out = sample(capsys, f'--out_dir={tmp_path / "run"}', f'--device={device}', '--start=abc')
    assert code == 2 and says in out.err.splitlines()[-1] and 'Traceback' not in out.err  # argparse's error line


@pytest.mark.parametrize('argv', [['--max_new_tokens=1000000000'], ['--num_samples=100000000'],
                                  ['--num_samples=100000', '--max_new_tokens=100000']])
def test_sample_refuses_what_cannot_fit(data, tmp_path, capsys, argv):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    code, out = sample(capsys, f'--out_dir={tmp_path / "run"}', '--device=cpu', '--start=abc', *argv)
    assert isinstance(code, str) and 'ask for fewer tokens or samples' in code and 'GiB free on cpu' in code


@pytest.mark.parametrize('pos_emb', ['learned', 'sinusoidal'])
def test_sample_refuses_a_prompt_beyond_an_absolute_context(data, tmp_path, capsys, pos_emb):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), pos_emb, block_size=16)
    code, _ = sample(capsys, f'--out_dir={tmp_path / "run"}', '--device=cpu', '--start=' + 'a' * 17)
    assert code == f"--start is 17 tokens, longer than the 16 this model reads ({pos_emb} positions stop at " \
                   "block_size): give a shorter prompt"


@pytest.mark.parametrize('content', [b'\xff\xfe\x00binary\x80', b'caf\xe9 latin-1'])
def test_sample_on_a_prompt_file_that_is_not_utf8_text_is_one_line(data, tmp_path, capsys,
                                                                  content):
    save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    (tmp_path / 'prompt.bin').write_bytes(content)
    code, out = sample(capsys, f'--out_dir={tmp_path / "run"}', '--device=cpu',
                       f'--start=FILE:{tmp_path / "prompt.bin"}')
    assert code == f"--start=FILE:{tmp_path / 'prompt.bin'} is not UTF-8 text: give a text file"


@pytest.mark.parametrize('drop', ['itos', 'tokenizer'])
def test_sample_on_a_data_set_without_a_vocabulary_is_one_line(data, tmp_path, capsys, drop):
    meta = json.loads((data / 'chars' / 'meta.json').read_text())
    del meta[drop]
    save_ckpt(str(tmp_path / 'run'), meta, block_size=16)
    code, out = sample(capsys, f'--out_dir={tmp_path / "run"}', '--device=cpu', '--start=abc')
    assert code == (f"the model's meta (its data set's meta.json) has no '{drop}': this model cannot turn "
                    "text into tokens; prepare its data set with `python -m prepare.<name>` and train again")


def broken_ckpt(tmp_path, data):
    """A checkpoint with the right keys and the wrong contents: weights of another width than its model_args."""
    path = save_ckpt(str(tmp_path / 'broken'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    ckpt = torch.load(path, weights_only=False)
    ckpt['model_args']['n_embd'] = 32
    torch.save(ckpt, path)
    return path


def test_sample_on_weights_that_do_not_fit_is_one_line(data, tmp_path, capsys):
    broken_ckpt(tmp_path, data)
    code, _ = sample(capsys, f'--out_dir={tmp_path / "broken"}', '--device=cpu', '--start=abc')
    assert isinstance(code, str) and 'its weights do not fit the model its model_args describe' in code
    assert 'use another checkpoint, or train again' in code and '\n' not in code


# ----------------------------------------------------------------------------------------------------
# the eval tools

def tool(name, *argv):
    """eval.<name>.main(argv): the SystemExit's code (a message, or argparse's 2)."""
    import importlib
    with pytest.raises(SystemExit) as e:
        importlib.import_module(f'eval.{name}').main([str(a) for a in argv])
    return e.value.code


def stream(folder, vocab, n=400, **meta):
    """A token stream data set of the given vocabulary in folder; the path of its val.bin."""
    os.makedirs(folder, exist_ok=True)
    dtype = 'uint8' if vocab <= 256 else 'uint16'
    np.random.default_rng(1).integers(0, vocab, n).astype(dtype).tofile(os.path.join(folder, 'val.bin'))
    with open(os.path.join(folder, 'meta.json'), 'w') as f:
        json.dump(dict(vocab_size=vocab, dtype=dtype, kind='stream', **meta), f)
    return os.path.join(folder, 'val.bin')


def test_eval_on_weights_that_do_not_fit_is_one_line(data, tmp_path):
    path = broken_ckpt(tmp_path, data)
    for name, argv in (('extrapolation', ['--ckpt', path, '--data', data / 'chars' / 'val.bin', '--lengths', '16']),
                       ('frequency_usage', ['--pope', path, '--data', data / 'chars' / 'val.bin'])):
        code = tool(name, *argv, '--out', tmp_path / 'out' / name, '--device', 'cpu')
        assert isinstance(code, str) and f'{path}: its weights do not fit the model' in code and '\n' not in code
    assert not (tmp_path / 'out').exists()


def test_eval_on_data_of_another_vocabulary_or_layout_is_one_line(data, tmp_path):
    chars = save_ckpt(str(tmp_path / 'chars'), json.loads((data / 'chars' / 'meta.json').read_text()),
                      block_size=16, dataset='chars')
    other = stream(str(tmp_path / 'other'), 50)
    code = tool('extrapolation', '--ckpt', chars, '--data', other, '--lengths', '16', '--out', tmp_path / 'o')
    assert code == (f"{tmp_path / 'other'} holds tokens of a vocabulary of 50, {chars} a model of 8: give the data "
                    "set it was trained on (data/chars)")
    code = tool('frequency_usage', '--pope', chars, '--data', other, '--out', tmp_path / 'o' / 'f')
    assert 'holds tokens of a vocabulary of 50' in code
    meta = read_meta(str(data / 'indirect_indexing'))
    probe_ckpt = save_ckpt(str(tmp_path / 'ii'), meta, dataset='indirect_indexing')
    code = tool('indirect_probe', 'probe', probe_ckpt, '--data_dir', data / 'indirect_indexing_bos', '--n', 5,
                '--out', tmp_path / 'o')
    assert 'holds tokens of a vocabulary of 67' in code and 'data/indirect_indexing' in code
    stream(str(tmp_path / "flat"), meta["vocab_size"], n=48 * 6)  # the same vocabulary, as a stream
    os.replace(os.path.join(tmp_path / 'flat', 'val.bin'), os.path.join(tmp_path / 'flat', 'test.bin'))
    code = tool('indirect_probe', 'probe', probe_ckpt, '--data_dir', tmp_path / 'flat', '--n', 5, '--out',
                tmp_path / 'o')
    assert "is laid out otherwise than the data of the checkpoint of 'indirect_indexing' (kind 'stream' where " \
           "the model's has 'examples'" in code
    assert not (tmp_path / 'o').exists()


@pytest.mark.parametrize('name,argv', [
    ('extrapolation', ['--ckpt', 'x.pt']), ('frequency_usage', ['--pope', 'x.pt']),
    ('indirect_probe', ['probe', 'x.pt'])])
@pytest.mark.parametrize('device', ['foo', 'cuda:7' if torch.cuda.device_count() else 'cuda'])
def test_eval_bad_device_is_one_line(capsys, name, argv, device):
    assert tool(name, *argv, '--device', device) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'error: argument --device:' in err and ('use cpu, cuda' in err or 'torch finds' in err)


@pytest.mark.parametrize('name,argv,says', [
    ('attention_reach', ['--steps', '-3'], "argument --steps: '-3': give a whole number of 1 or more"),
    ('attention_reach', ['--steps', '0'], "argument --steps: '0': give a whole number of 1 or more"),
    ('extrapolation', ['--ckpt', 'x.pt', '--chunk', '0'], "argument --chunk: '0': give a whole number of 1 or more"),
    ('extrapolation', ['--ckpt', 'x.pt', '--yarn_scale', '0'], "argument --yarn_scale: '0': give a number above 0"),
    ('extrapolation', ['--ckpt', 'x.pt', '--yarn_scale', '-4'], "argument --yarn_scale: '-4': give a number above 0"),
    ('extrapolation', ['--ckpt', 'x.pt', '--yarn_scale', 'nan'], "argument --yarn_scale: 'nan': give a number above"),
])
def test_eval_sizes_below_one_are_one_line(capsys, name, argv, says):
    assert tool(name, *argv) == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]


def test_zero_shot_limit_below_zero_is_one_line(capsys):
    pytest.importorskip('lm_eval')
    assert tool('zero_shot', '--ckpt', 'x.pt', '--limit', '-1') == 2
    assert "argument --limit: '-1': give a number above 0" in capsys.readouterr().err


def test_zero_shot_without_lm_eval_prints_its_help_and_says_how_to_install_it():
    """lm-eval is optional (requirements-eval.txt): without it (here: its import made to fail) --help still prints,
    and a run is one line that says what to install."""
    without = ("import runpy, sys; sys.modules['lm_eval'] = None; sys.argv[0] = 'zero_shot.py'; "
               "runpy.run_module('eval.zero_shot', run_name='__main__')")
    run = lambda *argv: subprocess.run([sys.executable, '-c', without, *argv], cwd=ROOT, capture_output=True,
                                       text=True, timeout=120)
    p = run('--help')
    assert p.returncode == 0 and p.stdout.startswith('usage: ') and 'Zero-shot downstream tasks' in p.stdout, p.stderr
    p = run('--ckpt', 'out/ckpt.pt')
    assert p.returncode == 1 and p.stdout == '' and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith('eval.zero_shot runs the lm-eval harness, which does not import (')
    assert p.stderr.strip().endswith('): pip install -r requirements-eval.txt')


def test_eval_read_only_out_is_one_line_before_the_work(data, tmp_path):
    ckpt = save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    (tmp_path / 'a_file').write_text('')
    outs = [tmp_path / 'a_file' / 'out']
    if os.geteuid() != 0:  # root writes into any folder
        (tmp_path / 'locked').mkdir(mode=0o555)
        outs.append(tmp_path / 'locked' / 'out')
    for out in outs:
        for name, argv in (('extrapolation', ['--ckpt', ckpt, '--data', data / 'chars' / 'val.bin', '--lengths',
                                              '16']),
                           ('frequency_usage', ['--pope', ckpt, '--data', data / 'chars' / 'val.bin']),
                           ('attention_reach', ['--steps', '1']),
                           ('learning_curves', [tmp_path / 'log.jsonl'])):
            code = tool(name, *argv, '--out', out)
            assert isinstance(code, str) and code.startswith(f'--out {out}: ') and 'give a folder you can write to' \
                in code and '\n' not in code, code


REWRITTEN = '''
import os, sys
import numpy as np
import eval.extrapolation as ex
data, ckpt = sys.argv[1], sys.argv[2]
load = ex.pretrained.load  # (the loader eval.extrapolation calls)
def load_then_cut(*a, **k):  # the data made again while the evaluation runs: cut short, then longer
    with open(data, 'r+b') as f:
        f.truncate(10)
    return load(*a, **k)
ex.pretrained.load = load_then_cut
r = ex.main(['--ckpt', ckpt, '--data', data, '--lengths', '16,32', '--out', sys.argv[3], '--device', 'cpu'])
print([round(x['nll'], 6) for x in r])
'''


def test_data_cut_short_under_a_running_eval_changes_nothing(data, tmp_path):
    ckpt = save_ckpt(str(tmp_path / 'run'), json.loads((data / 'chars' / 'meta.json').read_text()), block_size=16)
    val = stream(str(tmp_path / 'd'), 8, n=4000)
    from eval.extrapolation import main
    want = [round(x['nll'], 6) for x in main(['--ckpt', ckpt, '--data', val, '--lengths', '16,32', '--out',
                                              str(tmp_path / 'o1'), '--device', 'cpu'])]
    p = subprocess.run([sys.executable, '-c', REWRITTEN, val, ckpt, str(tmp_path / 'o2')], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr[-2000:]  # not a bus error, not a traceback
    assert p.stdout.strip().splitlines()[-1] == str(want)  # the tokens read at the start


def test_probe_rows_cut_short_is_one_line(data, tmp_path):
    import shutil
    meta = read_meta(str(data / 'indirect_indexing'))
    ckpt = save_ckpt(str(tmp_path / 'ii'), meta, dataset='indirect_indexing')
    shutil.copytree(data / 'indirect_indexing', tmp_path / 'cut')
    with open(tmp_path / 'cut' / 'test.bin', 'r+b') as f:
        f.truncate(48 * 3 + 7)
    code = tool('indirect_probe', 'probe', ckpt, '--data_dir', tmp_path / 'cut', '--out', tmp_path / 'o')
    assert code == f"{tmp_path / 'cut' / 'test.bin'}: 151 tokens, not whole rows of 48: the file is damaged; make " \
                   "the data again"
