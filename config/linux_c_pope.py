# Language modelling on a real corpus at reduced scale (paper: section 4, Table 4 and Figures 2-3,
# on OpenWebText): an 8-layer, 512-wide GPT (head dim 64, ~51M parameters with the GPT-2 embedding)
# with PoPE on the Linux kernel's hand-written C (python -m prepare.linux_c: ~384M training tokens),
# with the paper's language-modelling recipe where it applies: context 1024, AdamW beta2 0.95, lr
# 6e-4 cosine to a tenth, weight decay 0.01, clip 1.0, dropout 0, delta = 0 at init. 4600 steps of
# 32 x 1024 tokens (151M tokens, under half an epoch) on one GPU. RoPE: config/linux_c_rope.py; the
# fine-tunes at 4x the context: config/linux_c_{pope_ft,rope_yarn_ft}.py. The study (seeds,
# fine-tunes, evaluation inside documents): bash results/linux_c/reproduce.sh Run:  python train.py
# config/linux_c_pope.py --compile=True
out_dir = 'out-linux-c-pope'
dataset = 'linux_c'  # GPT-2 tokens
# the model: train.py's 8 layers x 8 heads x 512 (head dim 64)
pope_delta = 'zero'  # delta = 0 at init, as the paper for language modelling
block_size = 1024
# two micro-steps of 16 sequences a step: 32 x 1024 tokens in about half the memory of one,
batch_size = 16
# so that the study's six runs share one GPU (results/linux_c/reproduce.sh)
gradient_accumulation_steps = 2
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 200
max_iters = 4600
lr_decay_iters = 4600
beta2 = 0.95
eval_interval = 1000
eval_iters = 50
log_interval = 50
