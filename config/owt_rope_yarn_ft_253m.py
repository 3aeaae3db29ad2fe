# Length extrapolation (paper: section 4, Figure 2): config/owt_rope_yarn_ft.py for the 253M model
# of config/owt_rope_253m.py.
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_rope_yarn_ft.py').read())
out_dir = 'out-owt-rope-yarn-ft-253m'
init_from = 'out-owt-rope-253m/ckpt.pt'  # the pre-trained model
