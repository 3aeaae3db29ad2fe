#!/usr/bin/env bash
# Step time of the indirect-indexing model (8 layers x 512, batch 64 x 47 tokens) on one GPU, per
# training mode and attention path, and the loss curves of attn_impl sdpa vs triton (same run otherwise).
# Usage: bash results/step_time_indirect/run.sh [iters]      logs: ${OUT:-/tmp}/st_*.log
set -u
iters=${1:-600}
out=${OUT:-/tmp}
python -m prepare.indirect_indexing > /dev/null
run() {  # name, flags...
  local name=$1; shift
  python train.py "$@" --max_iters=$iters --eval_interval=100000 --log_interval=50 --out_dir=/tmp/st_$name > "$out/st_$name.log" 2>&1
  ms=$(grep "ms/it" "$out/st_$name.log" | tail -4 | sed 's/.*, \([0-9.]*\) ms\/it.*/\1/' | sort -n | head -1)
  echo "$name: ${ms:-FAILED} ms/it (best of the last 4 log intervals)"
}
run eager_pope_sdpa config/indirect_pope.py --attn_impl=sdpa
run eager_pope_triton config/indirect_pope.py --attn_impl=triton
run eager_rope config/indirect_rope.py
run graph_pope_sdpa config/indirect_pope.py --attn_impl=sdpa --cuda_graph=True
run graph_pope_triton config/indirect_pope.py --attn_impl=triton --cuda_graph=True
run graph_rope config/indirect_rope.py --cuda_graph=True
run compile_graph_pope_triton config/indirect_pope.py --attn_impl=triton --cuda_graph=True --compile=True
run compile_graph_rope config/indirect_rope.py --cuda_graph=True --compile=True
echo "loss, sdpa vs triton (eager, same seed and batches):"
paste <(grep -o "iter [0-9]*: loss [0-9.]*" "$out/st_eager_pope_sdpa.log") <(grep -o "loss [0-9.]*" "$out/st_eager_pope_triton.log") | head -12
