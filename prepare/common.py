"""
What the prepare/ scripts share: their command line (argument_parser, run), and writing a data set
as prepare/data.py reads it into a staging folder that write_meta, last, swaps in for out_dir, so
that a run that fails or is stopped leaves out_dir as it was. A full disk, a folder that cannot be
replaced and a Ctrl-C (exit status 130) are one line.
"""

import argparse
import contextlib
import errno
import fcntl
import glob
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

from prepare.bpe import PACKAGED_GGUF, TOKENIZER_HELP, tokenizer_name
# also given here, for the scripts and eval/
from prepare.bpe import GGUFEncoding, encoding, gpt2_encoding, package_dir  # noqa: F401

SPLITS = ('train', 'val', 'test')
RUN_FILES = ('ckpt.pt', 'best.pt', 'eval_log.jsonl', 'final.json')  # a train.py run's folder
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)  # a disk that takes no more
PARTIAL = '.partial-'  # the staging folder of a data set being written: <out_dir>.partial-<pid>-<n>


class SourceMissing(SystemExit):
    """A script's input is missing or unusable: a clean exit, one line that says what to do."""

    def __init__(self, message):
        super().__init__('error: ' + message)


def argument_parser(doc, name, source_help, tokenizer=False):
    """--out_dir (default data/<name>) and --source; with tokenizer, --tokenizer too, and the
    script writes to `args.out_dir or data_dir(name, args.tokenizer)`."""
    p, default = parser(doc), os.path.join('data', name)
    other = (", or data/<name>_<tag> in another --tokenizer's tokens, e.g. "
             + data_dir(name, next(iter(PACKAGED_GGUF)))) if tokenizer else ''
    p.add_argument('--out_dir', type=out_dir_arg, default=None if tokenizer else default,
                   help=f'a new folder, an empty one, or a data set to replace (default: {default}'
                   f'{other})')
    p.add_argument('--source', default=None, help=source_help)
    if tokenizer:
        p.add_argument('--tokenizer', type=tokenizer_arg, default='gpt2', help=TOKENIZER_HELP)
    return p


def start_dataset(out_dir):
    """The staging folder to write into (made by its first file); refuses an out_dir that is no
    data set or cannot be written, and clears the staging folders of runs that have ended."""
    final = check_out_dir(out_dir)
    check_writable(os.path.dirname(os.path.abspath(final)), f'--out_dir {out_dir}')
    for old in glob.glob(glob.escape(final + PARTIAL) + '*'):
        pid = os.path.basename(old)[len(os.path.basename(final + PARTIAL)):].split('-')[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return f'{final}{PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}'


def write_streams(out_dir, pieces, vocab_size, eot=None):
    """Writes (split, ids) pairs, in order, to <split>.bin, eot after each; {split: tokens}."""
    writers = {}
    with writing(out_dir), contextlib.ExitStack() as stack:  # on an error every .tmp is deleted
        for split, ids in pieces:
            if split not in writers:
                path = os.path.join(out_dir, f'{split}.bin')
                writers[split] = stack.enter_context(TokenWriter(path, vocab_size))
            if len(ids):  # an empty document (an empty file): no tokens, not even its eot
                writers[split].write(ids if eot is None else np.append(ids, eot))
    return {split: writers[split].count for split in SPLITS if split in writers}


def write_meta(out_dir, *, vocab_size, tokenizer, source, tokens, eot=None, itos=None, sep='',
               **extra):
    """Writes meta.json (call it last), swaps the staging folder in and prints a summary."""
    if tokenizer == 'itos' and (itos is None or len(itos) != vocab_size):
        raise ValueError('an itos tokenizer needs itos with exactly vocab_size entries')
    meta = {'vocab_size': vocab_size, 'dtype': dtype_for_vocab(vocab_size).name, 'kind': 'stream',
            'tokenizer': tokenizer, 'eot': eot, 'source': source, 'tokens': tokens,
            **({} if itos is None else {'itos': list(itos), 'sep': sep}), **extra}
    final, theirs = _staged(out_dir) or out_dir, None  # (out_dir: no staging folder, in tests)
    with writing(out_dir):  # on an error the staging folder goes, the data set stays as it was
        if sum(tokens.values()) == 0:
            raise SourceMissing(f'the source holds no usable data (0 tokens): {final} not written; '
                                'check the input')
        with contextlib.suppress(OSError, ValueError), \
                open(os.path.join(final, 'meta.json'), encoding='utf-8') as f:
            theirs = json.load(f) if final != out_dir else None
        other = [f"{k} {theirs[k]!r}" for k in ('kind', 'tokenizer', 'vocab_size')
                 if isinstance(theirs, dict) and k in theirs and theirs[k] != meta[k]]
        if other:  # a data set replaces only its own kind (what trained on it still reads it)
            raise SourceMissing(f"{final} holds another data set ({', '.join(other)}): choose a "
                                "folder of its own for this one, or delete that one first")
        write_json(os.path.join(out_dir, 'meta.json'), meta)  # last: a meta.json means complete
        if final != out_dir:
            _swap_in(out_dir, final)
    counts = ', '.join(f'{k} {v:,}' for k, v in tokens.items())
    print(f'wrote {final}: vocab {vocab_size} ({meta["dtype"]}), tokens: {counts}')
    return meta


def run(main):
    """A script's main() from the command line: a Ctrl-C is one line, exit status 130."""
    try:
        main()
    except KeyboardInterrupt:
        interrupted(None)


# --------------------------------------------------------------------------------------------------
# the data set's folder: what it may replace, the staging folder swapped in, one line on errors

def check_out_dir(out_dir):
    """out_dir normalised, or one line: a data set replaces only a data set (a meta.json, no
    train.py run), an empty folder, or nothing."""
    if not out_dir or not str(out_dir).strip():
        raise SystemExit("the data set's folder is empty text: name one, e.g. "
                         "--out_dir=data/<name>")
    final = os.path.normpath(str(out_dir))
    here, there = os.path.abspath(os.getcwd()), os.path.abspath(final)
    folder = os.path.isdir(final) and not os.path.islink(final)
    run_files = [f for f in RUN_FILES if folder and os.path.exists(os.path.join(final, f))]
    for refused, message in [
        (here == there or here.startswith(there.rstrip(os.sep) + os.sep),
         "is the current folder or one above it, not a data set's: name a folder of its own, "
         "e.g. --out_dir=data/<name>"),
        (os.path.islink(final),
         f"is a link: name the folder it points to, --out_dir={os.path.realpath(final)}"),
        (os.path.lexists(final) and not os.path.isdir(final),
         "is a file, not a data set's folder: choose another --out_dir, e.g. data/<name>"),
        (folder and os.listdir(final) and not os.path.isfile(os.path.join(final, 'meta.json')),
         "holds files but no meta.json: it is not a data set, and a data set replaces only a data "
         "set; choose another --out_dir (e.g. data/<name>), or empty it first"),
        (run_files,
         f"holds a data set and a train.py run ({', '.join(run_files)}), which replacing the data "
         "set would delete: move the run's files out first, or choose another --out_dir"),
    ]:
        if refused:
            raise SystemExit(f"{out_dir} {message}")
    return final


def check_writable(folder, name):
    """Exits with one line unless folder (or its nearest folder that exists) can be written."""
    where = os.path.abspath(folder)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    if not os.path.isdir(where):
        raise SystemExit(f"{name}: {where} is a file, not a folder: give a folder you can write to")
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as err:
        raise SystemExit(f"{name}: cannot write in {where} ({err.strerror or err}): give a folder "
                         "you can write to")


@contextlib.contextmanager
def writing(work, option='--out_dir'):
    """Writing into work (a staging folder or a `<file>.tmp`): on an error work goes, and a full
    disk or a Ctrl-C is one line naming option, which writes elsewhere."""
    try:
        yield
    except BaseException as err:
        final = _staged(work) or work.removesuffix('.tmp')
        if final != work:
            _remove(work)
        if isinstance(err, OSError) and err.errno in WRITE_ERRORS:  # (not a source unreadable)
            raise SystemExit(f"could not write {final} ({err.strerror or err}): free some space or "
                             f"choose another {option}; {final} is as it was") from None
        if isinstance(err, KeyboardInterrupt):
            interrupted(final)
        raise


def interrupted(path):
    """A Ctrl-C while path is written (None: before anything was): one line, exit status 130."""
    print(f"interrupted: {path} not written, nothing else changed" if path else
          "interrupted before anything was written: nothing changed", file=sys.stderr)
    raise SystemExit(130) from None


def _swap_in(work, final):
    """Puts the data set work in final's place, or one line with final as it was."""
    old = f'{final}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}'
    lock = os.open(os.path.dirname(os.path.abspath(final)), os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one swap at a time beside it: another run waits here
        check_out_dir(final)  # again: the folder may have changed while the data was made
        try:
            if os.path.exists(final):
                os.replace(final, old)
            try:
                os.replace(work, final)
            except BaseException:
                if os.path.exists(old):
                    os.replace(old, final)
                raise
        except OSError as err:
            raise SystemExit(f"could not replace {final} ({err.strerror or err}): delete it as its "
                             f"owner, or choose another --out_dir; {final} is as it was") from None
    finally:
        os.close(lock)  # (and its lock)
    shutil.rmtree(old, ignore_errors=True)


def _staged(out_dir):
    """The data set's folder of a staging folder, or None if out_dir is none."""
    m = re.fullmatch(r'(.+)' + re.escape(PARTIAL) + r'\d+-[0-9a-f]{8}', os.path.normpath(out_dir))
    return m and m.group(1)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        pass
    return True


# --------------------------------------------------------------------------------------------------
# token files and splits

def dtype_for_vocab(vocab_size):
    """The smallest unsigned dtype that holds the ids 0..vocab_size-1."""
    return np.min_scalar_type(vocab_size - 1)


class TokenWriter:
    """Appends token ids to `<path>.tmp`, renamed to path when the `with` block ends well."""

    def __init__(self, path, vocab_size):
        self.path, self.vocab_size, self.count = str(path), vocab_size, 0  # count: tokens written

    def __enter__(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.file = open(self.path + '.tmp', 'wb')
        return self

    def write(self, ids):
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f'token id out of range [0, {self.vocab_size}): min {ids.min()}, '
                             f'max {ids.max()}')
        self.file.write(ids.astype(dtype_for_vocab(self.vocab_size)).tobytes())
        self.count += ids.size

    def __exit__(self, exc_type, *_):
        try:
            self.file.close()  # (a full disk may show only here, at the last flush)
            if exc_type is None:
                os.replace(self.path + '.tmp', self.path)
        finally:
            _remove(self.path + '.tmp')


def write_json(path, obj, **kwargs):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=1, ensure_ascii=False, **kwargs)
        f.write('\n')


def split_counts(n, fractions):
    """Sizes of groups of n items in the proportions fractions (largest remainders), each of a
    positive fraction 1 or more where n allows."""
    raw = [n * f / sum(fractions) for f in fractions]
    sizes = [int(r) for r in raw]
    by_remainder = sorted(range(len(raw)), key=lambda i: raw[i] - sizes[i], reverse=True)
    for i in by_remainder[:n - sum(sizes)]:
        sizes[i] += 1
    for i, f in enumerate(fractions):  # an empty group of a positive fraction: one from the largest
        if f > 0 and sizes[i] == 0 and n >= sum(1 for g in fractions if g > 0):
            sizes[max(range(len(sizes)), key=lambda j: sizes[j])] -= 1
            sizes[i] += 1
    return sizes


def deterministic_split(items, fractions, seed):
    """{split: items}: a copy of items shuffled with random.Random(seed), cut in the proportions."""
    items, out, start = list(items), {}, 0
    random.Random(seed).shuffle(items)
    for name, size in zip(SPLITS, split_counts(len(items), fractions)):
        out[name], start = items[start:start + size], start + size
    return out


# --------------------------------------------------------------------------------------------------
# command line and sources

def parser(doc):
    """An argparse parser whose --help prints doc as written."""
    return argparse.ArgumentParser(description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def data_dir(name, tokenizer):
    """data/<name> in GPT-2's tokens, data/<name>_<tag> in a GGUF model's."""
    if tokenizer == 'gpt2':
        return os.path.join('data', name)
    tag = PACKAGED_GGUF[tokenizer]['tag'] if tokenizer in PACKAGED_GGUF else re.sub(
        r'\W+', '_', os.path.basename(tokenizer).removesuffix('.gguf').lower())
    return os.path.join('data', f'{name}_{tag}')


def _argument_type(convert, wanted=None):
    """An argparse type: convert(text), else a one-line error asking for wanted (convert gave None
    or a ValueError) or the line of a check that exits."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        except SystemExit as err:
            raise argparse.ArgumentTypeError(str(err.code)) from None
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r}: give {wanted}")
        return value
    return parse


positive_int = _argument_type(lambda t: int(t) if t.strip().isdigit() and int(t) >= 1 else None,
                              'a whole number of 1 or more')
positive_float = _argument_type(lambda t: float(t) if 0 < float(t) < float('inf') else None,
                                'a number above 0')
out_dir_arg = _argument_type(check_out_dir)  # argparse type of --out_dir
tokenizer_arg = _argument_type(tokenizer_name)  # argparse type of --tokenizer


def find_files(folder, *patterns):
    """The files under folder, at any depth, whose names match one of the patterns, sorted."""
    found = {f for p in patterns for f in glob.glob(os.path.join(folder, '**', p), recursive=True)}
    return sorted(f for f in found if os.path.isfile(f))


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


def ignore_ctrl_c():
    """A worker's initializer: a Ctrl-C reaches every process; the parent alone answers it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
