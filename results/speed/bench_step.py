"""
Training-step speed of the paper's 124M GPT (12 x 768, T 1024, GPT-2 vocabulary) on one GPU or with DDP: the loop of
nanoGPT's bench.py (forward under bf16 autocast, backward, fused AdamW, loss.item()), torch.compile, batch 32 x 1024
per GPU. Batches are real Shakespeare tokens drawn from a fixed seed and put on the GPU before timing, so two code
versions see the same batches and their loss curves can be printed side by side.

    python results/speed/bench_step.py --pos_emb=rope                      # this repository's model
    python results/speed/bench_step.py --pos_emb=pope --code=DIR           # the model.py in DIR (an older version)
    python results/speed/bench_step.py --code=out-speed/nanogpt            # nanoGPT's model.py in this same loop
    torchrun --standalone --nproc_per_node=2 results/speed/bench_step.py --pos_emb=rope --ddp_buckets=1

(results/speed/reproduce.sh clones nanoGPT into out-speed/nanogpt at the commit it names.)

Prints one line per step (loss, ms) and a summary line: median ms of the steps after the first 20 (compile and
warm-up), tokens/s over all GPUs, the dynamo graph count, and (--profile=1) the top CUDA kernels of 5 steps.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch._inductor.config

p = argparse.ArgumentParser()
p.add_argument('--pos_emb', default='pope')
p.add_argument('--attn_impl', default='auto')
p.add_argument('--code', default=os.path.join(os.path.dirname(__file__), '..', '..'), help='folder of model.py')
p.add_argument('--data', default='data/shakespeare/train.bin')
p.add_argument('--steps', type=int, default=200)
p.add_argument('--lr', type=float, default=6e-4, help="AdamW's constant learning rate (nanoGPT's bench.py: 6e-4)")
p.add_argument('--batch_size', type=int, default=32)
p.add_argument('--shape', default='124m', choices=('124m', 'indirect'),
               help="indirect: the indirect-indexing model (8 x 8 heads x 512, T 48, 66 tokens) on random tokens")
p.add_argument('--profile', type=int, default=0)
p.add_argument('--ddp_buckets', type=int, default=1, help="0: one compiled graph, all-reduce after backward")
p.add_argument('--bucket_mb', type=int, default=25, help="DDP's bucket_cap_mb (25: DDP's default; train.py: 200)")
p.add_argument('--grad_view', type=int, default=1, help="DDP's gradient_as_bucket_view (train.py: 1)")
p.add_argument('--tune', type=int, default=0, help="1: inductor's coordinate-descent tuning of its Triton kernels")
args = p.parse_args()
sys.path.insert(0, os.path.abspath(args.code))
from model import GPT, GPTConfig  # noqa: E402  (the chosen version)

try:  # the commit of the code timed, '-dirty' with changes; POPE_COMMIT where set (a copy whose .git is stale). Not
    # eval.code_commit: importing eval would import this repository's model.py, not the one in --code
    code_commit = os.environ.get('POPE_COMMIT') or subprocess.run(
        ['git', '-C', args.code, 'describe', '--always', '--dirty', '--exclude=*'], capture_output=True, text=True,
        timeout=10).stdout.strip() or 'unknown'
except (OSError, subprocess.SubprocessError):
    code_commit = 'unknown'

ddp = 'RANK' in os.environ
rank, world = int(os.environ.get('RANK', 0)), int(os.environ.get('WORLD_SIZE', 1))
if ddp:
    torch.distributed.init_process_group('nccl')
    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))
    torch._dynamo.config.optimize_ddp = bool(args.ddp_buckets)
torch._inductor.config.coordinate_descent_tuning = bool(args.tune)
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
B, T = args.batch_size, (1024 if args.shape == '124m' else 48)
if args.shape == '124m':
    data = np.memmap(args.data, dtype=np.uint16, mode='r')
else:
    data = np.random.default_rng(0).integers(0, 66, 1_000_000).astype(np.uint16)
rng = np.random.default_rng((1337, rank))
batches = []
for _ in range(args.steps):
    ix = rng.integers(0, len(data) - T - 1, B)
    xy = torch.from_numpy(np.stack([data[i:i + T + 1].astype(np.int64) for i in ix])).cuda()
    batches.append((xy[:, :-1].contiguous(), xy[:, 1:].contiguous()))

fields = GPTConfig.__dataclass_fields__
nanogpt = 'pos_emb' not in fields  # nanoGPT's model.py: learned positions, LayerNorm, trains over its padded vocab
if nanogpt:
    args.pos_emb = 'nanogpt'
cfg = dict(n_layer=12, n_head=12, n_embd=768, block_size=T, vocab_size=50304 if nanogpt else 50257, dropout=0.0,
           bias=False, pos_emb=args.pos_emb, attn_impl=args.attn_impl, pope_delta='zero')
if args.shape == 'indirect':
    cfg.update(n_layer=8, n_head=8, n_embd=512, vocab_size=66)
model = GPT(GPTConfig(**{k: v for k, v in cfg.items() if k in fields})).cuda()
optimizer = model.configure_optimizers(0.1, args.lr, (0.9, 0.95), 'cuda')
model = torch.compile(model)
if ddp:
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[int(os.environ['LOCAL_RANK'])],
                                                      gradient_as_bucket_view=bool(args.grad_view),
                                                      bucket_cap_mb=args.bucket_mb)
ctx = torch.autocast('cuda', dtype=torch.bfloat16)


def step(x, y):
    with ctx:
        _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


times = []
for k, (x, y) in enumerate(batches):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    lossf = step(x, y)
    times.append(time.perf_counter() - t0)
    if rank == 0 and (k % 10 == 0 or k == len(batches) - 1):
        print(f"step {k}: loss {lossf:.4f}, {times[-1] * 1000:.1f} ms", flush=True)
ms = float(np.median(times[20:])) * 1000
stats = torch._dynamo.utils.counters
graphs, breaks = stats['stats']['unique_graphs'], sum(stats['graph_break'].values())
if rank == 0:
    print(f"summary: pos_emb {args.pos_emb}, attn_impl {args.attn_impl}, code {os.path.abspath(args.code)} "
          f"(commit {code_commit}), "
          f"gpus {world}" + (f" (bucket_cap_mb {args.bucket_mb}, ddp_buckets {args.ddp_buckets})" if ddp else "")
          + (', tuned' if args.tune else '') + (', grad_view 0' if not args.grad_view else '')
          + f", {ms:.1f} ms/step (median of steps 20..{args.steps - 1}), "
          f"{B * T * world / ms * 1000:,.0f} tokens/s, dynamo graphs {graphs}, graph breaks {breaks}"
          + ('' if not breaks else f" {dict(stats['graph_break'])}"))
if args.profile:  # every rank steps (DDP's all-reduce needs them all), rank 0 prints
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for x, y in batches[:5]:
            step(x, y)
    if rank == 0:
        print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=40, max_name_column_width=70))
if ddp:
    torch.distributed.destroy_process_group()
