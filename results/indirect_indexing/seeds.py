"""
PoPE against RoPE, the seeds of the replication's layout at 200k steps, and their exact rank test
(README.md, "Seeds of the replication's layout"): runs/leftpad_<pope|rope>_s<seed>/ read, seeds.md
and curves_seeds.png written.

    python results/indirect_indexing/seeds.py results/indirect_indexing
"""

import itertools
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from eval import markdown_table, read_json, save_figure, subplots, write_page  # noqa: E402
from prepare.common import parser  # noqa: E402

THRESHOLDS = (0.105, 0.5, 0.9)  # the chance plateau's edge (9.2 %), half, solved
SCHEDULE = 200_000
NAMES = {'pope': 'PoPE', 'rope': 'RoPE'}
RUN_HEAD = ['ended', 'first eval >= 10.5 %', '>= 50 %', '>= 90 %', 'test acc %', 'train acc %']


def main(argv=None):
    folder = parse(__doc__, 'seeds.md', argv)
    runs = {'pope': [], 'rope': []}
    for (_, pe, seed), path in sorted(found_runs(folder, ['leftpad']), key=lambda f: f[1]):
        runs[pe].append(dict(read_run(path), seed=seed))  # (in the order of their names)
    ranked = {pe: [steps_to_90(r) for r in rs] for pe, rs in runs.items()}
    shown = lambda s: f"{SCHEDULE // 1000}k+" if s == math.inf else fmt_step(int(s))
    rows, summary, notes = [], [], []
    for pe, rs in runs.items():
        for r in sorted(rs, key=lambda r: int(r['seed'])):
            probe = f"{100 * r['probe'][0]:.1f} % (shift {r['probe'][1]})" if 'probe' in r else ''
            rows.append([f"{NAMES[pe]} s{r['seed']}", *run_cells(r), probe])
        notes += [f"- {NAMES[pe]} s{r['seed']} " + ('was cut' if r['ended'].startswith('cut') else
                  'stopped early on its val accuracy') + f" at {r['last_iter'] // 1000}k before "
                  f"reaching 90 % (test accuracy {100 * r['test_acc']:.1f} %): in the test as not "
                  f"solved by {r['last_iter'] // 1000}k" for r in rs
                  if not r['complete'] and r['to'][0.9] is None]
        known = [s if ok else math.inf for (s, ok), r in zip(ranked[pe], rs) if ok or r['complete']]
        summary.append([NAMES[pe], len(rs), f"{sum(ok for _, ok in ranked[pe])} of {len(known)}",
                        shown(statistics.median(known)) if known else '-',
                        f"{shown(min(known))} - {shown(max(known))}" if known else '-'])
    n, m = len(ranked['pope']), len(ranked['rope'])
    test = "Fewer than two runs of an encoding: no test."
    if min(n, m) >= 2:
        pope_first, rope_first, p_value, n_splits = exact_rank_test(ranked['pope'], ranked['rope'])
        test = (f"Steps to 90 % test accuracy, PoPE ({n} runs) against RoPE ({m}): of the {n * m} "
                f"pairs, PoPE got there first in {pope_first}, RoPE in {rope_first}, the rest tied "
                "or not known; Gehan's test (Mann-Whitney's, for runs that end unsolved), exact "
                f"two-sided p = {p_value:.3f} over all {n_splits} splits of the pooled runs.")
    write_page(os.path.join(folder, 'seeds.md'), [
        "# PoPE against RoPE, seeds of the replication's layout (200k-step schedule)", '',
        f"Made by `python results/indirect_indexing/seeds.py {folder}` from the run folders "
        "`runs/leftpad_<encoding>_s<seed>/`.", '',
        markdown_table(['run', *RUN_HEAD, 'probe: worst shift'], rows), '',
        markdown_table(['encoding', 'runs', 'solved (test >= 90 %), of those not cut short before',
                        'steps to 90 %: median', 'range'], summary), '', test, *notes])
    plot(folder, 'curves_seeds.png', (8, 4.5), "Indirect indexing, replication's layout, 200k-step "
         "schedule: one line per seed", [(r['curve'], dict(
             color=f'C{colour}', label=f"{NAMES[pe]} ({len(rs)} seeds)" if k == 0 else None))
             for colour, (pe, rs) in enumerate(runs.items()) for k, r in enumerate(rs)])
    print(f"wrote {folder}/seeds.md and curves_seeds.png")


def parse(doc, page, argv):  # the study's folder, from the command line
    p = parser(doc)
    p.add_argument('folder', help=f'results/indirect_indexing (reads runs/; writes {page}, a png)')
    return p.parse_args(argv).folder


def found_runs(folder, layouts):
    """[((layout, encoding, seed), path)] of the run folders runs/<layout>_<pope|rope>_s<seed>, in
    the order of layouts, encodings, seeds; one line and an exit where there is none."""
    runs = os.path.join(folder, 'runs')
    names = '|'.join(sorted(layouts, key=len, reverse=True))  # the longest first
    pattern = re.compile(rf"({names})_(pope|rope)_s(\d+)")
    found = [(m.groups(), os.path.join(runs, name)) for name in
             (os.listdir(runs) if os.path.isdir(runs) else []) if (m := pattern.fullmatch(name))]
    if not found:
        sys.exit(f"{runs} holds no run folder <layout>_<pope|rope>_s<seed> of the layouts "
                 f"{', '.join(layouts)}: give the study's results folder")
    return sorted(found, key=lambda f: (layouts.index(f[0][0]), f[0][1], int(f[0][2])))


def read_run(folder):
    """One run's numbers: steps to each threshold, last evaluation, why it ended, probe."""
    log = read_json(os.path.join(folder, 'eval_log.jsonl'), lines=True)
    final, probe = (os.path.join(folder, name) for name in ('final.json', 'probe.json'))
    final, last = read_json(final) if os.path.exists(final) else None, log[-1]
    run = {'name': os.path.basename(os.path.normpath(folder)), 'last_iter': last['iter'],
           'ended': f"cut at {last['iter'] // 1000}k" if final is None else
           f"early stop at {final['early_stop']['iter'] // 1000}k" if 'early_stop' in final else
           f"schedule's end ({final['iter'] // 1000}k)",
           'complete': final is not None and 'early_stop' not in final,  # ran its whole schedule
           'test_acc': last['test_acc'], 'train_acc': last['train_acc'],
           'to': {t: next((r['iter'] for r in log if r['test_acc'] >= t), None)
                  for t in THRESHOLDS},
           'curve': [(r['iter'], r['test_acc']) for r in log]}
    if os.path.exists(probe):
        shifts = read_json(probe)['acc_per_shift']
        run['probe'] = (min(shifts.values()), min(shifts, key=shifts.get), len(shifts))
    return run


def run_cells(run):  # a run's cells under RUN_HEAD ('-': a threshold never reached)
    return [run['ended'], *(fmt_step(run['to'][t]) for t in THRESHOLDS),
            f"{100 * run['test_acc']:.1f}", f"{100 * run['train_acc']:.1f}"]


def steps_to_90(run):
    """(step, solved): the first evaluation at 90 %, or the last one if the run never got there."""
    step = run['to'][0.9]
    return (step, True) if step is not None else (run['last_iter'], False)


def first(x, y):
    """+1 if run x (step, solved) surely got to 90 % before y, -1 if after, else 0."""
    (sx, x_solved), (sy, y_solved) = x, y
    if x_solved and (sx < sy or sx == sy and not y_solved):  # y: solved later, or not by sy >= sx
        return 1
    if y_solved and (sy < sx or sy == sx and not x_solved):
        return -1
    return 0


def exact_rank_test(a, b):
    """Gehan's test of the runs a against b, each (step, solved): (pairs in which a's run got to
    90 % first, pairs in which b's did, the exact two-sided p-value, the number of splits)."""
    pooled = list(a) + list(b)
    n = len(pooled)
    score = [[first(x, y) for y in pooled] for x in pooled]
    gehan = lambda group: sum(score[i][j] for i in group for j in set(range(n)) - set(group))
    observed = abs(gehan(range(len(a))))
    splits = list(itertools.combinations(range(n), len(a)))
    extreme = sum(abs(gehan(split)) >= observed for split in splits)
    pairs = [score[i][j] for i in range(len(a)) for j in range(len(a), n)]
    return pairs.count(1), pairs.count(-1), extreme / len(splits), len(splits)


def fmt_step(step):
    return '-' if step is None else f"{step // 1000}k"


def plot(folder, name, size, title, lines, **legend):  # a line per (curve, plot's keywords)
    fig, ax = subplots(figsize=size, layout=None)
    for curve, style in lines:
        ax.plot([i for i, _ in curve], [100 * a for _, a in curve], alpha=0.8, **style)
    ax.axhline(90, color='grey', linestyle=':', linewidth=1)
    ax.set(xlabel='step', ylabel='test accuracy (%)', title=title)
    ax.grid(alpha=0.3)
    ax.legend(**legend)
    fig.tight_layout()  # (once, here: as the published figures were laid out)
    save_figure(fig, os.path.join(folder, name), dpi=120)


if __name__ == '__main__':
    main()
