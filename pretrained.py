"""
Starting from trained weights: GPT-2 from Hugging Face's files, Llama from a GGUF file, and either
converted to another position encoding. read_source reads one as a train.py checkpoint (model,
model_args, meta); fine_tune_args gives the model a fine-tune builds, convert its weights; load
does all three. Each format is read by its own library (safetensors, torch.load, gguf).

    python train.py --init_from=gpt2 --pos_emb=pope ...  # or gpt2-medium..., or a HF folder
    python sample.py --init_from=smollm2-135m --start="The capital of France is"  # a GGUF file
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

from checkpoint import code_refused, load_checkpoint, read_checkpoint
from model import ENCODINGS, GPTConfig, PoPEAttention
from prepare.bpe import GPT2_VOCAB, PACKAGED_GGUF, encoding, gguf_field, gguf_path, gguf_reader

# a fine-tune keeps these of its model, takes these of its own config, and converts with these
ARCHITECTURE = ('n_layer', 'n_head', 'n_kv_head', 'n_embd', 'bias', 'norm', 'tie_embeddings')
RUN = ('block_size', 'yarn_scale', 'yarn_orig_ctx', 'dropout', 'attn_impl')
ENCODING = ('pos_emb', 'pos_base', 'pope_mu', 'pope_delta')
OWN = re.compile(r'(wpe\.weight|h\.\d+\.attn\.delta)')  # an encoding's own: wpe, PoPE's delta
# a model read from another format: no dropout, and PoPE's delta at 0 for a conversion to PoPE
READ = {**asdict(GPTConfig()), 'dropout': 0.0, 'pope_delta': 'zero'}


def read_source(init_from):
    """The checkpoint of GPT-2 by name, a Hugging Face folder, a GGUF file or a ckpt.pt."""
    if init_from in PACKAGED_GGUF or init_from.endswith('.gguf'):
        return read_gguf(init_from)
    if init_from in GPT2_MODELS:
        ckpt = read_gpt2(hub_folder(init_from))
        sizes = tuple(ckpt['model_args'][k] for k in ('n_layer', 'n_head', 'n_embd'))
        if sizes != GPT2_MODELS[init_from]:  # a damaged or replaced cache
            sys.exit(f"the cached {init_from} is of n_layer, n_head, n_embd = {sizes}, not "
                     f"{GPT2_MODELS[init_from]}: delete it (huggingface-cli delete-cache)")
        return ckpt
    if not os.path.isdir(init_from):
        return read_checkpoint(init_from)
    if not os.path.exists(f'{init_from}/config.json') and os.path.exists(f'{init_from}/ckpt.pt'):
        sys.exit(f"{init_from} is the folder of a train.py run: give "
                 f"--init_from={init_from}/ckpt.pt (or best.pt)")
    return read_gpt2(init_from)


def fine_tune_args(ckpt, args, given, source, meta, data_dir):
    """The model_args of a fine-tune from ckpt: its ARCHITECTURE, this run's RUN keys (block_size
    and YaRN the checkpoint's unless given), a new ENCODING where given. One line if it cannot."""
    old, theirs, ours = ckpt['model_args'], ckpt['meta'].get('tokenizer'), meta.get('tokenizer')
    new = {**old, **{k: args[k] for k in RUN if k in given or k in ('dropout', 'attn_impl')}}
    new.update({k: args[k] for k in ENCODING if k in given and args[k] != old.get(k)})
    differ = [f"{k}={args[k]!r} (the model's: {old[k]!r})" for k in ARCHITECTURE
              if k in given and k in old and args[k] != old[k]]
    size = old['block_size']
    make = (f"; in its tokens: python -m prepare.shakespeare --tokenizer={theirs}"
            if theirs not in ('itos', None) else '')
    for wrong, message in (
            (theirs != ours and {theirs, ours} - {'itos', None}, f"reads {theirs!r} tokens, "
             f"{data_dir} holds {ours!r} ones: fine-tune on a data set of its tokenizer{make}"),
            (differ, f"keeps its architecture, but {', '.join(differ)}: drop these flags (a "
             f"fine-tune sets only {', '.join(RUN)} and converts with {', '.join(ENCODING)})"),
            (new['pos_emb'] == old['pos_emb'] == 'learned' and new['block_size'] > size,
             f"has learned positions up to block_size={size}: give --block_size={size} or less, "
             "or convert it to an encoding without a table (--pos_emb=pope)")):
        if wrong:
            sys.exit(f"init_from={source} {message}")
    if is_pope(new['pos_emb']) and not is_pope(old['pos_emb']) and 'pope_delta' not in given:
        new['pope_delta'] = 'zero'  # the paper's init for language: the nearest to the old scores
    return new


def convert(ckpt, model, source, say=print):
    """model's state dict from the checkpoint's: same-named tensors copied (learned positions
    cropped), an encoding's own (OWN) dropped or new; one line says which, any other is refused."""
    old, state = dict(ckpt['model']), model.state_dict()
    dropped, new = [k for k in old if k not in state], [k for k in state if k not in old]
    missing, extra = ([k for k in keys if not OWN.fullmatch(k)] for keys in (new, dropped))
    if missing or extra:  # only an encoding's own tensors may come or go
        sys.exit(f"init_from={source} is not the model its config describes: " + '; '.join(
            f"{what} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
            for what, keys in (('missing', missing), ('unexpected', extra)) if keys))
    crop, n = '', len(state.get('wpe.weight', ()))
    if len(old.get('wpe.weight', ())) > n > 0:
        crop = f", wpe.weight cropped to {n} of {len(old['wpe.weight'])} positions"
        old['wpe.weight'] = old['wpe.weight'][:n]
    copied = [k for k in state if k in old]
    for k in copied:
        if old[k].shape != state[k].shape:
            sys.exit(f"init_from={source}: {k} is {tuple(old[k].shape)}, the model wants "
                     f"{tuple(state[k].shape)}: the model cannot be built from it")
        state[k] = old[k]
    cfg = model.config  # (below: names with the layer as '*', h.3.attn.delta -> h.*.attn.delta)
    star = lambda ks: ', '.join(dict.fromkeys(re.sub(r'^h\.\d+', 'h.*', k) for k in ks)) or 'none'
    init = f", init {cfg.pope_delta}" if new and is_pope(cfg.pos_emb) else ''
    say(f"init_from={source}: {len(copied)} tensors copied ({ckpt['model_args']['pos_emb']} -> "
        f"{cfg.pos_emb}{crop}), dropped: {star(dropped)}, new: {star(new)}{init}")
    return state


def load(init_from, device='cpu', ckpt=None, **overrides):
    """(model, ckpt) of a ckpt.pt or of what read_source reads (ckpt: read already), in eval mode
    on device; overrides replace GPTConfig fields."""
    if os.path.isfile(init_from) and not init_from.endswith('.gguf'):  # train.py's own
        return load_checkpoint(init_from, device, ckpt, **overrides)
    weights = lambda ckpt, model: convert(ckpt, model, init_from, say=lambda line: None)
    return load_checkpoint(init_from, device, ckpt or read_source(init_from), weights, **overrides)


def is_pope(pos_emb):
    """Whether pos_emb is PoPE or a variant of it (a subclass of PoPEAttention)."""
    return issubclass(ENCODINGS.get(pos_emb, object), PoPEAttention)


# GPT-2 from Hugging Face's files
GPT2_MODELS = {  # n_layer, n_head, n_embd (Radford et al. 2019); on the hub: openai-community/
    'gpt2': (12, 12, 768), 'gpt2-medium': (24, 16, 1024), 'gpt2-large': (36, 20, 1280),
    'gpt2-xl': (48, 25, 1600)}
GELU = {'gelu_new': 'tanh', 'gelu_pytorch_tanh': 'tanh', 'gelu': 'none'}  # F.gelu's approximate
# config.json's keys where GPT-2 is as OpenAI made it (transformers' GPT2Config defaults)
AS_MADE = {'vocab_size': GPT2_VOCAB, 'layer_norm_epsilon': 1e-5, 'n_inner': None,
           'scale_attn_weights': True, 'scale_attn_by_inverse_layer_idx': False,
           'tie_word_embeddings': True, 'add_cross_attention': False}
# Hugging Face's GPT-2 uses Conv1D, y = x W + b with W (in, out): nn.Linear's weight transposed
CONV1D = ('attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight')


def hub_folder(name):
    """The local folder of GPT-2 `name`'s config.json and weights (downloaded once)."""
    from huggingface_hub import snapshot_download
    repo = f'openai-community/{name}'
    try:
        folder = snapshot_download(repo, allow_patterns=['config.json', 'model.safetensors'])
        if not os.path.exists(os.path.join(folder, 'model.safetensors')):  # an older upload
            folder = snapshot_download(repo, allow_patterns=['config.json', 'pytorch_model.bin'])
    except Exception as err:  # offline, no cache, the hub unreachable
        sys.exit(f"could not fetch {repo} from the Hugging Face hub ({type(err).__name__}): go "
                 "online, or put its config.json and model.safetensors into a folder and give "
                 "--init_from=<that folder>")
    return folder


def read_gpt2(folder):
    """The checkpoint of the Hugging Face GPT-2 in folder, or one line why not."""
    try:
        with open(os.path.join(folder, 'config.json')) as f:
            args = gpt2_model_args(json.load(f), folder)
    except (OSError, ValueError) as err:
        sys.exit(f"{folder}/config.json is missing or damaged ({type(err).__name__}): a Hugging "
                 "Face model folder holds config.json and model.safetensors (or pytorch_model.bin)")
    hf = {k.removeprefix('transformer.'): v for k, v in read_weights(folder).items()}
    wte, head = hf.get('wte.weight'), hf.pop('lm_head.weight', None)  # tied to wte, saved or not
    if head is not None and wte is not None and not torch.equal(head, wte):
        sys.exit(f"{folder}: lm_head.weight differs from wte.weight, but GPT-2 ties them")
    # Conv1D's (in, out) as Linear's (out, in); the causal mask and its fill value are no weights
    state = {k: v.t() if k.endswith(CONV1D) else v for k, v in hf.items()
             if not k.endswith(('.attn.bias', '.attn.masked_bias'))}
    if wte is not None:  # the vocabulary padded with zero rows to a multiple of 64, as GPT pads it
        state['wte.weight'] = state['lm_head.weight'] = F.pad(wte, (0, 0, 0, -len(wte) % 64))
    meta = dict(kind='stream', tokenizer='gpt2', vocab_size=args['vocab_size'], source=folder)
    return {'model': state, 'model_args': args, 'meta': meta}


def gpt2_model_args(cfg, where):
    """The model_args of the GPT-2 that a config.json (a dict) describes, or one line why not."""
    if not isinstance(cfg, dict):
        sys.exit(f"{where}/config.json is not a JSON object of the model's settings")
    if cfg.get('model_type') != 'gpt2':
        sys.exit(f"{where}/config.json is of model_type={cfg.get('model_type')!r}: only GPT-2 "
                 "('gpt2') is read here")
    sizes = ('n_layer', 'n_head', 'n_embd', 'n_positions')
    missing = [k for k in sizes if not isinstance(cfg.get(k), int)]
    if missing:
        sys.exit(f"{where}/config.json gives no {', '.join(missing)}: write the model's sizes "
                 "there (GPT2_MODELS)")
    L, H, C, T = (cfg[k] for k in sizes)
    act = cfg.get('activation_function', 'gelu_new')
    differ = [f"{k}={cfg[k]!r}" for k, want in AS_MADE.items()
              if cfg.get(k, want) != want and not (k == 'n_inner' and cfg[k] == 4 * C)]
    differ += [f"activation_function={act!r}"] if act not in GELU else []
    if differ:
        sys.exit(f"{where}/config.json has {', '.join(differ)}: this repository builds GPT-2 as "
                 "OpenAI made it (50257 tokens, LayerNorm eps 1e-5, a 4x GELU MLP, tied wte)")
    args = dict(READ, block_size=T, vocab_size=cfg.get('vocab_size', GPT2_VOCAB), n_layer=L,
                n_head=H, n_kv_head=0, n_embd=C, bias=True, pos_emb='learned', norm='layernorm',
                tie_embeddings=True, gelu_approximate=GELU[act])
    try:
        GPTConfig(**args).check()
    except ValueError as err:
        sys.exit(f"{where}/config.json: {err}")
    return args


def read_weights(folder):
    """The tensors of folder's model.safetensors (or pytorch_model.bin), or one line why not."""
    paths = [f'{folder}/{name}' for name in ('model.safetensors', 'pytorch_model.bin')]
    path = next(filter(os.path.exists, paths), None)
    if path is None:
        sys.exit(f"{folder} holds no model.safetensors or pytorch_model.bin: copy the model's "
                 "weights there")
    if not os.path.isfile(path):
        sys.exit(f"{path} is not a file: copy the model's weights file there")
    try:
        if path.endswith('.safetensors'):
            from safetensors.torch import load_file
            state = load_file(path)
        else:  # (without torch's warning on a pickle of another protocol: one line says it all)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                state = torch.load(path, map_location='cpu', weights_only=True)  # (code: refused)
    except Exception as err:  # the format's own reader refused it
        sys.exit(damage(path, err))
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        sys.exit(f"{path} is not a checkpoint (a {type(state).__name__}, not named tensors): "
                 "download it again")
    return state


def damage(path, err):
    """One line: why the weights file at path, which its reader refused with err, is unreadable."""
    code = code_refused(err)
    if code:
        return (f"{path} holds code (it would run {code}), not weights alone: nothing was "
                "loaded; delete it and download the model from a source you trust")
    with open(path, 'rb') as f:
        head = f.read(9)
    # safetensors: its JSON header's length in 8 bytes, then '{'; torch.save: a zip archive (cut
    # short: not a whole one), or in its older format a pickle
    begins = (head[8:] == b'{' if path.endswith('.safetensors') else head.startswith(b'\x80\x02')
              or head.startswith(b'PK\x03\x04') and not zipfile.is_zipfile(path))
    what = 'is empty' if not head else 'is cut short' if begins else 'is not a checkpoint'
    return f"{path} {what} ({os.path.getsize(path)} bytes; {type(err).__name__}): download it again"


# Llama from a GGUF file (llama.cpp's format)
SIZES = ('block_count', 'embedding_length', 'attention.head_count', 'context_length',
         'feed_forward_length')  # of its metadata (llama.<key>): what a llama file must give
# a layer's tensors (after blk.<i>.) -> this GPT's (after h.<i>.); q, k, v and gate, up: read_gguf
GGUF_LAYER = {'attn_norm.weight': 'ln_1.weight', 'attn_output.weight': 'attn.c_proj.weight',
              'ffn_norm.weight': 'ln_2.weight', 'ffn_down.weight': 'mlp.c_proj.weight'}


def read_gguf(init_from):
    """The checkpoint of the llama GGUF file init_from (path or short name), or one line why not."""
    path = gguf_path(init_from)
    reader = gguf_reader(path)  # (one line where the gguf package is missing)
    import gguf
    arch = gguf_field(reader, 'general.architecture')
    if arch != 'llama':
        sys.exit(f"{path} holds a model of architecture {arch!r}: only 'llama' is read here")
    llama = lambda key: gguf_field(reader, f'llama.{key}')
    L, C, H, T, ffn = (llama(k) for k in SIZES)
    if not all(isinstance(x, int) for x in (L, C, H, T, ffn)):
        sys.exit(f"{path} does not give the llama sizes ({', '.join(SIZES)}): it is not a "
                 "complete llama GGUF file")
    differ = [f"{k}={llama(k)!r}" for k, ok in (('rope.dimension_count', C // H),
              ('rope.scaling.type', 'none'), ('expert_count', 0)) if llama(k) not in (None, ok)]
    if differ:
        sys.exit(f"{path} has {', '.join(differ)}: read here is Llama with RoPE on every channel "
                 "of a head, unscaled, and one MLP")
    Hkv, tensors = llama('attention.head_count_kv') or H, {t.name: t for t in reader.tensors}

    def weight(name):
        if name not in tensors:
            sys.exit(f"{path} has no tensor {name}: it is not a complete llama GGUF file")
        t = tensors.pop(name)
        return torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type), np.float32))

    wte, state = weight('token_embd.weight'), {'ln_f.weight': weight('output_norm.weight')}
    head = weight('output.weight') if 'output.weight' in tensors else None  # else tied to wte
    for i in range(L):
        state.update({f'h.{i}.{v}': weight(f'blk.{i}.{k}') for k, v in GGUF_LAYER.items()})
        q, k, v, gate, up = (weight(f'blk.{i}.{x}.weight')
                             for x in ('attn_q', 'attn_k', 'attn_v', 'ffn_gate', 'ffn_up'))
        state[f'h.{i}.attn.c_attn.weight'] = torch.cat([unpermute(q, H), unpermute(k, Hkv), v])
        state[f'h.{i}.mlp.c_fc.weight'] = torch.cat([gate, up])
    if tensors:
        sys.exit(f"{path} holds tensors this GPT has no place for ({', '.join(sorted(tensors)[:3])}"
                 "): read here is Llama without biases and extra tables")
    enc, V = encoding(path), len(wte)
    if V != enc.n_vocab:
        sys.exit(f"{path}: token_embd has {V} rows, the tokenizer {enc.n_vocab}: it is damaged")
    # the output matrix padded with zero rows to a multiple of 64, as GPT pads it (wte too if tied)
    state['lm_head.weight'] = F.pad(wte if head is None else head, (0, 0, 0, -V % 64))
    state['wte.weight'] = wte if head is not None else state['lm_head.weight']
    args = dict(READ, block_size=T, vocab_size=V, n_layer=L, n_head=H, n_kv_head=Hkv, n_embd=C,
                bias=False, pos_emb='rope', pos_base=float(llama('rope.freq_base') or 1e4),
                norm='rmsnorm', norm_eps=float(llama('attention.layer_norm_rms_epsilon') or 1e-5),
                tie_embeddings=head is None, mlp='swiglu', mlp_hidden=ffn, yarn_orig_ctx=T)
    meta = dict(kind='stream', tokenizer=enc.name, vocab_size=V, eot=enc.eot_token, source=path)
    return {'model': state, 'model_args': args, 'meta': meta}


def unpermute(w, n_head):
    """q's or k's weight (n_head * hd, n_embd) with rows back in Hugging Face's order (RoPE pairs
    (i, i + hd/2), as here): llama.cpp moves row j * hd/2 + i of each head to row 2i + j."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)
