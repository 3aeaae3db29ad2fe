# human genome (6-mer tokens) (paper section 3, table of music and genome results) with pos_emb='rope',
# at the paper's full scale and settings.
# Paper's best test NLL per token: 4.217 (RoPE -> PoPE: 4.217 -> 4.152).
# Data: python -m prepare.genome --source hg38.fa.gz
# Run:  torchrun --standalone --nproc_per_node=8 train.py config/genome_rope.py
out_dir = 'out-genome-rope'      # checkpoint and logs
dataset = 'genome'               # data/genome
init_from = 'scratch'            # train from random init
n_layer = 16                     # layers
n_head = 16                      # heads (head dim 64)
n_embd = 1024                    # width
pos_emb = 'rope'                 # RoPE baseline
pos_base = 10000.0               # frequency base theta
pope_delta_init = 'uniform'      # delta ~ U(-2pi, 0) at init, as the paper for this task
block_size = 1000                # context length
dropout = 0.1                    # dropout
bias = False                     # no biases in Linear layers
batch_size = 8                   # sequences per micro-step and GPU
gradient_accumulation_steps = 8  # micro-steps summed over all GPUs: 8 x 8 = 64 sequences a step
learning_rate = 2.5e-4           # peak lr after warmup
min_lr = 2.5e-5                  # cosine decay floor
decay_lr = True                  # cosine decay
warmup_iters = 4000              # linear warmup steps
max_iters = 100000               # optimizer steps
lr_decay_iters = 100000          # cosine decay over the whole run
weight_decay = 0.01              # AdamW weight decay
beta1 = 0.9                      # AdamW beta1
beta2 = 0.999                    # AdamW beta2
grad_clip = 1.0                  # clip gradient norm
eval_interval = 2000             # steps between evaluations / checkpoints
eval_iters = 100                 # batches per loss estimate
final_weights = 'best'         # final.json scores best.pt (the lowest val loss), as the paper reports the best
log_interval = 50                # steps between log lines
