# Quick start: indirect indexing with PoPE, small enough for a laptop CPU (minutes;
# results/quick_start/ has the times), printing test accuracy as it learns. Not the paper's run
# (that is config/indirect_pope.py: 8 layers, 512 wide, 100k steps, strings of 20-40 letters, shifts
# up to 15): here strings of 6-10 letters and shifts up to 3 (prepare/indirect_indexing.py
# --variant=indirect_indexing_short).
out_dir = 'out-indirect-quick'
dataset = 'indirect_indexing_short'  # generated in seconds on first use
n_layer = 2
n_head = 4
n_embd = 128
block_size = 16  # the longest short example has 17 tokens
batch_size = 32
learning_rate = 1e-3  # a small model takes a larger step
min_lr = 1e-4
warmup_iters = 200
max_iters = 4000
lr_decay_iters = 4000
eval_interval = 500  # val and test accuracy on all 10k examples
device = 'cpu'  # small enough for the CPU; --device=cuda runs it in seconds
