# OpenWebText language modelling (paper: section 4, Table 4), 253M model with PoPE:
# config/owt_pope.py at another size. Paper's validation perplexity: 18.55 (RoPE -> PoPE at 253M:
# 18.88 -> 18.55).
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope.py').read())
out_dir = 'out-owt-pope-253m'
n_layer = 16
n_head = 16
n_embd = 1024  # head dim 64
