"""
Length extrapolation (paper section 6): perplexity of checkpoints at growing context lengths.

    python -m eval.extrapolation --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-pope/ckpt.pt \\
        --ckpt out-owt-rope-yarn-ft/ckpt.pt --label RoPE --label PoPE --label RoPE+YaRN
    python -m eval.extrapolation --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-rope/ckpt.pt \\
        --yarn_scale 1 --yarn_scale 4 --label RoPE --label "RoPE+YaRN s=4 (no fine-tune)"
    python -m eval.extrapolation --final out-quick-rope/final.json --final out-quick-pope/final.json \\
        --label RoPE --label PoPE --out results/quick_start/extrapolation

The first --tokens tokens of --data (PG-19 test by default: python -m prepare.pg19) are cut into
non-overlapping windows of each length, so every length sees the same tokens (--tokens is rounded
down to a multiple of the longest length). Each window is scored from its own start: the perplexity
is exp of the mean NLL over all predicted tokens of all windows. Learned/sinusoidal positions stop at
block_size: longer lengths are skipped. Writes <out>.csv, <out>.json and <out>.png.

--yarn_scale s applies YaRN to RoPE checkpoints at evaluation (ignored for other encodings); given
once it applies to all checkpoints, or give it once per --ckpt. Its original context is the
checkpoint's own yarn_orig_ctx if it was trained with YaRN, else its block_size (or --yarn_orig_ctx).

train.py measures the same thing as it trains (eval_contexts: val loss at multiples of block_size, through
context_losses below) and writes it into eval_log.jsonl and final.json; --final plots those (val loss vs
length, one line per run) without loading a model.
"""

import argparse
import csv
import json
import os
import time

import numpy as np
import torch
from tqdm import tqdm

from eval import ABSOLUTE, autocast, default_dtype, load_checkpoint, ppl, sequence_nll
from prepare.common import read_tokens


def yarn_overrides(model_args, scale, orig_ctx=None):
    """GPTConfig overrides that evaluate a RoPE checkpoint with YaRN scale s (None: as trained)."""
    if scale is None or model_args['pos_emb'] not in ('rope', 'rope_half'):
        return {}
    if orig_ctx is None:
        trained_yarn = model_args.get('yarn_scale', 1.0) > 1
        orig_ctx = model_args.get('yarn_orig_ctx', 1024) if trained_yarn else model_args['block_size']
    return dict(yarn_scale=float(scale), yarn_orig_ctx=int(orig_ctx))


@torch.no_grad()
def perplexities(model, tokens, lengths, batch_size=1, device='cpu', dtype='float32', chunk=1024, desc='',
                 batch_tokens=None, quiet=False):
    """{length: (mean NLL, perplexity, predicted tokens)} on windows of the same tokens; None when skipped.
    batch_tokens: windows per forward pass = batch_tokens // length (at least 1) instead of batch_size."""
    out = {}
    absolute = model.config.pos_emb in ABSOLUTE
    for L in lengths:
        if absolute and L > model.config.block_size:
            if not quiet:
                print(f"{desc}: skipping length {L}: {model.config.pos_emb} positions stop at "
                      f"block_size={model.config.block_size}")
            out[L] = None
            continue
        n = (len(tokens) - 1) // L  # windows of L inputs, each with its L next-token targets
        if n == 0:
            if not quiet:
                print(f"{desc}: skipping length {L}: only {len(tokens)} tokens")
            out[L] = None
            continue
        data = torch.from_numpy(np.asarray(tokens[:n * L + 1], dtype=np.int64))
        nll, count = 0.0, 0
        batch_size = max(1, batch_tokens // L) if batch_tokens else batch_size
        for b0 in tqdm(range(0, n, batch_size), desc=f"{desc} L={L}", leave=False, disable=quiet):
            b1 = min(n, b0 + batch_size)
            x = torch.stack([data[i * L:(i + 1) * L] for i in range(b0, b1)]).to(device)
            y = torch.stack([data[i * L + 1:(i + 1) * L + 1] for i in range(b0, b1)]).to(device)
            with autocast(device, dtype):
                nll += sequence_nll(model, x, y, chunk).sum().item()
            count += y.numel()
        out[L] = (nll / count, ppl(nll / count), count)
    return out


# -----------------------------------------------------------------------------
# length extrapolation during training: train.py's eval_contexts

def context_lengths(spec, block_size, pos_emb, n_tokens):
    """(lengths, note) for train.py's eval_contexts spec '1,2,4,8' (multiples of block_size) when n_tokens
    tokens are scored: the lengths to evaluate, and a line saying which were left out and why (None if none)."""
    try:
        lengths = [int(s) * block_size for s in spec.split(',') if s.strip()]
    except ValueError:
        raise SystemExit(f"eval_contexts={spec!r}: give multiples of block_size, e.g. '1,2,4,8' ('' = off)")
    if any(L <= 0 for L in lengths):
        raise SystemExit(f"eval_contexts={spec!r}: multiples of block_size must be positive")
    skipped = [L for L in lengths if L > block_size and pos_emb in ABSOLUTE]
    short = [L for L in lengths if L not in skipped and L > n_tokens]
    note = []
    if skipped:
        note.append(f"{pos_emb} positions stop at block_size={block_size}: lengths {skipped} skipped")
    if short:
        note.append(f"{n_tokens} val tokens to score (eval_context_tokens or the split): lengths {short} skipped")
    return [L for L in lengths if L not in skipped + short], ('eval_contexts: ' + '; '.join(note)) if note else None


def context_losses(model, tokens, lengths, n_tokens, batch_tokens, device, dtype):
    """{'val_loss_ctx<L>': mean loss} for each length L, on the first n_tokens of tokens (cut to a multiple of
    the longest L: the same tokens at every length) in non-overlapping windows, each read from its own start.
    Forward passes of ~batch_tokens tokens, in eval mode (no dropout); the model's mode is restored after."""
    if not lengths:
        return {}
    n = min(n_tokens, len(tokens) - 1) // max(lengths) * max(lengths)
    training = model.training
    model.eval()
    out = perplexities(model, tokens[:n + 1], lengths, device=device, dtype=dtype, batch_tokens=batch_tokens,
                       quiet=True)
    model.train(training)
    return {f'val_loss_ctx{L}': r[0] for L, r in out.items() if r is not None}


def context_table(record, block_size):
    """Lines that show the val_loss_ctx<L> keys of a record as a table, with each length's multiple."""
    keys = [k for k in record if k.startswith('val_loss_ctx')]
    cols = [f"{int(k[12:]) // block_size}x = {k[12:]}" for k in keys]
    return ('val loss at context | ' + ' | '.join(f"{c:>10s}" for c in cols) + '\n'
            + '                    | ' + ' | '.join(f"{record[k]:10.4f}" for k in keys))


def read_final(paths, labels):
    """Rows as main() makes them (nll, ppl per length) from the val_loss_ctx<L> keys of train.py's final.json."""
    rows, train_ctx = [], []
    for path, label in zip(paths, labels):
        with open(path) as f:
            final = json.load(f)
        train_ctx.append(final['block_size'])
        for k, v in final.items():
            if k.startswith('val_loss_ctx'):
                rows.append(dict(label=label, length=int(k[12:]), nll=v, ppl=ppl(v), train_ctx=final['block_size']))
    return rows, train_ctx


def plot(results, labels, train_ctx, path, key='ppl'):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label in labels:
        pts = [(r['length'], r[key]) for r in results if r['label'] == label and r[key] is not None]
        if pts:
            ax.plot(*zip(*pts), marker='o', label=label)
    for i, ctx in enumerate(sorted(set(train_ctx))):
        ax.axvline(ctx, color='gray', ls='--', lw=1, label='training context' if i == 0 else None)
    if key == 'ppl':
        ax.set_yscale('log')
    else:  # train.py's lengths: multiples 1, 2, 4, 8 of the context
        ax.set_xscale('log', base=2)
        ax.set_xticks(sorted({r['length'] for r in results}), [str(L) for L in sorted({r['length'] for r in results})])
        ax.minorticks_off()
    ax.set_xlabel('context length (tokens)')
    ax.set_ylabel('perplexity (log scale)' if key == 'ppl' else 'val loss (nats per token)')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--ckpt', action='append', help='a ckpt.pt (repeat for several)')
    p.add_argument('--final', action='append', help="instead of --ckpt: plot the val losses at several contexts that "
                   "train.py wrote into a final.json (eval_contexts; repeat for several)")
    p.add_argument('--label', action='append', help='a name per --ckpt or --final (default: its folder)')
    p.add_argument('--data', default='data/pg19/test.bin', help='token file; meta.json beside it gives the dtype')
    p.add_argument('--lengths', default=','.join(str(1024 * i) for i in range(1, 11)))
    p.add_argument('--tokens', type=int, default=1024 * 1024 + 1, help='token budget (the same tokens at every length)')
    p.add_argument('--yarn_scale', type=float, action='append', help='YaRN scale for RoPE checkpoints (once, or once per --ckpt)')
    p.add_argument('--yarn_orig_ctx', type=int, default=None, help="YaRN's original context (default: see above)")
    p.add_argument('--batch_size', type=int, default=1, help='windows per forward pass')
    p.add_argument('--chunk', type=int, default=1024, help='positions per lm_head call')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--dtype', default=None, help='float32, bfloat16 (default on a GPU) or float16')
    p.add_argument('--out', default='results/extrapolation', help='output prefix for .csv/.json/.png')
    args = p.parse_args(argv)

    if bool(args.ckpt) == bool(args.final):
        p.error('give --ckpt (evaluate checkpoints) or --final (plot what train.py measured), not both')
    paths = args.ckpt or args.final
    labels = args.label or [os.path.basename(os.path.dirname(os.path.abspath(c))) for c in paths]
    if args.final:
        if len(labels) != len(paths):
            p.error('give --label once per --final')
        results, train_ctx = read_final(paths, labels)
        plot(results, labels, train_ctx, args.out + '.png', key='nll')
        print(f"wrote {args.out}.png")
        return results
    lengths = [int(s) for s in args.lengths.split(',') if s.strip()]
    scales = args.yarn_scale or [None]
    if len(labels) != len(args.ckpt) or len(scales) not in (1, len(args.ckpt)):
        p.error('give --label once per --ckpt, and --yarn_scale once or once per --ckpt')
    scales = scales * len(args.ckpt) if len(scales) == 1 else scales
    dtype = args.dtype or default_dtype(args.device)

    tokens = read_tokens(args.data)
    budget = min(args.tokens, len(tokens))
    budget = (budget - 1) // max(lengths) * max(lengths) + 1 if budget > max(lengths) else budget
    tokens = tokens[:budget]
    print(f"{args.data}: {len(tokens) - 1:,} predicted tokens per length, lengths {lengths}")

    results, train_ctx = [], []
    for path, label, scale in zip(args.ckpt, labels, scales):
        margs = torch.load(path, map_location='cpu', weights_only=False)['model_args']
        over = yarn_overrides(margs, scale, args.yarn_orig_ctx)
        if scale is not None and not over:
            print(f"{label}: --yarn_scale ignored ({margs['pos_emb']} is not RoPE)")
        # 'auto' = the fused kernel for PoPE on CUDA, SDPA elsewhere: never the full score matrix
        model, ckpt = load_checkpoint(path, args.device, attn_impl='auto', **over)
        train_ctx.append(model.config.block_size)
        t = time.time()
        for L, r in perplexities(model, tokens, lengths, args.batch_size, args.device, dtype, args.chunk, label).items():
            row = dict(label=label, ckpt=path, pos_emb=model.config.pos_emb, train_ctx=model.config.block_size,
                       yarn_scale=model.config.yarn_scale, length=L, nll=None, ppl=None, tokens=0)
            if r is not None:
                row.update(nll=r[0], ppl=r[1], tokens=r[2])
            results.append(row)
            print(f"{label:>20s} L={L:6d} " + ('skipped' if r is None else f"ppl {r[1]:10.3f}"))
        print(f"{label}: {time.time() - t:.1f}s")
        del model

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + '.csv', 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    with open(args.out + '.json', 'w') as f:
        json.dump(dict(data=args.data, tokens=len(tokens) - 1, lengths=lengths, dtype=dtype, results=results), f, indent=1)
    plot(results, labels, train_ctx, args.out + '.png')
    print(f"wrote {args.out}.csv, .json, .png")
    return results


if __name__ == '__main__':
    main()
