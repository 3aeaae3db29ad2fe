"""
The run folder of train.py (out_dir: ckpt.pt, best.pt, eval_log.jsonl, final.json): RunFolder locks
it while the run lives, saves each file atomically, and turns a failed save or a Ctrl-C into one
line that says what is kept and how to go on. read_checkpoint and load_checkpoint read a ckpt.pt.
"""

import fcntl
import json
import math
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import fields

import torch

from model import GPT, GPTConfig

RESUME_KEYS = ('model', 'model_args', 'optimizer', 'iter_num', 'best_val_loss', 'rng')


def read_checkpoint(path, device='cpu'):
    """The dict of a train.py ckpt.pt (or best.pt), or one line that says why a file is not one."""
    if not os.path.isfile(path):
        sys.exit(f"no checkpoint at {path}: train one first (python train.py config/...)")
    if path.endswith('.gguf'):
        sys.exit(f"{path} is a GGUF model file, not a train.py checkpoint: give it as "
                 f"--init_from={path}")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)  # (runs no code)
    except Exception as err:  # code, empty, truncated, or not a torch file at all
        if code_refused(err):
            sys.exit(f"{path} holds code (it would run {code_refused(err)}), not a checkpoint "
                     "alone: nothing was loaded; use a checkpoint you trust")
        sys.exit(f"{path} is not a readable checkpoint ({type(err).__name__}): it may be cut "
                 "short; train again, or use another one (best.pt, ckpt.pt)")
    if not isinstance(ckpt, dict) or not {'model', 'model_args', 'meta'} <= ckpt.keys():
        sys.exit(f"{path} is not a checkpoint written by train.py (no model, model_args and meta)")
    types = {f.name: f.type for f in fields(GPTConfig)}
    bad = [f"{k}={v!r}" for k, v in ckpt['model_args'].items() if k not in types or
           type(v) is not types[k] and not (types[k] is float and type(v) is int)]
    if bad:
        sys.exit(f"{path}: its model_args give {', '.join(bad)}, which this model.py does not "
                 "take (another version's checkpoint, or a damaged one): use that version's "
                 "code, or train again")
    return ckpt


def code_refused(err):
    """The module.name a weights_only torch.load refused to run (err: its error), or None."""
    code = re.search(r'GLOBAL (\w+(?:\.\w+)+) ', str(err))
    return code and code[1]


def load_checkpoint(path, device='cpu', ckpt=None, weights=None, **overrides):
    """(model, ckpt) in eval mode from a train.py ckpt.pt, or from ckpt read already with its state
    dict weights(ckpt, model); overrides replace GPTConfig fields (attn_impl...)."""
    ckpt = ckpt or read_checkpoint(path)
    ckpt['model_args'] = {**ckpt['model_args'], **overrides, 'dropout': 0.0}
    try:
        model = GPT(GPTConfig(**ckpt['model_args']))
        model.load_state_dict(weights(ckpt, model) if weights else ckpt['model'])
    except (TypeError, ValueError, RuntimeError, KeyError, AttributeError) as err:
        sys.exit(f"{path}: its weights do not fit the model its model_args describe "
                 f"({' '.join(str(err).split())[:300]}): use another checkpoint, or train again")
    model.project_delta()  # as train.py keeps it
    return model.eval().to(device), ckpt


def code_commit(folder):
    """The commit of the git repository that holds folder (+'-dirty'), or POPE_COMMIT where set."""
    if os.environ.get('POPE_COMMIT'):
        return os.environ['POPE_COMMIT']
    git = ['git', '-C', folder, 'describe', '--always', '--dirty', '--exclude=*']
    try:
        out = subprocess.run(git, capture_output=True, text=True, timeout=10).stdout.strip()
        return out or None
    except (OSError, subprocess.SubprocessError):
        return None


def rng_state(device_type):
    """The random state a checkpoint keeps, for resume_state."""
    return {'torch': torch.get_rng_state(),
            'cuda': torch.cuda.get_rng_state() if device_type == 'cuda' else None}


def resume_state(checkpoint, optimizer, device_type):
    """A resumed run's optimizer and random state; (iter_num, best_val_loss, minutes before)."""
    optimizer.load_state_dict(checkpoint['optimizer'])
    torch.set_rng_state(checkpoint['rng']['torch'].cpu())
    if device_type == 'cuda' and checkpoint['rng']['cuda'] is not None:
        torch.cuda.set_rng_state(checkpoint['rng']['cuda'].cpu())
    return (int(checkpoint['iter_num']), float(checkpoint['best_val_loss']),
            float(checkpoint.get('minutes', 0.0)))


class RunFolder:
    """out_dir of one run; resume_flags: the flags of this command that going on from it needs."""

    def __init__(self, out_dir, resume_flags=()):
        if not out_dir.strip():
            sys.exit("out_dir is empty: name the run's folder, e.g. --out_dir=out-myrun")
        self.out_dir, self.resume_flags = out_dir, list(resume_flags)
        names = ('ckpt.pt', 'best.pt', 'eval_log.jsonl', 'final.json')
        self.files = [os.path.join(out_dir, f) for f in names]
        self.ckpt, self.best, self.log_path, self.final = self.files
        self.launch = ['python']  # how the run was started (torchrun for DDP)
        self.master = True  # the process that writes the files (DDP: rank 0)
        self.records = []  # eval_log.jsonl's
        self.saved_iter = None  # the iteration of this run's ckpt.pt on disk
        self.lock = None  # out_dir/train.lock, flocked by this run until its process ends
        self.files_seen = {}  # data file -> (inode, size, mtime) when the run first read it
        self.saving = self.signal_waiting = False  # a signal during ckpt.pt's save waits for it

    def open(self, refuse_earlier_run, lock=True):
        """Before anything runs: lock an existing out_dir (a new one is made when training starts),
        refuse to replace an earlier run's files, catch Ctrl-C and SIGTERM."""
        if self.master and lock and os.path.isdir(self.out_dir):  # (eval_only writes nothing)
            self.take_lock()
        if refuse_earlier_run and any(os.path.exists(f) for f in self.files):
            sys.exit(f"{self.out_dir} holds the files of an earlier run: continue it with "
                     "--init_from=resume (and a larger --max_iters if it has finished), choose "
                     "another --out_dir, or replace it with --overwrite=True")
        signal.signal(signal.SIGINT, self.interrupted)
        signal.signal(signal.SIGTERM, self.interrupted)

    def take_lock(self):
        """Lock out_dir (made if new), writing who holds it for a second run's line."""
        for marker, what in (('meta.json', 'a data set'), ('.git', 'a source checkout')):
            if os.path.exists(os.path.join(self.out_dir, marker)):  # a run would mix its files in
                sys.exit(f"out_dir={self.out_dir!r} is {what}'s folder (it holds {marker}): choose "
                         "a folder of its own, e.g. --out_dir=out-myrun")
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            self.lock = open(os.path.join(self.out_dir, 'train.lock'), 'a+')
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.lock.seek(0)
            self.lock.truncate()
            since = time.strftime('%Y-%m-%d %H:%M')
            self.lock.write(f"pid {os.getpid()} on {socket.gethostname()} since {since}: "
                            f"{shlex.join(sys.argv)}\n")
            self.lock.flush()
        except BlockingIOError:
            self.lock.seek(0)
            sys.exit(f"{self.out_dir} is in use by another run "
                     f"({self.lock.read().strip() or 'starting'}): let it finish, or choose "
                     "another --out_dir")
        except OSError as err:  # not a folder, no permission, a full disk
            sys.exit(f"out_dir={self.out_dir!r}: cannot write there ({err.strerror}): choose "
                     "another --out_dir")

    def start_from(self, init_from, read=read_checkpoint):
        """The checkpoint that init_from names (None: 'scratch'), with its path at 'path'."""
        if init_from == 'scratch':
            return None
        path = self.ckpt if init_from == 'resume' else init_from
        checkpoint = read(path)  # (on the CPU: the model and the optimizer take it to the device)
        missing = [k for k in RESUME_KEYS if k not in checkpoint]
        if init_from == 'resume' and missing:
            sys.exit(f"{path} lacks {', '.join(missing)}, which going on with a run needs (a "
                     f"checkpoint of weights alone?): fine-tune from it with "
                     f"--init_from={path} and a new out_dir")
        if init_from == 'resume':
            self.saved_iter = checkpoint['iter_num']
        elif os.path.realpath(path) in map(os.path.realpath, self.files):
            sys.exit(f"init_from={init_from} is a file of out_dir={self.out_dir}, which a new run "
                     "there replaces: fine-tune into another --out_dir (or go on with that run: "
                     "--init_from=resume)")
        return {**checkpoint, 'path': path}

    def start(self, new, iter_num=0):
        """Training starts: out_dir locked; a new run removes an earlier one's files, a resumed one
        keeps its log's records before iter_num (a cut-off last line dropped with a note)."""
        if self.lock is None:
            self.take_lock()
        for path in self.files if new else ():
            with suppress(FileNotFoundError):
                os.remove(path)
        text = open(self.log_path).read() if os.path.exists(self.log_path) else ''
        lines = [line for line in text.split('\n') if line.strip()]
        for i, line in enumerate(lines):
            try:
                record = json.loads(line)
            except ValueError:
                if i < len(lines) - 1:
                    sys.exit(f"{self.log_path}: line {i + 1} is not JSON: repair or delete it, "
                             "then resume again")
                print(f"{self.log_path}: its last line is cut short, dropped: {line[:60]!r}")
                continue
            if record['iter'] < iter_num:
                self.records.append(record)

    def log(self, record):
        """An evaluation's record appended to eval_log.jsonl (the file rewritten whole)."""
        self.records.append(record)
        text = ''.join(json.dumps(r) + '\n' for r in self.records)
        self.save(self.log_path, lambda tmp: pathlib.Path(tmp).write_text(text))

    def save(self, path, write):
        """write(path + '.tmp'), renamed to path: a crash mid-save leaves the previous file whole; a
        failed write stops the run with one line and leaves no partial file."""
        try:
            write(path + '.tmp')
            os.replace(path + '.tmp', path)
        except (OSError, RuntimeError) as err:  # (torch.save's full disk: a RuntimeError)
            with suppress(OSError):
                os.remove(path + '.tmp')
            why = err.strerror if isinstance(err, OSError) else \
                ' '.join(str(err).split())[:100] + ': is the disk full?'
            sys.exit(f"could not write {path} ({why}): stopping; {self.last_good()}")

    def save_checkpoint(self, ckpt, is_best):
        """ckpt.pt, and best.pt where the state is the best so far."""
        self.saving = True
        self.save(self.ckpt, lambda tmp: torch.save(ckpt, tmp))
        self.saved_iter, self.saving = ckpt['iter_num'], False
        if self.signal_waiting:  # (it came during the save)
            self.interrupted(self.signal_waiting, None)
        if is_best:
            self.save(self.best, lambda tmp: shutil.copyfile(self.ckpt, tmp))

    def last_good(self):
        """Where the run's last good state is, and the command that goes on from it."""
        if self.saved_iter is None:
            return "no checkpoint of this run was saved"
        again = shlex.join(self.launch + ['train.py', f'--out_dir={self.out_dir}',
                                          '--init_from=resume'] + self.resume_flags)
        return f"{self.ckpt} (iter {self.saved_iter}) is intact; go on with: {again}"

    def check_unchanged(self, tokens):
        """One line if the memmap's file changed since the run opened it (not a bus error)."""
        st = os.stat(tokens.filename)
        seen = self.files_seen.setdefault(tokens.filename, (st.st_ino, st.st_size, st.st_mtime_ns))
        if (st.st_ino, st.st_size, st.st_mtime_ns) != seen:
            sys.exit(f"{tokens.filename} changed while the run read it (now {st.st_size} bytes, "
                     f"{seen[1]} when it began): make the data again, and let it be while a run "
                     f"reads it; {self.last_good()}")

    def check_val_loss(self, val_loss, best_val_loss, divergence_margin, iter_num):
        """Stop a run whose val loss is not finite, or exceeds the best by divergence_margin."""
        if not math.isfinite(val_loss):
            self.stop(f"val loss is {val_loss} at iter {iter_num}")
        if divergence_margin and val_loss > best_val_loss + divergence_margin:
            self.stop(f"val loss {val_loss:.4g} at iter {iter_num} exceeds the best so far "
                      f"({best_val_loss:.4g}) by more than divergence_margin={divergence_margin}")

    def early_stop(self, acc, evals):
        """Why the run ends early: val accuracy of at least acc at the last evals evaluations."""
        recent = [r.get('val_acc', 0.0) for r in self.records[-evals:]]
        if acc and len(recent) == evals and min(recent) >= acc:
            return f"val_acc >= {acc} at {evals} evaluations in a row"
        return None

    def stop(self, why):
        """End a run whose loss went non-finite or diverged, saving nothing."""
        sys.exit(f"{why}: stopping without saving; lower learning_rate or check the data "
                 f"({self.last_good()})")

    def interrupted(self, signum, frame):
        """Ctrl-C or SIGTERM: one line that says what is kept, the shell's exit status (130, 143).
        The first during ckpt.pt's save waits for it, so that the line names the file on disk."""
        if self.saving and not self.signal_waiting:
            self.signal_waiting = signum
            return
        if self.master:
            for path in self.files:
                with suppress(OSError):
                    os.remove(path + '.tmp')
            print(f"interrupted: {self.last_good()}", file=sys.stderr)
        sys.exit(128 + signum)

    def finish(self, final, examples, eval_iters, max_iters, ctx_lengths):
        """final.json, and the end of the run in words: which numbers are which, where files are."""
        final = {**final, 'commit': code_commit(os.path.dirname(os.path.abspath(__file__)))}
        text = json.dumps(final, indent=1)
        self.save(self.final, lambda tmp: pathlib.Path(tmp).write_text(text))
        early = final.get('early_stop', {}).get('reason')
        print(f"done: {final['iter']} iterations in {final['minutes']:.1f} minutes"
              + (f", stopped early ({early}; max_iters={max_iters})" if early else ""))
        scores = [f"{k} {final[k]:.4f}" for k in ('val_loss', 'val_acc', 'test_loss', 'test_acc')
                  if k in final]
        note = "" if examples else \
            f" (the log lines' val_loss: an estimate on eval_iters={eval_iters} batches)"
        print(f"final.json, the {final['weights']} weights (iter {final['weights_of_iter']}) on "
              f"the whole splits: {', '.join(scores)}{note}")
        if ctx_lengths:
            bs = final['block_size']
            head = ' | '.join(f"{f'{L // bs}x = {L}':>10s}" for L in ctx_lengths)
            row = ' | '.join(f"{final[f'val_loss_ctx{L}']:10.4f}" for L in ctx_lengths)
            print(f"val loss at context | {head}\n                    | {row}")
        files = {self.ckpt: f"the latest state, iter {self.saved_iter}",
                 self.best: "the state of the lowest val_loss logged",
                 self.log_path: "every evaluation", self.final: "the numbers above"}
        print('files: ' + ', '.join(f"{path} ({what})" for path, what in files.items()
                                    if os.path.exists(path)))
