#!/usr/bin/env bash
# The timed runs of results/speed.md (and the GPU-only sections of results/kernel_bench.md) on a 2-GPU machine;
# every timed run has its GPU to itself.
#   bash results/speed/run.sh            # logs in $LOGS (default out-logs/speed)
# Needs: data/shakespeare (python -m prepare.shakespeare); nanoGPT's bench.py, model.py and configurator.py in
# .dev/nanogpt (fetched for the measurement only, not part of this repository); for the "before" rows, the previous
# version's model.py and pope_kernel.py in .dev/old (git archive f2f08e4 model.py pope_kernel.py | tar -x -C .dev/old).
set -u
LOGS=${LOGS:-out-logs/speed}
mkdir -p "$LOGS"
b=results/speed/bench_step.py
echo "$(date +%T) phase 1: one GPU per run (GPU 0: before / nanoGPT, GPU 1: now)"
(
  CUDA_VISIBLE_DEVICES=0 python $b --pos_emb=rope --code=.dev/old > "$LOGS/before_rope.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 python $b --pos_emb=pope --code=.dev/old > "$LOGS/before_pope.log" 2>&1
  (cd .dev/nanogpt && CUDA_VISIBLE_DEVICES=0 python bench.py --batch_size=32 --real_data=False) > "$LOGS/nanogpt_bench.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 python bench_attention.py --sections decode,compile > "$LOGS/kernel_bench_decode_compile.log" 2>&1
) &
(
  CUDA_VISIBLE_DEVICES=1 python $b --pos_emb=rope --profile=1 > "$LOGS/rope.log" 2>&1
  CUDA_VISIBLE_DEVICES=1 python $b --pos_emb=pope --profile=1 > "$LOGS/pope.log" 2>&1
  # the paper's indirect-indexing run (8 x 512, batch 64, T 47): 10k of its 100k steps, compiled, one CUDA graph a step
  CUDA_VISIBLE_DEVICES=1 python train.py config/indirect_pope.py --compile=True --cuda_graph=True --max_iters=10000 \
    --eval_interval=10000 --log_interval=1000 --out_dir=out-speed-indirect-pope > "$LOGS/indirect_pope_10k.log" 2>&1
  CUDA_VISIBLE_DEVICES=1 python bench_attention.py --sections graphed,gqa > "$LOGS/kernel_bench_graphed_gqa.log" 2>&1
) &
wait
echo "$(date +%T) phase 2: DDP on 2 GPUs, 32 x 1024 per GPU"
for pe in rope pope; do
  torchrun --standalone --nproc_per_node=2 $b --pos_emb=$pe --steps=80 > "$LOGS/ddp_$pe.log" 2>&1
done
echo "$(date +%T) done"
grep -h "summary\|time per iteration" "$LOGS"/*.log
grep -h "ms/it" "$LOGS/indirect_pope_10k.log" | tail -3
