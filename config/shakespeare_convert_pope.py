# A trained RoPE model converted to PoPE, at reduced scale: the 6-layer, 384-wide Shakespeare model
# of config/shakespeare_rope.py, its weights copied into a PoPE model of the same size
# (pretrained.py: every tensor, RoPE has none of its own; PoPE's delta new, at 0) and recalibrated
# at the original context of 256 tokens. A learned-position model converts the same way, its table
# of positions (wpe) dropped: --init_from=<its ckpt.pt>. Not a number of the paper. The
# recalibration takes the paper's fine-tuning settings where they apply (Figure 2's,
# config/owt_pope_ft.py): 20 warmup steps, then a constant learning rate a tenth of the
# pre-training's peak (6e-5 of 6e-4 there, 1e-4 of 1e-3 here); the batch, dropout and weight decay
# of the pre-training; 300 steps, 10 % of its 3000 (the paper fine-tunes for 500 of 100k steps, but
# there the encoding stays: here every attention score changes form). The architecture comes from
# the checkpoint (a differing --n_layer, --n_embd, ... is refused); pos_emb='pope' converts. Needs
# out-shakespeare-rope/ckpt.pt (python train.py config/shakespeare_rope.py). Run:  python train.py
# config/shakespeare_convert_pope.py The study of conversions (RoPE and learned, 2/10/30 % of the
# steps, 1x-10x contexts): results/conversion/.
exec(open('config/shakespeare_rope.py').read())  # its data, batch and evaluation; the changes below
out_dir = 'out-shakespeare-convert-pope'
init_from = 'out-shakespeare-rope/ckpt.pt'  # the pre-trained RoPE model
# converts it (pope_delta: 'zero' from config/shakespeare_pope.py, the init of a conversion
# anyway)
pos_emb = 'pope'
learning_rate = 1e-4  # a tenth of the pre-training's 1e-3, as the paper's 6e-5 of 6e-4
decay_lr = False  # constant after warmup
warmup_iters = 20
max_iters = 300
eval_interval = 50
