# OpenWebText language modelling (paper: section 4, Table 4), 124M model with RoPE:
# config/owt_pope.py with pos_emb='rope'. Paper's validation perplexity: 21.55 (RoPE -> PoPE at
# 124M: 21.55 -> 21.33).
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope.py').read())
out_dir = 'out-owt-rope'
pos_emb = 'rope'
