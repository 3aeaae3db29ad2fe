#!/usr/bin/env bash
# The kernel benchmark and the kernel's GPU tests of results/kernel/README.md, from the repository
# root on a machine with 2 GPUs (with one GPU the two halves run one after the other; without a GPU
# it stops at once). Logs in $LOGS (default out-kernel/logs); a benchmark or test that fails names
# its log and makes the script fail.
#     bash results/kernel/reproduce.sh        # about 5 minutes on 2 x H200, the tests included
set -euo pipefail
cd "$(dirname "$0")/../.."
. results/common.sh
only_args "" "$@"
need_gpu
LOGS=${LOGS:-out-kernel/logs}
mkdir -p "$LOGS"
second=1; (( $(nvidia-smi -L | wc -l) > 1 )) || second=0
failed=0
on() {  # GPU LOG COMMAND...: the command on that GPU in the background; its pid, log in pids, logs
  local gpu=$1 log=$2
  shift 2
  CUDA_VISIBLE_DEVICES=$gpu "$@" > "$LOGS/$log" 2>&1 &
  pids+=($!); logs+=("$LOGS/$log")
  (( second )) || finish  # one GPU: one at a time
}
finish() {  # waits for each job started by `on`; a failure names its log
  local i
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "failed: ${logs[$i]}" >&2; failed=1; }
  done
  pids=(); logs=()
}
pids=(); logs=()
on 0 table_gqa.log python bench_attention.py --sections table,gqa,options
on $second graphed_decode_compile.log python bench_attention.py --sections graphed,decode,compile
finish
# the compiled kernels against the float64 reference (the CPU suite runs the Triton interpreter)
on 0 tests_gpu_pope_kernel.log env TRITON_INTERPRET=0 python -m pytest -q \
  tests/test_pope_kernel.py
on $second tests_gpu_model_ce.log env TRITON_INTERPRET=0 python -m pytest -q tests/test_model.py \
  tests/test_ce_kernel.py
finish
tail -qn1 "$LOGS"/tests_gpu_*.log
exit $failed
