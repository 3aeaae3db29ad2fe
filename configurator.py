"""
train.py's configuration, nanoGPT's way: config files (plain Python assignments) and --key=value overrides over its
defaults, a resumed run's config merged in, and every value checked (a bad one stops the run with one line).
"""

import os
import sys
import traceback
from argparse import ArgumentTypeError
from ast import literal_eval
from dataclasses import fields
from types import SimpleNamespace

import torch

from eval import device_arg
from model import ABSOLUTE, WEIGHT_DECAY_ON, GPTConfig
from prepare.common import SPLITS, remake_command

# keys of this command and machine, never taken from a checkpoint; and those a resumed run may not change
MACHINE = ('backend', 'device', 'dtype', 'compile', 'cuda_graph', 'attn_impl')
LOCAL = ('out_dir', 'init_from', 'overwrite', 'eval_only') + MACHINE


def configure(config, args):
    """Apply config files and --key=value overrides in order to config (in place); the keys they set (for resume)."""
    given = set()
    for arg in args:
        if arg.startswith('--'):
            key, eq, text = arg[2:].partition('=')
            if not eq:  # --key value: the value would be read as a config file
                sys.exit(f"{arg} has no value: write --{key}=VALUE, with '=' and no space (e.g. --max_iters=100)")
            try:
                val = literal_eval(text)
            except (ValueError, SyntaxError):
                val = text  # a bare string such as --dataset=shakespeare
            if isinstance(config.get(key), str) and not isinstance(val, str):
                val = text  # a string key takes the text as written: --eval_contexts=1,2,4
            items = [(key, val)]
        else:  # a config file, run in a scope of its own: one line if it is missing, no text, does not parse or raises
            print(f"config: {arg}")
            if not os.path.isfile(arg):
                sys.exit(f"config file {arg} " + ("is a folder" if os.path.isdir(arg) else "not found")
                         + (f" (an override is written --{arg})" if '=' in arg else
                            " (arguments are config files and --key=value overrides)"))
            try:
                code = compile(open(arg, encoding='utf-8').read(), arg, 'exec')
            except UnicodeDecodeError:
                sys.exit(f"config file {arg} is not text: a config file holds Python assignments, e.g. n_layer = 8")
            except SyntaxError as err:
                sys.exit(f"config file {arg}, line {err.lineno}: {err.msg}: a config file holds Python assignments, "
                         "e.g. n_layer = 8")
            except ValueError as err:  # (a NUL byte)
                sys.exit(f"config file {arg} is not text ({err}): a config file holds Python assignments")
            scope = {}
            try:
                exec(code, scope)
            except Exception as err:  # the file's own code failed: its line, not ours
                line = next((f.lineno for f in reversed(traceback.extract_tb(err.__traceback__))
                             if f.filename == arg), '?')
                sys.exit(f"config file {arg}, line {line}: {type(err).__name__}: {err}")
            items = [(k, v) for k, v in scope.items()
                     if not k.startswith('_') and not callable(v) and type(v).__name__ != 'module']
        for key, val in items:
            if key not in config:
                sys.exit(f"unknown config key '{key}' (in {arg}); valid keys: {', '.join(config)}")
            want = type(config[key])
            if want is float and type(val) is int:
                val = float(val)
            if type(val) is not want:
                sys.exit(f"config key '{key}' wants {'an' if want is int else 'a'} {want.__name__}, got {val!r} "
                         f"(in {arg})")
            config[key] = val
            given.add(key)
    return given


def resume(config, given, checkpoint, init_path):
    """init_from='resume': the run goes on as it was, with its checkpoint's config where the command line does not
    change it; the command line may not change the model or the data."""
    saved = checkpoint.get('config', {})
    unknown = sorted(set(saved) - set(config))
    if unknown:  # a checkpoint of another version: how it trained is not all here
        sys.exit(f"{init_path} was trained with {', '.join(unknown)}, which this train.py does not have: use the "
                 f"version that wrote it, or fine-tune from it with --init_from={init_path} and a new out_dir")
    trained = {**saved, **checkpoint['model_args']}  # the model as its model_args say
    fixed = [f.name for f in fields(GPTConfig) if f.name in config and f.name not in LOCAL] + [
        'dataset', 'loss_on', 'example_order', 'weight_decay_on']  # (the optimizer's state keeps its groups' decay)
    differ = [f"{k}={config[k]!r} (checkpoint: {trained[k]!r})" for k in fixed
              if k in given and k in trained and config[k] != trained[k]]
    if differ:
        sys.exit(f"init_from='resume' goes on with {init_path} as it was trained, but {', '.join(differ)}: "
                 f"drop these flags, or fine-tune from it with --init_from={init_path} and a new out_dir")
    changed = [f"{k}={config[k]!r} (was {saved[k]!r})" for k in sorted(given - set(LOCAL))
               if k in saved and config[k] != saved[k]]
    config.update({k: v for k, v in saved.items() if k in config and k not in given and k not in LOCAL})
    if changed:
        print(f"resume: the config of {init_path}, but {', '.join(changed)}")


def check(config, given):
    """Values that cannot work stop here, one line each. On the CPU the run trains in float32 (config's dtype)."""
    c = SimpleNamespace(**config)
    for key in ('eval_interval', 'log_interval', 'eval_iters', 'early_stop_evals', 'batch_size',
                'gradient_accumulation_steps', 'block_size', 'n_layer', 'n_head', 'n_embd'):
        if config[key] < 1:
            sys.exit(f"{key}={config[key]}: must be 1 or more")
    if not 0 <= c.dropout < 1:
        sys.exit(f"dropout={c.dropout}: a probability in [0, 1) (0 = off)")
    if not c.yarn_scale > 0 or c.yarn_orig_ctx < 1:
        sys.exit(f"yarn_scale={c.yarn_scale}, yarn_orig_ctx={c.yarn_orig_ctx}: YaRN's scale is above 0 (1.0 = off) "
                 "and its pre-training context 1 token or more")
    if c.eval_only and c.init_from == 'scratch':
        sys.exit("eval_only=True evaluates a checkpoint: add --init_from=resume (out_dir's ckpt.pt) or "
                 "--init_from=<a ckpt.pt>")
    if not 0 <= c.early_stop_acc <= 1:
        sys.exit(f"early_stop_acc={c.early_stop_acc}: an accuracy in [0, 1] (0 = never stop early)")
    for key in ('max_iters', 'warmup_iters', 'lr_decay_iters', 'min_lr', 'weight_decay', 'grad_clip',
                'divergence_margin', 'eval_context_tokens', 'seed'):
        if config[key] < 0:
            sys.exit(f"{key}={config[key]}: must be 0 or more")
    if c.seed >= 2 ** 64:  # what torch.manual_seed takes
        sys.exit(f"seed={c.seed}: give a whole number below 2**64")
    if c.n_embd % c.n_head:
        sys.exit(f"n_embd={c.n_embd} is not a multiple of n_head={c.n_head} (each head gets n_embd // n_head channels)")
    if c.n_kv_head < 0 or c.n_kv_head and c.n_head % c.n_kv_head:
        sys.exit(f"n_kv_head={c.n_kv_head} must divide n_head={c.n_head} (0: as many key/value heads as query heads)")
    # the optimizer and its schedule
    if not c.learning_rate > 0:
        sys.exit(f"learning_rate={c.learning_rate}: must be above 0")
    if c.decay_lr and c.min_lr > c.learning_rate:
        sys.exit(f"min_lr={c.min_lr} is above learning_rate={c.learning_rate}: the cosine decay would raise the rate")
    if c.decay_lr and c.warmup_iters >= c.lr_decay_iters:
        sys.exit(f"warmup_iters={c.warmup_iters} must be below lr_decay_iters={c.lr_decay_iters} (the decay runs from "
                 "the one to the other), or use --decay_lr=False")
    if not (0 <= c.beta1 < 1 and 0 <= c.beta2 < 1):
        sys.exit(f"beta1={c.beta1}, beta2={c.beta2}: AdamW's betas lie in [0, 1)")
    for key, choices in (('loss_on', ('target', 'all')), ('final_weights', ('last', 'best')),
                         ('example_order', ('random', 'epochs')), ('dtype', ('float32', 'bfloat16', 'float16')),
                         ('weight_decay_on', WEIGHT_DECAY_ON)):
        if config[key] not in choices:
            sys.exit(f"{key}={config[key]!r}: choose one of {', '.join(choices)}")
    try:
        ctx_multiples = [int(m) for m in c.eval_contexts.split(',') if m.strip()]
    except ValueError:
        ctx_multiples = [0]
    if any(m < 1 for m in ctx_multiples):
        sys.exit(f"eval_contexts={c.eval_contexts!r}: give multiples of block_size, e.g. '1,2,4,8' ('' = off)")
    # the machine (the device as sample.py and the eval tools check it)
    try:
        device_arg(c.device)
    except ArgumentTypeError as err:
        sys.exit(f"device={err}" + (" (MPS has no float64, in which the model forms its phases)"
                                    if c.device.startswith('mps') else ""))
    device_type = torch.device(c.device).type
    if c.attn_impl == 'triton' and device_type == 'cpu':
        sys.exit("attn_impl='triton' is PoPE's CUDA kernel: on the CPU use attn_impl='sdpa' (or 'auto', which "
                 "picks it)")
    if device_type == 'cpu' and c.dtype != 'float32':  # the CPU trains in float32 (no autocast)
        if 'dtype' in given:
            sys.exit(f"dtype={c.dtype!r} on the CPU: it trains in float32 there; use --dtype=float32")
        config['dtype'] = 'float32'  # the GPU default, on a GPU machine run with --device=cpu


def check_data(config, meta, data, ddp, checkpoint):
    """The config (and the checkpoint to start from) against the data set, and cuda_graph against the machine."""
    c, examples, vocab_size = SimpleNamespace(**config), meta['kind'] == 'examples', meta['vocab_size']
    if checkpoint is not None and checkpoint['model_args']['vocab_size'] != vocab_size:
        sys.exit(f"{checkpoint['path']} has a vocabulary of {checkpoint['model_args']['vocab_size']} tokens, "
                 f"data/{c.dataset} one of {vocab_size}: train on the data set it was trained on (its config: "
                 f"dataset={checkpoint.get('config', {}).get('dataset')!r})")
    theirs = {} if checkpoint is None else checkpoint.get('meta') or {}
    if theirs.get('itos') and meta.get('itos') and theirs['itos'] != meta['itos']:  # as many tokens, other ones
        sys.exit(f"{checkpoint['path']} was trained on a token list other than data/{c.dataset}'s (as many tokens, "
                 f"other ones or in another order): train on the data set it was trained on (its config: "
                 f"dataset={checkpoint.get('config', {}).get('dataset')!r})")
    if c.early_stop_acc and not examples:
        sys.exit(f"early_stop_acc={c.early_stop_acc} stops on val accuracy, which only data of examples has "
                 f"({c.dataset} is a token stream): leave it at 0")
    if examples and c.block_size < meta['row_len'] - 1:
        sys.exit(f"block_size={c.block_size} is shorter than the examples of {c.dataset} ({meta['row_len'] - 1} "
                 "tokens)")
    for split in SPLITS:  # train and val are needed, test is scored where it exists
        n = 0 if data[split] is None else len(data[split])
        if n < (1 if examples else c.block_size + 1) and (split != 'test' or data[split] is not None):
            sys.exit(f"data/{c.dataset}/{split}.bin holds {n} {'examples' if examples else 'tokens'}, too few for "
                     f"block_size={c.block_size}: prepare the data again ({remake_command(c.dataset)}) or lower "
                     "block_size")
    if c.cuda_graph and (ddp or torch.device(c.device).type != 'cuda' or c.gradient_accumulation_steps != 1
                         or not examples or c.dtype == 'float16'):
        sys.exit("cuda_graph=True needs one GPU, gradient_accumulation_steps=1, bfloat16 or float32, and a data set "
                 "kept on the GPU (kind 'examples')")


def context_lengths(config, n_val):
    """(n_ctx, lengths, note) of the val loss at multiples of block_size (eval_contexts; stream data: n_val > 0), all
    on the same first n_ctx val tokens: absolute positions stop at block_size, and a length needs n_ctx tokens."""
    c = SimpleNamespace(**config)
    n_ctx = min(c.eval_context_tokens, n_val) if n_val else 0
    lengths = [int(m) * c.block_size for m in c.eval_contexts.split(',') if m.strip()] if n_val else []
    skipped = [L for L in lengths if L > c.block_size and c.pos_emb in ABSOLUTE]
    short = [L for L in lengths if L not in skipped and L > n_ctx]
    notes = [f"{c.pos_emb} positions stop at block_size={c.block_size}: lengths {skipped} skipped"] if skipped else []
    if short:
        notes.append(f"{n_ctx} val tokens to score (eval_context_tokens or the split): lengths {short} skipped")
    note = 'eval_contexts: ' + '; '.join(notes) if notes else None
    return n_ctx, [L for L in lengths if L not in skipped + short], note
