#!/usr/bin/env bash
# The training-speed tables of results/speed/README.md, from the repository root on a machine with 2
# GPUs (one GPU: `one` and `indirect` only). Each timed run has its GPU to itself.
#     bash results/speed/reproduce.sh              # one, ddp, indirect (about 7 minutes, 2 x H200)
#     bash results/speed/reproduce.sh one          # or: ddp, indirect
#   one       GPU 0: nanoGPT's bench.py, nanoGPT's model.py in our loop, our RoPE and PoPE with
#             their profiles; GPU 1 (if there is one): our RoPE and PoPE again
#   ddp       DDP on 2 GPUs, RoPE and PoPE (one compiled graph, all-reduce after the backward,
#             200 MB buckets)
#   indirect  the paper's indirect-indexing run with PoPE, 10k of its 100k steps (compiled, one
#             CUDA graph a step)
#   generate  GPU 0: generation, PoPE vs RoPE (bench_generate.py, ~6 minutes; not in the default)
# Needs data/shakespeare (made here if missing) and, for `one`, git and internet once: nanoGPT is
# cloned into out-speed/nanogpt at the commit below (its bench.py, model.py and configurator.py are
# the same in every commit from 1eaceae, 2023-06-19, to this one). Logs in $LOGS (default
# out-speed/logs); without a GPU it stops at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "one ddp indirect generate" "$@"
need_gpu
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
NANOGPT_COMMIT=3adf61e154c3fe3fca428ad6bc3818b27a3b8291
LOGS=${LOGS:-out-speed/logs}
b=results/speed/bench_step.py
mkdir -p "$LOGS"
[ -f data/shakespeare/meta.json ] || python -m prepare.shakespeare

nanogpt() {  # nanoGPT at the pinned commit, for the comparison only (not part of this repository)
  local dir=out-speed/nanogpt
  [ -d $dir/.git ] || git clone -q https://github.com/karpathy/nanoGPT.git $dir
  git -C $dir checkout -q $NANOGPT_COMMIT
}

one() {
  nanogpt
  local pids=() pid
  (
    export CUDA_VISIBLE_DEVICES=0
    (cd out-speed/nanogpt && python bench.py --batch_size=32 --real_data=False) \
      > "$LOGS/nanogpt_bench.log" 2>&1
    python $b --code=out-speed/nanogpt --profile=1 > "$LOGS/nanogpt.log" 2>&1
    for pe in rope pope; do python $b --pos_emb=$pe --profile=1 > "$LOGS/$pe.log" 2>&1; done
  ) &
  pids+=($!)
  if (( $(nvidia-smi -L | wc -l) > 1 )); then
    (
      export CUDA_VISIBLE_DEVICES=1
      for pe in rope pope; do python $b --pos_emb=$pe > "$LOGS/gpu1_$pe.log" 2>&1; done
    ) &
    pids+=($!)
  fi
  for pid in "${pids[@]}"; do
    wait "$pid" || { echo "a benchmark failed: see $LOGS" >&2; exit 1; }
  done
  grep -h "summary\|time per iteration" "$LOGS"/nanogpt*.log "$LOGS"/{rope,pope}.log \
    "$LOGS"/gpu1_*.log
}

ddp() {
  for pe in rope pope; do
    torchrun --standalone --nproc_per_node=2 $b --steps=80 --ddp_buckets=0 --bucket_mb=200 \
      --pos_emb=$pe > "$LOGS/ddp_$pe.log" 2>&1
  done
  grep -h "summary" "$LOGS"/ddp_*.log
}

indirect() {
  CUDA_VISIBLE_DEVICES=0 python train.py config/indirect_pope.py --compile=True --cuda_graph=True \
    --max_iters=10000 --log_interval=1000 --out_dir=out-speed/indirect_pope_10k --overwrite=True \
    > "$LOGS/indirect_pope_10k.log" 2>&1
  final_summary out-speed/indirect_pope_10k/final.json
}

generate() {
  CUDA_VISIBLE_DEVICES=0 python results/speed/bench_generate.py --out=results/speed/generate \
    --eager_repeats=2 --budget_s=470 | tee "$LOGS/generate.log"
}

(( $# )) || set -- one ddp indirect
for part in "$@"; do
  echo "== $part"
  $part
done
