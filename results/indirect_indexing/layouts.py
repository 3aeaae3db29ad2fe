"""
Which part of the replication's layout lets the rule be learned: the runs of every layout at the
200k-step schedule, runs/<layout>_<encoding>_s<seed>/, with each layout's ingredients; writes
layouts.md and curves_layouts.png.

    python results/indirect_indexing/layouts.py results/indirect_indexing
"""

import os

from seeds import (NAMES, RUN_HEAD, found_runs, markdown_table, parse, plot, read_run, run_cells,
                   write_page)

# layout (the run folders' prefix) -> its data set and ingredients: a run of pad tokens before the
# string, the query at one position, the string's lengths, ', ' separators, shifts of 0
LAYOUTS = {
    'paper200k': ('indirect_indexing', 'no', 'no', '20-40', 'no', 'no'),
    'leftpad': ('indirect_indexing_leftpad', 'yes', 'yes', '20-40', 'yes', 'yes'),
    'leftpad_nospace': ('indirect_indexing_leftpad_nospace', 'yes', 'yes', '20-40', 'no', 'no'),
    'leftpad_noshift0': ('indirect_indexing_leftpad_noshift0', 'yes', 'yes', '20-40', 'yes', 'no'),
    'leftpad_nospace_shift0': ('indirect_indexing_leftpad_nospace_shift0', 'yes', 'yes', '20-40',
                               'no', 'yes'),
    'shift0': ('indirect_indexing_shift0', 'no', 'no', '20-40', 'no', 'yes'),
    'bos': ('indirect_indexing_bos', 'one <bos>', 'no', '20-40', 'no', 'no'),
    'fixedlen': ('indirect_indexing_fixedlen', 'no', 'yes', '30', 'no', 'no'),
    'spaces_shift0': ('indirect_indexing_spaces_shift0', 'no', 'no', '20-40', 'yes', 'yes'),
}


def main(argv=None):
    folder = parse(__doc__, 'layouts.md', argv)
    runs = [(layout, pe, seed, read_run(path))
            for (layout, pe, seed), path in found_runs(folder, list(LAYOUTS))]
    rows = [[f"{layout} (`{LAYOUTS[layout][0]}`)", *LAYOUTS[layout][1:], f"{NAMES[pe]} s{seed}",
             *run_cells(r)] for layout, pe, seed, r in runs]
    write_page(os.path.join(folder, 'layouts.md'), [
        "# Which part of the layout decides (200k-step schedule)", '',
        f"Made by `python results/indirect_indexing/layouts.py {folder}` from the run folders "
        "`runs/<layout>_<encoding>_s<seed>/`; `paper200k` is our first layout. Test accuracy's "
        "plateau before the rule (the shift read, the source not found: `python -m "
        "eval.indirect_probe chance`, column window) is 9.2 % with shifts of 0 (their rows copy "
        "the source) and 4.95 % without (4.55 % for fixedlen's 30 letters), so 10.5 % marks "
        "leaving it for the first and twice it for the second.", '',
        markdown_table(['layout (data set)', 'pad prefix', 'fixed query position', 'string length',
                        '`, `', 'shifts of 0', 'run', *RUN_HEAD], rows)])
    labelled, lines = set(), []
    for layout, pe, _, r in runs:
        label = f"{layout}, {NAMES[pe]}"
        lines.append((r['curve'], dict(color=f'C{list(LAYOUTS).index(layout)}',
                                       linestyle='-' if pe == 'pope' else '--',
                                       label=None if label in labelled else label)))
        labelled.add(label)
    plot(folder, 'curves_layouts.png', (10, 4.5), 'Indirect indexing: the layouts of the rows, '
         '200k-step schedule', lines, fontsize='small', loc='upper left', bbox_to_anchor=(1.01, 1))
    print(f"wrote {folder}/layouts.md and curves_layouts.png")


if __name__ == '__main__':
    main()
