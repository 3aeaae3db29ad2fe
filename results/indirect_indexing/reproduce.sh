#!/usr/bin/env bash
# The indirect-indexing study (results/indirect_indexing/README.md): the paper's recipe, stretched
# to 200k steps (STEPS=100000: the paper's own), in the settings below, several runs at once on one
# GPU under NVIDIA MPS. From the repository root:
#   bash results/indirect_indexing/reproduce.sh start ARM...   # make the data, start each run
#   bash results/indirect_indexing/reproduce.sh wait SECONDS   # wait (or until every run has
#                                                              # ended), show the last evaluations
#   bash results/indirect_indexing/reproduce.sh finish         # stop the study's runs, probe them
# ARM is <setting>_<pope|rope|...>_s<seed>, e.g. leftpad_pope_s1337; settings: paper leftpad
# leftpad_replica leftpad_replica_arch leftpad_nospace leftpad_noshift0 leftpad_nospace_shift0
# shift0 spaces_shift0 bos fixedlen fresh. Each run writes $STUDY/<arm>/ (default out-study/:
# train.log, eval_log.jsonl, ckpt.pt, final.json when it ended, probe/ when its last checkpoint was
# probed, pid while it runs).
# A run ends at STEPS, or once its val accuracy has been >= STOP_ACC at two evaluations in a row
# (STOP_ACC=0: never); the probe of its last checkpoint follows. JOBS=N runs N at a time (default
# 0: all at once): the rest wait in $STUDY/queue, and each starts when a run ends (a runner in the
# background, its id in $STUDY/queue.pid). With $OUT set (the GPU machine), each step packs the
# small files into $OUT/study.tgz.
set -u
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-200000}
STOP_ACC=${STOP_ACC:-0.9}
STUDY=${STUDY:-out-study}
JOBS=${JOBS:-0}
FIRST_LOOK=${FIRST_LOOK:-60}  # seconds from the start to the first look at the runs' logs
export STEPS STOP_ACC STUDY JOBS  # for the queue's runner
. "$(dirname "$0")/../common.sh"

# the config file and train.py flags of each setting, % its encoding
declare -A SETTINGS=(
  [paper]='config/indirect_%.py'  # our rows: right-padded, no spaces, shifts != 0
  [leftpad]='config/indirect_%_leftpad.py'  # the replication's rows (left-padded, spaces)
  # and its model, its layers and init alone (_arch), or as it trained too: float32, decay on all
  [leftpad_replica_arch]='config/indirect_%_leftpad.py --norm=layernorm --bias=True
    --tie_embeddings=False --init=torch'
  [leftpad_replica]='config/indirect_%_leftpad.py --norm=layernorm --bias=True
    --tie_embeddings=False --init=torch --dtype=float32 --weight_decay_on=all'
  [leftpad_nospace]='config/indirect_%.py --dataset=indirect_indexing_leftpad_nospace
    --block_size=56'
  [leftpad_noshift0]='config/indirect_%_leftpad.py --dataset=indirect_indexing_leftpad_noshift0'
  [leftpad_nospace_shift0]='config/indirect_%_leftpad.py
    --dataset=indirect_indexing_leftpad_nospace_shift0'
  [shift0]='config/indirect_%.py --dataset=indirect_indexing_shift0'  # our rows, shifts of 0
  [spaces_shift0]='config/indirect_%.py --dataset=indirect_indexing_spaces_shift0 --block_size=51'
  [bos]='config/indirect_%.py --dataset=indirect_indexing_bos --block_size=48'  # a first token
  [fixedlen]='config/indirect_%.py --dataset=indirect_indexing_fixedlen --block_size=37'  # no pad
  [fresh]='config/indirect_%.py --dataset=indirect_indexing_fresh --example_order=epochs'  # all new
)

args() {  # SETTING ENCODING: the setting's config file and flags, on one line; 1 if no setting
  [ -n "${SETTINGS[$1]:-}" ] || return 1
  local a=${SETTINGS[$1]//%/$2}
  echo $a  # (unquoted: one line)
}

dataset() {  # the data set a setting trains on
  local a; a=$(args "$1" pope)
  case $a in
    *--dataset=*) a=${a#*--dataset=}; echo "${a%% *}" ;;
    *leftpad*) echo indirect_indexing_leftpad ;;
    *) echo indirect_indexing ;;
  esac
}

parse() {  # ARM -> $setting $pe $seed (an encoding may hold an underscore: rope_half); 1 if no arm
  seed=${1##*_s}; local rest=${1%_s*}
  [[ $1 == *_s* && $seed =~ ^[0-9]+$ ]] || return 1
  for pe in rope_half alibi_half sinusoidal learned pope rope; do
    [[ $rest == *_$pe ]] && { setting=${rest%_$pe}; args "$setting" "$pe" > /dev/null; return; }
  done
  return 1
}

launch() {  # one run, then the probe of its last checkpoint, in a process group of its own
  parse "$1"
  local dir=$STUDY/$1
  mkdir -p "$dir"
  # shellcheck disable=SC2046  # the setting's flags, one word each
  setsid nohup bash -c 'python train.py "$@" > "$0/train.log" 2>&1
    [ -f "$0/ckpt.pt" ] && python -m eval.indirect_probe probe "$0/ckpt.pt" --out "$0/probe" \
      > "$0/probe.log" 2>&1
    rm -f "$0/pid"' "$dir" $(args "$setting" "$pe") --seed="$seed" --compile=True \
    --cuda_graph=True --max_iters="$STEPS" --lr_decay_iters="$STEPS" --eval_interval=4000 \
    --log_interval=2000 --early_stop_acc="$STOP_ACC" --out_dir="$dir" < /dev/null > /dev/null 2>&1 &
  echo $! > "$dir/pid"
  echo "started $1 (pid $!): $(args "$setting" "$pe")"
}

queue() {  # the runner of $STUDY/queue: whenever fewer than JOBS runs run, the next one starts
  local arm
  while [ -s "$STUDY/queue" ]; do
    if (( $(compgen -G "$STUDY/*/pid" | wc -l) < JOBS )); then
      arm=$(head -n 1 "$STUDY/queue"); sed -i 1d "$STUDY/queue"
      launch "$arm"
    fi
    sleep 2
  done
  rm -f "$STUDY/queue" "$STUDY/queue.pid"
}

start() {
  [ $# -gt 0 ] || {
    echo "start: name the runs to start, e.g. start leftpad_pope_s1337" >&2; exit 2; }
  [[ $JOBS =~ ^[0-9]+$ ]] \
    || { echo "JOBS=$JOBS: a whole number of runs at a time (0: all at once)" >&2; exit 2; }
  [ -e "$STUDY/queue.pid" ] && { echo "$STUDY has runs queued (runner pid" \
    "$(cat "$STUDY/queue.pid")): wait, or finish first" >&2; exit 2; }
  for arm in "$@"; do  # every name checked before anything starts
    parse "$arm" || { echo "bad run name $arm: <setting>_<encoding>_s<seed> (settings and" \
                           "encodings: --help)" >&2; exit 2; }
    [ -e "$STUDY/$arm/pid" ] \
      && { echo "$STUDY/$arm is running (pid $(cat "$STUDY/$arm/pid"))" >&2; exit 2; }
  done
  mkdir -p "$STUDY"
  local d made=" "
  for arm in "$@"; do  # each data set made once, before the runs (else they would race to make it)
    parse "$arm"; d=$(dataset "$setting")
    [[ $made == *" $d "* || -f data/$d/meta.json ]] && continue
    made+="$d "
    python -m prepare.indirect_indexing --variant "$d" > "$STUDY/prepare_$d.log" 2>&1 \
      || { echo "preparing $d failed: $STUDY/prepare_$d.log" >&2; exit 1; }
  done
  command -v nvidia-cuda-mps-control > /dev/null \
    && { nvidia-cuda-mps-control -d 2>/dev/null || true; }  # runs on one GPU overlap
  local n=$(( JOBS > 0 && JOBS < $# ? JOBS : $# ))
  for arm in "${@:1:n}"; do launch "$arm"; done
  if (( n < $# )); then
    printf '%s\n' "${@:n+1}" > "$STUDY/queue"
    setsid nohup bash "$0" _queue < /dev/null >> "$STUDY/queue.log" 2>&1 &
    echo $! > "$STUDY/queue.pid"
    echo "queued, $JOBS at a time: ${*:n+1}"
  fi
  sleep "$FIRST_LOOK"; show; pack
}

show() {
  [ -s "$STUDY/queue" ] && echo "queued: $(tr '\n' ' ' < "$STUDY/queue")"
  any_run || echo "no run in $STUDY/: start one with bash $0 start RUN..."
  for f in "$STUDY"/*/train.log; do
    [ -f "$f" ] || continue
    echo "== $f: $(grep -c '^iter [0-9]* train_loss' "$f") evaluations$(
      [ -f "$(dirname "$f")/pid" ] || echo ', ended')"
    grep -E '^iter [0-9]+ train_loss|Error|error|^done' "$f" | tail -2 | cut -c1-160
    grep -E '^iter [0-9]+:' "$f" | tail -1
  done
}

any_run() { compgen -G "$STUDY/*/train.log" > /dev/null || [ -s "$STUDY/queue" ]; }  # or queued
running() { compgen -G "$STUDY/*/pid" > /dev/null || [ -s "$STUDY/queue" ]; }

wait_for() {
  [[ ${1:-540} =~ ^[0-9]+$ ]] || {
    echo "wait $1: give a whole number of seconds, e.g. wait 540" >&2; exit 2; }
  local t0=$SECONDS
  while running && (( SECONDS - t0 < ${1:-540} )); do sleep 10; done
  show; pack
}

finish() {  # ends the study's queue and runs (the process groups it started), then probes them
  local p d
  any_run || {
    echo "finish: no run in $STUDY/ to stop or probe: start one with bash $0 start RUN..." >&2
    exit 1; }
  [ -f "$STUDY/queue.pid" ] && kill -- "-$(cat "$STUDY/queue.pid")" 2>/dev/null
  rm -f "$STUDY/queue" "$STUDY/queue.pid"
  for p in "$STUDY"/*/pid; do
    [ -f "$p" ] || continue
    kill -- "-$(cat "$p")" 2>/dev/null; rm -f "$p"
  done
  sleep 5
  for d in "$STUDY"/*/; do  # (a probe writes summary.md last)
    [ -f "$d/ckpt.pt" ] && [ ! -f "$d/probe/summary.md" ] && python -m eval.indirect_probe probe \
      "$d/ckpt.pt" --out "$d/probe" > "$d/probe.log" 2>&1
  done
  show; pack
}

case ${1:-} in
  start) shift; start "$@" ;;
  wait) wait_for "${2:-540}" ;;
  finish) finish ;;
  _queue) queue ;;  # start's runner of the queue
  -h|--help) usage ;;
  *) usage >&2; echo "$0: ${1:+unknown verb '$1': }give start RUN..., wait SECONDS or finish" \
       "(see above)" >&2; exit 2 ;;
esac
