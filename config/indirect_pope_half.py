# Indirect indexing with PoPE's positions on the first half of the frequencies (pos_emb='pope_half',
# not in the paper): config/indirect_pope.py with that encoding.
# its settings, then the changes below (paths from the repository root)
exec(open('config/indirect_pope.py').read())
out_dir = 'out-indirect-pope_half'
pos_emb = 'pope_half'
