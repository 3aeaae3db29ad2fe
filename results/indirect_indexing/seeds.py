"""
The seeds of the indirect-indexing comparison: PoPE against RoPE on the replication's layout at the 200k-step schedule.
Reads every run folder runs/leftpad_<pope|rope>_s<seed>/ (eval_log.jsonl, final.json, probe.json) and writes

    seeds.md            one row per run, one per encoding, and the exact rank test of the steps to 90 %
    curves_seeds.png    test accuracy against step, one colour per encoding, one line per seed

    python results/indirect_indexing/seeds.py results/indirect_indexing

Steps to a threshold: the first evaluation (every 4k steps) whose test accuracy is at or above it. A run "solves" the
task when that happens for 90 %. A run that never does counts as 200k+ (after the last step of the schedule); one
that was cut short before that without reaching 90 % cannot be ranked and is left out of the test, with a note.
The test: Mann-Whitney's U through its exact permutation distribution (every way to split the pooled steps into
groups of the two sizes; ties take their mean rank), two-sided.
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
           'complete': final is not None, 'test_acc': last['test_acc'], 'train_acc': last['train_acc'],
           'to': {t: next((r['iter'] for r in log if r['test_acc'] >= t), None) for t in THRESHOLDS},
           'curve': [(r['iter'], r['test_acc']) for r in log]}
    if os.path.exists(probe_path):
        shifts = json.load(open(probe_path))['acc_per_shift']
        worst = min(shifts, key=shifts.get)
        run['probe'] = (min(shifts.values()), worst, len(shifts))
    return run


def steps_to_90(run):
    """The value the rank test sees: the step, inf for an unsolved run that ran its schedule (or stopped on its own
    accuracy), None for one cut short before solving (no rank)."""
    step = run['to'][0.9]
    if step is not None:
        return step
    return math.inf if run['complete'] else None


def mean_ranks(values):
    """Ranks 1..n of values, ties given their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in order[i:j + 1]:
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def exact_rank_test(a, b):
    """Mann-Whitney's U of a against b (U = pairs a < b, ties one half) and its exact two-sided p-value: the share of
    the splits of the pooled values into groups of len(a) and len(b) whose rank sum of the first group lies at least
    as far from its mean as the one observed."""
    pooled = list(a) + list(b)
    ranks = mean_ranks(pooled)
    n_a, n = len(a), len(pooled)
    expected = n_a * (n + 1) / 2
    observed = abs(sum(ranks[:n_a]) - expected)
    splits = list(itertools.combinations(range(n), n_a))
    extreme = sum(abs(sum(ranks[i] for i in split) - expected) >= observed - 1e-9 for split in splits)
    u = sum((x < y) + 0.5 * (x == y) for x in a for y in b)
    return u, extreme / len(splits), len(splits)


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
    summary = ['| encoding | runs | solved (test >= 90 %) | steps to 90 %: median | range |', '|---|---|---|---|---|']
    ranked, notes = {}, []
    for pe, rs in runs.items():
        ranked[pe] = [s for s in map(steps_to_90, rs) if s is not None]
        notes += [f"{NAMES[pe]} {r['name'].rsplit('_', 1)[1]} was cut at {r['last_iter'] // 1000}k before reaching "
                  "90 %: left out of the test" for r in rs if steps_to_90(r) is None]
        solved = [s for s in ranked[pe] if s != math.inf]
        shown = lambda s: f"{SCHEDULE // 1000}k+" if s == math.inf else fmt_step(int(s))
        median = statistics.median(ranked[pe]) if ranked[pe] else None
        summary.append(f"| {NAMES[pe]} | {len(rs)} | {len(solved)} of {len(ranked[pe])} | "
                       + (shown(median) if median is not None else '-') + ' | '
                       + (f"{shown(min(ranked[pe]))} - {shown(max(ranked[pe]))}" if ranked[pe] else '-') + ' |')
    out = ["# PoPE against RoPE, seeds of the replication's layout (200k-step schedule)", '',
           f"Made by `python results/indirect_indexing/seeds.py {args.folder}` from the run folders "
           "`runs/leftpad_<encoding>_s<seed>/`.", '', *rows, '', *summary, '']
    if len(ranked['pope']) >= 2 and len(ranked['rope']) >= 2:
        u, p_value, n_splits = exact_rank_test(ranked['pope'], ranked['rope'])
        out.append(f"Steps to 90 % test accuracy, PoPE ({len(ranked['pope'])} runs) against RoPE "
                   f"({len(ranked['rope'])}): Mann-Whitney U = {u:g} (pairs in which PoPE got there first; ties "
                   f"count one half; {len(ranked['pope']) * len(ranked['rope'])} pairs), exact two-sided "
                   f"p = {p_value:.3f} over all {n_splits} splits of the pooled runs.")
    else:
        out.append("Fewer than two ranked runs of an encoding: no test.")
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
