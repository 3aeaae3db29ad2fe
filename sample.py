"""
Sample from a trained model, decoding with the data set's own tokenizer:

    python sample.py --out_dir=out-indirect-pope --start="NZTUIGWkXFrhCJDzscat,N,+4," --max_new_tokens=1
    python sample.py --out_dir=out-indirect-pope-leftpad --start="NZTUIGWkXFrhCJDzscat, N, +4, "
    python sample.py --out_dir=out-shakespeare-pope --start=FILE:prompt.txt --num_samples=3
    python sample.py --out_dir=out-owt-pope --num_samples=8 --max_new_tokens=500 --compile=True
    python sample.py --init_from=gpt2 --start="The meaning of life is" --top_k=50   # OpenAI's GPT-2 (pretrained.py)
    python sample.py --init_from=smollm2-135m --start="The capital of France is" --top_k=1   # a GGUF model

An indirect-indexing model answers one token, the most likely, to a question written as its training rows hold
it (the data set's separator, '<bos>', left padding: prepare/indirect_indexing.py's question), typed either way.
The num_samples samples are drawn as one batch: the prompt runs through the model once, then one token a step
through a preallocated KV cache (generate.KVCache); --compile=True compiles that step, the forward pass of one token and
the sampling together (generate.decode_step: one CUDA graph a step on a GPU; the first step compiles, about a minute).
"""

import os
import pathlib

import torch

import pretrained
from eval import ABSOLUTE, autocast, default_dtype, device_arg, load_checkpoint, parser, tokenizer
from generate import generate
from prepare import indirect_indexing

p = parser(__doc__)
p.add_argument('--out_dir', help='folder holding ckpt.pt (default: out)')
p.add_argument('--ckpt', help='ckpt.pt (the latest weights, the default) or best.pt (the lowest val loss)')
p.add_argument('--init_from', help="instead of --out_dir and --ckpt: GPT-2 (gpt2, gpt2-medium, gpt2-large, "
               "gpt2-xl), a folder of Hugging Face's files, or a llama GGUF file (path/to/model.gguf, or "
               "smollm2-135m) (pretrained.py)")
p.add_argument('--start', default='\n', help='the prompt, or FILE:path to read it from a file')
p.add_argument('--num_samples', type=int, default=1)
p.add_argument('--max_new_tokens', type=int, default=200)
p.add_argument('--temperature', type=float, default=1.0, help='< 1 sharper, > 1 more random')
p.add_argument('--top_k', type=int, help='keep only the k most likely tokens')
p.add_argument('--device', type=device_arg, default='cuda' if torch.cuda.is_available() else 'cpu')
p.add_argument('--seed', type=int, default=1337)
p.add_argument('--dtype', choices=('float32', 'bfloat16', 'float16'), help='autocast on a GPU (default: bf16 there)')
p.add_argument('--compile', default='False', choices=('True', 'False'), help='torch.compile the one-token step')
args = p.parse_args()
if args.init_from and (args.out_dir or args.ckpt):  # two models named: neither is silently dropped
    given = ' '.join(f'--{name}={getattr(args, name)}' for name in ('out_dir', 'ckpt') if getattr(args, name))
    raise SystemExit(f"--init_from={args.init_from} and {given} each name a model: give one of them (--init_from "
                     "alone, or --out_dir with --ckpt)")
args.out_dir, args.ckpt = args.out_dir or 'out', args.ckpt or 'ckpt.pt'
for name in ('num_samples', 'max_new_tokens', 'top_k'):
    if getattr(args, name) is not None and getattr(args, name) < 1:
        raise SystemExit(f"--{name}={getattr(args, name)}: must be 1 or more")
if not 0 < args.temperature < float('inf'):
    raise SystemExit(f"--temperature={args.temperature}: must be a number above 0 (for the most likely token use "
                     "--top_k=1)")
if not 0 <= args.seed < 2 ** 64:  # what torch.manual_seed takes (as train.py, none below 0)
    raise SystemExit(f"--seed={args.seed}: give a whole number from 0 to 2**64 - 1")
if args.start == '':
    raise SystemExit("--start is empty: give a prompt (the default is a newline), or FILE:path")
if args.start.startswith('FILE:') and not os.path.isfile(args.start[5:]):
    raise SystemExit(f"--start={args.start}: no such file")
out_dir_is_file = os.path.isfile(args.out_dir) or args.out_dir.endswith('.pt')
if not args.init_from and (out_dir_is_file or os.path.dirname(args.ckpt)):  # a checkpoint's path where a name goes
    path = args.out_dir if out_dir_is_file else args.ckpt
    raise SystemExit(f"--ckpt is a file name inside --out_dir: for {path} give "
                     f"--out_dir={os.path.dirname(path) or '.'} --ckpt={os.path.basename(path)}")

torch.manual_seed(args.seed)
model, ckpt = (pretrained.load(args.init_from, args.device) if args.init_from
               else load_checkpoint(os.path.join(args.out_dir, args.ckpt), args.device))
meta = ckpt['meta']
encode, decode = tokenizer(meta)  # the data set's own: GPT-2's BPE, a GGUF model's, or its token list

start = pathlib.Path(args.start[5:]).read_text(encoding='utf-8') if args.start.startswith('FILE:') else args.start
examples = meta['kind'] == 'examples'  # indirect indexing: a question in its data set's layout, one answer token
if examples:
    args.max_new_tokens, args.top_k = 1, 1  # the answer is one token: the most likely one
try:
    ids = indirect_indexing.question(start, meta) if examples else encode(start)
except ValueError as err:
    raise SystemExit(f"--start: {err}")
if len(ids) == 0:
    raise SystemExit("--start encodes to no tokens: give a longer prompt")
cfg = model.config
if (examples or cfg.pos_emb in ABSOLUTE) and len(ids) > cfg.block_size:
    raise SystemExit(f"--start is {len(ids)} tokens, longer than the {cfg.block_size} this model reads "
                     f"({cfg.pos_emb} positions stop at block_size): give a shorter prompt")

# what generate allocates at once, before the first step: the KV cache, the output, the prompt's pass (its activations
# and the logits of its last position), checked here: too many tokens or samples are one line, not a swap or failure
B, T = args.num_samples, len(ids)
cache_len = min(T + args.max_new_tokens, cfg.block_size) if cfg.pos_emb in ABSOLUTE else T + args.max_new_tokens
itemsize = 4 if (args.dtype or default_dtype(args.device)) == 'float32' else 2
need = (2 * cfg.n_layer * B * (cfg.n_kv_head or cfg.n_head) * cache_len * (cfg.n_embd // cfg.n_head) * itemsize
        + 8 * B * (T + args.max_new_tokens) + 4 * B * (16 * T * cfg.n_embd + 2 * cfg.vocab_size))
if torch.device(args.device).type == 'cuda':
    free = torch.cuda.mem_get_info(torch.device(args.device))[0]
else:
    try:
        with open('/proc/meminfo') as f:
            free = next(int(line.split()[1]) * 1024 for line in f if line.startswith('MemAvailable:'))
    except (OSError, StopIteration):
        free = os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
if need > 0.8 * free:
    raise SystemExit(f"--num_samples={B} of {T} + --max_new_tokens={args.max_new_tokens} tokens need about "
                     f"{need / 2 ** 30:.1f} GiB (the KV cache and the output), more than the {free / 2 ** 30:.1f} GiB "
                     f"free on {args.device}: ask for fewer tokens or samples")
x = torch.tensor(ids, dtype=torch.long, device=args.device)[None, ...]
with torch.no_grad(), autocast(args.device, args.dtype or default_dtype(args.device)):
    y = generate(model, x.expand(args.num_samples, -1), args.max_new_tokens, temperature=args.temperature,
                 top_k=args.top_k, compile=args.compile == 'True')
for row in y.tolist():
    print(indirect_indexing.decode(row, meta['itos']) if examples else decode(row))  # (an answer: no padding, '<bos>')
    print('---------------')
