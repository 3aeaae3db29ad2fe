# JSB chorales (paper: section 4, Table 2) with RoPE: the run of config/jsb_pope.py with
# pos_emb='rope'. Paper's best test NLL per token: 0.5081 (RoPE -> PoPE: 0.5081 -> 0.4889).
# its settings, then the changes below (paths from the repository root)
exec(open('config/jsb_pope.py').read())
out_dir = 'out-jsb-rope'
pos_emb = 'rope'
