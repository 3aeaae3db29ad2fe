# Language modelling on the Linux kernel's C with RoPE: config/linux_c_pope.py with pos_emb='rope'.
# its settings, then the changes below (paths from the repository root)
exec(open('config/linux_c_pope.py').read())
out_dir = 'out-linux-c-rope'
pos_emb = 'rope'
