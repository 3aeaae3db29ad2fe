"""
The language-modelling study on the Linux kernel's C (results/linux_c/README.md): its page
results.md and its figures (extrapolation.png, val_loss.png, frequency_usage.png), from the files
that results/linux_c/reproduce.sh leaves in DIR/runs/ and DIR/frequency_usage_s<seed>.json.

    python results/linux_c/study.py results/linux_c
"""

import glob
import itertools
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from eval import markdown_table, save_figure, subplots  # noqa: E402

ABLATIONS = {'pope-nosoftplus': 'PoPE, no softplus', 'pope-relu': 'PoPE, ReLU',
             'pope-nodelta': 'PoPE, no delta'}  # (their labels in reproduce.sh too)
# the other model sizes (4 x 256, 12 x 768), labelled as in reproduce.sh
SIZES = {'pope-16m': 'PoPE 16M', 'rope-16m': 'RoPE 16M', 'pope-124m': 'PoPE 124M',
         'rope-124m': 'RoPE 124M'}
NAMES = {'pope': 'PoPE', 'rope': 'RoPE', **ABLATIONS, **SIZES}
MODELS = ['RoPE', 'RoPE+YaRN s=10 (no fine-tune)', 'RoPE+YaRN s=4, fine-tuned at 4096', 'PoPE',
          'PoPE, fine-tuned at 4096']  # eval.extrapolation's labels in reproduce.sh, in order
# the paper's val perplexity at 124M on OpenWebText (config/owt_pope.py, owt_pope_no_softplus.py...)
PAPER = {'pope': 21.33, 'pope-nosoftplus': 21.57, 'pope-relu': 21.55, 'pope-nodelta': 21.42}
# the paper's val perplexity RoPE -> PoPE by model size (parameters, millions), on OpenWebText
PAPER_SIZES = {124: (21.55, 21.33), 253: (18.88, 18.55), 774: (15.85, 15.45)}
SHAPES = {'-16m': '4 x 256', '': '8 x 512', '-124m': '12 x 768'}  # a size's tag in its arms' names
ARM = re.compile(rf"({'|'.join(NAMES)})_s(0|[1-9]\d*)")  # an arm's folder, as reproduce.sh names it


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith('-'):
        sys.exit(__doc__)
    folder = argv[0]
    found = sorted(glob.glob(os.path.join(folder, 'runs', '*_s*', 'pretrain', 'final.json')))
    other = [p.split(os.sep)[-3] for p in found if not ARM.fullmatch(p.split(os.sep)[-3])]
    if other:
        sys.exit(f"{folder}/runs/{other[0]} is not an arm's folder (<pope|rope>_s<seed>, "
                 "<pope|rope>-<16m|124m>_s<seed> or pope-<nosoftplus|relu|nodelta>_s<seed>, as "
                 "reproduce.sh names them): move it out of runs/")
    if not found:
        sys.exit(f'no arm has pre-trained in {folder}/runs/ (no <arm>/pretrain/final.json): run '
                 'results/linux_c/reproduce.sh first')
    arms = [read_arm(os.path.dirname(os.path.dirname(p))) for p in found]
    usage = {int(re.search(r'_s(\d+)\.json$', p).group(1)): read_json(p)
             for p in sorted(glob.glob(os.path.join(folder, 'frequency_usage_s*.json')))}
    with open(os.path.join(folder, 'results.md'), 'w') as f:
        f.write('\n'.join([page(arms, folder)] + frequency_section(usage)).rstrip() + '\n')
    drawn = [plot_extrapolation(arms, folder), plot_val_loss(arms, folder),
             plot_sizes(arms, folder), plot_frequency_usage(usage, folder)]  # (None: not drawn)
    print(f"wrote {folder}/results.md, {', '.join(filter(None, drawn))} ({len(arms)} arms, "
          f"frequency usage of {named(usage) if usage else 'no seed'}" + ('' if drawn[0] else
          '; no extrapolation.png: no seed has both arms scored inside documents') + ')')


def read_arm(folder):
    """One arm's numbers: its pre-training's final.json, eval log, size and batch; where they
    exist, its fine-tune's final.json and its models' test losses at each length inside documents
    and across them ({windows: {label: {length: (loss, tokens)}}})."""
    name, path = os.path.basename(os.path.normpath(folder)), lambda *p: os.path.join(folder, *p)
    ft = path('ft', 'final.json')
    arm = {'name': name, 'enc': name.split('_s')[0], 'seed': int(name.split('_s')[1]),
           'final': read_json(path('pretrain', 'final.json')),
           'log': read_json(path('pretrain', 'eval_log.jsonl'), lines=True),
           'ft_final': read_json(ft) if os.path.exists(ft) else None, 'losses': {}, 'about': {}}
    # the code it ran: train.py writes it into final.json; the earliest arms have it in a file
    arm['commit'] = arm['final'].get('commit') or '-'
    if arm['commit'] == '-' and os.path.exists(path('commit')):
        with open(path('commit')) as f:
            arm['commit'] = f.read().strip()
    try:  # train.py's line '50.93M parameters, pope, 32,768 tokens per iteration, ...'
        with open(path('pretrain.log')) as f:
            found = re.search(r'([\d.]+)M parameters, [^,]+, ([\d,]+) tokens per iteration',
                              f.read())
        arm['params'], arm['tokens_per_iter'] = float(found[1]), int(found[2].replace(',', ''))
    except (OSError, TypeError):
        raise incomplete(path('pretrain.log'), "no line '<n>M parameters, <pos_emb>, <n> tokens "
                         "per iteration'") from None
    # the pre-trained model(s), then the fine-tuned one
    for stage, windows in itertools.product(('', 'ft_'), ('documents', 'stream')):
        if os.path.exists(path(stage + windows, 'extrapolation.json')):
            ex = read_json(path(stage + windows, 'extrapolation.json'))
            arm['about'][windows] = {k: v for k, v in ex.items() if k != 'results'}
            losses = arm['losses'].setdefault(windows, {})
            for r in ex['results']:
                losses.setdefault(r['label'], {})[r['length']] = (r['nll'], r['tokens'])
    return arm


def read_json(path, lines=False):
    try:
        with open(path) as f:
            return [json.loads(s) for s in f if s.strip()] if lines else json.load(f)
    except (OSError, ValueError) as err:
        raise incomplete(path, type(err).__name__) from None


def incomplete(path, why):
    """The one line for a missing or damaged file of an arm: the command that makes it again."""
    arm = next((part for part in path.split(os.sep) if ARM.fullmatch(part)), 'ARM')
    return SystemExit(f"{path} is missing or damaged ({why}): start its arm again (bash "
                      f"results/linux_c/reproduce.sh start {arm}), or move the arm's folder out of "
                      "runs/")


def encoding(label):
    """The arm ('pope', 'rope', an ablation's or a size's name) whose evaluation has a model of this
    label: the longest name that is the label or its start ('RoPE 16M+YaRN s=10 ...': rope-16m)."""
    return next(enc for enc, name in sorted(NAMES.items(), key=lambda n: -len(n[1]))
                if label == name or label.startswith((name + '+', name + ',')))


def t_test_p(t, df):
    """Two-sided p-value of Student's t with df degrees of freedom: 1 - the integral of its density
    over [-|t|, |t|] (Simpson's rule on 20,000 intervals; exact to ~1e-9 for a few seeds' t); nan
    for a t of nan."""
    if not math.isfinite(t):
        return math.nan if math.isnan(t) else 0.0
    n, a, h = 20000, abs(t), abs(t) / 20000
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    density = lambda x: math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))
    total = density(0) + density(a) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, n))
    return max(0.0, 1 - 2 * total * h / 3)


def paired(pope, rope):
    """(mean, sd, t, p, n) of the differences pope[i] - rope[i]; where they are all the same number,
    t is infinite and p 0, or both nan where that number is 0 (no difference is no evidence)."""
    d = [p - r for p, r in zip(pope, rope)]
    mean = statistics.mean(d)
    if len(d) < 2:
        return mean, math.nan, math.nan, math.nan, len(d)
    sd = statistics.stdev(d)
    if sd > 0:
        t = mean / (sd / math.sqrt(len(d)))
    else:  # every pair differs alike: certain, unless the difference is 0
        t = math.copysign(math.inf, mean) if mean else math.nan
    return mean, sd, t, t_test_p(t, len(d) - 1), len(d)


def named(seeds, mean=False):
    """'seed 1337' or 'seeds 1337, 1338' ('mean of 2 seeds' with mean=True, for a figure)."""
    seeds = sorted(seeds)
    if len(seeds) == 1:
        return f'seed {seeds[0]}'
    return f'mean of {len(seeds)} seeds' if mean else f"seeds {', '.join(map(str, seeds))}"


def spread(values):
    """'mean +- sd (each)' of a list of losses."""
    sd = f' +- {statistics.stdev(values):.4f}' if len(values) > 1 else ''
    return f"{statistics.mean(values):.4f}{sd} ({', '.join(f'{v:.4f}' for v in values)})"


def paired_seeds(arms):
    return sorted({a['seed'] for a in arms if a['enc'] == 'pope'}
                  & {a['seed'] for a in arms if a['enc'] == 'rope'})


def page(arms, folder):
    seeds, by = paired_seeds(arms), {(a['enc'], a['seed']): a for a in arms}
    by_seed = sorted(arms, key=lambda a: (a['seed'], a['enc']))
    lines = ["# The language-modelling study on the Linux kernel's C: the numbers", '',
             f'Made by `python results/linux_c/study.py {folder}` from the files in `runs/`. '
             'Losses in nats per token.', '', '## The runs', '']
    rows = []
    for a in by_seed:
        f, ft = a['final'], a['ft_final']
        rows.append([a['name'], f['iter'], f"{f['iter'] * a['tokens_per_iter'] / 1e6:.0f}M",
                     f"{f['minutes']:.1f}", f"{f['val_loss']:.4f}", f"{f['test_loss']:.4f}",
                     ft['iter'] if ft else '-', f"{ft['test_loss']:.4f}" if ft else '-',
                     a['commit'][:7]])
    lines += [markdown_table(['arm', 'steps', 'tokens', 'minutes', 'val loss', 'test loss',
                              'fine-tune steps', 'test loss after (at 4096)', 'commit'], rows), '',
              '## In distribution (context 1024, the whole splits)', '']
    rows = []
    for split in ('val', 'test') if seeds else ():
        pope, rope = ([by[e, s]['final'][f'{split}_loss'] for s in seeds] for e in ('pope', 'rope'))
        mean, sd, t, p, n = paired(pope, rope)
        test = [f'{sd:.4f}', f'{t:.2f}', f'{p:.3g}'] if n > 1 else \
            ['-', '-', '- (one pair: no test)']
        rows.append([split, spread(pope), spread(rope), f'{mean:+.4f}', *test, n])
    lines += [markdown_table(['split', 'PoPE', 'RoPE', 'PoPE - RoPE, mean', 'sd', 't',
                              'p (paired, two-sided)', 'pairs'], rows), '',
              f"The seeds with both arms: {', '.join(map(str, seeds))}; mean +- sd over them, each "
              "seed's value in brackets.", ''] if seeds else ['No seed has pre-trained both arms '
                                                              'yet.', '']
    lines += ablation_section(by_seed, by) + sizes_section(arms)
    ctx = sorted(int(k.removeprefix('val_loss_ctx')) for k in arms[0]['final']
                 if k.startswith('val_loss_ctx'))
    if ctx:
        lines += [f'## Val loss at 1x-{ctx[-1] // ctx[0]}x the context, as train.py measures it',
                  '', "The pre-trained models' final.json: the first 65,536 val tokens, in windows "
                  'of each length that run across file ends (`eval_contexts`); every arm that has '
                  'one.', '']
        rows = [[f"{NAMES[enc]} ({named(a['seed'] for a in mine)})"]
                + [spread([a['final'][f'val_loss_ctx{L}'] for a in mine]) for L in ctx]
                for enc in ('rope', 'pope', *ABLATIONS)
                if (mine := [a for a in by_seed if a['enc'] == enc])]
        lines += [markdown_table(['model'] + [f'{L} ({L // ctx[0]}x)' for L in ctx], rows), '']
    for windows, title in (('documents', 'inside documents'),
                           ('stream', 'across documents (stream windows)')):
        lines += windows_section(arms, by, seeds, windows, title)
    return '\n'.join(lines)


def windows_section(arms, by, seeds, windows, title):
    """Test loss at each length inside documents or across them: a row per model, the mean over
    the seeds whose arm scored it (the fine-tunes may be fewer), the ablations over their own."""
    scored = lambda label, s: label in by[encoding(label), s]['losses'].get(windows, {})
    have = {label: [s for s in seeds if scored(label, s)] for label in MODELS}
    for enc in (*ABLATIONS, *SIZES):  # RoPE of another size: also with YaRN's scale 10
        if mine := sorted(a['seed'] for a in arms if a['enc'] == enc):
            yarn = [f'{NAMES[enc]}+YaRN s=10 (no fine-tune)'] * enc.startswith('rope')
            for label in [NAMES[enc], *yarn]:
                have[label] = [s for s in mine if scored(label, s)]
    if not any(have.values()):
        return [f'## Test loss at 1x-10x the context, {title}', '',
                'Not run for the arms of the seeds above.', '']
    about = next(by[encoding(label), mine[0]]['about'][windows] for label, mine in have.items()
                 if mine)
    lengths = about['lengths']
    lines = [f'## Test loss at 1x-{lengths[-1] // lengths[0]}x the context, {title}', '',
             f"The first {lengths[-1] + 1:,} tokens of each of the {about['documents']:,} test "
             f"files that have as many ({about['documents_in_all']:,} test files in all), "
             f"{about['tokens']:,} predicted tokens at every length: windows of each length from "
             'the start of the file, the last one shorter where the length does not divide the '
             'longest.' if windows == 'documents' else
             f"The first {about['tokens']:,} predicted tokens of the test stream (files one after "
             'the other, an <|endoftext|> between two), in windows of each length that run across '
             'file ends.', '']
    loss = lambda label, s, L: by[encoding(label), s]['losses'][windows][label][L]
    rows = [[label if mine == seeds and label in MODELS or not mine else f'{label} ({named(mine)})']
            + ([spread([loss(label, s, L)[0] for s in mine]) for L in lengths] if mine
               else ['not run'] * len(lengths)) for label, mine in have.items()]
    counts = {loss(label, s, L)[1] for label, mine in have.items() for s in mine for L in lengths}
    if len(counts) != 1:
        raise SystemExit(f'{windows}: the lengths scored different token counts ({sorted(counts)}):'
                         ' the evaluations are not of the same tokens')
    return lines + [markdown_table(['model'] + [f'{L} ({L // lengths[0]}x)' for L in lengths],
                                   rows), '']


def size_pairs(arms):
    """Each size with a paired seed, smallest first: (shape, parameters in millions, its PoPE arms,
    its RoPE arms, by seed); None where every arm is of 8 x 512."""
    if not any(a['enc'] in SIZES for a in arms):
        return None
    by, pairs = {(a['enc'], a['seed']): a for a in arms}, []
    for tag, shape in SHAPES.items():
        seeds = sorted(s for enc, s in by if enc == f'pope{tag}' and (f'rope{tag}', s) in by)
        if seeds:
            pope, rope = ([by[f'{enc}{tag}', s] for s in seeds] for enc in ('pope', 'rope'))
            pairs.append((shape, pope[0]['params'], pope, rope))
    return pairs


def sizes_section(arms):
    """Val and test loss by size, PoPE against RoPE (where an arm of another size exists)."""
    pairs = size_pairs(arms)
    if pairs is None:
        return []
    if not pairs:
        return ['## By model size', '', 'No size has both encodings of one seed yet.', '']
    rows = []
    for shape, params, pope, rope in pairs:
        row = [shape, f'{params:.1f}M', ', '.join(str(a['seed']) for a in pope)]
        for split in ('val', 'test'):
            p, r = ([a['final'][f'{split}_loss'] for a in side] for side in (pope, rope))
            mean, sd, _, pv, n = paired(p, r)
            row += [spread(p), spread(r), f'{mean:+.4f}' + (f' +- {sd:.4f}' if n > 1 else ''),
                    f'{pv:.3g}' if n > 1 else '- (one pair)']
        rows.append(row)
    paper = '; '.join(f'{m}M {r} -> {p} ({math.log(p / r):+.4f})'
                      for m, (r, p) in PAPER_SIZES.items())
    return ['## By model size', '',
            'The same data, recipe, schedule and batches at three sizes (4 x 256, 8 x 512 and 12 x '
            "768: layers x width, heads of 64; reproduce.sh's <pope|rope>-<16m|124m>_s<seed> and "
            'the plain arms), each pre-trained on 151M tokens and not fine-tuned. PoPE - RoPE: '
            'the mean +- sd of the paired differences of the seeds; p: the paired t-test, '
            'two-sided.', '',
            markdown_table(['size', 'parameters', 'seeds', 'val PoPE', 'val RoPE',
                            'val PoPE - RoPE', 'p', 'test PoPE', 'test RoPE', 'test PoPE - RoPE',
                            'p'], rows), '',
            "For comparison, the paper's val perplexity RoPE -> PoPE on OpenWebText (another "
            f'corpus, and 6.6B tokens at every size): {paper}; in brackets, the same as a '
            'difference in loss (the log of the perplexity ratio).', '',
            '![the gap by size](sizes.png)', '']


def ablation_section(arms, by):
    """Each ablation's val and test loss, and its difference to the PoPE arm of its seed."""
    rows = []
    for a in (a for enc in ABLATIONS for a in arms if a['enc'] == enc):  # (arms: by seed)
        f, pope = a['final'], by.get(('pope', a['seed']))
        rows.append([NAMES[a['enc']], a['seed'], f"{f['val_loss']:.4f}", f"{f['test_loss']:.4f}"]
                    + ([f"{f[k] - pope['final'][k]:+.4f}" for k in ('val_loss', 'test_loss')]
                       if pope else ['-', '-']))
    if not rows:
        return []
    paper = '; '.join(f'{NAMES[enc]} {ppl} ({math.log(ppl / PAPER["pope"]):+.4f})'
                      for enc, ppl in PAPER.items() if enc != 'pope')
    return ['## Ablations (one seed each)', '',
            "The paper's PoPE ablations (reproduce.sh's pope-<nosoftplus|relu|nodelta>_s<seed>: mu "
            '= x, mu = relu(x), no delta), pre-trained as PoPE with that one change and not '
            "fine-tuned; their difference to the PoPE arm of the same seed ('-' where it has "
            "none).",
            '', markdown_table(['ablation', 'seed', 'val loss', 'test loss', 'val - PoPE',
                                'test - PoPE'], rows), '',
            f"For comparison, the paper's val perplexity at 124M on OpenWebText: PoPE "
            f"{PAPER['pope']}; {paper}; in brackets, the same as a difference in val loss to PoPE "
            '(the log of the perplexity ratio).', '']


def frequency_section(usage):
    """Per encoding and side, the range over layers of each seed's high/low half ratio and
    peak-to-mean ratio, and the frequency of each layer's peak; PoPE's delta."""
    if not usage:
        return ['## Frequency usage', '', 'Not run (reproduce.sh finish).', '']
    first = next(iter(usage.values()))
    lines = ['## Frequency usage', '', "`eval.frequency_usage` of each seed's pre-trained pair on "
             f"the first {first['PoPE']['tokens']:,} test tokens: the mean query and key magnitude "
             "per layer and frequency, averaged over heads (RoPE: the norm of each rotated pair, "
             f"{len(first['RoPE']['q'][0])} frequencies; PoPE: softplus, "
             f"{len(first['PoPE']['q'][0])}); index 0 is the highest frequency. Per layer: "
             "high/low = the mean of the higher-frequency half over the lower half's; peak/mean = "
             "the largest over the mean; the range over layers, then each layer's peak index.", '']
    half = lambda r: statistics.mean(r[:len(r) // 2]) / statistics.mean(r[len(r) // 2:])
    rows = []
    for name, side, (seed, summary) in itertools.product(('RoPE', 'PoPE'), 'qk', usage.items()):
        m = summary[name][side]
        ratios, peaks = [half(r) for r in m], [max(r) / statistics.mean(r) for r in m]
        rows.append([name, side, seed, *(f'{min(x):.2f}-{max(x):.2f}' for x in (ratios, peaks)),
                     ' '.join(str(r.index(max(r))) for r in m)])
    lines += [markdown_table(['encoding', 'side', 'seed', 'high/low half', 'peak/mean',
                              'peak index per layer'], rows), '']
    deltas = [x for s in usage.values() for layer in s['PoPE'].get('delta', [])
              for head in layer for x in head]
    if deltas:
        lines += [f"PoPE's delta ({len(deltas):,} values over the seeds, initialised at 0, "
                  f'projected onto [-2pi, 0]): range [{min(deltas):.3f}, {max(deltas):.3f}], mean '
                  f'{statistics.mean(deltas):.3f}, {sum(x == 0 for x in deltas) / len(deltas):.0%} '
                  f'exactly 0, {sum(x < -0.1 for x in deltas) / len(deltas):.0%} below -0.1 rad.',
                  '']
    return lines + ['![frequency usage](frequency_usage.png)', '']


def saved(fig, folder, name, dpi=150):
    save_figure(fig, os.path.join(folder, name), dpi=dpi)
    return name


def plot_frequency_usage(usage, folder):
    """Heatmaps (layer x frequency) of RoPE's and PoPE's query and key magnitudes over seeds."""
    if not usage:
        return None
    fig, axes = subplots(2, 2, figsize=(12, 6.5), squeeze=False, layout='constrained')
    for j, name in enumerate(('RoPE', 'PoPE')):
        for i, side in enumerate(('q', 'k')):
            ms, ax = [s[name][side] for s in usage.values()], axes[i][j]
            mean = [[statistics.mean(m[layer][c] for m in ms) for c in range(len(ms[0][0]))]
                    for layer in range(len(ms[0]))]
            fig.colorbar(ax.imshow(mean, aspect='auto', cmap='viridis', origin='lower'), ax=ax)
            ax.set(title=f'{name} {"queries" if side == "q" else "keys"} '
                   f'({named(usage, mean=True)})', xlabel='frequency index (0 = highest)',
                   ylabel='layer')
    return saved(fig, folder, 'frequency_usage.png', dpi=120)


def plot_extrapolation(arms, folder):
    """MODELS' test loss inside documents, the mean over the paired seeds; none without a pair."""
    arms = [a for a in arms if 'documents' in a['losses']]
    seeds = paired_seeds(arms)
    if not seeds:
        return None
    lengths = arms[0]['about']['documents']['lengths']
    fig, ax = subplots(figsize=(7, 4.5))
    for label in MODELS:
        mine = [a for a in arms if a['enc'] == encoding(label) and a['seed'] in seeds
                and label in a['losses']['documents']]  # the fine-tunes may be of fewer seeds
        if mine:
            ys = [statistics.mean(a['losses']['documents'][label][L][0] for a in mine)
                  for L in lengths]
            ax.plot(lengths, ys, marker='o', label=label if len(mine) == len(seeds) else
                    f"{label} ({named(a['seed'] for a in mine)})",
                    ls='-' if 'fine-tuned' in label or 'YaRN' not in label else ':')
    ax.axvline(1024, color='gray', ls='--', lw=1, label='pre-training context')
    ax.axvline(4096, color='gray', ls=':', lw=1, label='fine-tuning context')
    ax.set_xscale('log', base=2)
    ax.set_xticks(lengths, [str(L) for L in lengths])
    ax.minorticks_off()
    ax.set(xlabel='context length (tokens)', ylabel='test loss inside files (nats per token)',
           title=f'Linux C, 8 x 512 GPT, {named(seeds, mean=True)}')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return saved(fig, folder, 'extrapolation.png')


def plot_sizes(arms, folder):
    """The paired val-loss difference PoPE - RoPE against parameters, each seed and the mean, with
    the paper's three sizes on an axis of their own; none where no size has a pair."""
    pairs = size_pairs(arms)
    if not pairs:
        return None
    fig, ax = subplots(figsize=(7, 4.5))
    gaps = [[p['final']['val_loss'] - r['final']['val_loss'] for p, r in zip(pope, rope)]
            for _, _, pope, rope in pairs]
    params = [params for _, params, _, _ in pairs]
    for x, gap in zip(params, gaps):
        ax.scatter([x] * len(gap), gap, color='C0', alpha=0.5, s=18)
    ax.plot(params, [statistics.mean(g) for g in gaps], color='C0', marker='o',
            label='Linux C, val loss (each seed, and the mean)')
    paper = ax.twinx()
    paper.plot(list(PAPER_SIZES), [math.log(p / r) for r, p in PAPER_SIZES.values()], color='C3',
               marker='s', ls='--', label="the paper, OpenWebText: log(PoPE's val ppl / RoPE's)")
    every = [x for g in gaps for x in g]
    for a in (ax, paper):  # one scale on both axes: the same difference is the same height
        a.set_ylim(min(*every, -0.03) - 0.005, max(*every, 0.0) + 0.005)
    ax.axhline(0, color='gray', lw=1)
    ax.set_xscale('log')
    ticks = sorted({round(x) for x in params} | set(PAPER_SIZES))
    ax.set_xticks(ticks, [f'{x}M' for x in ticks])
    ax.minorticks_off()
    ax.set(xlabel='parameters (with the embedding)',
           ylabel='PoPE - RoPE, val loss on Linux C (nats)',
           title='The gap in distribution by model size (below 0: PoPE ahead)')
    paper.set_ylabel("the paper: log(PoPE's / RoPE's val perplexity)")
    ax.grid(True, alpha=0.3)
    fig.legend(loc='upper left', bbox_to_anchor=(0.12, 0.88), fontsize=8)
    return saved(fig, folder, 'sizes.png')


def plot_val_loss(arms, folder):
    fig, ax = subplots(figsize=(7, 4.5))
    for a in sorted((a for a in arms if a['enc'] not in SIZES),
                    key=lambda a: (a['enc'], a['seed'])):  # 8 x 512 (the others: sizes.png)
        pts = [(r['iter'], r['val_loss']) for r in a['log'] if r['iter'] >= 1000]  # past the fall
        ax.plot(*zip(*pts), color=f"C{['rope', 'pope', *ABLATIONS].index(a['enc'])}", alpha=0.8,
                ls='--' if a['enc'] in ABLATIONS else '-', label=f"{NAMES[a['enc']]} s{a['seed']}")
    ax.set(xlabel='step', ylabel='val loss (nats per token)')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return saved(fig, folder, 'val_loss.png')


if __name__ == '__main__':
    main()
