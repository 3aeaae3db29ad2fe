"""Every config/*.py loads with only keys that train.py accepts; the experiment configs match the paper
(paper-notes sections 3, 4, 6) and the OpenWebText ones build models of the stated size."""

import ast
import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'config', '*.py')))

# train.py's globals (the contract); used when train.py cannot be read
FALLBACK_KEYS = set('''out_dir eval_interval log_interval eval_iters eval_only always_save_checkpoint init_from
dataset gradient_accumulation_steps batch_size block_size n_layer n_head n_embd dropout bias pos_emb pos_base
pope_delta_init attn_impl yarn_scale yarn_orig_ctx learning_rate max_iters weight_decay beta1 beta2 grad_clip
decay_lr warmup_iters lr_decay_iters min_lr backend device dtype compile seed'''.split())


def train_keys():
    """The config keys of train.py: its top-level assignments before `config_keys = ...` (read with
    ast: importing train.py would start a training run)."""
    path = os.path.join(ROOT, 'train.py')
    if not os.path.exists(path):
        return FALLBACK_KEYS
    keys = set()
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == 'config_keys':
                return keys
            if not name.startswith('_'):
                keys.add(name)
    return FALLBACK_KEYS  # no config_keys line: train.py changed shape


VALID = train_keys()


def load(path):
    cfg = {}
    exec(open(path).read(), {}, cfg)
    return cfg


def name_of(path):
    return os.path.splitext(os.path.basename(path))[0]


def test_train_keys_cover_the_contract():
    assert FALLBACK_KEYS <= VALID


@pytest.mark.parametrize('path', CONFIGS, ids=name_of)
def test_config_has_only_valid_keys(path):
    cfg = load(path)
    unknown = set(cfg) - VALID
    assert not unknown, f'{name_of(path)}: keys train.py does not know: {sorted(unknown)}'
    for k, v in cfg.items():
        assert isinstance(v, (int, float, bool, str)), f'{k} = {v!r}: train.py takes int/float/bool/str'


# ----------------------------------------------------------------------------------------------------
# the experiment configs of this repository (indirect_* are tested with the indirect-indexing task)

OWT = {  # name: (n_layer, n_head, n_embd, pos_emb, millions of parameters)
    'owt_rope': (12, 12, 768, 'rope', 124), 'owt_pope': (12, 12, 768, 'pope', 124),
    'owt_rope_253m': (16, 16, 1024, 'rope', 253), 'owt_pope_253m': (16, 16, 1024, 'pope', 253),
    'owt_rope_774m': (36, 20, 1280, 'rope', 774), 'owt_pope_774m': (36, 20, 1280, 'pope', 774),
}
FT = {  # fine-tune config: pre-trained config
    'owt_rope_yarn_ft': 'owt_rope', 'owt_pope_ft': 'owt_pope',
    'owt_rope_yarn_ft_253m': 'owt_rope_253m', 'owt_pope_ft_253m': 'owt_pope_253m',
    'owt_rope_yarn_ft_774m': 'owt_rope_774m', 'owt_pope_ft_774m': 'owt_pope_774m',
}
# paper-notes section 3 table: dataset, (n_embd, n_head, n_layer), context, dropout, batch, lr, min_lr,
# beta2, iters, warmup
SECTION3 = {
    'jsb': ('jsb_chorales', (256, 8, 6), 2048, 0.2, 4, 6e-4, 6e-5, 0.99, 3000, 10),
    'maestro': ('maestro', (384, 8, 6), 2048, 0.1, 16, 6e-4, 6e-5, 0.99, 60000, 500),
    'genome': ('genome', (1024, 16, 16), 1000, 0.1, 64, 2.5e-4, 2.5e-5, 0.999, 100000, 4000),
}
OURS = [f'{p}_{pe}' for p in SECTION3 for pe in ('rope', 'pope')] + list(OWT) + list(FT) + \
    ['shakespeare_rope', 'shakespeare_pope']


def path_of(name):
    return os.path.join(ROOT, 'config', f'{name}.py')


@pytest.mark.parametrize('name', OURS)
def test_experiment_config_is_explicit_and_commented(name):
    path = path_of(name)
    assert os.path.exists(path), f'missing config/{name}.py'
    cfg = load(path)
    for k in ('n_layer', 'n_head', 'n_embd', 'pos_emb', 'dataset', 'out_dir', 'block_size', 'batch_size'):
        assert k in cfg, f'{name}: {k} not stated'
    assert cfg['out_dir'] == 'out-' + name.replace('_', '-')
    assert os.path.exists(os.path.join(ROOT, 'prepare', f'{cfg["dataset"]}.py')), 'no prepare script'
    assert cfg['n_embd'] % cfg['n_head'] == 0
    lines = open(path).read().splitlines()
    assert lines[0].startswith('# ') and 'paper' in lines[0].lower() or 'reduced-scale' in lines[0].lower()
    for line in lines:
        if '=' in line and not line.startswith('#'):
            assert '  # ' in line, f'{name}: value without a comment: {line}'
    if 'pope' in name:
        assert cfg['pos_emb'] == 'pope'
    else:
        assert cfg['pos_emb'] == 'rope'


@pytest.mark.parametrize('name', list(OWT))
def test_owt_config_matches_paper(name):
    cfg = load(path_of(name))
    L, H, D, pe, _ = OWT[name]
    assert (cfg['n_layer'], cfg['n_head'], cfg['n_embd'], cfg['pos_emb']) == (L, H, D, pe)
    assert cfg['dataset'] == 'openwebtext' and cfg['block_size'] == 1024 and cfg['dropout'] == 0.0
    assert cfg['batch_size'] * cfg['gradient_accumulation_steps'] == 64
    assert cfg['gradient_accumulation_steps'] % 8 == 0  # divisible over 8 GPUs
    assert (cfg['learning_rate'], cfg['min_lr'], cfg['warmup_iters']) == (6e-4, 6e-5, 1000)
    assert cfg['max_iters'] == cfg['lr_decay_iters'] == 100000
    assert (cfg['weight_decay'], cfg['grad_clip'], cfg['beta2']) == (0.01, 1.0, 0.95)
    assert cfg['pope_delta_init'] == 'zero' and cfg.get('decay_lr', True)


@pytest.mark.parametrize('name', list(FT))
def test_finetune_config_matches_paper(name):
    cfg, base = load(path_of(name)), load(path_of(FT[name]))
    assert cfg['init_from'] == base['out_dir'] + '/ckpt.pt'
    for k in ('n_layer', 'n_head', 'n_embd', 'pos_emb', 'dataset'):
        assert cfg[k] == base[k]
    assert cfg['block_size'] == 4096 and cfg['max_iters'] == 500 and cfg['warmup_iters'] == 20
    assert cfg['batch_size'] * cfg['gradient_accumulation_steps'] == 64
    assert cfg['learning_rate'] == 6e-5 and cfg['decay_lr'] is False
    if cfg['pos_emb'] == 'rope':
        assert (cfg['yarn_scale'], cfg['yarn_orig_ctx']) == (4.0, 1024)
    else:
        assert cfg.get('yarn_scale', 1.0) == 1.0


@pytest.mark.parametrize('name', [f'{p}_{pe}' for p in SECTION3 for pe in ('rope', 'pope')])
def test_section3_config_matches_paper(name):
    cfg = load(path_of(name))
    ds, (D, H, L), ctx, drop, batch, lr, min_lr, beta2, iters, warmup = SECTION3[name.split('_')[0]]
    assert cfg['dataset'] == ds
    assert (cfg['n_embd'], cfg['n_head'], cfg['n_layer']) == (D, H, L)
    assert cfg['block_size'] == ctx and cfg['dropout'] == drop
    assert cfg['batch_size'] * cfg['gradient_accumulation_steps'] == batch
    assert (cfg['learning_rate'], cfg['min_lr'], cfg['beta2']) == (lr, min_lr, beta2)
    assert (cfg['max_iters'], cfg['lr_decay_iters'], cfg['warmup_iters']) == (iters, iters, warmup)
    assert (cfg['weight_decay'], cfg['grad_clip'], cfg['pope_delta_init']) == (0.01, 1.0, 'uniform')


@pytest.mark.parametrize('name', list(OWT))
def test_owt_parameter_count(name):
    torch = pytest.importorskip('torch')
    from model import GPT, GPTConfig
    cfg = load(path_of(name))
    with torch.device('meta'):  # no memory, no init time
        model = GPT(GPTConfig(block_size=cfg['block_size'], vocab_size=50304, n_layer=cfg['n_layer'],
                              n_head=cfg['n_head'], n_embd=cfg['n_embd'], dropout=cfg['dropout'],
                              bias=cfg.get('bias', False), pos_emb=cfg['pos_emb'],
                              pope_delta_init=cfg['pope_delta_init']))
    n = model.get_num_params() / 1e6
    target = OWT[name][4]
    assert abs(n - target) / target < 0.02, f'{name}: {n:.2f}M parameters, paper says {target}M'


def test_run_all_uses_existing_configs_and_known_keys(tmp_path):
    # results/run_all.sh: every --key=value it passes is a train.py key (torchrun's own aside), and every
    # config its job stages name exists (DRY=1 prints the commands instead of running them)
    script = os.path.join(ROOT, 'results', 'run_all.sh')
    code = ''.join(line for line in open(script) if not line.lstrip().startswith('#'))
    keys = set(re.findall(r'--(\w+)=', code)) - {'nproc_per_node'}
    assert keys and keys <= VALID, sorted(keys - VALID)
    stages = ['lm', 'music', 'indirect', 'readings', 'probes', 'probes_more']
    p = subprocess.run(['bash', script, *stages], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, DRY='1', LOGS=str(tmp_path)), timeout=60)
    configs = set(re.findall(r'train\.py (config/\S+\.py)', p.stdout))
    assert len(configs) >= 14, p.stdout + p.stderr  # 6 indirect, 2 shakespeare, 2 fine-tunes, 6 music/genome
    assert all(os.path.exists(os.path.join(ROOT, c)) for c in configs), configs
