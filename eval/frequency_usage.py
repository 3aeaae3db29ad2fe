"""
Frequency usage (paper Figure 3): the mean query and key magnitude per frequency and layer, over
heads and the first --tokens tokens of --data (in windows of block_size); and PoPE's delta.

    python -m eval.frequency_usage --rope out-owt-rope/ckpt.pt --pope out-owt-pope/ckpt.pt

Frequency 0 is the highest. RoPE: the norm of pair i, channels (i, i + d/2); PoPE: each channel's
magnitude mu (|x| for pope_mu='identity'). Writes <out>.npz, .json, _magnitudes.png, _delta.png.
"""

import math
import os

import numpy as np
import torch
from tqdm import tqdm

import pretrained
from eval import DEVICE, check_data, check_out, device_arg, load_tokens, save_figure, subplots
from model import POPE_MUS
from prepare.common import parser, positive_int, write_json


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--rope', help='a RoPE ckpt.pt, or a model pretrained.py reads (GGUF...)')
    p.add_argument('--pope', help='a PoPE ckpt.pt')
    p.add_argument('--data', default='data/shakespeare/val.bin', help='prepared token file')
    p.add_argument('--tokens', type=positive_int, default=16384, help='tokens to average over')
    p.add_argument('--device', type=device_arg, default=DEVICE)
    p.add_argument('--out', default='out-frequency-usage', help='output prefix')
    args = p.parse_args(argv)
    if not (args.rope or args.pope):
        p.error('give --rope and/or --pope')
    check_out(args.out, folder=False)  # before the work
    tokens = torch.from_numpy(load_tokens(args.data, args.tokens).astype(np.int64))
    if len(tokens) == 0:
        raise SystemExit(f"{args.data} holds no tokens: prepare the data again "
                         "(python -m prepare.<name>)")
    stats, summary, arrays = {}, {}, {}
    for name, path in [(n, p) for n, p in (('RoPE', args.rope), ('PoPE', args.pope)) if p]:
        model, ckpt = pretrained.load(path, args.device, attn_impl='auto')  # a ckpt.pt, or GGUF
        check_data(os.path.dirname(os.path.abspath(args.data)), ckpt, path)
        cfg, want = model.config, ('pope',) if name == 'PoPE' else ('rope', 'rope_half')
        if cfg.pos_emb not in want:
            p.error(f"--{name.lower()} {path} is a {cfg.pos_emb} model, not {' or '.join(want)}")
        stats[name] = frequency_stats(model, torch.split(tokens, cfg.block_size), args.device)
        q, k = stats[name]['q'], stats[name]['k']
        summary[name] = dict(ckpt=path, pos_emb=cfg.pos_emb, tokens=len(tokens), q=q.tolist(),
                             k=k.tolist())
        arrays.update({f'{name}_q': q, f'{name}_k': k})
        if name == 'PoPE' and cfg.pope_delta != 'none':  # as pretrained.load left it: in [-2pi, 0]
            arrays['PoPE_delta'] = np.stack([b.attn.delta.detach().cpu().float().numpy()
                                             for b in model.h])
            summary[name]['delta'] = arrays['PoPE_delta'].tolist()
        print(f"{name} ({cfg.pos_emb}): {q.shape[0]} layers x {q.shape[1]} frequencies")
    write_json(args.out + '.json', summary)
    np.savez(args.out + '.npz', **arrays)
    plot_magnitudes(stats, args.out + '_magnitudes.png')
    if (delta := arrays.get('PoPE_delta')) is not None:
        plot_delta(delta, args.out + '_delta.png')
    print(f"wrote {args.out}.npz, .json, _magnitudes.png" + (', _delta.png' * (delta is not None)))
    return stats, delta


@torch.no_grad()
def frequency_stats(model, windows, device='cpu'):
    """{'q', 'k': the mean magnitudes (n_layer, frequencies) over heads and the windows' tokens}."""
    sums = {'q': [0.0] * len(model.h), 'k': [0.0] * len(model.h)}

    def hook(layer, attn):
        def fn(module, inp, out):  # c_attn's output: n_head queries, then n_kv_head keys, values
            kv = attn.n_kv_head * attn.hd
            for side, x in zip('qk', out.split([attn.n_head * attn.hd, kv, kv], dim=2)):
                x = x.unflatten(2, (-1, attn.hd)).float()  # (B, T, heads, hd)
                if model.config.pos_emb == 'pope':
                    m = POPE_MUS[model.config.pope_mu](x).abs()
                else:
                    n = attn.theta.numel()
                    m = torch.sqrt(x[..., :n] ** 2 + x[..., n:2 * n] ** 2)
                sums[side][layer] = sums[side][layer] + m.double().mean(2).sum((0, 1)).cpu()
        return fn

    handles = [b.attn.c_attn.register_forward_hook(hook(i, b.attn)) for i, b in enumerate(model.h)]
    try:
        for w in tqdm(windows, desc='frequency usage', leave=False):  # a window a forward pass
            model(w[None].to(device))
    finally:
        for h in handles:
            h.remove()
    return {side: torch.stack(s).numpy() / sum(map(len, windows)) for side, s in sums.items()}


def plot_magnitudes(stats, path):
    fig, axes = subplots(2, len(stats), figsize=(6 * len(stats), 6.5), squeeze=False,
                         layout='constrained')
    for j, (name, qk) in enumerate(stats.items()):
        for i, side in enumerate(('query', 'key')):
            m, ax = qk[side[0]], axes[i][j]
            fig.colorbar(ax.imshow(m, aspect='auto', origin='lower', cmap='viridis',
                                   interpolation='nearest'), ax=ax)
            ax.set(title=f"{name}: mean |{side}| per frequency", ylabel='layer',
                   yticks=range(m.shape[0]), xlabel='frequency index c (0 = highest frequency, '
                   'theta_c = base^(-c/d))' if name == 'PoPE' else 'pair index i (0 = highest '
                   'frequency, theta_i = base^(-2i/d))')
    save_figure(fig, path, dpi=130)


def plot_delta(delta, path):
    L = delta.shape[0]
    cols, rows = min(L, 4), math.ceil(L / min(L, 4))
    fig, axes = subplots(rows, cols, figsize=(4 * cols + 1, 2.8 * rows), squeeze=False,
                         layout='constrained')
    for ax in axes.flat[L:]:
        ax.axis('off')
    for l, ax in enumerate(axes.flat[:L]):
        im = ax.imshow(delta[l], aspect='auto', origin='lower', cmap='twilight',
                       vmin=-2 * math.pi, vmax=0, interpolation='nearest')
        ax.set(title=f'layer {l}: delta (rad)', xlabel='frequency c (0 = highest)', ylabel='head')
        if delta.shape[1] <= 16:
            ax.set_yticks(range(delta.shape[1]))
    fig.colorbar(im, ax=axes.ravel().tolist())
    save_figure(fig, path, dpi=130)


if __name__ == '__main__':
    main()
