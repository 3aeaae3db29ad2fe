"""
train.py's configuration, nanoGPT's way: train.py's defaults, then config files (plain Python
assignments) and --key=value overrides in order, then (init_from='resume') the run's own config
where the command line does not change it. Every value is checked once against the tables below;
a bad one stops the run with one line. `python train.py --help` lists the keys.
"""

import math
import os
import re
import sys
import traceback
from argparse import ArgumentTypeError
from ast import literal_eval
from dataclasses import fields
from types import SimpleNamespace

import pretrained
from checkpoint import RunFolder
from eval import device_arg
from model import ABSOLUTE, GPTConfig
from prepare.data import SPLITS, remake_command

# keys of this command and machine, never taken from a checkpoint; and those resume may not change
MACHINE = ('backend', 'device', 'dtype', 'compile', 'cuda_graph', 'attn_impl')
LOCAL = ('out_dir', 'init_from', 'overwrite', 'eval_only') + MACHINE
MODEL_KEYS = tuple(f.name for f in fields(GPTConfig))
# the checks as data: keys of 1 or more, keys of 0 or more, keys of a few choices, and the rules
# between keys (what must hold of the config c, the line when it does not)
POSITIVE = ('eval_interval', 'log_interval', 'eval_iters', 'early_stop_evals', 'batch_size',
            'gradient_accumulation_steps', 'block_size', 'n_layer', 'n_head', 'n_embd')
NON_NEGATIVE = ('max_iters', 'warmup_iters', 'lr_decay_iters', 'min_lr', 'weight_decay',
                'grad_clip', 'divergence_margin', 'eval_context_tokens', 'seed')
CHOICES = {'loss_on': ('target', 'all'), 'final_weights': ('last', 'best'),
           'example_order': ('random', 'epochs'), 'dtype': ('float32', 'bfloat16', 'float16'),
           'weight_decay_on': ('matrices', 'all'), 'backend': ('nccl', 'gloo')}
RULES = [
    (lambda c: 0 <= c.dropout < 1, "dropout={dropout}: a probability in [0, 1) (0 = off)"),
    (lambda c: 1 < c.pos_base < math.inf,
     "pos_base={pos_base}: the frequency base is a number above 1, e.g. 10000.0"),
    (lambda c: c.yarn_scale > 0 and c.yarn_orig_ctx >= 1, "yarn_scale={yarn_scale}, "
     "yarn_orig_ctx={yarn_orig_ctx}: YaRN's scale is above 0 and its context 1 token or more"),
    (lambda c: not c.eval_only or c.init_from != 'scratch', "eval_only=True evaluates a "
     "checkpoint: add --init_from=resume (out_dir's ckpt.pt) or --init_from=<a ckpt.pt>"),
    (lambda c: 0 <= c.early_stop_acc <= 1,
     "early_stop_acc={early_stop_acc}: an accuracy in [0, 1] (0 = never stop early)"),
    (lambda c: c.seed < 2 ** 64, "seed={seed}: give a whole number below 2**64"),
    (lambda c: 0 < c.learning_rate < math.inf,
     "learning_rate={learning_rate}: must be a number above 0"),
    (lambda c: not c.decay_lr or c.min_lr <= c.learning_rate,
     "min_lr={min_lr} is above learning_rate={learning_rate}: the decay would raise the rate"),
    (lambda c: not c.decay_lr or c.warmup_iters < c.lr_decay_iters, "warmup_iters={warmup_iters} "
     "must be below lr_decay_iters={lr_decay_iters}, or use --decay_lr=False"),
    (lambda c: 0 <= c.beta1 < 1 and 0 <= c.beta2 < 1,
     "beta1={beta1}, beta2={beta2}: AdamW's betas lie in [0, 1)"),
    (lambda c: re.fullmatch(r'( *[1-9]\d* *(, *[1-9]\d* *)*)?,?', c.eval_contexts),
     "eval_contexts={eval_contexts!r}: give multiples of block_size, e.g. '1,2,4,8' ('' = off)"),
    (lambda c: not c.device.startswith('cpu') or c.attn_impl not in ('fused', 'triton'),
     "attn_impl={attn_impl!r} is PoPE's CUDA kernel: on the CPU use attn_impl='sdpa' (or 'auto')"),
]


def read(defaults, argv):
    """The run's config, merged and checked: (config, the keys the command line set, the run's
    RunFolder, the checkpoint init_from names or None)."""
    config = dict(defaults)
    given = configure(config, argv)
    resume_flags = [f'--{k}={config[k]}' for k in MACHINE if k in given]  # what going on needs
    run = RunFolder(config['out_dir'], resume_flags)
    checkpoint = run.start_from(config['init_from'], read=pretrained.read_source)  # read first
    if config['init_from'] == 'resume':
        resume(config, given, checkpoint, run.ckpt)
    check(config, given)
    return config, given, run, checkpoint


def configure(config, args):
    """Config files and --key=value overrides applied to config in place; returns the keys set."""
    if '-h' in args or '--help' in args:
        print(help_text(config))
        sys.exit(0)
    given = set()
    for arg in args:
        for key, val in read_override(arg, config) if arg.startswith('--') else read_file(arg):
            if key not in config:
                sys.exit(f"unknown config key '{key}' (in {arg}); valid keys: {', '.join(config)}")
            want = type(config[key])
            val = float(val) if want is float and type(val) is int else val
            if type(val) is not want:
                sys.exit(f"config key '{key}' wants {'an' if want is int else 'a'} "
                         f"{want.__name__}, got {val!r} (in {arg})")
            config[key] = val
            given.add(key)
    return given


def read_override(arg, config):
    """[(key, value)] of --key=value: a Python literal, or the text as written (a string key)."""
    key, eq, text = arg[2:].partition('=')
    if not eq:  # --key value: the value would be read as a config file
        sys.exit(f"{arg} has no value: write --{key}=VALUE, with '=' and no space "
                 "(e.g. --max_iters=100; --help lists the keys)")
    try:
        return [(key, text if isinstance(config.get(key), str) else literal_eval(text))]
    except (ValueError, SyntaxError):
        return [(key, text)]  # a bare string such as --dataset=shakespeare


def read_file(path):
    """The assignments of a config file, run in a scope of its own; one line if it cannot be."""
    print(f"config: {path}")
    if not os.path.isfile(path):
        why = "is a folder" if os.path.isdir(path) else "not found"
        hint = f"an override is written --{path.lstrip('-')}" if '=' in path else \
            "arguments are config files and --key=value overrides"
        sys.exit(f"config file {path} {why} ({hint})")
    assignments = "a config file holds Python assignments, e.g. n_layer = 8"
    try:
        code = compile(open(path, encoding='utf-8').read(), path, 'exec')
    except (UnicodeDecodeError, ValueError):  # (ValueError: a NUL byte)
        sys.exit(f"config file {path} is not text: {assignments}")
    except SyntaxError as err:
        sys.exit(f"config file {path}, line {err.lineno}: {err.msg}: {assignments}")
    scope = {}
    try:
        exec(code, scope)
    except SystemExit:  # (exit() in a config file would end the run silently)
        sys.exit(f"config file {path} called exit(): {assignments}")
    except Exception as err:  # the file's own code failed: its line, not ours
        frames = reversed(traceback.extract_tb(err.__traceback__))
        line = next((f.lineno for f in frames if f.filename == path), '?')
        sys.exit(f"config file {path}, line {line}: {type(err).__name__}: {err}")
    return [(k, v) for k, v in scope.items()
            if not k.startswith('_') and not callable(v) and type(v).__name__ != 'module']


def help_text(config):
    """Every key with its default and the comment beside it (or above it) in train.py."""
    text = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'train.py')).read()
    comments = {k: c for c, k in re.findall(r"^# (.*)\n(\w+) = ", text, re.M)}
    comments.update(re.findall(r"^(\w+) = .*?  # (.*)$", text, re.M))
    lines = [f"  {f'--{k}={v!r}':<34} {comments.get(k, '')}" for k, v in config.items()]
    return ("usage: python train.py [CONFIG_FILE ...] [--key=value ...]\n"
            "Config files (plain Python assignments) and --key=value overrides apply in the order\n"
            "given, over these defaults; with --init_from=resume the run's own config fills the\n"
            "keys the command line does not give.\n\n" + '\n'.join(lines))


def resume(config, given, checkpoint, init_path):
    """The checkpoint's config where the command line does not set it; the model and data stay."""
    saved = checkpoint.get('config', {})
    fine_tune = f"fine-tune from it with --init_from={init_path} and a new out_dir"
    unknown = sorted(set(saved) - set(config))
    if unknown:  # a checkpoint of another version: how it trained is not all here
        sys.exit(f"{init_path} was trained with {', '.join(unknown)}, which this train.py does not "
                 f"have: use the version that wrote it, or {fine_tune}")
    trained = {**saved, **checkpoint['model_args']}  # the model as its model_args say
    fixed = [k for k in MODEL_KEYS if k not in LOCAL] + [
        'dataset', 'loss_on', 'example_order', 'weight_decay_on']  # (the optimizer's groups)
    differ = [f"{k}={config[k]!r} (checkpoint: {trained[k]!r})" for k in fixed
              if k in given and k in trained and config[k] != trained[k]]
    if differ:
        sys.exit(f"init_from='resume' goes on with {init_path} as it was trained, but "
                 f"{', '.join(differ)}: drop these flags, or {fine_tune}")
    changed = [f"{k}={config[k]!r} (was {saved[k]!r})" for k in sorted(given - set(LOCAL))
               if k in saved and config[k] != saved[k]]
    config.update({k: v for k, v in saved.items() if k not in given | set(LOCAL)})
    if changed:
        print(f"resume: the config of {init_path}, but {', '.join(changed)}")


def model_args(config, given, checkpoint, meta):
    """The model's config: train.py's with the data set's vocabulary, a resumed run's own, or a
    fine-tune's (pretrained.fine_tune_args). config takes what trains."""
    args = {k: config[k] for k in MODEL_KEYS if k in config} | {'vocab_size': meta['vocab_size']}
    if checkpoint is not None and config['init_from'] == 'resume':
        args.update({k: v for k, v in checkpoint['model_args'].items() if k != 'attn_impl'})
    elif checkpoint is not None:
        args = pretrained.fine_tune_args(checkpoint, args, given, config['init_from'], meta,
                                         f"data/{config['dataset']}")
    config.update({k: args[k] for k in config.keys() & args.keys()})
    return args


def check(config, given):
    """Values that cannot work stop here, one line each. The CPU trains in float32."""
    c = SimpleNamespace(**config)
    bad = [f"{k}={config[k]}: must be 1 or more" for k in POSITIVE if config[k] < 1]
    bad += [f"{k}={config[k]}: must be a number, 0 or more" for k in NON_NEGATIVE
            if not 0 <= config[k] < math.inf]  # (NaN too)
    bad += [f"{k}={config[k]!r}: choose one of {', '.join(choices)}"
            for k, choices in CHOICES.items() if config[k] not in choices]
    bad += [line.format(**config) for holds, line in RULES if not holds(c)]
    world = int(os.environ.get('WORLD_SIZE', 1))  # torchrun's processes: the steps are shared
    if c.gradient_accumulation_steps % world:
        bad.append(f"gradient_accumulation_steps={c.gradient_accumulation_steps} counts "
                   f"micro-steps over all {world} processes: make it a multiple of {world}")
    if bad:  # (under torchrun by every process: the first to exit has the others stopped)
        sys.exit(bad[0])
    try:  # the device as sample.py and the eval tools check it
        device_arg(c.device)
    except ArgumentTypeError as err:
        sys.exit(f"device={err}" + (" (MPS has no float64, in which the model forms its phases)"
                                    if c.device.startswith('mps') else ""))
    try:
        GPTConfig(**{k: config[k] for k in MODEL_KEYS if k in config}).check()
    except ValueError as err:
        sys.exit(str(err))
    if c.device.startswith('cpu') and c.dtype != 'float32':  # no autocast on the CPU
        if 'dtype' in given:
            sys.exit(f"dtype={c.dtype!r} on the CPU: it trains in float32 there; use "
                     "--dtype=float32")
        config['dtype'] = 'float32'  # the GPU default, on a GPU machine run with --device=cpu
    if c.device.startswith('cpu') and c.backend == 'nccl':  # DDP on the CPU: NCCL is CUDA's
        config['backend'] = 'gloo'


def check_data(config, meta, data, ddp, checkpoint):
    """The config (and the checkpoint it starts from) against the data set and the machine."""
    c, examples, vocab = SimpleNamespace(**config), meta['kind'] == 'examples', meta['vocab_size']
    if checkpoint is not None:
        theirs, path = checkpoint['model_args']['vocab_size'], checkpoint['path']
        same = "train on the data set it was trained on (its config: dataset=" \
               f"{checkpoint.get('config', {}).get('dataset')!r})"
        if theirs != vocab:
            sys.exit(f"{path} has a vocabulary of {theirs} tokens, data/{c.dataset} one of "
                     f"{vocab}: {same}")
        itos = (checkpoint.get('meta') or {}).get('itos')
        if itos and meta.get('itos') and itos != meta['itos']:
            sys.exit(f"{path} was trained on a token list other than data/{c.dataset}'s (as many "
                     f"tokens, other ones or in another order): {same}")
    if c.yarn_scale != 1 and c.pos_emb not in ('rope', 'rope_half'):  # (the model's pos_emb)
        sys.exit(f"yarn_scale={c.yarn_scale} applies to RoPE alone (pos_emb={c.pos_emb!r}): leave "
                 "it at 1.0")
    if c.early_stop_acc and not examples:
        sys.exit(f"early_stop_acc={c.early_stop_acc} stops on val accuracy, which only data of "
                 f"examples has ({c.dataset} is a token stream): leave it at 0")
    if examples and c.block_size < meta['row_len'] - 1:
        sys.exit(f"block_size={c.block_size} is shorter than the examples of {c.dataset} "
                 f"({meta['row_len'] - 1} tokens)")
    unit = 'examples' if examples else 'tokens'
    for split in SPLITS:  # train and val are needed, test is scored where it exists
        n = 0 if data[split] is None else len(data[split])
        if n < (1 if examples else c.block_size + 1) and (split != 'test' or n):
            sys.exit(f"data/{c.dataset}/{split}.bin holds {n} {unit}, too few for block_size="
                     f"{c.block_size}: prepare the data again ({remake_command(c.dataset)}) or "
                     "lower block_size")
    if c.cuda_graph and (ddp or not c.device.startswith('cuda') or c.dtype == 'float16'
                         or c.gradient_accumulation_steps != 1 or not examples):
        sys.exit("cuda_graph=True needs one GPU, gradient_accumulation_steps=1, bfloat16 or "
                 "float32, and a data set kept on the GPU (kind 'examples')")


def context_lengths(config, meta, data):
    """(n_ctx, lengths, note): the lengths (multiples of block_size, eval_contexts) at which the
    val loss of stream data is scored, on its first n_ctx tokens (a multiple of the longest length:
    every length scores the same tokens); none for examples."""
    c = SimpleNamespace(**config)
    n_val = 0 if meta['kind'] == 'examples' else len(data['val']) - 1  # (the last: a target)
    n_ctx = min(c.eval_context_tokens, n_val)
    lengths = [int(m) * c.block_size for m in c.eval_contexts.split(',') if m.strip() and n_val]
    skipped = [L for L in lengths if L > c.block_size and c.pos_emb in ABSOLUTE]
    short = [L for L in lengths if L not in skipped and L > n_ctx]
    notes = [note for cut, note in (
        (skipped, f"{c.pos_emb} positions stop at block_size={c.block_size}: lengths {skipped}"),
        (short, f"{n_ctx} val tokens to score (eval_context_tokens or the split): lengths {short}"))
        if cut]
    note = 'eval_contexts: ' + '; '.join(f"{n} skipped" for n in notes) if notes else None
    lengths = [L for L in lengths if L not in skipped + short]
    longest = max(lengths, default=1)
    return n_ctx // longest * longest, lengths, note
