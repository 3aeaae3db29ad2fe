# Indirect indexing (paper: section 4, Table 1; the task in appendix B.1) with RoPE:
# config/indirect_pope.py with pos_emb='rope'. Paper's test accuracy (3 seeds): 11.16 +- 2.45 %.
# its settings, then the changes below (paths from the repository root)
exec(open('config/indirect_pope.py').read())
out_dir = 'out-indirect-rope'
pos_emb = 'rope'
