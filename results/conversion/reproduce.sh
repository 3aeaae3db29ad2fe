#!/usr/bin/env bash
# Trained models converted to PoPE, at reduced scale: the 6-layer, 384-wide Shakespeare language
# model (context 256) pre-trained with RoPE and with learned positions, each converted to PoPE
# (pretrained.py: every tensor copied but the learned table of positions, PoPE's delta new at 0)
# and recalibrated at the original context for 2 %, 10 % and 30 % of the pre-training's steps
# (config/shakespeare_convert_pope.py); then the test perplexity at 1x, 4x and 10x the training
# context (256, 1024, 2560 tokens) of every best.pt: the two originals, the six converted models,
# RoPE + YaRN (s = 4 and 10, no fine-tune) on the RoPE model, and PoPE from scratch for each total
# of steps (pre-training + recalibration). Pre-training takes 1000 steps, 10 % of them warmup, as
# results/ablations (the best val checkpoint comes at ~500-900).
#
#     bash results/conversion/reproduce.sh             # from the repository root, one GPU
#     bash results/conversion/reproduce.sh --help      # this text; nothing runs
#     SOURCES=rope PERCENTS=10 bash results/conversion/reproduce.sh      # some of it
#     SOURCES=rope PERCENTS=2 PRE_ITERS=50 OUT=out-conversion-smoke \
#       EVAL_EXTRA="--device cpu --tokens 5121" EXTRA="--n_layer=1 --n_head=2 --n_embd=64 \
#       --batch_size=4 --eval_iters=1 --device=cpu --compile=False" \
#       bash results/conversion/reproduce.sh   # a CPU smoke test, a 1-layer model: ~8 minutes
#
# Settings (environment): OUT (default out-conversion), SEEDS (1337), SOURCES (rope learned),
# PERCENTS (2 10 30), PRE_ITERS (1000), EXTRA (flags for every training, default --compile=True),
# EVAL_EXTRA (flags for eval.extrapolation). Needs data/shakespeare (python -m prepare.shakespeare).
# Writes only under $OUT: a run in $OUT/<run>/ with its log $OUT/<run>.log; a run whose final.json
# exists is not trained again. The perplexities: $OUT/extrapolation/ (extrapolation.csv, .json,
# .png) and its log $OUT/extrapolation.log; the table $OUT/table.md and figure $OUT/conversion.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
OUT=${OUT:-out-conversion}; SEEDS=${SEEDS:-1337}; SOURCES=${SOURCES:-rope learned}
PERCENTS=${PERCENTS:-2 10 30}; PRE_ITERS=${PRE_ITERS:-1000}; EXTRA=${EXTRA:---compile=True}
EVAL_EXTRA=${EVAL_EXTRA:-}
[ -f data/shakespeare/test.bin ] \
  || { echo "no data/shakespeare: run python -m prepare.shakespeare first" >&2; exit 1; }
mkdir -p "$OUT"

train() {  # RUN CONFIG FLAGS...: one training into $OUT/RUN, unless it has ended before
  [ -f "$OUT/$1/final.json" ] && return 0
  echo "training $1"
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  train_into "$@" --eval_contexts= $EXTRA
}

ckpts=()
for seed in $SEEDS; do
  for src in $SOURCES; do  # pre-training: config/shakespeare_rope.py's model, RoPE or learned
    train "$src-s$seed" config/shakespeare_rope.py --pos_emb="$src" --seed="$seed" \
      --max_iters="$PRE_ITERS" --lr_decay_iters="$PRE_ITERS" --warmup_iters=$(( PRE_ITERS / 10 )) \
      --eval_interval=100
    ckpts+=(--ckpt "$OUT/$src-s$seed/best.pt" --yarn_scale 1 --label "$src-s$seed")
    if [ "$src" = rope ]; then
      for s in 4 10; do
        ckpts+=(--ckpt "$OUT/$src-s$seed/best.pt" --yarn_scale "$s" --label "rope+yarn$s-s$seed")
      done
    fi
  done
  for pc in $PERCENTS; do
    k=$(( PRE_ITERS * pc / 100 )); k=$(( k > 0 ? k : 1 ))  # recalibration steps
    every=$(( k / 5 > 0 ? k / 5 : 1 ))  # 5 evaluations
    warm=$(( k / 25 > 0 ? k / 25 : 1 ))  # 4 % warmup, as the paper's 20 of 500 steps
    for src in $SOURCES; do  # the conversion: config/shakespeare_convert_pope.py from its best.pt
      train "$src-pope$pc-s$seed" config/shakespeare_convert_pope.py \
        --init_from="$OUT/$src-s$seed/best.pt" --seed="$seed" --max_iters="$k" \
        --warmup_iters="$warm" --eval_interval="$every"
      ckpts+=(--ckpt "$OUT/$src-pope$pc-s$seed/best.pt" --yarn_scale 1
              --label "$src-pope$pc-s$seed")
    done
    total=$(( PRE_ITERS + k ))  # PoPE from scratch for as many steps as both together
    train "pope$pc-s$seed" config/shakespeare_pope.py --seed="$seed" --max_iters="$total" \
      --lr_decay_iters="$total" --warmup_iters=$(( total / 10 )) --eval_interval=100
    ckpts+=(--ckpt "$OUT/pope$pc-s$seed/best.pt" --yarn_scale 1 --label "pope-scratch$pc-s$seed")
  done
done

# shellcheck disable=SC2086
python -m eval.extrapolation --data data/shakespeare/test.bin --lengths 256,1024,2560 \
  --tokens 61440 --out "$OUT/extrapolation" "${ckpts[@]}" $EVAL_EXTRA > "$OUT/extrapolation.log" \
  2>&1 || { echo "the evaluation failed: see $OUT/extrapolation.log" >&2; exit 1; }
python results/conversion/table.py "$OUT" > /dev/null
echo "done: $OUT/extrapolation/extrapolation.csv; the table $OUT/table.md, the figure" \
  "$OUT/conversion.png"
