# MAESTRO (REMI tokens) (paper: section 4, Table 2) with PoPE, at the paper's full scale
# and settings; train.py's defaults give the rest (8 heads, beta2 0.99, weight decay 0.01, clip 1.0,
# delta ~ U(-2pi, 0)). Paper's best test NLL per token: 1.486 (RoPE -> PoPE: 1.501 -> 1.486).
# Data: python -m prepare.maestro --source maestro-v3.0.0
# Run:  python train.py config/maestro_pope.py
out_dir = 'out-maestro-pope'
dataset = 'maestro'
n_layer = 6
n_embd = 384  # head dim 48
block_size = 2048
dropout = 0.1
batch_size = 16  # the paper's batch, on one GPU
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 500
max_iters = 60000
lr_decay_iters = 60000  # cosine decay over the whole run
eval_interval = 1000
eval_iters = 50
# final.json scores best.pt (the lowest val loss): the paper reports the best
final_weights = 'best'
log_interval = 50
