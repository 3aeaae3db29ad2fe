#!/usr/bin/env bash
# A CPU probe at toy scale (config/indirect_quick.py: strings of 6-10 letters, shifts up to 3, a 2 x 128
# model, 4000 steps of 32): the training loss on the target token vs on every token (--loss_on), PoPE vs
# RoPE, 3 seeds each. About 1.5 minutes a run on 2 CPU cores.
#   bash results/indirect_indexing/quick_probe.sh      # logs: out-probe/<loss>_<pe>_s<seed>.log
set -u
mkdir -p out-probe
for loss in target all; do
  for pe in pope rope; do
    for seed in 1337 2 3; do
      OMP_NUM_THREADS=2 python train.py config/indirect_quick.py --pos_emb=$pe --loss_on=$loss --seed=$seed \
        --out_dir=out-probe/${loss}_${pe}_s$seed > out-probe/${loss}_${pe}_s$seed.log 2>&1
      echo "${loss} ${pe} seed ${seed}: $(grep -o '"test_acc": [0-9.]*' out-probe/${loss}_${pe}_s$seed/final.json)"
    done
  done
done
