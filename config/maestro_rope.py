# MAESTRO (REMI tokens) (paper section 3, table of music and genome results) with pos_emb='rope',
# at the paper's full scale and settings.
# Paper's best test NLL per token: 1.501 (RoPE -> PoPE: 1.501 -> 1.486).
# Data: python -m prepare.maestro --source maestro-v3.0.0
# Run:  python train.py config/maestro_rope.py
out_dir = 'out-maestro-rope'     # checkpoint and logs
dataset = 'maestro'              # data/maestro
init_from = 'scratch'            # train from random init
n_layer = 6                      # layers
n_head = 8                       # heads (head dim 48)
n_embd = 384                     # width
pos_emb = 'rope'                 # RoPE baseline
pos_base = 10000.0               # frequency base theta
pope_delta_init = 'uniform'      # delta ~ U(-2pi, 0) at init, as the paper for this task
block_size = 2048                # context length
dropout = 0.1                    # dropout
bias = False                     # no biases in Linear layers
batch_size = 16                  # sequences per micro-step and GPU
gradient_accumulation_steps = 1  # batch 16 sequences a step, one GPU
learning_rate = 6e-4             # peak lr after warmup
min_lr = 6e-5                    # cosine decay floor
decay_lr = True                  # cosine decay
warmup_iters = 500               # linear warmup steps
max_iters = 60000                # optimizer steps
lr_decay_iters = 60000           # cosine decay over the whole run
weight_decay = 0.01              # AdamW weight decay
beta1 = 0.9                      # AdamW beta1
beta2 = 0.99                     # AdamW beta2
grad_clip = 1.0                  # clip gradient norm
eval_interval = 1000             # steps between evaluations / checkpoints
eval_iters = 50                  # batches per loss estimate
final_weights = 'best'         # final.json scores best.pt (the lowest val loss), as the paper reports the best
log_interval = 50                # steps between log lines
