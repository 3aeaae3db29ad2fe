#!/usr/bin/env bash
# Resume on the GPU (issue #13): a run with torch.compile and the CUDA-graph training step stops at iter 300,
# a resume (--init_from=resume) goes on to 600, and a straight run to 600 is the reference: the two logs must
# hold the same evaluations, with the same losses up to GPU non-determinism. One GPU, from the repository root:
#
#     bash results/resume_gpu.sh 2>&1 | tee results/resume_gpu.log
set -euo pipefail
out=${1:-out-resume-gpu}
common="config/indirect_pope.py --compile=True --cuda_graph=True --max_iters=600 --eval_interval=300
        --log_interval=100 --warmup_iters=100"
python -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
# shellcheck disable=SC2086
python train.py $common --out_dir="$out-split" --overwrite=True --max_iters=300
# shellcheck disable=SC2086
python train.py $common --out_dir="$out-split" --init_from=resume
# shellcheck disable=SC2086
python train.py $common --out_dir="$out-straight" --overwrite=True
python - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
logs = {k: [json.loads(line) for line in open(f'{out}-{k}/eval_log.jsonl')] for k in ('split', 'straight')}
for k, log in logs.items():
    print(k, [(r['iter'], round(r['val_loss'], 4), round(r['test_acc'], 4)) for r in log])
assert [r['iter'] for r in logs['split']] == [r['iter'] for r in logs['straight']] == [0, 300, 600]
diff = max(abs(a['val_loss'] - b['val_loss']) for a, b in zip(logs['split'], logs['straight']))
print(f"resume on the GPU: OK (largest val-loss difference to the straight run: {diff:.2e})")
assert diff < 0.05, diff
EOF
