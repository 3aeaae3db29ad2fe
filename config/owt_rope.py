# OpenWebText language modelling (paper section 4), 124M model with pos_emb='rope', at the
# paper's full scale: 100k steps of 64 x 1024 tokens (~6.6B tokens), on 8 GPUs.
# Paper's validation perplexity: 21.55 (RoPE -> PoPE at 124M: 21.55 -> 21.33).
# Data: python -m prepare.openwebtext
# Run:  torchrun --standalone --nproc_per_node=8 train.py config/owt_rope.py
# (one GPU works too: the same 64 sequences a step, as 8 micro-steps of 8, 8x slower)
out_dir = 'out-owt-rope'         # checkpoint and logs
dataset = 'openwebtext'          # data/openwebtext (GPT-2 tokens)
init_from = 'scratch'            # train from random init
n_layer = 12                     # 124M: 12 layers
n_head = 12                      # 12 heads
n_embd = 768                     # width 768 (head dim 64)
pos_emb = 'rope'                 # RoPE baseline
pos_base = 10000.0               # frequency base theta
pope_delta_init = 'zero'         # delta = 0 at init (paper: matters for length generalisation)
block_size = 1024                # training context
dropout = 0.0                    # no dropout
bias = False                     # no biases in Linear layers
batch_size = 8                   # sequences per micro-step and GPU
gradient_accumulation_steps = 8  # micro-steps summed over all GPUs: 8 x 8 = 64 sequences a step
learning_rate = 6e-4             # peak lr after warmup
min_lr = 6e-5                    # cosine decay floor
decay_lr = True                  # cosine decay
warmup_iters = 1000              # linear warmup steps
max_iters = 100000               # optimizer steps
lr_decay_iters = 100000          # cosine decay over the whole run
weight_decay = 0.01              # AdamW weight decay
beta1 = 0.9                      # AdamW beta1
beta2 = 0.95                     # AdamW beta2
grad_clip = 1.0                  # clip gradient norm
eval_interval = 1000             # steps between evaluations / checkpoints
eval_iters = 200                 # batches per loss estimate
log_interval = 10                # steps between log lines
