# Sourced by results/*/reproduce.sh: its usage, its arguments and settings checked before anything runs, and the
# numbers of each run's final.json in one line.

usage() {  # the script's opening comment, without its '#'
  awk 'NR == 1 {next} !/^#/ {exit} {sub(/^# ?/, ""); print}' "$0"
}

only_args() {  # "ALLOWED WORDS" ARG...: the usage and exit 0 on -h/--help; the usage and exit 2 on any other word
  local allowed=" $1 " a
  shift
  for a in "$@"; do
    case $a in -h|--help) usage; exit 0 ;; esac
    [[ $allowed == *" $a "* ]] || { usage >&2; echo "$0: unknown argument '$a' (see above)" >&2; exit 2; }
  done
}

positive() {  # NAME VALUE: exit 2 unless VALUE is a whole number of 1 or more
  [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "$0: $1=$2: give a whole number of 1 or more" >&2; exit 2; }
}

need_gpu() {  # exit 1 where neither nvidia-smi nor torch finds an NVIDIA GPU
  if ! nvidia-smi -L 2> /dev/null | grep -q GPU \
     || ! python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2> /dev/null; then
    echo "$0 needs an NVIDIA GPU, and finds none here (nvidia-smi, torch.cuda): run it on a GPU machine" >&2
    exit 1
  fi
}

final_summary() {  # FINAL_JSON...: one line per run: its val and test loss (and accuracy) on the whole splits
  python -c '
import json, sys
for path in sys.argv[1:]:
    final = json.load(open(path))
    scores = [f"{k} {final[k]:.4f}" for k in ("val_loss", "val_acc", "test_loss", "test_acc") if k in final]
    iters = final.get("iter")
    print(f"{path}: {iters} iterations, " + ", ".join(scores))
' "$@"
}
