"""
The conversion experiment's table and figure (results/conversion/README.md) from
DIR/**/extrapolation/extrapolation.json and the runs beside it (DIR/smollm2 aside: the SmolLM2
study's); writes DIR/table.md and DIR/conversion.png.

    python results/conversion/table.py results/conversion
"""

import glob
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from eval import markdown_table, read_json, save_figure, subplots, write_page  # noqa: E402
from eval.extrapolation import by_run, tokens_scored  # noqa: E402

STYLE = {'2': ':', '10': '--', '30': '-'}  # the line of each share of recalibration steps (%)


def name(run):  # a label of reproduce.sh without its seed -> (its row's name, colour, line style)
    if m := re.fullmatch(r'(rope|learned)-pope(\d+)', run):
        src, colour = ('RoPE', 'tab:orange') if m[1] == 'rope' else ('learned', 'tab:green')
        return f'{src} -> PoPE, {m[2]} % recalibration', colour, STYLE.get(m[2], '-.')
    if m := re.fullmatch(r'pope-scratch(\d+)', run):
        return f'PoPE from scratch ({m[1]} % more steps)', 'tab:red', STYLE.get(m[1], '-.')
    if m := re.fullmatch(r'rope\+yarn(\d+)', run):
        return f'RoPE + YaRN s={m[1]} (no fine-tune)', 'tab:purple', ':' if m[1] == '4' else '--'
    return {'rope': ('RoPE (pre-trained)', 'tab:blue', '-'),
            'learned': ('learned positions (pre-trained)', 'tab:gray', '-')}[run]


if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
paths = sorted(p for p in glob.glob(os.path.join(out, '**', 'extrapolation', 'extrapolation.json'),
                                    recursive=True) if 'smollm2' not in p.split(os.sep))
if not paths:
    sys.exit(f'no extrapolation/extrapolation.json below {out}: run '
             'results/conversion/reproduce.sh (its last step, eval.extrapolation, writes one)')
about, ppl, lengths = by_run(paths)  # run -> length -> each seed's perplexity; the lengths
steps = {}  # run -> training steps in all (pre-training + recalibration for a conversion)
start = defaultdict(list)  # conversion -> (its source's best val loss, its own at step 0, its best)
seeds = {r['label'].rsplit('-s', 1)[1] for r in about['results']}
best = lambda log: min(e['val_loss'] for e in log)
for path in paths:
    ev = read_json(path)
    for r in [r for r in ev['results'] if r['length'] == ev['lengths'][0]]:
        run, seed = r['label'].rsplit('-s', 1)
        # reproduce.sh's layout: each run's folder beside extrapolation/, named as its ckpt's
        d = os.path.join(os.path.dirname(os.path.dirname(path)),
                         os.path.basename(os.path.dirname(r['ckpt'])))
        final = read_json(os.path.join(d, 'final.json'))
        steps[run] = str(final['iter'])
        if re.fullmatch(r'(rope|learned)-pope\d+', run):  # the pre-training's steps, then its own
            pre = os.path.join(os.path.dirname(d), f"{run.split('-')[0]}-s{seed}")
            steps[run] = f"{read_json(os.path.join(pre, 'final.json'))['iter']} + {final['iter']}"
            pre_log, log = (read_json(os.path.join(x, 'eval_log.jsonl'), lines=True)
                            for x in (pre, d))
            start[run].append((best(pre_log), log[0]['val_loss'], best(log)))
base, mean = lengths[0], lambda v: sum(v) / len(v)  # (base: the training context)
cell = lambda v, d=1: f'{mean(v):.{d}f} ({min(v):.{d}f}-{max(v):.{d}f})' if v else '-'
rows = [[name(r)[0], steps.get(r, ''), *(cell(v[L]) for L in lengths)] for r, v in ppl.items()]
losses = [[name(r)[0], *(cell(column, 2) for column in zip(*v))] for r, v in start.items()]
write_page(os.path.join(out, 'table.md'), [
    markdown_table(['model', 'steps', *(f'test ppl at {L} ({L // base}x)' for L in lengths)], rows),
    '', f"Each cell: the mean over {len(seeds)} seeds ({', '.join(sorted(seeds))}), their range in "
    f"brackets; test perplexity on {tokens_scored(about)}, in windows of each length; '-': "
    f"learned positions stop at {base}.", '',
    markdown_table(['conversion', 'val loss of the pre-trained model', 'converted, at step 0',
                    'converted, best'], losses), '',
    "Val loss: train.py's estimate on eval_iters batches (eval_log.jsonl), mean over seeds "
    '(range).'])

fig, ax = subplots(figsize=(9.6, 4.6))
for run, v in ppl.items():
    xs = [L for L in lengths if v[L]]
    label, colour, style = name(run)
    ax.plot(xs, [mean(v[L]) for L in xs], marker='o', color=colour, ls=style, label=label)
ax.axvline(base, color='grey', ls='--', lw=1)
ax.set(xscale='log', xlabel='context length (tokens; training context: the dashed line)',
       ylabel=f'test perplexity (mean of {len(seeds)} seeds)',
       title=f'Converted to PoPE: 6 x 384 GPT on Shakespeare, context {base}')
ax.set_xticks(lengths, [str(L) for L in lengths])
ax.minorticks_off()
ax.grid(alpha=0.3)
ax.legend(fontsize=8, loc='center left', bbox_to_anchor=(1.01, 0.5))
save_figure(fig, os.path.join(out, 'conversion.png'), dpi=120)
print(f"wrote {os.path.join(out, 'table.md')} and conversion.png")
