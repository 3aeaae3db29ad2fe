"""
The ablations' table and figure from eval.extrapolation's output: per run (PoPE, an ablation or RoPE) the mean test
perplexity over seeds at each context length, each seed's value beside it, and the paper's 124M number.

    python results/ablations/table.py DIR    # reads DIR/extrapolation/extrapolation.json; writes DIR/table.md, DIR/ablations.png

reproduce.sh runs it last; `python results/ablations/table.py results/ablations` redraws the published ones.
"""

import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from eval import save_figure, subplots  # noqa: E402
from eval.extrapolation import tokens_scored  # noqa: E402

PAPER = {'pope': 21.33, 'no_softplus': 21.57, 'relu': 21.55, 'no_delta': 21.42, 'rope': 21.55}  # section 4
NAMES = {'pope': 'PoPE', 'no_softplus': 'PoPE, mu = x (no softplus)', 'relu': 'PoPE, mu = relu(x)',
         'no_delta': 'PoPE, no delta', 'rope': 'RoPE'}

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
path = os.path.join(out, 'extrapolation', 'extrapolation.json')
if not os.path.exists(path):
    sys.exit(f'{path} is missing: run results/ablations/reproduce.sh (its last step, eval.extrapolation, writes it)')
ev = json.load(open(path))
ppl = defaultdict(lambda: defaultdict(list))  # run -> length -> perplexity of each seed, labels '<run>-s<seed>'
for r in ev['results']:
    ppl[r['label'].rsplit('-s', 1)[0]][r['length']].append(r['ppl'])
lengths = sorted({r['length'] for r in ev['results']})
base = lengths[0]  # the training context
mean = lambda v: sum(v) / len(v)

lines = ['| run | paper: 124M, OpenWebText val ppl | ' + ' | '.join(
    f'test ppl at {L} ({L // base}x)' for L in lengths) + ' |', '|---|---|' + '---|' * len(lengths)]
for run, by_length in ppl.items():
    cells = [f"{mean(by_length[L]):.1f} ({', '.join(f'{x:.1f}' for x in by_length[L])})" for L in lengths]
    lines.append(f'| {NAMES[run]} | {PAPER[run]} | ' + ' | '.join(cells) + ' |')
lines += ['', f"Each cell: the mean over seeds (each seed's in brackets); test perplexity on {tokens_scored(ev)}, "
          "in windows of each length; the paper's column is its 124M OpenWebText run."]
with open(os.path.join(out, 'table.md'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
print('\n'.join(lines))

fig, ax = subplots(figsize=(6.4, 4.2))
for run, by_length in ppl.items():
    m = [mean(by_length[L]) for L in lengths]
    lo = [m[i] - min(by_length[L]) for i, L in enumerate(lengths)]
    hi = [max(by_length[L]) - m[i] for i, L in enumerate(lengths)]
    ax.errorbar(lengths, m, yerr=[lo, hi], marker='o', capsize=3, label=f'{NAMES[run]} ({len(by_length[base])} seeds)')
ax.axvline(base, color='grey', ls='--', lw=1, label='training context')
ax.set(xlabel='context length (tokens)', ylabel='test perplexity (mean; bars: min-max over seeds)',
       title='PoPE ablations, 6 x 384 GPT on Shakespeare')
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
save_figure(fig, os.path.join(out, 'ablations.png'), dpi=120)
print(f"wrote {os.path.join(out, 'table.md')} and ablations.png")
