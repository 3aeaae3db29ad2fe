#!/usr/bin/env bash
# The indirect-indexing study (results/indirect_indexing/README.md): the paper's recipe, stretched to 200k steps
# (STEPS=100000: the paper's own), in the settings below, several runs at once on one GPU under NVIDIA MPS.
# From the repository root:
#   bash results/indirect_indexing/reproduce.sh start ARM...   # make the data, start each run in the background
#   bash results/indirect_indexing/reproduce.sh wait SECONDS   # wait (or until every run has ended), show the last evals
#   bash results/indirect_indexing/reproduce.sh finish         # stop what still runs; probe each run's last checkpoint
# ARM is <setting>_<pope|rope>_s<seed>, e.g. leftpad_pope_s1337. Each run writes out-study/<arm>/ (train.log,
# eval_log.jsonl, ckpt.pt, final.json when it reached max_iters, probe/ after finish); with $OUT set (the GPU
# machine), each step also packs the small files into $OUT/study.tgz.
set -u
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-200000}

args() {  # the config file and train.py flags of a setting, for encoding $2
  case $1 in
    paper) echo "config/indirect_$2.py" ;;                      # our rows: right-padded, no spaces, shifts != 0
    leftpad) echo "config/indirect_$2_leftpad.py" ;;            # the replication's rows (left-padded, spaces)
    leftpad_replica) echo "config/indirect_$2_leftpad.py --norm=layernorm --bias=True --tie_embeddings=False" \
                          "--init=torch" ;;                      # and the replication's model
    leftpad_nospace) echo "config/indirect_$2.py --dataset=indirect_indexing_leftpad_nospace --block_size=56" ;;
    shift0) echo "config/indirect_$2.py --dataset=indirect_indexing_shift0" ;;   # our rows, shifts of 0 allowed
    bos) echo "config/indirect_$2.py --dataset=indirect_indexing_bos --block_size=48" ;;  # a constant first token
    fresh) echo "config/indirect_$2.py --dataset=indirect_indexing_fresh --example_order=epochs" ;;  # none seen twice
    *) echo "unknown setting $1" >&2; exit 2 ;;
  esac
}

dataset() {  # the data set a setting trains on
  local a; a=$(args "$1" pope)
  case $a in *--dataset=*) a=${a#*--dataset=}; echo "${a%% *}" ;; *leftpad*) echo indirect_indexing_leftpad ;;
    *) echo indirect_indexing ;; esac
}

parse() {  # ARM -> $setting $pe $seed (encodings may hold an underscore: rope_half_s2)
  seed=${1##*_s}; local rest=${1%_s*}
  for pe in rope_half alibi_half sinusoidal learned pope rope; do
    [[ $rest == *_$pe ]] && { setting=${rest%_$pe}; return; }
  done
  echo "bad run name $1: <setting>_<encoding>_s<seed>" >&2; exit 2
}

pack() {
  [ -n "${OUT:-}" ] || return 0
  tar czf "$OUT/study.tgz" --exclude='*.pt' out-study 2>/dev/null
}

start() {
  mkdir -p out-study
  nvidia-cuda-mps-control -d 2>/dev/null || true  # runs on one GPU overlap only under MPS
  for arm in "$@"; do  # the data sets first, each made once (in parallel)
    parse "$arm"; local d; d=$(dataset "$setting")
    [ -f data/$d/meta.json ] || python -m prepare.indirect_indexing --variant "$d" > out-study/prepare_$d.log 2>&1 &
  done
  wait
  for arm in "$@"; do
    parse "$arm"
    mkdir -p out-study/$arm
    setsid nohup python train.py $(args "$setting" "$pe") --seed=$seed --compile=True \
      --cuda_graph=True --max_iters=$STEPS --lr_decay_iters=$STEPS --eval_interval=4000 --log_interval=2000 \
      --out_dir=out-study/$arm > out-study/$arm/train.log 2>&1 < /dev/null &
    echo "started $arm: $(args "$setting" "$pe")"
  done
  sleep 60; show; pack
}

show() {
  for f in out-study/*/train.log; do
    echo "== $f: $(grep -c '^iter [0-9]* train_loss' "$f") evaluations"
    grep -E '^iter [0-9]+ train_loss|Error|error' "$f" | tail -2 | cut -c1-160
    grep -E '^iter [0-9]+:' "$f" | tail -1
  done
}

running() { pgrep -f "^python train.py config/indirect" > /dev/null; }

wait_for() {
  local t0=$SECONDS
  while running && (( SECONDS - t0 < $1 )); do sleep 10; done
  show; pack
}

finish() {
  pkill -f "^python train.py config/indirect" && sleep 5
  for d in out-study/*/; do
    [ -f "$d/ckpt.pt" ] && python -m eval.indirect_probe probe "$d/ckpt.pt" --out "$d/probe" --device cuda \
      > "$d/probe.log" 2>&1
  done
  show; pack
}

case ${1:-} in
  start) shift; start "$@" ;;
  wait) wait_for "${2:-540}" ;;
  finish) finish ;;
  *) sed -n 2,9p "$0"; exit 2 ;;
esac
