# Indirect indexing with RoPE in PoPE's winning layout: config/indirect_pope_leftpad.py with pos_emb='rope'.
# Paper's test accuracy (3 seeds, its own layout): 11.16 +- 2.45 %.
exec(open('config/indirect_pope_leftpad.py').read())
out_dir = 'out-indirect-rope-leftpad'
pos_emb = 'rope'
