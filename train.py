"""
Train a GPT with PoPE (or another position encoding). nanoGPT conventions:

    python train.py config/indirect_pope.py                  # one GPU (or the CPU)
    python train.py config/indirect_pope.py --batch_size=32   # a config file, then --key=value overrides
    torchrun --standalone --nproc_per_node=8 train.py config/owt_pope.py          # 8 GPUs, one node
    torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 --master_addr=IP --master_port=1234 train.py config/owt_pope.py
    torchrun --nproc_per_node=8 --nnodes=2 --node_rank=1 --master_addr=IP --master_port=1234 train.py config/owt_pope.py

Data comes from data/<dataset>/ as written by `python -m prepare.<dataset>`: token streams
(kind 'stream', random windows of block_size + 1) or fixed examples (kind 'examples', the
indirect-indexing task, accuracy on the target token, the loss too unless loss_on='all').
"""

import json
import math
import os
import sys
import time
from ast import literal_eval
from contextlib import nullcontext

import numpy as np
import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, GPTConfig
from prepare.common import example_batch

# -----------------------------------------------------------------------------
# default config: the paper's indirect-indexing run with PoPE (a config file, then --key=value, override it)
# I/O
out_dir = 'out'  # checkpoint, eval log and final results go here
eval_interval = 2000  # iterations between evaluations (and checkpoints)
log_interval = 100  # iterations between log lines
eval_iters = 100  # batches per train/val loss estimate (indirect indexing's val/test use the whole split)
eval_only = False  # evaluate once and exit
eval_contexts = '1,2,4,8'  # stream data: val loss also at these multiples of block_size (extrapolation); '' = off
eval_context_tokens = 65536  # val tokens scored at each of those lengths (the same tokens, non-overlapping windows)
always_save_checkpoint = True  # save at every evaluation, not only when val loss improves
init_from = 'scratch'  # 'scratch', 'resume' (out_dir/ckpt.pt), or a path to a ckpt.pt to fine-tune from
# data
dataset = 'indirect_indexing'  # folder under data/
gradient_accumulation_steps = 1  # micro-steps per optimizer step, summed over all GPUs
batch_size = 64  # sequences per micro-step and GPU
block_size = 48  # context length in tokens
loss_on = 'target'  # examples: train on the 'target' token alone (the paper), or on 'all' next tokens (val/test: target)
# model
n_layer = 8
n_head = 8
n_embd = 512
dropout = 0.0  # on embeddings and residual branches
bias = False  # biases in Linear layers
pos_emb = 'pope'  # pope, rope, rope_half, alibi_half, learned, sinusoidal, none
pos_base = 10000.0  # frequency base of pope / rope
pope_delta_init = 'uniform'  # 'zero' or 'uniform' in [-2pi, 0]
attn_impl = 'auto'  # auto (triton for PoPE on CUDA at head dim 32/64/128, else sdpa), torch, sdpa, triton
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
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # 'cpu', 'cuda', 'cuda:1', 'mps'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'  # autocast dtype
compile = False  # torch.compile the model
cuda_graph = False  # replay the whole training step as one CUDA graph (one GPU, data on the GPU: indirect_indexing)
seed = 1337  # model init and batch order
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]


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
            items = [(k, v) for k, v in scope.items() if not k.startswith('_') and not callable(v) and type(v).__name__ != 'module']
        for key, val in items:
            if key not in config_keys:
                sys.exit(f"unknown config key '{key}' (in {arg}); valid keys: {', '.join(config_keys)}")
            want = type(globals()[key])
            if want is float and type(val) is int:
                val = float(val)
            if type(val) is not want:
                sys.exit(f"config key '{key}' wants a {want.__name__}, got {val!r} (in {arg})")
            globals()[key] = val


if __name__ == '__main__':
    configure(sys.argv[1:])
config = {k: globals()[k] for k in config_keys}  # for logging and the checkpoint
# -----------------------------------------------------------------------------
# distributed setup, as nanoGPT
ddp = int(os.environ.get('RANK', -1)) != -1
if ddp:
    init_process_group(backend=backend)
    ddp_rank, ddp_local_rank, ddp_world_size = int(os.environ['RANK']), int(os.environ['LOCAL_RANK']), int(os.environ['WORLD_SIZE'])
    if device != 'cpu':  # one GPU per process
        device = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(device)
    if gradient_accumulation_steps % ddp_world_size:
        sys.exit(f"gradient_accumulation_steps={gradient_accumulation_steps} counts micro-steps over all {ddp_world_size} "
                 f"processes: make it a multiple of {ddp_world_size}")
    gradient_accumulation_steps //= ddp_world_size
else:
    ddp_rank, ddp_local_rank, ddp_world_size = 0, 0, 1
master_process = ddp_rank == 0
torch.manual_seed(seed)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = 'cuda' if 'cuda' in device else 'cpu'
if dtype not in ('float32', 'bfloat16', 'float16'):
    sys.exit(f"dtype={dtype!r}: choose 'float32', 'bfloat16' or 'float16'")
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.autocast(device_type=device_type, dtype=ptdtype)
if master_process:
    os.makedirs(out_dir, exist_ok=True)

# -----------------------------------------------------------------------------
# data
data_dir = os.path.join('data', dataset)
if dataset.startswith('indirect_indexing') and not os.path.exists(os.path.join(data_dir, 'meta.json')) and master_process:
    from prepare.indirect_indexing import VARIANTS, prepare
    if dataset in VARIANTS:
        prepare(data_dir, variant=dataset)  # generated in seconds, deterministic: no download
if dataset == 'shakespeare_char' and not os.path.exists(os.path.join(data_dir, 'meta.json')) and master_process:
    from prepare.shakespeare_char import prepare
    prepare(data_dir)  # from the text committed in prepare/texts/, in about a second
if ddp:
    torch.distributed.barrier()
if not os.path.exists(os.path.join(data_dir, 'meta.json')):
    sys.exit(f"no data in {data_dir}: run `python -m prepare.{dataset}` first (see README, Experiments)")
with open(os.path.join(data_dir, 'meta.json')) as f:
    meta = json.load(f)
examples = meta['kind'] == 'examples'
if loss_on not in ('target', 'all'):
    sys.exit(f"loss_on={loss_on!r}: choose 'target' or 'all'")
SPLITS = ('train', 'val', 'test')


def load_split(split):
    path = os.path.join(data_dir, f'{split}.bin')
    if not os.path.exists(path):
        return None
    data = np.memmap(path, dtype=meta['dtype'], mode='r')
    if not examples:
        return data
    # one example a row, right-padded; the target is the row's last real token; kept on the GPU
    return torch.from_numpy(np.array(data, dtype=np.int64).reshape(-1, meta['row_len'])).to(device)


data = {s: load_split(s) for s in SPLITS}
if examples and block_size < meta['row_len'] - 1:
    sys.exit(f"block_size={block_size} is shorter than the examples of {dataset} ({meta['row_len'] - 1} tokens)")


def batch_from(split, ix, all_tokens=False):
    """Inputs and targets for the sequences (or windows) at ix; targets -1 are ignored.
    Examples are scored on their target token, or with all_tokens on every next token but the padding."""
    if examples:
        return example_batch(data[split][ix], meta['pad_id'], all_tokens)
    d = data[split]
    x = torch.stack([torch.from_numpy(d[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(d[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    if device_type == 'cuda':
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


def sample_ix(split, step, purpose=0):
    """Random batch positions that depend only on (seed, rank, split, purpose, step): resuming replays them."""
    rng = np.random.default_rng((seed, ddp_rank, SPLITS.index(split), purpose, step))
    n = len(data[split]) if examples else len(data[split]) - block_size
    ix = rng.integers(0, n, batch_size)
    return torch.from_numpy(ix).to(device, non_blocking=True) if examples else ix  # (a pageable copy: no sync)


@torch.no_grad()
def evaluate(split, whole=False):
    """Mean loss per target token (and target accuracy for examples) on eval_iters fixed random
    batches, or on the whole split (every example, or non-overlapping windows of a stream)."""
    eval_model.eval()
    if whole:
        n = len(data[split]) if examples else (len(data[split]) - 1) // block_size
        starts = np.arange(n) if examples else np.arange(n) * block_size
        bs = 16 * batch_size if examples else batch_size  # examples are short: big batches
        batches = (torch.from_numpy(ix).to(device) if examples else ix for ix in np.array_split(starts, max(1, math.ceil(n / bs))))
    else:
        batches = (sample_ix(split, k, purpose=1) for k in range(eval_iters))
    loss_sum, correct, count = 0.0, 0, 0
    for ix in batches:
        x, y = batch_from(split, ix)
        with ctx:
            logits, loss = eval_model(x, y)
        n_tok = (y != -1).sum()
        loss_sum, correct, count = loss_sum + loss.float() * n_tok, correct + (logits.argmax(-1) == y).sum(), count + n_tok
    eval_model.train()
    out = {'loss': (loss_sum / count).item()}  # one host sync per evaluation
    if examples:
        out['acc'] = (correct / count).item()
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
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, bias=bias,
                  vocab_size=meta['vocab_size'], dropout=dropout, pos_emb=pos_emb, pos_base=pos_base,
                  pope_delta_init=pope_delta_init, attn_impl=attn_impl, yarn_scale=yarn_scale, yarn_orig_ctx=yarn_orig_ctx)
iter_num, best_val_loss, checkpoint = 0, 1e9, None
if init_from != 'scratch':
    ckpt_path = os.path.join(out_dir, 'ckpt.pt') if init_from == 'resume' else init_from
    if not os.path.exists(ckpt_path):
        sys.exit(f"init_from={init_from!r}: no checkpoint at {ckpt_path}")
    checkpoint = torch.load(ckpt_path, map_location=device, weights_only=False)
    # the architecture comes from the checkpoint; a fine-tune may change context, YaRN, dropout, kernel
    keep = ('block_size', 'yarn_scale', 'yarn_orig_ctx', 'dropout', 'attn_impl') if init_from != 'resume' else ('attn_impl',)
    model_args.update({k: v for k, v in checkpoint['model_args'].items() if k not in keep})
model = GPT(GPTConfig(**model_args))
if checkpoint is not None:
    state = checkpoint['model']
    if model_args['pos_emb'] == 'learned' and state['wpe.weight'].shape != model.wpe.weight.shape:
        sys.exit("a learned-position model cannot change block_size when fine-tuning")
    model.load_state_dict(state)
model.to(device)
if cuda_graph and (ddp or device_type != 'cuda' or gradient_accumulation_steps != 1 or not examples or dtype == 'float16'):
    sys.exit("cuda_graph=True needs one GPU, gradient_accumulation_steps=1, bfloat16 or float32, and a data set kept on the GPU (kind 'examples')")
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type, capturable=cuda_graph)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
    iter_num, best_val_loss = checkpoint['iter_num'], checkpoint['best_val_loss']
    torch.set_rng_state(checkpoint['rng']['torch'])
    if device_type == 'cuda' and checkpoint['rng']['cuda'] is not None:
        torch.cuda.set_rng_state(checkpoint['rng']['cuda'])
checkpoint = None  # free memory
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
raw_model = model  # the plain module: checkpoints, MFU (compile and DDP wrap it below)
if compile:
    print("compiling the model... (takes a minute)")
    model = torch.compile(model)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None)
# evaluation runs on the master alone, past the DDP wrapper (under compile, DDP's graph split of the
# eval-mode forward failed for PoPE's kernel in torch 2.11: results/speed.md)
eval_model = model.module if ddp else model
# length extrapolation: val loss at multiples of block_size, on the plain module (no compile: lengths vary)
from eval.extrapolation import context_lengths, context_losses, context_table  # noqa: E402
ctx_lengths, ctx_note = ([], None) if examples else context_lengths(eval_contexts, raw_model.config.block_size,
                                                                    raw_model.config.pos_emb,
                                                                    min(eval_context_tokens, len(data['val']) - 1))
if ctx_note and master_process:
    print(ctx_note)


def save_checkpoint():
    """Write out_dir/ckpt.pt atomically: a crash mid-save leaves the previous checkpoint intact."""
    ckpt = {'model': raw_model.state_dict(), 'optimizer': optimizer.state_dict(), 'model_args': model_args,
            'iter_num': iter_num, 'best_val_loss': best_val_loss, 'config': config, 'meta': meta,
            'rng': {'torch': torch.get_rng_state(), 'cuda': torch.cuda.get_rng_state() if device_type == 'cuda' else None}}
    path = os.path.join(out_dir, 'ckpt.pt')
    torch.save(ckpt, path + '.tmp')
    os.replace(path + '.tmp', path)


def log_eval(record):
    print(' '.join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()))
    with open(os.path.join(out_dir, 'eval_log.jsonl'), 'a') as f:
        f.write(json.dumps(record) + '\n')


def train_step(ixs):
    """One optimizer step over the micro-batches at ixs: forward, backward, clip, AdamW.
    Nothing in it waits for the GPU, so it can be captured once as a CUDA graph and replayed."""
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
    return loss.detach()  # not its graph: a live graph keeps its AccumulateGrad nodes (and their stream) into a capture


# -----------------------------------------------------------------------------
# training loop
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
if master_process:
    print(f"{raw_model.get_num_params() / 1e6:.2f}M parameters, {pos_emb}, {tokens_per_iter:,} tokens per iteration, device {device}")
t_start, t_last, it_last, it_first = time.time(), time.time(), iter_num, iter_num
if cuda_graph:  # static input buffer, warm-up stream, and the graph once captured
    static_ix, side, graph = sample_ix('train', 0).clone(), torch.cuda.Stream(), None
while True:
    if (iter_num % eval_interval == 0 or iter_num == max_iters) and master_process:
        record = {'iter': iter_num}
        for split in ('train', 'val', 'test') if examples else ('train', 'val'):  # the paper reports test accuracy
            for k, v in evaluate(split, whole=examples and split != 'train').items():
                record[f'{split}_{k}'] = v
        record.update(context_losses(raw_model, data['val'], ctx_lengths, eval_context_tokens, batch_size * block_size,
                                     device, dtype))
        log_eval(record)
        if not math.isfinite(record['val_loss']):
            sys.exit(f"val loss is {record['val_loss']} at iter {iter_num}: stopping without saving; "
                     f"lower learning_rate or check the data (last good checkpoint: {out_dir}/ckpt.pt)")
        if iter_num > 0 and (record['val_loss'] < best_val_loss or always_save_checkpoint):
            best_val_loss = min(best_val_loss, record['val_loss'])
            save_checkpoint()
        t_last, it_last = time.time(), iter_num  # keep evaluation out of the step timing
    if iter_num >= max_iters or eval_only:
        break
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        if torch.is_tensor(group['lr']):
            group['lr'].fill_(lr)  # a capturable optimizer reads lr on the GPU
        else:
            group['lr'] = lr
    ixs = [sample_ix('train', iter_num * gradient_accumulation_steps + m) for m in range(gradient_accumulation_steps)]
    if not cuda_graph:
        loss = train_step(ixs)
        optimizer.zero_grad(set_to_none=True)
    else:  # the same step: a few eager warm-up steps on a side stream, then one capture, then replays
        static_ix.copy_(ixs[0])
        if iter_num < it_first + 3:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                loss = train_step([static_ix])
                optimizer.zero_grad(set_to_none=True)  # the capture then owns the gradient buffers
            torch.cuda.current_stream().wait_stream(side)
        else:
            if graph is None:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_loss = train_step([static_ix])
            graph.replay()
            loss = static_loss
    iter_num += 1
    if iter_num % log_interval == 0 and master_process:
        lossf = loss.item()  # the only host sync of a training step
        if not math.isfinite(lossf):
            sys.exit(f"loss is {lossf} at iter {iter_num}: stopping without saving; "
                     f"lower learning_rate or check the data (last good checkpoint: {out_dir}/ckpt.pt)")
        now = time.time()
        dt = (now - t_last) / (iter_num - it_last)
        t_last, it_last = now, iter_num
        mfu = raw_model.estimate_mfu(tokens_per_iter / ddp_world_size, dt) if device_type == 'cuda' else 0.0  # per GPU
        eta = dt * (max_iters - iter_num)
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, {dt * 1000:.1f} ms/it, "
              f"{tokens_per_iter / dt:,.0f} tok/s, mfu {mfu * 100:.1f}%, eta {eta // 60:.0f}m{eta % 60:02.0f}s")

if master_process and not eval_only:
    # final numbers: the paper reports test accuracy (indirect indexing) or the best test NLL per token,
    # so a run that keeps only its best checkpoint is scored with that checkpoint's weights
    final = {'iter': iter_num, 'pos_emb': pos_emb, 'minutes': (time.time() - t_start) / 60, 'weights_of_iter': iter_num}
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    if not always_save_checkpoint and os.path.exists(ckpt_path):
        best = torch.load(ckpt_path, map_location=device, weights_only=False)
        raw_model.load_state_dict(best['model'])
        final['weights_of_iter'] = best['iter_num']
    for split in ('val', 'test'):
        if data[split] is not None:
            final.update({f'{split}_{k}': v for k, v in evaluate(split, whole=True).items()})
    final.update(block_size=raw_model.config.block_size, **context_losses(
        raw_model, data['val'], ctx_lengths, eval_context_tokens, batch_size * block_size, device, dtype))
    if ctx_note:
        final['eval_contexts_note'] = ctx_note
    print("final: " + json.dumps(final))
    if ctx_lengths:
        print(context_table(final, raw_model.config.block_size))
    with open(os.path.join(out_dir, 'final.json'), 'w') as f:
        json.dump(final, f, indent=1)
if ddp:
    destroy_process_group()
