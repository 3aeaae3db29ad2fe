# Indirect indexing (paper: appendix C, Table 9; the task in appendix B.1) with ALiBi on half the
# heads: config/indirect_pope.py with pos_emb='alibi_half'. Paper's test accuracy (3 seeds): 27.35
# +- 10.77 %.
# its settings, then the changes below (paths from the repository root)
exec(open('config/indirect_pope.py').read())
out_dir = 'out-indirect-alibi_half'
pos_emb = 'alibi_half'
