# Indirect indexing with RoPE in the replication's layout, in which the rule is learned:
# config/indirect_pope_leftpad.py (200k-step schedule) with pos_emb='rope'. Paper's test accuracy (3
# seeds, its own layout, 100k steps): 11.16 +- 2.45 %.
exec(open('config/indirect_pope_leftpad.py').read())
out_dir = 'out-indirect-rope-leftpad'
pos_emb = 'rope'
