"""
One readable GPT with switchable position encodings (ENCODINGS: PoPE and the paper's baselines).

PoPE (Polar Coordinate Positional Embeddings, Gopalakrishnan et al. 2025) turns each query and key
of head dimension d into d complex numbers whose magnitude is content ("what") and whose phase is
position ("where"):

    mu_q = softplus(q_t),  phi_q = t theta - delta      mu_k = softplus(k_s),  phi_k = s theta
    theta_c = base ** (-c / d),  c = 0..d-1
    a_ts = Re(sum_c conj(q~_tc) k~_sc) = sum_c mu_q[c] mu_k[c] cos((s - t) theta_c + delta_c)

delta is a learnable phase bias per (layer, head, frequency), kept in [-2pi, 0] (GPT.project_delta
after each optimizer step). The paper puts it on the key; a score depends on phi_k - phi_q alone, so
it sits on the query here, where a group of query heads can share one key (grouped-query attention,
a cache of mu(k)). Values are untouched; the logits keep the usual 1/sqrt(d) scale. In real numbers
PoPE is ordinary attention on 2d-wide q' = [mu cos phi, mu sin phi] (pope_polar): the reference
below. On a GPU the same function runs fused (pope_kernel.py), chosen by pope_path.
"""

import importlib.util
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

if importlib.util.find_spec('triton'):  # the kernels: attention, the loss, a decoding step
    import ce_kernel
    import pope_decode
    import pope_kernel
else:  # no Triton here (some platforms): the plain PyTorch paths alone
    ce_kernel = pope_decode = pope_kernel = None

# PoPE's magnitude mu(x): softplus (the paper), or its ablations relu and identity (mu = x)
POPE_MUS = {'softplus': F.softplus, 'relu': F.relu, 'identity': lambda x: x}
# each choice of the model's config (GPT refuses any other), its first the default
CHOICES = {
    'attn_impl': ('auto', 'torch', 'sdpa', 'fused', 'triton'),  # pope_path
    'pope_mu': tuple(POPE_MUS),
    'pope_delta': ('uniform', 'zero', 'none'),  # delta from U(-2pi, 0), from 0, or no delta
    'norm': ('rmsnorm', 'layernorm'),
    'init': ('gpt2', 'torch'),
    'gelu_approximate': ('none', 'tanh'),
    'mlp': ('gelu', 'swiglu'),
}

# PoPE -----------------------------------------------------------------------


def pope_frequencies(d, base=10000.0, device=None):
    """PoPE's d frequencies theta_c = base^(-c/d), c = 0..d-1 (twice RoPE's d/2), in float64."""
    return base ** (-torch.arange(d, dtype=torch.float64, device=device) / d)


def pope_polar(x, pos, theta, delta=None, mu='softplus'):
    """x (..., T, d) at positions pos (T,) as mu(x) e^{i phi} in real form [mu cos phi, mu sin phi]
    (..., T, 2d), in float32 at least. phi = pos theta for keys, pos theta - delta (H, d) for
    queries, in float64: a float32 angle at position 1e5 is off by up to 0.008 rad."""
    dt = torch.promote_types(x.dtype, torch.float32)
    phi = pos.to(torch.float64)[:, None] * theta.to(pos.device)
    if delta is not None:
        phi = phi - delta.to(torch.float64)[:, None, :]
    magnitude = POPE_MUS[mu](x.to(dt))
    return torch.cat([magnitude * phi.cos().to(dt), magnitude * phi.sin().to(dt)], -1)


def pope_attention_reference(q, k, v, delta, theta, *, causal=True, sm_scale=None, q_offset=0,
                             mu='softplus', explicit=True):
    """PoPE attention from its definition, the ground truth of every faster path: attention on q',
    k' (pope_polar), explicit or through SDPA. q (B, H, Tq, d) at positions q_offset.., k, v (B,
    H_kv, Tk, d) at 0.., delta (H, d) or None, theta (d,)."""
    t = torch.arange(q_offset, q_offset + q.shape[-2], device=q.device)
    s = torch.arange(k.shape[-2], device=k.device)
    qp, kp = pope_polar(q, t, theta, delta, mu), pope_polar(k, s, theta, mu=mu)
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale  # d, not 2d
    return attention(qp, kp, v, sm_scale, causal, q_offset, explicit=explicit)


def pope_path(attn_impl, q):
    """The one place that decides which PoPE attention runs on q (B, H, T, d): 'torch' or 'sdpa'
    (the reference, explicit or through SDPA), pope_kernel's 'fused' (Triton around cuDNN's SDPA)
    or 'triton' (all Triton). 'auto': the kernel on a GPU, all-Triton at d 64 up to SHORT_T keys
    (small tiles win there: results/kernel/README.md), else SDPA's reference."""
    if attn_impl != 'auto':
        return attn_impl
    if pope_kernel is None or not q.is_cuda or q.dtype == torch.float64:
        return 'sdpa'
    return 'triton' if q.shape[-1] == 64 and q.shape[-2] <= pope_kernel.SHORT_T else 'fused'

# Attention of whole sequences, and over a KV cache --------------------------


def causal_mask(Tq, Tk, q_offset, device):
    """True where key s is visible to query i, which sits at position q_offset + i."""
    t, s = torch.arange(q_offset, q_offset + Tq, device=device), torch.arange(Tk, device=device)
    return s[None, :] <= t[:, None]


def repeat_kv(x, n_head):
    """Grouped-query attention: (B, H_kv, T, w) -> (B, n_head, T, w), head h reading h // group."""
    if x.shape[1] == n_head:
        return x
    return x[:, :, None].expand(-1, -1, n_head // x.shape[1], -1, -1).flatten(1, 2)


def attention(q, k, v, scale, causal=True, q_offset=0, bias=None, explicit=False):
    """softmax(scale q k^T + bias) v, q (B, H, Tq, w) at positions q_offset.. over k (B, H_kv, Tk,
    w), v; bias (H, Tq, Tk) or None. explicit: scores as a tensor (attn_impl='torch'), else SDPA."""
    H, Tq, Tk = q.shape[1], q.shape[-2], k.shape[-2]
    k, v = repeat_kv(k, H), repeat_kv(v, H)
    if explicit:
        att = (q @ k.transpose(-2, -1)) * scale
        if bias is not None:
            att = att + bias
        if causal:
            att = att.masked_fill(~causal_mask(Tq, Tk, q_offset, q.device), float('-inf'))
        return (F.softmax(att, dim=-1) @ v.to(att.dtype)).to(v.dtype)
    q, k = q.to(v.dtype), k.to(v.dtype)  # (PoPE's q', k' are formed in float32 at least)
    if bias is None and causal and q_offset == 0 and Tq == Tk:  # (is_causal is top-left aligned)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    mask = None if bias is None else bias.to(q.dtype)
    if causal and q_offset < Tk - 1:  # (else every query sees every key: a decoding step)
        visible = causal_mask(Tq, Tk, q_offset, q.device)
        mask = visible if mask is None else mask.masked_fill(~visible, float('-inf'))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def cache_attention(q, k, v, visible, bias=None, scale=None):
    """q (B, H, T, w) over a KVCache's k (B, H_kv, L, w), v where visible (T, L), plus bias (H, T,
    L): SDPA for a prompt; for one query (a decoding step) matmuls that read each kv head once."""
    (B, H, T, w), Hkv = q.shape, k.shape[1]
    if T > 1:
        mask = visible if bias is None else bias.to(q.dtype).masked_fill(~visible, float('-inf'))
        k, v = repeat_kv(k, H), repeat_kv(v, H)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    q = q.reshape(B, Hkv, H // Hkv, w)  # query head h = j * (H // H_kv) + g reads kv head j
    att = (q @ k.transpose(-2, -1)).to(torch.promote_types(q.dtype, torch.float32)) * scale
    if bias is not None:
        att = att + bias.reshape(Hkv, H // Hkv, -1)
    att = att.masked_fill(~visible, float('-inf'))
    return (att.softmax(-1).to(v.dtype) @ v).reshape(B, H, 1, -1)

# The other encodings' positions ---------------------------------------------


def rope_frequencies(n, base, yarn_scale=1.0, yarn_orig_ctx=1024, alpha=1.0, beta=32.0):
    """RoPE's n frequencies base^(-2i/2n); YaRN (Peng et al. 2023): a pair turning r times in
    orig_ctx keeps theta if r > beta, takes theta / s if r < alpha, and a ramp between."""
    theta = base ** (-torch.arange(n, dtype=torch.float64) / n)
    if yarn_scale == 1.0:
        return theta
    r = yarn_orig_ctx * theta / (2 * math.pi)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0, 1)
    return (1 - gamma) * theta / yarn_scale + gamma * theta


def rope_angles(pos, theta):
    ang = pos.to(torch.float64)[:, None] * theta.to(pos.device)[None, :]
    return ang.cos(), ang.sin()


def rope_rotate(x, cos, sin):
    """The pairs (x[i], x[i + n]) of x's first 2n channels rotated by the angles of cos, sin (n)."""
    n = cos.shape[-1]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2, rest = x[..., :n], x[..., n:2 * n], x[..., 2 * n:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], dim=-1)


def alibi_slopes(n_head):
    """ALiBi on the first half of the heads (geometric slopes 2^(-8i/(H/2))), none on the rest."""
    h = n_head // 2
    return torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)] + [0.0] * (n_head - h))


def sinusoidal_table(T, n_embd):
    """Fixed absolute embeddings of Vaswani et al.: sin and cos of pos / 10000^(2i/n_embd)."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    inv = 10000 ** (-torch.arange(0, n_embd, 2, dtype=torch.float64) / n_embd)
    table = torch.zeros(T, n_embd, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = (pos * inv).sin(), (pos * inv).cos()
    return table.float()

# The GPT --------------------------------------------------------------------


@dataclass
class GPTConfig:  # the defaults are train.py's
    block_size: int = 48  # training context (learned position embeddings stop here; others don't)
    vocab_size: int = 50257  # the tokenizer's; the embedding is padded to a multiple of 64
    n_layer: int = 8
    n_head: int = 8
    n_kv_head: int = 0  # key/value heads (grouped-query attention; divides n_head); 0 = n_head
    n_embd: int = 512
    dropout: float = 0.0  # on embeddings and residual branches (never on attention weights)
    bias: bool = False  # biases in Linear layers (and LayerNorm)
    pos_emb: str = 'pope'  # one of ENCODINGS
    pos_base: float = 10000.0  # frequency base of pope / rope
    pope_mu: str = 'softplus'  # PoPE's magnitude mu(x), or the ablations 'relu', 'identity'
    pope_delta: str = 'uniform'  # delta's init, U(-2pi, 0) or 'zero'; 'none': no delta (ablation)
    attn_impl: str = 'auto'  # PoPE's attention path: auto, torch, sdpa, fused, triton (pope_path)
    yarn_scale: float = 1.0  # YaRN context-extension factor s for rope / rope_half; 1.0 = off
    yarn_orig_ctx: int = 1024  # the context the RoPE model was pre-trained at (YaRN only)
    # the public indirect-indexing replication's model (results/indirect_indexing/README.md)
    norm: str = 'rmsnorm'  # 'rmsnorm' (the paper) or 'layernorm'
    tie_embeddings: bool = True  # the output layer shares the token embedding's weights
    init: str = 'gpt2'  # 'gpt2' (N(0, 0.02), residual projections / sqrt(2 n_layer)) or 'torch'
    gelu_approximate: str = 'none'  # the MLP's GELU: 'none' (exact) or 'tanh' (GPT-2's weights)
    mlp: str = 'gelu'  # or 'swiglu' (Llama's, as the next two): c_proj(silu(gate x) * up x)
    mlp_hidden: int = 0  # the MLP's hidden width; 0 = 4 * n_embd
    norm_eps: float = 0.0  # the norms' epsilon; 0: torch's default

    def check(self):
        """A ValueError naming the first value the model cannot be built with."""
        for key, choices in {'pos_emb': tuple(ENCODINGS), **CHOICES}.items():
            if getattr(self, key) not in choices:
                raise ValueError(f"{key}={getattr(self, key)!r}; choose one of {choices}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not a multiple of n_head={self.n_head}")
        if self.n_kv_head < 0 or self.n_kv_head and self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head={self.n_kv_head} must divide n_head={self.n_head} or be 0")


class CausalSelfAttention(nn.Module):
    """Attention with no positions of its own ('none', and the ABSOLUTE encodings). Each encoding
    is a subclass overriding what it changes: rotate (RoPE), bias (ALiBi), attend* and cached_keys
    (PoPE)."""

    qk_width = 1  # q and k are hd wide (PoPE's q', k': 2 hd), for flops_per_token
    decodes = True  # a one-token step over a cache may run pope_decode's kernel (no score bias)

    def __init__(self, config, layer):
        super().__init__()
        self.n_head, self.n_kv_head = config.n_head, config.n_kv_head or config.n_head
        self.layer, self.hd = layer, config.n_embd // config.n_head
        qkv_width = (self.n_head + 2 * self.n_kv_head) * self.hd
        self.c_attn = nn.Linear(config.n_embd, qkv_width, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.explicit = config.attn_impl == 'torch'  # explicit scores (the reference), else SDPA
        self.scale = 1.0 / math.sqrt(self.hd)

    def forward(self, x, cache=None, input_pos=None):
        """x (B, T, n_embd) at positions 0..T-1, or with a KVCache at positions input_pos (T,)."""
        B, T, _ = x.size()
        H, Hkv, hd = self.n_head, self.n_kv_head, self.hd
        q, k, v = self.c_attn(x).split([H * hd, Hkv * hd, Hkv * hd], dim=2)
        q, k, v = q.view(B, T, H, hd), k.view(B, T, Hkv, hd), v.view(B, T, Hkv, hd)
        q, k = self.rotate(q, k, input_pos)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        y = self.attend(q, k, v) if cache is None else self.attend_cached(q, k, v, cache, input_pos)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, H * hd)))

    def rotate(self, q, k, input_pos):
        """q and k (B, T, heads, hd) as attention reads them: as they are (RoPE rotates them)."""
        return q, k

    def bias(self, t, s):
        """A bias (H, len(t), len(s)) on the scores of queries at t, keys at s (ALiBi), or None."""
        return None

    def attend(self, q, k, v):
        """Causal attention of a whole sequence at positions 0..T-1."""
        pos = torch.arange(q.shape[2], device=q.device)
        return attention(q, k, v, self.scale, bias=self.bias(pos, pos), explicit=self.explicit)

    def attend_cached(self, q, k, v, cache, input_pos):
        """The tokens at positions input_pos over a KVCache, once their keys and values are in."""
        k, v = cache.update(self.layer, input_pos, k, v)
        if q.shape[2] == 1 and cache.decode_kernel:  # (tables: PoPE's phases, or none)
            tables = cache.decode_tables[self.layer] or (None, None)
            return pope_decode.decode(q[:, :, 0], k, v, input_pos + 1, *tables,
                                      self.scale)[:, :, None]
        s = torch.arange(cache.max_len, device=q.device)
        k, visible = self.cached_keys(k, s).to(v.dtype), s[None, :] <= input_pos[:, None]
        return cache_attention(q.to(v.dtype), k, v, visible, self.bias(input_pos, s), self.scale)

    def cached_keys(self, k, s):
        """A KVCache's keys (B, H_kv, L, hd) at positions s as attention reads them: as stored."""
        return k

    def decode_tables(self, max_len):
        """The tables pope_decode's kernel reads for this encoding's keys: none for plain keys."""
        return None


class RoPEAttention(CausalSelfAttention):
    """RoPE (Su et al. 2021): channel pairs (i, i + n) of q and k rotated by t theta_i at position
    t. YaRN (yarn_scale > 1) stretches theta and scales q and k by its attention temperature."""

    rotated = 1.0  # the share of each head's channels that rotate: n = rotated * hd / 2 pairs

    def __init__(self, config, layer):
        super().__init__(config, layer)
        n = int(self.hd * self.rotated) // 2
        theta = rope_frequencies(n, config.pos_base, config.yarn_scale, config.yarn_orig_ctx)
        self.register_buffer('theta', theta, persistent=False)
        # YaRN's attention temperature sqrt(1/t) = 0.1 ln(s) + 1 multiplies q and k alike
        self.yarn_mscale = 0.1 * math.log(config.yarn_scale) + 1.0 if config.yarn_scale > 1 else 1.0

    def rotate(self, q, k, input_pos):
        pos = torch.arange(q.shape[1], device=q.device) if input_pos is None else input_pos
        cos, sin = (a[:, None, :] for a in rope_angles(pos, self.theta))  # (T, 1, n): every head
        m = self.yarn_mscale
        return rope_rotate(q, cos, sin) * m, rope_rotate(k, cos, sin) * m


class RoPEHalfAttention(RoPEAttention):
    """RoPE on the first half of each head's channels; the rest carry content alone."""

    rotated = 0.5


class ALiBiHalfAttention(CausalSelfAttention):
    """ALiBi (Press et al. 2022) on the first half of the heads: the bias -m_h (t - s) on the score
    of query t and key s (alibi_slopes); the other heads have no positions."""

    decodes = False  # pope_decode's kernel has no score bias

    def __init__(self, config, layer):
        super().__init__(config, layer)
        self.register_buffer('slopes', alibi_slopes(self.n_head), persistent=False)

    def bias(self, t, s):
        return -self.slopes[:, None, None] * (t[:, None] - s[None, :])


class PoPEAttention(CausalSelfAttention):
    """PoPE (the module docstring) on the path pope_path picks. Every path reads the module's theta
    when it runs, so a subclass whose theta is an nn.Parameter trains it (docs/encodings.md)."""

    qk_width = 2  # q' and k' are 2 hd wide

    def __init__(self, config, layer):
        super().__init__(config, layer)
        self.mu, self.attn_impl = config.pope_mu, config.attn_impl
        self.delta = None  # the ablation 'none': phases from positions alone
        if config.pope_delta != 'none':  # used as is: GPT.project_delta keeps it in [-2pi, 0]
            self.delta = nn.Parameter(torch.zeros(self.n_head, self.hd))
            if config.pope_delta == 'uniform':
                nn.init.uniform_(self.delta, -2 * math.pi, 0.0)
        self.register_buffer('theta', self.frequencies(config), persistent=False)

    @classmethod
    def frequencies(cls, config):
        """theta (hd,) in float64: PoPE's frequencies at config's head dim and pos_base."""
        return pope_frequencies(config.n_embd // config.n_head, config.pos_base)

    def attend(self, q, k, v):
        path = pope_path(self.attn_impl, q)
        if path in ('torch', 'sdpa'):
            return pope_attention_reference(q, k, v, self.delta, self.theta, mu=self.mu,
                                            explicit=path == 'torch')
        return pope_kernel.pope_attention_fast(q, k, v, self.delta, self.theta, mu=self.mu,
                                               impl='sdpa' if path == 'fused' else 'triton')

    def attend_cached(self, q, k, v, cache, input_pos):
        """q' over a cache of mu(k) (delta is on the query): pope_decode's kernel forms k' from
        its phase tables, the plain path from the whole cache (cached_keys)."""
        q = pope_polar(q, input_pos, self.theta, self.delta, self.mu)
        k = POPE_MUS[self.mu](k.to(torch.promote_types(k.dtype, torch.float32)))
        return super().attend_cached(q, k, v, cache, input_pos)

    def cached_keys(self, k, s):
        return pope_polar(k, s, self.theta, mu='identity')

    def decode_tables(self, max_len):
        """pope_decode's phase tables at theta now (2 tiles at least: 1 is specialised)."""
        return pope_decode.decode_tables(self.theta, max(max_len, 2 * pope_decode.DECODE_BLOCK))


class PoPEHalfAttention(PoPEAttention):
    """PoPE with positions on the first d/2 frequencies (the fastest) alone: the other d/2 have
    theta = 0, so their phase is delta's and they carry content and delta."""

    @classmethod
    def frequencies(cls, config):
        theta = super().frequencies(config)
        theta[len(theta) // 2:] = 0.0
        return theta


# Every position encoding, by its pos_emb name: the attention of its blocks (docs/encodings.md).
# The absolute ones have no positions in attention: GPT adds theirs to the token embeddings.
ENCODINGS = {
    'pope': PoPEAttention,
    'pope_half': PoPEHalfAttention,
    'rope': RoPEAttention,
    'rope_half': RoPEHalfAttention,
    'alibi_half': ALiBiHalfAttention,
    'learned': CausalSelfAttention,
    'sinusoidal': CausalSelfAttention,
    'none': CausalSelfAttention,
}
ABSOLUTE = ('learned', 'sinusoidal')


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        hidden = config.mlp_hidden or 4 * config.n_embd
        self.swiglu = config.mlp == 'swiglu'  # its gate and up projections are one matrix
        self.c_fc = nn.Linear(config.n_embd, (2 if self.swiglu else 1) * hidden, bias=config.bias)
        self.c_proj = nn.Linear(hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.approximate = config.gelu_approximate

    def forward(self, x):
        if self.swiglu:
            gate, up = self.c_fc(x).chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(self.c_fc(x), approximate=self.approximate)
        return self.dropout(self.c_proj(h))


def make_norm(config):
    if config.norm == 'rmsnorm':
        return nn.RMSNorm(config.n_embd, eps=config.norm_eps or None)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps or 1e-5, bias=config.bias)


class Block(nn.Module):

    def __init__(self, config, layer):
        super().__init__()
        self.ln_1 = make_norm(config)
        self.attn = ENCODINGS[config.pos_emb](config, layer)  # its position encoding's attention
        self.ln_2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x, cache=None, input_pos=None):
        x = x + self.attn(self.ln_1(x), cache, input_pos)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        config.check()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd) if config.pos_emb == 'learned' \
            else None
        if config.pos_emb == 'sinusoidal':
            table = sinusoidal_table(config.block_size, config.n_embd)
            self.register_buffer('sin_table', table, persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([Block(config, i) for i in range(config.n_layer)])
        self.ln_f = make_norm(config)
        tied = config.tie_embeddings
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=config.bias and not tied)
        if config.init == 'gpt2':  # else every module keeps PyTorch's own init
            for module in self.modules():  # N(0, 0.02) weights, zero biases
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            for pn, p in self.named_parameters():  # scaled init of the residual projections
                if pn.endswith('c_proj.weight'):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        # the vocabulary padded with zero rows to a multiple of 64 (faster matmuls), after the init
        # (the unpadded model's random numbers); their logits: -inf in the loss, cut from forward's
        n_pad = -config.vocab_size % 64
        self.lm_head.weight = nn.Parameter(F.pad(self.lm_head.weight.detach(), (0, 0, 0, n_pad)))
        if self.lm_head.bias is not None:
            self.lm_head.bias = nn.Parameter(F.pad(self.lm_head.bias.detach(), (0, n_pad)))
        if tied:  # wte's own init above is discarded (drawn all the same: the same random stream)
            self.wte.weight = self.lm_head.weight
        padding = torch.arange(config.vocab_size + n_pad) >= config.vocab_size
        self.register_buffer('vocab_padding', padding, persistent=False)

    def forward(self, idx, targets=None, cache=None, input_pos=None):
        """(logits, loss): with targets (-1 ignored) the loss and every position's logits, detached;
        else the last position's. With a KVCache, idx's tokens are at positions input_pos (T,)."""
        x = self.hidden_states(idx, cache, input_pos)
        V = self.config.vocab_size
        if targets is None:
            return self.lm_head(x[:, [-1], :])[..., :V], None
        logits = self.lm_head(x)
        if ce_kernel is not None and logits.is_cuda and logits.dtype != torch.float64:
            loss = ce_kernel.cross_entropy(logits.flatten(0, 1), targets.flatten(), V)
        else:  # the same loss in plain PyTorch: the padding's logits -inf (probability 0)
            masked = logits.masked_fill(self.vocab_padding, float('-inf'))
            loss = F.cross_entropy(masked.flatten(0, 1), targets.flatten(), ignore_index=-1)
        # detached: a (B*T, 50304) gradient of the logits would be filled and read in every backward
        return logits[..., :V].detach(), loss

    def hidden_states(self, idx, cache=None, input_pos=None):
        """The final normed hidden states (B, T, n_embd) of idx (B, T), before the output layer:
        its token embeddings, plus an absolute encoding's positions, through the blocks."""
        if (cache is None) != (input_pos is None):
            raise ValueError("a KVCache and input_pos (the positions of idx's tokens) go together: "
                             "give both or none")
        x = self.wte(idx)
        if self.config.pos_emb in ABSOLUTE:
            T = idx.size(1)
            n = T if cache is None else cache.max_len  # positions that may be looked up
            if n > self.config.block_size:
                raise ValueError(f"{self.config.pos_emb} position embeddings stop at "
                                 f"block_size={self.config.block_size}, got {n} positions")
            table = self.wpe.weight if self.wpe is not None else self.sin_table
            x = x + (table[:T] if input_pos is None else table[input_pos])
        x = self.drop(x)
        for block in self.h:
            x = block(x, cache, input_pos)
        return self.ln_f(x)

    @torch.no_grad()
    def project_delta(self):
        """PoPE's delta onto [-2pi, 0] in place: after each optimizer step, on loading weights."""
        for block in self.h:
            if getattr(block.attn, 'delta', None) is not None:
                block.attn.delta.clamp_(-2 * math.pi, 0.0)

    def get_num_params(self, non_embedding=True):
        """Parameters, the tied token embedding counted once; learned positions left out."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding and self.wpe is not None else n

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type,
                             capturable=False, decay_all=False):
        """AdamW, its weight decay on the blocks' Linear weights, or on all (the replication's)."""
        matrices = [p for n, p in self.named_parameters() if p.dim() >= 2
                    and not n.startswith(('wte', 'wpe', 'lm_head')) and not n.endswith('delta')]
        rest = [p for p in self.parameters() if all(p is not m for m in matrices)]
        groups = [{'params': matrices, 'weight_decay': weight_decay},
                  {'params': rest, 'weight_decay': weight_decay if decay_all else 0.0}]
        if capturable:  # for CUDA graphs: the step count and learning rate live on the GPU
            learning_rate = torch.tensor(learning_rate, device=self.lm_head.weight.device)
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas,
                                 fused=device_type == 'cuda', capturable=capturable)

    def flops_per_token(self, T):
        """6N, plus attention's 6 (qk_width + 1) L d_model T: PoPE's twice-wide q k^T costs 1.5x."""
        qk_width = ENCODINGS[self.config.pos_emb].qk_width
        attn = 6 * (qk_width + 1) * self.config.n_layer * self.config.n_embd * T
        return 6 * self.get_num_params() + attn
