# Indirect indexing (paper: appendix C, Table 9; the task in appendix B.1) with RoPE on half the
# channels: config/indirect_pope.py with pos_emb='rope_half'. Paper's test accuracy (3 seeds): 28.50
# +- 6.10 %.
# its settings, then the changes below (paths from the repository root)
exec(open('config/indirect_pope.py').read())
out_dir = 'out-indirect-rope_half'
pos_emb = 'rope_half'
