"""
Sample from a trained model, decoding with its data set's own tokenizer:

    python sample.py --out_dir=out-indirect-pope --start="NZTUIGWkXFrhCJDzscat,N,+4,"
    python sample.py --out_dir=out-indirect-pope-leftpad --start="NZTUIGWkXFrhCJDzscat, N, +4, "
    python sample.py --out_dir=out-shakespeare-pope --start=FILE:prompt.txt --num_samples=3
    python sample.py --out_dir=out-owt-pope --num_samples=8 --max_new_tokens=500 --compile=True
    python sample.py --init_from=gpt2 --start="The meaning of life is" --top_k=50   # OpenAI's GPT-2
    python sample.py --init_from=smollm2-135m --start="The capital of France is" --top_k=1  # GGUF

An indirect-indexing model answers one token, the most likely, to a question written as its
training rows hold it (prepare/indirect_indexing.py's question), typed either way. The samples
are drawn as one batch: the prompt in one pass, then one token a step through a KV cache
(generate.py); --compile=True compiles that step (one CUDA graph a step on a GPU).
"""

import os

import torch

import pretrained
from eval import ABSOLUTE, autocast, default_dtype, device_arg, load_checkpoint, parser, tokenizer
from generate import generate, refuse_what_cannot_fit
from prepare import indirect_indexing


def main(args):
    torch.manual_seed(args.seed)
    if args.init_from:
        model, ckpt = pretrained.load(args.init_from, args.device)
    else:
        model, ckpt = load_checkpoint(os.path.join(args.out_dir, args.ckpt), args.device)
    meta = ckpt['meta']
    try:
        encode, decode = tokenizer(meta)  # GPT-2's BPE, a GGUF model's, or its token list
    except KeyError as err:  # a meta.json of a data set made by hand, say
        raise SystemExit(f"the model's meta (its data set's meta.json) has no {err}: this model "
                         "cannot turn text into tokens; prepare its data set with "
                         "`python -m prepare.<name>` and train again") from None
    examples = meta['kind'] == 'examples'  # indirect indexing: a question, one answer token
    if examples:
        args.max_new_tokens, args.top_k = 1, 1  # the most likely answer
    ids = prompt(args, meta, encode, examples, model.config)
    dtype = args.dtype or default_dtype(args.device)
    refuse_what_cannot_fit(model.config, args.num_samples, len(ids), args.max_new_tokens,
                           args.device, dtype)
    x = torch.tensor(ids, dtype=torch.long, device=args.device)[None, :]
    with torch.no_grad(), autocast(args.device, dtype):
        y = generate(model, x.expand(args.num_samples, -1), args.max_new_tokens,
                     temperature=args.temperature, top_k=args.top_k, compile=args.compile == 'True')
    for row in y.tolist():  # (an answer: no padding, no '<bos>')
        print(indirect_indexing.decode(row, meta['itos']) if examples else decode(row))
        print('---------------')


def prompt(args, meta, encode, examples, config):
    """The token ids of --start (or the file it names), checked against the model's context."""
    start = args.start
    if start.startswith('FILE:'):
        try:
            with open(start[5:], encoding='utf-8') as f:
                start = f.read()
        except UnicodeDecodeError:
            raise SystemExit(f"--start={args.start} is not UTF-8 text: give a text file") from None
    try:
        ids = indirect_indexing.question(start, meta) if examples else encode(start)
    except ValueError as err:
        raise SystemExit(f"--start: {err}") from None
    if len(ids) == 0:
        raise SystemExit("--start encodes to no tokens: give a longer prompt")
    if (examples or config.pos_emb in ABSOLUTE) and len(ids) > config.block_size:
        raise SystemExit(f"--start is {len(ids)} tokens, longer than the {config.block_size} this "
                         f"model reads ({config.pos_emb} positions stop at block_size): give a "
                         "shorter prompt")
    return ids


p = parser(__doc__)
p.add_argument('--out_dir', help='folder holding ckpt.pt (default: out)')
p.add_argument('--ckpt', help='ckpt.pt (the latest weights, the default) or best.pt (the best)')
p.add_argument('--init_from', help="instead of --out_dir and --ckpt: GPT-2 (gpt2, gpt2-medium, "
               "gpt2-large, gpt2-xl), a folder of Hugging Face's files, or a llama GGUF file "
               "(path/to/model.gguf, or smollm2-135m)")
p.add_argument('--start', default='\n', help='the prompt, or FILE:path to read it from a file')
p.add_argument('--num_samples', type=int, default=1)
p.add_argument('--max_new_tokens', type=int, default=200)
p.add_argument('--temperature', type=float, default=1.0, help='< 1 sharper, > 1 more random')
p.add_argument('--top_k', type=int, help='keep only the k most likely tokens')
p.add_argument('--device', type=device_arg, default='cuda' if torch.cuda.is_available() else 'cpu')
p.add_argument('--seed', type=int, default=1337)
p.add_argument('--dtype', choices=('float32', 'bfloat16', 'float16'), help='autocast on a GPU')
p.add_argument('--compile', default='False', choices=('True', 'False'),
               help='torch.compile the one-token step')
# the arguments' checks, as data: what must hold of args a, and the line when it does not
CHECKS = [
    (lambda a: a.num_samples >= 1, "--num_samples={num_samples}: must be 1 or more"),
    (lambda a: a.max_new_tokens >= 1, "--max_new_tokens={max_new_tokens}: must be 1 or more"),
    (lambda a: a.top_k is None or a.top_k >= 1, "--top_k={top_k}: must be 1 or more"),
    (lambda a: 0 < a.temperature < float('inf'), "--temperature={temperature}: must be a number "
     "above 0 (for the most likely token use --top_k=1)"),
    (lambda a: 0 <= a.seed < 2 ** 64, "--seed={seed}: give a whole number from 0 to 2**64 - 1"),
    (lambda a: a.start != '', "--start is empty: give a prompt (the default is a newline), or "
     "FILE:path"),
    (lambda a: not a.start.startswith('FILE:') or os.path.isfile(a.start[5:]),
     "--start={start}: no such file"),
]

if __name__ == '__main__':
    args = p.parse_args()
    if args.init_from and (args.out_dir or args.ckpt):  # two models named: neither is dropped
        named = ' '.join(f'--{k}={getattr(args, k)}' for k in ('out_dir', 'ckpt')
                         if getattr(args, k))
        raise SystemExit(f"--init_from={args.init_from} and {named} each name a model: give one of "
                         "them (--init_from alone, or --out_dir with --ckpt)")
    args.out_dir, args.ckpt = args.out_dir or 'out', args.ckpt or 'ckpt.pt'
    for holds, line in CHECKS:
        if not holds(args):
            raise SystemExit(line.format(**vars(args)))
    # a checkpoint's path where a folder and a file name go
    is_file = os.path.isfile(args.out_dir) or args.out_dir.endswith('.pt')
    path = args.out_dir if is_file else args.ckpt
    if not args.init_from and (path == args.out_dir or os.path.dirname(args.ckpt)):
        raise SystemExit(f"--ckpt is a file name inside --out_dir: for {path} give "
                         f"--out_dir={os.path.dirname(path) or '.'} "
                         f"--ckpt={os.path.basename(path)}")
    main(args)
