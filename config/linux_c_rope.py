# Language modelling on the Linux kernel's C with RoPE: config/linux_c_pope.py with pos_emb='rope'.
exec(open('config/linux_c_pope.py').read())  # its settings, then the changes below (paths from the repository root)
out_dir = 'out-linux-c-rope'
pos_emb = 'rope'
