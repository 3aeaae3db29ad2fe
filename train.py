"""
Train a GPT with PoPE (or another position encoding). nanoGPT conventions:

    python train.py config/indirect_pope.py                  # one GPU (or the CPU)
    python train.py config/indirect_pope.py --batch_size=32   # a config file, then --key=value overrides
    python train.py --out_dir=out-indirect-pope --init_from=resume  # go on from its ckpt.pt, configured as it was
    torchrun --standalone --nproc_per_node=8 train.py config/owt_pope.py    # 8 GPUs (two nodes: README, Training)

Data comes from data/<dataset>/ as written by `python -m prepare.<dataset>`: token streams
(kind 'stream', random windows of block_size + 1) or fixed examples (kind 'examples', the
indirect-indexing task, accuracy on the target token, the loss too unless loss_on='all').

An out_dir holds one run (ckpt.pt, best.pt, eval_log.jsonl, final.json) and is locked while it runs (train.lock).
--init_from=resume goes on with the checkpoint's config; the command line may change it, but not the model or the
data (dataset, loss_on, example_order). Bad values, damaged data, a failed save and Ctrl-C stop with one line that
says what is kept and what to do.
"""

import fcntl
import json
import math
import os
import pathlib
import shlex
import shutil
import signal
import socket
import sys
import time
from ast import literal_eval
from contextlib import nullcontext, suppress
from dataclasses import fields

import numpy as np
import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

import pretrained
from model import GPT, GPTConfig, read_checkpoint
from prepare import indirect_indexing, shakespeare_char
from prepare.common import SPLITS, example_batch, pass_rows

# -----------------------------------------------------------------------------
# default config: the paper's indirect-indexing run with PoPE (a config file, then --key=value, override it)
# I/O
out_dir = 'out'  # checkpoint, eval log and final results go here
eval_interval = 2000  # iterations between evaluations (and checkpoints)
log_interval = 100  # iterations between log lines
eval_iters = 100  # batches per train/val loss estimate (indirect indexing's val/test use the whole split)
eval_only = False  # evaluate once and exit
final_weights = 'last'  # final.json scores the 'last' weights (indirect indexing) or the 'best' (best.pt, lowest val)
divergence_margin = 3.0  # stop (saving nothing) when val loss exceeds the best so far by this many nats (0 = never)
eval_contexts = '1,2,4,8'  # stream data: val loss also at these multiples of block_size (extrapolation); '' = off
eval_context_tokens = 65536  # val tokens scored at each of those lengths (the same tokens, non-overlapping windows)
early_stop_acc = 0.0  # examples: end the run once val accuracy has been >= this at early_stop_evals evaluations in
early_stop_evals = 2  # a row (checkpoint saved, the stop in final.json); 0.0 = never. Test accuracy never decides
init_from = 'scratch'  # 'scratch', 'resume' (out_dir/ckpt.pt), a ckpt.pt to fine-tune from, or GPT-2 (pretrained.py)
overwrite = False  # a scratch run may replace the checkpoints and logs of an earlier run in out_dir
# data
dataset = 'indirect_indexing'  # folder under data/
gradient_accumulation_steps = 1  # micro-steps per optimizer step, summed over all GPUs
batch_size = 64  # sequences per micro-step and GPU
block_size = 48  # context length in tokens
loss_on = 'target'  # examples: train on the 'target' token alone (the paper) or on 'all' next tokens (val/test: target)
example_order = 'random'  # examples: 'random' rows, drawn with replacement; 'epochs': each pass over the split in a
# new order, so that no row comes twice within a pass
# model
n_layer = 8
n_head = 8
n_kv_head = 0  # key/value heads (grouped-query attention; must divide n_head); 0 = n_head
n_embd = 512
dropout = 0.0  # on embeddings and residual branches
bias = False  # biases in Linear layers (and LayerNorm)
norm = 'rmsnorm'  # 'rmsnorm' (the paper) or 'layernorm'
tie_embeddings = True  # the output layer shares the token embedding's weights
init = 'gpt2'  # 'gpt2' (N(0, 0.02), residual projections / sqrt(2 n_layer)) or 'torch' (PyTorch's defaults)
pos_emb = 'pope'  # pope, rope, rope_half, alibi_half, learned, sinusoidal, none
pos_base = 10000.0  # frequency base of pope / rope
pope_mu = 'softplus'  # PoPE's magnitude mu(x): 'softplus' (the paper), or its ablations 'relu' and 'identity' (mu = x)
pope_delta = 'uniform'  # PoPE's delta, learned from init 'uniform' in [-2pi, 0] or 'zero'; 'none': no delta (ablation)
attn_impl = 'auto'  # PoPE: auto (pope_kernel's measured fastest path on CUDA, else sdpa), torch, sdpa, triton
yarn_scale = 1.0  # YaRN scale s for RoPE models (1.0 = off)
yarn_orig_ctx = 1024  # pre-training context of a YaRN-extended RoPE model
# AdamW
learning_rate = 2e-4  # peak learning rate
max_iters = 100000  # optimizer steps in all
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0  # clip the gradient norm at this value (0 = off)
# learning-rate schedule: linear warmup, then cosine to min_lr
decay_lr = True  # False: constant learning_rate after warmup
warmup_iters = 4000
lr_decay_iters = 100000  # ~ max_iters, per Chinchilla
min_lr = 2e-5  # ~ learning_rate / 10, per Chinchilla
# system
backend = 'nccl'  # DDP backend ('gloo' with --device=cpu: DDP on the CPU, as the tests do)
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # 'cpu', 'cuda', 'cuda:1'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'  # autocast dtype
compile = False  # torch.compile the model
cuda_graph = False  # replay the whole training step as one CUDA graph (one GPU, data on the GPU: indirect_indexing)
seed = 1337  # model init and batch order
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
given = set()  # the keys that a config file or an override set (resume checks them against the checkpoint)
# keys of this command and machine, never taken from a checkpoint; and those a resumed run may not change
MACHINE = ('backend', 'device', 'dtype', 'compile', 'cuda_graph', 'attn_impl')
LOCAL = ('out_dir', 'init_from', 'overwrite', 'eval_only') + MACHINE
FIXED = [f.name for f in fields(GPTConfig) if f.name in config_keys and f.name not in LOCAL] + [
    'dataset', 'loss_on', 'example_order']


def configure(args):
    """Apply config files (plain Python assignments) and --key=value overrides, in order."""
    for arg in args:
        if arg.startswith('--'):
            key, _, text = arg[2:].partition('=')
            try:
                val = literal_eval(text)
            except (ValueError, SyntaxError):
                val = text  # a bare string such as --dataset=shakespeare
            if isinstance(globals().get(key), str) and not isinstance(val, str):
                val = text  # a string key takes the text as written: --eval_contexts=1,2,4
            items = [(key, val)]
        else:
            if not os.path.exists(arg):
                sys.exit(f"config file {arg} not found (arguments are config files and --key=value overrides)")
            print(f"config: {arg}")
            scope = {}
            exec(open(arg).read(), scope)
            items = [(k, v) for k, v in scope.items()
                     if not k.startswith('_') and not callable(v) and type(v).__name__ != 'module']
        for key, val in items:
            if key not in config_keys:
                sys.exit(f"unknown config key '{key}' (in {arg}); valid keys: {', '.join(config_keys)}")
            want = type(globals()[key])
            if want is float and type(val) is int:
                val = float(val)
            if type(val) is not want:
                sys.exit(f"config key '{key}' wants a {want.__name__}, got {val!r} (in {arg})")
            globals()[key] = val
            given.add(key)


configure(sys.argv[1:])  # train.py is a script: it reads its arguments and trains, imported or run
if not out_dir.strip():
    sys.exit("out_dir is empty: name the run's folder, e.g. --out_dir=out-myrun")
# out_dir holds one run: ckpt.pt (its latest state), best.pt (its best val loss), eval_log.jsonl, final.json
run_files = [os.path.join(out_dir, f) for f in ('ckpt.pt', 'best.pt', 'eval_log.jsonl', 'final.json')]
ckpt_path, best_path, log_path, final_path = run_files
saved_iter = None  # the iteration of this run's ckpt.pt on disk, once there is one
# a checkpoint to start from is read first, before anything in out_dir changes
checkpoint = None
if init_from != 'scratch':
    init_path = ckpt_path if init_from == 'resume' else init_from
    # a ckpt.pt, or GPT-2 by name or in a Hugging Face folder (pretrained.py); on the CPU: the model and the optimizer
    # take it to the device
    checkpoint = read_checkpoint(init_path) if init_from == 'resume' else pretrained.read_source(init_path)
    if init_from == 'resume':  # the run goes on as it was: its config, where the command line does not change it
        saved, saved_iter = checkpoint.get('config', {}), checkpoint['iter_num']
        if saved.get('delta_lr_mult', 1.0) != 1.0:  # an earlier version's probe
            sys.exit(f"{init_path} trained delta at delta_lr_mult={saved['delta_lr_mult']}, which train.py no longer "
                     f"has: fine-tune from it with --init_from={init_path} and a new out_dir")
        trained = {**saved, **checkpoint['model_args']}  # the model as its model_args say
        differ = [f"{k}={globals()[k]!r} (checkpoint: {trained[k]!r})" for k in FIXED
                  if k in given and k in trained and globals()[k] != trained[k]]
        if differ:
            sys.exit(f"init_from='resume' goes on with {init_path} as it was trained, but {', '.join(differ)}: "
                     f"drop these flags, or fine-tune from it with --init_from={init_path} and a new out_dir")
        changed = [f"{k}={globals()[k]!r} (was {saved[k]!r})" for k in sorted(given - set(LOCAL))
                   if k in saved and globals()[k] != saved[k]]
        globals().update({k: v for k, v in saved.items() if k in config_keys and k not in given and k not in LOCAL})
        if changed:
            print(f"resume: the config of {init_path}, but {', '.join(changed)}")
    elif os.path.realpath(init_path) in map(os.path.realpath, run_files):
        sys.exit(f"init_from={init_from} is a file of out_dir={out_dir}, which a new run there replaces: fine-tune "
                 "into another --out_dir (or go on with that run: --init_from=resume)")
# values that cannot work stop here, one line each
for key in ('eval_interval', 'log_interval', 'eval_iters', 'early_stop_evals', 'batch_size', 'gradient_accumulation_steps', 'block_size',
            'n_layer', 'n_head', 'n_embd'):
    if globals()[key] < 1:
        sys.exit(f"{key}={globals()[key]}: must be 1 or more")
if not 0 <= early_stop_acc <= 1:
    sys.exit(f"early_stop_acc={early_stop_acc}: an accuracy in [0, 1] (0 = never stop early)")
for key in ('max_iters', 'warmup_iters', 'lr_decay_iters', 'min_lr', 'weight_decay', 'grad_clip', 'divergence_margin',
            'eval_context_tokens', 'seed'):
    if globals()[key] < 0:
        sys.exit(f"{key}={globals()[key]}: must be 0 or more")
if n_embd % n_head:
    sys.exit(f"n_embd={n_embd} is not a multiple of n_head={n_head} (each head gets n_embd // n_head channels)")
if n_kv_head < 0 or n_kv_head and n_head % n_kv_head:
    sys.exit(f"n_kv_head={n_kv_head} must divide n_head={n_head} (0: as many key/value heads as query heads)")
# the optimizer and its schedule
if not learning_rate > 0:
    sys.exit(f"learning_rate={learning_rate}: must be above 0")
if decay_lr and min_lr > learning_rate:
    sys.exit(f"min_lr={min_lr} is above learning_rate={learning_rate}: the cosine decay would raise the rate")
if decay_lr and warmup_iters >= lr_decay_iters:
    sys.exit(f"warmup_iters={warmup_iters} must be below lr_decay_iters={lr_decay_iters} (the decay runs from the one "
             "to the other), or use --decay_lr=False")
if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
    sys.exit(f"beta1={beta1}, beta2={beta2}: AdamW's betas lie in [0, 1)")
for key, choices in (('loss_on', ('target', 'all')), ('final_weights', ('last', 'best')),
                     ('example_order', ('random', 'epochs')),
                     ('dtype', ('float32', 'bfloat16', 'float16'))):
    if globals()[key] not in choices:
        sys.exit(f"{key}={globals()[key]!r}: choose one of {', '.join(choices)}")
try:
    ctx_multiples = [int(m) for m in eval_contexts.split(',') if m.strip()]
except ValueError:
    ctx_multiples = [0]
if any(m < 1 for m in ctx_multiples):
    sys.exit(f"eval_contexts={eval_contexts!r}: give multiples of block_size, e.g. '1,2,4,8' ('' = off)")
# the machine
try:
    device_type = torch.device(device).type
except RuntimeError:  # not a device string at all
    device_type = None
if device_type not in ('cpu', 'cuda'):
    sys.exit(f"device={device!r}: use cpu, cuda or cuda:<n>"
             + (" (MPS has no float64, in which the model forms its phases)" if device_type == 'mps' else ""))
if device_type == 'cuda' and (torch.device(device).index or 0) >= torch.cuda.device_count():
    sys.exit(f"device={device!r}, but torch finds " + (f"{torch.cuda.device_count()} CUDA GPUs here"
             if torch.cuda.device_count() else "no CUDA GPU here: use --device=cpu"))
if attn_impl == 'triton' and device_type == 'cpu':
    sys.exit("attn_impl='triton' is PoPE's CUDA kernel: on the CPU use attn_impl='sdpa' (or 'auto', which picks it)")
if device_type == 'cpu' and dtype != 'float32':  # the CPU trains in float32 (no autocast)
    if 'dtype' in given:
        sys.exit(f"dtype={dtype!r} on the CPU: it trains in float32 there; use --dtype=float32")
    dtype = 'float32'  # the GPU default, on a GPU machine run with --device=cpu
config = {k: globals()[k] for k in config_keys}  # for logging and the checkpoint
# -----------------------------------------------------------------------------
# distributed setup, as nanoGPT
ddp = int(os.environ.get('RANK', -1)) != -1
if ddp:
    init_process_group(backend=backend)
    ddp_rank, ddp_local_rank = int(os.environ['RANK']), int(os.environ['LOCAL_RANK'])
    ddp_world_size = int(os.environ['WORLD_SIZE'])
    if device != 'cpu':  # one GPU per process
        device = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(device)
    if gradient_accumulation_steps % ddp_world_size:
        sys.exit(f"gradient_accumulation_steps={gradient_accumulation_steps} counts micro-steps over all "
                 f"{ddp_world_size} processes: make it a multiple of {ddp_world_size}")
    gradient_accumulation_steps //= ddp_world_size
else:
    ddp_rank, ddp_local_rank, ddp_world_size = 0, 0, 1
master_process = ddp_rank == 0
torch.manual_seed(seed)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.autocast(device_type=device_type, dtype=ptdtype)
lock = None  # out_dir/train.lock, held by this run (flock: until its process ends, however it ends)


def lock_out_dir():
    """Lock out_dir for this run, making it if it is new; a second run into it stops with one line naming this one."""
    global lock
    try:
        os.makedirs(out_dir, exist_ok=True)
        lock = open(os.path.join(out_dir, 'train.lock'), 'a+')
    except OSError as err:
        sys.exit(f"out_dir={out_dir!r}: cannot write there ({err.strerror}): choose another --out_dir")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        sys.exit(f"{out_dir} is in use by another run ({lock.read().strip() or 'starting'}): let it finish, or "
                 "choose another --out_dir")
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M')}: "
               f"{shlex.join(sys.argv)}\n")
    lock.flush()


if master_process and os.path.isdir(out_dir):  # a busy out_dir stops a run at once; a new one is made only when
    lock_out_dir()  # the run starts training (a run that stops before leaves nothing behind)
if init_from != 'resume' and not overwrite and (os.path.exists(ckpt_path) or os.path.exists(best_path)):
    sys.exit(f"{out_dir} holds the checkpoint of an earlier run: continue it with --init_from=resume, "
             f"choose another --out_dir, or replace it with --overwrite=True")


def last_good():
    """Where the run's last good state is, and the command that goes on from it."""
    if saved_iter is None:
        return "no checkpoint of this run was saved"
    launch = ['torchrun', f'--nproc_per_node={ddp_world_size}'] if ddp else ['python']
    flags = [f'--{k}={globals()[k]}' for k in MACHINE if k in given]  # the rest comes from the checkpoint
    again = shlex.join(launch + ['train.py', f'--out_dir={out_dir}', '--init_from=resume'] + flags)
    return f"{ckpt_path} (iter {saved_iter}) is intact; go on with: {again}"


saving_checkpoint = ctrl_c_waiting = False  # a Ctrl-C during ckpt.pt's save and saved_iter's update waits for both


def interrupted(signum, frame):
    """Ctrl-C: one line that says what is kept, no traceback; a save it cut short leaves no partial file. While
    ckpt.pt is saved, the first Ctrl-C waits for the save to end, so that the line names the file on disk (a second
    one stops at once)."""
    global ctrl_c_waiting
    if saving_checkpoint and not ctrl_c_waiting:
        ctrl_c_waiting = True
        return
    if master_process:
        for path in run_files:
            with suppress(OSError):
                os.remove(path + '.tmp')
        print(f"interrupted: {last_good()}", file=sys.stderr)
    sys.exit(130)


signal.signal(signal.SIGINT, interrupted)

# -----------------------------------------------------------------------------
# data
data_dir = os.path.join('data', dataset)
meta_path = os.path.join(data_dir, 'meta.json')
remake = (f"python -m prepare.indirect_indexing --variant={dataset}" if dataset in indirect_indexing.VARIANTS
          else f"python -m prepare.{dataset}")  # the command that makes (or remakes) the data set
if master_process and not os.path.exists(meta_path):  # two data sets are made here on first use, in seconds
    if dataset in indirect_indexing.VARIANTS:
        indirect_indexing.prepare(data_dir, variant=dataset)  # generated, deterministic: no download
    elif dataset == 'shakespeare_char':
        shakespeare_char.prepare(data_dir)  # from the text committed in prepare/texts/
if ddp:
    torch.distributed.barrier()
if not os.path.exists(meta_path):
    sys.exit(f"no data in {data_dir}: run `{remake}` first (see README, Experiments)")
try:
    with open(meta_path) as f:
        meta = json.load(f)
    examples = meta['kind'] == 'examples'
    vocab_size, token_dtype = meta['vocab_size'], np.dtype(meta['dtype'])
    row, pad_id = (meta['row_len'], meta['pad_id']) if examples else (1, None)  # row: tokens per example
except (ValueError, KeyError, TypeError) as err:
    sys.exit(f"{meta_path} is damaged or incomplete ({type(err).__name__}: {err}): run `{remake}` again")


def read_split(path):
    """A split's tokens (a memmap), checked against meta.json: its size, and the token ids (all of them, or beyond
    2^24 tokens 256 stretches of 2^16 spread over the file: another dtype or vocabulary shows everywhere)."""
    n_bytes, counted = os.path.getsize(path), meta.get('tokens', {}).get(os.path.basename(path)[:-len('.bin')])
    n = n_bytes // token_dtype.itemsize
    if n_bytes % (token_dtype.itemsize * row):
        problem = f"{n_bytes} bytes, not a whole number of " + (f"{row}-token rows" if examples else "tokens")
    elif counted is not None and n != counted:
        problem = f"{n:,} tokens where meta.json says {counted:,}"
    else:
        tokens = np.memmap(path, dtype=token_dtype, mode='r') if n else np.zeros(0, token_dtype)
        seen = tokens if n <= 1 << 24 else np.concatenate(
            [tokens[i:i + 65536] for i in np.linspace(0, n - 65536, 256, dtype=np.int64)])
        top = int(seen.max()) if n else 0
        problem = f"token id {top} where the vocabulary has {vocab_size}" if top >= vocab_size else None
    if problem:
        sys.exit(f"{path} holds {problem} ({token_dtype} tokens): the data is damaged or of another preparation; "
                 f"run `{remake}` again")
    return tokens


data = {}  # split -> its tokens (a memmap), its examples (a tensor on the device), or None where the split is missing
for split in SPLITS:
    path = os.path.join(data_dir, f'{split}.bin')
    data[split] = read_split(path) if os.path.exists(path) else None
    if examples and data[split] is not None:  # one example a row, padded; the target is its last real token
        # kept in the file's dtype (uint8 here: 12.8M rows are 0.6 GB), made int64 a batch at a time
        data[split] = torch.from_numpy(np.array(data[split]).reshape(-1, meta['row_len'])).to(device)


def batch_from(split, ix, all_tokens=False):
    """Inputs and targets at ix, targets -1 ignored (examples: all but the target, or with all_tokens the padding)."""
    if examples:
        return example_batch(data[split][ix], pad_id, all_tokens)
    d = data[split]
    x = torch.stack([torch.from_numpy(d[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(d[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    if device_type == 'cuda':
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


def sample_ix(split, step, purpose=0):
    """Batch positions that depend only on (seed, rank, split, purpose, step): resuming replays them. Random, or
    (training on examples with example_order='epochs') the next batch_size rows of a pass over the split."""
    n = len(data[split]) if examples else len(data[split]) - block_size
    if examples and example_order == 'epochs' and purpose == 0:
        draws = (step * ddp_world_size + ddp_rank) * batch_size + np.arange(batch_size)  # numbered over all ranks
        ix = pass_rows(n, (seed, SPLITS.index(split)), draws)
    else:
        rng = np.random.default_rng((seed, ddp_rank, SPLITS.index(split), purpose, step))
        ix = rng.integers(0, n, batch_size)
    return torch.from_numpy(ix).to(device, non_blocking=True) if examples else ix  # (a pageable copy: no sync)


@torch.no_grad()
def evaluate(split, whole=False, rows=None):
    """{split}_loss per target token (and {split}_acc for examples), on eval_iters fixed batches or the whole split
    (examples: or its first `rows` rows)."""
    eval_model.eval()
    if whole:
        n = min(rows or len(data[split]), len(data[split])) if examples else (len(data[split]) - 1) // block_size
        starts = np.arange(n) if examples else np.arange(n) * block_size
        bs = 16 * batch_size if examples else batch_size  # examples are short: big batches
        chunks = np.array_split(starts, max(1, math.ceil(n / bs)))
        batches = (torch.from_numpy(ix).to(device) if examples else ix for ix in chunks)
    else:
        batches = (sample_ix(split, k, purpose=1) for k in range(eval_iters))
    loss_sum, correct, count = 0.0, 0, 0
    for ix in batches:
        x, y = batch_from(split, ix)
        with ctx:
            logits, loss = eval_model(x, y)
        n_tok = (y != -1).sum()
        loss_sum, count = loss_sum + loss.float() * n_tok, count + n_tok
        correct = correct + (logits.argmax(-1) == y).sum()
    eval_model.train()
    out = {f'{split}_loss': (loss_sum / count).item()}  # one host sync per evaluation
    if examples:
        out[f'{split}_acc'] = (correct / count).item()
    return out


def get_lr(it):
    if it < warmup_iters:  # linear warmup
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if not decay_lr:
        return learning_rate
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


# -----------------------------------------------------------------------------
# model, optimizer, resume
model_args = {f.name: config[f.name] for f in fields(GPTConfig) if f.name in config}  # the model's config keys
model_args['vocab_size'] = meta['vocab_size']  # the one field of GPTConfig that the data set gives
iter_num, best_val_loss = 0, 1e9
log_lines = []  # eval_log.jsonl, rewritten whole (and atomically) at every evaluation
if checkpoint is not None:
    if init_from != 'resume':  # its architecture; this run's context, dropout...; a new encoding converts it
        model_args = pretrained.fine_tune_args(checkpoint, model_args, given, init_from, meta, data_dir)
    if checkpoint['model_args']['vocab_size'] != vocab_size:
        sys.exit(f"{init_path} has a vocabulary of {checkpoint['model_args']['vocab_size']} tokens, {data_dir} one of "
                 f"{vocab_size}: train on the data set it was trained on (its config: dataset="
                 f"{checkpoint.get('config', {}).get('dataset')!r})")
    if init_from == 'resume':  # the run goes on with the checkpoint's model
        model_args.update({k: v for k, v in checkpoint['model_args'].items() if k != 'attn_impl'})
for k in config.keys() & model_args.keys():  # the model actually trained, in the log, the checkpoint and final.json
    config[k] = globals()[k] = model_args[k]
if early_stop_acc and not examples:
    sys.exit(f"early_stop_acc={early_stop_acc} stops on val accuracy, which only data of examples has ({dataset} is a "
             "token stream): leave it at 0")
if examples and block_size < meta['row_len'] - 1:
    sys.exit(f"block_size={block_size} is shorter than the examples of {dataset} ({meta['row_len'] - 1} tokens)")
for split in SPLITS:  # train and val are needed, test is scored where it exists
    n = 0 if data[split] is None else len(data[split])
    if n < (1 if examples else block_size + 1) and (split != 'test' or data[split] is not None):
        sys.exit(f"{data_dir}/{split}.bin holds {n} {'examples' if examples else 'tokens'}, too few for "
                 f"block_size={block_size}: prepare the data again ({remake}) or lower block_size")
try:
    model = GPT(GPTConfig(**model_args))
    if checkpoint is not None:
        state = checkpoint['model'] if init_from == 'resume' else pretrained.convert(
            checkpoint, model, init_from, print if master_process else lambda line: None)
        model.load_state_dict(state)
except (ValueError, RuntimeError) as err:  # a bad model flag, or weights that do not fit the model
    sys.exit(' '.join(str(err).split())[:500])
model.to(device)
model.project_delta()  # a checkpoint of an older version may hold deltas outside [-2pi, 0]
if cuda_graph and (ddp or device_type != 'cuda' or gradient_accumulation_steps != 1 or not examples
                   or dtype == 'float16'):
    sys.exit("cuda_graph=True needs one GPU, gradient_accumulation_steps=1, bfloat16 or float32, and a data set kept "
             "on the GPU (kind 'examples')")
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type, capturable=cuda_graph)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
    iter_num, best_val_loss = checkpoint['iter_num'], checkpoint['best_val_loss']
    torch.set_rng_state(checkpoint['rng']['torch'].cpu())  # RNG states are CPU tensors, wherever the checkpoint is
    if device_type == 'cuda' and checkpoint['rng']['cuda'] is not None:
        torch.cuda.set_rng_state(checkpoint['rng']['cuda'].cpu())
    if master_process and os.path.exists(log_path):  # the log goes on from the checkpoint: drop what came after it
        lines = [line for line in open(log_path).read().splitlines() if line.strip()]
        for i, line in enumerate(lines):
            try:
                if json.loads(line)['iter'] < iter_num:
                    log_lines.append(line)
            except ValueError:
                if i < len(lines) - 1:
                    sys.exit(f"{log_path}: line {i + 1} is not JSON: repair or delete it, then resume again")
                print(f"{log_path}: its last line is cut short, dropped: {line[:60]!r}")
checkpoint = None  # free memory
if master_process and lock is None:
    lock_out_dir()
if master_process:  # a new run: nothing of an earlier one stays
    for path in run_files if init_from != 'resume' else ():
        if os.path.exists(path):
            os.remove(path)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
raw_model = model  # the plain module: checkpoints, MFU (compile and DDP wrap it below)
if compile:
    print("compiling the model... (takes a minute)")
    model = torch.compile(model)
if ddp:
    # gradients as views of DDP's all-reduce buckets: no copy into the buckets and back; with compile, one graph
    # and the all-reduce after the backward, in 200 MB buckets (the fastest setting measured: results/speed/README.md)
    torch._dynamo.config.optimize_ddp = False
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None, gradient_as_bucket_view=True,
                bucket_cap_mb=200)
# evaluation runs on the master alone, past the DDP wrapper (under compile, DDP's graph split of the
# eval-mode forward failed for PoPE's kernel: results/speed/README.md)
eval_model = model.module if ddp else model
# length extrapolation (stream data): the val loss at multiples of block_size, every length on the same first
# n_ctx val tokens; absolute positions stop at block_size, and a length needs n_ctx tokens
n_ctx = 0 if examples else min(eval_context_tokens, len(data['val']) - 1)
lengths = [] if examples else [m * block_size for m in ctx_multiples]
skipped = [L for L in lengths if L > block_size and pos_emb in ('learned', 'sinusoidal')]
short = [L for L in lengths if L not in skipped and L > n_ctx]
ctx_lengths = [L for L in lengths if L not in skipped + short]
notes = []
if skipped:
    notes.append(f"{pos_emb} positions stop at block_size={block_size}: lengths {skipped} skipped")
if short:
    notes.append(f"{n_ctx} val tokens to score (eval_context_tokens or the split): lengths {short} skipped")
ctx_note = 'eval_contexts: ' + '; '.join(notes) if notes else None
if ctx_note and master_process:
    print(ctx_note)


@torch.no_grad()
def context_losses():
    """{'val_loss_ctx<L>': mean loss per token} for L in ctx_lengths, in windows of L (each scored from its own start)
    of the first n val tokens, n a multiple of the longest; on the plain module (no compile: lengths vary)."""
    if not ctx_lengths:
        return {}
    n = n_ctx // max(ctx_lengths) * max(ctx_lengths)
    tokens = torch.from_numpy(data['val'][:n + 1].astype(np.int64))
    out = {}
    raw_model.eval()
    for L in ctx_lengths:
        x, y = tokens[:-1].view(-1, L), tokens[1:].view(-1, L)
        per_pass = max(1, batch_size * block_size // L)  # windows per forward pass: a training batch's tokens
        nll = 0.0
        for i in range(0, len(x), per_pass):
            with ctx:
                nll += raw_model.sequence_nll(x[i:i + per_pass].to(device), y[i:i + per_pass].to(device)).sum().item()
        out[f'val_loss_ctx{L}'] = nll / n
    raw_model.train()
    return out


def save(path, write):
    """write(path + '.tmp'), then rename it to path: a crash mid-save leaves the previous file whole. A write that
    fails (a full disk, no permission) stops the run with one line and leaves no partial file."""
    try:
        write(path + '.tmp')
        os.replace(path + '.tmp', path)
    except (OSError, RuntimeError) as err:  # torch.save reports a full disk as a RuntimeError ("unexpected pos")
        with suppress(OSError):
            os.remove(path + '.tmp')
        why = err.strerror if isinstance(err, OSError) else ' '.join(str(err).split())[:100] + ': is the disk full?'
        sys.exit(f"could not write {path} ({why}): stopping; {last_good()}")


def stop(why):
    """End a run whose loss went non-finite or diverged, saving nothing: the checkpoints keep the last good state."""
    sys.exit(f"{why}: stopping without saving; lower learning_rate or check the data ({last_good()})")


def train_step(ixs, zero_grad=True):
    """One optimizer step over the micro-batches at ixs. Nothing in it waits for the GPU, so it can be captured
    once as a CUDA graph and replayed (zero_grad=False: the graph's gradients stay in the buffers it owns)."""
    for micro_step, ix in enumerate(ixs):
        x, y = batch_from('train', ix, all_tokens=loss_on == 'all')
        if ddp:  # sync gradients on the last micro-step only
            model.require_backward_grad_sync = micro_step == len(ixs) - 1
        with ctx:
            _, loss = model(x, y)
        scaler.scale(loss / len(ixs)).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    raw_model.project_delta()  # PoPE's delta back onto [-2pi, 0] (model.py)
    if zero_grad:
        optimizer.zero_grad(set_to_none=True)
    return loss.detach()  # not its graph: a live graph keeps its AccumulateGrad nodes (and their stream) into a capture


def cuda_graph_step():
    """train_step as one CUDA graph: 3 eager warm-up steps on a side stream, one capture, then replays."""
    static_ix, side = sample_ix('train', 0).clone(), torch.cuda.Stream()
    graph, static_loss, warm_up = None, None, 3

    def step(ixs):
        nonlocal graph, static_loss, warm_up
        static_ix.copy_(ixs[0])
        if warm_up:
            warm_up -= 1
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                loss = train_step([static_ix])
            torch.cuda.current_stream().wait_stream(side)
            return loss
        if graph is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_loss = train_step([static_ix], zero_grad=False)
        graph.replay()
        return static_loss
    return step


# -----------------------------------------------------------------------------
# training loop
step = cuda_graph_step() if cuda_graph else train_step
seq_len = meta['row_len'] if examples else block_size  # tokens per sequence: a whole example, or a window
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * seq_len
if master_process:
    print(f"{raw_model.get_num_params() / 1e6:.2f}M parameters, {pos_emb}, {tokens_per_iter:,} tokens per iteration, "
          f"device {device}")
t_start, t_last, it_last, it_first = time.time(), time.time(), iter_num, iter_num
early_stop = None  # why the run ended before max_iters, once it has
while True:
    if (iter_num % eval_interval == 0 or iter_num == max_iters) and master_process:
        record = {'iter': iter_num}
        for split in ('train', 'val', 'test') if examples else ('train', 'val'):  # the paper reports test accuracy
            # examples: the whole val and test splits, and as many rows of train (its first: the same every time)
            record.update(evaluate(split, whole=examples, rows=len(data['val']) if split == 'train' else None))
        record.update(context_losses())
        print(' '.join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()))
        log_lines.append(json.dumps(record))
        save(log_path, lambda tmp: pathlib.Path(tmp).write_text(''.join(line + '\n' for line in log_lines)))
        val_loss = record['val_loss']
        if not math.isfinite(val_loss):
            stop(f"val loss is {val_loss} at iter {iter_num}")
        if divergence_margin and val_loss > best_val_loss + divergence_margin:
            stop(f"val loss {val_loss:.4g} at iter {iter_num} exceeds the best so far ({best_val_loss:.4g}) by more "
                 f"than divergence_margin={divergence_margin}")
        if iter_num > it_first:  # (a resumed run's first evaluation is of its checkpoint)
            is_best, best_val_loss = val_loss < best_val_loss, min(best_val_loss, val_loss)
            ckpt = {'model': raw_model.state_dict(), 'optimizer': optimizer.state_dict(), 'model_args': model_args,
                    'iter_num': iter_num, 'best_val_loss': best_val_loss, 'config': config, 'meta': meta,
                    'rng': {'torch': torch.get_rng_state(),
                            'cuda': torch.cuda.get_rng_state() if device_type == 'cuda' else None}}
            # each file written atomically (a crash mid-save leaves the previous one): best.pt only ever improves
            saving_checkpoint = True
            save(ckpt_path, lambda tmp: torch.save(ckpt, tmp))
            saved_iter, saving_checkpoint = iter_num, False
            if ctrl_c_waiting:
                interrupted(signal.SIGINT, None)
            if is_best:
                save(best_path, lambda tmp: shutil.copyfile(ckpt_path, tmp))
            recent = [json.loads(line).get('val_acc', 0.0) for line in log_lines[-early_stop_evals:]]
            if early_stop_acc and len(recent) == early_stop_evals and min(recent) >= early_stop_acc:
                early_stop = f"val_acc >= {early_stop_acc} at {early_stop_evals} evaluations in a row"
        t_last, it_last = time.time(), iter_num  # keep evaluation out of the step timing
    if iter_num >= max_iters or eval_only or early_stop:
        break
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        if torch.is_tensor(group['lr']):
            group['lr'].fill_(lr)  # a capturable optimizer reads lr on the GPU
        else:
            group['lr'] = lr
    loss = step([sample_ix('train', iter_num * gradient_accumulation_steps + m)
                 for m in range(gradient_accumulation_steps)])
    iter_num += 1
    if iter_num % log_interval == 0 and master_process:
        lossf = loss.item()  # the only host sync of a training step
        if not math.isfinite(lossf):
            stop(f"loss is {lossf} at iter {iter_num}")
        now = time.time()
        dt = (now - t_last) / (iter_num - it_last)
        t_last, it_last = now, iter_num
        mfu = raw_model.estimate_mfu(tokens_per_iter / ddp_world_size, dt) if device_type == 'cuda' else 0.0  # per GPU
        eta = dt * (max_iters - iter_num)
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, {dt * 1000:.1f} ms/it, "
              f"{tokens_per_iter / dt:,.0f} tok/s, mfu {mfu * 100:.1f}%, eta {eta // 60:.0f}m{eta % 60:02.0f}s")

if master_process and not eval_only:
    # the paper's numbers: the last weights' test accuracy (indirect indexing), else the best checkpoint's test NLL
    final = {'iter': iter_num, 'pos_emb': pos_emb, 'minutes': (time.time() - t_start) / 60,
             'weights': 'last', 'weights_of_iter': iter_num}
    if early_stop:
        final['early_stop'] = {'iter': iter_num, 'reason': early_stop}
    if final_weights == 'best' and os.path.exists(best_path):
        best = read_checkpoint(best_path)
        raw_model.load_state_dict(best['model'])
        final['weights'], final['weights_of_iter'] = 'best', best['iter_num']
    for split in ('val', 'test'):
        if data[split] is not None:
            final.update(evaluate(split, whole=True))
    final.update(block_size=block_size, **context_losses())
    if ctx_note:
        final['eval_contexts_note'] = ctx_note
    save(final_path, lambda tmp: pathlib.Path(tmp).write_text(json.dumps(final, indent=1)))
    # the end of the run in words: which numbers are which, and where the files are
    scores = [f"{k} {final[k]:.4f}" for k in ('val_loss', 'val_acc', 'test_loss', 'test_acc') if k in final]
    print(f"done: {iter_num} iterations in {final['minutes']:.1f} minutes"
          + (f", stopped early ({early_stop}; max_iters={max_iters})" if early_stop else ""))
    note = "" if examples else f" (the log lines' val_loss: an estimate on eval_iters={eval_iters} batches)"
    print(f"final.json, the {final['weights']} weights (iter {final['weights_of_iter']}) on the whole splits: "
          f"{', '.join(scores)}{note}")
    if ctx_lengths:
        print('val loss at context | ' + ' | '.join(f"{f'{L // block_size}x = {L}':>10s}" for L in ctx_lengths)
              + '\n                    | ' + ' | '.join(f"{final[f'val_loss_ctx{L}']:10.4f}" for L in ctx_lengths))
    files = {ckpt_path: f"the latest state, iter {saved_iter}", best_path: "the state of the lowest val_loss logged",
             log_path: "every evaluation", final_path: "the numbers above"}
    print('files: ' + ', '.join(f"{path} ({what})" for path, what in files.items() if os.path.exists(path)))
if ddp:
    destroy_process_group()
