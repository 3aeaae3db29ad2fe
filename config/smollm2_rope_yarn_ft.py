# SmolLM2-135M-Instruct with RoPE + YaRN, fine-tuned: config/smollm2_rope_ft.py with YaRN's
# frequencies for 4 x its context (s = 4: 32768 tokens), trained on the same tokens at the same
# context (8192). YaRN's own recipe fine-tunes at the longer length; here every run of the study
# trains at the model's context. Not a number of the paper. Run:  python train.py
# config/smollm2_rope_yarn_ft.py --compile=True
# its settings, then the changes below (paths from the repository root)
exec(open('config/smollm2_rope_ft.py').read())
out_dir = 'out-smollm2-rope-yarn-ft'
yarn_scale = 4.0  # YaRN s over yarn_orig_ctx, the file's context (8192)
