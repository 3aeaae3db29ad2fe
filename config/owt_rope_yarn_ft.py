# Length extrapolation (paper: section 4, Figure 2), at the paper's full scale: fine-tune the 124M
# RoPE model of config/owt_rope.py at context 4096 with YaRN (scale 4 = 4096 / 1024), as
# config/owt_pope_ft.py does the PoPE one: 500 steps, 20 warmup, batch 64, lr 6e-5, no decay. The
# paper shows the result only as a figure. Needs out-owt-rope/ckpt.pt (python train.py
# config/owt_rope.py); the architecture comes from it. Run:  torchrun --standalone
# --nproc_per_node=8 train.py config/owt_rope_yarn_ft.py then evaluate on PG-19 (python -m
# prepare.pg19; see eval/).
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope_ft.py').read())
out_dir = 'out-owt-rope-yarn-ft'
init_from = 'out-owt-rope/ckpt.pt'  # the pre-trained model
yarn_scale = 4.0  # YaRN s = 4096 / yarn_orig_ctx (train.py's 1024: the pre-training context)
# the model's comes from the checkpoint; this one names the run in train.py's log and final.json
pos_emb = 'rope'
