#!/usr/bin/env bash
# The timed runs of results/speed.md on a 2 x H200 machine, in two device calls of under 10 minutes each; every
# timed run has its GPU to itself. Logs in $LOGS (default out-logs/speed).
#   bash results/speed/run.sh one    # one GPU per run. GPU 0: nanoGPT's bench.py, nanoGPT's model.py in our loop, the
#                                    # previous version (RoPE, PoPE); GPU 1: our RoPE and PoPE (with profiles), the
#                                    # PoPE indirect-indexing run (10k steps), the kernel and model tests on the GPU
#   bash results/speed/run.sh ddp    # DDP on 2 GPUs, RoPE and PoPE, DDP's buckets and one graph
#   bash results/speed/run.sh indirect_paths     # PoPE's indirect-indexing run, hybrid vs all-Triton; kernel bench
#   bash results/speed/run.sh profile_indirect   # the top kernels of the indirect-indexing model's step
# Needs data/shakespeare (python -m prepare.shakespeare); nanoGPT's bench.py, model.py and configurator.py in
# .dev/nanogpt (fetched for the measurement only, not part of this repository); the previous version's model.py and
# pope_kernel.py in .dev/before (git archive abe23fd model.py pope_kernel.py | tar -x -C .dev/before).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LOGS=${LOGS:-out-logs/speed}
mkdir -p "$LOGS"
b=results/speed/bench_step.py
# the paper's indirect-indexing run, 10k of its 100k steps with its evaluations (every 2k steps), compiled, one
# CUDA graph a step
indirect() {  # indirect <pos_emb> <out_dir suffix> [--key=value ...]
  local pe=$1 name=$2
  shift 2
  python train.py config/indirect_$pe.py --compile=True --cuda_graph=True --max_iters=10000 --log_interval=1000 \
    --out_dir=out-speed-indirect-$name --overwrite=True "$@"
}

one() {
  (
    export CUDA_VISIBLE_DEVICES=0
    (cd .dev/nanogpt && python bench.py --batch_size=32 --real_data=False) > "$LOGS/nanogpt_bench.log" 2>&1
    python $b --code=.dev/nanogpt --profile=1 > "$LOGS/nanogpt.log" 2>&1
    python $b --pos_emb=rope --code=.dev/before --profile=1 > "$LOGS/before_rope.log" 2>&1
    python $b --pos_emb=pope --code=.dev/before > "$LOGS/before_pope.log" 2>&1
  ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    python $b --pos_emb=rope --profile=1 > "$LOGS/rope.log" 2>&1
    python $b --pos_emb=pope --profile=1 > "$LOGS/pope.log" 2>&1
    indirect pope pope > "$LOGS/indirect_pope_10k.log" 2>&1
    TRITON_INTERPRET=0 python -m pytest -q tests/test_pope_kernel.py tests/test_model.py > "$LOGS/tests_gpu.log" 2>&1
  ) &
  wait
  grep -h "summary\|time per iteration" "$LOGS"/*.log
  grep -h "ms/it\|^final" "$LOGS"/indirect_*_10k.log | tail -3
  tail -1 "$LOGS/tests_gpu.log"
}

ddp() {  # DDP's default (a graph per gradient bucket, all-reduce overlapping the backward) and one graph
  torchrun="torchrun --standalone --nproc_per_node=2 $b --steps=80"
  for pe in rope pope; do
    $torchrun --pos_emb=$pe > "$LOGS/ddp_$pe.log" 2>&1
    $torchrun --pos_emb=$pe --ddp_buckets=0 > "$LOGS/ddp_${pe}_one_graph.log" 2>&1
  done
  grep -h "summary" "$LOGS"/ddp_*.log
}

indirect_paths() {  # PoPE's indirect-indexing run on pope_kernel's hybrid path (cuDNN) and its all-Triton path
  (
    export CUDA_VISIBLE_DEVICES=0
    indirect pope pope > "$LOGS/indirect_pope_10k.log" 2>&1
    python bench_attention.py --sections graphed,gqa > "$LOGS/kernel_bench_graphed_gqa.log" 2>&1
  ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    indirect pope pope-triton --attn_impl=triton > "$LOGS/indirect_pope_triton_10k.log" 2>&1
    TRITON_INTERPRET=0 python -m pytest -q tests/test_pope_kernel.py tests/test_model.py > "$LOGS/tests_gpu.log" 2>&1
  ) &
  wait
  grep -h "ms/it\|^final" "$LOGS"/indirect_*_10k.log | tail -4
  tail -1 "$LOGS/tests_gpu.log"
}

profile_indirect() {
  python $b --pos_emb=pope --shape=indirect --batch_size=64 --steps=100 --profile=1 \
    > "$LOGS/indirect_pope_profile.log" 2>&1
}

"$@"
