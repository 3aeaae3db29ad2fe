"""eval.indirect_probe on a tiny CPU-trained checkpoint: the recorded attention is the model's, the probes
measure what they say, the table reads train.py's logs."""

import json
import os
import subprocess
import sys

import pytest
import torch

from eval import load_checkpoint
from eval.indirect_probe import attention_to, forward_recorded, main, parse_rows, probe, table, read_test_rows
from prepare.data import example_batch
from prepare.indirect_indexing import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ['--n_layer=2', '--n_head=2', '--n_embd=32', '--batch_size=16', '--eval_iters=2', '--log_interval=10',
        '--warmup_iters=5', '--learning_rate=0.003', '--device=cpu', '--compile=False', '--max_iters=20',
        '--eval_interval=20']


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """Two tiny runs on the 'letter after the source' sub-task: PoPE (with mu = x: the switch reaches the probe)
    and RoPE."""
    d = tmp_path_factory.mktemp('probe')
    prepare(str(d / 'data' / 'indirect_indexing_next'), sizes={'train': 1000, 'val': 100, 'test': 100},
            variant='indirect_indexing_next')
    for name, flags in (('pope_s1', ['--pos_emb=pope', '--pope_mu=identity']), ('rope_s1', ['--pos_emb=rope'])):
        config = os.path.join(ROOT, 'config', 'indirect_pope.py')
        subprocess.run([sys.executable, os.path.join(ROOT, 'train.py'), config,
                        '--dataset=indirect_indexing_next', *TINY, *flags, f'--out_dir=out-{name}'],
                       cwd=d, env=dict(os.environ, PYTHONPATH=ROOT), check=True, capture_output=True, timeout=300)
    return d


def test_recorded_maps_are_the_models_attention(runs):
    for name in ('pope_s1', 'rope_s1'):
        model, ckpt = load_checkpoint(str(runs / f'out-{name}' / 'ckpt.pt'), attn_impl='torch')
        rows = read_test_rows(ckpt, str(runs / 'data' / 'indirect_indexing_next'), 8)
        x, _ = example_batch(rows, ckpt['meta']['pad_id'])
        with torch.no_grad():
            logits, maps, inputs = forward_recorded(model, x)
            torch.testing.assert_close(logits, model(x, x)[0])  # recording changes nothing
            for block, m, h in zip(model.h, maps, inputs):  # maps @ v through c_proj is the layer's output
                B, T, C = h.shape
                v = block.attn.c_attn(h)[..., 2 * C:].view(B, T, 2, C // 2).transpose(1, 2)
                y = block.attn.c_proj((m @ v).transpose(1, 2).reshape(B, T, C))
                torch.testing.assert_close(y, block.attn(h), rtol=1e-4, atol=1e-5)
                assert m.shape == (B, 2, T, T) and torch.allclose(m.sum(-1), torch.ones(B, 2, T))
                assert (m.triu(1) == 0).all()  # causal


def test_parse_rows_points_at_source_and_target(runs):
    _, ckpt = load_checkpoint(str(runs / 'out-rope_s1' / 'ckpt.pt'))
    rows = read_test_rows(ckpt, str(runs / 'data' / 'indirect_indexing_next'))
    f = parse_rows(rows.numpy(), ckpt['meta'])
    b = torch.arange(len(rows))
    assert (f['shift'] == 1).all()
    assert torch.equal(rows[b, f['q_src']], rows[b, f['src']])  # the source letter in the question = in the string
    assert torch.equal(rows[b, f['q_last'] + 1], rows[b, f['src'] + f['shift']])  # the next token is the target


def test_attention_to_on_hand_made_maps():
    m = torch.zeros(3, 2, 5, 5)  # (B, H, T, T)
    m[:, 0, 4, 1] = 1.0  # head 0 looks at key 1 from query 4
    m[:, 1, 4] = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.0])
    weight, top = attention_to([m], torch.tensor([4, 4, 4]), torch.tensor([1, 1, 3]))
    torch.testing.assert_close(weight, torch.tensor([[2 / 3, (0.2 + 0.2 + 0.4) / 3]]))
    torch.testing.assert_close(top, torch.tensor([[2 / 3, 1 / 3]]))


def test_probe_and_table_end_to_end(runs, tmp_path, capsys):
    data = str(runs / 'data' / 'indirect_indexing_next')
    r = probe(str(runs / 'out-pope_s1' / 'ckpt.pt'), data, n=60, batch=25)
    assert r['examples'] == 60 and set(r['acc_per_shift']) == {1}
    assert r['acc_per_shift'][1] == pytest.approx(r['acc'])  # one shift: the same examples
    _, ckpt = load_checkpoint(str(runs / 'out-pope_s1' / 'ckpt.pt'))
    counts = torch.bincount(parse_rows(read_test_rows(ckpt, data, 60).numpy(), ckpt['meta'])['src'])
    by_src = sum(counts[s].item() * a for s, a in r['acc_per_source_position'].items()) / 60
    assert by_src == pytest.approx(r['acc'])
    assert len(r['pope']) == 2 and {'delta_mean', 'mu_q_spread', 'delta_at_0'} <= set(r['pope'][0])
    w = torch.tensor(r['attention']['q_last->src']['weight'])
    assert w.shape == (2, 2) and ((w >= 0) & (w <= 1)).all()
    main(['probe', str(runs / 'out-pope_s1' / 'ckpt.pt'), str(runs / 'out-rope_s1' / 'ckpt.pt'), '--label', 'PoPE',
          '--label', 'RoPE', '--data_dir', data, '--n', '40', '--out', str(tmp_path)])
    assert {'PoPE.json', 'RoPE.json', 'summary.md', 'acc_per_shift.png'} <= set(os.listdir(tmp_path))
    assert 'RoPE' in open(tmp_path / 'summary.md').read() and 'pope' not in json.load(open(tmp_path / 'RoPE.json'))
    # the table: both runs, then the groups; a hand-made log for the step at which a threshold is reached
    fake = tmp_path / 'out-fake_s2'
    fake.mkdir()
    with open(fake / 'eval_log.jsonl', 'w') as f:
        for it, acc in ((0, 0.01), (500, 0.3), (1000, 0.6)):
            f.write(json.dumps({'iter': it, 'train_acc': acc, 'test_acc': acc}) + '\n')
    text = table([str(runs / 'out-pope_s1'), str(runs / 'out-rope_s1'), str(fake)], thresholds=(0.2, 0.5, 0.9))
    assert '| fake_s2 | 1000 (cut) | 60.0 | 60.0 | 60.0 | 500 | 1000 | - |  |' in text
    assert '| pope | 1 |' in text and '| fake | 1 | 60.0 | 60.0 +- 0.0 |' in text
    assert '3.6 |' in text  # the chance level of the 'next' task, 1 / (L - 1) on average


def test_probe_counts_each_example_once_whatever_its_batches(runs):
    """The probe's accuracy is train.py's test accuracy on the same rows (the argmax at the last input against the
    answer); its attention is a mean over examples: batches of 25 (25, 25, 10) give what one batch of 60 does."""
    data = str(runs / 'data' / 'indirect_indexing_next')
    for name in ('pope_s1', 'rope_s1'):
        ckpt = str(runs / f'out-{name}' / 'ckpt.pt')
        final = json.load(open(runs / f'out-{name}' / 'final.json'))
        assert probe(ckpt, data, n=100, batch=30)['acc'] == pytest.approx(final['test_acc'], abs=1e-6)
        a, b = probe(ckpt, data, n=60, batch=25), probe(ckpt, data, n=60, batch=60)
        assert a['acc'] == b['acc'] and a['acc_per_shift'] == b['acc_per_shift']
        for k, v in a['attention'].items():
            for m in ('weight', 'top'):
                torch.testing.assert_close(torch.tensor(v[m]), torch.tensor(b['attention'][k][m]))


def test_table_of_runs_and_of_their_groups(tmp_path):
    """Per run: the final test accuracy (final.json's, or the last evaluation's if it was cut), the best one, the
    first step at each threshold; per group of seeds: each seed's and the mean +- the sample std (ddof 1)."""
    for name, accs, final in (('out-x_s1', (0.1, 0.7, 0.6), 0.62), ('out-x_s2', (0.2, 0.5, 0.8), None)):
        (tmp_path / name).mkdir()
        with open(tmp_path / name / 'eval_log.jsonl', 'w') as f:
            for i, a in enumerate(accs):
                f.write(json.dumps({'iter': 100 * i, 'test_acc': a, 'train_acc': a}) + '\n')
        if final is not None:
            (tmp_path / name / 'final.json').write_text(json.dumps({'iter': 200, 'test_acc': final}))
    text = table([str(tmp_path / 'out-x_s2'), str(tmp_path / 'out-x_s1')], thresholds=(0.2, 0.5, 0.9))
    assert '| x_s1 | 200 | 62.0 | 70.0 | 60.0 | 100 | 100 | - |  |' in text
    assert '| x_s2 | 200 (cut) | 80.0 | 80.0 | 80.0 | 0 | 100 | - |  |' in text
    assert '| x | 2 | 62.0 / 80.0 | 71.0 +- 12.7 |' in text  # std of 62, 80: 18 / sqrt 2
