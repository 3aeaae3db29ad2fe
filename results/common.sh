# Sourced by results/*/reproduce*.sh: the usage, the checks of arguments and settings before
# anything runs, a training run with its log, and the numbers of each run's final.json in one line.

usage() {  # the script's opening comment, without its '#'
  awk 'NR == 1 {next} !/^#/ {exit} {sub(/^# ?/, ""); print}' "$0"
}

only_args() {  # "ALLOWED WORDS" ARG...: usage and exit 0 on -h/--help; usage and exit 2 on others
  local allowed=" $1 " a
  shift
  for a in "$@"; do
    case $a in -h|--help) usage; exit 0 ;; esac
    [[ $allowed == *" $a "* ]] \
      || { usage >&2; echo "$0: unknown argument '$a' (see above)" >&2; exit 2; }
  done
}

positive() {  # NAME VALUE: exit 2 unless VALUE is a whole number of 1 or more
  [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "$0: $1=$2: give a whole number of 1 or more" >&2; exit 2; }
}

need_gpu() {  # exit 1 where neither nvidia-smi nor torch finds an NVIDIA GPU
  if ! nvidia-smi -L 2> /dev/null | grep -q GPU \
     || ! python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2> /dev/null; then
    echo "$0 needs an NVIDIA GPU, and finds none here (nvidia-smi, torch.cuda): run it on a GPU" \
      "machine" >&2
    exit 1
  fi
}

train_into() {  # NAME FLAGS...: train.py into $OUT/NAME, its output in $OUT/NAME.log; 1 if it fails
  local name=$1
  shift
  python train.py "$@" --out_dir="$OUT/$name" --overwrite=True > "$OUT/$name.log" 2>&1 \
    || { echo "$name failed: see $OUT/$name.log" >&2; return 1; }
}

pack() {  # with $OUT set (a GPU machine: its files come back), the study's small files in a tarball
  [ -n "${OUT:-}" ] || return 0
  # (a checkpoint being saved is *.pt.tmp until it is renamed)
  tar czf "$OUT/study.tgz" --exclude='*.pt' --exclude='*.pt.tmp' "$STUDY" 2>/dev/null
}

final_summary() {  # FINAL_JSON...: a line per run: its val and test loss (and accuracy)
  python -c '
import json, sys
for path in sys.argv[1:]:
    final = json.load(open(path))
    keys = [k for k in ("val_loss", "val_acc", "test_loss", "test_acc") if k in final]
    iters = final.get("iter")
    print(f"{path}: {iters} iterations, " + ", ".join(f"{k} {final[k]:.4f}" for k in keys))
' "$@"
}
