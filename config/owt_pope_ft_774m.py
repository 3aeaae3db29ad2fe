# Length extrapolation (paper: section 4, Figure 2): config/owt_pope_ft.py for the 774M model of
# config/owt_pope_774m.py.
exec(open('config/owt_pope_ft.py').read())  # its settings, then the changes below (paths from the repository root)
out_dir = 'out-owt-pope-ft-774m'
init_from = 'out-owt-pope-774m/ckpt.pt'  # the pre-trained model
