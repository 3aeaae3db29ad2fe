"""
Length extrapolation (paper Figure 2): perplexity of checkpoints at growing context lengths.

    python -m eval.extrapolation --ckpt out-owt-rope/ckpt.pt --ckpt out-owt-pope/ckpt.pt --ckpt out-owt-rope/ckpt.pt \\
        --yarn_scale 1 --yarn_scale 1 --yarn_scale 4 --label RoPE --label PoPE --label "RoPE+YaRN s=4 (no fine-tune)"
    python -m eval.extrapolation --final out-quick-rope/final.json --final out-quick-pope/final.json \\
        --label RoPE --label PoPE --out out-quick-extrapolation

    python -m eval.extrapolation --data data/linux_c/test.bin --windows documents --tokens 100000000 \
        --lengths 1024,2048,4096,8192,10240 --ckpt out-linux-c-rope/ckpt.pt --ckpt out-linux-c-pope/ckpt.pt

Windows of each length, each scored from its own start, on --data (PG-19 test by default: python -m prepare.pg19):
- `--windows stream` (the default): the first --tokens tokens, cut to a multiple of the longest length, tiled by
  windows that run across document ends (a length that does not divide the longest leaves out the last partial
  window: each result's `tokens` is the count it scored).
- `--windows documents`: windows inside single documents. Every document (the tokens between two of the data
  set's eot) of at least the longest length + 1 tokens gives its first longest + 1 tokens, as many documents as
  --tokens allows; at each length they are cut into windows from their start, the last one shorter where the
  length does not divide the longest. Every length scores the same tokens of the same documents.
Learned/sinusoidal positions stop at block_size (longer lengths are skipped).
Writes <out>/extrapolation.csv, .json and .png. --yarn_scale applies YaRN to RoPE checkpoints (once for all,
or once per --ckpt) from the checkpoint's yarn_orig_ctx if it was trained with YaRN, else its block_size.
"""

import csv
import os
import time

import numpy as np
import torch
from tqdm import tqdm

import pretrained
from eval import (ABSOLUTE, autocast, check_data, check_out, default_dtype, device_arg, labels_for, load_tokens, parser,
                  positive_float, positive_int, ppl, read_json, save_figure, subplots, write_json)
from prepare.common import read_tokens

CTX = 'val_loss_ctx'  # val_loss_ctx<L>: the val loss at context length L in train.py's eval log and final.json


def yarn_overrides(model_args, scale):
    """GPTConfig overrides that evaluate a RoPE checkpoint with YaRN scale s (None: as trained)."""
    if scale is None or model_args['pos_emb'] not in ('rope', 'rope_half'):
        return {}
    trained_yarn = model_args.get('yarn_scale', 1.0) > 1
    orig_ctx = model_args.get('yarn_orig_ctx', 1024) if trained_yarn else model_args['block_size']
    return dict(yarn_scale=float(scale), yarn_orig_ctx=int(orig_ctx))


def stream_windows(tokens, L):
    """[(inputs, targets)] of the windows of L inputs that tile a token stream from its start, across documents."""
    n = (len(tokens) - 1) // L  # windows of L inputs, each with its L next-token targets
    data = torch.from_numpy(np.asarray(tokens[:n * L + 1], dtype=np.int64))
    return [(data[:-1].view(n, L), data[1:].view(n, L))] if n else []


def document_blocks(tokens, eot, length, count):
    """(blocks, eligible, documents): the first length + 1 tokens of each document (the tokens between two eot) that
    has as many, as the rows of a tensor, for the first `count` such documents; how many documents have as many;
    how many there are."""
    ends = np.flatnonzero(np.asarray(tokens) == eot)
    starts = np.concatenate([[0], ends + 1])[:len(ends) + 1]
    ends = np.append(ends, len(tokens))  # the last document may end without its eot
    long = [int(a) for a, b in zip(starts, ends) if b - a >= length + 1]
    rows = [np.asarray(tokens[a:a + length + 1], dtype=np.int64) for a in long[:count]]
    blocks = torch.from_numpy(np.stack(rows)) if rows else torch.zeros(0, length + 1, dtype=torch.int64)
    return blocks, len(long), int(np.sum(ends > starts))


def block_windows(blocks, L):
    """[(inputs, targets)] of blocks (rows of Lmax + 1 tokens, each inside one document) cut into windows of L from
    each block's start. Where L does not divide Lmax, each block's last window is shorter (Lmax 10240 at L 4096:
    4096, 4096, 2048), so that every length scores the same tokens."""
    x, y = blocks[:, :-1], blocks[:, 1:]
    full = x.shape[1] // L * L
    groups = [(x[:, :full].reshape(-1, L), y[:, :full].reshape(-1, L))] if full and len(blocks) else []
    if full < x.shape[1] and len(blocks):
        groups.append((x[:, full:], y[:, full:]))
    return groups


@torch.no_grad()
def perplexities(model, windows, lengths, batch_size=1, device='cpu', dtype='float32', chunk=1024, desc='',
                 batch_tokens=None, quiet=False):
    """{length: (mean NLL, perplexity, predicted tokens)} on the windows of each length, each window scored from its
    own start (windows(L): [(inputs, targets)] of equal-length windows, stream_windows or block_windows); None when
    skipped. batch_tokens: windows per forward pass = batch_tokens // length (at least 1) instead of batch_size."""
    out = {}
    cfg = model.config
    for L in lengths:
        groups = windows(L)
        beyond = cfg.pos_emb in ABSOLUTE and L > cfg.block_size
        if beyond or not groups:
            why = f"{cfg.pos_emb} positions stop at block_size={cfg.block_size}" if beyond else "too few tokens"
            print(f"{desc}: skipping length {L}: {why}")
            out[L] = None
            continue
        nll, count = 0.0, 0
        for inputs, targets in groups:
            per_pass = max(1, batch_tokens // L) if batch_tokens else batch_size
            for b0 in tqdm(range(0, len(inputs), per_pass), desc=f"{desc} L={L}", leave=False, disable=quiet):
                x, y = inputs[b0:b0 + per_pass].to(device), targets[b0:b0 + per_pass].to(device)
                with autocast(device, dtype):
                    nll += model.sequence_nll(x, y, chunk).sum().item()
            count += inputs.numel()
        out[L] = (nll / count, ppl(nll / count), count)
    return out


def plot(results, labels, path, key='ppl'):
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
    ax.set_xlabel('context length (tokens)')
    ax.set_ylabel('perplexity (log scale)' if key == 'ppl' else 'val loss (nats per token)')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend()
    save_figure(fig, path, dpi=150)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--ckpt', action='append', help='a ckpt.pt, or a model pretrained.py reads: a GGUF file or '
                   'smollm2-135m, GPT-2 (repeat for several)')
    p.add_argument('--final', action='append', help="instead of --ckpt: plot the val losses at several contexts "
                   "that train.py wrote into a final.json (eval_contexts; repeat for several), loading no model")
    p.add_argument('--label', action='append', help='a name per --ckpt or --final (default: its folder)')
    p.add_argument('--data', default='data/pg19/test.bin', help='token file; meta.json beside it gives the dtype')
    p.add_argument('--lengths', default=','.join(str(1024 * i) for i in range(1, 11)))
    p.add_argument('--tokens', type=positive_int, default=1024 * 1024 + 1,
                   help='token budget (the same at every length; with --windows documents, the files taken hold '
                   'at most this many scored tokens)')
    p.add_argument('--windows', choices=('stream', 'documents'), default='stream',
                   help="stream: windows tile the token stream, across documents; documents: windows inside single "
                   "documents (files, books) of at least the longest length + 1 tokens, their first tokens")
    p.add_argument('--yarn_scale', type=positive_float, action='append',
                   help='YaRN scale for RoPE checkpoints (once, or once per --ckpt)')
    p.add_argument('--batch_size', type=positive_int, default=1, help='windows per forward pass')
    p.add_argument('--chunk', type=positive_int, default=1024, help='positions per lm_head call')
    p.add_argument('--device', type=device_arg, default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--out', default='out-extrapolation', help='folder for extrapolation.csv, .json and .png')
    args = p.parse_args(argv)

    if bool(args.ckpt) == bool(args.final):
        p.error('give --ckpt (evaluate checkpoints) or --final (plot what train.py measured)'
                + (', not both' if args.ckpt else ''))
    labels = labels_for(args.ckpt or args.final, args.label)
    check_out(args.out)  # before the work
    if args.final:
        results = []
        for path, label in zip(args.final, labels):
            final = read_json(path)
            rows = [dict(label=label, length=int(k.removeprefix(CTX)), nll=v, ppl=ppl(v),
                         train_ctx=final.get('block_size')) for k, v in final.items() if k.startswith(CTX)]
            if not rows:
                raise SystemExit(f"{path} holds no val losses at longer contexts ({CTX}<L>): its run had "
                                 "eval_contexts off, or examples data; evaluate its ckpt.pt with --ckpt instead")
            results += rows
        return write(args.out, dict(final=args.final), results, labels, key='nll')
    try:
        lengths = [int(s) for s in args.lengths.split(',') if s.strip()]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise SystemExit(f"--lengths {args.lengths!r}: give context lengths in tokens, e.g. 1024,2048,4096")
    scales = args.yarn_scale or [None]
    if len(scales) not in (1, len(args.ckpt)):
        p.error('give --yarn_scale once or once per --ckpt')
    scales = scales * len(args.ckpt) if len(scales) == 1 else scales
    dtype = default_dtype(args.device)  # bfloat16 on a GPU that has it, else float32

    longest = max(lengths)
    if args.windows == 'stream':
        tokens = read_tokens(args.data)  # checked; then the budget read into memory
        budget = min(args.tokens, len(tokens))
        budget = (budget - 1) // longest * longest + 1 if budget > longest else budget
        tokens = load_tokens(args.data, budget)
        about = dict(windows='stream', tokens=len(tokens) - 1)
        print(f"{args.data}: {len(tokens) - 1:,} predicted tokens (whole windows of each length), lengths {lengths}")

        def windows(L):
            return stream_windows(tokens, L)
    else:
        tokens = load_tokens(args.data)  # checked first: the file and its meta.json
        eot = read_json(os.path.join(os.path.dirname(os.path.abspath(args.data)), 'meta.json')).get('eot')
        if eot is None:
            raise SystemExit(f"{args.data}: its meta.json names no end-of-document token (eot), so documents cannot "
                             "be told apart: use --windows stream")
        blocks, eligible, documents = document_blocks(tokens, eot, longest, args.tokens // longest)
        if not len(blocks):
            raise SystemExit(f"{args.data}: no document holds {longest + 1:,} tokens (of {documents:,}), or --tokens "
                             f"{args.tokens} is below {longest}: give shorter --lengths or more --tokens")
        about = dict(windows='documents', tokens=blocks.numel() - len(blocks), documents=len(blocks),
                     documents_long_enough=eligible, documents_in_all=documents)
        print(f"{args.data}: the first {longest + 1:,} tokens of {len(blocks):,} documents (of {eligible:,} that long, "
              f"{documents:,} in all): {about['tokens']:,} predicted tokens per length, lengths {lengths}")

        def windows(L):
            return block_windows(blocks, L)

    results = []
    for path, label, scale in zip(args.ckpt, labels, scales):
        ckpt = pretrained.read_source(path)  # a ckpt.pt, or a model that pretrained.py reads (a GGUF file...)
        check_data(os.path.dirname(os.path.abspath(args.data)), ckpt, path)
        model_args = ckpt['model_args']
        over = yarn_overrides(model_args, scale)
        if scale is not None and not over:
            print(f"{label}: --yarn_scale ignored ({model_args['pos_emb']} is not RoPE)")
        # 'auto' = the fused kernel for PoPE on CUDA, SDPA elsewhere: never the full score matrix
        model, _ = pretrained.load(path, args.device, ckpt, attn_impl='auto', **over)
        del ckpt
        cfg = model.config
        t = time.time()
        for L, r in perplexities(model, windows, lengths, args.batch_size, args.device, dtype, args.chunk,
                                 label).items():
            nll, perplexity, count = r or (None, None, 0)
            results.append(dict(label=label, ckpt=path, pos_emb=cfg.pos_emb, train_ctx=cfg.block_size,
                                yarn_scale=cfg.yarn_scale, length=L, nll=nll, ppl=perplexity, tokens=count))
            print(f"{label:>20s} L={L:6d} " + ('skipped' if r is None else f"ppl {perplexity:10.3f}"))
        print(f"{label}: {time.time() - t:.1f}s")
        del model
    if all(r['nll'] is None for r in results):
        raise SystemExit(f"no length could be scored ({about['tokens']:,} tokens of {args.data}, lengths {lengths}): "
                         "give shorter --lengths or more --tokens")
    return write(args.out, dict(data=args.data, lengths=lengths, dtype=dtype, **about), results, labels, key='ppl')


def tokens_scored(ev):
    """The tokens an extrapolation.json (ev) scored, for a table's note: 'the first 58,880 tokens of <data> (at 1024:
    58,368, whole windows only)', naming each length that scored fewer, from its results' counts."""
    fewer = sorted({(r['length'], r['tokens']) for r in ev['results'] if r['nll'] is not None
                    and r['tokens'] < ev['tokens']})
    return f"the first {ev['tokens']:,} tokens of {ev['data']}" + (
        f" ({'; '.join(f'at {L}: {n:,}' for L, n in fewer)}, whole windows only)" if fewer else '')


def write(out, about, results, labels, key):
    """<out>/extrapolation.json (about, and the results), .csv (the results) and .png (key against length)."""
    path = os.path.join(out, 'extrapolation')
    write_json(path + '.json', dict(about, results=results))
    with open(path + '.csv', 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    plot(results, labels, path + '.png', key)
    print(f"wrote {path}.csv, .json, .png")
    return results


if __name__ == '__main__':
    main()
