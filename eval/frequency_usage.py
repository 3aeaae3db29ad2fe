"""
Frequency usage (paper section 7): mean query and key magnitude per frequency channel and layer.

    python -m eval.frequency_usage --rope out-shakespeare-rope/ckpt.pt --pope out-shakespeare-pope/ckpt.pt
    python -m eval.frequency_usage --pope out-owt-pope/ckpt.pt --text sonnets.txt --out results/freq_owt

RoPE: the norm sqrt(q_i^2 + q_{i+n}^2) of each rotated pair i (model.py's rotate-half convention:
pair i = channels (i, i + n), n = head_dim/2), d/2 rows; rotation keeps the norm, so q and k are read
before it (and before YaRN's temperature). PoPE: the magnitude softplus(q_c) of each channel, d rows.
Both averaged over heads and over every token of the text: the first --tokens tokens of --data (a
prepared .bin) or of --text (a text file, tokenised with the checkpoint's tokenizer), in windows of
block_size. Frequency index 0 is the highest frequency: theta_c = base^(-c/d) for PoPE and
base^(-2i/d) for RoPE pair i. Also plots PoPE's learned phase bias delta per layer, head, frequency.
Writes <out>.npz, <out>.json, <out>_magnitudes.png and <out>_delta.png.
"""

import argparse
import json
import math
import os

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from eval import load_checkpoint, tokenizer
from prepare.common import read_tokens


def channel_magnitudes(model, q_or_k):
    """Per-channel magnitude of q or k (B, H, T, hd): PoPE softplus (hd), RoPE pair norms (n)."""
    cfg = model.config
    if cfg.pos_emb == 'pope':
        return F.softplus(q_or_k.float())
    n = model.h[0].attn.theta.numel()  # rope: hd/2 pairs; rope_half: hd/4
    x = q_or_k.float()
    return torch.sqrt(x[..., :n] ** 2 + x[..., n:2 * n] ** 2)


@torch.no_grad()
def frequency_stats(model, windows, device='cpu', batch_size=8):
    """Mean magnitude per (layer, channel) of queries and keys over heads and all tokens of windows
    (a list of 1-D token tensors): {'q': (n_layer, F), 'k': (n_layer, F)} as numpy float64."""
    cfg = model.config
    H, hd = cfg.n_head, cfg.n_embd // cfg.n_head
    sums = {'q': [0.0] * cfg.n_layer, 'k': [0.0] * cfg.n_layer}
    count = 0

    def hook(layer):
        def fn(module, inp, out):  # c_attn's output: q, k, v concatenated
            B, T, _ = out.shape
            q, k, _ = out.split(cfg.n_embd, dim=2)
            for name, x in (('q', q), ('k', k)):
                m = channel_magnitudes(model, x.view(B, T, H, hd))  # (B, T, H, F)
                sums[name][layer] = sums[name][layer] + m.double().sum((0, 1, 2)).cpu()
        return fn

    handles = [b.attn.c_attn.register_forward_hook(hook(i)) for i, b in enumerate(model.h)]
    try:
        by_len = {}
        for w in windows:  # equal lengths batch together (all but a last, shorter window)
            by_len.setdefault(len(w), []).append(w)
        batches = [ws[i:i + batch_size] for ws in by_len.values() for i in range(0, len(ws), batch_size)]
        for b in tqdm(batches, desc='frequency usage', leave=False):
            model(torch.stack(b).to(device))
            count += sum(w.numel() for w in b) * H
    finally:
        for h in handles:
            h.remove()
    return {name: torch.stack(s).numpy() / count for name, s in sums.items()}


def pope_deltas(model):
    """The clamped phase bias delta of every layer: (n_layer, n_head, hd), or None for non-PoPE."""
    if model.config.pos_emb != 'pope':
        return None
    return np.stack([b.attn.delta.detach().clamp(-2 * math.pi, 0).cpu().float().numpy() for b in model.h])


def load_windows(args, ckpt, block_size):
    if args.text:
        encode, _ = tokenizer(ckpt['meta'])
        with open(args.text, encoding='utf-8') as f:
            ids = np.array(encode(f.read()), dtype=np.int64)
    else:
        ids = np.asarray(read_tokens(args.data), dtype=np.int64)
    ids = torch.from_numpy(ids[:args.tokens])
    return list(torch.split(ids, block_size))


def plot_magnitudes(stats, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    names = list(stats)
    fig, axes = plt.subplots(2, len(names), figsize=(6 * len(names), 6.5), squeeze=False, constrained_layout=True)
    for j, name in enumerate(names):
        for i, qk in enumerate(('q', 'k')):
            m, ax = stats[name][qk], axes[i][j]
            im = ax.imshow(m, aspect='auto', origin='lower', cmap='viridis', interpolation='nearest')
            ax.set_title(f"{name}: mean |{'query' if qk == 'q' else 'key'}| per frequency")
            ax.set_xlabel('frequency index c (0 = highest frequency, theta_c = base^(-c/d))' if stats[name]['pos_emb'] == 'pope'
                          else 'pair index i (0 = highest frequency, theta_i = base^(-2i/d))')
            ax.set_ylabel('layer')
            ax.set_yticks(range(m.shape[0]))
            fig.colorbar(im, ax=ax)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_delta(delta, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    L = delta.shape[0]
    cols = min(L, 4)
    rows = math.ceil(L / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols + 1, 2.8 * rows), squeeze=False, constrained_layout=True)
    for l in range(rows * cols):
        ax = axes[l // cols][l % cols]
        if l >= L:
            ax.axis('off')
            continue
        im = ax.imshow(delta[l], aspect='auto', origin='lower', cmap='twilight', vmin=-2 * math.pi, vmax=0, interpolation='nearest')
        ax.set_title(f'layer {l}: delta (rad)')
        ax.set_xlabel('frequency c (0 = highest)')
        ax.set_ylabel('head')
        if delta.shape[1] <= 16:
            ax.set_yticks(range(delta.shape[1]))
    fig.colorbar(im, ax=axes.ravel().tolist())
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--rope', help='a RoPE ckpt.pt')
    p.add_argument('--pope', help='a PoPE ckpt.pt')
    p.add_argument('--data', default='data/shakespeare/val.bin', help='prepared token file')
    p.add_argument('--text', default=None, help='a text file instead of --data')
    p.add_argument('--tokens', type=int, default=16384, help='tokens to average over')
    p.add_argument('--batch_size', type=int, default=8, help='windows per forward pass')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--out', default='results/frequency_usage', help='output prefix')
    args = p.parse_args(argv)
    if not (args.rope or args.pope):
        p.error('give --rope and/or --pope')

    stats, summary, delta = {}, {}, None
    for name, path in (('RoPE', args.rope), ('PoPE', args.pope)):
        if not path:
            continue
        model, ckpt = load_checkpoint(path, args.device, attn_impl='auto')
        want = ('pope',) if name == 'PoPE' else ('rope', 'rope_half')
        if model.config.pos_emb not in want:
            p.error(f"--{name.lower()} {path} is a {model.config.pos_emb} model, not {' or '.join(want)}")
        windows = load_windows(args, ckpt, model.config.block_size)
        s = frequency_stats(model, windows, args.device, args.batch_size)
        stats[name] = dict(s, pos_emb=model.config.pos_emb)
        summary[name] = dict(ckpt=path, pos_emb=model.config.pos_emb, tokens=sum(w.numel() for w in windows),
                             q=s['q'].tolist(), k=s['k'].tolist())
        if name == 'PoPE':
            delta = pope_deltas(model)
            summary[name]['delta'] = None if delta is None else delta.tolist()
        print(f"{name} ({model.config.pos_emb}): {s['q'].shape[0]} layers x {s['q'].shape[1]} frequencies")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    arrays = {f'{n}_{qk}': stats[n][qk] for n in stats for qk in ('q', 'k')}
    if delta is not None:
        arrays['PoPE_delta'] = delta
    np.savez(args.out + '.npz', **arrays)
    with open(args.out + '.json', 'w') as f:
        json.dump(summary, f)
    plot_magnitudes(stats, args.out + '_magnitudes.png')
    written = [args.out + '.npz', args.out + '.json', args.out + '_magnitudes.png']
    if delta is not None:
        plot_delta(delta, args.out + '_delta.png')
        written.append(args.out + '_delta.png')
    print('wrote ' + ', '.join(written))
    return stats, delta


if __name__ == '__main__':
    main()
