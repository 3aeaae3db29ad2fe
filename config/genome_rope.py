# Human genome (paper: section 4, Table 3) with RoPE: the run of config/genome_pope.py with
# pos_emb='rope'. Paper's best test NLL per token: 4.217 (RoPE -> PoPE: 4.217 -> 4.152).
# its settings, then the changes below (paths from the repository root)
exec(open('config/genome_pope.py').read())
out_dir = 'out-genome-rope'
pos_emb = 'rope'
