# Indirect indexing (paper: section 4, Table 1; the task in appendix B.1) with PoPE at the paper's
# full scale. train.py's defaults are this run: 8 layers x 8 heads x 512, dropout 0, batch 64, lr
# 2e-4 -> 2e-5 (cosine over 100k steps, 4k warmup), AdamW beta2 0.99, weight decay 0.01, clip 1.0,
# delta ~ U(-2pi, 0); block_size 48 is the longest example (the paper's Table 8 says 40; see
# prepare/indirect_indexing.py). Paper's test accuracy (3 seeds): 94.82 +- 2.91 %. python train.py
# config/indirect_pope.py  (generates data/indirect_indexing in seconds if missing)
out_dir = 'out-indirect-pope'
# val and test accuracy every 2k steps (eval_interval) go to out_dir/eval_log.jsonl
log_interval = 500
