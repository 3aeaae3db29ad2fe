#!/usr/bin/env bash
# One GPU session of round 3 on a 2 x H200 machine, in two calls of at most 10 minutes (the device tool's limit;
# round 4's calls: results/speed/run.sh one, ddp, indirect_paths);
# everything it starts writes logs under out-logs/, and part2 packs them into $OUT/results.tgz.
#   part1: the indirect-indexing data on the CPU; the timed runs (results/speed/run.sh: speed, nanoGPT, kernel,
#          DDP; GPUs to themselves); then, under NVIDIA MPS and in the background, the probes and the Shakespeare
#          LM (results/run_all.sh lm probes), the GPU resume check (results/resume_gpu.sh) and, on the CPU,
#          eval.attention_reach.
#   part2: waits for the background runs (until $DEADLINE seconds), then the probe table and analyses, then packs.
#     bash results/gpu_session.sh part1; bash results/gpu_session.sh part2
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p out-logs

part1() {
  nvidia-smi --query-gpu=name,memory.used --format=csv
  for v in indirect_indexing indirect_indexing_{spaces,next,prev,start,end,shift3}; do
    [ -f data/$v/meta.json ] || python -m prepare.indirect_indexing --variant $v > /dev/null &
  done
  LOGS=out-logs/speed timeout 500 bash results/speed/run.sh one 2>&1 | tee out-logs/speed_run.log  # capped
  wait  # (the data, long done)
  nvidia-cuda-mps-control -d
  # the CUDA-graph step of PoPE ran in the speed phase (indirect_pope_10k); without its final line, probe without it
  grep -q "^final: " out-logs/speed/indirect_pope_10k.log || export EXTRA="--cuda_graph=False"
  setsid nohup bash -c 'GPUS=2 PER_GPU=27 LOGS=out-logs bash results/run_all.sh lm probes' \
    > out-logs/run_all_queue_probes.log 2>&1 < /dev/null &
  setsid nohup bash -c 'CUDA_VISIBLE_DEVICES=0 bash results/resume_gpu.sh' > out-logs/resume_gpu.log 2>&1 < /dev/null &
  setsid nohup python -m eval.attention_reach --out out-logs/attention_reach > out-logs/attention_reach.log 2>&1 \
    < /dev/null &
  sleep 20
  pack
}

part2() {
  local t0=$SECONDS
  until grep -q "all done" out-logs/run_all_queue_probes.log && grep -q "resume on the GPU\|Error" out-logs/resume_gpu.log \
        || (( SECONDS - t0 > ${DEADLINE:-380} )); do
    sleep 15
    echo "$(date +%T) $(grep -c ' end ' out-logs/run_all_queue_probes.log) runs ended"
  done
  tail -3 out-logs/run_all_queue_probes.log
  python -m eval.indirect_probe table out-probe_* > out-logs/probe_table.md 2>&1
  timeout 90 python -m eval.indirect_probe probe out-probe_spaces_{rope,pope,dlr100,nosoftplus,base100_zero16}/ckpt.pt \
    --device cuda --out out-logs/probe_spaces > out-logs/probe_spaces.log 2>&1
  timeout 70 python -m eval.indirect_probe probe out-probe_{start,end,next}_{pope,rope}_s1337/ckpt.pt \
    --device cuda --out out-logs/probe_subtasks > out-logs/probe_subtasks.log 2>&1
  pack
}

pack() {  # logs, eval logs, final.json and analyses (no checkpoints) into $OUT/results.tgz
  tar -czf "$OUT/results.tgz" out-logs $(ls -d out-*/eval_log.jsonl out-*/final.json out-lm-eval 2>/dev/null)
  ls -la "$OUT"
}

"$@"
