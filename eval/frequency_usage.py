"""
Frequency usage (paper Figure 3): mean query and key magnitude per frequency channel and layer.

    python -m eval.frequency_usage --rope out-owt-rope/ckpt.pt --pope out-owt-pope/ckpt.pt    # out-frequency-usage.*

RoPE: the norm sqrt(q_i^2 + q_{i+n}^2) of each rotated pair i (model.py's rotate-half convention:
pair i = channels (i, i + n), n = head_dim/2), d/2 rows; rotation keeps the norm, so q and k are read
before it (and before YaRN's temperature). PoPE: the magnitude mu(q_c) of each channel (softplus, or the
model's pope_mu; |q_c| for pope_mu='identity', whose sign is a phase of pi), d rows.
Both averaged over heads and over the first --tokens tokens of --data (a prepared .bin), in windows of
block_size. Frequency index 0 is the highest frequency: theta_c = base^(-c/d) for PoPE and
base^(-2i/d) for RoPE pair i. Also plots PoPE's learned phase bias delta per layer, head, frequency.
Writes <out>.npz, <out>.json, <out>_magnitudes.png and <out>_delta.png.
"""

import math
import os

import numpy as np
import torch
from tqdm import tqdm

import pretrained
from eval import check_data, check_out, device_arg, load_tokens, parser, positive_int, save_figure, subplots, write_json
from model import POPE_MUS


@torch.no_grad()
def frequency_stats(model, windows, device='cpu'):
    """Mean magnitude over heads and all tokens of windows (1-D token tensors): {'q', 'k': (n_layer, F) arrays}."""
    sums = {'q': [0.0] * len(model.h), 'k': [0.0] * len(model.h)}
    count = 0

    def hook(layer, attn):
        def fn(module, inp, out):  # c_attn's output: n_head queries, then n_kv_head keys and n_kv_head values
            kv = attn.n_kv_head * attn.hd
            q, k, _ = out.split([attn.n_head * attn.hd, kv, kv], dim=2)
            for name, x in (('q', q), ('k', k)):
                x = x.unflatten(2, (-1, attn.hd)).float()  # (B, T, heads, hd)
                if model.config.pos_emb == 'pope':  # |mu| (mu = x has a sign: a phase of pi)
                    m = POPE_MUS[model.config.pope_mu](x).abs()
                else:
                    n = attn.theta.numel()
                    m = torch.sqrt(x[..., :n] ** 2 + x[..., n:2 * n] ** 2)
                sums[name][layer] = sums[name][layer] + m.double().mean(2).sum((0, 1)).cpu()
        return fn

    handles = [b.attn.c_attn.register_forward_hook(hook(i, b.attn)) for i, b in enumerate(model.h)]
    try:
        for w in tqdm(windows, desc='frequency usage', leave=False):  # one window a forward pass
            model(w[None].to(device))
            count += len(w)
    finally:
        for h in handles:
            h.remove()
    return {name: torch.stack(s).numpy() / count for name, s in sums.items()}


def plot_magnitudes(stats, path):
    names = list(stats)
    fig, axes = subplots(2, len(names), figsize=(6 * len(names), 6.5), squeeze=False, layout='constrained')
    for j, name in enumerate(names):
        for i, qk in enumerate(('q', 'k')):
            m, ax = stats[name][qk], axes[i][j]
            im = ax.imshow(m, aspect='auto', origin='lower', cmap='viridis', interpolation='nearest')
            ax.set_title(f"{name}: mean |{'query' if qk == 'q' else 'key'}| per frequency")
            ax.set_xlabel('frequency index c (0 = highest frequency, theta_c = base^(-c/d))' if name == 'PoPE'
                          else 'pair index i (0 = highest frequency, theta_i = base^(-2i/d))')
            ax.set_ylabel('layer')
            ax.set_yticks(range(m.shape[0]))
            fig.colorbar(im, ax=ax)
    save_figure(fig, path, dpi=130)


def plot_delta(delta, path):
    L = delta.shape[0]
    cols = min(L, 4)
    rows = math.ceil(L / cols)
    fig, axes = subplots(rows, cols, figsize=(4 * cols + 1, 2.8 * rows), squeeze=False, layout='constrained')
    for l, ax in enumerate(axes.flat):
        if l >= L:
            ax.axis('off')
            continue
        im = ax.imshow(delta[l], aspect='auto', origin='lower', cmap='twilight', vmin=-2 * math.pi, vmax=0,
                       interpolation='nearest')
        ax.set_title(f'layer {l}: delta (rad)')
        ax.set_xlabel('frequency c (0 = highest)')
        ax.set_ylabel('head')
        if delta.shape[1] <= 16:
            ax.set_yticks(range(delta.shape[1]))
    fig.colorbar(im, ax=axes.ravel().tolist())
    save_figure(fig, path, dpi=130)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('--rope', help='a RoPE ckpt.pt, or a model pretrained.py reads: a GGUF file or smollm2-135m')
    p.add_argument('--pope', help='a PoPE ckpt.pt')
    p.add_argument('--data', default='data/shakespeare/val.bin', help='prepared token file')
    p.add_argument('--tokens', type=positive_int, default=16384, help='tokens to average over')
    p.add_argument('--device', type=device_arg, default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--out', default='out-frequency-usage', help='output prefix')
    args = p.parse_args(argv)
    if not (args.rope or args.pope):
        p.error('give --rope and/or --pope')

    check_out(args.out, folder=False)  # before the work
    tokens = torch.from_numpy(load_tokens(args.data, args.tokens).astype(np.int64))
    if len(tokens) == 0:
        raise SystemExit(f"{args.data} holds no tokens: prepare the data again (python -m prepare.<name>)")
    stats, summary, arrays, delta = {}, {}, {}, None
    for name, path in (('RoPE', args.rope), ('PoPE', args.pope)):
        if not path:
            continue
        model, ckpt = pretrained.load(path, args.device, attn_impl='auto')  # a ckpt.pt, or a GGUF file
        check_data(os.path.dirname(os.path.abspath(args.data)), ckpt, path)
        cfg = model.config
        want = ('pope',) if name == 'PoPE' else ('rope', 'rope_half')
        if cfg.pos_emb not in want:
            p.error(f"--{name.lower()} {path} is a {cfg.pos_emb} model, not {' or '.join(want)}")
        stats[name] = frequency_stats(model, list(torch.split(tokens, cfg.block_size)), args.device)
        q, k = stats[name]['q'], stats[name]['k']
        summary[name] = dict(ckpt=path, pos_emb=cfg.pos_emb, tokens=len(tokens), q=q.tolist(), k=k.tolist())
        arrays.update({f'{name}_q': q, f'{name}_k': k})
        if name == 'PoPE' and cfg.pope_delta != 'none':  # delta as pretrained.load left it: projected onto [-2pi, 0]
            delta = np.stack([b.attn.delta.detach().cpu().float().numpy() for b in model.h])
            arrays['PoPE_delta'] = delta
            summary[name]['delta'] = delta.tolist()
        print(f"{name} ({cfg.pos_emb}): {q.shape[0]} layers x {q.shape[1]} frequencies")

    write_json(args.out + '.json', summary)
    np.savez(args.out + '.npz', **arrays)
    plot_magnitudes(stats, args.out + '_magnitudes.png')
    if delta is not None:
        plot_delta(delta, args.out + '_delta.png')
    print(f"wrote {args.out}.npz, .json, _magnitudes.png" + (', _delta.png' if delta is not None else ''))
    return stats, delta


if __name__ == '__main__':
    main()
