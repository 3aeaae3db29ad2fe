# Reduced-scale language modelling with RoPE: the run of config/shakespeare_pope.py with pos_emb='rope'.
# Not a number of the paper.
# Run:  python train.py config/shakespeare_rope.py
exec(open('config/shakespeare_pope.py').read())  # its settings, then the changes below (paths from the repository root)
out_dir = 'out-shakespeare-rope'
pos_emb = 'rope'
