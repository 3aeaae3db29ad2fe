"""
PG-19's test split (paper Figure 2, length extrapolation): its 100 books (~7M GPT-2 tokens) in
test.bin, each then <|endoftext|> (50256). From the Hugging Face data set `emozilla/pg19`
(`--hf_name`), or `--source DIR`, .txt books in file-name order (DeepMind's test/ folder).
"""

import os
from pathlib import Path

from prepare.bpe import GPT2_EOT, GPT2_VOCAB, gpt2_encode_docs, gpt2_encoding
from prepare.common import (SourceMissing, argument_parser, find_files, load_dataset, run,
                            start_dataset, write_meta, write_streams)


def main(argv=None):
    p = argument_parser(__doc__, 'pg19', 'folder of .txt books instead of the hub')
    p.add_argument('--hf_name', default='emozilla/pg19', help='on the hub (or deepmind/pg19)')
    args = p.parse_args(argv)
    gpt2_encoding()  # fail early when the BPE files are missing
    if args.source is None:
        ds = load_dataset(args.hf_name, 'it needs internet (or a filled HF cache), or pass '
                          '--source with a folder of .txt books', split='test')
        books = [(book.get('short_book_title', str(i)), book['text']) for i, book in enumerate(ds)]
    else:
        books = [(os.path.relpath(path, args.source), Path(path).read_text('utf-8', 'replace'))
                 for path in find_files(args.source, '*.txt')]
    books = [(title, text) for title, text in books if text.strip()]  # (not empty)
    if not books:
        raise SourceMissing(f'no book with any text in {args.source or args.hf_name}: give a '
                            'folder of .txt books')
    work = start_dataset(args.out_dir)
    pieces = [('test', ids) for ids in gpt2_encode_docs(text for _, text in books)]
    return write_meta(
        work, vocab_size=GPT2_VOCAB, tokenizer='gpt2', eot=GPT2_EOT,
        tokens=write_streams(work, pieces, GPT2_VOCAB), books=[title for title, _ in books],
        source=f'{len(books)} books from {args.source or args.hf_name + " split test"}, GPT-2 '
        'tokens, <|endoftext|> after every book'
        + ('' if args.source is None else '; a local folder: PG-19 only if it is its test split'))


if __name__ == '__main__':
    run(main)
