# The Linux C study at another size: config/linux_c_pope.py with 4 layers x 256 wide (4 heads of 64,
# ~16M parameters), the same data, recipe and batches. RoPE: config/linux_c_rope_16m.py; the study:
# bash results/linux_c/reproduce.sh start pope-16m_s1337 rope-16m_s1337
exec(open('config/linux_c_pope.py').read())  # its settings, then the changes below
out_dir = 'out-linux-c-pope-16m'
n_layer = 4
n_head = 4
n_embd = 256
