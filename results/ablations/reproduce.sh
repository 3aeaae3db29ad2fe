#!/usr/bin/env bash
# The paper's ablations of PoPE at reduced scale: full PoPE, mu = x ("no softplus"), mu = relu(x), no delta, and
# RoPE, two seeds each, as the 6-layer, 384-wide Shakespeare language model of config/shakespeare_pope.py
# (context 256; the flags below change one switch each); then the test perplexity of each best.pt at 1x, 4x and
# 10x the training context (256, 1024, 2560 tokens) and one table beside the paper's 124M numbers.
# 1000 steps instead of the config's 3000, with an evaluation every 100: the model overfits the 1.4M training
# tokens after ~500 steps (results/language_modelling: its best val loss at step 500 of 3000), so the best
# checkpoint comes within the first 1000 at a third of the cost. The val losses at longer contexts that train.py
# adds to each evaluation are off: eval.extrapolation scores the best checkpoints afterwards.
# What this scale can show: whether a switch moves perplexity by more than the seeds do, and whether it changes
# PoPE's flat extrapolation. What it cannot: the paper's differences at 124M (21.33 to 21.57 OpenWebText
# perplexity, ~1 %) are smaller than what two seeds on 1.4M tokens resolve.
#
#     bash results/ablations/reproduce.sh                     # from the repository root, one GPU
#     JOBS=3 bash results/ablations/reproduce.sh              # three runs at a time
#     RUNS="pope relu" SEEDS=1337 bash results/ablations/reproduce.sh   # some of them
#     RUNS=pope SEEDS=1337 EXTRA="--max_iters=2 --eval_interval=2 --eval_iters=1 --batch_size=4 --eval_contexts= --device=cpu" \
#       EVAL_EXTRA="--device cpu --tokens 5121" OUT=/tmp/ablations bash results/ablations/reproduce.sh
#       # a CPU smoke test: one run, ~6 minutes on 2 cores (most of it final.json's whole-split evaluation)
#
# A run whose $OUT/<run>/final.json exists is not trained again. Logs: $OUT/<run>.log; the table: $OUT/table.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out-ablations}; SEEDS=${SEEDS:-1337 1338}; RUNS=${RUNS:-pope no_softplus relu no_delta rope}
JOBS=${JOBS:-1}; EVAL_EXTRA=${EVAL_EXTRA:-}
EXTRA=${EXTRA:---compile=True --max_iters=1000 --lr_decay_iters=1000 --eval_interval=100 --eval_contexts=}
declare -A FLAGS=([pope]='' [no_softplus]='--pope_mu=identity' [relu]='--pope_mu=relu' [no_delta]='--pope_delta=none'
                  [rope]='--pos_emb=rope')
mkdir -p "$OUT"
(( JOBS > 1 )) && { nvidia-cuda-mps-control -d 2>/dev/null || true; }  # runs on one GPU overlap only under MPS
[ -f data/shakespeare/meta.json ] || python -m prepare.shakespeare

train() {  # run, seed: one training run, its output in $OUT/<run>-s<seed>.log
  # shellcheck disable=SC2086  # FLAGS and EXTRA are lists of flags
  python train.py config/shakespeare_pope.py ${FLAGS[$1]} --seed="$2" --out_dir="$OUT/$1-s$2" --overwrite=True \
    $EXTRA > "$OUT/$1-s$2.log" 2>&1 || { echo "$1-s$2 failed: see $OUT/$1-s$2.log" >&2; return 1; }
}

ckpts=()
for run in $RUNS; do
  for seed in $SEEDS; do
    name=$run-s$seed
    ckpts+=(--ckpt "$OUT/$name/best.pt" --label "$name")
    [ -f "$OUT/$name/final.json" ] && continue
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
    echo "training $name"
    train "$run" "$seed" &
  done
done
while (( $(jobs -rp | wc -l) > 0 )); do wait -n; done

# shellcheck disable=SC2086
python -m eval.extrapolation --data data/shakespeare/test.bin --lengths 256,1024,2560 --tokens 61440 \
  --out "$OUT/extrapolation" "${ckpts[@]}" $EVAL_EXTRA > "$OUT/extrapolation.log" 2>&1
python - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, sys
from collections import defaultdict
out = sys.argv[1]
paper = {'pope': 21.33, 'no_softplus': 21.57, 'relu': 21.55, 'no_delta': 21.42, 'rope': 21.55}
names = {'pope': 'PoPE', 'no_softplus': 'PoPE, mu = x (no softplus)', 'relu': 'PoPE, mu = relu(x)',
         'no_delta': 'PoPE, no delta', 'rope': 'RoPE'}
ppl = defaultdict(lambda: defaultdict(list))  # run -> length -> perplexity per seed
ev = json.load(open(f'{out}/extrapolation/extrapolation.json'))  # eval.extrapolation --out names a folder
results = ev['results']
for r in results:
    ppl[r['label'].rsplit('-s', 1)[0]][r['length']].append(r['ppl'])
lengths = sorted({r['length'] for r in results})
cell = lambda v: f"{sum(v) / len(v):.1f} ({', '.join(f'{x:.1f}' for x in v)})"
print('| run | paper: 124M, OpenWebText val ppl | ' + ' | '.join(
    f'test ppl at {L} ({L // 256}x)' for L in lengths) + ' |')
print('|---|---|' + '---|' * len(lengths))
for run, by_length in ppl.items():
    print(f'| {names[run]} | {paper[run]} | ' + ' | '.join(cell(by_length[L]) for L in lengths) + ' |')
print(f"\nEach cell: the mean over seeds (each seed's in brackets); test perplexity on the first {ev['tokens']:,} tokens "
      f"of {ev['data']}, in windows of each length; the paper's column is its 124M OpenWebText run.")
PY
