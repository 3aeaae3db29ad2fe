#!/usr/bin/env bash
# The language-modelling study on the Linux kernel's C (results/linux_c/README.md): PoPE and RoPE
# pre-trained (config/linux_c_pope.py, linux_c_rope.py), each fine-tuned at 4x its context
# (config/linux_c_pope_ft.py, linux_c_rope_yarn_ft.py), every model scored at 1x-10x its context
# inside documents and across them (eval.extrapolation), and each seed's pair read for its
# frequency usage; several arms at once on one GPU under NVIDIA MPS. From the repository root:
#   bash results/linux_c/reproduce.sh start ARM...   # make the data if needed, start each arm
#   bash results/linux_c/reproduce.sh wait SECONDS   # wait that long, or until every arm has
#                                                    # ended; show progress
#   bash results/linux_c/reproduce.sh finish         # the frequency usage of each seed whose two
#                                                    # pre-trainings ended
#   python results/linux_c/study.py $STUDY           # the page's results.md and figures
# ARM is <pope|rope>_s<seed>, e.g. pope_s1337: pre-training, the scores of the pre-trained model,
# the fine-tune, its scores, one after the other, in $STUDY/runs/<arm>/ (default
# STUDY=out-linux-c): pretrain/ and ft/ (train.py's run folders) with pretrain.log and ft.log;
# documents/ and stream/ (eval.extrapolation's files for the pre-trained model) and ft_documents/,
# ft_stream/ (for the fine-tuned one), each with its log; `done` once the arm has ended, `pid`
# while it runs. The frequency usage goes to $STUDY/frequency_usage_s<seed>.*. An arm done is not
# started again; one that failed (wait names its step and log) or was killed starts from the
# beginning.
# ARM may also name a model size, <pope|rope>-<16m|124m>_s<seed>
# (config/linux_c_<pope|rope>_<size>.py: 4 x 256 and 12 x 768; the plain names are 8 x 512, ~51M
# parameters): pre-trained and scored, no fine-tune. Or one of the paper's PoPE ablations,
# pope-<nosoftplus|relu|nodelta>_s<seed> (mu = x, mu = relu(x), no delta:
# config/owt_pope_no_softplus.py, _relu.py, _no_delta.py): pre-trained and scored as PoPE, no
# fine-tune.
# WINDOWS=documents scores inside documents alone (the default also scores across them: "documents
# stream"). FINETUNE=0 ends the arms it starts once their pre-trained model is scored (no
# fine-tune; the arm counts as done).
# Data: data/linux_c, made by `python -m prepare.linux_c` (SOURCE=<file or folder> passes
# --source). PRETRAIN_EXTRA, FT_EXTRA and EVAL_EXTRA add flags (a CPU smoke run on a small
# data/linux_c: PRETRAIN_EXTRA="--device=cpu --max_iters=4 --eval_interval=2 --eval_iters=1
# --batch_size=8 --block_size=64 --n_layer=1 --n_embd=32 --n_head=2 --eval_contexts="
# FT_EXTRA="--device=cpu --max_iters=2 --eval_interval=2 --eval_iters=1 --block_size=128"
# EVAL_EXTRA="--device cpu" LENGTHS=64,128,640 STREAM_TOKENS=2561). With $OUT set (the GPU
# machine), each verb packs the arms' small files (no checkpoints) into $OUT/study.tgz.
set -u
cd "$(dirname "$0")/../.."
. results/common.sh
export PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}  # arms share
STUDY=${STUDY:-out-linux-c}
PRETRAIN_EXTRA=${PRETRAIN_EXTRA:---compile=True}
FT_EXTRA=${FT_EXTRA:---compile=True}
EVAL_EXTRA=${EVAL_EXTRA:---batch_size 16}
LENGTHS=${LENGTHS:-1024,2048,4096,8192,10240}  # 1x, 2x, 4x, 8x, 10x the pre-training context
STREAM_TOKENS=${STREAM_TOKENS:-2048001}  # across documents: 200 windows of 10240, as documents give
WINDOWS=${WINDOWS:-documents stream}  # which windows score the models: inside documents, across
FINETUNE=${FINETUNE:-1}  # 0: no fine-tune at 4x
export STUDY PRETRAIN_EXTRA FT_EXTRA EVAL_EXTRA LENGTHS STREAM_TOKENS WINDOWS FINETUNE

# ARM -> $pe $seed $config, an ablation's $flags (train.py's, on config/linux_c_pope.py), a size's
# $sized, and $label (eval.extrapolation's); 1 if it is no arm's name (a seed as train.py reads it)
parse() {
  pe=${1%_s*}; seed=${1##*_s}; flags=; label=; config=config/linux_c_${pe%%-*}.py; sized=
  case $pe in
    pope|rope) ;;
    pope-16m|rope-16m|pope-124m|rope-124m)  # labels 'PoPE 16M', 'RoPE 124M'
      config=config/linux_c_${pe/-/_}.py; sized=1; label="${pe%%-*} ${pe#*-}"
      label=${label/pope/PoPE}; label=${label/rope/RoPE}; label=${label/m/M} ;;
    pope-nosoftplus) flags=--pope_mu=identity; label="PoPE, no softplus" ;;
    pope-relu) flags=--pope_mu=relu; label="PoPE, ReLU" ;;
    pope-nodelta) flags=--pope_delta=none; label="PoPE, no delta" ;;
    *) return 1 ;;
  esac
  [[ $1 == *_s* && $seed =~ ^(0|[1-9][0-9]*)$ ]]
}

alive() {  # ARM: 0 while the arm's process runs (the pid file of a machine gone down is stale)
  [ -f "$STUDY/runs/$1/pid" ] && kill -0 "$(cat "$STUDY/runs/$1/pid")" 2> /dev/null
}

step() {  # LOG COMMAND...: one step of an arm, its output in LOG; if it fails, a line for show
  local log=$1
  shift
  "$@" > "$log" 2>&1 || { echo "failed: $log: $(tail -n 1 "$log" | cut -c1-300)"; return 1; }
}

score() {  # STAGE CKPT_ARGS...: the test loss of an arm's models at 1x-10x, in each of $WINDOWS
  local stage=$1 windows tokens
  shift
  for windows in $WINDOWS; do
    tokens=$([ "$windows" = documents ] && echo 100000000000 || echo "$STREAM_TOKENS")
    # shellcheck disable=SC2086  # EVAL_EXTRA is a list of flags
    step "$dir/$stage$windows.log" python -m eval.extrapolation --data data/linux_c/test.bin \
      --windows "$windows" --tokens "$tokens" --lengths "$LENGTHS" "$@" \
      --out "$dir/$stage$windows" $EVAL_EXTRA || return 1
  done
}

arm() {  # one arm, start to end (start's process group); each model scored as soon as it exists
  parse "$1"
  local dir=$STUDY/runs/$1 ft
  # shellcheck disable=SC2086  # the EXTRA variables and an ablation's flags are lists of flags
  step "$dir/pretrain.log" python train.py "$config" $flags --seed="$seed" \
    --out_dir="$dir/pretrain" --overwrite=True $PRETRAIN_EXTRA || return 1
  if [ "${pe%%-*}" != rope ]; then  # PoPE, an ablation of it, or a size of it
    score "" --ckpt "$dir/pretrain/ckpt.pt" --label "${label:-PoPE}" || return 1
  else  # YaRN's scale: 1 (none), and 10 with no fine-tune
    score "" --ckpt "$dir/pretrain/ckpt.pt" --yarn_scale 1 --label "${label:-RoPE}" --ckpt \
      "$dir/pretrain/ckpt.pt" --yarn_scale 10 --label "${label:-RoPE}+YaRN s=10 (no fine-tune)" \
      || return 1
  fi
  # FINETUNE=0 ends here, and so do the ablations and the sizes whatever it says (the paper's
  # are in-distribution numbers)
  { [ "$FINETUNE" = 0 ] || [ -n "$flags$sized" ]; } && { touch "$dir/done"; return 0; }
  ft=$([ "$pe" = pope ] && echo config/linux_c_pope_ft.py || echo config/linux_c_rope_yarn_ft.py)
  # shellcheck disable=SC2086
  step "$dir/ft.log" python train.py "$ft" --init_from="$dir/pretrain/ckpt.pt" --seed="$seed" \
    --out_dir="$dir/ft" --overwrite=True $FT_EXTRA || return 1
  if [ "$pe" = pope ]; then
    score ft_ --ckpt "$dir/ft/ckpt.pt" --label "PoPE, fine-tuned at 4096" || return 1
  else  # the fine-tune's YaRN scale, 4
    score ft_ --ckpt "$dir/ft/ckpt.pt" --yarn_scale 4 --label "RoPE+YaRN s=4, fine-tuned at 4096" \
      || return 1
  fi
  touch "$dir/done"
}

start() {
  refuse() { echo "$@" >&2; exit 2; }
  [ $# -gt 0 ] || refuse "start: name the arms to start, e.g. start pope_s1337 rope_s1337"
  [[ $FINETUNE =~ ^[01]$ ]] \
    || refuse "FINETUNE=$FINETUNE: give 1 (fine-tune at 4x, the default) or 0"
  local a
  local -A named=()
  for a in "$@"; do  # every name checked before anything starts
    parse "$a" || refuse "bad arm name $a: <pope|rope>_s<seed>, <pope|rope>-<16m|124m>_s<seed> or" \
                         "pope-<nosoftplus|relu|nodelta>_s<seed>, e.g. pope_s1337"
    [ -n "${named[$a]:-}" ] && refuse "$a is named twice: name each arm once"
    named[$a]=1
    alive "$a" && refuse "$STUDY/runs/$a is running (pid $(cat "$STUDY/runs/$a/pid")): wait for it"
  done
  if [ ! -f data/linux_c/meta.json ]; then
    mkdir -p "$STUDY"
    python -m prepare.linux_c ${SOURCE:+--source "$SOURCE"} > "$STUDY/prepare.log" 2>&1 \
      || { echo "preparing data/linux_c failed ($STUDY/prepare.log):" \
                "$(tail -n 1 "$STUDY/prepare.log")" >&2; exit 1; }
  fi
  command -v nvidia-cuda-mps-control > /dev/null \
    && { nvidia-cuda-mps-control -d 2>/dev/null || true; }  # runs on one GPU overlap
  for a in "$@"; do
    [ -f "$STUDY/runs/$a/done" ] \
      && { echo "$a: done before (its folder: $STUDY/runs/$a)"; continue; }
    mkdir -p "$STUDY/runs/$a"
    setsid nohup bash -c 'bash "$0" _arm "$1"; rm -f "$2/pid"' "$0" "$a" "$STUDY/runs/$a" \
      < /dev/null > "$STUDY/runs/$a/arm.log" 2>&1 &
    echo $! > "$STUDY/runs/$a/pid"
    echo "started $a (pid $!)"
  done
  pack
}

show() {
  local d log a why
  compgen -G "$STUDY/runs/*/arm.log" > /dev/null \
    || echo "no arm in $STUDY/runs/: start one with bash $0 start ARM..."
  for d in "$STUDY"/runs/*/; do
    [ -f "$d/arm.log" ] || continue
    a=$(basename "$d")
    log=$d/pretrain.log
    [ -f "$d/ft.log" ] && log=$d/ft.log
    if [ -f "$d/done" ]; then echo "== $d: done"
    elif alive "$a"; then echo "== $d: running"
    else  # its step's failure, as arm wrote it; none where the arm was killed
      why=$(grep -h '^failed: ' "$d/arm.log" | tail -n 1 | cut -c1-300)
      echo "== $d: ended, not done (${why:-stopped, no step failed: see its logs}); start it" \
        "again: bash $0 start $a"
    fi
    grep -E '^iter [0-9]+ train_loss|Error|error' "$log" 2>/dev/null | tail -1 | cut -c1-200
    grep -E '^iter [0-9]+:' "$log" 2>/dev/null | tail -1
  done
}

running() {
  local p
  for p in "$STUDY"/runs/*/pid; do
    [ -f "$p" ] && alive "$(basename "$(dirname "$p")")" && return 0
  done
  return 1
}

wait_for() {
  [[ ${1:-540} =~ ^[0-9]+$ ]] \
    || { echo "wait $1: give a whole number of seconds, e.g. wait 540" >&2; exit 2; }
  local t0=$SECONDS
  while running && (( SECONDS - t0 < ${1:-540} )); do sleep 10; done
  show; pack
}

finish() {  # each seed whose two pre-trainings have ended: the frequency usage of its pair
  local p seed pairs=0
  for p in "$STUDY"/runs/pope_s*/pretrain/final.json; do  # PoPE's arms (an ablation's: pope-..._s)
    [ -f "$p" ] || continue
    seed=${p%/pretrain/final.json}; seed=${seed##*/pope_s}
    [ -f "$STUDY/runs/rope_s$seed/pretrain/final.json" ] || continue
    pairs=$((pairs + 1))
    [ -f "$STUDY/frequency_usage_s$seed.json" ] && continue  # made before
    python -m eval.frequency_usage --rope "$STUDY/runs/rope_s$seed/pretrain/ckpt.pt" \
      --pope "$STUDY/runs/pope_s$seed/pretrain/ckpt.pt" --data data/linux_c/test.bin \
      --tokens 65536 --out "$STUDY/frequency_usage_s$seed" \
      > "$STUDY/frequency_usage_s$seed.log" 2>&1 \
      || echo "frequency usage of seed $seed failed: see $STUDY/frequency_usage_s$seed.log" >&2
  done
  show; pack
  [ $pairs -gt 0 ] || { echo "finish: no seed has both its pre-trainings ended in $STUDY/runs/" \
                             "yet: wait for them (bash $0 wait SECONDS)" >&2; exit 1; }
}

case ${1:-} in
  start) shift; start "$@" ;;
  wait) wait_for "${2:-540}" ;;
  finish) finish ;;
  _arm) arm "$2" ;;  # start's background work for one arm
  -h|--help) usage ;;
  *) usage >&2
     echo "$0: ${1:+unknown verb '$1': }give start ARM..., wait SECONDS or finish (see above)" >&2
     exit 2 ;;
esac
