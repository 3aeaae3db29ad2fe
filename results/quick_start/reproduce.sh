#!/usr/bin/env bash
# The CPU runs of results/quick_start/README.md, from the repository root after `pip install -r
# requirements.txt`: the quick start (PoPE), the same with RoPE, the plot of both, a second seed of
# the pair, and the short indirect-indexing run with each encoding. Each run in a folder of its own
# under $OUT (default out-results-quick: pope, rope, pope-s2, rope-s2, indirect-pope,
# indirect-rope), never the README's out-quick-pope and the like; logs, with `time`'s output at
# their end, and the plot in $OUT too; a run done before is done again.
#     bash results/quick_start/reproduce.sh       # 15-30 minutes on 2 CPU cores
#     OUT=out-quick-elsewhere bash results/quick_start/reproduce.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
OUT=${OUT:-out-results-quick}
mkdir -p "$OUT"
train() {  # NAME FLAGS...: one run into $OUT/NAME, its log $OUT/NAME.log (`time`'s at its end)
  local name=$1
  shift
  { time python train.py "$@" --out_dir="$OUT/$name" --overwrite=True; } > "$OUT/$name.log" 2>&1 \
    || { echo "$name failed: see $OUT/$name.log" >&2; exit 1; }
}
train pope config/quick_start.py
train rope config/quick_start.py --pos_emb=rope
python -m eval.extrapolation --final "$OUT/rope/final.json" --final "$OUT/pope/final.json" \
  --label RoPE --label PoPE --out "$OUT"
train pope-s2 config/quick_start.py --seed=2
train rope-s2 config/quick_start.py --pos_emb=rope --seed=2
train indirect-pope config/indirect_quick.py
train indirect-rope config/indirect_quick.py --pos_emb=rope
final_summary "$OUT"/{pope,rope,pope-s2,rope-s2,indirect-pope,indirect-rope}/final.json
