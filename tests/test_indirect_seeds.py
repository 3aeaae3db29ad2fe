"""results/indirect_indexing/seeds.py: the steps to each threshold, the exact rank test, and the committed page."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(ROOT, 'results', 'indirect_indexing')
sys.path.insert(0, STUDY)
import itertools  # noqa: E402
import random  # noqa: E402

from seeds import exact_rank_test, first, read_run, steps_to_90  # noqa: E402


def solved(*steps):
    return [(s, True) for s in steps]


def mann_whitney_p(a, b):
    """The plain exact Mann-Whitney test, by its definition: ranks of the pooled values (ties: their mean rank), the
    share of splits whose rank sum lies at least as far from its mean as the observed one."""
    pooled = a + b
    ranks = [sum(y < x for y in pooled) + (sum(y == x for y in pooled) + 1) / 2 for x in pooled]
    mean = len(a) * (len(pooled) + 1) / 2
    dev = lambda group: abs(sum(ranks[i] for i in group) - mean)
    splits = list(itertools.combinations(range(len(pooled)), len(a)))
    return sum(dev(s) >= dev(range(len(a))) - 1e-9 for s in splits) / len(splits)


def test_exact_rank_test_counts_the_splits():
    # five against five, fully apart: 2 of the C(10, 5) = 252 splits are as extreme (this one and its mirror)
    assert exact_rank_test(solved(1, 2, 3, 4, 5), solved(6, 7, 8, 9, 10)) == (25, 0, pytest.approx(2 / 252), 252)
    assert exact_rank_test(solved(6, 7, 8, 9, 10), solved(1, 2, 3, 4, 5))[:3] == (0, 25, pytest.approx(2 / 252))
    # the same values in both groups: every split is as extreme as the one seen
    assert exact_rank_test(solved(3, 3), solved(3, 3))[2] == 1.0
    # unsolved at the schedule's end (200k) tie with one another and come after every solve; three against three apart
    assert exact_rank_test(solved(80e3, 100e3, 116e3), solved(132e3) + [(200e3, False)] * 2)[:3] == \
        (9, 0, pytest.approx(0.1))


def test_with_every_run_solved_it_is_the_mann_whitney_test():
    rng = random.Random(0)
    for _ in range(30):
        a, b = ([rng.randint(1, 6) for _ in range(rng.randint(2, 5))] for _ in range(2))
        assert exact_rank_test(solved(*a), solved(*b))[2] == pytest.approx(mann_whitney_p(a, b)), (a, b)


def test_a_run_cut_short_is_ordered_only_where_its_order_is_known():
    assert first((116e3, True), (150e3, False)) == 1  # not solved by 150k: after a solve at 116k
    assert first((80e3, True), (48e3, False)) == 0  # not solved by 48k: before or after 80k, unknown
    assert first((48e3, True), (48e3, False)) == 1 and first((48e3, False), (48e3, True)) == -1
    assert first((48e3, False), (200e3, False)) == 0 and first((8e3, True), (8e3, True)) == 0
    # a RoPE run cut at 48k tells nothing against PoPE solves at 80-116k: the same p as without it, fewer pairs known
    with_cut = exact_rank_test(solved(80e3, 100e3, 116e3), solved(132e3, 140e3) + [(48e3, False)])
    assert with_cut[:2] == (6, 0) and 0 < with_cut[2] < 1


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
    assert r['to'] == {0.105: 8000, 0.5: 8000, 0.9: 12000} and steps_to_90(r) == (12000, True)
    assert r['ended'] == 'early stop at 16k' and r['probe'] == (0.8, '3', 2)
    write_run(tmp_path / 'b', [0.0, 0.1, 0.2], final={'iter': 8000})  # ran its schedule, never solved
    assert steps_to_90(read_run(tmp_path / 'b')) == (8000, False)
    write_run(tmp_path / 'c', [0.0, 0.1, 0.2])  # cut short before solving: not solved by its last evaluation
    assert steps_to_90(read_run(tmp_path / 'c')) == (8000, False) and read_run(tmp_path / 'c')['ended'] == 'cut at 8k'


def test_the_page_counts_a_run_cut_short_in_the_test_but_not_in_the_solve_rate(tmp_path):
    runs = tmp_path / 'runs'
    write_run(runs / 'leftpad_pope_s1', [0.0, 0.5, 0.95], final={'iter': 8000})
    write_run(runs / 'leftpad_pope_s2', [0.0, 0.6, 0.96], final={'iter': 8000})
    write_run(runs / 'leftpad_rope_s1', [0.0, 0.1, 0.2, 0.3], final={'iter': 12000})  # unsolved at its schedule's end
    write_run(runs / 'leftpad_rope_s2', [0.0, 0.1])  # cut at 4k: order unknown against solves at 8k
    subprocess.run([sys.executable, os.path.join(STUDY, 'seeds.py'), str(tmp_path)], check=True, capture_output=True)
    page = (tmp_path / 'seeds.md').read_text()
    assert '| PoPE | 2 | 2 of 2 | 8k | 8k - 8k |' in page
    assert '| RoPE | 2 | 0 of 1 | 200k+ | 200k+ - 200k+ |' in page  # the cut run: not in the solve rate
    assert 'of the 4 pairs, PoPE got there first in 2, RoPE in 0' in page
    assert 'RoPE s2 was cut at 4k before reaching 90 % (test accuracy 10.0 %): in the test as not solved by 4k' in page


def test_a_run_stopped_early_before_solving_is_not_shown_as_needing_the_whole_schedule(tmp_path):
    """The early stop watches val accuracy: a run can stop while its test accuracy is below 90 %. It is known only
    not to have solved by its last evaluation, as a run cut short: in the rank test, not in the solve rate, the
    median or the range (not '200k+')."""
    runs = tmp_path / 'runs'
    write_run(runs / 'leftpad_pope_s1', [0.0, 0.5, 0.95], final={'iter': 8000})
    write_run(runs / 'leftpad_pope_s2', [0.0, 0.6, 0.7, 0.96], final={'iter': 12000})
    write_run(runs / 'leftpad_rope_s1', [0.0, 0.1, 0.2, 0.9], final={'iter': 12000, 'early_stop': {'iter': 12000}})
    write_run(runs / 'leftpad_rope_s2', [0.0, 0.1, 0.85], final={'iter': 8000, 'early_stop': {'iter': 8000}})
    subprocess.run([sys.executable, os.path.join(STUDY, 'seeds.py'), str(tmp_path)], check=True, capture_output=True)
    page = (tmp_path / 'seeds.md').read_text()
    assert '| RoPE s2 | early stop at 8k | 8k | 8k | - | 85.0 | 86.0 |  |' in page
    assert '| RoPE | 2 | 1 of 1 | 12k | 12k - 12k |' in page, page
    # RoPE s2, not solved by 8k: after PoPE s1 (8k), unknown against PoPE s2 (12k); RoPE s1 (12k) ties PoPE s2
    assert 'of the 4 pairs, PoPE got there first in 2, RoPE in 0' in page
    assert ('RoPE s2 stopped early on its val accuracy at 8k before reaching 90 % (test accuracy 85.0 %): in the test '
            'as not solved by 8k') in page


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
    query position for every row, the string's shortest and longest length, ', ' separators, shifts of 0."""
    import numpy as np

    from eval.indirect_probe import parse_rows
    from layouts import LAYOUTS
    from prepare import indirect_indexing as ii
    for layout, (dataset, pad_prefix, fixed_query, lengths, spaces, shift0) in LAYOUTS.items():
        ii.prepare(str(tmp_path / dataset), seed=0, sizes={'train': 300, 'val': 300, 'test': 300}, variant=dataset)
        meta = json.load(open(tmp_path / dataset / 'meta.json'))
        rows = np.fromfile(tmp_path / dataset / 'test.bin', dtype=meta['dtype']).reshape(-1, meta['row_len'])
        f = parse_rows(rows, meta)
        first = [meta['itos'][t] for t in rows[:, 0]]
        n = f['q_src'] - f['start'] - len(meta['task']['sep'])  # letters in each row's string
        seen = ('yes' if all(t == '<pad>' for t in first) else 'one <bos>' if all(t == '<bos>' for t in first)
                else 'no', 'yes' if len(set(f['q_last'].tolist())) == 1 else 'no',
                f"{n.min()}-{n.max()}" if n.min() < n.max() else f"{n.min()}", 'yes' if ' ' in meta['itos'] else 'no',
                'yes' if (f['shift'] == 0).any() else 'no')
        assert seen == (pad_prefix, fixed_query, lengths, spaces, shift0), (layout, seen)


def test_the_committed_layout_page_is_what_the_script_makes(tmp_path):
    committed = open(os.path.join(STUDY, 'layouts.md')).read()
    os.makedirs(tmp_path / 'runs')
    for name in os.listdir(os.path.join(STUDY, 'runs')):
        os.symlink(os.path.join(STUDY, 'runs', name), tmp_path / 'runs' / name)
    subprocess.run([sys.executable, os.path.join(STUDY, 'layouts.py'), str(tmp_path)], check=True,
                   capture_output=True)
    assert open(tmp_path / 'layouts.md').read().replace(str(tmp_path), 'results/indirect_indexing') == committed
