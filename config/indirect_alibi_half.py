# Indirect indexing (paper section 4.1, appendix A.1) with pos_emb='alibi_half' (ALiBi on half the heads),
# at the paper's full scale: the run of config/indirect_pope.py (train.py's defaults) with another position encoding.
# Paper's test accuracy (3 seeds): 27.35 +- 10.77 %.
# python train.py config/indirect_alibi_half.py  (generates data/indirect_indexing in seconds if missing)
out_dir = 'out-indirect-alibi_half'
pos_emb = 'alibi_half'
log_interval = 500  # val and test accuracy every 2k steps (eval_interval) go to out_dir/eval_log.jsonl
