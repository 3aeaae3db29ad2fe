# OpenWebText language modelling (paper: section 4, Table 4), 253M model with RoPE:
# config/owt_pope_253m.py with pos_emb='rope'. Paper's validation perplexity: 18.88 (RoPE -> PoPE at
# 253M: 18.88 -> 18.55).
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope_253m.py').read())
out_dir = 'out-owt-rope-253m'
pos_emb = 'rope'
