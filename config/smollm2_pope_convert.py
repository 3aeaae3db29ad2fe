# SmolLM2-135M-Instruct converted to PoPE: its weights copied into a PoPE model of the same
# architecture (pretrained.py: every tensor; PoPE's delta new, at 0; the frequencies theta_c =
# 100000^(-c/64) from its RoPE base) and recalibrated on the tokens and at the context of
# config/smollm2_rope_ft.py, with its recipe. Not a number of the paper. Run:  python train.py
# config/smollm2_pope_convert.py --compile=True
# its settings, then the changes below (paths from the repository root)
exec(open('config/smollm2_rope_ft.py').read())
out_dir = 'out-smollm2-pope-convert'
pos_emb = 'pope'  # converts it
