"""
JSB chorales (paper Table 2): four voices (S, A, T, B) at 16th-note steps in raster order (at each
step the four voices). Vocab 90, as the paper states; the mapping is our reading: 0 a rest (-1),
p + 1 MIDI pitch p for p = 0..87 (the chorales use 36..81), 89 the end of a piece (`eot`). The
paper's data: the JSON release `Jsb16thSeparated.json` (--source; 229/76/77 pieces), its split
kept. Offline: the 371 Bach chorales of music21, the same representation but not the same pieces
(music21's editions, some duplicates, repeats not expanded), our own seeded split 222/74/75.
"""

import json
import math
import os

import numpy as np

from prepare.common import (SourceMissing, argument_parser, deterministic_split, parallel_map,
                            positive_int, run, start_dataset, write_meta, write_streams)

N_PITCH = 88
REST = 0
SEP = N_PITCH + 1  # 89
VOCAB = N_PITCH + 2  # 90
ITOS = ['-1'] + [str(p) for p in range(N_PITCH)] + ['|']
VOICES = ('soprano', 'alto', 'tenor', 'bass')
PAPER_SPLIT = (229, 76, 77)


def main(argv=None):
    p = argument_parser(__doc__, 'jsb_chorales', 'Jsb16thSeparated.json; default: music21\'s')
    p.add_argument('--limit', type=positive_int, help='music21 only: the first N chorales (tests)')
    p.add_argument('--num_proc', type=positive_int, default=min(8, os.cpu_count() or 1),
                   help='music21 parsing processes')
    args = p.parse_args(argv)
    if args.source is not None:  # the JSON release, its "valid" read as val
        try:
            with open(args.source) as f:
                data = json.load(f)
            pieces = {split: [encode_piece(chords) for chords in data[key]]
                      for split, key in (('train', 'train'), ('val', 'valid'), ('test', 'test'))}
        except (OSError, ValueError, KeyError, TypeError) as e:  # not JSON, keys or pitches
            raise SourceMissing(f'{args.source}: {type(e).__name__}: {e}; give the JSON release of '
                                'the chorales (Jsb16thSeparated.json, keys train/valid/test), or '
                                'no --source for music21\'s') from e
        listed = {s: len(v) for s, v in pieces.items()}
    else:
        try:
            from music21 import corpus
        except ImportError as e:
            raise SourceMissing('the offline chorales need music21: pip install music21==10.5.1 '
                                '(or pass --source Jsb16thSeparated.json)') from e
        names = list(corpus.chorales.Iterator(numberingSystem='riemenschneider',
                                              returnType='filename'))[:args.limit]
        # {riemenschneider number: chords}: the number is the place in this list (a few files come
        # under two numbers)
        chorales = dict(enumerate(parallel_map(parse_chorale, names, args.num_proc,
                                               desc='chorales'), start=1))
        split = deterministic_split(sorted(chorales), PAPER_SPLIT, seed=1337)
        pieces = {s: [encode_piece(chorales[n]) for n in numbers] for s, numbers in split.items()}
        listed = {s: sorted(v) for s, v in split.items()}
    counts = '/'.join(str(len(v)) for v in pieces.values())
    source = (f'JSON release of the JSB chorales ({os.path.basename(args.source)}), its own '
              f'train/valid/test split ({counts} pieces)' if args.source is not None else
              f'offline stand-in: {len(chorales)} Bach chorales of the music21 corpus '
              '(riemenschneider numbering), S/A/T/B parts quantised to 16th notes; not the JSON '
              'release the paper uses (different editions, 371 instead of 382 pieces) and our own '
              f'seeded split in the paper\'s proportions 229:76:77 ({counts}; riemenschneider '
              'numbers in "pieces")')
    work = start_dataset(args.out_dir)
    ids = [(s, piece) for s, v in pieces.items() for piece in v]
    return write_meta(work, vocab_size=VOCAB, tokenizer='itos', itos=ITOS, sep=' ', eot=SEP,
                      tokens=write_streams(work, ids, VOCAB, SEP), source=source,
                      representation='raster order S,A,T,B per 16th-note step; id = MIDI pitch + '
                                     '1, 0 = rest (-1), 89 = end of piece', pieces=listed)


def encode_piece(chords):
    """[s, a, t, b] chords (short ones padded with rests) -> raster-order ids, no separator."""
    return np.array([encode_value(v) for chord in chords
                     for v in list(chord)[:4] + [-1] * (4 - len(chord))], dtype=np.int64)


def encode_value(v):
    """One voice value (a MIDI pitch, maybe a float; -1, NaN or None for a rest) -> token id."""
    if v is None or math.isnan(v) or round(v) < 0:
        return REST
    if round(v) >= N_PITCH:
        raise ValueError(f'MIDI pitch {round(v)} outside the vocabulary\'s 0..{N_PITCH - 1}')
    return round(v) + 1


def decode(ids):
    return ' '.join(ITOS[i] for i in ids)


def parse_chorale(name):
    from music21 import corpus
    return score_to_chords(corpus.parse(name))


def score_to_chords(score, steps_per_quarter=4):
    """A music21 chorale -> [s, a, t, b] MIDI pitches (-1: rest) at 16th-note steps."""
    parts = list(score.parts)
    named = [[p for p in parts if (p.partName or '').strip().lower().startswith(v)] for v in VOICES]
    if not all(named) and len(parts) < 4:
        raise ValueError(f'score has {len(parts)} parts, need 4 voices')
    parts = [match[0] for match in named] if all(named) else parts[:4]
    end = max(p.flatten().highestTime for p in parts)
    grid = np.full((int(round(end * steps_per_quarter)), 4), -1, dtype=np.int64)
    for v, part in enumerate(parts):
        for el in part.flatten().notes:  # notes and chords; a chord keeps its highest note
            a = int(round(float(el.offset) * steps_per_quarter))
            b = int(round((float(el.offset) + float(el.quarterLength)) * steps_per_quarter))
            grid[a:b, v] = max(p.midi for p in el.pitches)  # nothing for a grace note (b == a)
    return grid.tolist()


if __name__ == '__main__':
    run(main)
