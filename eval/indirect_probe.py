"""
Indirect indexing: probes of checkpoints, the table of a batch of runs, the task's chance levels.

    python -m eval.indirect_probe probe out-pope/ckpt.pt out-rope/ckpt.pt --label PoPE --label RoPE
    python -m eval.indirect_probe table out-probe_*      # markdown: a row per run, one per group
    python -m eval.indirect_probe chance                 # every variant of the data, in %

probe, on the first --n test examples: accuracy per shift and source position; per layer and head,
the attention from the last position and from the question's source letter to the string's source
letter and to the target (mean weight; 'top': how often it is the head's largest); PoPE's delta
and magnitudes mu. table: per run, the final and best test accuracy, the first step at 20, 50 and
90 %, the 'window' chance level; then mean +- std per group of seeds (the name without _s<seed>).
chance, exact, of a model that knows part of the question: letter, a uniform guess among the
string's letters (the source only if shifts of 0 occur); position, the likeliest target position
for the string's length; window, a uniform guess among the L - |shift| positions the length and
shift allow (the source for a shift of 0).
"""

import math
import os
import re
from collections import Counter, defaultdict
from fractions import Fraction
from unittest import mock

import numpy as np
import torch
from torch.nn import functional as F

from eval import (check_data, check_out, device_arg, labels_for, load_checkpoint, load_tokens,
                  markdown_table, read_json, save_figure, subplots)
from model import POPE_MUS, PoPEAttention
from prepare.common import parser, positive_int, write_json
from prepare.data import example_batch
from prepare.indirect_indexing import VARIANTS, shift_choices, source_choices, task_options


def main(argv=None):
    p = parser(__doc__)
    sub = p.add_subparsers(dest='command', required=True)
    a = sub.add_parser('probe', help='accuracy per shift / source position, attention, PoPE')
    a.add_argument('ckpts', nargs='+', help="train.py ckpt.pt files")
    a.add_argument('--label', action='append', help='one per checkpoint (default: its folder)')
    a.add_argument('--data_dir', default=None, help='default: data/<the data set of the run>')
    a.add_argument('--n', type=positive_int, default=2000, help='test examples (the first n)')
    a.add_argument('--device', type=device_arg, default='cpu', help="float32 on either device")
    a.add_argument('--out', default='out-probe-eval', help='folder for <label>.json, summary.md...')
    b = sub.add_parser('table', help='test accuracy, steps to thresholds, per run and per group')
    b.add_argument('folders', nargs='+', help="train.py's out_dir folders")
    sub.add_parser('chance', help="the task's chance levels, every variant of the data (in %%)")
    args = p.parse_args(argv)
    if args.command == 'table':
        return print(table(args.folders))
    if args.command == 'chance':
        rows = [[name, *(f"{100 * v:.2f}" for v in chance_levels(**task_options(name)[0]).values())]
                for name in VARIANTS]
        return print(markdown_table(['data set', 'letter', 'position', 'window'], rows))
    check_out(args.out)  # before the work
    fig, axes = subplots(1, 2, figsize=(11, 4))  # accuracy per shift and per source position
    texts = []
    for path, label in zip(args.ckpts, labels_for(args.ckpts, args.label)):
        r = probe(path, args.data_dir, args.n, device=args.device)
        write_json(os.path.join(args.out, re.sub(r'[^\w.-]+', '_', label) + '.json'), r)
        texts.append(summary(r, label))
        print(texts[-1])
        for ax, key in zip(axes, ('acc_per_shift', 'acc_per_source_position')):
            xs = sorted(r[key])
            ax.plot(xs, [100 * r[key][x] for x in xs], marker='.', label=label)
    for ax, name in zip(axes, ('shift', 'source position in the string')):
        ax.set(xlabel=name, ylabel='test accuracy (%)')
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize='small')
    save_figure(fig, os.path.join(args.out, 'acc_per_shift.png'), dpi=120)
    with open(os.path.join(args.out, 'summary.md'), 'w') as f:
        f.write('\n\n'.join(texts) + '\n')
    print(f"wrote {args.out}/summary.md, acc_per_shift.png and one JSON per checkpoint")


@torch.no_grad()
def probe(ckpt_path, data_dir=None, n=2000, batch=500, device='cpu'):
    """The probe of one checkpoint, in float32 (attn_impl='torch'), as a JSON-ready dict."""
    model, ckpt = load_checkpoint(ckpt_path, device, attn_impl='torch')
    rows, meta = read_test_rows(ckpt, data_dir, n), ckpt['meta']
    f = {k: v.to(device) for k, v in parse_rows(rows.numpy(), meta).items()}
    rows = rows.to(device)
    correct, att, pope = [], defaultdict(float), None  # att: summed (weight, top) per query->key
    for i in range(0, len(rows), batch):
        x, y = example_batch(rows[i:i + batch], meta['pad_id'])
        logits, maps, inputs = forward_recorded(model, x)
        g = {k: v[i:i + batch] for k, v in f.items()}
        b = torch.arange(len(x), device=device)
        correct.append(logits[b, g['q_last']].argmax(-1) == y[b, g['q_last']])
        keys = {'src': g['start'] + g['src'], 'target': g['start'] + g['src'] + g['shift']}
        for qn in ('q_last', 'q_src'):
            for kn, k in keys.items():
                att[f'{qn}->{kn}'] += torch.stack(attention_to(maps, g[qn], k)) * len(x)
        if i == 0 and isinstance(model.h[0].attn, PoPEAttention):  # mu from the first batch
            pope = pope_stats(model, inputs, x != meta['pad_id'])
    correct = torch.cat(correct).float()
    per = lambda key: {int(v): correct[f[key] == v].mean().item() for v in f[key].unique()}
    result = {'ckpt': ckpt_path, 'dataset': ckpt['config']['dataset'],
              'pos_emb': ckpt['model_args']['pos_emb'], 'iter': ckpt['iter_num'],
              'examples': len(rows), 'acc': correct.mean().item(), 'acc_per_shift': per('shift'),
              'acc_per_source_position': per('src'),
              'attention': {k: {'weight': (v[0] / len(rows)).tolist(),
                                'top': (v[1] / len(rows)).tolist()} for k, v in att.items()},
              'uniform_weight_at_q_last': (1.0 / (f['q_last'] + 1)).mean().item()}
    return dict(result, pope=pope) if pope else result


def read_test_rows(ckpt, data_dir=None, n=None):
    """The first n rows of the test split of the checkpoint's data set, as a (n, row_len) tensor."""
    meta, dataset = ckpt['meta'], ckpt['config'].get('dataset')
    if meta.get('kind') != 'examples' or 'task' not in meta:
        raise SystemExit(f"a checkpoint of {dataset!r}, not of the indirect-indexing task: probe "
                         "only runs of it")
    data_dir = data_dir or os.path.join('data', dataset)
    path = os.path.join(data_dir, 'test.bin')
    if not os.path.exists(path):
        raise SystemExit(f"{path} not found: make the data with `python -m "
                         f"prepare.indirect_indexing --variant {dataset}` or pass --data_dir")
    if os.path.exists(os.path.join(data_dir, 'meta.json')):
        check_data(data_dir, ckpt, f"the checkpoint of {dataset!r}")
    rows = load_tokens(path, None if n is None else n * meta['row_len'], meta['dtype'])
    if len(rows) % meta['row_len']:
        raise SystemExit(f"{path}: {len(rows)} tokens, not whole rows of {meta['row_len']}: the "
                         "file is damaged; make the data again")
    return torch.from_numpy(rows.reshape(-1, meta['row_len']).astype(np.int64))


def parse_rows(rows, meta):
    """Each padded row's fields: the source's index in the string (src), the shift, the string's
    first token index (start), the question's source letter's (q_src), the last input's (q_last)."""
    itos, sep = meta['itos'], meta['task']['sep']
    out = defaultdict(list)
    for row in rows:
        at = [i for i, t in enumerate(row) if itos[t] not in ('<pad>', '<bos>')]  # the example
        string, source, shift, _ = ''.join(itos[row[i]] for i in at).split(sep)
        out['src'].append(string.index(source))
        out['shift'].append(int(shift))
        out['start'].append(at[0])
        out['q_src'].append(at[0] + len(string) + len(sep))
        out['q_last'].append(at[-1] - 1)
    return {k: torch.tensor(v) for k, v in out.items()}


def forward_recorded(model, x):
    """(logits, maps, inputs): maps[l] (B, H, T, T) are layer l's attention probabilities (the
    F.softmax of attn_impl='torch'), inputs[l] the normed input of its attention."""
    maps, inputs, softmax = [], [], F.softmax

    def record(att, *args, **kwargs):
        p = softmax(att, *args, **kwargs)
        maps.append(p.detach().float())
        return p

    hooks = [b.attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0].detach()))
             for b in model.h]
    try:
        with mock.patch.object(F, 'softmax', record):
            logits, _ = model(x, torch.zeros_like(x))  # targets: logits at every position
    finally:
        for h in hooks:
            h.remove()
    if len(maps) != len(model.h):
        raise RuntimeError(f"recorded {len(maps)} attention maps for {len(model.h)} layers: load "
                           "the model with attn_impl='torch'")
    return logits, maps, inputs


def attention_to(maps, q, k):
    """Per layer and head: the mean weight from query positions q (B,) to key positions k (B,), and
    the share of examples whose largest weight is at k: two (n_layer, n_head) tensors."""
    b = torch.arange(len(q), device=q.device)
    weight = torch.stack([m[b, :, q, k].mean(0) for m in maps])  # m[b, :, q, k] is (B, H)
    top = torch.stack([(m[b, :, q, :].argmax(-1) == k[:, None]).float().mean(0) for m in maps])
    return weight, top


def pope_stats(model, inputs, real):
    """Per layer: delta's mean, std and share at 0 or -2pi; the magnitudes mu of queries and keys at
    the real tokens (real: (B, T) bool): mean, and spread = std over tokens / RMS."""
    out = []
    for block, x in zip(model.h, inputs):
        attn = block.attn  # delta in [-2pi, 0]; without delta (pope_delta='none') as delta = 0
        delta = attn.delta.detach() if attn.delta is not None else torch.zeros(attn.n_head, attn.hd)
        nq = attn.n_head * attn.hd  # then n_kv_head * hd key channels (grouped-query: fewer)
        qk = attn.c_attn(x)[..., :nq + attn.n_kv_head * attn.hd][real]  # (tokens, queries + keys)
        mu = POPE_MUS[model.config.pope_mu](qk)
        row = {'delta_mean': delta.mean().item(), 'delta_std': delta.std().item(),
               'delta_at_0': (delta > -1e-4).float().mean().item(),
               'delta_at_-2pi': (delta < -2 * math.pi + 1e-4).float().mean().item()}
        for name, m in (('q', mu[:, :nq]), ('k', mu[:, nq:])):
            row[f'mu_{name}_mean'] = m.mean().item()
            rms = m.pow(2).mean(0).sqrt().clamp_min(1e-6)
            row[f'mu_{name}_spread'] = (m.std(0) / rms).mean().item()
        out.append(row)
    return out


def summary(r, label):
    """A few lines of text: accuracy, the heads that attend most to source and target, PoPE."""
    accs = lambda key, f: ' '.join(f"{f(s)}:{100 * a:.0f}" for s, a in sorted(r[key].items()))
    lines = [f"## {label}: {r['dataset']}, {r['pos_emb']}, iter {r['iter']}, test acc "
             f"{100 * r['acc']:.2f}% ({r['examples']} examples)",
             "acc per shift: " + accs('acc_per_shift', lambda s: f"{s:+d}"),
             "acc per source position: " + accs('acc_per_source_position', str),
             "attention (uniform weight from the last position: "
             f"{r['uniform_weight_at_q_last']:.3f}); best three (layer.head weight/top) per query "
             "-> key:"]
    for k, v in r['attention'].items():
        w, t = torch.tensor(v['weight']), torch.tensor(v['top'])
        best, nh = w.flatten().topk(min(3, w.numel())).indices.tolist(), w.shape[1]
        lines.append(f"  {k:16s} " + '  '.join(
            f"{i // nh}.{i % nh} {w.flatten()[i]:.2f}/{t.flatten()[i]:.2f}" for i in best))
    for layer, p in enumerate(r.get('pope', [])):
        lines.append(f"  PoPE layer {layer}: " + ', '.join(f"{k} {v:.3f}" for k, v in p.items()))
    return '\n'.join(lines)


def table(folders, thresholds=(0.2, 0.5, 0.9)):
    """Markdown: one row per run folder that has an eval log, then one per group of seeds."""
    pct = lambda v: '' if v is None else f"{100 * v:.1f}"
    runs, groups = [], defaultdict(list)
    for folder in sorted(folders):
        path, final_path, ckpt_path = (os.path.join(folder, name) for name in
                                       ('eval_log.jsonl', 'final.json', 'ckpt.pt'))
        log = [r for r in (read_json(path, lines=True) if os.path.exists(path) else [])
               if 'test_acc' in r]
        if not log:
            continue
        final = read_json(final_path).get('test_acc') if os.path.exists(final_path) else None
        read = [(path, k, r.get(k, 0.0 if k == 'train_acc' else None)) for r in log
                for k in ('iter', 'test_acc', 'train_acc')]  # (train_acc: where the run has it)
        read += [(final_path, 'test_acc', final)] if final is not None else []
        bad = next((x for x in read if not isinstance(x[2], (int, float))), None)
        if bad:  # (a log of something else, or edited by hand)
            raise SystemExit("{}: {} {!r} where train.py writes a number: not the log of an "
                             "indirect-indexing run; leave {} out, or train it again"
                             .format(*bad, folder))
        config = torch.load(ckpt_path, map_location='cpu', weights_only=True, mmap=True)['config'] \
            if os.path.exists(ckpt_path) else {}
        dataset = config.get('dataset')
        chance = chance_levels(**task_options(dataset)[0])['window'] if dataset in VARIANTS \
            else None
        run = os.path.basename(os.path.normpath(folder)).removeprefix('out-')
        acc = log[-1]['test_acc'] if final is None else final
        runs.append([run, f"{log[-1]['iter']}" + (' (cut)' if final is None else ''), pct(acc),
                     pct(max(r['test_acc'] for r in log)), pct(log[-1].get('train_acc', math.nan)),
                     *[next((r['iter'] for r in log if r['test_acc'] >= t), '-')
                       for t in thresholds], pct(chance)])
        groups[re.sub(r'_s\d+$', '', run)].append(100 * acc)
    if not runs:
        raise SystemExit(f"none of {', '.join(folders)} holds an eval_log.jsonl with test_acc: "
                         "give the out_dir folders of train.py's indirect-indexing runs")
    means = [[name, len(accs), ' / '.join(f'{a:.1f}' for a in accs),
              f"{np.mean(accs):.1f} +- {np.std(accs, ddof=1) if len(accs) > 1 else 0.0:.1f}"]
             for name, accs in groups.items()]
    head = ['run', 'steps', 'test acc %', 'best %', 'train acc %',
            *[f'step to {100 * t:g}%' for t in thresholds], 'chance (window) %']
    return (markdown_table(head, runs) + '\n\n'
            + markdown_table(['group', 'runs', 'test acc % per seed', 'mean +- std'], means))


def chance_levels(*, lengths=(20, 40), max_shift=15, zero_shift=False, sep=',', shifts=None,
                  anchor=None, shift_digits=None):
    """Expected accuracy (in [0, 1]) of each guess for make_example's options (sep and shift_digits
    change nothing); with an anchor, 'position' is what reading the length alone gives."""
    shifts = shift_choices(max_shift, zero_shift, shifts)
    total = dict.fromkeys(('letter', 'position', 'window'), Fraction(0))  # summed over lengths
    for L in range(lengths[0], lengths[1] + 1):
        pairs = [(src, s) for src in source_choices(L, anchor) for s in shifts if 0 <= src + s < L]
        at = Counter(src + s for src, s in pairs)  # how many pairs put the target at each position
        total['letter'] += Fraction(1, L if 0 in shifts else L - 1)
        total['position'] += Fraction(max(at.values()), len(pairs))
        total['window'] += sum(Fraction(1, L - abs(s)) if s else 1 for _, s in pairs) / len(pairs)
    return {k: float(v / (lengths[1] - lengths[0] + 1)) for k, v in total.items()}


if __name__ == '__main__':
    main()
