"""
Generation, as gpt-fast's generate.py: a preallocated KVCache, sample() and generate(model, idx,
max_new_tokens, ...), the prompt in one forward pass, then one token a step (decode_step;
compile=True: one CUDA graph a step on a GPU).
"""

import math
import os
import re

import torch
from torch.nn import functional as F

from model import ABSOLUTE, ENCODINGS, pope_decode


def decode_kernel_for(config, device, dtype):
    """Whether a KVCache's one-token steps run pope_decode.decode: on a GPU, at its dtypes and head
    dims, for an encoding without a score bias (not ALiBi)."""
    return (ENCODINGS[config.pos_emb].decodes and torch.device(device).type == 'cuda'
            and pope_decode is not None and dtype in pope_decode.DTYPES
            and config.n_embd // config.n_head in pope_decode.DECODE_HEAD_DIMS)


class KVCache:
    """The keys and values of a generation, preallocated: per layer k and v (B, n_kv_head, max_len,
    hd), written in place at the positions of each forward pass (static shapes: a decoding step can
    be one CUDA graph). PoPE caches mu(k), the others their keys as attention reads them. Zeros
    until written: a masked position gets attention weight 0, which must meet a finite value."""

    def __init__(self, model, batch, max_len, device, dtype, decode_kernel=None):
        config = model.config
        Hkv, hd = config.n_kv_head or config.n_head, config.n_embd // config.n_head
        shape = (batch, Hkv, max_len, hd)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        # None: as decode_kernel_for says (a GPU); True forces it (CPU tensors, TRITON_INTERPRET=1)
        if decode_kernel is None:
            decode_kernel = decode_kernel_for(config, device, dtype)
        if decode_kernel and not ENCODINGS[config.pos_emb].decodes:
            raise ValueError(f"decode_kernel=True with pos_emb={config.pos_emb!r}: the decode "
                             "kernel has no score bias; leave decode_kernel None (or False)")
        self.decode_kernel = decode_kernel
        # each layer's tables for the kernel, made from its module's frequencies as they are now
        # (PoPE's phases; None for plain keys), on the cache's device, before any CUDA graph
        self.decode_tables = [block.attn.decode_tables(max_len) if decode_kernel else None
                              for block in model.h]
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
        """k (B, n_kv_head, T, hd) and v written at positions input_pos (T,); the layer's whole
        cache returned."""
        self.k[layer].index_copy_(2, input_pos, k.to(self.k[layer].dtype))
        self.v[layer].index_copy_(2, input_pos, v.to(self.v[layer].dtype))
        return self.k[layer], self.v[layer]


def refuse_what_cannot_fit(config, B, T, max_new_tokens, device, dtype):
    """One line, before anything is allocated, when generate's first allocations (the KV cache,
    the output, the prompt's pass) would take more than 80 % of the device's free memory."""
    L = T + max_new_tokens
    if config.pos_emb in ABSOLUTE:
        L = min(L, config.block_size)
    hd, Hkv = config.n_embd // config.n_head, config.n_kv_head or config.n_head
    itemsize = 4 if dtype == 'float32' else 2
    need = (2 * config.n_layer * B * Hkv * L * hd * itemsize + 8 * B * (T + max_new_tokens)
            + 4 * B * (16 * T * config.n_embd + 2 * config.vocab_size))
    if torch.device(device).type == 'cuda':
        free = torch.cuda.mem_get_info(torch.device(device))[0]
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
    """temperature as a float, if sample can draw at it: finite and above 0 (the most likely token
    is top_k=1)."""
    t = float(temperature)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"temperature={t}: must be a finite number above 0; for greedy "
                         "decoding use top_k=1")
    return t


def sample(logits, temperature, top_k=None):
    """Next tokens (B,) drawn from softmax(logits / temperature) of logits (B, V), over the top_k
    most likely tokens (all if None), in float32 (bf16 would tie scores), as argmax p_i / E_i, E_i ~
    Exponential(1) independent: exact, since P(E_i / p_i is the smallest) = p_i / sum(p)
    (torch.multinomial draws so too, behind checks of its input that can wait for the GPU: not in a
    CUDA graph). E = -log U, U uniform on [0, 1), is never 0: a token of probability 0 is never
    drawn. temperature: a number (check_temperature), or a 0-d tensor checked where it was made
    (generate's, before its loop: a check here would wait for the GPU at every step, and break the
    compiled step's graph)."""
    if not torch.is_tensor(temperature):
        check_temperature(temperature)
    logits = logits.float() / temperature
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], float('-inf'))
    p = F.softmax(logits, dim=-1)
    return (p / -torch.rand_like(p).log()).argmax(-1)


def decode_step(model, out, cache, input_pos, temperature, top_k):
    """generate's one-token step, in place: the token out[:, input_pos] (input_pos (1,): its
    position in out and in the cache) through the cache, the next token sampled into out[:,
    input_pos + 1], input_pos moved on to it."""
    logits, _ = model(out.index_select(1, input_pos), cache=cache, input_pos=input_pos)
    input_pos += 1
    out.index_copy_(1, input_pos, sample(logits[:, -1], temperature, top_k)[:, None])


# decode_step compiled on its first call ('reduce-overhead': one CUDA graph a step on a GPU;
# fullgraph: a graph break is an error); the first call with another batch size or top_k compiles
# again (then they are symbols of the graph), a new length, temperature or set of tensors compiles
# nothing (generate marks the lengths dynamic)
compiled_step = torch.compile(decode_step, mode='reduce-overhead', fullgraph=True)


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, compile=False):
    """Sample max_new_tokens after idx (B, T) (see sample) through a KVCache: the prompt in one
    forward pass, then one token a step (decode_step; compile: compiled_step) into an output
    allocated once. top_k (an int) is a constant of the compiled step. With learned/sinusoidal
    positions, which stop at block_size, each token past them is predicted from the last block_size
    tokens, re-encoded from position 0 (every position moves)."""
    temperature = check_temperature(temperature)  # (before anything runs)
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
        # the prompt, or (learned/sinusoidal past block_size) the last max_len tokens, from cache
        # position 0
        if n == T or n > max_len:
            fed = out[:, max(0, n - max_len):n]
            logits, _ = model(fed, cache=cache, input_pos=torch.arange(fed.size(1), device=device))
            out[:, n] = sample(logits[:, -1], temperature, top_k)
        else:  # the token at n - 1 through the cache
            step(model, out, cache, input_pos, temperature, top_k)
    return out
