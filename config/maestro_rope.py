# MAESTRO (paper: section 4, Table 2) with RoPE: the run of config/maestro_pope.py with
# pos_emb='rope'. Paper's best test NLL per token: 1.501 (RoPE -> PoPE: 1.501 -> 1.486).
# its settings, then the changes below (paths from the repository root)
exec(open('config/maestro_pope.py').read())
out_dir = 'out-maestro-rope'
pos_emb = 'rope'
