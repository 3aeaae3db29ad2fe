"""
The indirect-indexing task of the PoPE paper (section 4, Table 1; appendix B.1): a string of 20-40 distinct letters,
a source character from it, a shift, and the target, the character that many places to the right (+) or left
(-) of the source, e.g. NZTUIGWkXFrhCJDzscat,N,+4,I or TzbkWoKDyscBepYvfwxEVQtgPa,c,-8,b. The model sees all
but the target and is scored on the target token alone.

Where the paper is silent (results/indirect_indexing/README.md says the same): one token per character, the paper's
52 letters, 10 digits, ',', '+' and '-' (no space: its "..., N, +4, I" is written "...,N,+4,I"), and a pad;
shifts in [-15, +15] without 0 (a shift names a direction), source and shift drawn uniformly, again until the
target lies inside the string; rows right-padded to 48 tokens, the longest example, so the context is 47 (the
paper's table says "sequence length 40", shorter than its own longest example). VARIANTS holds the other
readings, the layouts of the study in results/indirect_indexing/README.md and sub-tasks that separate the task's two
halves (finding the source; moving by the shift), each a `--variant` here (written to data/<variant>: seconds,
or a minute on many cores for the 12.8M-example training split) or `--dataset=<variant>` in train.py, which
makes it.

A row is one example, its target the last real token: right-padded (the target's position varies with the
string's length), or left-padded to a fixed row_len (the target is always the row's last token, and a run of
pads precedes the string), optionally after a '<bos>' token.
"""

import os
import random
import string
from multiprocessing import get_context

import numpy as np

from prepare.common import SPLITS, ignore_ctrl_c, out_dir_arg, parser, run, start_dataset, write_meta, write_streams

LETTERS = string.ascii_uppercase + string.ascii_lowercase
ITOS = list(LETTERS + string.digits + ',+-') + ['<pad>']
PAD = ITOS.index('<pad>')
SIZES = {'train': 1_000_000, 'val': 10_000, 'test': 10_000}  # examples per split (seeds: seed * 1000 + 0, 1, 2)
CHUNK = 1_000_000  # a split is made in chunks of this many examples, the first from the split's seed (in parallel)
# data set name -> how its examples differ from the paper's task as we read it: make_example's arguments, and
# the row's layout: pad ('right' or 'left'), row_len (default: the longest example), bos, n_train (train size)
LAYOUT = ('pad', 'row_len', 'bos', 'n_train')
VARIANTS = {
    'indirect_indexing': {},                                   # our reading (module docstring)
    'indirect_indexing_short': {'lengths': (6, 10), 'max_shift': 3},  # a quick CPU run
    'indirect_indexing_spaces': {'sep': ', '},                 # the paper's printed format, space token
    'indirect_indexing_spaces_shift0': {'sep': ', ', 'zero_shift': True},  # and shifts of 0: no pad prefix
    # the layout of the public replication (results/indirect_indexing/README.md): spaces, shifts of 0, rows left-padded
    # to 56 input tokens, so the query (the space before the target) is always the last position
    'indirect_indexing_leftpad': {'sep': ', ', 'zero_shift': True, 'pad': 'left', 'row_len': 57},
    'indirect_indexing_leftpad_nospace': {'pad': 'left', 'row_len': 57},  # that padding alone: our rows, no spaces
    # the replication's rows less one ingredient: no shifts of 0; no spaces (',' as in our rows)
    'indirect_indexing_leftpad_noshift0': {'sep': ', ', 'pad': 'left', 'row_len': 57},
    'indirect_indexing_leftpad_nospace_shift0': {'zero_shift': True, 'pad': 'left', 'row_len': 57},
    'indirect_indexing_bos': {'bos': True},                    # our rows after a constant first token
    # a fixed query position without a pad prefix: strings of 30 letters, shifts written with two digits (+04), so
    # every row is 38 tokens, none of them padding
    'indirect_indexing_fixedlen': {'lengths': (30, 30), 'shift_digits': 2},
    # no example seen twice: 12.8M training examples, 200k steps of 64 (train.py --example_order=epochs)
    'indirect_indexing_fresh': {'n_train': 12_800_000},
    'indirect_indexing_len40': {'lengths': (20, 32)},          # every example within "sequence length 40"
    'indirect_indexing_shift0': {'zero_shift': True},          # shifts of 0 too (target = source)
    # sub-tasks, one half of the task each. Content only: the shift is fixed, the source must still be found
    'indirect_indexing_next': {'shifts': (1,)},                # the letter after the source (an induction look-up)
    'indirect_indexing_prev': {'shifts': (-1,)},               # the letter before the source
    # position only: the source is the string's first (last) letter, so nothing has to be found
    'indirect_indexing_start': {'anchor': 'start'},            # k places after the start: an absolute position
    'indirect_indexing_end': {'anchor': 'end'},                # k places before the end: fixed offset from ','
    'indirect_indexing_shift3': {'max_shift': 3},              # the whole task, shifts -3..+3
}
ROW_LEN = 48  # the paper's longest example: 40 letters + ',' + source + ',' + '+15' + ',' + target


def shift_choices(max_shift=15, zero_shift=False, shifts=None):
    """The shifts an example may draw: -max_shift..+max_shift, without 0 unless zero_shift; or the list shifts."""
    if shifts is not None:
        return list(shifts)
    return [s for s in range(-max_shift, max_shift + 1) if s != 0 or zero_shift]


def source_choices(L, anchor=None):
    """The source positions an example of L letters may draw: any, or only the first / the last."""
    return {None: range(L), 'start': [0], 'end': [L - 1]}[anchor]


def shift_text(shift, shift_digits=None):
    """A shift as written in an example: its sign, then its digits (zero-padded to shift_digits, if given)."""
    return f'{shift:+0{shift_digits + 1}d}' if shift_digits else f'{shift:+d}'


def make_example(rng, *, lengths=(20, 40), max_shift=15, sep=',', zero_shift=False, shifts=None, anchor=None,
                 shift_digits=None):
    """One example as (text, source index, shift); text ends with the target character.
    (source, shift) is uniform over the pairs that keep the target inside the string."""
    letters = rng.sample(LETTERS, rng.randint(*lengths))  # without replacement
    shifts, sources = shift_choices(max_shift, zero_shift, shifts), source_choices(len(letters), anchor)
    while True:
        src, shift = rng.choice(sources), rng.choice(shifts)
        if 0 <= src + shift < len(letters):
            break
    text = sep.join([''.join(letters), letters[src], shift_text(shift, shift_digits), letters[src + shift]])
    return text, src, shift


def vocabulary(sep=',', bos=False):
    """The tokens of a variant: ITOS, then a space where the separator has one, then '<bos>' where rows start so."""
    return ITOS + [' '] * (' ' in sep) + ['<bos>'] * bos


def decode(ids, itos=ITOS + [' ']):
    return ''.join(itos[i] for i in ids if itos[i] not in ('<pad>', '<bos>'))


def row_length(*, lengths=(20, 40), max_shift=15, sep=',', zero_shift=False, shifts=None, anchor=None, bos=False,
               shift_digits=None):
    """Tokens of the longest example: letters, 3 separators, source, sign, shift digits, target (and bos)."""
    digits = max(len(shift_text(s, shift_digits)) - 1 for s in shift_choices(max_shift, zero_shift, shifts))
    return lengths[1] + 3 * len(sep) + 3 + digits + bos


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
        if pad == 'right':
            rows[i, :len(ids)] = ids
        else:
            rows[i, row_len - len(ids):] = ids
    return rows


def make_split(n, seed, row_len=ROW_LEN, pad='right', bos=False, **variant):
    """n examples as an (n, row_len) uint8 array padded with PAD on the given side; deterministic in seed. Made in
    chunks of CHUNK examples (the first from seed itself, the k-th from f'{seed}:{k}'), in parallel when many."""
    jobs = [(min(CHUNK, n - start), seed if k == 0 else f'{seed}:{k}', row_len, pad, bos, variant)
            for k, start in enumerate(range(0, n, CHUNK))]
    if len(jobs) > 1:
        # fork: the workers need nothing re-imported (train.py, which may call this, runs when imported)
        with get_context('fork').Pool(min(len(jobs), os.cpu_count() or 1), initializer=ignore_ctrl_c) as pool:
            return np.concatenate(pool.map(_chunk, jobs))
    return _chunk(jobs[0]) if jobs else np.full((0, row_len), PAD, dtype=np.uint8)


def task_options(variant):
    """A variant's make_example arguments and its row layout (the LAYOUT keys), as two dicts."""
    options = VARIANTS[variant]
    return ({k: v for k, v in options.items() if k not in LAYOUT}, {k: v for k, v in options.items() if k in LAYOUT})


def question(text, meta):
    """The input tokens of a question 'string,source,shift,' (spaces and the shift's sign optional) as the rows of
    meta's data set hold it, up to its target: with the data set's separator, after '<bos>' where its rows have one,
    left-padded to row_len - 1 tokens where its rows are; the target is the next token. ValueError if it is not one."""
    fields = [f.strip() for f in text.split(',')]
    if len(fields) == 4 and fields[3] == '':
        fields = fields[:3]  # the closing separator is the query: written or not, it is added
    try:
        fields[2] = shift_text(int(fields[2]), meta.get('task', {}).get('shift_digits'))
    except (IndexError, ValueError):
        fields = []
    if len(fields) != 3 or not all(fields):
        raise ValueError(f"{text!r} is not a question 'string,source,shift,', e.g. 'NZTUIGWkXFrhCJDzscat,N,+4,'")
    task, itos = {**make_example.__kwdefaults__, **meta.get('task', {})}, meta['itos']
    sep, stoi = task['sep'], {t: i for i, t in enumerate(itos)}
    chars = list(sep.join(fields) + sep)
    unknown = sorted({c for c in chars if c not in stoi})
    if unknown:
        raise ValueError(f"{unknown} are not in this data set's vocabulary (letters, digits, ',', '+', '-')")
    ask(fields[0], fields[1], int(fields[2]), task)
    ids = ([stoi['<bos>']] if task.get('bos') else []) + [stoi[c] for c in chars]
    n = meta['row_len'] - 1  # the tokens before a row's target
    if len(ids) > n:
        raise ValueError(f"the question is {len(ids)} tokens, longer than the {n} before a row's target in this "
                         "data set: give a shorter string")
    if meta.get('pad') == 'left':
        ids = [meta['pad_id']] * (n - len(ids)) + ids
    return ids


def ask(string, source, shift, task):
    """ValueError unless (string, source, shift) is a question of the task: distinct letters, the source one of
    them, a shift the data set draws, and the target inside the string."""
    if not all(c in LETTERS for c in string + source):
        raise ValueError(f"{string!r} and {source!r}: the string and the source are letters")
    lengths = task.get('lengths', (0, len(string)))
    if lengths[0] == lengths[1] != len(string):  # a layout of one string length (fixedlen): its rows have no other
        raise ValueError(f"the string has {len(string)} letters, this data set's strings {lengths[0]}: give a string "
                         f"of {lengths[0]} letters")
    repeated = sorted({c for c in string if string.count(c) > 1})
    if repeated:
        raise ValueError(f"{''.join(repeated)} repeat in the string: its letters are distinct, or the source's place "
                         "is ambiguous")
    if len(source) != 1 or source not in string:
        raise ValueError(f"the source {source!r} is not a letter of the string {string!r}: ask for one of its letters")
    choices = shift_choices(task['max_shift'], task['zero_shift'], task['shifts'])
    if shift not in choices:
        raise ValueError(f"a shift of {shift:+d} is not one this data set was made with ({min(choices):+d} to "
                         f"{max(choices):+d}" + ("" if 0 in choices else ", not 0") + ")")
    target = string.index(source) + shift
    if not 0 <= target < len(string):
        raise ValueError(f"{shift:+d} places from {source!r} is outside the string of {len(string)} letters: the "
                         "target must be one of its letters")


def prepare(out_dir='data/indirect_indexing', seed=0, sizes=None, variant='indirect_indexing'):
    options, layout = task_options(variant)
    pad, bos = layout.get('pad', 'right'), layout.get('bos', False)
    row_len = layout.get('row_len', row_length(**options, bos=bos))
    itos = vocabulary(options.get('sep', ','), bos)
    sizes = {**SIZES, **({'train': layout['n_train']} if 'n_train' in layout else {}), **(sizes or {})}
    work = start_dataset(out_dir)  # first: an out_dir that is no data set is refused before the work
    rows = [(split, make_split(sizes[split], seed * 1000 + i, row_len, pad, bos, **options))
            for i, split in enumerate(SPLITS)]
    counts = write_streams(work, rows, len(itos))
    # kind 'examples': one example a row of row_len tokens padded with pad_id (on the side `pad` says)
    write_meta(work, vocab_size=len(itos), tokenizer='itos', itos=itos, sep='', tokens=counts, kind='examples',
               row_len=row_len, pad_id=PAD, pad=pad, seed=seed, variant=variant,
               task={**make_example.__kwdefaults__, **options, 'bos': bos},
               source=f'generated by prepare/indirect_indexing.py --variant={variant} (PoPE paper, appendix B.1)')


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--variant', default='indirect_indexing', choices=list(VARIANTS),
                   help="the paper's task as we read it, a short one for quick runs, or another reading (see above)")
    p.add_argument('--out_dir', type=out_dir_arg, default=None, help='default: data/<variant>')
    args = p.parse_args(argv)
    prepare(args.out_dir or os.path.join('data', args.variant), variant=args.variant)


if __name__ == '__main__':
    run(main)
