"""
Evaluation of trained checkpoints, one command per analysis (python -m eval.<name> --help):
the paper's extrapolation, zero_shot and frequency_usage; learning_curves of train.py's logs; for
indirect indexing, indirect_probe (checkpoints, run tables, chance levels) and attention_reach (one head).

This file holds what they share: the checkpoint's tokenizer, loading a ckpt.pt written by train.py (checkpoint.py:
load_checkpoint, read_checkpoint), the commit of a benchmark's code, and the boilerplate of command lines, tables and
plots (the loss without all the logits at once is GPT.sequence_nll).
"""

import argparse
import json
import math
import os
import subprocess

import torch

from checkpoint import load_checkpoint, read_checkpoint  # noqa: F401 (for the eval scripts)
from prepare.common import gpt2_encoding, parser, write_json  # noqa: F401 (parser, write_json: for the eval scripts)

ABSOLUTE = ('learned', 'sinusoidal')  # encodings that stop at block_size


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


def autocast(device, dtype):
    """bf16/fp16 autocast on a GPU, none on the CPU (as in train.py)."""
    on = 'cuda' in str(device) and dtype != 'float32'
    return torch.autocast('cuda' if on else 'cpu', dtype=getattr(torch, dtype), enabled=on)


def default_dtype(device):
    return 'bfloat16' if 'cuda' in str(device) and torch.cuda.is_bf16_supported() else 'float32'


def tokenizer(meta):
    """(encode, decode) of a data set's meta.json: GPT-2 BPE or a token list (itos)."""
    if meta['tokenizer'] == 'gpt2':
        enc = gpt2_encoding()
        return (lambda s: enc.encode(s, allowed_special={'<|endoftext|>'})), enc.decode
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


def positive_int(text):
    """argparse type: a whole number of 1 or more."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of 1 or more")
    return int(text)


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
