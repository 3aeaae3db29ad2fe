#!/usr/bin/env bash
# The CPU runs of results/quick_start/README.md, from the repository root after `pip install -r requirements.txt`:
# the quick start (PoPE), the same with RoPE, the plot of both, a second seed of the pair, and the short
# indirect-indexing run with each encoding. Logs, with `time`'s output at their end, in out-quick-eval/.
#     bash results/quick_start/reproduce.sh       # 15-30 minutes on 2 CPU cores
set -euo pipefail
ev=out-quick-eval
mkdir -p $ev
{ time python train.py config/quick_start.py --overwrite=True; } > $ev/quick_pope.log 2>&1
{ time python train.py config/quick_start.py --pos_emb=rope --out_dir=out-quick-rope --overwrite=True; } \
  > $ev/quick_rope.log 2>&1
python -m eval.extrapolation --final out-quick-rope/final.json --final out-quick-pope/final.json \
  --label RoPE --label PoPE --out $ev
{ time python train.py config/quick_start.py --seed=2 --out_dir=out-quick-pope-s2 --overwrite=True; } \
  > $ev/seed2_pope.log 2>&1
{ time python train.py config/quick_start.py --pos_emb=rope --seed=2 --out_dir=out-quick-rope-s2 --overwrite=True; } \
  > $ev/seed2_rope.log 2>&1
{ time python train.py config/indirect_quick.py --overwrite=True; } > $ev/indirect_quick.log 2>&1
{ time python train.py config/indirect_quick.py --pos_emb=rope --out_dir=out-indirect-quick-rope --overwrite=True; } \
  > $ev/indirect_quick_rope.log 2>&1
grep -h "^final: " $ev/*.log
