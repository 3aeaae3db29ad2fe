#!/usr/bin/env bash
# Language modelling, length extrapolation and frequency usage at reduced scale (results/language_modelling/):
# RoPE and PoPE trained side by side on one GPU, both fine-tuned at 4x the training context, then the two analyses.
# From the repository root, after `pip install -r requirements.txt` and `pip install --no-deps -r requirements-nodeps.txt`:
#     bash results/language_modelling/reproduce.sh        # about 10 minutes on one H200
# Run folders out-lm-*/; logs and analyses in out-lm-eval/ (copy them here to replace the committed ones).
set -euo pipefail
ev=out-lm-eval
mkdir -p $ev
[ -f data/shakespeare/meta.json ] || python -m prepare.shakespeare
python train.py config/shakespeare_rope.py --compile=True --out_dir=out-lm-rope > $ev/lm_rope.log 2>&1 &
python train.py config/shakespeare_pope.py --compile=True --out_dir=out-lm-pope > $ev/lm_pope.log 2>&1 &
wait
# the paper's extrapolation protocol, scaled: fine-tune both at 4x the training context (1024), 200 steps
ft="--dataset=shakespeare --block_size=1024 --yarn_orig_ctx=256 --batch_size=16 --gradient_accumulation_steps=1
    --max_iters=200 --eval_interval=50"
# shellcheck disable=SC2086
python train.py config/owt_rope_yarn_ft.py $ft --init_from=out-lm-rope/best.pt --out_dir=out-lm-rope-yarn-ft \
  > $ev/lm_rope_yarn_ft.log 2>&1 &  # YaRN s=4
# shellcheck disable=SC2086
python train.py config/owt_pope_ft.py $ft --init_from=out-lm-pope/best.pt --out_dir=out-lm-pope-ft \
  > $ev/lm_pope_ft.log 2>&1 &  # no interpolation
wait
python -m eval.extrapolation --data data/shakespeare/test.bin --lengths 256,512,768,1024,1280,1536,1792,2048,2304,2560 \
  --tokens 61440 --out $ev \
  --ckpt out-lm-rope/best.pt --yarn_scale 1 --label 'RoPE' --ckpt out-lm-pope/best.pt --yarn_scale 1 --label 'PoPE' \
  --ckpt out-lm-rope/best.pt --yarn_scale 10 --label 'RoPE+YaRN s=10 (no fine-tune)' \
  --ckpt out-lm-rope-yarn-ft/ckpt.pt --yarn_scale 4 --label 'RoPE+YaRN s=4, fine-tuned at 1024' \
  --ckpt out-lm-pope-ft/ckpt.pt --yarn_scale 1 --label 'PoPE, fine-tuned at 1024'
python -m eval.frequency_usage --rope out-lm-rope/best.pt --pope out-lm-pope/best.pt --data data/shakespeare/test.bin \
  --tokens 61440 --out $ev/frequency_usage
python -m eval.learning_curves out-lm-rope/eval_log.jsonl --label RoPE out-lm-pope/eval_log.jsonl --label PoPE \
  --metric val_loss --out $ev/val_loss.png
