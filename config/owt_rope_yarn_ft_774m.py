# Length extrapolation (paper section 6), at the paper's full scale: fine-tune the 774M
# RoPE model of config/owt_rope_774m.py at context 4096 with YaRN (scale 4 = 4096 / 1024);
# 500 steps, 20 warmup, batch 64, lr 6e-5, no decay.
# The paper shows the result only as a figure (PG-19 perplexity at 1024 ... 10240 tokens):
# RoPE+YaRN holds to 4096 and degrades beyond; PoPE fine-tuned is lowest and flat to 10x.
# Needs out-owt-rope-774m/ckpt.pt (python train.py config/owt_rope_774m.py); the architecture comes from it.
# Run:  torchrun --standalone --nproc_per_node=8 train.py config/owt_rope_yarn_ft_774m.py
# then evaluate on PG-19 (python -m prepare.pg19; see eval/).
out_dir = 'out-owt-rope-yarn-ft-774m'    # fine-tuned checkpoint and logs
dataset = 'openwebtext'                  # fine-tune on OpenWebText, as the paper
init_from = 'out-owt-rope-774m/ckpt.pt'  # the pre-trained model
n_layer = 36                             # 774M (taken from the checkpoint)
n_head = 20                              # taken from the checkpoint
n_embd = 1280                            # taken from the checkpoint
pos_emb = 'rope'                         # as pre-trained
pos_base = 10000.0                       # as pre-trained
yarn_scale = 4.0                         # YaRN s = 4096 / 1024
yarn_orig_ctx = 1024                     # pre-training context
block_size = 4096                        # fine-tuning context
dropout = 0.0                            # no dropout
batch_size = 2                           # sequences per micro-step and GPU
gradient_accumulation_steps = 32         # summed over all GPUs: 2 x 32 = 64 sequences a step
learning_rate = 6e-5                     # constant after warmup
min_lr = 6e-5                            # unused (no decay)
decay_lr = False                         # no decay
warmup_iters = 20                        # linear warmup steps
max_iters = 500                          # fine-tuning steps
lr_decay_iters = 500                     # unused (no decay)
weight_decay = 0.01                      # AdamW weight decay
beta1 = 0.9                              # AdamW beta1
beta2 = 0.95                             # AdamW beta2
grad_clip = 1.0                          # clip gradient norm
eval_interval = 100                      # steps between evaluations / checkpoints
eval_iters = 50                          # batches per loss estimate
log_interval = 10                        # steps between log lines
