"""Every config/*.py merges over train.py's defaults (with configurator.configure, as train.py) into keys and types that
train.py accepts, sets only what differs from the defaults (or from the config it starts from), and the merged
values of the experiment configs are the paper's (sections 2, 3, 4 and 6 of the paper)."""

import ast
import contextlib
import functools
import glob
import io
import os
import re

import pytest

from prepare.data import dataset_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, 'config', '*.py')))
INCLUDE = re.compile(r"exec\(open\('config/(\w+)\.py'\)\.read\(\)\)")  # a config that starts from another one


@functools.cache
def defaults():
    """train.py's defaults: its source from its top to `defaults` (imports and the assignments a reader sees),
    run here (importing train.py would train)."""
    tree = ast.parse(open(os.path.join(ROOT, 'train.py')).read())
    head = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'defaults':
            break
        head.append(node)
    else:
        raise AssertionError('train.py has no defaults')
    ns = {}
    exec(compile(ast.Module(head, type_ignores=[]), 'train.py', 'exec'), ns)
    return {k: v for k, v in ns.items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))}


@functools.cache
def merged(name=None, *overrides):
    """The config as train.py sees it: its defaults, then config/<name>.py (if any), then --key=value overrides
    (configurator.configure, which train.py runs)."""
    from configurator import configure
    config = dict(defaults())
    cwd = os.getcwd()
    os.chdir(ROOT)  # train.py runs from the repository root, and configs name each other from there
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            configure(config, ([f'config/{name}.py'] if name else []) + list(overrides))
    except SystemExit as e:  # configure() rejects unknown keys and wrong types with one line
        pytest.fail(f'{name}: {e}')
    finally:
        os.chdir(cwd)
    return config


def own_keys(name):
    """The keys config/<name>.py assigns itself (not through the config it starts from)."""
    tree = ast.parse(open(os.path.join(ROOT, 'config', f'{name}.py')).read())
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}


def base_of(name):
    """The config that config/<name>.py starts from, or None (train.py's defaults)."""
    m = INCLUDE.search(open(os.path.join(ROOT, 'config', f'{name}.py')).read())
    return m.group(1) if m else None


@pytest.mark.parametrize('name', NAMES)
def test_config_merges_and_only_overrides(name):
    cfg, base = merged(name), merged(base_of(name))
    assert cfg['out_dir'] != base['out_dir'], f'{name}: no out_dir of its own'
    for k in own_keys(name) - {'device', 'dtype'}:  # (their defaults depend on the machine)
        assert cfg[k] != base[k], f'{name}: {k} = {cfg[k]!r} restates config/{base_of(name) or "../train.py"}'
    if cfg['init_from'] not in ('scratch', 'resume'):  # a fine-tune: the architecture comes from the checkpoint
        ignored = own_keys(name) & {'n_layer', 'n_head', 'n_embd', 'bias', 'pos_base', 'pope_mu', 'pope_delta'}
        assert not ignored, f'{name}: sets {sorted(ignored)}, which init_from overwrites'
    from model import ENCODINGS, PoPEAttention
    if not issubclass(ENCODINGS[cfg['pos_emb']], PoPEAttention):
        pope_keys = own_keys(name) & {'pope_mu', 'pope_delta'}
        assert not pope_keys, f"{name}: {sorted(pope_keys)} are used by PoPE's encodings only"
    ds = cfg['dataset']
    # indirect_indexing's variants come from one generator; <script>_<tag>: prepare/<script>.py in a GGUF's tokens
    script = 'indirect_indexing' if ds.startswith('indirect_indexing') else dataset_script(ds)[0]
    assert os.path.exists(os.path.join(ROOT, 'prepare', f'{script}.py')), f'{name}: no prepare/{script}.py'
    assert cfg['n_embd'] % cfg['n_head'] == 0


def test_every_config_has_its_own_out_dir():
    out_dirs = [merged(n)['out_dir'] for n in NAMES]
    assert len(set(out_dirs)) == len(out_dirs), sorted(out_dirs)


# ----------------------------------------------------------------------------------------------------
# the paper's numbers as train.py keys ('batch' = batch_size x gradient_accumulation_steps, in sequences)

COMMON = dict(weight_decay=0.01, grad_clip=1.0, decay_lr=True)
INDIRECT = dict(COMMON, dataset='indirect_indexing', n_layer=8, n_head=8, n_embd=512, dropout=0.0, batch=64,
                learning_rate=2e-4, min_lr=2e-5, beta2=0.99, max_iters=100000, lr_decay_iters=100000,
                warmup_iters=4000, pope_delta='uniform', loss_on='target',
                block_size=48)  # the longest example (the paper's table says 40; see prepare/indirect_indexing.py)
MUSIC_GENOME = dict(weight_decay=0.01, grad_clip=1.0, decay_lr=True, pope_delta='uniform',
                final_weights='best')  # the paper reports the best test NLL: score the best checkpoint
MUSIC = {
    'jsb': dict(MUSIC_GENOME, dataset='jsb_chorales', n_embd=256, n_head=8, n_layer=6, block_size=2048, dropout=0.2,
                batch=4, learning_rate=6e-4, min_lr=6e-5, beta2=0.99, max_iters=3000, lr_decay_iters=3000,
                warmup_iters=10),
    'maestro': dict(MUSIC_GENOME, dataset='maestro', n_embd=384, n_head=8, n_layer=6, block_size=2048, dropout=0.1,
                    batch=16, learning_rate=6e-4, min_lr=6e-5, beta2=0.99, max_iters=60000, lr_decay_iters=60000,
                    warmup_iters=500),
    'genome': dict(MUSIC_GENOME, dataset='genome', n_embd=1024, n_head=16, n_layer=16, block_size=1000, dropout=0.1,
                   batch=64, learning_rate=2.5e-4, min_lr=2.5e-5, beta2=0.999, max_iters=100000,
                   lr_decay_iters=100000, warmup_iters=4000),
}
OWT = dict(COMMON, dataset='openwebtext', block_size=1024, dropout=0.0, batch=64, learning_rate=6e-4, min_lr=6e-5,
           beta2=0.95, max_iters=100000, lr_decay_iters=100000, warmup_iters=1000, pope_delta='zero',
           pope_mu='softplus')
SIZES = {'': (12, 12, 768, 124), '_253m': (16, 16, 1024, 253), '_774m': (36, 20, 1280, 774)}  # L, H, D, M params
FT = dict(dataset='openwebtext', block_size=4096, dropout=0.0, batch=64, learning_rate=6e-5, decay_lr=False,
          warmup_iters=20, max_iters=500)  # Figure 2: the architecture comes from the checkpoint
PAPER = {f'indirect_{pe}': dict(INDIRECT, pos_emb=pe)
         for pe in ('pope', 'rope', 'rope_half', 'alibi_half', 'learned', 'sinusoidal')}
for pe in ('pope', 'rope'):  # the same run on the rows of the public replication, over 200k steps (results/indirect_indexing/)
    PAPER[f'indirect_{pe}_leftpad'] = dict(INDIRECT, pos_emb=pe, dataset='indirect_indexing_leftpad', block_size=56,
                                           max_iters=200000, lr_decay_iters=200000)
for task, values in MUSIC.items():
    for pe in ('rope', 'pope'):
        PAPER[f'{task}_{pe}'] = dict(values, pos_emb=pe)
for size, (L, H, D, _) in SIZES.items():
    for pe in ('rope', 'pope'):
        PAPER[f'owt_{pe}{size}'] = dict(OWT, n_layer=L, n_head=H, n_embd=D, pos_emb=pe)
    pre = size.replace('_', '-')  # out_dir suffix of the pre-trained model: out-owt-pope-253m
    PAPER[f'owt_pope_ft{size}'] = dict(FT, pos_emb='pope', yarn_scale=1.0, init_from=f'out-owt-pope{pre}/ckpt.pt')
    PAPER[f'owt_rope_yarn_ft{size}'] = dict(FT, pos_emb='rope', yarn_scale=4.0, yarn_orig_ctx=1024,  # s = 4096 / 1024
                                            init_from=f'out-owt-rope{pre}/ckpt.pt')
# the ablations at 124M (section 4): the 124M PoPE run with one switch changed
PAPER['owt_pope_no_softplus'] = dict(PAPER['owt_pope'], pope_mu='identity')
PAPER['owt_pope_relu'] = dict(PAPER['owt_pope'], pope_mu='relu')
PAPER['owt_pope_no_delta'] = dict(PAPER['owt_pope'], pope_delta='none')


def mismatches(cfg, expected):
    got = dict(cfg, batch=cfg['batch_size'] * cfg['gradient_accumulation_steps'])
    return [f'{k} = {got[k]!r}, the paper: {v!r}' for k, v in expected.items() if got[k] != v]


# the language-modelling study on the Linux kernel's C at reduced scale (results/linux_c/): the paper's recipe where
# it applies (context, optimizer, schedule's shape, dropout, delta), its own size, steps and batch
LINUX_C = dict(OWT, dataset='linux_c', n_layer=8, n_head=8, n_embd=512, batch=32, max_iters=4600,
               lr_decay_iters=4600, warmup_iters=200)
REDUCED = {'linux_c_pope': dict(LINUX_C, pos_emb='pope'), 'linux_c_rope': dict(LINUX_C, pos_emb='rope'),
           'linux_c_pope_ft': dict(PAPER['owt_pope_ft'], dataset='linux_c', batch=2, init_from='out-linux-c-pope/ckpt.pt'),
           'linux_c_rope_yarn_ft': dict(PAPER['owt_rope_yarn_ft'], dataset='linux_c', batch=2,
                                        init_from='out-linux-c-rope/ckpt.pt')}


@pytest.mark.parametrize('name', sorted(REDUCED))
def test_reduced_scale_config_keeps_the_paper_recipe(name):
    assert not mismatches(merged(name), REDUCED[name]), f'{name}: {mismatches(merged(name), REDUCED[name])}'


@pytest.mark.parametrize('name', sorted(PAPER))
def test_config_matches_paper(name):
    cfg = merged(name)
    assert not mismatches(cfg, PAPER[name]), f'{name}: {mismatches(cfg, PAPER[name])}'
    if name.startswith('owt_') and '_ft' not in name:
        assert cfg['gradient_accumulation_steps'] % 8 == 0  # the 64 sequences divide over 8 GPUs
    if cfg['init_from'] != 'scratch':  # a fine-tune: the checkpoint it starts from is a paper config's
        pre = [n for n in PAPER if merged(n)['out_dir'] + '/ckpt.pt' == cfg['init_from']]
        assert len(pre) == 1 and merged(pre[0])['pos_emb'] == cfg['pos_emb'], (name, pre)


@pytest.mark.parametrize('name, override', [
    ('indirect_rope', '--min_lr=2e-4'), ('jsb_rope', '--warmup_iters=100'), ('genome_pope', '--batch_size=4'),
    ('maestro_pope', '--beta2=0.999'), ('owt_rope_774m', '--n_head=16'), ('owt_pope', '--pope_delta=uniform'),
    ('owt_rope_yarn_ft_253m', '--yarn_scale=2.0'), ('owt_pope_ft', '--decay_lr=True'),
    ('owt_pope_relu', '--pope_mu=softplus'), ('owt_pope_no_delta', '--pope_delta=zero')])
def test_a_wrong_value_is_caught(name, override):
    assert mismatches(merged(name, override), PAPER[name])


def test_experiment_configs_cover_the_paper():
    """Every experiment of the paper, and of the reduced-scale study, has its config; other configs may be added."""
    assert set(PAPER) | set(REDUCED) <= set(NAMES), sorted(set(PAPER) | set(REDUCED) - set(NAMES))


@pytest.mark.parametrize('size', list(SIZES))
def test_owt_parameter_count(size):
    torch = pytest.importorskip('torch')
    from model import GPT, GPTConfig
    for pe in ('rope', 'pope'):
        cfg = merged(f'owt_{pe}{size}')
        with torch.device('meta'):  # no memory, no init time
            model = GPT(GPTConfig(vocab_size=50304, **{k: cfg[k] for k in (
                'block_size', 'n_layer', 'n_head', 'n_embd', 'dropout', 'bias', 'pos_emb', 'pope_delta')}))
        n, target = model.get_num_params() / 1e6, SIZES[size][3]
        assert abs(n - target) / target < 0.02, f'owt_{pe}{size}: {n:.2f}M parameters, the paper says {target}M'


def test_reproduce_scripts_use_existing_configs_and_known_keys():
    # results/*/reproduce.sh: every --key=value they give train.py (on its line, or in a variable that line uses)
    # is a train.py key, and every config they name exists ($pe stands for rope and pope)
    scripts = glob.glob(os.path.join(ROOT, 'results', '*', 'reproduce*.sh'))
    assert len(scripts) >= 5
    keys, configs = set(), set()
    for script in scripts:
        code = ''.join(line for line in open(script) if not line.lstrip().startswith('#')).replace('\\\n', ' ')
        # train.py's own lines, and those of a script's function that runs it: train NAME CONFIG FLAGS...
        train_lines = [line for line in code.split('\n') if 'train.py' in line or re.match(r'\s*train ', line)]
        for name, value in re.findall(r'(\w+)="([^"]*)"', code, flags=re.DOTALL):
            if any('$' + name in line for line in train_lines):
                train_lines.append(value)
        for line in train_lines:
            keys |= set(re.findall(r'--(\w+)=', line.split('>')[0]))
        for c in re.findall(r'(config/[\w$]+\.py)', code):  # every config a script names, in a line or an echo
            configs |= {c.replace('$pe', pe).replace('$2', pe) for pe in ('rope', 'pope')}
    assert keys <= set(merged()), sorted(keys - set(merged()))
    assert len(configs) >= 10, configs  # quick start, indirect, shakespeare, fine-tunes, music and genome
    assert all(os.path.exists(os.path.join(ROOT, c)) for c in configs), configs


def test_the_models_defaults_are_train_pys():
    """One set of defaults: GPTConfig's fields default to train.py's values of the same keys."""
    from model import GPTConfig
    from dataclasses import fields
    model_defaults = {f.name: f.default for f in fields(GPTConfig)}
    shared = model_defaults.keys() & defaults().keys()
    assert len(shared) >= 17
    assert {k: model_defaults[k] for k in shared} == {k: defaults()[k] for k in shared}
