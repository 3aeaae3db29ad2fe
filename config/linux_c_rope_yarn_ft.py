# Length extrapolation at reduced scale (paper: Figure 2): fine-tune the RoPE model of
# config/linux_c_rope.py at 4x its context (4096) with YaRN (scale 4 = 4096 / 1024), as
# config/linux_c_pope_ft.py does the PoPE one. Run:  python train.py config/linux_c_rope_yarn_ft.py
# --compile=True
# its settings, then the changes below (paths from the repository root)
exec(open('config/linux_c_pope_ft.py').read())
out_dir = 'out-linux-c-rope-yarn-ft'
init_from = 'out-linux-c-rope/ckpt.pt'  # the pre-trained model
yarn_scale = 4.0  # YaRN s = 4096 / yarn_orig_ctx (train.py's 1024: the pre-training context)
# the model's comes from the checkpoint; this one names the run in train.py's log and final.json
pos_emb = 'rope'
