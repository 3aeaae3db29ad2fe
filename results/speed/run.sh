#!/usr/bin/env bash
# The timed runs of results/speed.md on a 2 x H200 machine, each function under 10 minutes (one and ddp fit in one
# device call together); every timed run has its GPU to itself. Logs in $LOGS (default out-logs/speed).
#   bash results/speed/run.sh one    # one GPU per run. GPU 0: nanoGPT's bench.py, nanoGPT's model.py in our loop, our
#                                    # RoPE and PoPE (profiles); GPU 1: our RoPE and PoPE, the previous version's
#   bash results/speed/run.sh ddp    # DDP on 2 GPUs, RoPE and PoPE (one graph, 200 MB buckets, as train.py)
#   bash results/speed/run.sh curves # loss curves before/after at lr 1e-4; the kernel, loss and model tests on the GPUs
#   bash results/speed/run.sh curves_again   # each of the two curves again, on each GPU
#   bash results/speed/run.sh candidates     # two loss candidates of branches, on top of main (see the function)
#   bash results/speed/run.sh candidates_layout  # PoPE with time-major q', k' (branch speed-pope-layout) vs main
#   bash results/speed/run.sh prologue_flat      # the prologue / epilogue as flat tiles: block sweep, steps
#   bash results/speed/run.sh flat_check         # their stages timed apart, the step, the GPU tests
#   bash results/speed/run.sh tiles3d            # tiles of positions x heads x d, fast maths: sweep, step, tests
#   bash results/speed/run.sh candidate_one_launch  # round 8: the prologue / epilogue as one launch each way
#   bash results/speed/run.sh ddp_buckets        # round 8: RoPE's DDP with one all-reduce vs 200 MB buckets
#   bash results/speed/run.sh kernel_bench       # round 8: bench_attention.py's sections on both GPUs
#   bash results/speed/run.sh indirect_paths     # PoPE's indirect-indexing run, hybrid vs all-Triton; kernel bench
#   bash results/speed/run.sh profile_indirect   # the top kernels of the indirect-indexing model's step
# Needs data/shakespeare (python -m prepare.shakespeare); nanoGPT's bench.py, model.py and configurator.py in
# .dev/nanogpt (fetched for the measurement only, not part of this repository); the previous version's model.py and
# pope_kernel.py (and ce_kernel.py) in .dev/before (round 7: git archive fa0ae63 model.py pope_kernel.py
# ce_kernel.py | tar -x -C .dev/before; the round-7 functions' .dev folders: see each function).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LOGS=${LOGS:-out-logs/speed}
mkdir -p "$LOGS"
b=results/speed/bench_step.py
# the paper's indirect-indexing run, 10k of its 100k steps with its evaluations (every 2k steps), compiled, one
# CUDA graph a step
indirect() {  # indirect <pos_emb> <out_dir suffix> [--key=value ...]
  local pe=$1 name=$2
  shift 2
  python train.py config/indirect_$pe.py --compile=True --cuda_graph=True --max_iters=10000 --log_interval=1000 \
    --out_dir=out-speed-indirect-$name --overwrite=True "$@"
}

one() {
  (
    export CUDA_VISIBLE_DEVICES=0
    (cd .dev/nanogpt && python bench.py --batch_size=32 --real_data=False) > "$LOGS/nanogpt_bench.log" 2>&1
    python $b --code=.dev/nanogpt --profile=1 > "$LOGS/nanogpt.log" 2>&1
    for pe in rope pope; do python $b --pos_emb=$pe --profile=1 > "$LOGS/$pe.log" 2>&1; done
  ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    for pe in rope pope; do python $b --pos_emb=$pe > "$LOGS/gpu1_$pe.log" 2>&1; done
    for pe in rope pope; do python $b --pos_emb=$pe --code=.dev/before > "$LOGS/gpu1_before_$pe.log" 2>&1; done
  ) &
  wait
  grep -h "summary\|time per iteration" "$LOGS"/*.log
}

ddp() {  # one graph and 200 MB gradient buckets, as train.py
  for pe in rope pope; do
    torchrun --standalone --nproc_per_node=2 $b --steps=80 --ddp_buckets=0 --bucket_mb=200 --pos_emb=$pe \
      > "$LOGS/ddp_${pe}_one_graph_buckets200.log" 2>&1
  done
  grep -h "summary" "$LOGS"/ddp_*.log
}

curves() {  # before and after at a 6x smaller learning rate (where 200 steps are not yet chaotic); the GPU tests
  for g in 0 1; do
    (
      export CUDA_VISIBLE_DEVICES=$g
      v=now; code=.; tests="tests/test_model.py tests/test_ce_kernel.py"
      [ $g = 0 ] && v=before && code=.dev/before && tests=tests/test_pope_kernel.py
      for pe in rope pope; do python $b --pos_emb=$pe --code=$code --lr=1e-4 > "$LOGS/curve_${v}_$pe.log" 2>&1; done
      TRITON_INTERPRET=0 python -m pytest -q $tests > "$LOGS/tests_gpu$g.log" 2>&1
    ) &
  done
  wait
  for pe in rope pope; do paste <(grep ^step "$LOGS/curve_before_$pe.log") <(grep ^step "$LOGS/curve_now_$pe.log"); done
  tail -qn1 "$LOGS"/tests_gpu*.log
}

curves_again() {  # the same two runs twice more, each code on each GPU: how far runs of one code drift apart
  for g in 0 1; do
    (
      export CUDA_VISIBLE_DEVICES=$g
      if [ $g = 0 ]; then order="before now"; else order="now before"; fi
      for v in $order; do
        code=.; [ $v = before ] && code=.dev/before
        python $b --pos_emb=rope --code=$code --lr=1e-4 > "$LOGS/curve_${v}_rope_gpu$g.log" 2>&1
      done
    ) &
  done
  wait
  grep -h "^step 50:\|^step 100:\|^step 199" "$LOGS"/curve_*gpu*.log
}

candidates() {  # round 6, call 2: two loss candidates with the logits detached (GPU 0 RoPE, GPU 1 PoPE)
  # .dev/v_bias_det: model.py of branch speed-loss-bias (the padding's -inf as F.linear's bias); .dev/v_ce_det:
  # model.py and ce_kernel.py of branch speed-fused-ce (the loss as two Triton kernels); in both, main's .detach() of
  # the returned logits applied by hand; pope_kernel.py: main's (git archive BRANCH FILES | tar -x -C DIR)
  for g in 0 1; do
    (
      export CUDA_VISIBLE_DEVICES=$g
      pe=rope; [ $g = 1 ] && pe=pope
      for v in bias_det ce_det; do
        python $b --pos_emb=$pe --code=.dev/v_$v --profile=1 > "$LOGS/cand_${v}_$pe.log" 2>&1
      done
    ) &
  done
  wait
  grep -h "summary" "$LOGS"/cand_*.log
}

candidates_layout() {  # round 7, call 1: PoPE's prologue/epilogue candidates vs main (each GPU: RoPE first)
  # .dev/v_layout: pope_kernel.py of branch speed-pope-layout (q', k' written time-major, the layout of RoPE's q, k),
  # model.py and ce_kernel.py of main; .dev/v_layout_h12: the same with BLOCK_T, HEADS = 16, 12 (a program writes
  # whole time-major rows); .dev/v_inductor: main's files, model.py writing the prologue in torch ops (softplus, the
  # phase table, cat) for inductor to fuse, then F.scaled_dot_product_attention
  for g in 0 1; do
    (
      export CUDA_VISIBLE_DEVICES=$g
      python $b --pos_emb=rope > "$LOGS/cand_main_rope_gpu$g.log" 2>&1
      vs="main layout inductor"; [ $g = 1 ] && vs="main layout_h12 inductor"
      for v in $vs; do
        code=.; [ $v != main ] && code=.dev/v_$v
        python $b --pos_emb=pope --code=$code --profile=$((1 - g)) > "$LOGS/cand_${v}_pope_gpu$g.log" 2>&1
      done
    ) &
  done
  wait
  grep -h "summary" "$LOGS"/cand_*.log
}

prologue_flat() {  # round 7, call 2 (one H200: no pair was lent): the prologue / epilogue as flat tiles
  # (positions x heads*d columns). .dev/flat/pbench.py sweeps their blocks and writes the fastest; .dev/v_flat: main's
  # files with pope_kernel.py of branch speed-flat-prologue, its BLOCK_T, BLOCK_C, WARPS read from $PROLOGUE;
  # .dev/v_flat_tm: the same writing q', k' time-major; .dev/before: the previous commit's model.py, pope_kernel.py,
  # ce_kernel.py
  python $b --pos_emb=rope > "$LOGS/flat_rope.log" 2>&1
  python $b --pos_emb=pope --code=.dev/before > "$LOGS/flat_before_pope.log" 2>&1
  python .dev/flat/pbench.py > "$LOGS/prologue_bench.log" 2>&1
  for v in flat flat_tm; do
    PROLOGUE=$(cat "$LOGS/best_$v.txt" 2>/dev/null || echo 16,256,4) python $b --pos_emb=pope --code=.dev/v_$v \
      --profile=1 > "$LOGS/flat_${v}_pope.log" 2>&1
  done
  grep -h "summary" "$LOGS"/flat_*.log; grep -A11 "^best" "$LOGS/prologue_bench.log"
}

flat_check() {  # round 7, call 3 (one H200): where the flat prologue's time goes (.dev/flat/diag.py), this
  # code's step (flat tiles, q' k' time-major for cuDNN) vs the previous commit's and RoPE's, the GPU tests
  python .dev/flat/diag.py > "$LOGS/prologue_diag.log" 2>&1
  python $b --pos_emb=rope > "$LOGS/check_rope.log" 2>&1
  python $b --pos_emb=pope --code=.dev/before > "$LOGS/check_before_pope.log" 2>&1
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-now python $b --pos_emb=pope --profile=1 > "$LOGS/check_pope.log" 2>&1
  TRITON_INTERPRET=0 python -m pytest -q tests/test_pope_kernel.py tests/test_model.py tests/test_ce_kernel.py \
    -p no:cacheprovider > "$LOGS/tests_gpu.log" 2>&1
  grep -h "summary" "$LOGS"/check_*.log; tail -n 3 "$LOGS/tests_gpu.log"
}

tiles3d() {  # round 7, call 4 (one H200): the prologue / epilogue as tiles of positions x heads x d with the GPU's
  # approximate log2 / cos / sin / division (libdevice's exact ones and the IEEE division made the earlier kernels
  # bound by arithmetic: round7/call3/prologue_diag.log): block sweep (round7/call4/pbench3d.py), the step with the
  # fastest (.dev/v_3d: this commit's model.py, ce_kernel.py and pope_kernel.py, the last's BLOCK_T, BLOCK_H, WARPS
  # line reading $PROLOGUE) vs the previous commit's and RoPE's, PoPE's at lr 1e-4 (the loss curves side by side),
  # the GPU tests
  python results/speed/round7/call4/pbench3d.py > "$LOGS/prologue_bench_3d.log" 2>&1
  python $b --pos_emb=rope > "$LOGS/t3_rope.log" 2>&1
  python $b --pos_emb=pope --code=.dev/before --lr=1e-4 > "$LOGS/t3_before_pope_lr1e-4.log" 2>&1
  PROLOGUE=$(cat "$LOGS/best_3d.txt" 2>/dev/null || echo 16,2,2) TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-3d \
    python $b --pos_emb=pope --code=.dev/v_3d --lr=1e-4 --profile=1 > "$LOGS/t3_pope_lr1e-4.log" 2>&1
  TRITON_INTERPRET=0 python -m pytest -q tests/test_pope_kernel.py tests/test_model.py tests/test_ce_kernel.py \
    -p no:cacheprovider > "$LOGS/tests_gpu.log" 2>&1
  grep -h "summary" "$LOGS"/t3_*.log; tail -n 7 "$LOGS/prologue_bench_3d.log"; tail -n 3 "$LOGS/tests_gpu.log"
}

candidate_one_launch() {  # round 8, call 2 (2 x H200, after `one` and `ddp`): the prologue / epilogue as one launch
  # for q and k each way (branch speed-prologue-one-launch; round 7's step got 0.9 ms faster for 1.5 ms less GPU
  # time, and its prologue / epilogue launch four kernels a layer where round 6's launched two). .dev/v_onelaunch: the branch's
  # pope_kernel.py, main's model.py and ce_kernel.py, main's tests/test_pope_kernel.py and conftest.py in tests/
  for g in 0 1; do
    (
      export CUDA_VISIBLE_DEVICES=$g
      python $b --pos_emb=rope > "$LOGS/cand_rope_gpu$g.log" 2>&1
      for v in main onelaunch; do
        code=.; [ $v != main ] && code=.dev/v_$v
        TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-$v-$g python $b --pos_emb=pope --code=$code --profile=$((1 - g)) \
          > "$LOGS/cand_${v}_pope_gpu$g.log" 2>&1
      done
      [ $g = 1 ] && TRITON_INTERPRET=0 python -m pytest -q .dev/v_onelaunch/tests/test_pope_kernel.py \
        -p no:cacheprovider > "$LOGS/cand_onelaunch_tests.log" 2>&1
    ) &
  done
  wait
  grep -h "summary" "$LOGS"/cand_*.log; tail -n 1 "$LOGS/cand_onelaunch_tests.log"
}

ddp_buckets() {  # round 8, call 2 (2 x H200): RoPE's DDP (its 1.90-1.92x is the margin left) with every gradient in
  # one all-reduce (1024 MB buckets hold all 497 MB) against train.py's 200 MB, one graph as train.py
  for mb in 200 1024; do
    torchrun --standalone --nproc_per_node=2 $b --steps=80 --ddp_buckets=0 --bucket_mb=$mb --pos_emb=rope \
      > "$LOGS/ddp_rope_one_graph_buckets$mb.log" 2>&1
  done
  grep -h "summary" "$LOGS"/ddp_rope_one_graph_buckets*.log
}

kernel_bench() {  # round 8: bench_attention.py's every section on the final code (GPU 0: the table and GQA; GPU 1:
  # GPU time alone, decoding, compile / CUDA graphs); results/kernel_bench.md's round-8 tables
  CUDA_VISIBLE_DEVICES=0 python bench_attention.py --sections table,gqa > "$LOGS/kernel_bench_table_gqa.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=1 python bench_attention.py --sections graphed,decode,compile \
    > "$LOGS/kernel_bench_graphed_decode_compile.log" 2>&1 &
  wait
  tail -n 30 "$LOGS"/kernel_bench_*.log
}

indirect_paths() {  # PoPE's indirect-indexing run on pope_kernel's hybrid path (cuDNN) and its all-Triton path
  (
    export CUDA_VISIBLE_DEVICES=0
    indirect pope pope > "$LOGS/indirect_pope_10k.log" 2>&1
    python bench_attention.py --sections graphed,gqa > "$LOGS/kernel_bench_graphed_gqa.log" 2>&1
  ) &
  (
    export CUDA_VISIBLE_DEVICES=1
    indirect pope pope-triton --attn_impl=triton > "$LOGS/indirect_pope_triton_10k.log" 2>&1
    TRITON_INTERPRET=0 python -m pytest -q tests/test_pope_kernel.py tests/test_model.py > "$LOGS/tests_gpu.log" 2>&1
  ) &
  wait
  grep -h "ms/it\|^final" "$LOGS"/indirect_*_10k.log | tail -4
  tail -1 "$LOGS/tests_gpu.log"
}

profile_indirect() {
  python $b --pos_emb=pope --shape=indirect --batch_size=64 --steps=100 --profile=1 \
    > "$LOGS/indirect_pope_profile.log" 2>&1
}

"$@"
