# Length extrapolation (paper: section 4, Figure 2), at the paper's full scale: fine-tune the 124M
# PoPE model of config/owt_pope.py at context 4096 with no interpolation; 500 steps, 20 warmup,
# batch 64, lr 6e-5, no decay. The paper shows the result only as a figure (PG-19 perplexity at 1024
# ... 10240 tokens): RoPE+YaRN holds to 4096 and degrades beyond; PoPE fine-tuned is lowest and flat
# to 10x. Needs out-owt-pope/ckpt.pt (python train.py config/owt_pope.py). The architecture (sizes,
# pos_emb, delta) comes from it; a fine-tune sets only context, YaRN, dropout (train.py's 0 here)
# and attn_impl. The RoPE+YaRN fine-tune and the other sizes start from this file:
# config/owt_{pope_ft,rope_yarn_ft}{,_253m,_774m}.py. Run:  torchrun --standalone --nproc_per_node=8
# train.py config/owt_pope_ft.py then evaluate on PG-19 (python -m prepare.pg19; see eval/).
out_dir = 'out-owt-pope-ft'
init_from = 'out-owt-pope/ckpt.pt'  # the pre-trained model
dataset = 'openwebtext'  # fine-tune on OpenWebText, as the paper
block_size = 4096  # the fine-tuning context
batch_size = 2
# micro-steps summed over all GPUs: 2 x 32 = the paper's 64 sequences a step
gradient_accumulation_steps = 32
learning_rate = 6e-5  # constant after warmup
decay_lr = False
warmup_iters = 20
max_iters = 500
beta2 = 0.95  # as the pre-training
eval_interval = 100
eval_iters = 50
log_interval = 10
