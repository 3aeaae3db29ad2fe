#!/usr/bin/env bash
# The paper's ablations of PoPE at reduced scale: full PoPE, mu = x ("no softplus"), mu = relu(x),
# no delta, and RoPE, four seeds each, as the 6-layer, 384-wide Shakespeare language model of
# config/shakespeare_pope.py (context 256; the flags below change one switch each); then the test
# perplexity of each best.pt at 1x, 4x and 10x the training context (256, 1024, 2560 tokens), and
# table.py's table and figure beside the paper's 124M numbers.
# 1000 steps instead of the config's 3000, with an evaluation every 100: the model overfits the 1.4M
# training tokens after ~500 steps (results/language_modelling: its best val loss at step 500 of
# 3000), so the best checkpoint comes within the first 1000 at a third of the cost. The val losses
# at longer contexts that train.py adds to each evaluation are off: eval.extrapolation scores the
# best checkpoints afterwards.
# What this scale can show: whether a switch moves perplexity by more than the seeds do, and whether
# it changes PoPE's flat extrapolation. What it cannot: the paper's differences at 124M (21.33 to
# 21.57 OpenWebText perplexity, ~1 %) are smaller than what four seeds on 1.4M tokens resolve.
#
#     JOBS=5 bash results/ablations/reproduce.sh       # from the repository root: ~8 minutes, H200
#     bash results/ablations/reproduce.sh              # one run at a time
#     RUNS="pope relu" SEEDS=1337 bash results/ablations/reproduce.sh   # some of them
#     RUNS=pope SEEDS=1337 OUT=out-ablations-smoke EVAL_EXTRA="--device cpu --tokens 5121" \
#       EXTRA="--max_iters=2 --eval_interval=2 --eval_iters=1 --batch_size=4 --eval_contexts= \
#       --device=cpu" bash results/ablations/reproduce.sh
#       # a CPU smoke test: one run, ~6 minutes on 2 cores (most of it final.json's evaluation)
#
# A run whose $OUT/<run>-s<seed>/final.json exists is not trained again. Logs:
# $OUT/<run>-s<seed>.log; the table and figure: $OUT/table.md, $OUT/ablations.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
OUT=${OUT:-out-ablations}; SEEDS=${SEEDS:-1337 1338 1339 1340}; JOBS=${JOBS:-1}
RUNS=${RUNS:-pope no_softplus relu no_delta rope}; EVAL_EXTRA=${EVAL_EXTRA:-}
positive JOBS "$JOBS"
EXTRA=${EXTRA:---compile=True --max_iters=1000 --lr_decay_iters=1000 --eval_interval=100 \
--eval_contexts=}
declare -A FLAGS=([pope]='' [no_softplus]='--pope_mu=identity' [relu]='--pope_mu=relu'
                  [no_delta]='--pope_delta=none' [rope]='--pos_emb=rope')
mkdir -p "$OUT"
(( JOBS > 1 )) && { nvidia-cuda-mps-control -d 2>/dev/null || true; }  # runs on one GPU overlap
[ -f data/shakespeare/meta.json ] || python -m prepare.shakespeare

ckpts=()
for run in $RUNS; do
  for seed in $SEEDS; do
    ckpts+=(--ckpt "$OUT/$run-s$seed/best.pt" --label "$run-s$seed")
    [ -f "$OUT/$run-s$seed/final.json" ] && continue
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
    echo "training $run-s$seed"
    # shellcheck disable=SC2086  # FLAGS and EXTRA are lists of flags
    train_into "$run-s$seed" config/shakespeare_pope.py ${FLAGS[$run]} --seed="$seed" $EXTRA &
  done
done
while (( $(jobs -rp | wc -l) > 0 )); do wait -n; done

# shellcheck disable=SC2086
python -m eval.extrapolation --data data/shakespeare/test.bin --lengths 256,1024,2560 \
  --tokens 61440 --out "$OUT/extrapolation" "${ckpts[@]}" $EVAL_EXTRA \
  > "$OUT/extrapolation.log" 2>&1
python results/ablations/table.py "$OUT"
