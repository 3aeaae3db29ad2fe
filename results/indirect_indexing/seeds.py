"""
The seeds of the indirect-indexing comparison: PoPE against RoPE on the replication's layout at the 200k-step schedule.
Reads every run folder runs/leftpad_<pope|rope>_s<seed>/ (eval_log.jsonl, final.json, probe.json) and writes

    seeds.md            one row per run, one per encoding, and the exact rank test of the steps to 90 %
    curves_seeds.png    test accuracy against step, one colour per encoding, one line per seed

    python results/indirect_indexing/seeds.py results/indirect_indexing

Steps to a threshold: the first evaluation (every 4k steps) whose test accuracy is at or above it. A run "solves" the
task when that happens for 90 %. A run that ends without solving it is known only to need more steps than it ran:
censored at its last evaluation. Only one that ran its whole schedule counts in the solve rate, the median and the
range (as needing more than the schedule); one cut short, or stopped early (the stop watches val accuracy, not test
accuracy) before solving it, counts in the rank test alone.
The test: Gehan's form of the Mann-Whitney test, which takes censored runs: each PoPE-RoPE pair scores +1 if the
PoPE run certainly got to 90 % first, -1 if the RoPE run did, 0 if they tied or the order is not known (a censored
run against one that solved after it was cut, or two censored runs); the statistic G is the sum over the pairs,
and the two-sided p-value the share of all splits of the pooled runs into groups of the two sizes whose |G| is at
least the observed one. With no run cut short it is the exact Mann-Whitney test (G = 2U - pairs). It assumes runs
are cut alike in both groups (they run side by side).
"""

import argparse
import itertools
import json
import math
import os
import re
import statistics
import sys

THRESHOLDS = (0.105, 0.5, 0.9)  # the chance plateau's edge (9.2 %), half, solved
SCHEDULE = 200_000
NAMES = {'pope': 'PoPE', 'rope': 'RoPE'}


def read_run(folder):
    """One run's numbers: the steps to each threshold, the last evaluation, why it ended, its probe per shift."""
    log = [json.loads(line) for line in open(os.path.join(folder, 'eval_log.jsonl')) if line.strip()]
    final_path, probe_path = os.path.join(folder, 'final.json'), os.path.join(folder, 'probe.json')
    final = json.load(open(final_path)) if os.path.exists(final_path) else None
    last = log[-1]
    if final is None:
        ended = f"cut at {last['iter'] // 1000}k"
    elif 'early_stop' in final:
        ended = f"early stop at {final['early_stop']['iter'] // 1000}k"
    else:
        ended = f"schedule's end ({final['iter'] // 1000}k)"
    run = {'name': os.path.basename(os.path.normpath(folder)), 'last_iter': last['iter'], 'ended': ended,
           'complete': final is not None and 'early_stop' not in final,  # ran its whole schedule
           'test_acc': last['test_acc'], 'train_acc': last['train_acc'],
           'to': {t: next((r['iter'] for r in log if r['test_acc'] >= t), None) for t in THRESHOLDS},
           'curve': [(r['iter'], r['test_acc']) for r in log]}
    if os.path.exists(probe_path):
        shifts = json.load(open(probe_path))['acc_per_shift']
        worst = min(shifts, key=shifts.get)
        run['probe'] = (min(shifts.values()), worst, len(shifts))
    return run


def steps_to_90(run):
    """(step, solved): the step of the first evaluation at 90 %, or the last one if the run never got there."""
    step = run['to'][0.9]
    return (step, True) if step is not None else (run['last_iter'], False)


def first(x, y):
    """+1 if run x (step, solved) certainly got to 90 % before run y, -1 if after, 0 if tied or not known."""
    (sx, x_solved), (sy, y_solved) = x, y
    if x_solved and (sx < sy or sx == sy and not y_solved):  # y: solved later, or not by step sy >= sx
        return 1
    if y_solved and (sy < sx or sy == sx and not x_solved):
        return -1
    return 0


def exact_rank_test(a, b):
    """Gehan's test of the runs a against b, each (step, solved): (pairs in which a's run got to 90 % first, pairs in
    which b's did, the exact two-sided p-value, the number of splits)."""
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('folder', help='results/indirect_indexing (reads runs/leftpad_*_s*/, writes seeds.md and the figure)')
    args = p.parse_args(argv)
    runs_dir = os.path.join(args.folder, 'runs')
    names = sorted(n for n in os.listdir(runs_dir) if re.fullmatch(r'leftpad_(pope|rope)_s\d+', n)) \
        if os.path.isdir(runs_dir) else []
    if not names:
        sys.exit(f"{runs_dir} holds no run folder leftpad_<pope|rope>_s<seed>: give the study's results folder")
    runs = {'pope': [], 'rope': []}
    for name in names:
        runs[name.split('_')[1]].append(read_run(os.path.join(runs_dir, name)))

    rows = ['| run | ended | first eval >= 10.5 % | >= 50 % | >= 90 % | test acc % | train acc % | probe: worst shift |',
            '|---|---|---|---|---|---|---|---|']
    for pe in runs:
        for r in sorted(runs[pe], key=lambda r: int(r['name'].rsplit('_s', 1)[1])):
            probe = '' if 'probe' not in r else f"{100 * r['probe'][0]:.1f} % (shift {r['probe'][1]})"
            rows.append(f"| {NAMES[pe]} s{r['name'].rsplit('_s', 1)[1]} | {r['ended']} | "
                        + ' | '.join(fmt_step(r['to'][t]) for t in THRESHOLDS)
                        + f" | {100 * r['test_acc']:.1f} | {100 * r['train_acc']:.1f} | {probe} |")
    summary = ['| encoding | runs | solved (test >= 90 %), of those not cut short before | steps to 90 %: median '
               '| range |', '|---|---|---|---|---|']
    ranked, notes = {}, []
    for pe, rs in runs.items():
        ranked[pe] = [steps_to_90(r) for r in rs]
        notes += [f"{NAMES[pe]} {r['name'].rsplit('_', 1)[1]} "
                  + ('was cut' if r['ended'].startswith('cut') else 'stopped early on its val accuracy')
                  + f" at {r['last_iter'] // 1000}k before reaching 90 % (test accuracy {100 * r['test_acc']:.1f} %): "
                  f"in the test as not solved by {r['last_iter'] // 1000}k" for r in rs
                  if not r['complete'] and r['to'][0.9] is None]
        known = [s if solved else math.inf for (s, solved), r in zip(ranked[pe], rs) if solved or r['complete']]
        shown = lambda s: f"{SCHEDULE // 1000}k+" if s == math.inf else fmt_step(int(s))
        median = statistics.median(known) if known else None
        summary.append(f"| {NAMES[pe]} | {len(rs)} | {sum(solved for _, solved in ranked[pe])} of {len(known)} | "
                       + (shown(median) if median is not None else '-') + ' | '
                       + (f"{shown(min(known))} - {shown(max(known))}" if known else '-') + ' |')
    out = ["# PoPE against RoPE, seeds of the replication's layout (200k-step schedule)", '',
           f"Made by `python results/indirect_indexing/seeds.py {args.folder}` from the run folders "
           "`runs/leftpad_<encoding>_s<seed>/`.", '', *rows, '', *summary, '']
    if len(ranked['pope']) >= 2 and len(ranked['rope']) >= 2:
        pope_first, rope_first, p_value, n_splits = exact_rank_test(ranked['pope'], ranked['rope'])
        n_pairs = len(ranked['pope']) * len(ranked['rope'])
        out.append(f"Steps to 90 % test accuracy, PoPE ({len(ranked['pope'])} runs) against RoPE "
                   f"({len(ranked['rope'])}): of the {n_pairs} pairs, PoPE got there first in {pope_first}, RoPE in "
                   f"{rope_first}, the rest tied or not known; Gehan's test (Mann-Whitney's, for runs that end "
                   f"unsolved), exact two-sided p = {p_value:.3f} over all {n_splits} splits of the pooled runs.")
    else:
        out.append("Fewer than two runs of an encoding: no test.")
    out += [f"- {n}" for n in notes]
    with open(os.path.join(args.folder, 'seeds.md'), 'w') as f:
        f.write('\n'.join(out) + '\n')
    print('\n'.join(out))

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for colour, pe in enumerate(runs):
        for k, r in enumerate(sorted(runs[pe], key=lambda r: r['name'])):
            ax.plot([i for i, _ in r['curve']], [100 * a for _, a in r['curve']], color=f'C{colour}', alpha=0.8,
                    label=f"{NAMES[pe]} ({len(runs[pe])} seeds)" if k == 0 else None)
    ax.axhline(90, color='grey', linestyle=':', linewidth=1)
    ax.set_xlabel('step')
    ax.set_ylabel('test accuracy (%)')
    ax.set_title("Indirect indexing, replication's layout, 200k-step schedule: one line per seed")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.folder, 'curves_seeds.png'), dpi=120)
    print(f"wrote {args.folder}/seeds.md and curves_seeds.png")


if __name__ == '__main__':
    main()
