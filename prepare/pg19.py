"""
PG-19 test split (paper section 6, length extrapolation): the 100 test books (~7M GPT-2 tokens) as one
stream test.bin, each book's GPT-2 ids followed by <|endoftext|> (50256). Only test.bin is written.

Sources:
- default: the Hugging Face data set `emozilla/pg19` (parquet copy of DeepMind's PG-19), split "test",
  column "text" (change with --hf_name / --split). Needs internet and `pip install datasets`.
- `--source DIR`: a folder of .txt books instead (e.g. the test/ folder of DeepMind's PG-19 release,
  one book per file; read in sorted file-name order).
PG-19 ships in no package; offline, any folder of .txt files works (it is then not PG-19).

    python -m prepare.pg19 [--out_dir data/pg19] [--source DIR]
"""

import argparse
import glob
import os

from prepare.common import (GPT2_EOT, GPT2_VOCAB, SourceMissing, TokenWriter, gpt2_encode_docs,
                            gpt2_encoding, start_dataset, summarize, write_meta)


def load_books(args):
    """[(title, text)] of the books, in a fixed order."""
    if args.source is not None:
        if not os.path.isdir(args.source):
            raise SourceMissing(f'--source {args.source} is not a folder of .txt books')
        files = sorted(glob.glob(os.path.join(args.source, '**', '*.txt'), recursive=True))
        if not files:
            raise SourceMissing(f'no .txt files under {args.source}')
        books = []
        for f in files:
            with open(f, encoding='utf-8', errors='replace') as fh:
                books.append((os.path.relpath(f, args.source), fh.read()))
        return books
    try:
        import datasets
    except ImportError as e:
        raise SourceMissing('pg19 needs the datasets package (pip install datasets), or --source DIR') from e
    try:
        ds = datasets.load_dataset(args.hf_name, split=args.split)
    except Exception as e:
        raise SourceMissing(
            f'could not load {args.hf_name} split {args.split} ({type(e).__name__}: {e}); it needs '
            'internet (or a filled HF cache), or pass --source with a folder of .txt books') from e
    title = 'short_book_title' if 'short_book_title' in ds.column_names else None
    return [(ds[i][title] if title else str(i), ds[i]['text']) for i in range(len(ds))]


def main(argv=None):
    p = argparse.ArgumentParser(
        description='PG-19 test books -> GPT-2 tokens in data/pg19/test.bin (length extrapolation). '
                    'Needs internet for the HF data set, or --source DIR of .txt books.',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--out_dir', default=os.path.join('data', 'pg19'))
    p.add_argument('--source', default=None, help='folder of .txt books instead of the hub')
    p.add_argument('--hf_name', default='emozilla/pg19', help='Hugging Face data set (or deepmind/pg19)')
    p.add_argument('--split', default='test')
    args = p.parse_args(argv)

    gpt2_encoding()  # fail early when the BPE files are missing
    books = [(title, text) for title, text in load_books(args) if text.strip()]  # empty files are no books
    if not books:
        raise SourceMissing(f'no book with any text in {args.source or args.hf_name}')
    from tqdm import tqdm

    work = start_dataset(args.out_dir)  # a staging folder, swapped in by write_meta
    with TokenWriter(os.path.join(work, 'test.bin'), GPT2_VOCAB) as w:
        for i in tqdm(range(0, len(books), 8), desc='pg19 books'):
            for ids in gpt2_encode_docs([t for _, t in books[i:i + 8]], append_eot=True):
                w.write(ids)
    meta = write_meta(
        work, vocab_size=GPT2_VOCAB, tokenizer='gpt2', eot=GPT2_EOT, tokens={'test': w.count},
        source=(f'{len(books)} books from {args.source or args.hf_name + " split " + args.split}, GPT-2 '
                'tokens, <|endoftext|> after every book'
                + ('' if args.source is None else '; a local folder: PG-19 only if it is its test split')),
        books=[t for t, _ in books])
    summarize(args.out_dir, meta)
    return meta


if __name__ == '__main__':
    main()
