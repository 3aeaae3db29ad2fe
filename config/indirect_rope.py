# Indirect indexing (paper section 4.1, appendix A.1) with pos_emb='rope' (RoPE),
# at the paper's full scale: the run of config/indirect_pope.py (train.py's defaults) with another position encoding.
# Paper's test accuracy (3 seeds): 11.16 +- 2.45 %.
# python train.py config/indirect_rope.py  (generates data/indirect_indexing in seconds if missing)
out_dir = 'out-indirect-rope'
pos_emb = 'rope'
log_interval = 500  # val and test accuracy every 2k steps (eval_interval) go to out_dir/eval_log.jsonl
