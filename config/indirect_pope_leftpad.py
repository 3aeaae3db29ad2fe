# Indirect indexing with PoPE in the layout in which it learns the rule (results/indirect_indexing/README.md): the
# paper's run (config/indirect_pope.py: model, optimizer, 100k steps) on rows left-padded to 56 input tokens, with
# ', ' separators and shifts of 0, so that the query (the space before the target) is always the last position.
# Paper's test accuracy (3 seeds): 94.82 +- 2.91 %.
# python train.py config/indirect_pope_leftpad.py --compile=True --cuda_graph=True   (one GPU)
exec(open('config/indirect_pope.py').read())  # its settings, then the changes below (paths from the repository root)
out_dir = 'out-indirect-pope-leftpad'
dataset = 'indirect_indexing_leftpad'  # generated in seconds on first use
block_size = 56
