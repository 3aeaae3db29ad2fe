"""
Evaluation of trained checkpoints, one command per analysis: python -m eval.<name> --help. This file
holds what they share: checks of input and output, a tokenizer, autocast, markdown tables, figures.
"""

import argparse
import contextlib
import json
import os
import re

import numpy as np
import torch
from torch.nn import functional as F

from checkpoint import code_commit, load_checkpoint  # noqa: F401 (the tools import them from here)
from model import ABSOLUTE  # noqa: F401 (the tools import it from here)
from prepare.common import check_writable, encoding, parser  # noqa: F401 (parser: for sample.py)
from prepare.data import read_tokens

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'  # the default --device


def device_arg(text):
    """argparse type of --device: cpu, cuda or cuda:<n> that torch finds here."""
    if not re.fullmatch(r'(cpu|cuda)(:(0|[1-9]\d*))?', text):  # as torch.device reads them
        raise argparse.ArgumentTypeError(f"{text!r}: use cpu, cuda or cuda:<n>")
    n = torch.cuda.device_count()
    if text.startswith('cuda') and int(text.partition(':')[2] or 0) >= n:
        found = f"{n} CUDA GPUs here" if n else "no CUDA GPU here: use --device=cpu"
        raise argparse.ArgumentTypeError(f"{text!r}, but torch finds {found}")
    return text


def check_out(path, folder=True):
    """One line and an exit unless the folder path (folder=False: the file's) can be written."""
    if not folder and (os.path.isdir(path) or path.endswith(os.sep)):
        raise SystemExit(f"--out {path} is a folder: name a file in it to write")
    check_writable(path if folder else os.path.dirname(os.path.abspath(path)), f'--out {path}')


def check_data(data_dir, ckpt, ckpt_path):
    """The meta.json of data_dir, or one line and an exit where its data set is not of the
    checkpoint's kind: another vocabulary, streams against rows of examples, other rows."""
    path = os.path.join(data_dir, 'meta.json')
    if not os.path.isfile(path):
        raise SystemExit(f"{data_dir}: no meta.json: make the data with `python -m prepare.<name>`")
    meta, mine, trained_on = read_json(path), ckpt['meta'], ckpt.get('config', {}).get('dataset')
    advice = f"give the data set it was trained on (data/{trained_on})" if trained_on \
        else "give its data set"
    if meta.get('vocab_size') != ckpt['model_args']['vocab_size']:
        raise SystemExit(f"{data_dir} holds tokens of a vocabulary of {meta.get('vocab_size')}, "
                         f"{ckpt_path} a model of {ckpt['model_args']['vocab_size']}: {advice}")
    keys = ['kind'] + ['row_len', 'pad'] * (mine.get('kind') == 'examples') + [
        k for k in ('tokenizer', 'sep') if k in meta and k in mine]  # (a test's meta.json: less)
    get = lambda m, k: m.get(k, 'stream' if k == 'kind' else None)
    other = [f"{k} {get(meta, k)!r} where the model's has {get(mine, k)!r}" for k in keys
             if get(meta, k) != get(mine, k)]
    if other:
        raise SystemExit(f"{data_dir} is laid out otherwise than the data of {ckpt_path} "
                         f"({'; '.join(other)}): {advice}")
    return meta


def load_tokens(path, count=None, dtype=None):
    """The first count token ids of a .bin (default all), read into memory, not mapped."""
    tokens = read_tokens(path, dtype)  # checks: the file, its meta.json (without dtype), its size
    n = len(tokens) if count is None else min(count, len(tokens))
    data = np.fromfile(path, dtype=tokens.dtype, count=n)
    if len(data) != n:
        raise SystemExit(f"{path} became shorter while it was read: make the data again, and "
                         "evaluate once it is done")
    return data


def log_probs(model, h):
    """log-softmax over the vocabulary of a GPT's hidden states h, in float32 (bf16: ~1e-2 off)."""
    V, b = model.config.vocab_size, model.lm_head.bias
    with torch.autocast(h.device.type, enabled=False):
        b = None if b is None else b[:V].float()
        return F.log_softmax(F.linear(h.float(), model.lm_head.weight[:V].float(), b), dim=-1)


@torch.no_grad()
def sequence_nll(model, idx, targets, chunk=1024):
    """Summed NLL (float64) per sequence of targets (B, T), chunk positions at a time."""
    h = model.hidden_states(idx)
    nll = torch.zeros(idx.size(0), dtype=torch.float64, device=idx.device)
    for t0 in range(0, h.size(1), chunk):
        lp = log_probs(model, h[:, t0:t0 + chunk])
        nll -= lp.gather(-1, targets[:, t0:t0 + chunk, None]).squeeze(-1).double().sum(1)
    return nll


@torch.no_grad()
def context_losses(model, tokens, lengths, batch_tokens, device, ctx):
    """{'val_loss_ctx<L>': mean loss per token} of tokens (n + 1 ids) in windows of L, about
    batch_tokens tokens a pass (train.py's longer contexts)."""
    tokens, out = torch.from_numpy(tokens.astype(np.int64)), {}
    model.eval()
    for L in lengths:
        m = (len(tokens) - 1) // L * L
        x, y = tokens[:m].view(-1, L), tokens[1:m + 1].view(-1, L)
        step, nll = max(1, batch_tokens // L), 0.0
        for i in range(0, len(x), step):
            with ctx:
                nll += sequence_nll(model, x[i:i + step].to(device), y[i:i + step].to(device)).sum()
        out[f'val_loss_ctx{L}'] = float(nll) / x.numel()
    model.train()
    return out


def autocast(device, dtype):
    """The context of every forward pass: autocast to dtype on a GPU, none for float32 or a CPU."""
    if 'cuda' in str(device) and dtype != 'float32':
        return torch.autocast('cuda', dtype=getattr(torch, dtype))
    return contextlib.nullcontext()


def default_dtype(device):
    return 'bfloat16' if 'cuda' in str(device) and torch.cuda.is_bf16_supported() else 'float32'


def tokenizer(meta):
    """(encode, decode) of a data set's meta.json: a BPE by name (GPT-2's, a GGUF model's), whose
    special tokens a prompt may name, or a token list (itos: characters, music events, 6-mers)."""
    missing = [k for k in ['tokenizer'] + ['itos'] * (meta.get('tokenizer') == 'itos')
               if k not in meta]  # (a meta.json of a data set made by hand, say)
    if missing:
        raise SystemExit(f"the model's meta (its data set's meta.json) has no {missing[0]!r}: this "
                         "model cannot turn text into tokens; prepare its data set with "
                         "`python -m prepare.<name>` and train again")
    if meta['tokenizer'] != 'itos':
        enc = encoding(meta['tokenizer'])
        return (lambda s: enc.encode(s, allowed_special='all')), enc.decode
    itos, sep = meta['itos'], meta.get('sep', '')
    stoi = {s: i for i, s in enumerate(itos)}

    def encode(s):
        parts = s.split(sep) if sep else list(s)
        unknown = [t for t in parts if t not in stoi]
        if unknown:
            raise ValueError(f"tokens {unknown[:5]} are not in this data set's vocabulary "
                             f"({len(itos)} tokens)")
        return [stoi[t] for t in parts]

    return encode, (lambda ids: sep.join(itos[i] for i in ids))


def labels_for(paths, labels):
    """The --label given once per path, or else each path's folder name."""
    if labels and len(labels) != len(paths):
        raise SystemExit(f"{len(labels)} --label for {len(paths)} files: give one per file or none")
    return labels or [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in paths]


def read_json(path, lines=False):
    """A JSON file (lines=True: a JSON-lines one's records); one line if missing or damaged."""
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file")
    try:  # (a binary file: a UnicodeDecodeError, a ValueError)
        with open(path, encoding='utf-8') as f:
            text = f.read()
        return [json.loads(s) for s in text.splitlines() if s.strip()] if lines \
            else json.loads(text)
    except ValueError as err:
        raise SystemExit(f"{path} is not valid JSON{' lines' if lines else ''} ({err}): a file cut "
                         "short? Repair it, or write it again")


def write_page(path, lines):
    """Writes the lines of a markdown page to path, and prints them."""
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


def markdown_row(cells):
    return '| ' + ' | '.join(str(c) for c in cells) + ' |'


def markdown_table(head, rows):
    return '\n'.join([markdown_row(head), '|' + '---|' * len(head), *map(markdown_row, rows)])


def subplots(*args, layout='tight', **kwargs):
    """plt.subplots, drawing into files only (no display needed)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt.subplots(*args, layout=layout, **kwargs)


def save_figure(fig, path, dpi):
    import matplotlib.pyplot as plt
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
