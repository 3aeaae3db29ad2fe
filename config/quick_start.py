# Quick start: a small PoPE GPT on character-level Shakespeare (committed in prepare/texts/, no
# download), in a minute or two on 2 CPU cores; at the end it prints the val loss at 1x, 2x, 4x and
# 8x the training context (the length extrapolation of the paper's Figure 2, at toy scale). RoPE:
# python train.py config/quick_start.py --pos_emb=rope --out_dir=out-quick-rope Not a result of the
# paper: one seed, 0.8M parameters, 0.6M training characters.
out_dir = 'out-quick-pope'
# prepared from the committed text on first use (python -m prepare.shakespeare_char)
dataset = 'shakespeare_char'
device = 'cpu'  # small enough for a laptop; --device=cuda runs it in seconds
pope_delta = 'zero'  # as the paper for language modelling
n_layer = 4
n_head = 4
n_embd = 128
block_size = 64  # the training context; evaluated at 64, 128, 256, 512
batch_size = 32
learning_rate = 2e-3  # a small model takes a larger step
min_lr = 2e-4
warmup_iters = 30
# ~0.6M characters: the RoPE/PoPE gap at 4x and 8x shows by then (results/quick_start/)
max_iters = 300
lr_decay_iters = 300
weight_decay = 0.1
eval_interval = 100  # each evaluation also scores the val loss at the four lengths
eval_iters = 10  # batches per train/val estimate (the lengths use eval_context_tokens)
eval_context_tokens = 8192  # val characters per length: 128 windows at 1x, 16 at 8x
log_interval = 50
