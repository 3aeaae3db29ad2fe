#!/usr/bin/env bash
# Step time of the indirect-indexing model (8x512, batch 64 x 47 tokens) on one GPU, per training mode.
# Usage: bash results/step_time_indirect.sh [iters]   (logs under ${OUT:-/tmp})
set -u
iters=${1:-600}
out=${OUT:-/tmp}
python -m prepare.indirect_indexing > /dev/null
for mode in "eager:--compile=False --cuda_graph=False" "graph:--compile=False --cuda_graph=True" "compile+graph:--compile=True --cuda_graph=True"; do
  name=${mode%%:*}; flags=${mode#*:}
  for pe in "pope --attn_impl=sdpa" "pope --attn_impl=triton" "rope --attn_impl=sdpa"; do
    tag="$name $pe"
    python train.py config/indirect_${pe%% *}.py ${pe#* } $flags --max_iters=$iters --eval_interval=100000 \
      --log_interval=100 --out_dir=/tmp/st > "$out/st_${name}_${pe// /_}.log" 2>&1
    ms=$(grep "ms/it" "$out/st_${name}_${pe// /_}.log" | tail -3 | sed 's/.*, \([0-9.]*\) ms\/it.*/\1/' | sort -n | head -1)
    echo "$tag: ${ms:-FAILED} ms/it (best of the last 3 log intervals)"
  done
done
