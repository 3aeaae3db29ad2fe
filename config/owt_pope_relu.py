# The paper's ablation of PoPE's magnitude at 124M on OpenWebText: mu = relu(x) instead of
# softplus(x), otherwise config/owt_pope.py. Paper's validation perplexity: 21.55 (full PoPE:
# 21.33). Run:  torchrun --standalone --nproc_per_node=8 train.py config/owt_pope_relu.py
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope.py').read())
out_dir = 'out-owt-pope-relu'
pope_mu = 'relu'
