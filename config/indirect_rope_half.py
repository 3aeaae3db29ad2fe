# Indirect indexing (paper section 4.1, appendix A.1) with pos_emb='rope_half', at the paper's full scale.
# Paper's test accuracy (3 seeds): 28.50 +- 6.10 %.
# python train.py config/indirect_rope_half.py  (generates data/indirect_indexing in seconds if missing)
out_dir = 'out-indirect-rope_half'
dataset = 'indirect_indexing'
pos_emb = 'rope_half'
pope_delta_init = 'uniform'  # the paper's choice for this task (used by pope only)
n_layer = 8
n_head = 8
n_embd = 512
dropout = 0.0
block_size = 48  # the longest example has 48 tokens (the paper's table says 40; see prepare/indirect_indexing.py)
batch_size = 64
learning_rate = 2e-4  # peak, after 4k warmup steps
min_lr = 2e-5  # cosine decay over 100k steps
warmup_iters = 4000
max_iters = 100000
lr_decay_iters = 100000
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0
eval_interval = 2000  # val and test accuracy every 2k steps in out_dir/eval_log.jsonl
log_interval = 500
