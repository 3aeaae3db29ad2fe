"""
The indirect-indexing task of the PoPE paper (section 2 and appendix A.1): a string of 20-40 distinct letters,
a source character from it, a shift, and the target, the character that many places to the right (+) or left
(-) of the source, e.g. NZTUIGWkXFrhCJDzscat,N,+4,I or TzbkWoKDyscBepYvfwxEVQtgPa,c,-8,b. The model sees all
but the target and is scored on the target token alone.

Where the paper is silent (README, "Indirect indexing", says the same): one token per character, the paper's
52 letters, 10 digits, ',', '+' and '-' (no space: its "..., N, +4, I" is written "...,N,+4,I"), and a pad;
shifts in [-15, +15] without 0 (a shift names a direction), source and shift drawn uniformly, again until the
target lies inside the string; rows right-padded to 48 tokens, the longest example, so the context is 47 (the
paper's table says "sequence length 40", shorter than its own longest example). VARIANTS holds the other
readings and sub-tasks that separate the task's two halves (finding the source; moving by the shift), each a
`--variant` here (written in seconds to data/<variant>) or `--dataset=<variant>` in train.py, which makes it.
"""

import os
import random
import string

import numpy as np

from prepare.common import SPLITS, parser, start_dataset, write_meta, write_streams

LETTERS = string.ascii_uppercase + string.ascii_lowercase
ITOS = list(LETTERS + string.digits + ',+-') + ['<pad>']
SPACE_ITOS = ITOS + [' ']  # the spaces variant adds a space token after the others
STOI = {c: i for i, c in enumerate(SPACE_ITOS)}
PAD = STOI['<pad>']
SIZES = {'train': 1_000_000, 'val': 10_000, 'test': 10_000}  # examples per split (seeds: seed * 1000 + 0, 1, 2)
# data set name -> how its examples differ from the paper's task as we read it (make_example's arguments)
VARIANTS = {
    'indirect_indexing': {},                                   # our reading (module docstring)
    'indirect_indexing_short': {'lengths': (6, 10), 'max_shift': 3},  # a quick CPU run
    'indirect_indexing_spaces': {'sep': ', '},                 # the paper's printed format, space token
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


def make_example(rng, *, lengths=(20, 40), max_shift=15, sep=',', zero_shift=False, shifts=None, anchor=None):
    """One example as (text, source index, shift); text ends with the target character.
    (source, shift) is uniform over the pairs that keep the target inside the string."""
    letters = rng.sample(LETTERS, rng.randint(*lengths))  # without replacement
    shifts, sources = shift_choices(max_shift, zero_shift, shifts), source_choices(len(letters), anchor)
    while True:
        src, shift = rng.choice(sources), rng.choice(shifts)
        if 0 <= src + shift < len(letters):
            break
    text = sep.join([''.join(letters), letters[src], f'{shift:+d}', letters[src + shift]])
    return text, src, shift


def decode(ids):
    return ''.join(SPACE_ITOS[i] for i in ids if i != PAD)


def row_length(*, lengths=(20, 40), max_shift=15, sep=',', zero_shift=False, shifts=None, anchor=None):
    """Tokens of the longest example: letters, 3 separators, source, sign, shift digits, target."""
    digits = max(len(str(abs(s))) for s in shift_choices(max_shift, zero_shift, shifts))
    return lengths[1] + 3 * len(sep) + 3 + digits


def make_split(n, seed, row_len=ROW_LEN, **variant):
    """n examples as an (n, row_len) uint8 array, right-padded with PAD; deterministic in seed."""
    rng = random.Random(seed)
    rows = np.full((n, row_len), PAD, dtype=np.uint8)
    for i in range(n):
        ids = [STOI[c] for c in make_example(rng, **variant)[0]]
        rows[i, :len(ids)] = ids
    return rows


def prepare(out_dir='data/indirect_indexing', seed=0, sizes=None, variant='indirect_indexing'):
    options = VARIANTS[variant]
    row_len = row_length(**options)
    itos = SPACE_ITOS if ' ' in options.get('sep', ',') else ITOS
    sizes = {**SIZES, **(sizes or {})}
    rows = [(split, make_split(sizes[split], seed * 1000 + i, row_len, **options)) for i, split in enumerate(SPLITS)]
    work = start_dataset(out_dir)
    counts = write_streams(work, rows, len(itos))
    # kind 'examples': one example a row of row_len tokens, right-padded with pad_id
    write_meta(work, vocab_size=len(itos), tokenizer='itos', itos=itos, sep='', tokens=counts, kind='examples',
               row_len=row_len, pad_id=PAD, seed=seed, variant=variant, task={**make_example.__kwdefaults__, **options},
               source=f'generated by prepare/indirect_indexing.py --variant={variant} (PoPE paper, appendix A.1)')


if __name__ == '__main__':
    p = parser(__doc__)
    p.add_argument('--variant', default='indirect_indexing', choices=list(VARIANTS),
                   help="the paper's task as we read it, a short one for quick runs, or another reading (see above)")
    p.add_argument('--out_dir', default=None, help='default: data/<variant>')
    args = p.parse_args()
    prepare(args.out_dir or os.path.join('data', args.variant), variant=args.variant)
