# OpenWebText language modelling (paper: section 4, Table 4), 124M model with PoPE, at the paper's
# full scale: 100k steps (train.py's default) of 64 x 1024 tokens (~6.6B tokens), on 8 GPUs; dropout
# 0, weight decay 0.01 and clip 1.0 are train.py's defaults too. Paper's validation perplexity:
# 21.33 (RoPE -> PoPE at 124M: 21.55 -> 21.33). The other sizes and RoPE start from this file:
# config/owt_{rope,pope}{,_253m,_774m}.py. Data: python -m prepare.openwebtext Run:  torchrun
# --standalone --nproc_per_node=8 train.py config/owt_pope.py (one GPU works too: the same 64
# sequences a step, as 8 micro-steps of 8, 8x slower)
out_dir = 'out-owt-pope'
dataset = 'openwebtext'  # GPT-2 tokens
n_layer = 12
n_head = 12
n_embd = 768  # head dim 64
pope_delta = 'zero'  # delta = 0 at init (the paper: it matters for length generalisation)
block_size = 1024
batch_size = 8
# micro-steps summed over all GPUs: 8 x 8 = the paper's 64 sequences a step
gradient_accumulation_steps = 8
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 1000
beta2 = 0.95
eval_interval = 1000
eval_iters = 200
log_interval = 10
