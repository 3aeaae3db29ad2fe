"""
Generation, as gpt-fast's generate.py: generate(model, idx, max_new_tokens, ...) runs the prompt in
one forward pass through a preallocated KVCache, then one token a step (decode_step; compile=True:
one CUDA graph a step on a GPU).
"""

import math
import os
import re
import sys

import torch
from torch.nn import functional as F

from model import ABSOLUTE, ENCODINGS, pope_decode


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, compile=False):
    """idx (B, T) and max_new_tokens sampled after it (see sample), in an output allocated once.
    Learned or sinusoidal positions stop at block_size: past it each token is predicted from the
    last block_size tokens, re-encoded whole from position 0."""
    temperature = check_temperature(temperature)
    if max_new_tokens < 1:
        return idx
    B, T = idx.size()
    absolute = model.config.pos_emb in ABSOLUTE
    max_len = min(T + max_new_tokens, model.config.block_size) if absolute else T + max_new_tokens
    device = idx.device  # under autocast, k and v come in its dtype
    autocast = torch.amp.is_autocast_available(device.type) and \
        torch.is_autocast_enabled(device.type)
    dtype = torch.get_autocast_dtype(device.type) if autocast else model.wte.weight.dtype
    cache = KVCache(model, B, max_len, device, dtype)
    out = torch.empty(B, T + max_new_tokens, dtype=idx.dtype, device=device)
    out[:, :T] = idx
    input_pos = torch.tensor([T], device=device)  # the position of the token the next step feeds
    temperature = torch.tensor(temperature, device=device)  # a tensor: a new value, the same graph
    for t in (out, input_pos, temperature):  # as KVCache's: read and written in place by the graph
        torch._dynamo.mark_static_address(t, guard=False)
    torch._dynamo.maybe_mark_dynamic(out, 1)  # its length a symbol, as the cache's
    step = compiled_step if compile else decode_step
    for n in range(T, T + max_new_tokens):  # out[:, n]: the token drawn now
        if n == T or n > max_len:  # the prompt, or the last max_len tokens from position 0
            fed = out[:, max(0, n - max_len):n]
            logits, _ = model(fed, cache=cache, input_pos=torch.arange(fed.size(1), device=device))
            out[:, n] = sample(logits[:, -1], temperature, top_k)
        else:  # the token at n - 1 through the cache
            step(model, out, cache, input_pos, temperature, top_k)
    return out


def decode_kernel_for(config, device, dtype):
    """Whether a KVCache's one-token steps run pope_decode.decode: on a GPU, at its dtypes and head
    dims, for an encoding without a score bias (not ALiBi)."""
    return (ENCODINGS[config.pos_emb].decodes and torch.device(device).type == 'cuda'
            and pope_decode is not None and dtype in pope_decode.DTYPES
            and config.n_embd // config.n_head in pope_decode.DECODE_HEAD_DIMS)


class KVCache:
    """Per layer k and v (B, n_kv_head, max_len, hd), preallocated and written in place (static
    shapes: a decoding step can be one CUDA graph). PoPE caches mu(k), the others their keys as
    attention reads them. Zeros until written: a masked position's weight 0 meets a finite value."""

    def __init__(self, model, batch, max_len, device, dtype, decode_kernel=None):
        config = model.config
        Hkv, hd = config.n_kv_head or config.n_head, config.n_embd // config.n_head
        self.k = [torch.zeros(batch, Hkv, max_len, hd, device=device, dtype=dtype) for _ in model.h]
        self.v = [torch.zeros_like(k) for k in self.k]
        # None: as decode_kernel_for says (a GPU); True forces it (CPU tensors, TRITON_INTERPRET=1)
        if decode_kernel is None:
            decode_kernel = decode_kernel_for(config, device, dtype)
        if decode_kernel and not ENCODINGS[config.pos_emb].decodes:
            raise ValueError(f"decode_kernel=True with pos_emb={config.pos_emb!r}: the decode "
                             "kernel has no score bias; leave decode_kernel None (or False)")
        self.decode_kernel = decode_kernel
        self.decode_tables = [block.attn.decode_tables(max_len) if decode_kernel else None
                              for block in model.h]  # of each layer's frequencies as they are now
        tables = [t for pair in self.decode_tables if pair for t in pair]
        # under torch.compile: written (or read) in place by the CUDA graph, never copied in, and
        # the lengths (the caches', the tables' rows) symbols from the first graph on
        for t in self.k + self.v + tables:
            torch._dynamo.mark_static_address(t, guard=False)
        for t in self.k + self.v:
            torch._dynamo.maybe_mark_dynamic(t, 2)
        for t in tables[::2]:
            torch._dynamo.maybe_mark_dynamic(t, 0)

    @property
    def max_len(self):  # a tensor's size: under torch.compile a symbol, not an int guarded on
        return self.k[0].shape[2]

    def update(self, layer, input_pos, k, v):
        """k (B, n_kv_head, T, hd) and v written at positions input_pos (T,); the layer's cache."""
        self.k[layer].index_copy_(2, input_pos, k.to(self.k[layer].dtype))
        self.v[layer].index_copy_(2, input_pos, v.to(self.v[layer].dtype))
        return self.k[layer], self.v[layer]


def refuse_what_cannot_fit(config, idx, max_new_tokens, dtype):
    """One line, before generate(model, idx, max_new_tokens) allocates anything, where its KV cache,
    output and prompt pass would take more than 80 % of the free memory of idx's device."""
    (B, T), device = idx.shape, idx.device
    L = T + max_new_tokens
    cache_len = min(L, config.block_size) if config.pos_emb in ABSOLUTE else L
    hd, Hkv = config.n_embd // config.n_head, config.n_kv_head or config.n_head
    cache = 2 * config.n_layer * B * Hkv * cache_len * hd * (4 if dtype == 'float32' else 2)
    need = cache + 8 * B * L + 4 * B * (16 * T * config.n_embd + 2 * config.vocab_size)
    if device.type == 'cuda':
        free = torch.cuda.mem_get_info(device)[0]
    else:  # MemAvailable (the page cache counts as free); the free pages where /proc is not
        try:
            free = int(re.search(r'MemAvailable:\s+(\d+)', open('/proc/meminfo').read())[1]) * 1024
        except (OSError, TypeError):
            free = os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    if need > 0.8 * free:
        raise SystemExit(f"--num_samples={B} of {T} + --max_new_tokens={max_new_tokens} tokens "
                         f"need about {need / 2 ** 30:.1f} GiB (the KV cache and the output), more "
                         f"than the {free / 2 ** 30:.1f} GiB free on {device}: ask for fewer "
                         "tokens or samples")


def check_temperature(temperature):
    """temperature as a float, where sample can draw at it: finite and above 0."""
    t = float(temperature)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"temperature={t}: must be a finite number above 0; for greedy "
                         "decoding use top_k=1")
    return t


def sample(logits, temperature, top_k=None):
    """Next tokens (B,) drawn from softmax(logits / temperature) (B, V) over the top_k most likely,
    in float32, as argmax p_i / E_i with E_i ~ Exponential(1): exact, and unlike torch.multinomial
    free of host syncs (a CUDA graph). A tensor temperature was checked where it was made."""
    if not torch.is_tensor(temperature):
        check_temperature(temperature)
    logits = logits.float() / temperature
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], float('-inf'))
    p = F.softmax(logits, dim=-1)
    return (p / -torch.rand_like(p).log()).argmax(-1)  # (-log U > 0: p = 0 is never drawn)


def decode_step(model, out, cache, input_pos, temperature, top_k):
    """In place: out[:, input_pos] through the cache, the next token into out[:, input_pos + 1]."""
    logits, _ = model(out.index_select(1, input_pos), cache=cache, input_pos=input_pos)
    input_pos += 1
    out.index_copy_(1, input_pos, sample(logits[:, -1], temperature, top_k)[:, None])


# one CUDA graph a step on a GPU (fullgraph: a graph break is an error); another batch size or
# top_k compiles again, a new length, temperature or set of tensors does not
compiled_step = torch.compile(decode_step, mode='reduce-overhead', fullgraph=True)


# sample.py's command line: what must hold of its arguments a, and the line when it does not
SAMPLE_CHECKS = [
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


def check_sample_args(args):
    """sample.py's arguments, or one line and an exit: one model named (--init_from, or --out_dir
    with --ckpt, a file name in it), and SAMPLE_CHECKS."""
    named = ' '.join(f'--{k}={getattr(args, k)}' for k in ('out_dir', 'ckpt') if getattr(args, k))
    if args.init_from and named:  # two models named: neither is dropped
        sys.exit(f"--init_from={args.init_from} and {named} each name a model: give one of them "
                 "(--init_from alone, or --out_dir with --ckpt)")
    args.out_dir, args.ckpt = args.out_dir or 'out', args.ckpt or 'ckpt.pt'
    for holds, line in SAMPLE_CHECKS:
        if not holds(args):
            sys.exit(line.format(**vars(args)))
    is_file = os.path.isfile(args.out_dir) or args.out_dir.endswith('.pt')  # a path for a folder
    path = args.out_dir if is_file else args.ckpt
    if not args.init_from and (path == args.out_dir or os.path.dirname(args.ckpt)):
        sys.exit(f"--ckpt is a file name inside --out_dir: for {path} give --out_dir="
                 f"{os.path.dirname(path) or '.'} --ckpt={os.path.basename(path)}")
    return args


def prompt_ids(start, encode, config, examples):
    """sample.py's --start (text, or FILE:path) as encode makes it tokens (examples: a question of
    indirect indexing), or one line and an exit."""
    try:
        text = open(start[5:], encoding='utf-8').read() if start.startswith('FILE:') else start
        ids = encode(text)
    except UnicodeDecodeError:
        sys.exit(f"--start={start} is not UTF-8 text: give a text file")
    except ValueError as err:  # an ill-posed question
        sys.exit(f"--start: {err}")
    if len(ids) == 0:
        sys.exit("--start encodes to no tokens: give a longer prompt")
    if (examples or config.pos_emb in ABSOLUTE) and len(ids) > config.block_size:
        sys.exit(f"--start is {len(ids)} tokens, longer than the {config.block_size} this model "
                 f"reads ({config.pos_emb} positions stop at block_size): give a shorter prompt")
    return ids
