# Reduced-scale language modelling with RoPE: the run of config/shakespeare_pope.py with
# pos_emb='rope'. Not a number of the paper.
# its settings, then the changes below (paths from the repository root)
exec(open('config/shakespeare_pope.py').read())
out_dir = 'out-shakespeare-rope'
pos_emb = 'rope'
