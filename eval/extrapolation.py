"""
Length extrapolation (paper Figure 2): perplexity of checkpoints at growing context lengths, on
windows of each length scored from their own start (docs/training.md, "Evaluation"). Learned and
sinusoidal positions stop at block_size. Writes <out>/extrapolation.csv, .json and .png.

    python -m eval.extrapolation --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-pope/ckpt.pt \\
        --yarn_scale 4 --yarn_scale 1 --label "RoPE+YaRN s=4" --label PoPE
    python -m eval.extrapolation --final out-quick-rope/final.json \\
        --final out-quick-pope/final.json --label RoPE --label PoPE --out out-quick-extrapolation
"""

import csv
import math
import os
import time
from collections import defaultdict

import numpy as np
import torch
from tqdm import tqdm

import pretrained
from eval import (ABSOLUTE, DEVICE, autocast, check_data, check_out, default_dtype, device_arg,
                  labels_for, load_tokens, read_json, save_figure, sequence_nll, subplots)
from prepare.common import parser, positive_float, positive_int, write_json
from prepare.data import read_tokens

CTX = 'val_loss_ctx'  # val_loss_ctx<L>: the val loss at context L in train.py's final.json


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--ckpt', action='append', help='a ckpt.pt, or a model pretrained.py reads '
                   '(a GGUF file, smollm2-135m, GPT-2); repeat for several')
    p.add_argument('--final', action='append', help="instead of --ckpt: a final.json of train.py "
                   "with val losses at longer contexts (eval_contexts); repeat for several")
    p.add_argument('--label', action='append', help='one per --ckpt or --final (default: folder)')
    p.add_argument('--data', default='data/pg19/test.bin', help='token file, meta.json beside it')
    p.add_argument('--lengths', default=','.join(str(1024 * i) for i in range(1, 11)))
    p.add_argument('--tokens', type=positive_int, default=1024 * 1024 + 1,
                   help='token budget, the same at every length')
    p.add_argument('--windows', choices=('stream', 'documents'), default='stream', help='stream: '
                   'the first --tokens tokens in windows across document ends; documents: the '
                   'first longest + 1 tokens of each document that long, as --tokens allows')
    p.add_argument('--yarn_scale', type=positive_float, action='append', help='YaRN for RoPE, '
                   'once or once per --ckpt, from its yarn_orig_ctx if trained so, else block_size')
    p.add_argument('--batch_size', type=positive_int, default=1, help='windows per forward pass')
    p.add_argument('--chunk', type=positive_int, default=1024, help='positions per lm_head call')
    p.add_argument('--device', type=device_arg, default=DEVICE)
    p.add_argument('--out', default='out-extrapolation', help='folder of the files written')
    args = p.parse_args(argv)
    if bool(args.ckpt) == bool(args.final):
        p.error('give --ckpt (evaluate checkpoints) or --final (plot what train.py measured)'
                + (', not both' if args.ckpt else ''))
    labels = labels_for(args.ckpt or args.final, args.label)
    check_out(args.out)  # before the work
    results = []
    for path, label in zip(args.final or [], labels):  # the val losses train.py measured
        final = read_json(path)
        rows = [dict(label=label, length=int(k.removeprefix(CTX)), nll=v, ppl=ppl(v),
                     train_ctx=final.get('block_size')) for k, v in final.items()
                if k.startswith(CTX)]
        if not rows:
            raise SystemExit(f"{path} holds no val losses at longer contexts ({CTX}<L>): "
                             "evaluate its ckpt.pt with --ckpt instead")
        results += rows
    if args.final:
        return write(args.out, dict(final=args.final), results, labels, 'nll')
    try:
        lengths = [int(s) for s in args.lengths.split(',') if s.strip()]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise SystemExit(f"--lengths {args.lengths!r}: give context lengths in tokens, e.g. "
                         "1024,2048,4096")
    scales = args.yarn_scale or [None]
    if len(scales) not in (1, len(args.ckpt)):
        p.error('give --yarn_scale once or once per --ckpt')
    scales = scales * len(args.ckpt) if len(scales) == 1 else scales
    dtype = default_dtype(args.device)  # bfloat16 on a GPU that has it, else float32
    windows, about = (stream if args.windows == 'stream' else documents)(args.data, lengths,
                                                                           args.tokens)
    for path, label, scale in zip(args.ckpt, labels, scales):
        ckpt = pretrained.read_source(path)  # a ckpt.pt, or a model that pretrained.py reads
        check_data(os.path.dirname(os.path.abspath(args.data)), ckpt, path)
        over = yarn_overrides(ckpt['model_args'], scale)
        if scale is not None and not over:
            print(f"{label}: --yarn_scale ignored ({ckpt['model_args']['pos_emb']} is not RoPE)")
        # 'auto': the fused kernel for PoPE on CUDA, SDPA elsewhere; never the full score matrix
        model, _ = pretrained.load(path, args.device, ckpt, attn_impl='auto', **over)
        cfg, t = model.config, time.time()
        of = dict(label=label, ckpt=path, pos_emb=cfg.pos_emb, train_ctx=cfg.block_size,
                  yarn_scale=cfg.yarn_scale)
        for L, r in perplexities(model, windows, lengths, args.batch_size, args.device, dtype,
                                 args.chunk, label).items():
            nll, perplexity, count = r or (None, None, 0)
            results.append(dict(of, length=L, nll=nll, ppl=perplexity, tokens=count))
            print(f"{label:>20s} L={L:6d} " + (f"ppl {perplexity:10.3f}" if r else 'skipped'))
        print(f"{label}: {time.time() - t:.1f}s")
        del ckpt, model
    if all(r['nll'] is None for r in results):
        raise SystemExit(f"no length could be scored ({about['tokens']:,} tokens of {args.data}, "
                         f"lengths {lengths}): give shorter --lengths or more --tokens")
    return write(args.out, dict(data=args.data, lengths=lengths, dtype=dtype, **about), results,
                 labels, 'ppl')


def stream(data, lengths, budget):
    """(windows(L), about) of --windows stream."""
    longest, budget = max(lengths), min(budget, len(read_tokens(data)))  # checked, then read
    tokens = load_tokens(data, (budget - 1) // longest * longest + 1 if budget > longest
                         else budget)
    print(f"{data}: {len(tokens) - 1:,} predicted tokens (whole windows of each length), "
          f"lengths {lengths}")
    return (lambda L: stream_windows(tokens, L)), dict(windows='stream', tokens=len(tokens) - 1)


def documents(data, lengths, budget):
    """(windows(L), about) of --windows documents: each length cuts the same rows (the first longest
    + 1 tokens of the documents that long) into windows from their start, the last one shorter."""
    longest, tokens = max(lengths), load_tokens(data)  # checked first: the file, its meta.json
    eot = read_json(os.path.join(os.path.dirname(os.path.abspath(data)), 'meta.json')).get('eot')
    if eot is None:
        raise SystemExit(f"{data}: its meta.json names no end-of-document token (eot), so "
                         "documents cannot be told apart: use --windows stream")
    ends = np.flatnonzero(tokens == eot)
    starts, ends = np.append(0, ends + 1), np.append(ends, len(tokens))  # (the last: maybe no eot)
    long = [a for a, b in zip(starts, ends) if b - a > longest]
    in_all = int(np.sum(ends > starts))
    rows = [tokens[a:a + longest + 1].astype(np.int64) for a in long[:budget // longest]]
    if not rows:
        raise SystemExit(f"{data}: no document of {longest + 1:,} tokens (of {in_all:,}) fits in "
                         f"--tokens {budget}: give shorter --lengths or more --tokens")
    blocks = torch.from_numpy(np.stack(rows))
    about = dict(windows='documents', tokens=blocks.numel() - len(blocks),  # the predicted ones
                 documents=len(blocks), documents_long_enough=len(long), documents_in_all=in_all)
    print(f"{data}: the first {longest + 1:,} tokens of {len(blocks):,} documents (of "
          f"{len(long):,} that long, {in_all:,} in all): {about['tokens']:,} predicted tokens per "
          f"length, lengths {lengths}")

    def windows(L):
        x, y, full = blocks[:, :-1], blocks[:, 1:], longest // L * L
        return [(x[:, :full].reshape(-1, L), y[:, :full].reshape(-1, L))] \
            + [(x[:, full:], y[:, full:])] * (full < longest)
    return windows, about


def yarn_overrides(model_args, scale):
    """GPTConfig overrides that evaluate a RoPE checkpoint with YaRN scale s (None: as trained)."""
    if scale is None or model_args['pos_emb'] not in ('rope', 'rope_half'):
        return {}
    trained_yarn = model_args.get('yarn_scale', 1.0) > 1
    orig_ctx = model_args.get('yarn_orig_ctx', 1024) if trained_yarn else model_args['block_size']
    return dict(yarn_scale=float(scale), yarn_orig_ctx=int(orig_ctx))


def stream_windows(tokens, L):
    """[(inputs, targets)] of the windows of L inputs that tile a token stream from its start."""
    n = (len(tokens) - 1) // L  # windows of L inputs, each with its L next-token targets
    data = torch.from_numpy(np.asarray(tokens[:n * L + 1], dtype=np.int64))
    return [(data[:-1].view(n, L), data[1:].view(n, L))] if n else []


@torch.no_grad()
def perplexities(model, windows, lengths, batch_size=1, device='cpu', dtype='float32', chunk=1024,
                 desc=''):
    """{length: (mean NLL, perplexity, predicted tokens), or None where skipped} of windows(L)."""
    out, cfg = {}, model.config
    for L in lengths:
        groups, beyond = windows(L), cfg.pos_emb in ABSOLUTE and L > cfg.block_size
        if beyond or not groups:
            why = f"{cfg.pos_emb} positions stop at block_size={cfg.block_size}" if beyond \
                else "too few tokens"
            print(f"{desc}: skipping length {L}: {why}")
            out[L] = None
            continue
        nll, count = 0.0, 0
        for inputs, targets in groups:
            for b in tqdm(range(0, len(inputs), batch_size), desc=f"{desc} L={L}", leave=False):
                x, y = (t[b:b + batch_size].to(device) for t in (inputs, targets))
                with autocast(device, dtype):
                    nll += sequence_nll(model, x, y, chunk).sum().item()
            count += inputs.numel()
        out[L] = (nll / count, ppl(nll / count), count)
    return out


def ppl(mean_nll):
    return math.exp(mean_nll) if mean_nll < 700 else float('inf')


def tokens_scored(ev):
    """A note on the tokens an extrapolation.json scored, and each length that scored fewer."""
    fewer = sorted({(r['length'], r['tokens']) for r in ev['results']
                    if r['nll'] is not None and r['tokens'] < ev['tokens']})
    return f"the first {ev['tokens']:,} tokens of {ev['data']}" + (
        f" ({'; '.join(f'at {L}: {n:,}' for L, n in fewer)}, whole windows only)" if fewer else '')


def by_run(paths):
    """(about, {run: {length: [each seed's perplexity]}}, lengths) of extrapolation.json files whose
    labels are '<run>-s<seed>', for the tables of results/; about: the last one's, all results."""
    about, ppl = None, defaultdict(lambda: defaultdict(list))
    for path in paths:
        ev = read_json(path)
        about = dict(ev, results=about['results'] + ev['results']) if about else ev
        for r in ev['results']:
            if r['ppl'] is not None:
                ppl[r['label'].rsplit('-s', 1)[0]][r['length']].append(r['ppl'])
    return about, ppl, sorted({r['length'] for r in about['results']})


def write(out, about, results, labels, key):
    """<out>/extrapolation.json (about and the results), .csv (the results), .png (key)."""
    path = os.path.join(out, 'extrapolation')
    write_json(path + '.json', dict(about, results=results))
    with open(path + '.csv', 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    fig, ax = subplots(figsize=(7, 4.5))
    for label in labels:
        pts = [(r['length'], r[key]) for r in results if r['label'] == label and r[key] is not None]
        if pts:
            ax.plot(*zip(*pts), marker='o', label=label)
    for i, ctx in enumerate(sorted({r['train_ctx'] for r in results} - {None})):
        ax.axvline(ctx, color='gray', ls='--', lw=1, label='training context' if i == 0 else None)
    if key == 'ppl':
        ax.set_yscale('log')
    else:  # train.py's lengths: multiples 1, 2, 4, 8 of the context
        lengths = sorted({r['length'] for r in results})
        ax.set_xscale('log', base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])
        ax.minorticks_off()
    ax.set(xlabel='context length (tokens)',
           ylabel='perplexity (log scale)' if key == 'ppl' else 'val loss (nats per token)')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend()
    save_figure(fig, path + '.png', dpi=150)
    print(f"wrote {path}.csv, .json, .png")
    return results


if __name__ == '__main__':
    main()
