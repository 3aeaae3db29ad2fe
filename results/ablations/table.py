"""
The ablations' table and figure from eval.extrapolation's output: per run (PoPE, an ablation, RoPE)
the mean test perplexity over seeds at each context length, each seed's beside it, and the paper's.
Reads DIR/extrapolation/extrapolation.json, writes DIR/table.md and DIR/ablations.png.

    python results/ablations/table.py DIR
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from eval import markdown_table, save_figure, subplots, write_page  # noqa: E402
from eval.extrapolation import by_run, tokens_scored  # noqa: E402

PAPER = {'pope': 21.33, 'no_softplus': 21.57, 'relu': 21.55, 'no_delta': 21.42, 'rope': 21.55}
NAMES = {'pope': 'PoPE', 'no_softplus': 'PoPE, mu = x (no softplus)', 'relu': 'PoPE, mu = relu(x)',
         'no_delta': 'PoPE, no delta', 'rope': 'RoPE'}

if len(sys.argv) != 2:
    sys.exit(__doc__)
out = sys.argv[1]
path = os.path.join(out, 'extrapolation', 'extrapolation.json')
if not os.path.exists(path):
    sys.exit(f'{path} is missing: run results/ablations/reproduce.sh (its last step, '
             'eval.extrapolation, writes it)')
ev, ppl, lengths = by_run([path])  # run -> length -> each seed's perplexity; the lengths
base, mean = lengths[0], lambda v: sum(v) / len(v)  # (base: the training context)
rows = [[NAMES[run], PAPER[run], *(f"{mean(v[L]):.1f} ({', '.join(f'{x:.1f}' for x in v[L])})"
                                   for L in lengths)] for run, v in ppl.items()]
write_page(os.path.join(out, 'table.md'), [
    markdown_table(['run', 'paper: 124M, OpenWebText val ppl',
                    *(f'test ppl at {L} ({L // base}x)' for L in lengths)], rows), '',
    "Each cell: the mean over seeds (each seed's in brackets); test perplexity on "
    f"{tokens_scored(ev)}, in windows of each length; the paper's column is its 124M OpenWebText "
    "run."])

fig, ax = subplots(figsize=(6.4, 4.2))
for run, v in ppl.items():
    m = [mean(v[L]) for L in lengths]
    ax.errorbar(lengths, m, yerr=[[a - min(v[L]) for a, L in zip(m, lengths)],
                                  [max(v[L]) - a for a, L in zip(m, lengths)]],
                marker='o', capsize=3, label=f'{NAMES[run]} ({len(v[base])} seeds)')
ax.axvline(base, color='grey', ls='--', lw=1, label='training context')
ax.set(xlabel='context length (tokens)', ylabel='test perplexity (mean; bars: min-max over seeds)',
       title='PoPE ablations, 6 x 384 GPT on Shakespeare')
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
save_figure(fig, os.path.join(out, 'ablations.png'), dpi=120)
print(f"wrote {os.path.join(out, 'table.md')} and ablations.png")
