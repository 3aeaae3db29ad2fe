"""
Generation speed on one GPU, PoPE against RoPE (results/speed/README.md, "Generation"): decode
attention alone (the model's step, the plain path, SDPA unmasked) over caches of 4k-32k positions,
and generate.generate of the 124M model end to end, eager and compiled, RoPE and PoPE in turn.

    python results/speed/bench_generate.py --out=results/speed/generate     # ~6 minutes, one H200
    python results/speed/bench_generate.py --smoke --device=cpu --out=DIR   # tiny: it runs

Writes DIR/generate.json and .md. A row that fails records its error and the run goes on; a row or
timed call that would start after --budget_s seconds is skipped, and marked so.
"""

import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from eval import DEVICE, code_commit, device_arg, markdown_table, write_page  # noqa: E402
from generate import generate  # noqa: E402
from model import GPT, GPTConfig, cache_attention, pope_frequencies  # noqa: E402
from prepare.common import parser, positive_int  # noqa: E402

p = parser(__doc__)
p.add_argument('--out', required=True, help='folder for generate.json and generate.md')
p.add_argument('--smoke', action='store_true', help='a tiny model and lengths (any device)')
p.add_argument('--device', type=device_arg, default=DEVICE)
p.add_argument('--modes', default='compiled,eager', help='compiled and/or eager')
p.add_argument('--repeats', type=positive_int, default=3, help='timed calls of a compiled cell')
p.add_argument('--eager_repeats', type=positive_int, default=1, help='the same, eager')
p.add_argument('--budget_s', type=float, default=420.0, help='nothing starts after so many seconds')
args = p.parse_args()
modes = args.modes.split(',')
if not set(modes) <= {'compiled', 'eager'}:
    sys.exit('--modes: compiled and/or eager')
os.makedirs(args.out, exist_ok=True)
sys.stdout.reconfigure(line_buffering=True)  # a run cut short still leaves every line it printed

device = torch.device(args.device)
cuda = device.type == 'cuda'
dtype = torch.bfloat16 if cuda else torch.float32
sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
if args.smoke:
    H, D, LENGTHS, BATCHES, PROMPT, NEW = 4, 16, (64, 128), (1, 2), 16, (8, 24)
    SHAPE = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=256)
else:
    H, D, LENGTHS, BATCHES, PROMPT, NEW = 12, 64, (4096, 16384, 32768), (1, 8), 512, (512, 2048)
    SHAPE = dict(vocab_size=50304)  # the rest from the config files
TOP_K, SEED = 50, 1337
start = time.time()


def main():
    import triton
    from torch._dynamo.utils import counters
    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or 'CPU'
    log(f'{name} | torch {torch.__version__} | triton {triton.__version__} | python '
        f'{platform.python_version()}')
    result = {'decode_attention': [attention_row(B, L) for L in LENGTHS for B in BATCHES],
              'generate': generate_rows()}
    meta = result['meta'] = dict(
        device=name, torch=torch.__version__, triton=triton.__version__,
        python=platform.python_version(), commit=code_commit(ROOT), dtype=str(dtype),
        command=' '.join(['python', 'results/speed/bench_generate.py', *sys.argv[1:]]),
        seconds=time.time() - start, cudagraph_skips=counters['inductor'].get('cudagraph_skips', 0),
        unique_graphs=counters['stats'].get('unique_graphs', 0), args=vars(args))
    meta['compile_note'] = (f"torch.compile: {meta['unique_graphs']} graphs compiled, "
                            f"{meta['cudagraph_skips']} CUDA-graph skips.")
    with open(os.path.join(args.out, 'generate.json'), 'w') as f:
        json.dump(result, f, indent=1)
    write_page(os.path.join(args.out, 'generate.md'), markdown(result))
    log(f'wrote {os.path.join(args.out, "generate.json")} and generate.md')


def attention_row(B, L):
    """The decode attention of a batch of B over caches of L positions, all visible."""
    row = dict(batch=B, cache=L)
    if over_budget(row):
        return row
    # the layers' caches timed in turn: 12, as the model, or more (200 MB at least, so that no
    # layer's cache is still in the GPU's L2 when it is read again); the time per layer
    layers = max(12, math.ceil(200e6 / (B * H * L * 2 * D * 2))) if cuda else 1
    g, scale = torch.Generator(device).manual_seed(0), 1.0 / math.sqrt(D)
    randn = lambda *shape: torch.randn(*shape, device=device, generator=g).to(dtype)
    q, qp = (randn(B, H, 1, w) for w in (D, 2 * D))
    k, v = ([randn(B, H, L, D) for _ in range(layers)] for _ in range(2))
    kp = [randn(B, H, L, 2 * D) for _ in range(layers)]
    visible = torch.ones(1, L, dtype=torch.bool, device=device)
    plain = {'rope': lambda i: cache_attention(q, k[i], v[i], visible, scale=scale),
             'pope': lambda i: cache_attention(qp, kp[i], v[i], visible, scale=scale)}
    model = plain  # (the CPU's path)
    if cuda:  # k as RoPE's rotated keys or PoPE's cached mu(k)
        import pope_decode
        tables = pope_decode.decode_tables(pope_frequencies(D, device=device), L)
        n = torch.tensor([L], device=device)
        model = {'rope': lambda i: pope_decode.decode(q[:, :, 0], k[i], v[i], n, None, None, scale),
                 'pope': lambda i: pope_decode.decode(qp[:, :, 0], k[i], v[i], n, *tables, scale)}
    per_layer = lambda attend: lambda: gpu_ms(lambda: [attend(i) for i in range(layers)]) / layers
    with torch.no_grad():
        for pe in ('rope', 'pope'):
            measured(row, f'{pe}_model_ms', per_layer(model[pe]))
            measured(row, f'{pe}_plain_ms', per_layer(plain[pe]))
        measured(row, 'rope_nomask_ms', per_layer(
            lambda i: F.scaled_dot_product_attention(q, k[i], v[i], scale=scale)))
    if row['rope_model_ms'] and row['pope_model_ms']:
        row['pope_vs_rope_model'] = row['pope_model_ms'] / row['rope_model_ms']
        gb = lambda width: B * H * L * (width + D) * q.element_size() / 1e9
        row['rope_model_GBps'] = gb(D) / (row['rope_model_ms'] / 1e3)
        row['pope_model_GBps'] = gb(D if cuda else 2 * D) / (row['pope_model_ms'] / 1e3)
    if row['pope_model_ms'] and row['rope_nomask_ms']:
        row['pope_model_vs_rope_nomask'] = row['pope_model_ms'] / row['rope_nomask_ms']
    log(f'decode attention {row}')
    return row


def generate_rows():
    models = {}
    for pe in ('rope', 'pope'):
        torch.manual_seed(0)
        m = models[pe] = GPT(model_config(pe)).to(device).eval()
        for w in m.parameters():  # weights in dtype; the buffers (RoPE's float64 tables) stay exact
            w.data = w.data.to(dtype)
        cfg = m.config
        log(f'{pe}: {m.get_num_params() / 1e6:.1f}M parameters, {cfg.n_layer} layers x '
            f'{cfg.n_head} heads x {cfg.n_embd}, block_size {cfg.block_size}, attn_impl '
            f'{cfg.attn_impl}, {dtype}')
    # Compiled, each model makes one graph per batch size, alike whatever the order of the rows:
    # generate marks its cache's and output's lengths dynamic from the first graph on.
    rows = []
    for mode, B, new in itertools.product(modes, BATCHES, NEW):
        compile = mode == 'compiled'
        cell = {pe: dict(mode=mode, batch=B, prompt=PROMPT, new_tokens=new, pos_emb=pe, runs_s=[])
                for pe in models}
        rows += cell.values()
        if all([over_budget(row) for row in cell.values()]):
            log(f'generate {mode}, batch {B}, {new} new tokens: skipped')
            continue
        idx = torch.randint(0, models['rope'].config.vocab_size, (B, PROMPT), device=device,
                            generator=torch.Generator(device).manual_seed(SEED))

        def run(m, n):  # the seconds of a call, from the same seed
            torch.manual_seed(SEED)
            return seconds(lambda: generate(m, idx, n, top_k=TOP_K, compile=compile))
        for pe, m in models.items():  # compiled: of the cell's shapes, which compiles
            measured(cell[pe], 'warmup_s', lambda: run(m, new if compile else 16))
        for _ in range(args.repeats if compile else args.eager_repeats):
            for pe, m in models.items():  # in turn: a drift of the machine meets both
                row = cell[pe]
                if row['warmup_s'] is None or row.get('error') or over_budget():
                    continue
                t = attempt(row, 'timed call', lambda: run(m, new))
                if t is not None:
                    row['runs_s'].append(t)
        for row in cell.values():
            if row['runs_s']:  # tokens/s of each call: the median, and the range
                tps = sorted(B * new / s for s in row['runs_s'])
                row.update(tokens_per_s=statistics.median(tps), tokens_per_s_min=tps[0],
                           tokens_per_s_max=tps[-1], ms_per_step=1e3 * B / statistics.median(tps))
            log(f'generate {row}')
        rope, pope = (cell[pe].get('tokens_per_s') for pe in ('rope', 'pope'))
        if rope and pope:
            cell['pope']['pope_vs_rope'] = pope / rope
    return rows


def model_config(pos_emb):
    """GPTConfig of config/owt_<pos_emb>.py's 124M model, or the smoke run's tiny one."""
    if args.smoke:
        return GPTConfig(pos_emb=pos_emb, **SHAPE)
    scope, cwd = {}, os.getcwd()
    os.chdir(ROOT)  # owt_rope.py runs config/owt_pope.py by its path from the root
    try:
        exec(open(os.path.join('config', f'owt_{pos_emb}.py')).read(), scope)
    finally:
        os.chdir(cwd)
    fields = {k: v for k, v in scope.items() if k in GPTConfig.__dataclass_fields__}
    return GPTConfig(**{**fields, **SHAPE, 'dropout': 0.0})


def markdown(result):
    """The lines of generate.md."""
    meta, fmt = result['meta'], lambda x, spec: '' if x is None else format(x, spec)
    lines = [f"# Generation speed ({meta['device']})", '',
             f"torch {meta['torch']}, triton {meta['triton']}, python {meta['python']}, commit "
             f"{meta['commit']}; {meta['dtype']}; `{meta['command']}`"
             + (' (smoke: a tiny model and lengths)' if args.smoke else ''), '']
    clock = 'GPU time of CUDA-graph replays' if cuda else 'wall clock'
    head = ['batch', 'cache', 'RoPE model', 'PoPE model', 'PoPE / RoPE (model)',
            'RoPE sdpa, exact length, no mask', 'PoPE model / RoPE no mask', 'RoPE plain path',
            'PoPE plain path', 'GB/s RoPE, PoPE (model)', 'note']
    rows = [[r['batch'], r['cache'], *(fmt(r.get(k), f) for k, f in (
        ('rope_model_ms', '.4f'), ('pope_model_ms', '.4f'), ('pope_vs_rope_model', '.2f'),
        ('rope_nomask_ms', '.4f'), ('pope_model_vs_rope_nomask', '.2f'),
        ('rope_plain_ms', '.4f'), ('pope_plain_ms', '.4f'))),
        f"{fmt(r.get('rope_model_GBps'), '.0f')}, {fmt(r.get('pope_model_GBps'), '.0f')}",
        r.get('error', '')] for r in result['decode_attention']]
    lines += [f'## Decode attention: one query over a full cache, {H} heads, head dim {D}, '
              f'ms a layer ({clock})', '', markdown_table(head, rows), '']
    head = ['mode', 'batch', 'new tokens', 'encoding', 'tokens / s (median)', 'min-max',
            'timed calls', 'ms / step', 'PoPE / RoPE tokens/s (medians)', 'warm-up s', 'note']
    rows = [[r['mode'], r['batch'], r['new_tokens'], r['pos_emb'],
             fmt(r.get('tokens_per_s'), '.1f'), f"{r['tokens_per_s_min']:.1f}-"
             f"{r['tokens_per_s_max']:.1f}" if r.get('tokens_per_s') else '', len(r['runs_s']),
             fmt(r.get('ms_per_step'), '.2f'), fmt(r.get('pope_vs_rope'), '.3f'),
             fmt(r.get('warmup_s'), '.1f'), r.get('error', '')] for r in result['generate']]
    lines += [f'## generate.generate, prompt {PROMPT}, top-k {TOP_K}', '',
              markdown_table(head, rows), '']
    return lines + [f"Total {meta['seconds']:.0f} s. {meta['compile_note']}"]


def log(msg):
    print(f'[{time.time() - start:6.1f} s] {msg}')


def gpu_ms(fn):
    """Median ms of fn(): on a GPU, of its CUDA graph's replays (the GPU's time alone)."""
    if cuda:
        from bench_attention import cuda_graph, median_ms
        return median_ms(cuda_graph(fn)[0].replay)
    fn()
    return 1e3 * statistics.median(seconds(fn) for _ in range(5))


def seconds(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def attempt(row, what, fn):
    """fn(), or None and the error added to row['error'] (the run goes on)."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 (a benchmark row records what failed)
        traceback.print_exc()
        row['error'] = (row.get('error', '') + f' {what}: {type(err).__name__}: {err}'
                        .splitlines()[0]).strip()
        return None


def measured(row, key, fn):
    row[key] = attempt(row, key, fn)


def over_budget(row=None):
    """True past --budget_s (and row marked skipped)."""
    over = time.time() - start > args.budget_s
    if over and row is not None:
        row['error'] = f'skipped: past --budget_s={args.budget_s:.0f}'
    return over


if __name__ == '__main__':
    main()
