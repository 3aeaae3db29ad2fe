"""train.py, sample.py and the indirect-indexing data, run as a user runs them (or, where only a start-up check or a
few steps are tested, inside this process: train_here, sample_here)."""

import fcntl
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import checkpoint
from model import GPT, GPTConfig
from prepare.data import example_batch, stream_batch
from prepare.indirect_indexing import (ITOS, LETTERS, PAD, ROW_LEN, VARIANTS, decode, make_example, make_split,
                                       prepare, row_length)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POPE = os.path.join(ROOT, 'config', 'indirect_pope.py')
TINY = ['--n_layer=1', '--n_head=2', '--n_embd=32', '--batch_size=8', '--eval_iters=2', '--log_interval=1',
        '--warmup_iters=2', '--learning_rate=0.003', '--device=cpu', '--compile=False']


def run(cwd, *args, check=True):
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, os.path.join(ROOT, args[0]), *args[1:]], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(p.stdout + p.stderr)
    return p


def here(script, cwd, *args):
    """`python script args` in cwd, run inside this process (no interpreter start-up): the message it stops with
    (sys.exit's), or None when it runs to its end. What it changes of this process is put back: the working folder,
    sys.argv, the signal handlers, torch's random state (train.py and sample.py seed it) and TF32 (train.py's)."""
    path, old_cwd, old_argv = os.path.join(ROOT, script), os.getcwd(), sys.argv
    old_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    scope = {'__name__': '__main__', '__file__': path}
    os.chdir(cwd)
    sys.argv = [path, *map(str, args)]
    try:
        with torch.random.fork_rng(devices=range(torch.cuda.device_count())):  # the CPU's and every GPU's
            exec(compile(open(path).read(), path, 'exec'), scope)
    except SystemExit as e:
        return e.code
    finally:
        if getattr(scope.get('run'), 'lock', None):  # train.py's RunFolder: out_dir's lock
            scope['run'].lock.close()
        scope.clear()  # its data, model and out_dir lock go now, not at some later garbage collection
        os.chdir(old_cwd)
        sys.argv = old_argv
        for sig, handler in old_signals.items():
            signal.signal(sig, handler)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def train_here(cwd, *args):
    """`python train.py args` in cwd, inside this process (here): its stop message, or None."""
    return here('train.py', cwd, *args)


def sample_here(cwd, *args):
    """`python sample.py args` in cwd, inside this process (here): its stop message, or None."""
    return here('sample.py', cwd, *args)


# the public replication's model as it trained (results/indirect_indexing/reproduce.sh, setting leftpad_replica)
REPLICA = ['--norm=layernorm', '--bias=True', '--tie_embeddings=False', '--init=torch', '--dtype=float32',
           '--weight_decay_on=all']
STREAM = ['--dataset=stream', '--block_size=16', '--eval_contexts=1,2']  # the small token stream made below


def write_data(d, name, meta, train, val=None):
    """data/<name>/: meta.json (a dict, or text as written) and train.bin (and val.bin): token arrays or raw bytes."""
    folder = d / 'data' / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'meta.json').write_text(meta if isinstance(meta, str) else json.dumps(meta))
    for split, tokens in (('train', train), ('val', val)):
        if tokens is not None:
            (folder / f'{split}.bin').write_bytes(tokens if isinstance(tokens, bytes) else tokens.tobytes())


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp('run')
    prepare(str(d / 'data' / 'indirect_indexing'), seed=0, sizes={'train': 2000, 'val': 300, 'test': 300})
    # a small token stream, and data sets damaged in every way the data check knows
    rng = np.random.default_rng(0)
    train, val = rng.integers(0, 20, 3000).astype(np.uint8), rng.integers(0, 20, 600).astype(np.uint8)
    meta = dict(vocab_size=20, dtype='uint8', kind='stream', tokenizer='itos', itos=[chr(65 + i) for i in range(20)],
                tokens={'train': 3000, 'val': 600})
    write_data(d, 'stream', meta, train, val)
    write_data(d, 'cut', meta, train[:1000], val)
    write_data(d, 'bad_id', meta, np.where(train == 7, 25, train).astype(np.uint8), val)
    write_data(d, 'odd', {**meta, 'dtype': 'uint16', 'tokens': {}}, train.tobytes() + b'x', val.astype(np.uint16))
    write_data(d, 'empty', {**meta, 'tokens': {'train': 0, 'val': 600}}, b'', val)
    write_data(d, 'not_json', '{"vocab_size": 20, "dtype": "ui', train, val)
    write_data(d, 'no_dtype', {k: v for k, v in meta.items() if k != 'dtype'}, train, val)
    write_data(d, 'bad_rows', dict(vocab_size=10, dtype='uint8', kind='examples', row_len=5, pad_id=0),
               bytes(12), bytes(10))
    write_data(d, 'short', dict(vocab_size=20, dtype='uint8', kind='stream', tokenizer='itos'),
               np.arange(20, dtype=np.uint8))
    (d / 'a_file').write_text('not a folder')
    (d / 'a_folder').mkdir()  # config files that cannot be one
    (d / 'binary.py').write_bytes(b'\x89PNG\r\n\x1a\n\xff\xfe')
    (d / 'broken.py').write_text('n_layer = 2\nn_head = = 4\n')
    (d / 'raises.py').write_text('n_layer = 2\n# the next line fails\nn_head = 1 / 0\n')
    return d


@pytest.fixture(scope='module')
def stream_run(workdir):
    """A finished tiny run on the token stream (checkpoints at iterations 2 and 4), and what it printed."""
    p = run(workdir, 'train.py', *TINY, *STREAM, '--max_iters=4', '--eval_interval=2', '--out_dir=stream_run')
    return workdir / 'stream_run', p


def copy_run(stream_run, name):
    """A copy of the finished run to change, and its files' bytes as they were."""
    src = stream_run[0]
    shutil.copytree(src, src.parent / name)
    files = ('ckpt.pt', 'best.pt', 'eval_log.jsonl', 'final.json')
    return src.parent / name, {f: (src / f).read_bytes() for f in files}


def test_examples_are_correct():
    rng = random.Random(0)
    for _ in range(2000):
        text, src, shift = make_example(rng)
        string, source, shift_text, target = text.split(',')
        assert 20 <= len(string) <= 40 and len(set(string)) == len(string) and set(string) <= set(LETTERS)
        assert string[src] == source and int(shift_text) == shift and shift != 0 and abs(shift) <= 15
        assert string.index(source) + shift == string.index(target)  # the target really is shift away
        assert shift_text[0] in '+-'


@pytest.mark.parametrize('variant', ['indirect_indexing_spaces', 'indirect_indexing_len40', 'indirect_indexing_shift0'])
def test_other_readings_of_the_task(variant):
    options, rng = VARIANTS[variant], random.Random(1)
    texts = [make_example(rng, **options) for _ in range(3000)]
    sep = ', ' if variant.endswith('spaces') else ','
    assert max(len(t) for t, _, _ in texts) == row_length(**options)  # rows fit the longest example exactly
    for text, src, shift in texts:
        string, source, shift_text, target = text.split(sep)
        assert string[src] == source and string.index(source) + shift == string.index(target)
        assert len(string) <= (32 if variant.endswith('len40') else 40)
    assert (row_length(**options), any(s == 0 for _, _, s in texts)) == {
        'indirect_indexing_spaces': (51, False), 'indirect_indexing_len40': (40, False),
        'indirect_indexing_shift0': (48, True)}[variant]
    rows = make_split(5, 0, row_length(**options), **options)
    assert sep in decode(rows[0]) and len(decode(rows[0]).split(sep)) == 4


@pytest.mark.parametrize('variant', ['indirect_indexing_next', 'indirect_indexing_prev', 'indirect_indexing_start',
                                     'indirect_indexing_end', 'indirect_indexing_shift3'])
def test_sub_tasks_are_what_they_say(variant):
    """Same format and lengths as the task; content-only tasks fix the shift (the source must still be found),
    position-only tasks fix the source at an end (the target position follows from length and shift)."""
    from collections import defaultdict
    options, rng = VARIANTS[variant], random.Random(2)
    texts = [make_example(rng, **options) for _ in range(3000)]
    assert max(len(t) for t, _, _ in texts) == row_length(**options)
    where = defaultdict(set)  # (length, shift) -> target positions seen
    for text, src, shift in texts:
        string, source, shift_text, target = text.split(',')
        assert 20 <= len(string) <= 40 and len(set(string)) == len(string) and set(string) <= set(LETTERS)
        assert string[src] == source and int(shift_text) == shift and string[src + shift] == target
        where[len(string), shift].add(src + shift)
    shifts = {s for _, _, s in texts}
    if variant in ('indirect_indexing_next', 'indirect_indexing_prev'):
        assert shifts == {1 if variant.endswith('next') else -1}
        assert all(len(p) > 10 for p in where.values())  # the target's position is anyone's guess: find the source
    elif variant == 'indirect_indexing_shift3':
        assert shifts == {-3, -2, -1, 1, 2, 3}
    else:
        assert shifts == (set(range(1, 16)) if variant.endswith('start') else set(range(-15, 0)))
        assert {src for _, src, _ in texts if variant.endswith('start')} <= {0}
        assert all(len(p) == 1 for p in where.values())  # length and shift alone give the target position
        end = 0 if variant.endswith('start') else -1
        assert all(text.split(',')[1] == text.split(',')[0][end] for text, _, _ in texts)  # the source field


def test_example_batch_targets():
    pad = PAD
    rows = torch.tensor([[5, 6, 7, 8, pad, pad], [1, 2, 3, 4, 9, 0]])
    x, y = example_batch(rows, pad)
    assert x.tolist() == [[5, 6, 7, 8, pad], [1, 2, 3, 4, 9]]
    assert y.tolist() == [[-1, -1, 8, -1, -1], [-1, -1, -1, -1, 0]]  # the last real token alone
    x, y = example_batch(rows, pad, all_tokens=True)
    assert y.tolist() == [[6, 7, 8, -1, -1], [2, 3, 4, 9, 0]]  # every next token but the padding


def test_stream_batch_targets_are_the_next_tokens():
    tokens = np.arange(20, dtype=np.uint16)
    x, y = stream_batch(tokens, np.array([0, 7]), 4)
    assert x.dtype == y.dtype == torch.int64 and x.device.type == 'cpu'
    assert x.tolist() == [[0, 1, 2, 3], [7, 8, 9, 10]]
    assert y.tolist() == [[1, 2, 3, 4], [8, 9, 10, 11]]  # each input's next token


def test_splits_are_deterministic_padded_and_decodable():
    a, b, c = make_split(300, 5), make_split(300, 5), make_split(300, 6)
    assert a.shape == (300, ROW_LEN) and np.array_equal(a, b) and not np.array_equal(a, c)
    for row in a[:50]:
        n = int((row != PAD).sum())
        assert (row[n:] == PAD).all() and (row[:n] != PAD).all()  # right-padded
        s, src, shift, tgt = decode(row).split(',')
        assert s[s.index(src) + int(shift)] == tgt
    assert len(ITOS) == 66


def test_train_evaluates_and_resume_continues_the_same_run(workdir):
    common = [POPE, *TINY, '--eval_interval=4', '--dropout=0.1']  # dropout: the restored RNG state matters
    run(workdir, 'train.py', *common, '--max_iters=8', '--out_dir=straight')
    run(workdir, 'train.py', *common, '--max_iters=4', '--out_dir=split')
    p = run(workdir, 'train.py', *common, '--max_iters=8', '--out_dir=split', '--init_from=resume')
    a = torch.load(workdir / 'straight' / 'ckpt.pt', weights_only=False)
    b = torch.load(workdir / 'split' / 'ckpt.pt', weights_only=False)
    assert a['iter_num'] == b['iter_num'] == 8
    for k in a['model']:
        assert torch.equal(a['model'][k], b['model'][k]), k
    final = json.load(open(workdir / 'straight' / 'final.json'))
    assert 0 <= final['test_acc'] <= 1 and final['test_loss'] > 0
    log = [json.loads(line) for line in open(workdir / 'straight' / 'eval_log.jsonl')]
    assert [r['iter'] for r in log] == [0, 4, 8] and 'test_acc' in log[-1]
    assert 'tok/s' in p.stdout and 'eta' in p.stdout
    # the resumed run's log goes on from its checkpoint: one record per evaluation, as the straight run's
    assert [json.loads(line) for line in open(workdir / 'split' / 'eval_log.jsonl')] == log
    assert final['weights'] == 'last' and final['weights_of_iter'] == 8


def test_a_run_is_never_lost(workdir):
    common = [POPE, *TINY, '--eval_interval=2', '--out_dir=life']
    run(workdir, 'train.py', *common, '--max_iters=4')
    life = workdir / 'life'
    log = open(life / 'eval_log.jsonl').read()
    # running the same command again does not replace the run
    p = run(workdir, 'train.py', *common, '--max_iters=2', check=False)
    assert p.returncode != 0 and '--init_from=resume' in p.stderr and '--overwrite=True' in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and torch.load(life / 'ckpt.pt', weights_only=False)['iter_num'] == 4
    # resume with other architecture flags: refused, each named
    p = run(workdir, 'train.py', *common, '--max_iters=6', '--init_from=resume', '--n_layer=2', '--pos_emb=rope',
            check=False)
    assert p.returncode != 0 and "n_layer=2 (checkpoint: 1)" in p.stderr and "pos_emb='rope' (checkpoint: 'pope')" in p.stderr
    p = run(workdir, 'train.py', *common, '--max_iters=6', '--init_from=resume', '--weight_decay_on=all', check=False)
    assert p.returncode != 0 and "weight_decay_on='all' (checkpoint: 'matrices')" in p.stderr, p.stderr
    # a diverging resume stops at its first evaluation and keeps both checkpoints
    best = torch.load(life / 'best.pt', weights_only=False)
    p = run(workdir, 'train.py', *common, '--max_iters=6', '--init_from=resume', '--learning_rate=10.0',
            '--warmup_iters=0', '--decay_lr=False', check=False)
    assert p.returncode != 0 and 'divergence_margin=3.0' in p.stderr and 'stopping without saving' in p.stderr, p.stderr
    assert torch.load(life / 'ckpt.pt', weights_only=False)['iter_num'] == 4
    assert torch.equal(torch.load(life / 'best.pt', weights_only=False)['model']['lm_head.weight'], best['model']['lm_head.weight'])
    assert open(life / 'eval_log.jsonl').read().startswith(log)
    # --overwrite=True starts over: a fresh log, new checkpoints
    run(workdir, 'train.py', *common, '--max_iters=2', '--overwrite=True')
    assert [json.loads(line)['iter'] for line in open(life / 'eval_log.jsonl')] == [0, 2]
    assert torch.load(life / 'ckpt.pt', weights_only=False)['iter_num'] == 2
    assert torch.load(life / 'best.pt', weights_only=False)['iter_num'] == 2


def test_the_end_of_a_run_says_which_numbers_are_which_and_where_the_files_are(stream_run):
    d, p = stream_run
    final = json.load(open(d / 'final.json'))
    lines = p.stdout.splitlines()
    assert any(line.startswith('done: 4 iterations in ') for line in lines)
    assert (f"final.json, the last weights (iter 4) on the whole splits: val_loss {final['val_loss']:.4f} (the log "
            "lines' val_loss: an estimate on eval_iters=2 batches)") in lines
    assert lines[-1] == ("files: stream_run/ckpt.pt (the latest state, iter 4), stream_run/best.pt (the state of the "
                         "lowest val_loss logged), stream_run/eval_log.jsonl (every evaluation), stream_run/final.json "
                         "(the numbers above)")
    # the run's files name its settings: final.json the whole config, the log what differs from the defaults
    assert final['config']['n_embd'] == 32 and final['config']['dataset'] == 'stream'
    assert final['commit'] == checkpoint.code_commit(ROOT)  # the code that ran: each number pinned to a commit
    said = next(line for line in lines if line.startswith("config, where it is not train.py's default: "))
    assert "n_embd=32" in said and "dataset='stream'" in said and 'pope_mu' not in said


def test_the_final_val_loss_is_the_whole_split_in_windows_of_block_size(stream_run):
    """final.json's val_loss: the last weights' mean loss per token over the val split cut into windows of block_size
    back to back (the tokens past the last whole window and its target left out)."""
    d, _ = stream_run
    ckpt = torch.load(d / 'ckpt.pt', weights_only=False)  # the last weights (iter 4)
    model = GPT(GPTConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    val = torch.from_numpy(np.fromfile(d.parent / 'data' / 'stream' / 'val.bin', dtype=np.uint8).astype(np.int64))
    T = ckpt['model_args']['block_size']
    n = (len(val) - 1) // T * T
    with torch.no_grad():
        loss = model(val[:n].view(-1, T), val[1:n + 1].view(-1, T))[1].item()
    assert json.load(open(d / 'final.json'))['val_loss'] == pytest.approx(loss, rel=1e-5)


def test_a_busy_out_dir_stops_a_second_run(workdir):
    busy = workdir / 'busy'
    busy.mkdir()
    with open(busy / 'train.lock', 'w') as f:  # another run holds the lock (as a process would: flock)
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write('pid 4242 on elsewhere since 2030-01-01 00:00: train.py --out_dir=busy\n')
        f.flush()
        msg = train_here(workdir, *TINY, *STREAM, '--max_iters=1', '--out_dir=busy')
    assert msg == ("busy is in use by another run (pid 4242 on elsewhere since 2030-01-01 00:00: train.py "
                   "--out_dir=busy): let it finish, or choose another --out_dir")
    assert os.listdir(busy) == ['train.lock']
    assert train_here(workdir, *TINY, *STREAM, '--max_iters=1', '--out_dir=busy') is None  # free again: it runs
    assert f'pid {os.getpid()} on ' in (busy / 'train.lock').read_text()


def test_a_checkpoint_to_start_from_is_read_or_refused_before_anything_is_removed(workdir, stream_run):
    own, before = copy_run(stream_run, 'own')
    bad = workdir / 'bad.pt'
    bad.write_bytes(b'cut short')
    gguf = workdir / 'model.gguf'
    gguf.write_bytes(b'GGUF')
    with pytest.raises(SystemExit, match=f'{gguf} is a GGUF model file, not a train.py checkpoint: give it as '
                                         f'--init_from={gguf}'):
        checkpoint.read_checkpoint(str(gguf))
    for args, message in (
            ([f'--init_from={own}/ckpt.pt'], f'init_from={own}/ckpt.pt is a file of out_dir=own, which a new run'),
            ([f'--init_from={bad}'], f'{bad} is not a readable checkpoint'),
            ([f'--init_from={stream_run[0]}/ckpt.pt', '--dataset=indirect_indexing'],
             f'{stream_run[0]}/ckpt.pt has a vocabulary of 20 tokens, data/indirect_indexing one of 66'),
            (['--dataset=cut'], 'data/cut/train.bin holds 1,000 tokens'),  # a check after the checkpoint is read
            (['--pos_emb=xpos'], "pos_emb='xpos'")):  # and at the model's
        msg = train_here(workdir, *TINY, *STREAM, '--out_dir=own', '--overwrite=True', *args)
        assert message in msg, msg
        assert {f: (own / f).read_bytes() for f in before} == before  # the run is all there


def test_resume_goes_on_with_the_checkpoints_config_and_refuses_other_data(workdir, stream_run, capsys):
    d, _ = copy_run(stream_run, 'go_on')
    ckpt = torch.load(d / 'ckpt.pt', weights_only=False)  # as if saved on another machine: its attn_impl stays there
    ckpt['config']['attn_impl'] = 'torch'
    torch.save(ckpt, d / 'ckpt.pt')
    for flag, said in (('--dataset=indirect_indexing', "dataset='indirect_indexing' (checkpoint: 'stream')"),
                       ('--loss_on=all', "loss_on='all' (checkpoint: 'target')"),
                       ('--example_order=epochs', "example_order='epochs' (checkpoint: 'random')"),
                       ('--n_embd=64', 'n_embd=64 (checkpoint: 32)')):
        msg = train_here(workdir, '--out_dir=go_on', '--init_from=resume', flag)
        assert msg == (f"init_from='resume' goes on with go_on/ckpt.pt as it was trained, but {said}: drop these "
                       "flags, or fine-tune from it with --init_from=go_on/ckpt.pt and a new out_dir"), msg
    # no config file, no flags but max_iters: the run goes on as it was (data, batch, schedule, evaluation), on this
    # machine's keys (configurator.LOCAL: device, dtype, attn_impl...)
    assert train_here(workdir, '--out_dir=go_on', '--init_from=resume', '--max_iters=6') is None
    assert "resume: the config of go_on/ckpt.pt, but max_iters=6 (was 4)" in capsys.readouterr().out
    old = torch.load(stream_run[0] / 'ckpt.pt', weights_only=False)['config']
    new = torch.load(d / 'ckpt.pt', weights_only=False)
    assert new['iter_num'] == 6 and new['config'] == {**old, 'max_iters': 6, 'init_from': 'resume', 'out_dir': 'go_on'}
    assert [json.loads(line)['iter'] for line in open(d / 'eval_log.jsonl')] == [0, 2, 4, 6]


def test_a_failed_save_stops_with_one_line_and_keeps_the_last_checkpoint(workdir, stream_run):
    if not os.path.exists('/dev/full'):
        pytest.skip('no /dev/full to stand for a full disk')
    d, before = copy_run(stream_run, 'full')
    for name, why in (('eval_log.jsonl', 'No space left on device'), ('ckpt.pt', 'is the disk full?')):
        os.symlink('/dev/full', d / f'{name}.tmp')  # the next save of this file meets a full disk
        msg = train_here(workdir, '--out_dir=full', '--init_from=resume', '--max_iters=6')
        assert msg.startswith(f"could not write full/{name} (") and why in msg, msg
        assert msg.endswith("): stopping; full/ckpt.pt (iter 4) is intact; go on with: python train.py --out_dir=full "
                            "--init_from=resume"), msg
        assert not os.path.lexists(d / f'{name}.tmp')  # no partial file left
        assert (d / 'ckpt.pt').read_bytes() == before['ckpt.pt'] and (d / 'best.pt').read_bytes() == before['best.pt']


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; kill, timeout, a scheduler
def test_ctrl_c_says_which_checkpoint_is_intact_and_how_to_go_on(workdir, sig):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out_dir = f'ctrl_c_{sig.name}'
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, 'train.py'), *TINY, *STREAM, '--max_iters=100000',
                          '--eval_interval=2', f'--out_dir={out_dir}'], cwd=workdir, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while not (workdir / out_dir / 'ckpt.pt').exists() and p.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        # meanwhile a second run into the same out_dir stops, naming the first
        msg = train_here(workdir, *TINY, *STREAM, '--max_iters=2', f'--out_dir={out_dir}', '--init_from=resume')
        assert msg.startswith(f"{out_dir} is in use by another run (pid {p.pid} on "), msg
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 128 + sig and len(err.strip().splitlines()) == 1, err
    line = err.strip()
    it = torch.load(workdir / out_dir / 'ckpt.pt', weights_only=False)['iter_num']
    assert line == (f"interrupted: {out_dir}/ckpt.pt (iter {it}) is intact; go on with: python train.py "
                    f"--out_dir={out_dir} --init_from=resume --device=cpu --compile=False"), line
    assert not [f for f in os.listdir(workdir / out_dir) if f.endswith('.tmp')]
    command = shlex.split(line.split('go on with: ')[1])  # the command it names goes on (here, for 2 more steps)
    assert train_here(workdir, *command[2:], f'--max_iters={it + 2}') is None
    assert torch.load(workdir / out_dir / 'ckpt.pt', weights_only=False)['iter_num'] == it + 2


def test_a_ctrl_c_just_after_ckpt_is_renamed_names_that_checkpoint(workdir, monkeypatch, capsys):
    """A Ctrl-C that lands between ckpt.pt's rename and the run's note of its iteration waits for the note: the line
    names the checkpoint on disk (it used to name the one before, or none)."""
    rename = os.replace

    def replace_then_ctrl_c(src, dst):
        rename(src, dst)
        if str(dst).endswith('ckpt.pt'):
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(os, 'replace', replace_then_ctrl_c)
    assert train_here(workdir, *TINY, *STREAM, '--max_iters=10', '--eval_interval=2', '--out_dir=late_ctrl_c') == 130
    err = capsys.readouterr().err.strip()
    it = torch.load(workdir / 'late_ctrl_c' / 'ckpt.pt', weights_only=False)['iter_num']
    assert err.startswith(f'interrupted: late_ctrl_c/ckpt.pt (iter {it}) is intact; go on with:'), err


def test_resume_drops_a_cut_off_last_log_line_with_a_note(workdir, stream_run, capsys):
    d, before = copy_run(stream_run, 'cut_log')
    with open(d / 'eval_log.jsonl', 'a') as f:
        f.write('{"iter": 6, "train_lo')  # what a crash mid-write leaves
    assert train_here(workdir, '--out_dir=cut_log', '--init_from=resume', '--max_iters=6') is None
    note = 'cut_log/eval_log.jsonl: its last line is cut short, dropped: \'{"iter": 6, "train_lo\''
    assert note in capsys.readouterr().out
    assert [json.loads(line)['iter'] for line in open(d / 'eval_log.jsonl')] == [0, 2, 4, 6]
    lines = open(d / 'eval_log.jsonl').read().splitlines()  # damage inside the log is not guessed at
    (d / 'eval_log.jsonl').write_text('\n'.join([lines[0], lines[1][:20], *lines[2:]]) + '\n')
    msg = train_here(workdir, '--out_dir=cut_log', '--init_from=resume', '--max_iters=8')
    assert msg == "cut_log/eval_log.jsonl: line 2 is not JSON: repair or delete it, then resume again", msg


@pytest.mark.parametrize('flags', [[], REPLICA], ids=['ours', 'replica'])
def test_delta_stays_in_range_and_trainable(workdir, flags):
    # zero init puts every delta on the boundary 0: without the projection after each step about half of them
    # would leave [-2pi, 0] (and, clamped in the forward pass, get exactly zero gradient from then on); so also with
    # the replication's weight decay on delta, which pulls it toward 0 (inside the range) but not back across it
    out = 'delta' + ('_replica' if flags else '')
    p = run(workdir, 'train.py', POPE, *TINY, '--max_iters=6', '--eval_interval=6', '--pope_delta=zero',
            '--loss_on=all', '--block_size=96', f'--out_dir={out}', *flags)
    assert '384 tokens per iteration' in p.stdout  # 8 examples of 48 tokens, whatever block_size
    assert 'an evaluation scores 900 examples' in p.stdout  # val and test whole (300 each), as many train rows
    ckpt = torch.load(workdir / out / 'ckpt.pt', weights_only=False)
    # the optimizer's groups: the blocks' Linear weights, and the rest (delta among them), decayed only with 'all'
    assert [g['weight_decay'] for g in ckpt['optimizer']['param_groups']] == [0.01, 0.01 if flags else 0.0]
    model = GPT(GPTConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    delta = model.h[0].attn.delta
    assert (delta <= 0).all() and (delta >= -2 * math.pi).all() and (delta < 0).any()
    rows = torch.from_numpy(np.fromfile(workdir / 'data' / 'indirect_indexing' / 'train.bin', dtype=np.uint8)
                            .astype(np.int64).reshape(-1, ROW_LEN))
    model(*example_batch(rows[:64], PAD, all_tokens=True))[1].backward()
    assert (delta.grad != 0).all()


def test_every_forward_pass_runs_in_the_context_of_its_dtype(workdir, monkeypatch):
    """train.py's forward passes (training and evaluation) run in eval.autocast(device, dtype), and with
    dtype='float32' with TF32 matmuls off: float32 throughout, as the replication trained (on a GPU, autocast would
    otherwise make them bf16; eval's own test checks the contexts it gives)."""
    import eval
    made, entered = [], []

    class Recorder:  # entered many times, as train.py's ctx is
        def __enter__(self):
            entered.append(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(eval, 'autocast', lambda device, dtype: made.append((device, dtype)) or Recorder())
    assert train_here(workdir, POPE, *TINY, '--dtype=float32', '--max_iters=2', '--eval_interval=2',
                      '--out_dir=float32') is None
    assert made == [('cpu', 'float32')]
    assert len(entered) > 2 and not any(entered)  # TF32 off at every forward pass


def test_ablations_train_and_another_versions_checkpoint_is_refused(workdir):
    from eval import load_checkpoint
    # the paper's ablations as flags: a run without delta and with mu = relu trains and saves no delta
    run(workdir, 'train.py', POPE, *TINY, '--max_iters=2', '--eval_interval=2', '--pope_delta=none', '--pope_mu=relu',
        '--out_dir=ablation')
    ckpt = torch.load(workdir / 'ablation' / 'ckpt.pt', weights_only=False)
    assert not any('delta' in k for k in ckpt['model'])
    assert (ckpt['model_args']['pope_mu'], ckpt['model_args']['pope_delta']) == ('relu', 'none')
    # a checkpoint with a flag this version does not have (of the model, or of train.py) is refused in one line, by
    # a resumed run, and for a model flag by eval/ and sample.py: no flag of another version is guessed at
    other = workdir / 'other_version'
    other.mkdir(exist_ok=True)
    for key, flag in (('model_args', 'pope_softplus'), ('config', 'delta_lr_mult')):
        torch.save(dict(ckpt, **{key: dict(ckpt[key], **{flag: 2.0})}), other / 'ckpt.pt')
        p = run(workdir, 'train.py', POPE, *TINY, '--max_iters=5', '--init_from=resume', '--out_dir=other_version',
                check=False)
        assert p.returncode != 0 and flag in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    load_checkpoint(str(other / 'ckpt.pt'))  # a train.py flag: how the model trained; it loads for evaluation
    torch.save(dict(ckpt, model_args=dict(ckpt['model_args'], pope_softplus=False)), other / 'ckpt.pt')
    with pytest.raises(SystemExit, match='pope_softplus'):
        load_checkpoint(str(other / 'ckpt.pt'))
    p = run(workdir, 'sample.py', '--out_dir=other_version', '--device=cpu', check=False)
    assert p.returncode != 0 and 'pope_softplus' in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_final_scores_the_best_checkpoint_when_final_weights_is_best(workdir):
    run(workdir, 'train.py', POPE, *TINY, '--max_iters=8', '--eval_interval=2', '--final_weights=best',
        '--out_dir=best_only')
    final = json.load(open(workdir / 'best_only' / 'final.json'))
    best = torch.load(workdir / 'best_only' / 'best.pt', weights_only=False)['iter_num']
    log = {r['iter']: r for r in map(json.loads, open(workdir / 'best_only' / 'eval_log.jsonl'))}
    assert final['iter'] == 8 and final['weights_of_iter'] == best
    assert log[best]['val_loss'] == min(r['val_loss'] for k, r in log.items() if k > 0)
    assert final['test_acc'] == pytest.approx(log[best]['test_acc'])  # whole test split, those weights
    # recomputed from best.pt: every row of test, and of train as many rows as val has (300), its first
    ckpt = torch.load(workdir / 'best_only' / 'best.pt', weights_only=False)
    model = GPT(GPTConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    for split, scores, n in (('test', final, None), ('train', log[best], 300)):
        tokens = np.fromfile(workdir / 'data' / 'indirect_indexing' / f'{split}.bin', dtype=np.uint8)
        x, y = example_batch(torch.from_numpy(tokens.astype(np.int64).reshape(-1, ROW_LEN))[:n], PAD)
        with torch.no_grad():
            logits, loss = model(x, y)
        acc = ((logits.argmax(-1) == y).sum() / (y != -1).sum()).item()
        assert scores[f'{split}_acc'] == pytest.approx(acc)
        assert scores[f'{split}_loss'] == pytest.approx(loss.item(), rel=1e-5)


def test_early_stop_ends_a_run_at_the_val_accuracy_threshold(workdir):
    common = [POPE, *TINY, '--max_iters=12', '--eval_interval=2', '--learning_rate=0.01']
    run(workdir, 'train.py', *common, '--out_dir=no_stop')
    log = [json.loads(line) for line in open(workdir / 'no_stop' / 'eval_log.jsonl')]
    # a threshold the run reaches at two evaluations in a row, after its first checkpoint and before its end
    acc = {r['iter']: r['val_acc'] for r in log}
    pairs = [(min(acc[i - 2], acc[i]), i) for i in range(4, 12, 2) if min(acc[i - 2], acc[i]) > 0]
    assert pairs, f"the tiny run never scored val accuracy above 0: {acc}"
    threshold, _ = max(pairs)
    stop_at = next(i for i in range(2, 13, 2) if i >= 4 and min(acc[i - 2], acc[i]) >= threshold)
    p = run(workdir, 'train.py', *common, f'--early_stop_acc={threshold}', '--out_dir=stops')
    final = json.load(open(workdir / 'stops' / 'final.json'))
    assert final['iter'] == stop_at < 12 and final['early_stop']['iter'] == stop_at
    assert final['early_stop']['reason'].startswith(f"val_acc >= {threshold} at 2 evaluations")
    assert torch.load(workdir / 'stops' / 'ckpt.pt', weights_only=False)['iter_num'] == stop_at
    assert [json.loads(line) for line in open(workdir / 'stops' / 'eval_log.jsonl')] == log[:stop_at // 2 + 1]
    assert f"stopped early (val_acc >= {threshold}" in p.stdout
    # a threshold never reached changes nothing: the same evaluations, to the end
    run(workdir, 'train.py', *common, '--early_stop_acc=1.0', '--out_dir=never_stops')
    assert [json.loads(line) for line in open(workdir / 'never_stops' / 'eval_log.jsonl')] == log
    assert 'early_stop' not in json.load(open(workdir / 'never_stops' / 'final.json'))


def test_loss_on_all_tokens_is_the_loss_that_trains(workdir):
    # the step-1 training loss is the initial model's loss on the step-0 batch: recompute it here from the checkpoint
    # after that step, which a learning rate of 1e-9 leaves the initial model (to ~1e-9)
    p = run(workdir, 'train.py', POPE, *TINY, '--max_iters=1', '--learning_rate=1e-9', '--min_lr=0',
            '--loss_on=all', '--out_dir=all_tok')
    printed = float(re.search(r'iter 1: loss ([0-9.]+)', p.stdout).group(1))
    ckpt = torch.load(workdir / 'all_tok' / 'ckpt.pt', weights_only=False)
    model = GPT(GPTConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    tokens = np.fromfile(workdir / 'data' / 'indirect_indexing' / 'train.bin', dtype=np.uint8)
    rows = torch.from_numpy(tokens.astype(np.int64).reshape(-1, ROW_LEN))
    ix = np.random.default_rng((1337, 0, 0, 0, 0)).integers(0, len(rows), 8)  # train.py's sample_ix, step 0
    with torch.no_grad():
        loss = {a: model(*example_batch(rows[ix], PAD, all_tokens=a))[1].item() for a in (True, False)}
    assert printed == pytest.approx(loss[True], abs=2e-4) and abs(loss[True] - loss[False]) > 1e-3
    p = run(workdir, 'train.py', POPE, *TINY, '--max_iters=1', '--loss_on=some', check=False)
    assert p.returncode != 0 and "loss_on='some'" in p.stderr


def test_the_learning_rate_warms_up_linearly_then_follows_a_cosine_to_min_lr(workdir, capsys):
    """get_lr, read from the log lines: (it + 1) / (warmup + 1) of learning_rate during warmup, then half a cosine
    from learning_rate down to min_lr at lr_decay_iters, min_lr after it (nanoGPT's schedule)."""
    lr, low, warmup, decay = 1e-3, 1e-4, 3, 10
    assert train_here(workdir, *TINY, *STREAM, '--max_iters=12', '--eval_interval=100', f'--learning_rate={lr}',
                      f'--min_lr={low}', f'--warmup_iters={warmup}', f'--lr_decay_iters={decay}',
                      '--out_dir=lr_run') is None
    printed = re.findall(r'iter (\d+): loss [0-9.]+, lr ([0-9.e+-]+),', capsys.readouterr().out)

    def want(it):  # the step that ends at iteration it + 1
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        ratio = min(1.0, (it - warmup) / (decay - warmup))
        return low + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - low)
    assert [(int(i), float(x)) for i, x in printed] == [(it + 1, float(f'{want(it):.2e}')) for it in range(12)]
    # the rate the optimizer stepped with, not only the one printed: the last step's, in every group
    groups = torch.load(workdir / 'lr_run' / 'ckpt.pt', weights_only=False)['optimizer']['param_groups']
    assert want(11) == pytest.approx(low) and [g['lr'] for g in groups] == [pytest.approx(low)] * 2


def test_micro_batches_give_the_gradient_of_their_whole_batch(workdir, monkeypatch):
    """gradient_accumulation_steps micro-batches of batch_size rows give the gradient of one batch of all of them
    (the same rows, with example_order='epochs'), each micro-batch's loss divided by their number; and each micro-step
    of each step reads rows of its own. (AdamW's step would hide a wrong scale: the gradient's norm is read where
    train.py clips it.)"""
    norms, limits, clip = [], [], torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, 'clip_grad_norm_',
                        lambda params, limit: limits.append(limit) or norms.append(clip(params, limit)))
    rows = []  # the rows of every training micro-batch (evaluation's are larger)
    monkeypatch.setattr('prepare.data.example_batch',
                        lambda x, *a: (rows.extend(x.tolist()) if len(x) <= 8 else None) or example_batch(x, *a))
    for accumulate, size, steps in ((1, 8, 1), (2, 4, 2)):
        assert train_here(workdir, POPE, *TINY, f'--max_iters={steps}', '--example_order=epochs',
                          f'--batch_size={size}', f'--gradient_accumulation_steps={accumulate}',
                          '--grad_clip=0.25', f'--out_dir=accumulate{accumulate}') is None
    assert len(norms) == 3 and norms[1].item() == pytest.approx(norms[0].item(), rel=1e-5)
    assert limits == [0.25] * 3  # clipped at --grad_clip
    assert len(rows) == 24 and rows[8:16] == rows[:8] and len({tuple(r) for r in rows[8:]}) == 16


def torchrun(cwd, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    return subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2',
                           os.path.join(ROOT, 'train.py'), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_ddp_on_the_cpu_trains_evaluates_and_saves(workdir):
    # two processes with gloo (the CPU's backend, whatever --backend says: NCCL is CUDA's): each
    # takes one of the 2 micro-steps, the master evaluates and saves
    common = [POPE, *TINY, '--max_iters=4', '--eval_interval=2', '--out_dir=ddp']
    p = torchrun(workdir, *common, '--gradient_accumulation_steps=2')
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert '768 tokens per iteration' in p.stdout  # 2 processes x 8 sequences x 48
    log = [json.loads(line) for line in open(workdir / 'ddp' / 'eval_log.jsonl')]
    assert [r['iter'] for r in log] == [0, 2, 4] and (workdir / 'ddp' / 'ckpt.pt').exists()
    assert json.load(open(workdir / 'ddp' / 'final.json'))['iter'] == 4
    p = torchrun(workdir, *common, '--gradient_accumulation_steps=3')
    assert p.returncode != 0 and 'make it a multiple of 2' in p.stderr


def test_help_lists_every_key_with_its_default_and_meaning(workdir):
    p = run(workdir, 'train.py', '--help')
    assert p.stdout.startswith('usage: python train.py [CONFIG_FILE ...] [--key=value ...]')
    assert "--pope_mu='softplus'" in p.stdout and "the ablations 'relu' and 'identity'" in p.stdout
    assert "--block_size=48" in p.stdout and 'context length in tokens' in p.stdout
    assert not (workdir / 'out').exists()


def test_sample_answers_an_indirect_indexing_prompt(workdir):
    if not (workdir / 'straight' / 'ckpt.pt').exists():
        run(workdir, 'train.py', POPE, *TINY, '--max_iters=2', '--out_dir=straight')
    p = run(workdir, 'sample.py', '--out_dir=straight', '--start=NZTUIGWkXFrhCJDzscat, N, +4,', '--device=cpu')
    answer = p.stdout.splitlines()[0]
    assert answer.startswith('NZTUIGWkXFrhCJDzscat,N,+4,') and len(answer) == len('NZTUIGWkXFrhCJDzscat,N,+4,') + 1


@pytest.mark.parametrize('args,message', [
    (['--bogus=1'], "unknown config key 'bogus'"),
    (['--n_layer=2.5'], "'n_layer' wants an int"),
    (['--out_dir', 'elsewhere'], "--out_dir has no value: write --out_dir=VALUE"),  # not: config file elsewhere
    (['max_iters=5'], "an override is written --max_iters=5"),
    (['--pos_emb=xpos'], "pos_emb='xpos'"),
    (['--dataset=nowhere'], 'python -m prepare.nowhere'),
    (['--dataset=genome'], 'python -m prepare.genome --source=hg38.fa.gz` first (see the README, Reproduce the paper)'),
    (['--dtype=fp8'], "dtype='fp8'"),
    (['--init_from=resume', '--out_dir=empty'], 'no checkpoint'),
    (['config/missing.py'], 'config file config/missing.py not found'),
    (['--n_embd=130', '--n_head=4'], 'n_embd=130 is not a multiple of n_head=4'),
    pytest.param(['--device=cuda'], 'no CUDA GPU', marks=pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU')),
    (['--eval_interval=0'], 'eval_interval=0: must be 1 or more'),
    (['--batch_size=0'], 'batch_size=0: must be 1 or more'),
    (['--gradient_accumulation_steps=0'], 'gradient_accumulation_steps=0: must be 1 or more'),
    (['--max_iters=-1'], 'max_iters=-1'),
    (['--dtype=float16'], "dtype='float16' on the CPU"),
    (['--final_weights=middle'], "final_weights='middle'"),
    (['--weight_decay_on=norms'], "weight_decay_on='norms': choose one of matrices, all"),
    # the optimizer and its schedule
    (['--grad_clip=-1'], 'grad_clip=-1.0: must be a number, 0 or more'),
    (['--min_lr=0.01'], 'min_lr=0.01 is above learning_rate=0.003'),
    (['--weight_decay=-1'], 'weight_decay=-1.0: must be a number, 0 or more'),
    (['--learning_rate=0'], 'learning_rate=0.0: must be a number above 0'),
    (['--learning_rate=-1e-3'], 'learning_rate=-0.001: must be a number above 0'),
    (['--beta2=1.5'], "beta1=0.9, beta2=1.5: AdamW's betas lie in [0, 1)"),
    (['--warmup_iters=10', '--lr_decay_iters=10'], 'warmup_iters=10 must be below lr_decay_iters=10'),
    (['--seed=-1'], 'seed=-1: must be a number, 0 or more'),
    (['--pos_base=1e999'], 'pos_base=inf: the frequency base is a number above 1, e.g. 10000.0'),
    (['--pos_base=0'], 'pos_base=0.0: the frequency base is a number above 1'),
    (['--grad_clip=1e999'], 'grad_clip=inf: must be a number, 0 or more'),
    (['--learning_rate=1e999'], 'learning_rate=inf: must be a number above 0'),
    (['--yarn_scale=2.0'], "yarn_scale=2.0 applies to RoPE alone (pos_emb='pope'): leave it at 1.0"),
    (['--seed=99999999999999999999'], 'seed=99999999999999999999: give a whole number below 2**64'),
    (['--eval_contexts=1,x2'], "eval_contexts='1,x2': give multiples of block_size"),
    # the machine and the paths
    (['--device=mps'], "device='mps': use cpu, cuda or cuda:<n> (MPS has no float64"),
    (['--device=cdua'], "device='cdua': use cpu, cuda or cuda:<n>"),
    (['--attn_impl=triton'], "attn_impl='triton' is PoPE's CUDA kernel: on the CPU use attn_impl='sdpa'"),
    (['--out_dir='], 'out_dir is empty'),
    (['--out_dir=a_file/run'], "out_dir='a_file/run': cannot write there (Not a directory)"),
    (['--out_dir=data/stream'], "out_dir='data/stream' is a data set's folder (it holds meta.json): choose a folder"),
    # the data, checked against its meta.json
    (['--dataset=short'], 'data/short/train.bin holds 20 tokens, too few for block_size=48'),
    (['--dataset=cut'], 'data/cut/train.bin holds 1,000 tokens where meta.json says 3,000'),
    (['--dataset=bad_id'], 'data/bad_id/train.bin holds token id 25 where the vocabulary has 20'),
    (['--dataset=odd'], 'data/odd/train.bin holds 3001 bytes, not a whole number of tokens (uint16 tokens)'),
    (['--dataset=empty'], 'data/empty/train.bin holds 0 tokens, too few'),
    (['--dataset=not_json'], 'data/not_json/meta.json is damaged or incomplete (JSONDecodeError'),
    (['--dataset=no_dtype'], "data/no_dtype/meta.json is damaged or incomplete (KeyError: 'dtype')"),
    (['--dataset=bad_rows'], 'data/bad_rows/train.bin holds 12 bytes, not a whole number of 5-token rows'),
    (['--dropout=1.0'], 'dropout=1.0: a probability in [0, 1)'),
    (['--yarn_scale=0'], "yarn_scale=0.0, yarn_orig_ctx=1024: YaRN's scale is above 0"),
    (['--yarn_scale=-4'], "yarn_scale=-4.0, yarn_orig_ctx=1024: YaRN's scale is above 0"),
    (['--yarn_orig_ctx=0'], "yarn_scale=1.0, yarn_orig_ctx=0: YaRN's scale"),
    (['--eval_only=True'], 'eval_only=True evaluates a checkpoint: add --init_from=resume'),
    (['a_folder'], 'config file a_folder is a folder'),
    (['binary.py'], 'config file binary.py is not text'),
    (['broken.py'], 'config file broken.py, line 2: invalid syntax'),
    (['raises.py'], "config file raises.py, line 3: ZeroDivisionError: division by zero"),
])
def test_bad_configuration_exits_with_a_clear_message(workdir, args, message):
    msg = train_here(workdir, *TINY, '--max_iters=1', '--out_dir=bad_config', *args)
    assert isinstance(msg, str) and message in msg and '\n' not in msg, msg  # one line, no traceback
    if 'bogus' in message:
        assert 'valid keys' in msg and 'learning_rate' in msg
    if 'dataset' in args[0]:  # the data check names the command that makes the data again
        assert 'run `python -m prepare.' in msg or 'prepare the data again (python -m prepare.' in msg
    assert not (workdir / 'bad_config').exists()  # and leaves no empty out_dir behind


def test_nan_loss_stops_without_saving(workdir):
    p = run(workdir, 'train.py', POPE, *TINY, '--max_iters=6', '--eval_interval=100',
            '--learning_rate=1e30', '--warmup_iters=0', '--out_dir=nan', check=False)
    assert p.returncode != 0 and 'stopping without saving' in p.stderr, p.stdout[-1000:] + p.stderr[-1000:]
    assert not (workdir / 'nan' / 'ckpt.pt').exists()


@pytest.mark.parametrize('content', [b'', b'not a checkpoint', 'list'])
def test_an_unreadable_checkpoint_is_one_clear_line(workdir, capsys, content):
    bad = workdir / 'bad_ckpt'
    bad.mkdir(exist_ok=True)
    if content == 'list':
        torch.save([1, 2, 3], bad / 'ckpt.pt')
    else:
        (bad / 'ckpt.pt').write_bytes(content)
    for msg in (train_here(workdir, POPE, *TINY, '--init_from=resume', '--out_dir=bad_ckpt'),
                sample_here(workdir, '--device=cpu', '--out_dir=bad_ckpt')):
        assert isinstance(msg, str) and 'bad_ckpt/ckpt.pt is not a' in msg and '\n' not in msg, msg  # one line
    assert capsys.readouterr().err == ''  # and nothing else on stderr


@pytest.mark.parametrize('args,message', [
    (['--temperature=0'], '--temperature=0.0: must be a number above 0'),
    (['--temperature=inf'], '--temperature=inf: must be a number above 0'),
    (['--seed=99999999999999999999'], '--seed=99999999999999999999: give a whole number from 0 to 2**64 - 1'),
    (['--start='], '--start is empty'),
    (['--num_samples=0'], '--num_samples=0: must be 1 or more'),
    (['--max_new_tokens=-3'], '--max_new_tokens=-3: must be 1 or more'),
    (['--start=FILE:nowhere.txt'], 'no such file'),
    (['--ckpt=nothing.pt'], 'no checkpoint at straight/nothing.pt'),
    (['--ckpt=straight/best.pt'], 'for straight/best.pt give --out_dir=straight --ckpt=best.pt'),
    (['--out_dir=straight/ckpt.pt'], 'for straight/ckpt.pt give --out_dir=straight --ckpt=ckpt.pt'),
    (['--init_from=gpt2'], '--init_from=gpt2 and --out_dir=straight each name a model: give one of them'),
    (['--init_from=straight/best.pt', '--ckpt=ckpt.pt'], '--init_from=straight/best.pt and --out_dir=straight '
     '--ckpt=ckpt.pt each name a model: give one of them (--init_from alone, or --out_dir with --ckpt)'),
])
def test_sample_bad_arguments_exit_with_a_clear_message(workdir, capsys, args, message):
    # in this process; sample.py's refusal as a user sees it (one line on stderr, a non-zero exit status) is
    # test_ablations_train_and_another_versions_checkpoint_is_refused's, of sample.py run as a subprocess
    msg = sample_here(workdir, '--out_dir=straight', '--device=cpu', *args)
    assert isinstance(msg, str) and message in msg and '\n' not in msg, msg  # one line, no traceback
    assert capsys.readouterr().err == ''  # and nothing else on stderr


def test_eval_only_evaluates_a_checkpoint_and_writes_nothing(workdir, stream_run):
    folder, before = copy_run(stream_run, 'eval_only')
    for flags in ([f'--out_dir={folder.name}', '--init_from=resume'],
                  [f'--out_dir={folder.name}', '--init_from=resume', '--overwrite=True'],
                  ['--out_dir=eval_elsewhere', f'--init_from={folder}/best.pt', '--overwrite=True']):
        p = run(workdir, 'train.py', *TINY, *STREAM, '--eval_only=True', *flags)
        assert re.search(r'^iter \d+ train_loss [0-9.]+ val_loss', p.stdout, re.M), p.stdout
        assert {f: (folder / f).read_bytes() for f in before} == before  # every file of the run as it was
    assert not (workdir / 'eval_elsewhere').exists()
    # the evaluation is of the checkpoint's weights: its val loss is the one the run logged at that iteration
    logged = json.loads((folder / 'eval_log.jsonl').read_text().splitlines()[-1])
    p = run(workdir, 'train.py', *TINY, *STREAM, '--eval_only=True', f'--out_dir={folder.name}', '--init_from=resume',
            '--eval_iters=2')
    assert f"val_loss {logged['val_loss']:.4f}" in p.stdout


def test_resume_needs_a_whole_checkpoint_of_this_version(workdir, stream_run):
    for name, change, message in (
            ('no_optimizer', lambda c: c.pop('optimizer'), 'lacks optimizer, which going on with a run needs'),
            ('no_iter', lambda c: c.pop('iter_num'), 'lacks iter_num'),
            ('unknown_args', lambda c: c['model_args'].update(warp_drive=3),
             'its model_args give warp_drive=3, which this model.py does not take')):
        folder, _ = copy_run(stream_run, name)
        ckpt = torch.load(folder / 'ckpt.pt', weights_only=False)
        change(ckpt)
        torch.save(ckpt, folder / 'ckpt.pt')
        msg = train_here(workdir, *TINY, *STREAM, '--max_iters=6', f'--out_dir={name}', '--init_from=resume')
        assert isinstance(msg, str) and message in msg and '\n' not in msg, msg


def test_a_resumed_run_counts_the_minutes_of_every_process(workdir, stream_run):
    folder, _ = copy_run(stream_run, 'minutes')
    first = torch.load(folder / 'ckpt.pt', weights_only=False)['minutes']
    assert first > 0
    run(workdir, 'train.py', *TINY, *STREAM, '--max_iters=6', '--out_dir=minutes', '--init_from=resume')
    final = json.load(open(folder / 'final.json'))
    later = torch.load(folder / 'ckpt.pt', weights_only=False)['minutes']
    assert final['minutes'] >= later > first


def test_a_fine_tune_onto_another_token_list_of_the_same_size_is_refused(workdir, stream_run):
    meta = json.loads((workdir / 'data' / 'stream' / 'meta.json').read_text())
    train = np.fromfile(workdir / 'data' / 'stream' / 'train.bin', dtype=np.uint8)
    write_data(workdir, 'stream_other', {**meta, 'itos': meta['itos'][::-1]}, train, train[:600])
    msg = train_here(workdir, *TINY, '--dataset=stream_other', '--block_size=16', '--max_iters=2',
                     f'--init_from={stream_run[0]}/ckpt.pt', '--out_dir=other_tokens')
    assert isinstance(msg, str) and 'was trained on a token list other than data/stream_other' in msg, msg


def test_a_data_file_changed_under_the_run_is_one_line(tmp_path):
    from checkpoint import RunFolder
    path = tmp_path / 'train.bin'
    path.write_bytes(bytes(range(100)))
    tokens = np.memmap(path, dtype=np.uint8, mode='r')
    folder = RunFolder(str(tmp_path / 'out'))
    folder.check_unchanged(tokens)  # as it was opened: nothing to say
    folder.check_unchanged(tokens)
    with open(path, 'r+b') as f:
        f.truncate(50)  # cut short in place: reading the memmap's end now would be a bus error
    with pytest.raises(SystemExit) as e:
        folder.check_unchanged(tokens)
    assert f'{path} changed while the run read it (now 50 bytes, 100 when it began)' in str(e.value)


def test_the_divergence_check_and_early_stop_read_the_margin_and_the_last_evaluations(tmp_path):
    """A run stops once val loss exceeds the best so far by more than divergence_margin (at it: goes on; 0: never),
    and ends early once val accuracy reaches early_stop_acc at each of the last early_stop_evals evaluations."""
    folder = checkpoint.RunFolder(str(tmp_path / 'out'))
    folder.check_val_loss(4.0, 1.0, 3.0, 10)  # at the margin: goes on
    folder.check_val_loss(90.0, 1.0, 0.0, 10)  # margin 0: never stops
    with pytest.raises(SystemExit, match=r'^val loss 4.01 at iter 10 exceeds the best so far \(1\) by more than '
                                         r'divergence_margin=3.0: stopping without saving'):
        folder.check_val_loss(4.01, 1.0, 3.0, 10)
    folder.records = [{'iter': 0, 'val_acc': 0.0}, {'iter': 2, 'val_acc': 0.95}, {'iter': 4, 'val_acc': 0.9}]
    assert folder.early_stop(0.9, 2) == 'val_acc >= 0.9 at 2 evaluations in a row'
    assert folder.early_stop(0.95, 2) is None  # the last evaluation fell below it
    assert folder.early_stop(0.9, 3) is None and folder.early_stop(0.0, 2) is None  # iter 0's 0.0; 0.0: never


def test_the_log_lines_of_a_cpu_run_give_no_mfu(stream_run):
    lines = [line for line in stream_run[1].stdout.splitlines() if line.startswith('iter ') and 'ms/it' in line]
    assert lines and not any('mfu' in line for line in lines), lines[:2]


@pytest.mark.parametrize('damage', [
    lambda c: c['model_args'].update(n_layer='1'),  # a value of the wrong type
    lambda c: c.update(iter_num='four'),
    lambda c: c['optimizer']['param_groups'].pop(),  # another optimizer's state
    lambda c: c['rng'].update(torch=torch.zeros(3)),
    lambda c: c['model'].pop('lm_head.weight'),
], ids=['model_args', 'iter_num', 'optimizer', 'rng', 'weights'])
def test_resuming_a_checkpoint_whose_parts_do_not_fit_is_one_line(workdir, stream_run, damage):
    folder, _ = copy_run(stream_run, f'damaged_{len(list(workdir.iterdir()))}')
    ckpt = torch.load(folder / 'ckpt.pt', weights_only=False)
    damage(ckpt)
    torch.save(ckpt, folder / 'ckpt.pt')
    p = run(workdir, 'train.py', *TINY, *STREAM, '--max_iters=6', f'--out_dir={folder.name}',
            '--init_from=resume', check=False)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    assert f'{folder.name}/ckpt.pt does not fit this run (' in p.stderr or \
        "its model_args give n_layer='1', which this model.py does not take" in p.stderr


class _RunsCode:
    def __reduce__(self):
        return (os.mkdir, ('never_made',))


def test_a_checkpoint_that_would_run_code_is_refused_in_one_line_and_runs_nothing(tmp_path, monkeypatch):
    import checkpoint
    monkeypatch.chdir(tmp_path)
    torch.save({'model': _RunsCode(), 'model_args': {}, 'meta': {}}, tmp_path / 'ckpt.pt')
    with pytest.raises(SystemExit) as e:
        checkpoint.read_checkpoint(str(tmp_path / 'ckpt.pt'))
    assert str(e.value).startswith(f"{tmp_path / 'ckpt.pt'} holds code (it would run ") and 'mkdir' in str(e.value)
    assert not (tmp_path / 'never_made').exists()


def test_a_folder_of_an_earlier_runs_log_alone_and_a_config_that_exits_are_refused(workdir):
    folder = workdir / 'published'
    folder.mkdir(exist_ok=True)
    (folder / 'final.json').write_text('{"val_loss": 1.0}')
    p = run(workdir, 'train.py', POPE, *TINY, '--max_iters=1', '--out_dir=published', check=False)
    assert p.returncode == 1 and 'published holds the files of an earlier run' in p.stderr, p.stderr
    assert (folder / 'final.json').read_text() == '{"val_loss": 1.0}'
    (workdir / 'exits.py').write_text('import sys\nsys.exit(0)\n')
    p = run(workdir, 'train.py', 'exits.py', *TINY, check=False)
    assert p.returncode == 1 and p.stderr.strip() == ('config file exits.py called exit(): a config file '
                                                       'holds Python assignments, e.g. n_layer = 8')
