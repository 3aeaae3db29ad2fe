"""
Train a GPT with PoPE (or another position encoding). nanoGPT conventions:

    python train.py config/indirect_pope.py                  # one GPU (or the CPU)
    python train.py config/indirect_pope.py --batch_size=32   # a config file, then --key=value overrides
    python train.py config/indirect_pope.py --init_from=resume  # go on from out_dir/ckpt.pt (see README, Training)
    torchrun --standalone --nproc_per_node=8 train.py config/owt_pope.py    # 8 GPUs (two nodes: README, Training)

Data comes from data/<dataset>/ as written by `python -m prepare.<dataset>`: token streams
(kind 'stream', random windows of block_size + 1) or fixed examples (kind 'examples', the
indirect-indexing task, accuracy on the target token, the loss too unless loss_on='all').
"""

import functools
import json
import math
import os
import shutil
import sys
import time
from ast import literal_eval
from contextlib import nullcontext
from dataclasses import fields

import numpy as np
import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, GPTConfig, read_checkpoint
from prepare import indirect_indexing, shakespeare_char
from prepare.common import SPLITS, example_batch

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
init_from = 'scratch'  # 'scratch', 'resume' (out_dir/ckpt.pt), or a path to a ckpt.pt to fine-tune from
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
pope_delta_init = 'uniform'  # 'zero' or 'uniform' in [-2pi, 0]
attn_impl = 'auto'  # PoPE: auto (pope_kernel's measured fastest path on CUDA, else sdpa), torch, sdpa, triton
yarn_scale = 1.0  # YaRN scale s for RoPE models (1.0 = off)
yarn_orig_ctx = 1024  # pre-training context of a YaRN-extended RoPE model
# probes of the indirect-indexing task (issue #16; results/indirect_probes.md); defaults = the paper's PoPE
pope_softplus = True  # PoPE magnitude mu = softplus(x); False: mu = x (the paper's ablation; not the fused kernel)
pope_zero_freqs = 0  # PoPE: theta_c = 0 for the n lowest frequencies per head, content-only channels (not the kernel)
qk_init_scale = 1.0  # init std of the query/key weights is 0.02 x this (PoPE: a wider spread of mu at init)
delta_lr_mult = 1.0  # PoPE's delta learns at this multiple of the learning rate (a param group of its own)
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
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # 'cpu', 'cuda', 'cuda:1', 'mps'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'  # autocast dtype
compile = False  # torch.compile the model
cuda_graph = False  # replay the whole training step as one CUDA graph (one GPU, data on the GPU: indirect_indexing)
seed = 1337  # model init and batch order
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
given = set()  # the keys that a config file or an override set (resume checks them against the checkpoint)


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
# values that cannot work stop here, one line each
for key in ('eval_interval', 'log_interval', 'eval_iters', 'batch_size', 'gradient_accumulation_steps', 'block_size',
            'n_layer', 'n_head', 'n_embd'):
    if globals()[key] < 1:
        sys.exit(f"{key}={globals()[key]}: must be 1 or more")
if max_iters < 0 or warmup_iters < 0:
    sys.exit(f"max_iters={max_iters}, warmup_iters={warmup_iters}: must be 0 or more")
if n_embd % n_head:
    sys.exit(f"n_embd={n_embd} is not a multiple of n_head={n_head} (each head gets n_embd // n_head channels)")
if n_kv_head < 0 or n_kv_head and n_head % n_kv_head:
    sys.exit(f"n_kv_head={n_kv_head} must divide n_head={n_head} (0: as many key/value heads as query heads)")
for key, choices in (('loss_on', ('target', 'all')), ('final_weights', ('last', 'best')),
                     ('example_order', ('random', 'epochs')),
                     ('dtype', ('float32', 'bfloat16', 'float16'))):
    if globals()[key] not in choices:
        sys.exit(f"{key}={globals()[key]!r}: choose one of {', '.join(choices)}")
device_type = 'cuda' if 'cuda' in device else 'cpu'
if device_type == 'cuda' and not torch.cuda.is_available():
    sys.exit(f"device={device!r}, but torch finds no CUDA GPU here: use --device=cpu")
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
# out_dir holds one run: ckpt.pt (its latest state), best.pt (its best val loss), eval_log.jsonl, final.json
run_files = [os.path.join(out_dir, f) for f in ('ckpt.pt', 'best.pt', 'eval_log.jsonl', 'final.json')]
ckpt_path, best_path, log_path, final_path = run_files
if init_from != 'resume' and not overwrite and (os.path.exists(ckpt_path) or os.path.exists(best_path)):
    sys.exit(f"{out_dir} holds the checkpoint of an earlier run: continue it with --init_from=resume, "
             f"choose another --out_dir, or replace it with --overwrite=True")
if master_process:
    os.makedirs(out_dir, exist_ok=True)
    for path in run_files if init_from != 'resume' else ():  # a new run: nothing of an earlier one stays
        if os.path.exists(path):
            os.remove(path)

# -----------------------------------------------------------------------------
# data
data_dir = os.path.join('data', dataset)
meta_path = os.path.join(data_dir, 'meta.json')
if master_process and not os.path.exists(meta_path):  # two data sets are made here on first use, in seconds
    if dataset in indirect_indexing.VARIANTS:
        indirect_indexing.prepare(data_dir, variant=dataset)  # generated, deterministic: no download
    elif dataset == 'shakespeare_char':
        shakespeare_char.prepare(data_dir)  # from the text committed in prepare/texts/
if ddp:
    torch.distributed.barrier()
if not os.path.exists(meta_path):
    sys.exit(f"no data in {data_dir}: run `python -m prepare.{dataset}` first (see README, Experiments)")
with open(meta_path) as f:
    meta = json.load(f)
examples = meta['kind'] == 'examples'

data = {}  # split -> its tokens (a memmap), its examples (a tensor on the device), or None where the split is missing
for split in SPLITS:
    path = os.path.join(data_dir, f'{split}.bin')
    data[split] = np.memmap(path, dtype=meta['dtype'], mode='r') if os.path.exists(path) else None
    if examples and data[split] is not None:  # one example a row, padded; the target is its last real token
        # kept in the file's dtype (uint8 here: 12.8M rows are 0.6 GB), made int64 a batch at a time
        data[split] = torch.from_numpy(np.array(data[split]).reshape(-1, meta['row_len'])).to(device)


def batch_from(split, ix, all_tokens=False):
    """Inputs and targets at ix, targets -1 ignored (examples: all but the target, or with all_tokens the padding)."""
    if examples:
        return example_batch(data[split][ix], meta['pad_id'], all_tokens)
    d = data[split]
    x = torch.stack([torch.from_numpy(d[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(d[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    if device_type == 'cuda':
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


@functools.lru_cache(maxsize=1)
def epoch_order(split, epoch):
    """The rows of split in the order of one pass (example_order='epochs'), from (seed, split, epoch) alone."""
    return np.random.default_rng((seed, SPLITS.index(split), epoch)).permutation(len(data[split]))


def sample_ix(split, step, purpose=0):
    """Batch positions that depend only on (seed, rank, split, purpose, step): resuming replays them. Random, or
    (training on examples with example_order='epochs') the next batch_size rows of a pass over the split."""
    n = len(data[split]) if examples else len(data[split]) - block_size
    if examples and example_order == 'epochs' and purpose == 0:
        k = (step * ddp_world_size + ddp_rank) * batch_size + np.arange(batch_size)  # draws so far, over all ranks
        ix = np.array([epoch_order(split, e)[i] for e, i in zip(*np.divmod(k, n))])
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
iter_num, best_val_loss, checkpoint = 0, 1e9, None
if init_from != 'scratch':
    init_path = ckpt_path if init_from == 'resume' else init_from
    if not os.path.exists(init_path):
        sys.exit(f"init_from={init_from!r}: no checkpoint at {init_path}")
    checkpoint = read_checkpoint(init_path, device)
    if init_from == 'resume':  # the run goes on as it was: an architecture flag that differs is an error
        old = checkpoint['model_args']
        differ = [f"{k}={model_args[k]!r} (checkpoint: {old[k]!r})" for k in model_args
                  if k in given and k != 'attn_impl' and model_args[k] != old.get(k, model_args[k])]
        if differ:
            sys.exit(f"init_from='resume' goes on with {init_path} as it was trained, but {', '.join(differ)}: "
                     f"drop these flags, or fine-tune from it with --init_from={init_path} and a new out_dir")
    # the architecture comes from the checkpoint; a fine-tune may change context, YaRN, dropout, kernel
    keep = ('attn_impl',) if init_from == 'resume' else ('block_size', 'yarn_scale', 'yarn_orig_ctx', 'dropout',
                                                          'attn_impl')
    model_args.update({k: v for k, v in checkpoint['model_args'].items() if k not in keep})
for k in config.keys() & model_args.keys():  # the model actually trained, in the log, the checkpoint and final.json
    config[k] = globals()[k] = model_args[k]
if examples and block_size < meta['row_len'] - 1:
    sys.exit(f"block_size={block_size} is shorter than the examples of {dataset} ({meta['row_len'] - 1} tokens)")
for split in ('train', 'val'):
    n = 0 if data[split] is None else len(data[split])
    if n < (1 if examples else block_size + 1):
        sys.exit(f"{data_dir}/{split}.bin holds {n} {'examples' if examples else 'tokens'}, too few for "
                 f"block_size={block_size}: prepare the data again (python -m prepare.{dataset}) or lower block_size")
try:
    model = GPT(GPTConfig(**model_args))
    if checkpoint is not None:
        state = checkpoint['model']
        if model_args['pos_emb'] == 'learned' and state['wpe.weight'].shape != model.wpe.weight.shape:
            sys.exit("a learned-position model cannot change block_size when fine-tuning")
        model.load_state_dict(state)
except (ValueError, RuntimeError) as err:  # a bad model flag, or weights that do not fit the model
    sys.exit(' '.join(str(err).split())[:500])
model.to(device)
model.project_delta()  # a checkpoint of an older version may hold deltas outside [-2pi, 0]
if cuda_graph and (ddp or device_type != 'cuda' or gradient_accumulation_steps != 1 or not examples
                   or dtype == 'float16'):
    sys.exit("cuda_graph=True needs one GPU, gradient_accumulation_steps=1, bfloat16 or float32, and a data set kept "
             "on the GPU (kind 'examples')")
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type, capturable=cuda_graph,
                                       delta_lr_mult=delta_lr_mult)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
    iter_num, best_val_loss = checkpoint['iter_num'], checkpoint['best_val_loss']
    torch.set_rng_state(checkpoint['rng']['torch'].cpu())  # RNG states are CPU tensors, wherever the checkpoint is
    if device_type == 'cuda' and checkpoint['rng']['cuda'] is not None:
        torch.cuda.set_rng_state(checkpoint['rng']['cuda'].cpu())
    if master_process and os.path.exists(log_path):  # the log goes on from the checkpoint: drop what came after it
        kept = [line for line in open(log_path) if json.loads(line)['iter'] < iter_num]
        open(log_path, 'w').writelines(kept)
checkpoint = None  # free memory
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
raw_model = model  # the plain module: checkpoints, MFU (compile and DDP wrap it below)
if compile:
    print("compiling the model... (takes a minute)")
    model = torch.compile(model)
if ddp:
    # gradients as views of DDP's all-reduce buckets: no copy into the buckets and back; with compile, one graph
    # and the all-reduce after the backward, in 200 MB buckets (measured on 2 H200s: RoPE 1.91x one GPU, 1.90x with
    # DDP's 25 MB, 1.87-1.88x with a graph per bucket overlapping the backward; results/speed.md)
    torch._dynamo.config.optimize_ddp = False
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None, gradient_as_bucket_view=True,
                bucket_cap_mb=200)
# evaluation runs on the master alone, past the DDP wrapper (under compile, DDP's graph split of the
# eval-mode forward failed for PoPE's kernel in torch 2.11: results/speed.md)
eval_model = model.module if ddp else model
# length extrapolation (stream data): the val loss at multiples of block_size, every length on the same first
# n_ctx val tokens; absolute positions stop at block_size, and a length needs n_ctx tokens
try:
    ctx_multiples = [int(m) for m in eval_contexts.split(',') if m.strip()]
except ValueError:
    ctx_multiples = [0]
if any(m < 1 for m in ctx_multiples):
    sys.exit(f"eval_contexts={eval_contexts!r}: give multiples of block_size, e.g. '1,2,4,8' ('' = off)")
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


def stop(why):
    """End a run whose loss went non-finite or diverged, saving nothing: the checkpoints keep the last good state."""
    kept = f"last good checkpoint: {ckpt_path}" if os.path.exists(ckpt_path) else "no checkpoint was saved"
    sys.exit(f"{why}: stopping without saving; lower learning_rate or check the data ({kept})")


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
while True:
    if (iter_num % eval_interval == 0 or iter_num == max_iters) and master_process:
        record = {'iter': iter_num}
        for split in ('train', 'val', 'test') if examples else ('train', 'val'):  # the paper reports test accuracy
            # examples: the whole val and test splits, and as many rows of train (its first: the same every time)
            record.update(evaluate(split, whole=examples, rows=len(data['val']) if split == 'train' else None))
        record.update(context_losses())
        print(' '.join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()))
        with open(log_path, 'a') as f:
            f.write(json.dumps(record) + '\n')
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
            torch.save(ckpt, ckpt_path + '.tmp')
            os.replace(ckpt_path + '.tmp', ckpt_path)
            if is_best:
                shutil.copyfile(ckpt_path, best_path + '.tmp')
                os.replace(best_path + '.tmp', best_path)
        t_last, it_last = time.time(), iter_num  # keep evaluation out of the step timing
    if iter_num >= max_iters or eval_only:
        break
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        if torch.is_tensor(group['lr']):
            group['lr'].fill_(lr * group.get('lr_mult', 1.0))  # a capturable optimizer reads lr on the GPU
        else:
            group['lr'] = lr * group.get('lr_mult', 1.0)
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
    print("final: " + json.dumps(final))
    if ctx_lengths:
        print('val loss at context | ' + ' | '.join(f"{f'{L // block_size}x = {L}':>10s}" for L in ctx_lengths)
              + '\n                    | ' + ' | '.join(f"{final[f'val_loss_ctx{L}']:10.4f}" for L in ctx_lengths))
    with open(final_path, 'w') as f:
        json.dump(final, f, indent=1)
if ddp:
    destroy_process_group()
