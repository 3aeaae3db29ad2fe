# Human genome (6-mer tokens) (paper: section 4, Table 3) with PoPE, at the paper's full scale and
# settings; train.py's defaults give the rest (100k steps, 4k warmup, weight decay 0.01, clip 1.0,
# delta ~ U(-2pi, 0)). Paper's best test NLL per token: 4.152 (RoPE -> PoPE: 4.217 -> 4.152). Data:
# python -m prepare.genome --source hg38.fa.gz Run:  torchrun --standalone --nproc_per_node=8
# train.py config/genome_pope.py
out_dir = 'out-genome-pope'
dataset = 'genome'
n_layer = 16
n_head = 16
n_embd = 1024  # head dim 64
block_size = 1000
dropout = 0.1
batch_size = 8
# micro-steps summed over all GPUs: 8 x 8 = the paper's 64 sequences a step
gradient_accumulation_steps = 8
learning_rate = 2.5e-4
min_lr = 2.5e-5
beta2 = 0.999
# final.json scores best.pt (the lowest val loss): the paper reports the best
final_weights = 'best'
log_interval = 50
