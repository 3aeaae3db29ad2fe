"""
PG-19 test split (paper Figure 2, length extrapolation): the 100 test books (~7M GPT-2 tokens) as one stream
test.bin, each book's GPT-2 ids followed by <|endoftext|> (50256). From the Hugging Face data set `emozilla/pg19`
(a parquet copy of DeepMind's PG-19; `--hf_name`), or `--source DIR`, a folder of .txt books read in sorted
file-name order (e.g. the test/ folder of DeepMind's release; offline any folder works, but it is not PG-19).
"""

import os

from prepare.common import (GPT2_EOT, GPT2_VOCAB, SourceMissing, argument_parser, find_files, gpt2_encode_docs,
                            gpt2_encoding, load_dataset, run, start_dataset, write_meta, write_streams)


def load_books(args):
    """[(title, text)] of the books, in a fixed order."""
    if args.source is None:
        advice = 'it needs internet (or a filled HF cache), or pass --source with a folder of .txt books'
        ds = load_dataset(args.hf_name, advice, split='test')
        return [(book.get('short_book_title', str(i)), book['text']) for i, book in enumerate(ds)]
    books = []
    for path in find_files(args.source, '*.txt'):
        with open(path, encoding='utf-8', errors='replace') as f:
            books.append((os.path.relpath(path, args.source), f.read()))
    return books


def main(argv=None):
    p = argument_parser(__doc__, 'pg19', 'folder of .txt books instead of the hub')
    p.add_argument('--hf_name', default='emozilla/pg19', help='Hugging Face data set (or deepmind/pg19)')
    args = p.parse_args(argv)

    gpt2_encoding()  # fail early when the BPE files are missing
    books = [(title, text) for title, text in load_books(args) if text.strip()]  # empty files are no books
    if not books:
        raise SourceMissing(f'no book with any text in {args.source or args.hf_name}: give a folder of .txt books')
    work = start_dataset(args.out_dir)
    counts = write_streams(work, [('test', ids) for ids in gpt2_encode_docs(text for _, text in books)], GPT2_VOCAB)
    return write_meta(
        work, vocab_size=GPT2_VOCAB, tokenizer='gpt2', eot=GPT2_EOT, tokens=counts,
        source=(f'{len(books)} books from {args.source or args.hf_name + " split test"}, GPT-2 '
                'tokens, <|endoftext|> after every book'
                + ('' if args.source is None else '; a local folder: PG-19 only if it is its test split')),
        books=[title for title, _ in books])


if __name__ == '__main__':
    run(main)
