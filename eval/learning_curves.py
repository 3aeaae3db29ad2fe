"""
Learning curves from the eval_log.jsonl files that train.py writes: one line per run, one panel per
metric. Runs whose labels differ only in their last word ('PoPE seed 2', 'PoPE seed 3') share a
colour.

    python -m eval.learning_curves out-indirect-pope/eval_log.jsonl --label PoPE \\
        out-indirect-rope/eval_log.jsonl --label RoPE --metric test_acc,train_acc --out curves.png
"""

import os

from eval import check_out, labels_for, read_json, save_figure, subplots
from prepare.common import parser


def main(argv=None):
    p = parser(__doc__)
    p.add_argument('logs', nargs='+', help='eval_log.jsonl files')
    p.add_argument('--label', action='append', help='one per log (default: the folder name)')
    p.add_argument('--metric', default='val_loss', help='keys of the log records, comma-separated, '
                   'one panel each: val_loss, test_acc,train_acc, ...')
    p.add_argument('--out', default='out-curves.png')
    p.add_argument('--title', default=None)
    args = p.parse_intermixed_args(argv)  # logs and --label may alternate
    check_out(args.out, folder=False)  # before the work
    ext = os.path.splitext(args.out)[1]
    if ext not in ('', '.png', '.pdf', '.svg'):
        raise SystemExit(f"--out {args.out}: name a .png, .pdf or .svg file")
    args.out += '' if ext else '.png'  # (the file matplotlib writes, named as it is)
    metrics = args.metric.split(',')
    many = len(args.logs) > 6  # then the legend goes beside the last panel
    fig, axes = subplots(1, len(metrics), figsize=(6.4 * len(metrics) + (2.6 if many else 0), 4.2),
                         squeeze=False)
    logs = [read_json(path, lines=True) for path in args.logs]
    for ax, metric in zip(axes[0], metrics):
        runs_of = {}  # label without its last word -> runs drawn so far
        for path, log, label in zip(args.logs, logs, labels_for(args.logs, args.label)):
            rows = [r for r in log if metric in r]
            if not rows:
                keys = sorted({k for r in log for k in r} - {'iter'})
                raise SystemExit(f"{path}: no record has --metric {metric!r}" + (
                    f" (its keys: {', '.join(keys)})" if keys else " (the log is empty)"))
            group = label.rsplit(' ', 1)[0]
            runs_of[group] = runs_of.get(group, 0) + 1
            ax.plot([r['iter'] for r in rows], [r[metric] for r in rows], marker='.', label=label,
                    color=f'C{list(runs_of).index(group) % 10}',
                    linestyle=['-', '--', ':', '-.'][(runs_of[group] - 1) % 4])
        ax.set(xlabel='iteration', ylabel=metric)
        ax.grid(alpha=0.3)
    axes[0, -1].legend(**dict(fontsize='small', loc='center left', bbox_to_anchor=(1.01, 0.5))
                       if many else {})
    if args.title:
        fig.suptitle(args.title)
    save_figure(fig, args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == '__main__':
    main()
