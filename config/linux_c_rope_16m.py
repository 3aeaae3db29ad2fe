# The Linux C study at another size with RoPE: config/linux_c_pope_16m.py with pos_emb='rope'.
exec(open('config/linux_c_pope_16m.py').read())  # its settings, then the changes below
out_dir = 'out-linux-c-rope-16m'
pos_emb = 'rope'
