"""
Sample from a trained model, decoding with its data set's own tokenizer:

    python sample.py --out_dir=out-indirect-pope --start="NZTUIGWkXFrhCJDzscat,N,+4,"
    python sample.py --init_from=gpt2 --start="The meaning of life is" --top_k=50   # OpenAI's GPT-2
    python sample.py --init_from=smollm2-135m --start="The capital of France is" --top_k=1  # GGUF
"""

import os

import torch

import pretrained
from eval import autocast, default_dtype, device_arg, load_checkpoint, parser, tokenizer
from generate import check_sample_args, generate, prompt_ids, refuse_what_cannot_fit
from prepare import indirect_indexing


def main(args):
    torch.manual_seed(args.seed)
    model, ckpt = pretrained.load(args.init_from, args.device) if args.init_from else \
        load_checkpoint(os.path.join(args.out_dir, args.ckpt), args.device)
    meta, config = ckpt['meta'], model.config
    encode, decode = tokenizer(meta)  # GPT-2's BPE, a GGUF model's, or its token list
    examples = meta['kind'] == 'examples'  # indirect indexing: a question, one answer token
    if examples:  # its question, and the most likely answer
        encode = lambda text: indirect_indexing.question(text, meta)
        args.max_new_tokens, args.top_k = 1, 1
    ids = prompt_ids(args.start, encode, config, examples)
    x = torch.tensor(ids, dtype=torch.long, device=args.device).expand(args.num_samples, -1)
    dtype = args.dtype or default_dtype(args.device)
    refuse_what_cannot_fit(config, x, args.max_new_tokens, dtype)
    with torch.no_grad(), autocast(args.device, dtype):
        y = generate(model, x, args.max_new_tokens,
                     temperature=args.temperature, top_k=args.top_k, compile=args.compile == 'True')
    for row in y.tolist():  # (an answer: no padding, no '<bos>')
        print(indirect_indexing.decode(row, meta['itos']) if examples else decode(row))
        print('---------------')


p = parser(__doc__)
p.add_argument('--out_dir', help='folder holding ckpt.pt (default: out)')
p.add_argument('--ckpt', help='ckpt.pt (the latest weights, the default) or best.pt (the best)')
p.add_argument('--init_from', help="instead of --out_dir and --ckpt: GPT-2 (gpt2, gpt2-medium, "
               "gpt2-large, gpt2-xl), a Hugging Face folder, a llama GGUF file or smollm2-135m")
p.add_argument('--start', default='\n', help='the prompt, or FILE:path to read it from a file')
p.add_argument('--num_samples', type=int, default=1)
p.add_argument('--max_new_tokens', type=int, default=200)
p.add_argument('--temperature', type=float, default=1.0, help='< 1 sharper, > 1 more random')
p.add_argument('--top_k', type=int, help='keep only the k most likely tokens')
p.add_argument('--device', type=device_arg, default='cuda' if torch.cuda.is_available() else 'cpu')
p.add_argument('--seed', type=int, default=1337)
p.add_argument('--dtype', choices=('float32', 'bfloat16', 'float16'), help='autocast on a GPU')
p.add_argument('--compile', default='False', choices=('True', 'False'), help='compile the step')

if __name__ == '__main__':
    main(check_sample_args(p.parse_args()))  # (a bad argument: one line, generate.py's checks)
