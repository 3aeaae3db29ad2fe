# OpenWebText language modelling (paper: section 4, Table 4), 774M model with PoPE:
# config/owt_pope.py at another size. Paper's validation perplexity: 15.45 (RoPE -> PoPE at 774M:
# 15.85 -> 15.45).
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope.py').read())
out_dir = 'out-owt-pope-774m'
n_layer = 36
n_head = 20
n_embd = 1280  # head dim 64
