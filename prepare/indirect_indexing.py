"""
The indirect-indexing task of the PoPE paper (section 4, Table 1; appendix B.1): a string of 20-40
distinct letters, a source letter from it, a shift, and the target, the letter that many places to
the right (+) or left (-) of the source, e.g. NZTUIGWkXFrhCJDzscat,N,+4,I. The model is scored on
the target token alone. Where the paper is silent (results/indirect_indexing/README.md): one token
per character, no space; shifts in [-15, +15] without 0, drawn with the source until the target lies
inside the string; a row is one example right-padded to 48 tokens. VARIANTS holds the other readings
and sub-tasks, each a `--variant` here or `--dataset=<variant>` in train.py, which makes it.
"""

import os
import random
import string
from multiprocessing import get_context

import numpy as np

from prepare.common import (SPLITS, ignore_ctrl_c, out_dir_arg, parser, run, start_dataset,
                            write_meta, write_streams)

LETTERS = string.ascii_uppercase + string.ascii_lowercase
ITOS = list(LETTERS + string.digits + ',+-') + ['<pad>']
PAD = ITOS.index('<pad>')
ROW_LEN = 48  # the longest example: 40 letters, ',', source, ',', '+15', ',', target
SIZES = {'train': 1_000_000, 'val': 10_000, 'test': 10_000}  # examples; seeds seed * 1000 + 0, 1, 2
CHUNK = 1_000_000  # a split is made in chunks of this many examples, the first from its own seed
# data set name -> how it differs from our reading of the task: make_example's arguments, and the
# rows' LAYOUT: pad ('right', 'left'), row_len (default: the longest example), bos, n_train
LAYOUT = ('pad', 'row_len', 'bos', 'n_train')
VARIANTS = {
    'indirect_indexing': {},                                 # our reading (module docstring)
    'indirect_indexing_short': {'lengths': (6, 10), 'max_shift': 3},  # a quick CPU run
    'indirect_indexing_spaces': {'sep': ', '},               # the paper's printed format, a space
    'indirect_indexing_spaces_shift0': {'sep': ', ', 'zero_shift': True},  # and shifts of 0
    # the public replication's layout (results/indirect_indexing/README.md): spaces, shifts of 0,
    # rows left-padded to 56 input tokens, so the query (the space before the target) comes last
    'indirect_indexing_leftpad': {'sep': ', ', 'zero_shift': True, 'pad': 'left', 'row_len': 57},
    'indirect_indexing_leftpad_nospace': {'pad': 'left', 'row_len': 57},  # that padding alone
    # the replication's rows less one ingredient: no shifts of 0; no spaces (',' as in our rows)
    'indirect_indexing_leftpad_noshift0': {'sep': ', ', 'pad': 'left', 'row_len': 57},
    'indirect_indexing_leftpad_nospace_shift0': {'zero_shift': True, 'pad': 'left',
                                                 'row_len': 57},
    'indirect_indexing_bos': {'bos': True},                  # our rows after a constant first token
    # a fixed query position without a pad prefix: strings of 30 letters, shifts written with two
    # digits (+04), so every row is 38 tokens, none of them padding
    'indirect_indexing_fixedlen': {'lengths': (30, 30), 'shift_digits': 2},
    # no example seen twice: 12.8M training examples, 200k steps of 64 (--example_order=epochs)
    'indirect_indexing_fresh': {'n_train': 12_800_000},
    'indirect_indexing_len40': {'lengths': (20, 32)},          # every example within "length 40"
    'indirect_indexing_shift0': {'zero_shift': True},          # shifts of 0 too (target = source)
    # sub-tasks, one half of the task each. Content only: the shift is fixed, the source is found
    'indirect_indexing_next': {'shifts': (1,)},                # the letter after the source
    'indirect_indexing_prev': {'shifts': (-1,)},               # the letter before the source
    # position only: the source is the string's first (last) letter, so nothing has to be found
    'indirect_indexing_start': {'anchor': 'start'},            # k places after the start
    'indirect_indexing_end': {'anchor': 'end'},                # k places before the end
    'indirect_indexing_shift3': {'max_shift': 3},              # the whole task, shifts -3..+3
}


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--variant', default='indirect_indexing', choices=list(VARIANTS),
                   help="our reading of the paper's task, a short one for quick runs, or another")
    p.add_argument('--out_dir', type=out_dir_arg, default=None, help='default: data/<variant>')
    args = p.parse_args(argv)
    prepare(args.out_dir or os.path.join('data', args.variant), variant=args.variant)


def prepare(out_dir='data/indirect_indexing', seed=0, sizes=None, variant='indirect_indexing'):
    options, layout = task_options(variant)
    pad, bos = layout.get('pad', 'right'), layout.get('bos', False)
    row_len = layout.get('row_len', row_length(**options, bos=bos))
    itos = vocabulary(options.get('sep', ','), bos)
    sizes = {**SIZES, 'train': layout.get('n_train', SIZES['train']), **(sizes or {})}
    work = start_dataset(out_dir)  # first: an out_dir that is no data set is refused before work
    rows = [(split, make_split(sizes[split], seed * 1000 + i, row_len, pad, bos, **options))
            for i, split in enumerate(SPLITS)]
    counts = write_streams(work, rows, len(itos))
    # kind 'examples': an example a row of row_len tokens, padded with pad_id on the side `pad` says
    write_meta(work, vocab_size=len(itos), tokenizer='itos', itos=itos, sep='', tokens=counts,
               kind='examples', row_len=row_len, pad_id=PAD, pad=pad, seed=seed, variant=variant,
               task={**make_example.__kwdefaults__, **options, 'bos': bos},
               source=f'generated by prepare/indirect_indexing.py --variant={variant} (PoPE paper, '
                      'appendix B.1)')


def make_split(n, seed, row_len=ROW_LEN, pad='right', bos=False, **variant):
    """n examples as an (n, row_len) uint8 array padded with PAD on the given side, from seed alone:
    in chunks of CHUNK (the first from seed, the k-th from f'{seed}:{k}'), in parallel when many."""
    jobs = [(min(CHUNK, n - start), seed if k == 0 else f'{seed}:{k}', row_len, pad, bos, variant)
            for k, start in enumerate(range(0, n, CHUNK))]
    if len(jobs) > 1:  # fork: nothing re-imported (train.py, which may call this, runs on import)
        with get_context('fork').Pool(min(len(jobs), os.cpu_count() or 1),
                                      initializer=ignore_ctrl_c) as pool:
            return np.concatenate(pool.map(_chunk, jobs))
    return _chunk(jobs[0]) if jobs else np.full((0, row_len), PAD, dtype=np.uint8)


def _chunk(job):
    """One chunk of make_split: n rows from random.Random(seed)."""
    n, seed, row_len, pad, bos, variant = job
    rng = random.Random(seed)
    itos = vocabulary(variant.get('sep', ','), bos)
    stoi = {c: i for i, c in enumerate(itos)}
    rows = np.full((n, row_len), PAD, dtype=np.uint8)
    for i in range(n):
        ids = [len(itos) - 1] * bos + [stoi[c] for c in make_example(rng, **variant)[0]]
        if len(ids) > row_len:
            raise ValueError(f"row_len={row_len} is shorter than an example of {len(ids)} tokens")
        start = 0 if pad == 'right' else row_len - len(ids)
        rows[i, start:start + len(ids)] = ids
    return rows


def make_example(rng, *, lengths=(20, 40), max_shift=15, sep=',', zero_shift=False, shifts=None,
                 anchor=None, shift_digits=None):
    """(text, source index, shift), text ending with the target; (source, shift) uniform."""
    letters = rng.sample(LETTERS, rng.randint(*lengths))  # without replacement
    shifts = shift_choices(max_shift, zero_shift, shifts)
    sources = source_choices(len(letters), anchor)
    while True:
        src, shift = rng.choice(sources), rng.choice(shifts)
        if 0 <= src + shift < len(letters):
            break
    text = sep.join([''.join(letters), letters[src], shift_text(shift, shift_digits),
                     letters[src + shift]])
    return text, src, shift


def shift_choices(max_shift=15, zero_shift=False, shifts=None):
    """The shifts an example may draw: shifts, else -max_shift..+max_shift (0 if zero_shift)."""
    return list(shifts) if shifts is not None else [
        s for s in range(-max_shift, max_shift + 1) if s != 0 or zero_shift]


def source_choices(L, anchor=None):
    """The source positions an example of L letters may draw: any, or only the first / the last."""
    return {None: range(L), 'start': [0], 'end': [L - 1]}[anchor]


def shift_text(shift, shift_digits=None):
    """A shift as an example writes it: its sign, then its digits (zero-padded to shift_digits)."""
    return f'{shift:+0{shift_digits + 1}d}' if shift_digits else f'{shift:+d}'


def vocabulary(sep=',', bos=False):
    """A variant's tokens: ITOS, a space if the separator has one, '<bos>' if rows start so."""
    return ITOS + [' '] * (' ' in sep) + ['<bos>'] * bos


def row_length(bos=False, **options):
    """Tokens of the longest example: letters, 3 separators, source, sign, digits, target, bos."""
    o = {**make_example.__kwdefaults__, **options}
    choices = shift_choices(o['max_shift'], o['zero_shift'], o['shifts'])
    return o['lengths'][1] + 3 * len(o['sep']) + 3 + bos + max(
        len(shift_text(s, o['shift_digits'])) - 1 for s in choices)


def task_options(variant):
    """A variant's make_example arguments and its row layout (the LAYOUT keys), as two dicts."""
    options = VARIANTS[variant]
    return ({k: v for k, v in options.items() if k not in LAYOUT},
            {k: v for k, v in options.items() if k in LAYOUT})


def decode(ids, itos=ITOS + [' ']):
    return ''.join(itos[i] for i in ids if itos[i] not in ('<pad>', '<bos>'))


def question(text, meta):
    """The input tokens of a question 'string,source,shift,' (spaces and the shift's sign optional)
    as the rows of meta's data set hold them up to the target; ValueError if it is not one."""
    # the closing separator is the query: written or not, it is added
    fields = [f.strip() for f in text.strip().removesuffix(',').split(',')]
    try:
        string, source, shift = fields
        shift = int(shift)
    except ValueError:
        string = source = ''
    if not string or not source:
        raise ValueError(f"{text!r} is not a question 'string,source,shift,', e.g. "
                         "'NZTUIGWkXFrhCJDzscat,N,+4,'")
    task, itos = {**make_example.__kwdefaults__, **meta.get('task', {})}, meta['itos']
    sep, stoi = task['sep'], {t: i for i, t in enumerate(itos)}
    chars = list(sep.join([string, source, shift_text(shift, task['shift_digits'])]) + sep)
    unknown = sorted({c for c in chars if c not in stoi})
    if unknown:
        raise ValueError(f"{unknown} are not in this data set's vocabulary: letters, digits, ,+-")
    lengths = task['lengths']
    repeated = ''.join(sorted({c for c in string if string.count(c) > 1}))
    choices = shift_choices(task['max_shift'], task['zero_shift'], task['shifts'])
    target = string.index(source) + shift if source in string else 0
    for refused, message in [
        (not all(c in LETTERS for c in string + source),
         f"{string!r} and {source!r}: the string and the source are letters"),
        (lengths[0] == lengths[1] != len(string),  # a layout of one string length (fixedlen)
         f"the string has {len(string)} letters, this data set's strings {lengths[0]}: give a "
         f"string of {lengths[0]} letters"),
        (repeated, f"{repeated} repeat in the string: its letters are distinct, or the source's "
                   "place is ambiguous"),
        (len(source) != 1 or source not in string,
         f"the source {source!r} is not a letter of the string {string!r}: ask for one of its "
         "letters"),
        (shift not in choices,
         f"a shift of {shift:+d} is not one this data set was made with ({min(choices):+d} to "
         f"{max(choices):+d}" + ("" if 0 in choices else ", not 0") + ")"),
        (not 0 <= target < len(string),
         f"{shift:+d} places from {source!r} is outside the string of {len(string)} letters: the "
         "target must be one of its letters"),
    ]:
        if refused:
            raise ValueError(message)
    ids = ([stoi['<bos>']] if task.get('bos') else []) + [stoi[c] for c in chars]
    n = meta['row_len'] - 1  # the tokens before a row's target
    if len(ids) > n:
        raise ValueError(f"the question is {len(ids)} tokens, longer than the {n} before a row's "
                         "target in this data set: give a shorter string")
    return [meta['pad_id']] * (n - len(ids)) + ids if meta.get('pad') == 'left' else ids


if __name__ == '__main__':
    run(main)
