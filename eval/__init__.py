"""
Evaluation of trained checkpoints: the paper's three analyses, each one command.

    python -m eval.extrapolation   perplexity vs context length (PG-19 test by default), RoPE+YaRN too
    python -m eval.zero_shot       LAMBADA, BLiMP, CBT, HellaSwag, PIQA, ARC-Easy through lm-eval
    python -m eval.frequency_usage query/key magnitude per frequency and layer, PoPE's learned delta

This file holds what they share: loading a ckpt.pt written by train.py, the checkpoint's tokenizer,
and the loss without materialising all the logits at once.
"""

import math
import os

import torch
from torch.nn import functional as F

ABSOLUTE = ('learned', 'sinusoidal')  # encodings that stop at block_size


def read_checkpoint(path, device='cpu'):
    """The dict of a ckpt.pt (or best.pt) written by train.py, its tensors on device; one clear line when the
    file is not one."""
    if not os.path.isfile(path):
        raise SystemExit(f"no checkpoint at {path}: train one first (python train.py config/...)")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=False)
    except Exception as err:  # empty, truncated, or not a torch file at all
        raise SystemExit(f"{path} is not a readable checkpoint ({type(err).__name__}): "
                         "it may be cut short; train again, or use another one (best.pt, ckpt.pt)")
    if not isinstance(ckpt, dict) or not {'model', 'model_args', 'meta'} <= ckpt.keys():
        raise SystemExit(f"{path} is not a checkpoint written by train.py (no model, model_args and meta)")
    return ckpt


def load_checkpoint(path, device='cpu', **overrides):
    """(model, ckpt) from a train.py ckpt.pt; overrides replace GPTConfig fields (yarn_scale, attn_impl...)."""
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root
    from model import GPT, GPTConfig

    ckpt = read_checkpoint(path)
    args = dict(ckpt['model_args'])
    args.update({k: v for k, v in overrides.items() if v is not None})
    args['dropout'] = 0.0
    model = GPT(GPTConfig(**args))
    model.load_state_dict(ckpt['model'])
    model.project_delta()  # as train.py keeps it (an older checkpoint's forward pass clamped it instead)
    ckpt['model_args'] = args
    return model.eval().to(device), ckpt


def autocast(device, dtype):
    """bf16/fp16 autocast on a GPU, nothing on the CPU (as in train.py)."""
    device_type = 'cuda' if 'cuda' in str(device) else 'cpu'
    if device_type == 'cpu' or dtype == 'float32':
        from contextlib import nullcontext
        return nullcontext()
    return torch.autocast(device_type=device_type, dtype=getattr(torch, dtype))


def default_dtype(device):
    return 'bfloat16' if 'cuda' in str(device) and torch.cuda.is_bf16_supported() else 'float32'


def tokenizer(meta):
    """(encode, decode) of a data set's meta.json: GPT-2 BPE or a token list (itos)."""
    if meta['tokenizer'] == 'gpt2':
        from prepare.common import gpt2_encoding
        enc = gpt2_encoding()
        return (lambda s: enc.encode(s, allowed_special={'<|endoftext|>'})), enc.decode
    itos, sep = meta['itos'], meta.get('sep', '')  # a token list: characters, music events, 6-mers
    stoi = {s: i for i, s in enumerate(itos)}

    def encode(s):
        parts = s.split(sep) if sep else list(s)
        unknown = [t for t in parts if t not in stoi]
        if unknown:
            raise ValueError(f"tokens {unknown[:5]} are not in this data set's vocabulary ({len(itos)} tokens)")
        return [stoi[t] for t in parts]

    return encode, (lambda ids: sep.join(itos[i] for i in ids))


def vocab_weight(model):
    """lm_head's rows of the tokenizer's vocabulary (the model pads them to a multiple of 64), in float32."""
    return model.lm_head.weight[:model.config.vocab_size].float()


def log_probs(model, h, weight=None):
    """log_softmax(lm_head(h)) in float32, autocast or not (bf16 logits would cost ~1e-2 nats)."""
    w = vocab_weight(model) if weight is None else weight
    with torch.autocast(h.device.type, enabled=False):
        return F.log_softmax(F.linear(h.float(), w), dim=-1)


def chunked_log_probs(model, h, chunk=1024):
    """log_probs over time chunks of h (B, T, C): yields (t0, log-probs (B, t, V))."""
    w = vocab_weight(model)
    for t0 in range(0, h.size(1), chunk):
        yield t0, log_probs(model, h[:, t0:t0 + chunk], w)


@torch.no_grad()
def sequence_nll(model, idx, targets, chunk=1024):
    """Summed negative log-likelihood of targets (B, T) given idx (B, T), per sequence (B,) in float64;
    the logits exist only chunk positions at a time."""
    h = model.hidden_states(idx)
    nll = torch.zeros(idx.size(0), dtype=torch.float64, device=idx.device)
    for t0, lp in chunked_log_probs(model, h, chunk):
        tg = targets[:, t0:t0 + lp.size(1)]
        nll -= lp.gather(-1, tg.unsqueeze(-1)).squeeze(-1).double().sum(1)
    return nll


def ppl(mean_nll):
    return math.exp(mean_nll) if mean_nll < 700 else float('inf')
