# The paper's ablation of PoPE's phase bias at 124M on OpenWebText: no delta (phases from positions
# alone, nothing learned), otherwise config/owt_pope.py. Paper's validation perplexity: 21.42 (full
# PoPE: 21.33). Run:  torchrun --standalone --nproc_per_node=8 train.py config/owt_pope_no_delta.py
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope.py').read())
out_dir = 'out-owt-pope-no-delta'
pope_delta = 'none'
