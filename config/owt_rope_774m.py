# OpenWebText language modelling (paper: section 4, Table 4), 774M model with RoPE:
# config/owt_pope_774m.py with pos_emb='rope'. Paper's validation perplexity: 15.85 (RoPE -> PoPE at
# 774M: 15.85 -> 15.45).
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope_774m.py').read())
out_dir = 'out-owt-rope-774m'
pos_emb = 'rope'
