# The Linux C study at another size: config/linux_c_pope.py with 12 layers x 768 wide (12 heads of
# 64, ~124M, the paper's smallest parameters), the same data, recipe and batches. RoPE:
# config/linux_c_rope_124m.py; the study: bash results/linux_c/reproduce.sh start pope-124m_s1337
# rope-124m_s1337
exec(open('config/linux_c_pope.py').read())  # its settings, then the changes below
out_dir = 'out-linux-c-pope-124m'
n_layer = 12
n_head = 12
n_embd = 768
