"""
Evaluation of trained checkpoints, one command per analysis (python -m eval.<name> --help):
the paper's extrapolation, zero_shot and frequency_usage; learning_curves of train.py's logs; for
indirect indexing, indirect_probe (checkpoints, run tables, chance levels) and attention_reach (one head).

This file holds what they share: the checkpoint's tokenizer, loading a ckpt.pt written by train.py (checkpoint.py:
load_checkpoint, read_checkpoint), the commit of a benchmark's code, and the boilerplate of command lines, tables and
plots (the loss without all the logits at once is GPT.sequence_nll).
"""

import argparse
import contextlib
import json
import math
import os
import subprocess

import numpy as np
import torch

from checkpoint import load_checkpoint, read_checkpoint  # noqa: F401 (for the eval scripts)
from model import ABSOLUTE  # noqa: F401 (encodings that stop at block_size, for the eval scripts)
from prepare.common import (check_writable, encoding, nonnegative_int, parser,  # noqa: F401 (for the eval scripts)
                            positive_float, positive_int, read_tokens, write_json)


def code_commit(folder):
    """The commit of the git repository that holds folder (a benchmark's own code, wherever it runs from), '-dirty'
    where its tree has changes; the environment's POPE_COMMIT instead where set (a copy whose .git is stale)."""
    if os.environ.get('POPE_COMMIT'):
        return os.environ['POPE_COMMIT']
    try:
        return subprocess.run(['git', '-C', folder, 'describe', '--always', '--dirty', '--exclude=*'],
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def device_arg(text):
    """argparse type of --device: cpu, cuda or cuda:<n> that torch finds here, or the parser's one-line error."""
    try:
        kind = torch.device(text).type
    except (RuntimeError, ValueError):  # not a device string at all
        kind = None
    if kind not in ('cpu', 'cuda'):
        raise argparse.ArgumentTypeError(f"{text!r}: use cpu, cuda or cuda:<n>")
    if kind == 'cuda' and (torch.device(text).index or 0) >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(
            f"{text!r}, but torch finds " + (f"{torch.cuda.device_count()} CUDA GPUs here" if torch.cuda.device_count()
                                             else "no CUDA GPU here: use --device=cpu"))
    return text


def check_out(path, folder=True):
    """Exits with one line unless the folder path (or, folder=False, the folder of the file path) can be made and
    written (prepare.common.check_writable); called before the work, so that a read-only --out costs nothing."""
    check_writable(path if folder else os.path.dirname(os.path.abspath(path)), f'--out {path}')


def check_data(data_dir, ckpt, ckpt_path):
    """The meta.json of data_dir, after one line and an exit when its data set is not the checkpoint's kind: another
    vocabulary, or token streams where the model read rows of examples (or the reverse), or rows of another length."""
    meta_path = os.path.join(data_dir, 'meta.json')
    if not os.path.isfile(meta_path):
        raise SystemExit(f"{data_dir}: no meta.json: make the data with `python -m prepare.<name>`")
    meta = read_json(meta_path)
    mine = ckpt['meta']
    trained_on = ckpt.get('config', {}).get('dataset')
    advice = f"give the data set it was trained on (data/{trained_on})" if trained_on else "give its data set"
    vocab = ckpt['model_args']['vocab_size']
    if meta.get('vocab_size') != vocab:
        raise SystemExit(f"{data_dir} holds tokens of a vocabulary of {meta.get('vocab_size')}, {ckpt_path} a model of "
                         f"{vocab}: {advice}")
    keys = ['kind'] + ['row_len', 'pad'] * (mine.get('kind') == 'examples') + [
        k for k in ('tokenizer', 'sep') if k in meta and k in mine]  # (a meta.json of a test may hold less)
    layout = [(k, meta.get(k, 'stream' if k == 'kind' else None), mine.get(k, 'stream' if k == 'kind' else None))
              for k in keys]
    other = [f"{k} {theirs!r} where the model's has {ours!r}" for k, theirs, ours in layout if theirs != ours]
    if other:
        raise SystemExit(f"{data_dir} is laid out otherwise than the data of {ckpt_path} ({'; '.join(other)}): "
                         f"{advice}")
    return meta


def load_tokens(path, count=None, dtype=None):
    """The first count token ids of a .bin (all without count) read into memory, not mapped: a file rewritten or
    cut short while an evaluation runs changes nothing of it (a mapped one would end the process)."""
    tokens = read_tokens(path, dtype)  # checks: the file, its meta.json (without dtype), its size
    n = len(tokens) if count is None else min(count, len(tokens))
    data = np.fromfile(path, dtype=tokens.dtype, count=n)
    if len(data) != n:
        raise SystemExit(f"{path} became shorter while it was read: make the data again, and evaluate once it is done")
    return data


def autocast(device, dtype):
    """The context of train.py's and the eval tools' forward passes: bf16/fp16 autocast on a GPU; with
    dtype='float32', or on the CPU, no autocast at all (float32 throughout)."""
    if 'cuda' in str(device) and dtype != 'float32':
        return torch.autocast('cuda', dtype=getattr(torch, dtype))
    return contextlib.nullcontext()


def default_dtype(device):
    return 'bfloat16' if 'cuda' in str(device) and torch.cuda.is_bf16_supported() else 'float32'


def tokenizer(meta):
    """(encode, decode) of a data set's meta.json: a BPE by name (GPT-2's, a GGUF model's: prepare.common.encoding),
    whose special tokens a prompt may name, or a token list (itos)."""
    if meta['tokenizer'] != 'itos':
        enc = encoding(meta['tokenizer'])
        return (lambda s: enc.encode(s, allowed_special='all')), enc.decode
    itos, sep = meta['itos'], meta.get('sep', '')  # a token list: characters, music events, 6-mers
    stoi = {s: i for i, s in enumerate(itos)}

    def encode(s):
        parts = s.split(sep) if sep else list(s)
        unknown = [t for t in parts if t not in stoi]
        if unknown:
            raise ValueError(f"tokens {unknown[:5]} are not in this data set's vocabulary ({len(itos)} tokens)")
        return [stoi[t] for t in parts]

    return encode, (lambda ids: sep.join(itos[i] for i in ids))


def ppl(mean_nll):
    return math.exp(mean_nll) if mean_nll < 700 else float('inf')


def labels_for(paths, labels):
    """The --label given once per path, or else each path's folder name."""
    if labels and len(labels) != len(paths):
        raise SystemExit(f"{len(labels)} --label for {len(paths)} files: give one per file or none")
    return labels or [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in paths]


def read_json(path, lines=False):
    """A JSON file (final.json), or with lines=True the records of a JSON-lines one (eval_log.jsonl); one clear
    line when it is missing or damaged."""
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file")
    with open(path) as f:
        text = f.read()
    try:
        return [json.loads(s) for s in text.splitlines() if s.strip()] if lines else json.loads(text)
    except ValueError as err:
        raise SystemExit(f"{path} is not valid JSON{' lines' if lines else ''} ({err}): a file cut short? "
                         "Repair it, or write it again")


def markdown_row(cells):
    return '| ' + ' | '.join(str(c) for c in cells) + ' |'


def markdown_table(head, rows):
    return '\n'.join([markdown_row(head), '|' + '---|' * len(head)] + [markdown_row(r) for r in rows])


def subplots(*args, layout='tight', **kwargs):
    """plt.subplots, drawing into files only (no display needed), laid out tight unless told otherwise."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt.subplots(*args, layout=layout, **kwargs)


def save_figure(fig, path, dpi):
    import matplotlib.pyplot as plt
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
