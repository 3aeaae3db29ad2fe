"""
Training-step speed of the paper's 124M GPT, one GPU or DDP, in the loop of nanoGPT's bench.py
(results/speed/README.md, "What is timed"); prints a line per 10 steps and a summary line.

    python results/speed/bench_step.py --pos_emb=rope                    # this repository's model
    python results/speed/bench_step.py --code=out-speed/nanogpt          # nanoGPT's model.py
    torchrun --standalone --nproc_per_node=2 results/speed/bench_step.py --pos_emb=rope
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument('--pos_emb', default='pope')
p.add_argument('--attn_impl', default='auto')
p.add_argument('--code', default=os.path.join(os.path.dirname(__file__), '..', '..'),
               help='the folder of the model.py to time (another version, nanoGPT)')
p.add_argument('--data', default='data/shakespeare/train.bin')
p.add_argument('--steps', type=int, default=200)
p.add_argument('--batch_size', type=int, default=32)
p.add_argument('--profile', type=int, default=0)
p.add_argument('--ddp_buckets', type=int, default=1, help="0: one compiled graph, all-reduce after "
               "the backward")
p.add_argument('--bucket_mb', type=int, default=25, help="DDP's bucket_cap_mb (train.py: 200)")
args = p.parse_args()
sys.path.insert(0, os.path.abspath(args.code))
from model import GPT, GPTConfig  # noqa: E402  (the version timed)

try:  # the commit of the code timed (eval.code_commit would import this repository's model.py)
    code_commit = os.environ.get('POPE_COMMIT') or subprocess.run(
        ['git', '-C', args.code, 'describe', '--always', '--dirty', '--exclude=*'],
        capture_output=True, text=True, timeout=10).stdout.strip() or 'unknown'
except (OSError, subprocess.SubprocessError):
    code_commit = 'unknown'

ddp = 'RANK' in os.environ
rank, world = int(os.environ.get('RANK', 0)), int(os.environ.get('WORLD_SIZE', 1))
if ddp:
    torch.distributed.init_process_group('nccl')
    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))
    torch._dynamo.config.optimize_ddp = bool(args.ddp_buckets)
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
B, T = args.batch_size, 1024
data = np.memmap(args.data, dtype=np.uint16, mode='r')
rng, batches = np.random.default_rng((1337, rank)), []
for _ in range(args.steps):
    ix = rng.integers(0, len(data) - T - 1, B)
    xy = torch.from_numpy(np.stack([data[i:i + T + 1].astype(np.int64) for i in ix])).cuda()
    batches.append((xy[:, :-1].contiguous(), xy[:, 1:].contiguous()))

fields = GPTConfig.__dataclass_fields__
nanogpt = 'pos_emb' not in fields  # nanoGPT's model.py: learned positions, its padded vocab
if nanogpt:
    args.pos_emb = 'nanogpt'
cfg = dict(n_layer=12, n_head=12, n_embd=768, block_size=T, vocab_size=50304 if nanogpt else 50257,
           dropout=0.0, bias=False, pos_emb=args.pos_emb, attn_impl=args.attn_impl,
           pope_delta='zero')
model = GPT(GPTConfig(**{k: v for k, v in cfg.items() if k in fields})).cuda()
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), 'cuda')  # nanoGPT bench.py's
model = torch.compile(model)
if ddp:
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[int(os.environ['LOCAL_RANK'])], gradient_as_bucket_view=True,
        bucket_cap_mb=args.bucket_mb)


def step(x, y):
    with torch.autocast('cuda', dtype=torch.bfloat16):
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
    print(f"summary: pos_emb {args.pos_emb}, attn_impl {args.attn_impl}, code "
          f"{os.path.abspath(args.code)} (commit {code_commit}), gpus {world}"
          + (f" (bucket_cap_mb {args.bucket_mb}, ddp_buckets {args.ddp_buckets})" if ddp else "")
          + f", {ms:.1f} ms/step (median of steps 20..{args.steps - 1}), "
          f"{B * T * world / ms * 1000:,.0f} tokens/s, dynamo graphs {graphs}, graph breaks "
          f"{breaks}" + ('' if not breaks else f" {dict(stats['graph_break'])}"))
if args.profile:  # every rank steps (DDP's all-reduce needs them all), rank 0 prints
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for x, y in batches[:5]:
            step(x, y)
    if rank == 0:
        print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=40,
                                        max_name_column_width=70))
if ddp:
    torch.distributed.destroy_process_group()
