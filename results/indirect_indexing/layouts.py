"""
Which part of the replication's layout lets the rule be learned: every layout's runs at the 200k-step schedule, with
the ingredients each layout has. Reads the run folders runs/<layout>_<encoding>_s<seed>/ (runs/paper200k_* for our
first layout) and writes

    layouts.md            one row per run, with the layout's ingredients, how far it got and when
    curves_layouts.png    test accuracy against step, one colour per layout, PoPE solid and RoPE dashed

    python results/indirect_indexing/layouts.py results/indirect_indexing

A run solves the task when its test accuracy reaches 90 % (seeds.py reads the runs the same way).
"""

import argparse
import os
import re
import sys

from seeds import NAMES, THRESHOLDS, fmt_step, read_run

# layout (the run folders' prefix) -> its data set and its ingredients: a run of pad tokens before the string, the
# query at one position, the string's lengths, ', ' separators, shifts of 0 (prepare/indirect_indexing.py's VARIANTS)
LAYOUTS = {
    'paper200k': ('indirect_indexing', 'no', 'no', '20-40', 'no', 'no'),
    'leftpad': ('indirect_indexing_leftpad', 'yes', 'yes', '20-40', 'yes', 'yes'),
    'leftpad_nospace': ('indirect_indexing_leftpad_nospace', 'yes', 'yes', '20-40', 'no', 'no'),
    'leftpad_noshift0': ('indirect_indexing_leftpad_noshift0', 'yes', 'yes', '20-40', 'yes', 'no'),
    'leftpad_nospace_shift0': ('indirect_indexing_leftpad_nospace_shift0', 'yes', 'yes', '20-40', 'no', 'yes'),
    'shift0': ('indirect_indexing_shift0', 'no', 'no', '20-40', 'no', 'yes'),
    'bos': ('indirect_indexing_bos', 'one <bos>', 'no', '20-40', 'no', 'no'),
    'fixedlen': ('indirect_indexing_fixedlen', 'no', 'yes', '30', 'no', 'no'),
    'spaces_shift0': ('indirect_indexing_spaces_shift0', 'no', 'no', '20-40', 'yes', 'yes'),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('folder', help='results/indirect_indexing (reads runs/<layout>_<encoding>_s<seed>/, writes '
                                  'layouts.md and the figure)')
    args = p.parse_args(argv)
    runs_dir = os.path.join(args.folder, 'runs')
    pattern = re.compile(rf"({'|'.join(sorted(LAYOUTS, key=len, reverse=True))})_(pope|rope)_s(\d+)")
    found = sorted((m.groups(), name) for name in (os.listdir(runs_dir) if os.path.isdir(runs_dir) else [])
                   if (m := pattern.fullmatch(name)))
    if not found:
        sys.exit(f"{runs_dir} holds no run folder <layout>_<pope|rope>_s<seed> of the layouts {', '.join(LAYOUTS)}: "
                 "give the study's results folder")
    order = list(LAYOUTS)
    found.sort(key=lambda f: (order.index(f[0][0]), f[0][1], int(f[0][2])))
    rows = ['| layout (data set) | pad prefix | fixed query position | string length | `, ` | shifts of 0 | run | '
            'ended | first eval >= 10.5 % | >= 50 % | >= 90 % | test acc % | train acc % |', '|---' * 13 + '|']
    runs = []
    for (layout, pe, seed), name in found:
        r = read_run(os.path.join(runs_dir, name))
        runs.append((layout, pe, r))
        dataset, *has = LAYOUTS[layout]
        rows.append(f"| {layout} (`{dataset}`) | " + ' | '.join(has) + f" | {NAMES[pe]} s{seed} | {r['ended']} | "
                    f"{' | '.join(fmt_step(r['to'][t]) for t in THRESHOLDS)} | {100 * r['test_acc']:.1f} | "
                    f"{100 * r['train_acc']:.1f} |")
    out = ["# Which part of the layout decides (200k-step schedule)", '',
           f"Made by `python results/indirect_indexing/layouts.py {args.folder}` from the run folders "
           "`runs/<layout>_<encoding>_s<seed>/`; `paper200k` is our first layout. Test accuracy's plateau before "
           "the rule (the shift read, the source not found: `python -m eval.indirect_probe chance`, column window) "
           "is 9.2 % with shifts of 0 (their rows copy the source) and 4.95 % without (4.55 % for fixedlen's 30 "
           "letters), so 10.5 % marks leaving it for the first and twice it for the second.", '', *rows]
    with open(os.path.join(args.folder, 'layouts.md'), 'w') as f:
        f.write('\n'.join(out) + '\n')
    print('\n'.join(out))

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    labelled = set()
    for layout, pe, r in runs:
        label = f"{layout}, {NAMES[pe]}"
        ax.plot([i for i, _ in r['curve']], [100 * a for _, a in r['curve']], color=f'C{order.index(layout)}',
                linestyle='-' if pe == 'pope' else '--', alpha=0.8, label=None if label in labelled else label)
        labelled.add(label)
    ax.axhline(90, color='grey', linestyle=':', linewidth=1)
    ax.set_xlabel('step')
    ax.set_ylabel('test accuracy (%)')
    ax.set_title('Indirect indexing: the layouts of the rows, 200k-step schedule')
    ax.grid(alpha=0.3)
    ax.legend(fontsize='small', loc='upper left', bbox_to_anchor=(1.01, 1))  # beside the curves, not over them
    fig.tight_layout()
    fig.savefig(os.path.join(args.folder, 'curves_layouts.png'), dpi=120)
    print(f"wrote {args.folder}/layouts.md and curves_layouts.png")


if __name__ == '__main__':
    main()
