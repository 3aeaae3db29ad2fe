# Indirect indexing (paper: appendix C, Table 9; the task in appendix B.1) with sinusoidal absolute
# positions: config/indirect_pope.py with pos_emb='sinusoidal'. Paper's test accuracy (3 seeds):
# 1.90 +- 0.04 %.
# its settings, then the changes below (paths from the repository root)
exec(open('config/indirect_pope.py').read())
out_dir = 'out-indirect-sinusoidal'
pos_emb = 'sinusoidal'
