#!/usr/bin/env bash
# Language modelling, length extrapolation and frequency usage at reduced scale
# (results/language_modelling/): RoPE and PoPE trained side by side on one GPU, both fine-tuned at
# 4x the training context, then the two analyses. From the repository root, after `pip install -r
# requirements.txt` and `pip install --no-deps -r requirements-nodeps.txt`:
#     bash results/language_modelling/reproduce.sh        # about 10 minutes on one H200
# Run folders "$OUT"/{rope,pope,rope-yarn-ft,pope-ft}/ (default OUT=out-results-lm), logs and
# analyses in "$OUT"/eval/ (copy them here to replace the committed ones); a run done before is
# done again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
OUT=${OUT:-out-results-lm}
ev=$OUT/eval
mkdir -p "$ev"
started=()
lm() {  # NAME FLAGS...: a training into $OUT/NAME in the background, its log $ev/lm_NAME.log
  python train.py "${@:2}" --out_dir="$OUT/$1" --overwrite=True > "$ev/lm_${1//-/_}.log" 2>&1 &
  started+=("$!:$ev/lm_${1//-/_}.log")
}
both() {  # waits for the two trainings started last; a failure names its log
  local s
  for s in "${started[@]}"; do wait "${s%%:*}" || { echo "failed: see ${s#*:}" >&2; exit 1; }; done
  started=()
}
[ -f data/shakespeare/meta.json ] || python -m prepare.shakespeare
lm rope config/shakespeare_rope.py --compile=True
lm pope config/shakespeare_pope.py --compile=True
both
# the paper's extrapolation protocol, scaled: fine-tune both at 4x the training context, 200 steps
ft=(--dataset=shakespeare --block_size=1024 --yarn_orig_ctx=256 --batch_size=16
    --gradient_accumulation_steps=1 --max_iters=200 --eval_interval=50)
lm rope-yarn-ft config/owt_rope_yarn_ft.py "${ft[@]}" --init_from="$OUT/rope/best.pt"  # YaRN s=4
lm pope-ft config/owt_pope_ft.py "${ft[@]}" --init_from="$OUT/pope/best.pt"  # no interpolation
both
python -m eval.extrapolation --data data/shakespeare/test.bin \
  --lengths 256,512,768,1024,1280,1536,1792,2048,2304,2560 --tokens 61440 --out "$ev" \
  --ckpt "$OUT"/rope/best.pt --yarn_scale 1 --label 'RoPE' \
  --ckpt "$OUT"/pope/best.pt --yarn_scale 1 --label 'PoPE' \
  --ckpt "$OUT"/rope/best.pt --yarn_scale 10 --label 'RoPE+YaRN s=10 (no fine-tune)' \
  --ckpt "$OUT"/rope-yarn-ft/ckpt.pt --yarn_scale 4 --label 'RoPE+YaRN s=4, fine-tuned at 1024' \
  --ckpt "$OUT"/pope-ft/ckpt.pt --yarn_scale 1 --label 'PoPE, fine-tuned at 1024'
python -m eval.frequency_usage --rope "$OUT"/rope/best.pt --pope "$OUT"/pope/best.pt \
  --data data/shakespeare/test.bin --tokens 61440 --out "$ev"/frequency_usage
python -m eval.learning_curves "$OUT"/rope/eval_log.jsonl --label RoPE \
  "$OUT"/pope/eval_log.jsonl --label PoPE --metric val_loss --out "$ev"/val_loss.png
