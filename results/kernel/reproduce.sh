#!/usr/bin/env bash
# The kernel benchmark and the kernel's GPU tests of results/kernel/README.md, from the repository root on a machine
# with 2 GPUs (with one GPU the two halves run one after the other). Logs in $LOGS (default out-kernel/logs).
#     bash results/kernel/reproduce.sh        # about 5 minutes on 2 x H200, the tests included
set -euo pipefail
LOGS=${LOGS:-out-kernel/logs}
mkdir -p "$LOGS"
second=1; (( $(nvidia-smi -L | wc -l) > 1 )) || second=0
CUDA_VISIBLE_DEVICES=0 python bench_attention.py --sections table,gqa > "$LOGS/table_gqa.log" 2>&1 &
(( second )) || wait
CUDA_VISIBLE_DEVICES=$second python bench_attention.py --sections graphed,decode,compile \
  > "$LOGS/graphed_decode_compile.log" 2>&1 &
wait
# the compiled kernels against the float64 reference (the CPU suite runs them under the Triton interpreter)
CUDA_VISIBLE_DEVICES=0 TRITON_INTERPRET=0 python -m pytest -q tests/test_pope_kernel.py \
  > "$LOGS/tests_gpu_pope_kernel.log" 2>&1 &
(( second )) || wait
CUDA_VISIBLE_DEVICES=$second TRITON_INTERPRET=0 python -m pytest -q tests/test_model.py tests/test_ce_kernel.py \
  > "$LOGS/tests_gpu_model_ce.log" 2>&1 &
wait
tail -qn1 "$LOGS"/tests_gpu_*.log
