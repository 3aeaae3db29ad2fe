"""
The language-modelling study on the Linux kernel's C (results/linux_c/README.md): its tables and figures, from the
files of its arms as results/linux_c/reproduce.sh leaves them (DIR/runs/<pope|rope>_s<seed>/: pretrain/ and ft/
final.json and eval_log.jsonl, documents/ and stream/ extrapolation.json; the paper's PoPE ablations,
pope-<nosoftplus|relu|nodelta>_s<seed>/, the same without ft/) and writes

    results.md          the runs; in-distribution val and test loss, PoPE against RoPE seed by seed, with the paired
                        t-test of their difference, and each ablation against PoPE of its seed; test loss at 1x-10x
                        the context inside documents and across them
    extrapolation.png   test loss against context length inside documents, the mean over seeds (not the ablations)
    val_loss.png        val loss against step, every pre-training run
    frequency_usage.png mean query and key magnitude per layer and frequency, the mean over seeds (DIR's
                        frequency_usage_s<seed>.json, from eval.frequency_usage: reproduce.sh finish)

    python results/linux_c/study.py results/linux_c

Losses are nats per token on the whole val and test splits (train.py's final.json: the last weights). The paired
t-test: the differences PoPE - RoPE of the seeds' pairs (the same seed: the same data order), t = mean / (sd /
sqrt(n)) with n - 1 degrees of freedom, two-sided.
"""

import glob
import json
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from eval import markdown_table, save_figure, subplots  # noqa: E402

ABLATIONS = {'pope-nosoftplus': 'PoPE, no softplus', 'pope-relu': 'PoPE, ReLU', 'pope-nodelta': 'PoPE, no delta'}
NAMES = {'pope': 'PoPE', 'rope': 'RoPE', **ABLATIONS}  # the ablations' names are their labels in reproduce.sh too
MODELS = ['RoPE', 'RoPE+YaRN s=10 (no fine-tune)', 'RoPE+YaRN s=4, fine-tuned at 4096', 'PoPE',
          'PoPE, fine-tuned at 4096']  # eval.extrapolation's labels in reproduce.sh, in the tables' order
# the paper's val perplexity at 124M on OpenWebText (config/owt_pope.py, owt_pope_no_softplus.py, ...)
PAPER = {'pope': 21.33, 'pope-nosoftplus': 21.57, 'pope-relu': 21.55, 'pope-nodelta': 21.42}


def encoding(label):
    """The arm ('pope', 'rope' or an ablation's name) whose evaluation has a model of this label."""
    return next((enc for enc, name in ABLATIONS.items() if name == label),
                'pope' if label.startswith('PoPE') else 'rope')


ARM = re.compile(rf"({'|'.join(NAMES)})_s(0|[1-9]\d*)")  # an arm's folder, as reproduce.sh names it


def incomplete(path, why):
    """The one line for a file of an arm that is missing or damaged: the command that makes it again."""
    arm = next((part for part in path.split(os.sep) if ARM.fullmatch(part)), 'ARM')
    return SystemExit(f"{path} is missing or damaged ({why}): start its arm again (bash results/linux_c/reproduce.sh "
                      f"start {arm}), or move the arm's folder out of runs/")


def read_json(path, lines=False):
    try:
        with open(path) as f:
            return [json.loads(s) for s in f if s.strip()] if lines else json.load(f)
    except (OSError, ValueError) as err:
        raise incomplete(path, type(err).__name__) from None


def read_arm(folder):
    """One arm's numbers: its pre-training's final.json and eval log; where they exist, its fine-tune's final.json and
    the test losses of its models at each length inside documents and across them ({windows: {label: {length:
    (loss, tokens)}}})."""
    name = os.path.basename(os.path.normpath(folder))
    arm = {'name': name, 'enc': name.split('_s')[0], 'seed': int(name.split('_s')[1]),
           'final': read_json(os.path.join(folder, 'pretrain', 'final.json')),
           'log': read_json(os.path.join(folder, 'pretrain', 'eval_log.jsonl'), lines=True),
           'ft_final': None, 'losses': {}, 'about': {}}
    if os.path.exists(os.path.join(folder, 'ft', 'final.json')):
        arm['ft_final'] = read_json(os.path.join(folder, 'ft', 'final.json'))
    log = os.path.join(folder, 'pretrain.log')
    try:  # train.py's first line: '..., 32,768 tokens per iteration'
        with open(log) as f:
            arm['tokens_per_iter'] = int(re.search(r'([\d,]+) tokens per iteration', f.read()).group(1)
                                         .replace(',', ''))
    except (OSError, AttributeError):
        raise incomplete(log, "no line '<n> tokens per iteration'") from None
    for stage in ('', 'ft_'):  # the pre-trained model(s), then the fine-tuned one
        for windows in ('documents', 'stream'):
            path = os.path.join(folder, stage + windows, 'extrapolation.json')
            if not os.path.exists(path):
                continue
            ex = read_json(path)
            arm['about'][windows] = {k: v for k, v in ex.items() if k != 'results'}
            for r in ex['results']:
                arm['losses'].setdefault(windows, {}).setdefault(r['label'], {})[r['length']] = (r['nll'], r['tokens'])
    return arm


def t_test_p(t, df):
    """Two-sided p-value of Student's t with df degrees of freedom: 1 - the integral of its density over [-|t|, |t|]
    (Simpson's rule on 20,000 intervals; exact to ~1e-9 for the t of a few seeds)."""
    if not math.isfinite(t):
        return 0.0
    n, a = 20000, abs(t)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density(x):
        return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))
    h = a / n
    total = density(0) + density(a) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, n))
    return max(0.0, 1 - 2 * total * h / 3)


def paired(pope, rope):
    """(mean, sd, t, p, n) of the differences pope[i] - rope[i]."""
    d = [p - r for p, r in zip(pope, rope)]
    mean = statistics.mean(d)
    sd = statistics.stdev(d) if len(d) > 1 else float('nan')
    t = mean / (sd / math.sqrt(len(d))) if len(d) > 1 and sd > 0 else float('nan')
    return mean, sd, t, t_test_p(t, len(d) - 1) if len(d) > 1 else float('nan'), len(d)


def named(seeds, mean=False):
    """'seed 1337' or 'seeds 1337, 1338' ('mean of 2 seeds' with mean=True, for a figure of their mean)."""
    seeds = sorted(seeds)
    if len(seeds) == 1:
        return f'seed {seeds[0]}'
    return f'mean of {len(seeds)} seeds' if mean else f"seeds {', '.join(str(s) for s in seeds)}"


def spread(values):
    """'mean +- sd (each)' of a list of losses."""
    sd = f' +- {statistics.stdev(values):.4f}' if len(values) > 1 else ''
    return f"{statistics.mean(values):.4f}{sd} ({', '.join(f'{v:.4f}' for v in values)})"


def page(arms, folder):
    seeds = sorted({a['seed'] for a in arms if a['enc'] == 'pope'} & {a['seed'] for a in arms if a['enc'] == 'rope'})
    by = {(a['enc'], a['seed']): a for a in arms}
    lines = ['# The language-modelling study on the Linux kernel\'s C: the numbers',
             '', f'Made by `python results/linux_c/study.py {folder}` from the files in `runs/`. Losses in nats per '
             'token.', '', '## The runs', '']
    rows = []
    for a in sorted(arms, key=lambda a: (a['seed'], a['enc'])):
        f, ft = a['final'], a['ft_final']
        rows.append([a['name'], f['iter'], f"{f['iter'] * a['tokens_per_iter'] / 1e6:.0f}M", f"{f['minutes']:.1f}",
                     f"{f['val_loss']:.4f}", f"{f['test_loss']:.4f}", ft['iter'] if ft else '-',
                     f"{ft['test_loss']:.4f}" if ft else '-'])
    lines += [markdown_table(['arm', 'steps', 'tokens', 'minutes', 'val loss', 'test loss', 'fine-tune steps',
                              'test loss after (at 4096)'], rows), '']
    lines += ['## In distribution (context 1024, the whole splits)', '']
    rows = []
    for split in ('val', 'test') if seeds else ():
        pope = [by['pope', s]['final'][f'{split}_loss'] for s in seeds]
        rope = [by['rope', s]['final'][f'{split}_loss'] for s in seeds]
        mean, sd, t, p, n = paired(pope, rope)
        test = [f'{sd:.4f}', f'{t:.2f}', f'{p:.3g}'] if n > 1 else ['-', '-', '- (one pair: no test)']
        rows.append([split, spread(pope), spread(rope), f'{mean:+.4f}', *test, n])
    lines += [markdown_table(['split', 'PoPE', 'RoPE', 'PoPE - RoPE, mean', 'sd', 't', 'p (paired, two-sided)',
                              'pairs'], rows), '',
              f"The seeds with both arms: {', '.join(str(s) for s in seeds)}; mean +- sd over them, each seed's value "
              'in brackets.', ''] if seeds else ['No seed has pre-trained both arms yet.', '']
    lines += ablation_section(arms, by)
    ctx = sorted(int(k.removeprefix('val_loss_ctx')) for k in arms[0]['final'] if k.startswith('val_loss_ctx'))
    if ctx:
        lines += [f'## Val loss at 1x-{ctx[-1] // ctx[0]}x the context, as train.py measures it', '',
                  "The pre-trained models' final.json: the first 65,536 val tokens, in windows of each length that run "
                  'across file ends (`eval_contexts`); every arm that has one.', '']
        rows = []
        for enc in ('rope', 'pope', *ABLATIONS):
            mine = sorted((a for a in arms if a['enc'] == enc), key=lambda a: a['seed'])
            if not mine:
                continue
            rows.append([f"{NAMES[enc]} ({named(a['seed'] for a in mine)})"]
                        + [spread([a['final'][f'val_loss_ctx{L}'] for a in mine]) for L in ctx])
        lines += [markdown_table(['model'] + [f'{L} ({L // ctx[0]}x)' for L in ctx], rows), '']
    for windows, title in (('documents', 'inside documents'), ('stream', 'across documents (stream windows)')):
        have = {label: [s for s in seeds if label in by[encoding(label), s]['losses'].get(windows, {})]
                for label in MODELS}  # the seeds whose arm scored this model (the fine-tunes may be fewer)
        for enc in ABLATIONS:  # the ablations, over their own seeds (one each), always named
            mine = sorted(a['seed'] for a in arms if a['enc'] == enc)
            if mine:
                have[NAMES[enc]] = [s for s in mine if NAMES[enc] in by[enc, s]['losses'].get(windows, {})]
        if not any(have.values()):
            lines += [f'## Test loss at 1x-10x the context, {title}', '', 'Not run for the arms of the seeds above.',
                      '']
            continue
        about = next(by[encoding(label), mine[0]]['about'][windows] for label, mine in have.items() if mine)
        lengths = about['lengths']
        lines += [f'## Test loss at 1x-{lengths[-1] // lengths[0]}x the context, {title}', '']
        if windows == 'documents':
            lines += [f"The first {lengths[-1] + 1:,} tokens of each of the {about['documents']:,} test files that "
                      f"have as many ({about['documents_in_all']:,} test files in all), {about['tokens']:,} predicted "
                      'tokens at every length: windows of each length from the start of the file, the last one '
                      'shorter where the length does not divide the longest.', '']
        else:
            lines += [f"The first {about['tokens']:,} predicted tokens of the test stream (files one after the other, "
                      'an <|endoftext|> between two), in windows of each length that run across file ends.', '']
        rows = []
        for label, mine in have.items():
            name = label if (mine == seeds and label in MODELS) or not mine else f'{label} ({named(mine)})'
            rows.append([name] + ([spread([by[encoding(label), s]['losses'][windows][label][L][0] for s in mine])
                                   for L in lengths] if mine else ['not run'] * len(lengths)))
        lines += [markdown_table(['model'] + [f'{L} ({L // lengths[0]}x)' for L in lengths], rows), '']
        counts = {by[encoding(label), s]['losses'][windows][label][L][1]
                  for label, mine in have.items() for s in mine for L in lengths}
        if len(counts) != 1:
            raise SystemExit(f'{windows}: the lengths scored different token counts ({sorted(counts)}): the '
                             'evaluations are not of the same tokens')
    return '\n'.join(lines)


def ablation_section(arms, by):
    """The page's ablations: each arm's val and test loss, and its difference to the PoPE arm of its seed."""
    rows = []
    for enc in ABLATIONS:
        for a in sorted((a for a in arms if a['enc'] == enc), key=lambda a: a['seed']):
            pope, val, test = by.get(('pope', a['seed'])), a['final']['val_loss'], a['final']['test_loss']
            rows.append([NAMES[enc], a['seed'], f'{val:.4f}', f'{test:.4f}']
                        + ([f"{val - pope['final']['val_loss']:+.4f}", f"{test - pope['final']['test_loss']:+.4f}"]
                           if pope else ['-', '-']))
    if not rows:
        return []
    paper = '; '.join(f'{NAMES[enc]} {ppl} ({math.log(ppl / PAPER["pope"]):+.4f})' for enc, ppl in PAPER.items()
                      if enc != 'pope')
    return ['## Ablations (one seed each)', '',
            "The paper's PoPE ablations (reproduce.sh's pope-<nosoftplus|relu|nodelta>_s<seed>: mu = x, mu = relu(x), "
            'no delta), pre-trained as PoPE with that one change and not fine-tuned; their difference to the PoPE arm '
            "of the same seed ('-' where it has none).", '',
            markdown_table(['ablation', 'seed', 'val loss', 'test loss', 'val - PoPE', 'test - PoPE'], rows), '',
            f"For comparison, the paper's val perplexity at 124M on OpenWebText: PoPE {PAPER['pope']}; {paper}; in "
            'brackets, the same as a difference in val loss to PoPE (the log of the perplexity ratio).', '']


def read_frequency_usage(folder):
    """{seed: eval.frequency_usage's summary ({'RoPE', 'PoPE': {'q', 'k': [layer][frequency] magnitudes, ...}})}."""
    found = glob.glob(os.path.join(folder, 'frequency_usage_s*.json'))
    return {int(re.search(r'_s(\d+)\.json$', p).group(1)): read_json(p) for p in sorted(found)}


def half_ratio(row):
    """The mean magnitude of the higher-frequency half of a layer's row (index 0 is the highest frequency) over the
    lower half's: > 1 where the layer leans on the high frequencies."""
    h = len(row) // 2
    return statistics.mean(row[:h]) / statistics.mean(row[h:])


def frequency_section(usage):
    """The page's frequency-usage section: per encoding and side, the range over layers of each seed's high/low
    half ratio and peak-to-mean ratio, and the frequency of each layer's peak."""
    if not usage:
        return ['## Frequency usage', '', 'Not run (reproduce.sh finish).', '']
    first = next(iter(usage.values()))
    lines = ['## Frequency usage', '', "`eval.frequency_usage` of each seed's pre-trained pair on the first "
             f"{first['PoPE']['tokens']:,} test tokens: the mean query and key magnitude per layer and frequency, "
             f"averaged over heads (RoPE: the norm of each rotated pair, {len(first['RoPE']['q'][0])} frequencies; "
             f"PoPE: softplus, {len(first['PoPE']['q'][0])}); index 0 is the highest frequency. "
             'Per layer: high/low = the mean of the higher-frequency half over the lower half\'s; peak/mean = the largest over the mean; the range over '
             'layers, then each layer\'s peak index.', '']
    rows = []
    for name in ('RoPE', 'PoPE'):
        for side in ('q', 'k'):
            for seed, summary in usage.items():
                m = summary[name][side]
                ratios = [half_ratio(r) for r in m]
                peaks = [max(r) / statistics.mean(r) for r in m]
                rows.append([name, side, seed, f'{min(ratios):.2f}-{max(ratios):.2f}',
                             f'{min(peaks):.2f}-{max(peaks):.2f}', ' '.join(str(r.index(max(r))) for r in m)])
    lines += [markdown_table(['encoding', 'side', 'seed', 'high/low half', 'peak/mean', 'peak index per layer'],
                             rows), '']
    deltas = [x for s in usage.values() if 'delta' in s['PoPE'] for x in flatten(s['PoPE']['delta'])]
    if deltas:
        lines += [f"PoPE's delta ({len(deltas):,} values over the seeds, initialised at 0, projected onto [-2pi, 0]): "
                  f'range [{min(deltas):.3f}, {max(deltas):.3f}], mean {statistics.mean(deltas):.3f}, '
                  f'{sum(x == 0 for x in deltas) / len(deltas):.0%} exactly 0, '
                  f'{sum(x < -0.1 for x in deltas) / len(deltas):.0%} below -0.1 rad.', '']
    return lines + ['![frequency usage](frequency_usage.png)', '']


def flatten(x):
    return [v for item in x for v in flatten(item)] if isinstance(x, list) else [x]


def plot_frequency_usage(usage, path):
    """Layer x frequency heatmaps of the mean magnitude over seeds: RoPE's and PoPE's queries and keys."""
    if not usage:
        return
    fig, axes = subplots(2, 2, figsize=(12, 6.5), squeeze=False, layout='constrained')
    for j, name in enumerate(('RoPE', 'PoPE')):
        for i, side in enumerate(('q', 'k')):
            ms = [s[name][side] for s in usage.values()]
            mean = [[statistics.mean(m[layer][c] for m in ms) for c in range(len(ms[0][0]))]
                    for layer in range(len(ms[0]))]
            ax = axes[i][j]
            im = ax.imshow(mean, aspect='auto', cmap='viridis', origin='lower')
            fig.colorbar(im, ax=ax)
            ax.set_title(f'{name} {"queries" if side == "q" else "keys"} ({named(usage, mean=True)})')
            ax.set_xlabel('frequency index (0 = highest)')
            ax.set_ylabel('layer')
    save_figure(fig, path, dpi=120)


def plot_extrapolation(arms, path):
    """The mean over seeds inside documents, of the arms evaluated so; False where no seed has both (no figure). The
    five models of MODELS alone: the ablations (one seed each) are in the page's tables."""
    arms = [a for a in arms if 'documents' in a['losses']]
    seeds = {a['seed'] for a in arms if a['enc'] == 'pope'} & {a['seed'] for a in arms if a['enc'] == 'rope'}
    if not seeds:
        return False
    lengths = arms[0]['about']['documents']['lengths']
    fig, ax = subplots(figsize=(7, 4.5))
    for label in MODELS:
        mine = [a for a in arms if a['enc'] == encoding(label) and a['seed'] in seeds
                and label in a['losses']['documents']]  # the fine-tunes may be of fewer seeds
        if not mine:
            continue
        ys = [statistics.mean(a['losses']['documents'][label][L][0] for a in mine) for L in lengths]
        name = label if len(mine) == len(seeds) else f"{label} ({named(a['seed'] for a in mine)})"
        ax.plot(lengths, ys, marker='o', label=name, ls='-' if 'fine-tuned' in label or 'YaRN' not in label else ':')
    ax.axvline(1024, color='gray', ls='--', lw=1, label='pre-training context')
    ax.axvline(4096, color='gray', ls=':', lw=1, label='fine-tuning context')
    ax.set_xscale('log', base=2)
    ax.set_xticks(lengths, [str(L) for L in lengths])
    ax.minorticks_off()
    ax.set_xlabel('context length (tokens)')
    ax.set_ylabel('test loss inside files (nats per token)')
    ax.set_title(f'Linux C, 8 x 512 GPT, {named(seeds, mean=True)}')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path, dpi=150)
    return True


def plot_val_loss(arms, path):
    fig, ax = subplots(figsize=(7, 4.5))
    colours = {'rope': 'C0', 'pope': 'C1', 'pope-nosoftplus': 'C2', 'pope-relu': 'C3', 'pope-nodelta': 'C4'}
    for a in sorted(arms, key=lambda a: (a['enc'], a['seed'])):
        pts = [(r['iter'], r['val_loss']) for r in a['log'] if r['iter'] >= 1000]  # past the first steps' fall
        ax.plot(*zip(*pts), color=colours[a['enc']], alpha=0.8, ls='--' if a['enc'] in ABLATIONS else '-',
                label=f"{NAMES[a['enc']]} s{a['seed']}")
    ax.set_xlabel('step')
    ax.set_ylabel('val loss (nats per token)')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path, dpi=150)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith('-'):
        sys.exit(__doc__)
    folder = argv[0]
    found = sorted(glob.glob(os.path.join(folder, 'runs', '*_s*', 'pretrain', 'final.json')))
    other = [p.split(os.sep)[-3] for p in found if not ARM.fullmatch(p.split(os.sep)[-3])]
    if other:
        sys.exit(f"{folder}/runs/{other[0]} is not an arm's folder (<pope|rope>_s<seed> or "
                 "pope-<nosoftplus|relu|nodelta>_s<seed>, as reproduce.sh names them): move it out of runs/")
    if not found:
        sys.exit(f'no arm has pre-trained in {folder}/runs/ (no <arm>/pretrain/final.json): run '
                 'results/linux_c/reproduce.sh first')
    arms = [read_arm(os.path.dirname(os.path.dirname(p))) for p in found]
    usage = read_frequency_usage(folder)
    with open(os.path.join(folder, 'results.md'), 'w') as f:
        f.write('\n'.join([page(arms, folder)] + frequency_section(usage)).rstrip() + '\n')
    figure = plot_extrapolation(arms, os.path.join(folder, 'extrapolation.png'))
    plot_val_loss(arms, os.path.join(folder, 'val_loss.png'))
    plot_frequency_usage(usage, os.path.join(folder, 'frequency_usage.png'))
    print(f"wrote {folder}/results.md, {'extrapolation.png, ' if figure else ''}val_loss.png"
          f"{', frequency_usage.png' if usage else ''} ({len(arms)} arms, frequency usage of "
          f"{named(usage) if usage else 'no seed'}"
          + ('' if figure else '; no extrapolation.png: no seed has both arms scored inside documents') + ')')


if __name__ == '__main__':
    main()
