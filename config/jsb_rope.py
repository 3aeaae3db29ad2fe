# JSB chorales (paper section 3, table of music and genome results) with pos_emb='rope',
# at the paper's full scale and settings.
# Paper's best test NLL per token: 0.5081 (RoPE -> PoPE: 0.5081 -> 0.4889).
# Data: python -m prepare.jsb_chorales [--source Jsb16thSeparated.json]
# Run:  python train.py config/jsb_rope.py
out_dir = 'out-jsb-rope'         # checkpoint and logs
dataset = 'jsb_chorales'         # data/jsb_chorales
init_from = 'scratch'            # train from random init
n_layer = 6                      # layers
n_head = 8                       # heads (head dim 32)
n_embd = 256                     # width
pos_emb = 'rope'                 # RoPE baseline
pos_base = 10000.0               # frequency base theta
pope_delta_init = 'uniform'      # delta ~ U(-2pi, 0) at init, as the paper for this task
block_size = 2048                # context length
dropout = 0.2                    # dropout
bias = False                     # no biases in Linear layers
batch_size = 4                   # sequences per micro-step and GPU
gradient_accumulation_steps = 1  # batch 4 sequences a step, one GPU
learning_rate = 6e-4             # peak lr after warmup
min_lr = 6e-5                    # cosine decay floor
decay_lr = True                  # cosine decay
warmup_iters = 10                # linear warmup steps
max_iters = 3000                 # optimizer steps
lr_decay_iters = 3000            # cosine decay over the whole run
weight_decay = 0.01              # AdamW weight decay
beta1 = 0.9                      # AdamW beta1
beta2 = 0.99                     # AdamW beta2
grad_clip = 1.0                  # clip gradient norm
eval_interval = 100              # steps between evaluations / checkpoints
eval_iters = 20                  # batches per loss estimate
final_weights = 'best'         # final.json scores best.pt (the lowest val loss), as the paper reports the best
log_interval = 10                # steps between log lines
