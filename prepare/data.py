"""
A prepared data set as train.py, sample.py and eval/ read it (prepare/common.py writes it):
data/<name>/{train,val,test}.bin hold token ids (a numpy memmap, no header; a split may be missing)
and meta.json vocab_size, dtype, kind ("stream", or "examples": rows of row_len padded with pad_id),
tokenizer ("gpt2", a GGUF model's, or "itos" with itos and sep), eot, source, tokens {split: count}.
open_data checks it before a step runs, naming the command that makes it again (remake_command).
The scripts are run by their module names, none imported here.
"""

import functools
import importlib
import json
import os

import numpy as np
import torch

from prepare.bpe import PACKAGED_GGUF
from prepare.common import SPLITS


def open_data(dataset, device='cpu'):
    """(meta, {split: its tokens (a memmap), or for examples its rows of row_len (a tensor on
    device), or None}) of data/<dataset>; a missing, damaged or foreign data set stops with one
    line."""
    data_dir, remake = os.path.join('data', dataset), remake_command(dataset)
    if not os.path.exists(os.path.join(data_dir, 'meta.json')):
        raise SystemExit(f"no data in {data_dir}: run `{remake}` first (see the README, Reproduce "
                         "the paper)")
    try:
        meta = read_meta(data_dir)
        examples = meta['kind'] == 'examples'
        vocab_size, dtype = meta['vocab_size'], np.dtype(meta['dtype'])
        row, _ = (meta['row_len'], meta['pad_id']) if examples else (1, None)  # tokens a row
    except (ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{os.path.join(data_dir, 'meta.json')} is damaged or incomplete "
                         f"({type(err).__name__}: {err}): run `{remake}` again")
    splits = dict.fromkeys(SPLITS)
    for split in [s for s in SPLITS if os.path.exists(os.path.join(data_dir, f'{s}.bin'))]:
        path = os.path.join(data_dir, f'{split}.bin')
        n_bytes, counted = os.path.getsize(path), meta.get('tokens', {}).get(split)
        n = n_bytes // dtype.itemsize
        if n_bytes % (dtype.itemsize * row):
            problem = f"{n_bytes} bytes, not a whole number of " + (
                f"{row}-token rows" if examples else "tokens")
        elif counted is not None and n != counted:
            problem = f"{n:,} tokens where meta.json says {counted:,}"
        else:  # every id, or past 2^24 tokens 256 stretches of 2^16 over the file
            splits[split] = read_tokens(path, dtype)
            seen = splits[split] if n <= 1 << 24 else np.concatenate(
                [splits[split][i:i + 65536] for i in np.linspace(0, n - 65536, 256, dtype=int)])
            top = int(seen.max()) if n else 0
            problem = f"token id {top} where the vocabulary has {vocab_size}" \
                if top >= vocab_size else None
        if problem:
            raise SystemExit(f"{path} holds {problem} ({dtype} tokens): the data is damaged or of "
                             f"another preparation; run `{remake}` again")
        if examples:  # in the file's dtype (uint8 here), made int64 a batch at a time
            splits[split] = torch.from_numpy(np.array(splits[split]).reshape(-1, row)).to(device)
    return meta, splits


def make_on_first_use(dataset):
    """Makes data/<dataset> if missing: an indirect-indexing variant, or shakespeare_char."""
    data_dir = os.path.join('data', dataset)
    if os.path.exists(os.path.join(data_dir, 'meta.json')):
        return
    indirect = importlib.import_module('prepare.indirect_indexing')
    if dataset in indirect.VARIANTS:
        indirect.prepare(data_dir, variant=dataset)
    elif dataset == 'shakespeare_char':
        importlib.import_module('prepare.shakespeare_char').prepare(data_dir)


def remake_command(dataset):
    """The command that makes (or remakes) data/<dataset>."""
    if dataset in importlib.import_module('prepare.indirect_indexing').VARIANTS:
        return f"python -m prepare.indirect_indexing --variant={dataset}"
    script, tokenizer = dataset_script(dataset)
    source = {'genome': ' --source=hg38.fa.gz', 'maestro': ' --source=maestro-v3.0.0/'}  # needed
    return f"python -m prepare.{script}{source.get(script, '')}" + (
        '' if tokenizer == 'gpt2' else f" --tokenizer={tokenizer}")


def dataset_script(dataset):
    """(script, tokenizer) that make data/<dataset>: <script>_<tag> is in a GGUF's tokens."""
    for short, pkg in PACKAGED_GGUF.items():
        script = dataset.removesuffix('_' + pkg['tag'])
        if script != dataset and os.path.isfile(os.path.join(os.path.dirname(__file__),
                                                             f'{script}.py')):
            return script, short
    return dataset, 'gpt2'


def read_meta(data_dir):
    with open(os.path.join(data_dir, 'meta.json'), encoding='utf-8') as f:
        return json.load(f)


def read_tokens(path, dtype=None):
    """The token ids of a .bin as a read-only memmap, in dtype, else in its meta.json's."""
    made = "make the data with `python -m prepare.<name>`"
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file; {made}")
    if not path.endswith('.bin'):
        raise SystemExit(f"{path} is no token file (train.bin, val.bin, test.bin): give one of a "
                         "data set's .bin files")
    if dtype is None:
        data_dir = os.path.dirname(os.path.abspath(path))
        if not os.path.exists(os.path.join(data_dir, 'meta.json')):
            raise SystemExit(f"{path}: no meta.json beside it; {made}")
        dtype = read_meta(data_dir)['dtype']
    size = os.path.getsize(path)
    if size % np.dtype(dtype).itemsize:
        raise SystemExit(f"{path}: {size} bytes, not a whole number of {dtype} tokens: the file is "
                         "damaged; make the data again")
    return np.memmap(path, dtype=dtype, mode='r') if size else np.zeros(0, dtype)  # (no empty map)


def example_batch(rows, pad_id, all_tokens=False):
    """Inputs and targets of (B, row_len) example rows padded on either side: each row's last real
    token, the other targets -1 (ignored); with all_tokens every next token but the padding."""
    rows = rows.long()
    x, nxt = rows[:, :-1], rows[:, 1:]
    if all_tokens:
        return x, nxt.masked_fill(nxt == pad_id, -1)
    real = rows != pad_id
    last = rows.shape[1] - 1 - real.flip(1).int().argmax(1, keepdim=True)  # the last real token
    return x, nxt.new_full(nxt.shape, -1).scatter_(1, last - 1, rows.gather(1, last))


def stream_batch(tokens, ix, block_size, device='cpu'):
    """Inputs and targets (int64, (len(ix), block_size)) of a token stream's windows at offsets ix,
    each target the token after its input, on device (through pinned memory to a GPU)."""
    w = torch.from_numpy(np.stack([tokens[i:i + block_size + 1] for i in ix]).astype(np.int64))
    x, y = w[:, :-1].contiguous(), w[:, 1:].contiguous()  # (each window read once)
    if torch.device(device).type == 'cuda':
        x, y = x.pin_memory(), y.pin_memory()
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def pass_rows(n, seed, draws):
    """The rows of n taken at draw numbers `draws` (an int array), each pass over them a new
    permutation from (*seed, pass) alone: no row twice within a pass."""
    passes, places = np.divmod(draws, n)
    return np.array([_pass_order(n, tuple(seed), p)[i] for p, i in zip(passes, places)],
                    dtype=np.int64)


@functools.lru_cache(maxsize=2)
def _pass_order(n, seed, epoch):
    return np.random.default_rng((*seed, epoch)).permutation(n)
