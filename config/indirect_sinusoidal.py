# Indirect indexing (paper section 4.1, appendix A.1) with pos_emb='sinusoidal' (sinusoidal absolute positions),
# at the paper's full scale: the run of config/indirect_pope.py (train.py's defaults) with another position encoding.
# Paper's test accuracy (3 seeds): 1.90 +- 0.04 %.
# python train.py config/indirect_sinusoidal.py  (generates data/indirect_indexing in seconds if missing)
out_dir = 'out-indirect-sinusoidal'
pos_emb = 'sinusoidal'
log_interval = 500  # val and test accuracy every 2k steps (eval_interval) go to out_dir/eval_log.jsonl
