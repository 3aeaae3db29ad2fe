"""results/indirect_indexing/seeds.py: the steps to each threshold, the exact rank test, and the committed page."""

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(ROOT, 'results', 'indirect_indexing')
sys.path.insert(0, STUDY)
from seeds import exact_rank_test, mean_ranks, read_run, steps_to_90  # noqa: E402


def test_exact_rank_test_counts_the_splits():
    # five against five, fully apart: 2 of the C(10, 5) = 252 splits are as extreme (this one and its mirror)
    u, p, n = exact_rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert (u, n) == (25, 252) and p == pytest.approx(2 / 252)
    assert exact_rank_test([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])[1] == pytest.approx(2 / 252)
    # the same values in both groups: every split is as extreme as the one seen
    assert exact_rank_test([3, 3], [3, 3])[1] == 1.0
    # unsolved runs (inf) tie with one another; three against three apart: 2 of 20
    u, p, _ = exact_rank_test([80e3, 100e3, 116e3], [132e3, math.inf, math.inf])
    assert u == 9 and p == pytest.approx(0.1)
    assert mean_ranks([5, 1, 5, math.inf]) == [2.5, 1, 2.5, 4]
    # brute force against the definition on a small tied case: |rank sum - mean| at least as large as observed
    a, b = [1, 2, 2], [2, 3, 4, 4]
    u, p, n = exact_rank_test(a, b)
    assert u == 1 * 4 + 2 * (0.5 + 3) and n == 35 and 0 < p < 1


def write_run(folder, accs, final=None, probe=None):
    os.makedirs(folder)
    with open(os.path.join(folder, 'eval_log.jsonl'), 'w') as f:
        for i, a in enumerate(accs):
            f.write(json.dumps({'iter': 4000 * i, 'test_acc': a, 'train_acc': a + 0.01, 'val_acc': a}) + '\n')
    if final is not None:
        json.dump(final, open(os.path.join(folder, 'final.json'), 'w'))
    if probe is not None:
        json.dump({'acc_per_shift': probe}, open(os.path.join(folder, 'probe.json'), 'w'))


def test_read_run_and_the_rank_each_ending_gets(tmp_path):
    write_run(tmp_path / 'a', [0.0, 0.1, 0.6, 0.95, 0.96], final={'iter': 16000, 'early_stop': {'iter': 16000}},
              probe={'-1': 0.9, '3': 0.8})
    r = read_run(tmp_path / 'a')
    assert r['to'] == {0.105: 8000, 0.5: 8000, 0.9: 12000} and steps_to_90(r) == 12000
    assert r['ended'] == 'early stop at 16k' and r['probe'] == (0.8, '3', 2)
    write_run(tmp_path / 'b', [0.0, 0.1, 0.2], final={'iter': 8000})  # ran its schedule, never solved
    assert steps_to_90(read_run(tmp_path / 'b')) == math.inf
    write_run(tmp_path / 'c', [0.0, 0.1, 0.2])  # cut short before solving: no rank
    assert steps_to_90(read_run(tmp_path / 'c')) is None and read_run(tmp_path / 'c')['ended'] == 'cut at 8k'


def test_the_committed_page_is_what_the_script_makes_of_the_committed_runs(tmp_path):
    committed = open(os.path.join(STUDY, 'seeds.md')).read()
    os.makedirs(tmp_path / 'runs')
    for name in os.listdir(os.path.join(STUDY, 'runs')):
        if name.startswith('leftpad_') and '100k' not in name:
            os.symlink(os.path.join(STUDY, 'runs', name), tmp_path / 'runs' / name)
    subprocess.run([sys.executable, os.path.join(STUDY, 'seeds.py'), str(tmp_path)], check=True, capture_output=True)
    made = open(tmp_path / 'seeds.md').read().replace(str(tmp_path), 'results/indirect_indexing')
    assert made == committed


def test_each_layout_has_the_ingredients_its_table_says(tmp_path):
    """layouts.py's columns, read off rows the data set's own generator makes: a pad run before the string, one
    query position for every row, ', ' separators, shifts of 0."""
    import numpy as np

    from eval.indirect_probe import parse_rows
    from layouts import LAYOUTS
    from prepare import indirect_indexing as ii
    for layout, (dataset, pad_prefix, fixed_query, spaces, shift0) in LAYOUTS.items():
        ii.prepare(str(tmp_path / dataset), seed=0, sizes={'train': 300, 'val': 300, 'test': 300}, variant=dataset)
        meta = json.load(open(tmp_path / dataset / 'meta.json'))
        rows = np.fromfile(tmp_path / dataset / 'test.bin', dtype=meta['dtype']).reshape(-1, meta['row_len'])
        f = parse_rows(rows, meta)
        first = [meta['itos'][t] for t in rows[:, 0]]
        seen = ('yes' if all(t == '<pad>' for t in first) else 'one <bos>' if all(t == '<bos>' for t in first)
                else 'no', 'yes' if len(set(f['q_last'].tolist())) == 1 else 'no',
                'yes' if ' ' in meta['itos'] else 'no', 'yes' if (f['shift'] == 0).any() else 'no')
        assert seen == (pad_prefix, fixed_query, spaces, shift0), (layout, seen)


def test_the_committed_layout_page_is_what_the_script_makes(tmp_path):
    committed = open(os.path.join(STUDY, 'layouts.md')).read()
    os.makedirs(tmp_path / 'runs')
    for name in os.listdir(os.path.join(STUDY, 'runs')):
        os.symlink(os.path.join(STUDY, 'runs', name), tmp_path / 'runs' / name)
    subprocess.run([sys.executable, os.path.join(STUDY, 'layouts.py'), str(tmp_path)], check=True,
                   capture_output=True)
    assert open(tmp_path / 'layouts.md').read().replace(str(tmp_path), 'results/indirect_indexing') == committed
