# Indirect indexing with PoPE in the replication's layout, in which the rule is learned
# (results/indirect_indexing/README.md): the paper's run (config/indirect_pope.py: model, optimizer)
# on rows left-padded to 56 input tokens, with ', ' separators and shifts of 0, so that the query
# (the space before the target) is always the last position; the cosine schedule stretched from the
# paper's 100k steps to 200k, over which most seeds of either encoding solve it and at 100k none did
# (results/indirect_indexing/seeds.md). The paper's schedule: --max_iters=100000
# --lr_decay_iters=100000. Paper's test accuracy (3 seeds, its own layout, 100k steps): 94.82 +-
# 2.91 %. python train.py config/indirect_pope_leftpad.py --compile=True --cuda_graph=True   (one
# GPU, ~10 minutes on an H200)
# its settings, then the changes below (paths from the repository root)
exec(open('config/indirect_pope.py').read())
out_dir = 'out-indirect-pope-leftpad'
dataset = 'indirect_indexing_leftpad'  # generated in seconds on first use
block_size = 56
max_iters = lr_decay_iters = 200000
eval_interval = 4000  # 51 evaluations of train, val and test accuracy in out_dir/eval_log.jsonl
log_interval = 2000
