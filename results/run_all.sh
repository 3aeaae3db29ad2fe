#!/usr/bin/env bash
# Every GPU run behind the pages in results/, as stages:
#   prepare   data for all stages (the offline sources of README "Experiments"; skipped where data/ has it)
#   speed     124M steps of nanoGPT, RoPE, PoPE (profiles), the indirect-indexing step, DDP on 2 GPUs, the kernel
#             tests and GPU-time benchmark (results/speed/run.sh)          -> results/speed.md
#   lm        Shakespeare LM, RoPE vs PoPE (context 256), 4x fine-tunes (RoPE+YaRN, PoPE), extrapolation
#             to 10x and frequency usage                         -> results/shakespeare_lm.md
#   music     JSB chorales (paper scale), MAESTRO and E. coli genome (reduced), RoPE vs PoPE -> results/music_genome.md
#   indirect  indirect indexing, 6 encodings x 3 seeds, the paper's schedule -> results/indirect_indexing.md
#   readings  indirect indexing, other readings of the task, PoPE and RoPE -> results/indirect_indexing.md
#   probes    indirect indexing, issue #16: sub-tasks x PoPE/RoPE/RoPE-half x 3 seeds, PoPE hypotheses on the
#             spaces format (short schedules, <= 11 min on 2 H200s under MPS) -> results/indirect_probes.md
#   probes_more  what did not fit the probes' budget: the hypotheses on the default format, batch 64
#
#   bash results/run_all.sh                                  # all stages, one GPU, one run at a time
#   GPUS=2 PER_GPU=8 bash results/run_all.sh lm music indirect   # 8 runs at a time on each of 2 GPUs
#   DRY=1 bash results/run_all.sh indirect                    # print the commands only
#
# Runs on one GPU overlap only under NVIDIA MPS (without it the GPU time-slices between processes); start it
# first: `nvidia-cuda-mps-control -d`. Even then CUDA-graph runs gained only 1.1-1.7x (results/indirect_indexing.md).
# Logs: $LOGS/<run>.log (default out-logs/), run folders out-<run>/, analyses out-lm-eval/.
# EXTRA="--key=value ..." is appended to every train.py command (e.g. a smoke test with --max_iters=2).
# SKIP=regex skips runs whose name matches (e.g. runs already made).
#
# Time on the 2 x H200 machine (torch 2.11; queue log of that session: results/run_all_queue.log):
#   prepare 21 s; speed ~15 min (GPUs to itself);
#   then under MPS with 8 runs per GPU at once: lm 7.0 min, each music run 2.4-4.1 min;
#   indirect: one 100k-step run alone takes 5.7 (RoPE) / 8.1 (PoPE) min, 20-22 min when sharing a GPU with
#   7 others for its first half, 24-25.5 min as one of 6 on a GPU (results/indirect_indexing/run_all_queue_others.log);
#   all 18 need ~50 min of 2 GPUs; readings (10 runs) not run yet.
set -u
GPUS=${GPUS:-1}; PER_GPU=${PER_GPU:-1}; LOGS=${LOGS:-out-logs}; EXTRA=${EXTRA:-}; SKIP=${SKIP:-^$}
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-2} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$LOGS"
started=0

job() {  # name, command...: start it when one of GPUS*PER_GPU slots is free; GPUs taken in turn
  local name=$1; shift
  if [[ $name =~ $SKIP ]]; then echo "skip $name"; return; fi
  if [[ -n ${DRY:-} ]]; then echo "$name: $*"; return; fi
  while (( $(jobs -rp | wc -l) >= GPUS * PER_GPU )); do wait -n; done
  local gpu=$(( started % GPUS )); started=$(( started + 1 ))
  echo "$(date +%T) start $name on GPU $gpu"
  ( CUDA_VISIBLE_DEVICES=$gpu "$@" > "$LOGS/$name.log" 2>&1; rc=$?; echo "$(date +%T) end $name, exit $rc" ) &
}

prepare() {
  for v in indirect_indexing indirect_indexing_spaces indirect_indexing_len40 indirect_indexing_shift0 \
           indirect_indexing_{next,prev,start,end,shift3}; do
    [ -f data/$v/meta.json ] || python -m prepare.indirect_indexing --variant $v > /dev/null &
  done
  wait
  [ -f data/shakespeare/meta.json ] || python -m prepare.shakespeare
  [ -f data/jsb_chorales/meta.json ] || python -m prepare.jsb_chorales
  [ -f data/maestro/meta.json ] || echo "data/maestro missing: see python -m prepare.maestro --help (offline: miditok's files)"
  [ -f data/genome/meta.json ] || python -m prepare.genome --source ecoli
}

speed() {  # results/speed.md: the step benchmarks, each run with its GPU to itself (2 GPUs; see its header)
  for part in one ddp indirect_paths; do LOGS="$LOGS/speed" bash results/speed/run.sh $part; done
}

lm() {  # one job: the two trainings side by side, then the fine-tunes, then the analyses
  local ev=out-lm-eval
  job lm bash -c "
    python train.py config/shakespeare_rope.py --compile=True --out_dir=out-lm-rope $EXTRA > $LOGS/lm_rope.log 2>&1 &
    python train.py config/shakespeare_pope.py --compile=True --out_dir=out-lm-pope $EXTRA > $LOGS/lm_pope.log 2>&1 &
    wait
    ft='--dataset=shakespeare --block_size=1024 --yarn_orig_ctx=256 --batch_size=16 --gradient_accumulation_steps=1 --max_iters=200 --eval_interval=50'
    python train.py config/owt_rope_yarn_ft.py \$ft --init_from=out-lm-rope/best.pt --out_dir=out-lm-rope-yarn-ft $EXTRA > $LOGS/lm_rope_yarn_ft.log 2>&1 &
    python train.py config/owt_pope_ft.py \$ft --init_from=out-lm-pope/best.pt --out_dir=out-lm-pope-ft $EXTRA > $LOGS/lm_pope_ft.log 2>&1 &
    wait
    mkdir -p $ev
    python -m eval.extrapolation --data data/shakespeare/test.bin --lengths 256,512,768,1024,1280,1536,1792,2048,2304,2560 \
      --tokens 61440 --out $ev/extrapolation \
      --ckpt out-lm-rope/best.pt --yarn_scale 1 --label 'RoPE' --ckpt out-lm-pope/best.pt --yarn_scale 1 --label 'PoPE' \
      --ckpt out-lm-rope/best.pt --yarn_scale 10 --label 'RoPE+YaRN s=10 (no fine-tune)' \
      --ckpt out-lm-rope-yarn-ft/ckpt.pt --yarn_scale 4 --label 'RoPE+YaRN s=4, fine-tuned at 1024' \
      --ckpt out-lm-pope-ft/ckpt.pt --yarn_scale 1 --label 'PoPE, fine-tuned at 1024'
    python -m eval.frequency_usage --rope out-lm-rope/best.pt --pope out-lm-pope/best.pt --data data/shakespeare/test.bin \
      --tokens 61440 --out $ev/frequency_usage"
}

music() {
  for pe in rope pope; do
    job jsb_$pe python train.py config/jsb_$pe.py --compile=True --out_dir=out-jsb-$pe $EXTRA
    job maestro_$pe python train.py config/maestro_$pe.py --compile=True --max_iters=2000 --lr_decay_iters=2000 \
      --warmup_iters=100 --eval_interval=200 --out_dir=out-maestro-$pe $EXTRA
    job genome_$pe python train.py config/genome_$pe.py --compile=True --n_layer=6 --n_head=6 --n_embd=384 \
      --batch_size=16 --gradient_accumulation_steps=1 --learning_rate=6e-4 --min_lr=6e-5 --warmup_iters=100 \
      --max_iters=2000 --lr_decay_iters=2000 --eval_interval=200 --out_dir=out-genome-$pe $EXTRA
  done
}

indirect_run() {  # name, config, flags...: the paper's schedule, compiled, one CUDA graph a step
  local name=$1 pe=$2; shift 2
  job "$name" python train.py config/indirect_$pe.py --compile=True --cuda_graph=True --eval_interval=4000 \
    --log_interval=2000 "$@" --out_dir=out-$name $EXTRA
}

indirect() {  # PoPE and RoPE first
  for pe in pope rope; do
    for seed in 1337 2 3; do indirect_run indirect_${pe}_s$seed $pe --seed=$seed; done
  done
  for seed in 1337 2 3; do
    for pe in rope_half alibi_half learned sinusoidal; do indirect_run indirect_${pe}_s$seed $pe --seed=$seed; done
  done
}

readings() {  # each reading for PoPE and RoPE, seed 1337; batch 256 (4x the compute) last
  local r
  for r in "all_tokens --loss_on=all" "spaces --dataset=indirect_indexing_spaces --block_size=51" \
           "len40 --dataset=indirect_indexing_len40 --block_size=40" "shift0 --dataset=indirect_indexing_shift0" \
           "batch256 --batch_size=256 --learning_rate=4e-4 --min_lr=4e-5"; do
    for pe in pope rope; do
      # shellcheck disable=SC2086
      indirect_run reading_${r%% *}_$pe $pe ${r#* }
    done
  done
}

probe_run() {  # name, encoding, iters, flags...: a short schedule (lr 4e-4 -> 4e-5 over iters), eval every 500
  local name=$1 pe=$2 iters=$3; shift 3
  indirect_run "$name" "$pe" --max_iters="$iters" --lr_decay_iters="$iters" --learning_rate=4e-4 --min_lr=4e-5 \
    --eval_interval=500 --log_interval=100 --eval_iters=10 "$@"
}

# probes (issue #16): why does PoPE not learn indirect indexing? results/indirect_probes.md says what each run
# asks. 52 runs: 45 sub-task runs (5 tasks x PoPE, RoPE, RoPE-half x seeds 1337/2/3; 1500 steps of 128, warmup 100)
# and 7 PoPE hypotheses on the spaces format (1 seed; 3500 steps of 256, warmup 300). Start them all at once:
#   nvidia-cuda-mps-control -d; GPUS=2 PER_GPU=27 bash results/run_all.sh lm probes
# Seed 1337 of every sub-task and the hypotheses start first; seeds 2 and 3 PROBE_WARM (60) s later, when the first
# runs have compiled, so they load the same graphs from the inductor caches instead of compiling all at once.
# Estimate (from results/indirect_indexing/run_all_queue_others.log: ~400 steps/s of batch 64 per GPU under MPS,
# i.e. ~25.6k examples/s per GPU for RoPE-like runs; a PoPE step costs 1.57x (4.4 vs 2.8 ms alone), its sdpa path
# (no softplus, zero frequencies) ~2x; spaces rows 51/48): sub-tasks 45 x (192k train + ~35k eval) examples x
# (1.57 + 1 + 1)/3 = 12.2M RoPE-equivalent examples; hypotheses 7 x ~0.95M (train + eval) x 1.06 x cost = 11.3M;
# the LM job ~3.5M; 27M / 51k per s = 8.8 min, plus ~1.5 min of compiles and tail: ~10.3 min. The estimate is
# the throughput at batch 64 (batches of 128/256 should do better); if it runs long, the hypotheses are the runs
# still going (evaluated every 500 steps, so their curves exist), the sub-tasks are done.
probes() {
  local sub_iters=${PROBE_SUB_ITERS:-1500} hyp_iters=${PROBE_HYP_ITERS:-3500} task pe seed h
  local sub_flags="--batch_size=128 --warmup_iters=100"
  local hyp_flags="--dataset=indirect_indexing_spaces --block_size=51 --batch_size=256 --warmup_iters=300" pids=()
  for task in next prev start end shift3 spaces; do  # the data first (~20 s), not by 15 runs at once
    [[ -f data/indirect_indexing_$task/meta.json || -n ${DRY:-} ]] && continue
    python -m prepare.indirect_indexing --variant indirect_indexing_$task > /dev/null & pids+=($!)
  done
  (( ${#pids[@]} )) && wait "${pids[@]}"
  for seed in 1337 2 3; do
    for task in next prev start end shift3; do
      for pe in pope rope rope_half; do
        # shellcheck disable=SC2086
        probe_run probe_${task}_${pe}_s$seed $pe "$sub_iters" --dataset=indirect_indexing_$task $sub_flags --seed=$seed
      done
    done
    [[ $seed == 1337 ]] || continue
    # the hypotheses (name, encoding, flags): PoPE as it is and RoPE (which learns this format at batch 256), then
    # one change to PoPE each
    for h in "rope rope" "pope pope" "dlr100 pope --delta_lr_mult=100.0" "nosoftplus pope --pope_softplus=False" \
             "base100_zero16 pope --pos_base=100.0 --pope_zero_freqs=16" "qkinit4 pope --qk_init_scale=4.0" \
             "dlr10 pope --delta_lr_mult=10.0"; do
      # shellcheck disable=SC2086
      set -- $h
      # shellcheck disable=SC2086
      probe_run probe_spaces_$1 $2 "$hyp_iters" $hyp_flags "${@:3}"
    done
    [[ -n ${DRY:-} ]] || sleep "${PROBE_WARM:-60}"
  done
}

probes_more() {  # not in the probes' budget: the hypotheses on the default format; batch 64 on the spaces format
  local iters=${PROBE_HYP_ITERS:-3500} h
  for h in "rope rope" "pope pope" "dlr100 pope --delta_lr_mult=100.0" "nosoftplus pope --pope_softplus=False" \
           "base100_zero16 pope --pos_base=100.0 --pope_zero_freqs=16" "qkinit4 pope --qk_init_scale=4.0"; do
    # shellcheck disable=SC2086
    set -- $h
    probe_run probe_default_$1 $2 "$iters" --batch_size=256 --warmup_iters=300 "${@:3}"
  done
  for pe in pope rope; do  # the examples of the batch-256 runs in 4x the steps
    probe_run probe_spaces_b64_$pe $pe $(( 4 * iters )) --dataset=indirect_indexing_spaces --block_size=51 \
      --batch_size=64 --warmup_iters=1200
  done
}

stages=("$@")
(( ${#stages[@]} )) || stages=(prepare speed lm music indirect readings)  # probes, probes_more: by name
for stage in "${stages[@]}"; do
  echo "$(date +%T) stage $stage"
  $stage
done
wait
echo "$(date +%T) all done"
