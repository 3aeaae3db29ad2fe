# Length extrapolation (paper section 6), at the paper's full scale: fine-tune the 124M
# PoPE model of config/owt_pope.py at context 4096 with no interpolation;
# 500 steps, 20 warmup, batch 64, lr 6e-5, no decay.
# The paper shows the result only as a figure (PG-19 perplexity at 1024 ... 10240 tokens):
# RoPE+YaRN holds to 4096 and degrades beyond; PoPE fine-tuned is lowest and flat to 10x.
# Needs out-owt-pope/ckpt.pt (python train.py config/owt_pope.py); the architecture comes from it.
# Run:  torchrun --standalone --nproc_per_node=8 train.py config/owt_pope_ft.py
# then evaluate on PG-19 (python -m prepare.pg19; see eval/).
out_dir = 'out-owt-pope-ft'         # fine-tuned checkpoint and logs
dataset = 'openwebtext'             # fine-tune on OpenWebText, as the paper
init_from = 'out-owt-pope/ckpt.pt'  # the pre-trained model
n_layer = 12                        # 124M (taken from the checkpoint)
n_head = 12                         # taken from the checkpoint
n_embd = 768                        # taken from the checkpoint
pos_emb = 'pope'                    # as pre-trained
pos_base = 10000.0                  # as pre-trained
pope_delta_init = 'zero'            # as pre-trained (delta comes from the checkpoint)
yarn_scale = 1.0                    # no interpolation for PoPE
block_size = 4096                   # fine-tuning context
dropout = 0.0                       # no dropout
batch_size = 2                      # sequences per micro-step and GPU
gradient_accumulation_steps = 32    # summed over all GPUs: 2 x 32 = 64 sequences a step
learning_rate = 6e-5                # constant after warmup
min_lr = 6e-5                       # unused (no decay)
decay_lr = False                    # no decay
warmup_iters = 20                   # linear warmup steps
max_iters = 500                     # fine-tuning steps
lr_decay_iters = 500                # unused (no decay)
weight_decay = 0.01                 # AdamW weight decay
beta1 = 0.9                         # AdamW beta1
beta2 = 0.95                        # AdamW beta2
grad_clip = 1.0                     # clip gradient norm
eval_interval = 100                 # steps between evaluations / checkpoints
eval_iters = 50                     # batches per loss estimate
log_interval = 10                   # steps between log lines
