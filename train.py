"""
Train a GPT with PoPE (or another position encoding), nanoGPT's way:

    python train.py config/indirect_pope.py --batch_size=32   # config files, then --key=value
    python train.py --out_dir=out-indirect-pope --init_from=resume  # go on from its ckpt.pt
    torchrun --standalone --nproc_per_node=8 train.py config/owt_pope.py    # 8 GPUs
    python train.py --help                                    # every key: default and meaning

configurator.py reads and checks the config, checkpoint.py keeps the run folder.
"""

import math
import os
import sys
import time

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import configurator
import pretrained
from checkpoint import read_checkpoint, resume_state, rng_state
from eval import autocast, context_losses
from model import GPT, GPTConfig
from prepare.data import (SPLITS, example_batch, make_on_first_use, open_data, pass_rows,
                          stream_batch)

# -----------------------------------------------------------------------------
# default config: the paper's indirect-indexing run with PoPE
# I/O
out_dir = 'out'  # checkpoints, eval log and final results go here
eval_interval = 2000  # iterations between evaluations (and checkpoints)
log_interval = 100  # iterations between log lines
eval_iters = 100  # batches per train/val loss estimate (examples: val/test are scored whole)
eval_only = False  # evaluate the checkpoint of init_from once and exit, writing nothing
final_weights = 'last'  # final.json scores the 'last' weights or the 'best' (best.pt, lowest val)
divergence_margin = 3.0  # stop when val loss exceeds the best so far by this many nats (0 = never)
eval_contexts = '1,2,4,8'  # stream data: val loss also at these multiples of block_size ('' = off)
eval_context_tokens = 65536  # val tokens scored at each of those lengths
early_stop_acc = 0.0  # examples: end the run once val accuracy reaches this (0.0 = never)
early_stop_evals = 2  # evaluations in a row at early_stop_acc that end the run (in final.json)
init_from = 'scratch'  # 'scratch', 'resume' (out_dir/ckpt.pt), a ckpt.pt to fine-tune, or GPT-2
overwrite = False  # a scratch run may replace the checkpoints and logs of an earlier run in out_dir
# data
dataset = 'indirect_indexing'  # folder under data/
gradient_accumulation_steps = 1  # micro-steps per optimizer step, summed over all GPUs
batch_size = 64  # sequences per micro-step and GPU
block_size = 48  # context length in tokens
loss_on = 'target'  # examples: train on the 'target' token alone (the paper) or on 'all' tokens
example_order = 'random'  # examples: 'random' rows (with replacement) or 'epochs' (each reordered)
# model (model.GPTConfig: the same defaults)
n_layer = 8  # transformer blocks
n_head = 8  # query heads (head dim: n_embd // n_head)
n_kv_head = 0  # key/value heads (grouped-query attention; divides n_head); 0 = n_head
n_embd = 512  # model width
dropout = 0.0  # on embeddings and residual branches
bias = False  # biases in Linear layers (and LayerNorm)
norm = 'rmsnorm'  # 'rmsnorm' (the paper) or 'layernorm'
tie_embeddings = True  # the output layer shares the token embedding's weights
init = 'gpt2'  # 'gpt2' (N(0, 0.02), residual projections / sqrt(2 n_layer)) or 'torch'
pos_emb = 'pope'  # pope, pope_half, rope, rope_half, alibi_half, learned, sinusoidal, none
pos_base = 10000.0  # frequency base of pope / rope
pope_mu = 'softplus'  # PoPE's magnitude mu(x): 'softplus', or the ablations 'relu' and 'identity'
pope_delta = 'uniform'  # PoPE's delta, from 'uniform' in [-2pi, 0] or 'zero'; 'none': no delta
attn_impl = 'auto'  # PoPE's attention: auto, torch, sdpa, fused, triton (model.pope_path)
yarn_scale = 1.0  # YaRN scale s for RoPE models (1.0 = off)
yarn_orig_ctx = 1024  # pre-training context of a YaRN-extended RoPE model
# AdamW
learning_rate = 2e-4  # peak learning rate
max_iters = 100000  # optimizer steps in all
weight_decay = 0.01  # AdamW's decoupled weight decay
weight_decay_on = 'matrices'  # the blocks' Linear weights, or 'all': every parameter
beta1 = 0.9  # AdamW's first-moment decay
beta2 = 0.99  # AdamW's second-moment decay
grad_clip = 1.0  # clip the gradient norm at this value (0 = off)
# learning-rate schedule: linear warmup, then cosine to min_lr
decay_lr = True  # False: constant learning_rate after warmup
warmup_iters = 4000  # steps of linear warmup
lr_decay_iters = 100000  # ~ max_iters, per Chinchilla
min_lr = 2e-5  # ~ learning_rate / 10, per Chinchilla
# system
backend = 'nccl'  # DDP backend ('gloo' on the CPU)
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # 'cpu', 'cuda', 'cuda:1'
# autocast dtype on a GPU: 'bfloat16', 'float16' or 'float32' (the CPU: float32)
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
compile = False  # torch.compile the model
cuda_graph = False  # the training step as one CUDA graph (one GPU, data on the GPU: examples)
seed = 1337  # model init and batch order
# -----------------------------------------------------------------------------
defaults = {k: v for k, v in globals().items()
            if not k.startswith('_') and isinstance(v, (int, float, bool, str))}
# the config (for logging and the checkpoint): files, --key=value, a resumed run's own; checked
config, given, run, checkpoint = configurator.read(defaults, sys.argv[1:])
ddp = int(os.environ.get('RANK', -1)) != -1  # torchrun: one process per GPU, as nanoGPT
ddp_rank, ddp_local_rank, ddp_world_size = 0, 0, 1  # (one process without torchrun)
if ddp:
    torch.distributed.init_process_group(backend=config['backend'])
    ddp_rank, ddp_local_rank, ddp_world_size = (int(os.environ[k]) for k in
                                                ('RANK', 'LOCAL_RANK', 'WORLD_SIZE'))
    if config['device'] != 'cpu':
        config['device'] = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(config['device'])
    config['gradient_accumulation_steps'] //= ddp_world_size  # (a multiple: configurator.check)
    run.launch = ['torchrun', f'--nproc_per_node={ddp_world_size}']
master_process = run.master = ddp_rank == 0
run.open(refuse_earlier_run=config['init_from'] != 'resume' and not config['overwrite']
         and not config['eval_only'], lock=not config['eval_only'])  # Ctrl-C: one line

# -----------------------------------------------------------------------------
# data (a token stream, or fixed examples one a row), and the model's config
if master_process:  # two small data sets are made here on first use, in seconds
    make_on_first_use(config['dataset'])
if ddp:
    torch.distributed.barrier()
meta, data = open_data(config['dataset'], config['device'])  # checked; examples on the device
model_args = configurator.model_args(config, given, checkpoint, meta)  # and config, what trains
configurator.check_data(config, meta, data, ddp, checkpoint)  # the config against the data
globals().update(config)
device_type = torch.device(device).type
torch.manual_seed(seed)
# under bf16/fp16 autocast, the matmuls it leaves in float32 run on TF32 tensor cores
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = dtype != 'float32'
ctx = autocast(device, dtype)  # bf16/fp16 autocast on a GPU; none with float32, nor on the CPU
examples = meta['kind'] == 'examples'


def batch_from(split, ix, all_tokens=False):
    """Inputs and targets at ix, targets -1 ignored (examples: all but the target, or with
    all_tokens the padding)."""
    if examples:
        return example_batch(data[split][ix], meta.get('pad_id'), all_tokens)
    d = data[split]
    run.check_unchanged(d)  # a file cut short under the run would end it with a bus error
    return stream_batch(d, ix, block_size, device)


def sample_ix(split, step, purpose=0):
    """Batch positions that depend only on (seed, rank, split, purpose, step): resuming replays
    them. Random, or (examples, example_order='epochs') the next rows of a pass over the split."""
    n = len(data[split]) if examples else len(data[split]) - block_size
    if examples and example_order == 'epochs' and purpose == 0:
        draws = (step * ddp_world_size + ddp_rank) * batch_size + np.arange(batch_size)
        ix = pass_rows(n, (seed, SPLITS.index(split)), draws)
    else:
        rng = np.random.default_rng((seed, ddp_rank, SPLITS.index(split), purpose, step))
        ix = rng.integers(0, n, batch_size)
    return torch.from_numpy(ix).to(device, non_blocking=True) if examples else ix


@torch.no_grad()
def evaluate(split, whole=False, rows=None):
    """{split}_loss per target token (and {split}_acc for examples), on eval_iters fixed batches or
    the whole split (examples: or its first `rows` rows)."""
    eval_model.eval()
    if whole:  # examples: every row (or the first `rows`); a stream: windows back to back
        starts = np.arange(len(data[split]))[:rows] if examples \
            else np.arange(0, len(data[split]) - block_size, block_size)
        bs = 16 * batch_size if examples else batch_size  # examples are short: big batches
        batches = np.array_split(starts, max(1, math.ceil(len(starts) / bs)))
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


def val_context_losses():
    """Val loss at eval_contexts' lengths, on the plain module (no compile: lengths vary)."""
    if not ctx_lengths:
        return {}
    run.check_unchanged(data['val'])
    return context_losses(raw_model, data['val'][:n_ctx + 1], ctx_lengths, batch_size * block_size,
                          device, ctx)


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
iter_num, best_val_loss, minutes_before = 0, 1e9, 0.0
try:  # a bad model flag, or a checkpoint whose parts do not fit: one line
    model = GPT(GPTConfig(**model_args))
    if checkpoint is not None:
        say = print if master_process else lambda line: None
        model.load_state_dict(checkpoint['model'] if init_from == 'resume' else
                              pretrained.convert(checkpoint, model, init_from, say))
    model.to(device)
    model.project_delta()  # PoPE's delta in [-2pi, 0], as the steps keep it
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2),
                                           device_type, capturable=cuda_graph,
                                           decay_all=weight_decay_on == 'all')
    if init_from == 'resume':  # the optimizer, counters and random state as they were saved
        iter_num, best_val_loss, minutes_before = resume_state(checkpoint, optimizer, device_type)
except (TypeError, ValueError, RuntimeError, KeyError, AttributeError) as err:
    why = ' '.join(str(err).split())[:500]
    sys.exit(why if checkpoint is None else f"{checkpoint['path']} does not fit this run ({why}): "
             "it is damaged or of another version; use another checkpoint, or train again")
checkpoint = None  # free memory
if master_process and not eval_only:
    run.start(new=init_from != 'resume', iter_num=iter_num)  # (a resumed log goes on from iter_num)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
raw_model = model  # the plain module: checkpoints, MFU (compile and DDP wrap it below)
if compile:
    print("compiling the model... (takes a minute)")
    model = torch.compile(model)
if ddp:  # settings measured fastest (results/speed/README.md); the buffers are alike everywhere
    torch._dynamo.config.optimize_ddp = False
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None,
                gradient_as_bucket_view=True, bucket_cap_mb=200, broadcast_buffers=False)
eval_model = model.module if ddp else model  # evaluation: the master alone, past DDP
n_ctx, ctx_lengths, ctx_note = configurator.context_lengths(config, meta, data)
if ctx_note and master_process:
    print(ctx_note)


def train_step(ixs, zero_grad=True):
    """One optimizer step over the micro-batches at ixs. Nothing in it waits for the GPU, so it can
    be captured as a CUDA graph (zero_grad=False: the graph's gradients stay in its buffers)."""
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
    raw_model.project_delta()  # PoPE's delta back onto [-2pi, 0]
    if zero_grad:
        optimizer.zero_grad(set_to_none=True)
    return loss.detach()  # not its graph: a live graph would reach into a capture


def cuda_graph_step():
    """train_step as one CUDA graph: 3 eager warm-up steps on a side stream, a capture, replays."""
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
seq_len = meta['row_len'] if examples else block_size  # tokens per sequence
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * seq_len
if master_process:
    changed = [f'{k}={v!r}' for k, v in config.items() if v != defaults[k]]
    print(f"config, where it is not train.py's default: {', '.join(changed) or 'nowhere'}")
    scored = f"; an evaluation scores {2 * len(data['val']) + len(data['test']):,} examples" \
        if examples else ''
    print(f"{raw_model.get_num_params() / 1e6:.2f}M parameters, {pos_emb}, "
          f"{tokens_per_iter:,} tokens per iteration, device {device}{scored}")
t_start, t_last, it_last, it_first = time.time(), time.time(), iter_num, iter_num
early_stop = None  # why the run ended before max_iters, once it has
while True:
    if (iter_num % eval_interval == 0 or iter_num == max_iters) and master_process:
        record = {'iter': iter_num}
        for split in ('train', 'val', 'test') if examples else ('train', 'val'):
            # examples: the whole val and test splits, and as many rows of train (its first)
            rows = len(data['val']) if split == 'train' else None
            record.update(evaluate(split, whole=examples, rows=rows))
        record.update(val_context_losses())
        print(' '.join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in record.items()))
        if not eval_only:  # an evaluation alone writes nothing
            run.log(record)
        val_loss = record['val_loss']
        run.check_val_loss(val_loss, best_val_loss, divergence_margin, iter_num)  # or stop
        if iter_num > it_first:  # (a resumed run's first evaluation is of its checkpoint)
            is_best, best_val_loss = val_loss < best_val_loss, min(best_val_loss, val_loss)
            run.save_checkpoint({
                'model': raw_model.state_dict(), 'optimizer': optimizer.state_dict(),
                'model_args': model_args, 'iter_num': iter_num, 'best_val_loss': best_val_loss,
                'config': config, 'meta': meta, 'rng': rng_state(device_type),
                'minutes': minutes_before + (time.time() - t_start) / 60}, is_best)
            early_stop = run.early_stop(early_stop_acc, early_stop_evals)  # why, or None
        t_last, it_last = time.time(), iter_num  # keep evaluation out of the step timing
    if iter_num >= max_iters or eval_only or early_stop:
        break
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:  # (a capturable optimizer reads lr from a GPU tensor)
        group['lr'] = group['lr'].fill_(lr) if torch.is_tensor(group['lr']) else lr
    loss = step([sample_ix('train', iter_num * gradient_accumulation_steps + m)
                 for m in range(gradient_accumulation_steps)])
    iter_num += 1
    if iter_num % log_interval == 0 and master_process:
        lossf = loss.item()  # the only host sync of a training step
        if not math.isfinite(lossf):
            run.stop(f"loss is {lossf} at iter {iter_num}")
        now = time.time()
        dt, t_last, it_last = (now - t_last) / (iter_num - it_last), now, iter_num
        # model FLOPs utilisation of each GPU, against the bf16 peak of an H100 / H200 (989 TFLOP/s)
        mfu = raw_model.flops_per_token(block_size) * tokens_per_iter / ddp_world_size / dt / 989e12
        mfu = f"mfu {mfu * 100:.1f}%, " if device_type == 'cuda' else ''
        eta = dt * (max_iters - iter_num)
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, {dt * 1000:.1f} ms/it, "
              f"{tokens_per_iter / dt:,.0f} tok/s, {mfu}eta {eta // 60:.0f}m{eta % 60:02.0f}s")

if master_process and not eval_only:
    # the paper's numbers: the last weights' test accuracy (indirect indexing), else the best
    # checkpoint's test loss; and the whole config, so that the numbers name their run
    final = {'iter': iter_num, 'pos_emb': pos_emb, 'weights': 'last', 'weights_of_iter': iter_num,
             'minutes': minutes_before + (time.time() - t_start) / 60}
    if early_stop:
        final['early_stop'] = {'iter': iter_num, 'reason': early_stop}
    if final_weights == 'best' and os.path.exists(run.best):
        best = read_checkpoint(run.best)
        raw_model.load_state_dict(best['model'])
        final['weights'], final['weights_of_iter'] = 'best', best['iter_num']
    for split in [s for s in ('val', 'test') if data[s] is not None]:
        final.update(evaluate(split, whole=True))
    final.update(block_size=block_size, **val_context_losses(), eval_contexts_note=ctx_note,
                 config=config)
    run.finish(final, examples, eval_iters, max_iters, ctx_lengths)  # final.json, and in words
if ddp:
    torch.distributed.destroy_process_group()
