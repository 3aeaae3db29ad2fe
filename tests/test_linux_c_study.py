"""results/linux_c/study.py: the paired t-test against closed forms, and the page's numbers from arms written here."""

import importlib.util
import json
import math
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location('study', os.path.join(ROOT, 'results', 'linux_c', 'study.py'))
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)

LENGTHS = [1024, 2048, 4096, 8192, 10240]


@pytest.mark.parametrize('t', [0.3, 1.0, 2.0, 4.303, 12.7, -3.0])
def test_t_test_p_against_closed_forms(t):
    assert study.t_test_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(abs(t)), abs=1e-7)  # Cauchy
    assert study.t_test_p(t, 2) == pytest.approx(1 - abs(t) / math.sqrt(2 + t * t), abs=1e-7)
    x = abs(t) / math.sqrt(4 + t * t)  # 4 degrees of freedom: F(t) = 1/2 + 3/4 x (1 - x^2 / 3)
    assert study.t_test_p(t, 4) == pytest.approx(1 - 1.5 * x * (1 - x * x / 3), abs=1e-7)
    assert study.t_test_p(2.776, 4) == pytest.approx(0.05, abs=2e-4)  # the textbook 5 % points
    assert study.t_test_p(4.303, 2) == pytest.approx(0.05, abs=2e-4)


def test_paired_differences_that_are_all_the_same():
    """Arms that differ by the same amount in every pair: t infinite, p 0; arms that do not differ: no evidence,
    t and p nan (not p = 0); one pair: no test."""
    assert study.paired([1.5, 2.5], [1.0, 2.0]) == (0.5, 0.0, math.inf, 0.0, 2)
    mean, sd, t, p, n = study.paired([2.1, 2.1], [2.1, 2.1])
    assert (mean, sd, n) == (0.0, 0.0, 2) and math.isnan(t) and math.isnan(p)
    mean, sd, t, p, n = study.paired([1.5], [1.25])
    assert (mean, n) == (0.25, 1) and all(map(math.isnan, (sd, t, p)))


def write_arm(root, enc, seed, val, test, doc_losses, ft=True, params=50.86):
    """An arm's files as reproduce.sh leaves them, with the given losses (without the fine-tune's: FINETUNE=0, and
    an ablation's arm, enc 'pope-nosoftplus' and the like)."""
    ft = ft and enc in ('pope', 'rope')
    d = root / 'runs' / f'{enc}_s{seed}'
    for sub in ('pretrain', 'ft'):
        (d / sub).mkdir(parents=True)
    (d / 'pretrain.log').write_text(f'{params:.2f}M parameters, {enc}, 32,768 tokens per iteration, device cuda\n')
    (d / 'pretrain' / 'final.json').write_text(json.dumps(dict(iter=5000, block_size=1024, minutes=12.5,
                                                               val_loss=val, test_loss=test, val_loss_ctx1024=val,
                                                               val_loss_ctx2048=val + seed)))
    (d / 'pretrain' / 'eval_log.jsonl').write_text(''.join(
        json.dumps(dict(iter=i, val_loss=val + 1 / (1 + i))) + '\n' for i in range(0, 5001, 500)))
    if ft:
        (d / 'ft' / 'final.json').write_text(json.dumps(dict(iter=500, block_size=4096, val_loss=val, test_loss=test)))
    labels = {'pope': ['PoPE', 'PoPE, fine-tuned at 4096'],
              'rope': ['RoPE', 'RoPE+YaRN s=10 (no fine-tune)', 'RoPE+YaRN s=4, fine-tuned at 4096']}.get(
                  enc, [study.NAMES[enc]] + [study.NAMES[enc] + '+YaRN s=10 (no fine-tune)'] * enc.startswith('rope-'))
    # an ablation's model or a size's: its name (RoPE's also with YaRN's scale)
    for windows in ('documents', 'stream'):
        about = dict(windows=windows, lengths=LENGTHS, tokens=10240 * 3)
        if windows == 'documents':
            about.update(documents=3, documents_long_enough=3, documents_in_all=9)
        results = [dict(label=label, length=L, nll=doc_losses[i] + k, tokens=10240 * 3)
                   for k, label in enumerate(labels) for i, L in enumerate(LENGTHS)]
        for stage, mine in (('', [r for r in results if 'fine-tuned' not in r['label']]),
                            ('ft_', [r for r in results if 'fine-tuned' in r['label']]))[:2 if ft else 1]:
            os.makedirs(d / (stage + windows), exist_ok=True)
            (d / (stage + windows) / 'extrapolation.json').write_text(json.dumps(dict(about, results=mine)))


def test_the_page_pairs_the_seeds_and_tests_their_difference(tmp_path):
    pytest.importorskip('matplotlib')
    for seed, rv, (dv, dt) in zip((1, 2, 3), (1.50, 1.52, 1.51), ((0.01, -0.02), (0.03, -0.01), (0.02, -0.03))):
        write_arm(tmp_path, 'rope', seed, rv, 1.6, [1.0, 1.2, 1.5, 2.0, 2.2])
        write_arm(tmp_path, 'pope', seed, rv + dv, 1.6 + dt, [1.1, 1.1, 1.1, 1.1, 1.15])
    write_arm(tmp_path, 'pope', 4, 9.0, 9.0, [9.0] * 5)  # no RoPE of its seed: listed, in no pair
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    assert '| pope_s4 | 5000 | 164M | 12.5 | 9.0000 | 9.0000 | 500 | 9.0000 |' in page
    assert 'The seeds with both arms: 1, 2, 3;' in page
    assert '| PoPE (seeds 1, 2, 3, 4) | 3.3975 +- 3.7350 (1.5100, 1.5500, 1.5300, 9.0000) | 5.8975 +- ' in page
    # val: differences 0.01, 0.03, 0.02 -> mean 0.02, sd 0.01, t = 0.02 / (0.01 / sqrt 3) = 3.46, df 2
    t = 0.02 / (0.01 / math.sqrt(3))
    assert f'| val | 1.5300 +- 0.0200 (1.5100, 1.5500, 1.5300) | 1.5100 +- 0.0100 (1.5000, 1.5200, 1.5100) | ' \
           f'+0.0200 | 0.0100 | {t:.2f} | {1 - t / math.sqrt(2 + t * t):.3g} | 3 |' in page
    assert '| test | 1.5800 +- 0.0100' in page and '| -0.0200 | 0.0100 | -3.46 |' in page
    assert '| RoPE | 1.0000 +- 0.0000 (1.0000, 1.0000, 1.0000) | 1.2000' in page
    assert '| pope_s1 | 5000 | 164M | 12.5 | 1.5100 | 1.5800 | 500 | 1.5800 |' in page
    assert '| PoPE, fine-tuned at 4096 | 2.1000' in page  # its label's offset (+1) in write_arm
    assert 'The first 10,241 tokens of each of the 3 test files that have as many (9 test files in all), 30,720' in page
    assert os.path.getsize(tmp_path / 'extrapolation.png') > 10000 and os.path.getsize(tmp_path / 'val_loss.png') > 10000


def test_fine_tunes_of_fewer_seeds_are_averaged_over_theirs_and_named(tmp_path):
    """FINETUNE=0 for some seeds: the fine-tuned models' rows are the mean over the seeds that have them, and say
    which; the others' over every pair."""
    pytest.importorskip('matplotlib')
    for seed, ft in ((1, True), (2, False), (3, False)):
        write_arm(tmp_path, 'rope', seed, 1.5, 1.6, [1.0 + seed, 1.2, 1.5, 2.0, 2.2], ft=ft)
        write_arm(tmp_path, 'pope', seed, 1.5, 1.6, [1.1 + seed, 1.1, 1.1, 1.1, 1.15], ft=ft)
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    assert '| RoPE | 3.0000 +- 1.0000 (2.0000, 3.0000, 4.0000) | 1.2000' in page
    assert '| PoPE, fine-tuned at 4096 (seed 1) | 3.1000 (3.1000) | 2.1000 (2.1000) |' in page
    assert '| RoPE+YaRN s=4, fine-tuned at 4096 (seed 1) | 4.0000 (4.0000) |' in page
    assert '| pope_s2 | 5000 | 164M | 12.5 | 1.5000 | 1.6000 | - | - |' in page
    assert os.path.getsize(tmp_path / 'extrapolation.png') > 10000


def test_the_ablations_against_pope_of_their_seed(tmp_path):
    """The paper's PoPE ablations, one seed each: their losses and the difference to PoPE of the same seed, their rows
    in the runs' and the scores' tables; the pairs' table is PoPE and RoPE alone."""
    pytest.importorskip('matplotlib')
    write_arm(tmp_path, 'rope', 1, 1.48, 1.58, [1.0, 1.2, 1.5, 2.0, 2.2])
    write_arm(tmp_path, 'pope', 1, 1.50, 1.60, [1.1, 1.1, 1.1, 1.1, 1.15])
    write_arm(tmp_path, 'pope-nosoftplus', 1, 1.53, 1.62, [1.3, 1.3, 1.3, 1.3, 1.35])
    write_arm(tmp_path, 'pope-relu', 1, 1.49, 1.61, [1.2] * 5)
    write_arm(tmp_path, 'pope-nodelta', 2, 1.70, 1.80, [1.4] * 5)  # no PoPE of its seed
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    section = page[page.index('## Ablations (one seed each)'):page.index('## Val loss at')]
    assert '| PoPE, no softplus | 1 | 1.5300 | 1.6200 | +0.0300 | +0.0200 |' in section
    assert '| PoPE, ReLU | 1 | 1.4900 | 1.6100 | -0.0100 | +0.0100 |' in section
    assert '| PoPE, no delta | 2 | 1.7000 | 1.8000 | - | - |' in section
    # the paper's perplexities, and as losses: ln(21.57 / 21.33) = 0.01119
    assert ("the paper's val perplexity at 124M on OpenWebText: PoPE 21.33; PoPE, no softplus 21.57 (+0.0112); "
            'PoPE, ReLU 21.55 (+0.0103); PoPE, no delta 21.42 (+0.0042)') in section
    assert '| pope-nosoftplus_s1 | 5000 | 164M | 12.5 | 1.5300 | 1.6200 | - | - |' in page
    assert '| val | 1.5000 (1.5000) | 1.4800 (1.4800) | +0.0200 |' in page and 'The seeds with both arms: 1;' in page
    assert '| PoPE, no softplus (seed 1) | 1.5300 (1.5300) | 2.5300 (2.5300) |' in page  # val at 1x, 2x (+ seed)
    inside = page[page.index('inside documents'):page.index('across documents')]
    assert '| PoPE | 1.1000 (1.1000) |' in inside and '| PoPE, no softplus (seed 1) | 1.3000 (1.3000) |' in inside
    assert '| PoPE, no delta (seed 2) | 1.4000 (1.4000) |' in inside
    assert os.path.getsize(tmp_path / 'extrapolation.png') > 10000 and os.path.getsize(tmp_path / 'val_loss.png') > 10000


def test_the_sizes_pair_their_seeds_and_draw_the_gap(tmp_path):
    """Arms of three sizes: a row per size with its paired difference and p-value, the paper's sizes beside
    them, each size's models in the scores' table, and the figure of the gap against parameters."""
    pytest.importorskip('matplotlib')
    docs = [1.0, 1.2, 1.5, 2.0, 2.2]
    for seed, gap in ((1, 0.03), (2, 0.01)):
        write_arm(tmp_path, 'rope', seed, 1.5, 1.6, docs)
        write_arm(tmp_path, 'pope', seed, 1.5 + gap, 1.6 + gap, docs)
        write_arm(tmp_path, 'rope-16m', seed, 2.0, 2.1, docs, params=16.1)
        write_arm(tmp_path, 'pope-16m', seed, 2.0 + 2 * gap, 2.1, docs, params=16.1)
    write_arm(tmp_path, 'rope-124m', 1, 1.3, 1.4, docs, params=123.6)
    write_arm(tmp_path, 'pope-124m', 1, 1.29, 1.41, docs, params=123.6)
    write_arm(tmp_path, 'pope-124m', 2, 1.28, 1.40, docs, params=123.6)  # no RoPE of its seed: no pair
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    section = page[page.index('## By model size'):]
    t = 0.04 / (math.sqrt(2) * 0.02 / math.sqrt(2))  # 16M: differences 0.06, 0.02, df 1
    assert (f'| 4 x 256 | 16.1M | 1, 2 | 2.0400 +- 0.0283 (2.0600, 2.0200) | 2.0000 +- 0.0000 (2.0000, 2.0000) '
            f'| +0.0400 +- 0.0283 | {1 - 2 / math.pi * math.atan(t):.3g} |') in section
    assert '| 8 x 512 | 50.9M | 1, 2 | 1.5200 +- 0.0141 (1.5300, 1.5100) |' in section
    assert '| 12 x 768 | 123.6M | 1 | 1.2900 (1.2900) | 1.3000 (1.3000) | -0.0100 | - (one pair) |' in section
    assert section.index('| 4 x 256 |') < section.index('| 8 x 512 |') < section.index('| 12 x 768 |')
    assert '| 2.1000 +- 0.0000 (2.1000, 2.1000) | +0.0000 +- 0.0000 | nan |' in section  # 16M test: no difference
    assert '124M 21.55 -> 21.33 (-0.0103); 253M 18.88 -> 18.55 (-0.0176); 774M 15.85 -> 15.45 (-0.0256)' in section
    inside = page[page.index('inside documents'):page.index('across documents')]
    assert '| RoPE 16M+YaRN s=10 (no fine-tune) (seeds 1, 2) | 2.0000 +- 0.0000' in inside
    assert '| PoPE 124M (seeds 1, 2) | 1.0000 +- 0.0000' in inside
    assert '| RoPE | 1.0000 +- 0.0000' in inside  # the 8 x 512 rows keep their names
    assert os.path.getsize(tmp_path / 'sizes.png') > 10000


def test_a_size_with_no_pair_says_so_and_draws_no_figure(tmp_path):
    pytest.importorskip('matplotlib')
    write_arm(tmp_path, 'pope-16m', 1, 2.0, 2.1, [1.0] * 5, params=16.1)  # no RoPE of its seed
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    assert 'No size has both encodings of one seed yet.' in page and 'sizes.png' not in page
    assert not (tmp_path / 'sizes.png').exists()


def test_an_ablation_with_no_pope_of_its_seed(tmp_path):
    """An ablation and a RoPE of its seed, no PoPE: no pair and no difference, its scores listed all the same; a
    folder named as no ablation is no arm's."""
    pytest.importorskip('matplotlib')
    write_arm(tmp_path, 'rope', 3, 1.48, 1.58, [1.0] * 5)
    write_arm(tmp_path, 'pope-relu', 3, 1.49, 1.61, [1.2] * 5)
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    assert 'No seed has pre-trained both arms yet.' in page and '| PoPE, ReLU | 3 | 1.4900 | 1.6100 | - | - |' in page
    assert '| PoPE, ReLU (seed 3) | 1.2000 (1.2000) |' in page and not (tmp_path / 'extrapolation.png').exists()
    os.rename(tmp_path / 'runs' / 'pope-relu_s3', tmp_path / 'runs' / 'pope-foo_s3')
    with pytest.raises(SystemExit, match=r"runs/pope-foo_s3 is not an arm's folder"):
        study.main([str(tmp_path)])


def test_no_arm_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match='no arm has pre-trained'):
        study.main([str(tmp_path)])


def test_a_partial_study_makes_its_page_and_damaged_arms_are_one_line(tmp_path):
    """Arms of one encoding only (no pair yet): the page without the paired tables; an arm's file missing or
    damaged, or a folder that is no arm's: one line naming it."""
    pytest.importorskip('matplotlib')
    write_arm(tmp_path, 'pope', 1, 1.5, 1.6, [1.0] * 5)
    write_arm(tmp_path, 'pope', 2, 1.5, 1.6, [1.0] * 5)
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    assert '| pope_s2 | 5000 | 164M |' in page and 'No seed has pre-trained both arms yet.' in page
    assert '| PoPE (seeds 1, 2) |' in page and 'RoPE (seeds' not in page
    assert not (tmp_path / 'extrapolation.png').exists()
    arm = tmp_path / 'runs' / 'pope_s2'
    for path, damage, why in ((arm / 'pretrain' / 'final.json', '{"iter": 50', 'JSONDecodeError'),
                              (arm / 'pretrain' / 'eval_log.jsonl', None, 'FileNotFoundError'),
                              (arm / 'documents' / 'extrapolation.json', '', 'JSONDecodeError'),
                              (arm / 'pretrain.log', 'config: config/linux_c_pope.py\n',
                               "no line '<n>M parameters, <pos_emb>, <n> tokens per iteration'")):
        kept = path.read_bytes()
        path.unlink() if damage is None else path.write_text(damage)
        with pytest.raises(SystemExit) as exit_:
            study.main([str(tmp_path)])
        assert exit_.value.code == (f"{path} is missing or damaged ({why}): start its arm again (bash "
                                    "results/linux_c/reproduce.sh start pope_s2), or move the arm's folder out of runs/")
        path.write_bytes(kept)
    os.rename(arm, tmp_path / 'runs' / 'pope_s2.old')
    with pytest.raises(SystemExit, match=r"runs/pope_s2.old is not an arm's folder \(<pope\|rope>_s<seed>"):
        study.main([str(tmp_path)])


def test_the_committed_study_page_is_what_the_script_makes_and_the_readme_quotes_it(tmp_path):
    """study.py remakes the committed page from runs/ and the frequency usage, and every loss (4 decimals) that the
    README's study section gives is on it."""
    pytest.importorskip('matplotlib')
    import glob
    import re
    import shutil
    folder = os.path.join(ROOT, 'results', 'linux_c')
    shutil.copytree(os.path.join(folder, 'runs'), tmp_path / 'runs')
    for path in glob.glob(os.path.join(folder, 'frequency_usage_s*.json')):
        shutil.copy(path, tmp_path)
    study.main([str(tmp_path)])
    made = (tmp_path / 'results.md').read_text().replace(str(tmp_path), 'results/linux_c')
    assert made == open(os.path.join(folder, 'results.md')).read()
    readme = open(os.path.join(folder, 'README.md')).read()
    quoted = re.findall(r'\d\.\d{4}', readme[readme.index('## The study: three pairs of seeds'):])
    missing = set(quoted) - set(re.findall(r'\d\.\d{4}', made))
    assert len(quoted) >= 25 and not missing, sorted(missing)
    # every published arm names the commit it ran at, one of this repository's (where its history is here)
    commits = re.findall(r'^\| \S+_s\d+ \|.* \| (\S+) \|$', made, re.M)
    assert len(commits) == len(os.listdir(tmp_path / 'runs')) and '-' not in commits, commits
    shallow = subprocess.run(['git', '-C', ROOT, 'rev-parse', '--is-shallow-repository'],
                             capture_output=True, text=True).stdout.strip()
    if shallow == 'false':  # (a checkout with its whole history)
        git = ['git', '-C', ROOT, 'cat-file', '-e']
        assert all(subprocess.run(git + [f'{c}^{{commit}}']).returncode == 0 for c in set(commits))


def test_the_frequency_usage_section_reads_each_seeds_pair(tmp_path):
    pytest.importorskip('matplotlib')
    write_arm(tmp_path, 'rope', 1, 1.5, 1.6, [1.0] * 5)
    write_arm(tmp_path, 'pope', 1, 1.5, 1.6, [1.0] * 5)
    # two layers; RoPE's queries lean on the high frequencies (index 0), PoPE's keys peak on the last one
    usage = {'RoPE': dict(tokens=65536, q=[[4, 2, 1, 1], [3, 1, 1, 1]], k=[[1, 1, 1, 1], [1, 1, 2, 2]]),
             'PoPE': dict(tokens=65536, q=[[1] * 8, [2] * 8], k=[[1] * 7 + [9], [1] * 8],
                          delta=[[[0.0, -0.5], [-0.05, 0.0]], [[0.0, 0.0], [-1.0, -0.2]]])}
    (tmp_path / 'frequency_usage_s1.json').write_text(json.dumps(usage))
    study.main([str(tmp_path)])
    page = (tmp_path / 'results.md').read_text()
    assert 'on the first 65,536 test tokens' in page and '4 frequencies; PoPE: softplus, 8)' in page
    assert '| RoPE | q | 1 | 2.00-3.00 | 2.00-2.00 | 0 0 |' in page  # (4+2)/(1+1) = 3, (3+1)/2 = 2; 4/2, 3/1.5
    assert '| RoPE | k | 1 | 0.50-1.00 | 1.00-1.33 | 0 2 |' in page
    assert '| PoPE | k | 1 | 0.33-1.00 | 1.00-4.50 | 7 0 |' in page  # 4 / 12 = 0.33 where the 9 is in the low half
    assert ('range [-1.000, 0.000], mean -0.219, 50% exactly 0, 38% below -0.1 rad' in page)
    assert os.path.getsize(tmp_path / 'frequency_usage.png') > 10000


def test_the_figures_draw_the_mean_of_the_paired_seeds_and_each_gap(tmp_path, monkeypatch):
    """extrapolation.png: each model's line the mean over the seeds with both arms (not an unpaired arm's);
    sizes.png: each seed's PoPE - RoPE val loss at its size's parameters, and the mean through them."""
    pytest.importorskip('matplotlib')
    drawn, real = {}, study.save_figure
    monkeypatch.setattr(study, 'save_figure', lambda fig, path, **kw: (drawn.update({os.path.basename(path): fig}),
                                                                        real(fig, path, **kw)))
    for seed, gap, docs in ((1, 0.03, [1.0, 1.2, 1.5, 2.0, 2.2]), (2, 0.01, [2.0, 2.2, 2.5, 3.0, 3.2])):
        write_arm(tmp_path, 'rope', seed, 1.5, 1.6, docs)
        write_arm(tmp_path, 'pope', seed, 1.5 + gap, 1.6, docs)
        write_arm(tmp_path, 'rope-16m', seed, 2.0, 2.1, docs, params=16.1)
        write_arm(tmp_path, 'pope-16m', seed, 2.0 - 2 * gap, 2.1, docs, params=16.1)
    write_arm(tmp_path, 'pope', 3, 9.0, 9.0, [9.0] * 5)  # no RoPE of its seed: in no line
    study.main([str(tmp_path)])
    lines = {line.get_label(): line for line in drawn['extrapolation.png'].axes[0].get_lines()}
    assert lines['PoPE'].get_xdata().tolist() == LENGTHS
    assert lines['PoPE'].get_ydata().tolist() == pytest.approx([1.5, 1.7, 2.0, 2.5, 2.7])
    assert lines['RoPE+YaRN s=10 (no fine-tune)'].get_ydata().tolist() == pytest.approx([2.5, 2.7, 3.0, 3.5, 3.7])
    ax = drawn['sizes.png'].axes[0]
    points = sorted(tuple(xy) for c in ax.collections for xy in c.get_offsets().tolist())
    assert [x for xy in points for x in xy] == pytest.approx([16.1, -0.06, 16.1, -0.02, 50.86, 0.01, 50.86, 0.03])
    mean = ax.get_lines()[0]
    assert mean.get_xdata().tolist() == [16.1, 50.86] and mean.get_ydata().tolist() == pytest.approx([-0.04, 0.02])
