# JSB chorales (paper: section 4, Table 2) with PoPE, at the paper's full scale and settings;
# train.py's defaults give the rest (8 heads, beta2 0.99, weight decay 0.01, clip 1.0, delta ~
# U(-2pi, 0)). Paper's best test NLL per token: 0.4889 (RoPE -> PoPE: 0.5081 -> 0.4889). Data:
# python -m prepare.jsb_chorales [--source Jsb16thSeparated.json] Run:  python train.py
# config/jsb_pope.py
out_dir = 'out-jsb-pope'
dataset = 'jsb_chorales'
n_layer = 6
n_embd = 256  # head dim 32
block_size = 2048
dropout = 0.2
batch_size = 4  # the paper's batch, on one GPU
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 10
max_iters = 3000
lr_decay_iters = 3000  # cosine decay over the whole run
eval_interval = 100
eval_iters = 20
# final.json scores best.pt (the lowest val loss): the paper reports the best
final_weights = 'best'
log_interval = 10
