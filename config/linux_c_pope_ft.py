# Length extrapolation at reduced scale (paper: Figure 2): fine-tune the PoPE model of
# config/linux_c_pope.py at 4x its context (4096), no interpolation, with the paper's fine-tune
# recipe (config/owt_pope_ft.py: 500 steps, 20 warmup, lr 6e-5, no decay) on 2 x 4096 tokens a step:
# 4.1M tokens, 2.7 % of the pre-training's 151M (the paper: 64 x 4096 a step, 131M tokens, 2.0 % of
# its 6.6B). The architecture comes from the checkpoint. RoPE + YaRN:
# config/linux_c_rope_yarn_ft.py. Then: python -m eval.extrapolation --windows documents (see
# results/linux_c/reproduce.sh). Run:  python train.py config/linux_c_pope_ft.py --compile=True
# its settings, then the changes below (paths from the repository root)
exec(open('config/owt_pope_ft.py').read())
out_dir = 'out-linux-c-pope-ft'
init_from = 'out-linux-c-pope/ckpt.pt'  # the pre-trained model
dataset = 'linux_c'
gradient_accumulation_steps = 1  # its batch_size of 2 sequences a step, one micro-step
eval_contexts = ''  # the lengths are scored afterwards, inside documents
