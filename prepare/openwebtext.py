"""
OpenWebText (paper section 4) in GPT-2 tokens, as nanoGPT prepares it: each document then
<|endoftext|> (50256), 0.05% of the documents for val (seed 2357), no test split; ~9B / ~4M tokens.
From the Hugging Face data set `Skylion007/openwebtext` (~55 GB download; `--hf_name`), or
`--source`, a local file or folder (*.txt, one document per file; *.jsonl / *.json / *.parquet with
a "text" column). Offline, use prepare/shakespeare.py.
"""

import math
import os

import numpy as np
from tqdm import tqdm

from prepare.bpe import GPT2_EOT, GPT2_VOCAB, gpt2_encode_docs, gpt2_encoding
from prepare.common import (SourceMissing, argument_parser, find_files, load_dataset, positive_int,
                            run, start_dataset, write_meta, write_streams)

VAL_FRACTION = 0.0005
SEED = 2357
BUILDERS = {'.parquet': 'parquet', '.jsonl': 'json', '.json': 'json', '.txt': 'text'}


def main(argv=None):
    p = argument_parser(__doc__, 'openwebtext', 'local file or folder (*.txt, *.jsonl, *.json, '
                        '*.parquet)')
    p.add_argument('--hf_name', default='Skylion007/openwebtext', help='Hugging Face data set')
    p.add_argument('--num_proc', type=positive_int, default=max(1, (os.cpu_count() or 2) // 2),
                   help='tokenisation processes')
    args = p.parse_args(argv)
    gpt2_encoding()  # fail early, before any download, when the BPE files are missing
    if args.source is None:
        ds = load_dataset(args.hf_name, 'it needs internet (or a filled HF cache), or pass '
                          '--source with local files', split='train', num_proc=args.num_proc)
    else:
        files = [args.source] if os.path.isfile(args.source) else find_files(args.source, '*')
        for ext, builder in BUILDERS.items():  # the files of the first extension there
            matching = [f for f in files if f.lower().endswith(ext)]
            if matching:
                break
        else:
            raise SourceMissing(f'no .parquet, .jsonl, .json or .txt files at {args.source}')
        kwargs = {'sample_by': 'document'} if builder == 'text' else {}  # a .txt: one document
        ds = load_dataset(builder, f'check the files at {args.source}', split='train',
                          data_files=matching, **kwargs)
    if 'text' not in ds.column_names:
        raise SourceMissing(f'the documents have no "text" column (columns: {ds.column_names})')
    if len(ds) < 2:
        raise SourceMissing('need at least 2 documents')
    # as nanoGPT: 0.05% of the documents (at least 1) for val
    parts = ds.train_test_split(test_size=max(1, math.ceil(VAL_FRACTION * len(ds))), seed=SEED)
    splits = {}
    for name, part in (('train', parts['train']), ('val', parts['test'])):
        num_proc = args.num_proc if args.num_proc > 1 and len(part) >= args.num_proc else None
        splits[name] = part.map(tokenize, batched=True, remove_columns=part.column_names,
                                num_proc=num_proc, desc=f'tokenizing {name}')
    work = start_dataset(args.out_dir)
    return write_meta(
        work, vocab_size=GPT2_VOCAB, tokenizer='gpt2', eot=GPT2_EOT,
        tokens=write_streams(work, shards(splits), GPT2_VOCAB),
        source=f'OpenWebText ({args.source or args.hf_name}), GPT-2 tokens with <|endoftext|> '
        f'after every document, {VAL_FRACTION:.4%} of documents for val (seed {SEED}), as nanoGPT',
        documents={k: len(v) for k, v in splits.items()})


def tokenize(batch):
    return {'ids': gpt2_encode_docs(batch['text'], num_threads=1)}  # datasets.map runs num_proc


def shards(splits, num_shards=1024):
    """(split, ids) of each tokenised split, in contiguous shards of documents."""
    for name, ds in splits.items():
        n = min(num_shards, len(ds))  # no empty shard
        for i in tqdm(range(n), desc=f'writing {name}'):
            shard = ds.shard(num_shards=n, index=i, contiguous=True).with_format('numpy')
            yield name, np.concatenate(shard['ids'])


if __name__ == '__main__':
    run(main)
