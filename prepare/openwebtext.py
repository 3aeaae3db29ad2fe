"""
OpenWebText (paper section 4) in GPT-2 tokens, as nanoGPT prepares it: every document's GPT-2 ids
(tiktoken, `encode_ordinary`) followed by <|endoftext|> (50256), tokenised in parallel with
`datasets.map(num_proc=...)`, a 0.05% validation split of the documents (seeded shuffle, seed 2357),
train.bin / val.bin as uint16 (~9B / ~4M tokens, ~17 GB / 8 MB). There is no test split.

Sources:
- default: the Hugging Face data set `Skylion007/openwebtext` (~8M documents, ~55 GB download and cache;
  change with --hf_name). Needs internet and `pip install datasets`.
- `--source PATH`: local files instead (a folder or a file: *.txt, one document per file; *.jsonl /
  *.json / *.parquet with a "text" column), read with `datasets` offline.
No part of OpenWebText ships in any package; for offline small runs use prepare/shakespeare.py.

    python -m prepare.openwebtext [--out_dir data/openwebtext] [--num_proc 8]
"""

import argparse
import glob
import math
import os

import numpy as np

from prepare.common import (GPT2_EOT, GPT2_VOCAB, SourceMissing, TokenWriter, gpt2_encoding,
                            start_dataset, summarize, write_meta)

VAL_FRACTION = 0.0005
SEED = 2357


def local_files(path):
    """(datasets builder, data_files) for a local file or folder."""
    if os.path.isfile(path):
        files = [path]
    else:
        files = sorted(f for f in glob.glob(os.path.join(path, '**', '*'), recursive=True)
                       if os.path.isfile(f))
    by_ext = {}
    for f in files:
        ext = f.rsplit('.', 1)[-1].lower() if '.' in os.path.basename(f) else ''
        by_ext.setdefault(ext, []).append(f)
    for ext, builder in (('parquet', 'parquet'), ('jsonl', 'json'), ('json', 'json'), ('txt', 'text')):
        if ext in by_ext:
            return builder, by_ext[ext]
    raise SourceMissing(f'no .parquet, .jsonl, .json or .txt files at {path}')


def load_documents(args):
    """A datasets.Dataset with one document per row in column 'text'."""
    try:
        import datasets
    except ImportError as e:
        raise SourceMissing('openwebtext needs the datasets package: pip install datasets') from e
    if args.source is not None:
        if not os.path.exists(args.source):
            raise SourceMissing(f'--source {args.source} does not exist')
        builder, files = local_files(args.source)
        kw = {'sample_by': 'document'} if builder == 'text' else {}
        ds = datasets.load_dataset(builder, data_files=files, split='train', **kw)
    else:
        try:
            ds = datasets.load_dataset(args.hf_name, split='train', num_proc=args.num_proc)
        except Exception as e:
            raise SourceMissing(
                f'could not load {args.hf_name} from the Hugging Face hub ({type(e).__name__}: {e}); '
                'it needs internet (or a filled HF cache), or pass --source with local files') from e
    if 'text' not in ds.column_names:
        raise SourceMissing(f'the documents have no "text" column (columns: {ds.column_names})')
    return ds


def split_documents(ds, val_fraction=VAL_FRACTION, seed=SEED):
    """{'train': ds, 'val': ds}: ceil(val_fraction * n) documents (at least 1) for val, as nanoGPT."""
    n_val = max(1, math.ceil(val_fraction * len(ds)))
    if len(ds) < 2:
        raise SourceMissing('need at least 2 documents')
    parts = ds.train_test_split(test_size=n_val, seed=seed, shuffle=True)
    return {'train': parts['train'], 'val': parts['test']}


def _tokenize(batch):
    enc = gpt2_encoding()
    ids = enc.encode_ordinary_batch(batch['text'], num_threads=1)
    for x in ids:
        x.append(GPT2_EOT)
    return {'ids': ids, 'len': [len(x) for x in ids]}


def write_split(ds, path, num_shards=1024):
    """Writes the 'ids' column of a tokenised split as one stream, in contiguous shards."""
    from tqdm import tqdm

    num_shards = max(1, min(num_shards, len(ds)))
    with TokenWriter(path, GPT2_VOCAB) as w:
        for i in tqdm(range(num_shards), desc=f'writing {os.path.basename(path)}'):
            shard = ds.shard(num_shards=num_shards, index=i, contiguous=True).with_format('numpy')
            ids = shard['ids']
            if len(ids):
                w.write(np.concatenate([np.asarray(x, dtype=np.int64) for x in ids]))
    return w.count


def main(argv=None):
    p = argparse.ArgumentParser(
        description='OpenWebText -> GPT-2 tokens in data/openwebtext (train.bin, val.bin; 0.05%% val), '
                    'as nanoGPT. Needs internet for the HF data set, or --source local files.',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--out_dir', default=os.path.join('data', 'openwebtext'))
    p.add_argument('--source', default=None,
                   help='local file or folder (.txt = one document per file; .jsonl/.json/.parquet with '
                        'a "text" column) instead of the hub')
    p.add_argument('--hf_name', default='Skylion007/openwebtext', help='Hugging Face data set')
    p.add_argument('--num_proc', type=int, default=max(1, (os.cpu_count() or 2) // 2),
                   help='tokenisation processes')
    p.add_argument('--val_fraction', type=float, default=VAL_FRACTION)
    p.add_argument('--seed', type=int, default=SEED)
    args = p.parse_args(argv)

    gpt2_encoding()  # fail early, before any download, when the BPE files are missing
    ds = load_documents(args)
    splits = split_documents(ds, args.val_fraction, args.seed)
    work = start_dataset(args.out_dir)  # a staging folder, swapped in by write_meta
    counts = {}
    for name, part in splits.items():
        tok = part.map(_tokenize, batched=True, remove_columns=part.column_names,
                       num_proc=args.num_proc if args.num_proc > 1 and len(part) >= args.num_proc else None,
                       desc=f'tokenizing {name}')
        counts[name] = write_split(tok, os.path.join(work, f'{name}.bin'))
    meta = write_meta(
        work, vocab_size=GPT2_VOCAB, tokenizer='gpt2', eot=GPT2_EOT, tokens=counts,
        source=(f'OpenWebText ({args.source or args.hf_name}), GPT-2 tokens with <|endoftext|> after every '
                f'document, {args.val_fraction:.4%} of documents for val (seed {args.seed}), as nanoGPT'),
        documents={k: len(v) for k, v in splits.items()})
    summarize(args.out_dir, meta)
    return meta


if __name__ == '__main__':
    main()
