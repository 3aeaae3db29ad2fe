"""
Sample from a trained model, decoding with its data set's own tokenizer:

    python sample.py --out_dir=out-indirect-pope --start="NZTUIGWkXFrhCJDzscat,N,+4,"
    python sample.py --init_from=gpt2 --start="The meaning of life is" --top_k=50   # OpenAI's GPT-2
    python sample.py --init_from=smollm2-135m --start="The capital of France is" --top_k=1  # GGUF
"""

import os
import sys

import torch

import pretrained
from eval import ABSOLUTE, autocast, default_dtype, device_arg, load_checkpoint, parser, tokenizer
from generate import generate, refuse_what_cannot_fit
from prepare import indirect_indexing


def main(args):
    torch.manual_seed(args.seed)
    model, ckpt = pretrained.load(args.init_from, args.device) if args.init_from else \
        load_checkpoint(os.path.join(args.out_dir, args.ckpt), args.device)
    meta, config = ckpt['meta'], model.config
    examples = meta['kind'] == 'examples'  # indirect indexing: a question, one answer token
    if examples:
        args.max_new_tokens, args.top_k = 1, 1  # the most likely answer
    try:
        encode, decode = tokenizer(meta)  # GPT-2's BPE, a GGUF model's, or its token list
        start = open(args.start[5:], encoding='utf-8').read() if args.start.startswith('FILE:') \
            else args.start
        ids = indirect_indexing.question(start, meta) if examples else encode(start)
    except KeyError as err:  # a meta.json of a data set made by hand, say
        sys.exit(f"the model's meta (its data set's meta.json) has no {err}: this model cannot "
                 "turn text into tokens; prepare its data set with `python -m prepare.<name>` and "
                 "train again")
    except UnicodeDecodeError:
        sys.exit(f"--start={args.start} is not UTF-8 text: give a text file")
    except ValueError as err:  # an ill-posed question
        sys.exit(f"--start: {err}")
    if len(ids) == 0:
        sys.exit("--start encodes to no tokens: give a longer prompt")
    if (examples or config.pos_emb in ABSOLUTE) and len(ids) > config.block_size:
        sys.exit(f"--start is {len(ids)} tokens, longer than the {config.block_size} this model "
                 f"reads ({config.pos_emb} positions stop at block_size): give a shorter prompt")
    dtype = args.dtype or default_dtype(args.device)
    refuse_what_cannot_fit(config, args.num_samples, len(ids), args.max_new_tokens, args.device,
                           dtype)
    x = torch.tensor(ids, dtype=torch.long, device=args.device).expand(args.num_samples, -1)
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
CHECKS = [  # what must hold of the arguments a, and the line when it does not
    (lambda a: a.num_samples >= 1, "--num_samples={num_samples}: must be 1 or more"),
    (lambda a: a.max_new_tokens >= 1, "--max_new_tokens={max_new_tokens}: must be 1 or more"),
    (lambda a: a.top_k is None or a.top_k >= 1, "--top_k={top_k}: must be 1 or more"),
    (lambda a: 0 < a.temperature < float('inf'), "--temperature={temperature}: must be a number "
     "above 0 (for the most likely token use --top_k=1)"),
    (lambda a: 0 <= a.seed < 2 ** 64, "--seed={seed}: give a whole number from 0 to 2**64 - 1"),
    (lambda a: a.start != '', "--start is empty: give a prompt (the default is a newline)"),
    (lambda a: not a.start.startswith('FILE:') or os.path.isfile(a.start[5:]),
     "--start={start}: no such file"),
]

if __name__ == '__main__':
    args = p.parse_args()
    named = ' '.join(f'--{k}={getattr(args, k)}' for k in ('out_dir', 'ckpt') if getattr(args, k))
    if args.init_from and named:  # two models named: neither is dropped
        sys.exit(f"--init_from={args.init_from} and {named} each name a model: give one of them "
                 "(--init_from alone, or --out_dir with --ckpt)")
    args.out_dir, args.ckpt = args.out_dir or 'out', args.ckpt or 'ckpt.pt'
    for holds, line in CHECKS:
        if not holds(args):
            sys.exit(line.format(**vars(args)))
    is_file = os.path.isfile(args.out_dir) or args.out_dir.endswith('.pt')  # a path for a folder
    path = args.out_dir if is_file else args.ckpt
    if not args.init_from and (path == args.out_dir or os.path.dirname(args.ckpt)):
        sys.exit(f"--ckpt is a file name inside --out_dir: for {path} give --out_dir="
                 f"{os.path.dirname(path) or '.'} --ckpt={os.path.basename(path)}")
    main(args)
