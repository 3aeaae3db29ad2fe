"""
Generation speed on one GPU: PoPE decoding (a cache of mu(k), RoPE's size, and pope_decode.decode) against RoPE.

(a) Decode attention alone: one query a sequence over a cache whose every position is visible (batch 1 and 8, 12
    heads, head dim 64, bf16; cache lengths 4096, 16384, 32768), the GPU time of CUDA-graph replays (median of
    triton.testing.do_bench) of 12 or more layers' caches in turn (200 MB at least, more than the GPU's L2), per
    layer, on random q, k, v:
      model   the attention of the model's decoding step, as generate runs it on a GPU: pope_decode.decode, split-K
              Triton kernels over the visible positions of the preallocated cache. PoPE: on q' (2 x 64 wide), the
              cached mu(k) and v (64 wide each) and the phase tables, forming no k'; RoPE: on q and its rotated keys,
              no tables (the same kernel without the phases). Elsewhere (--smoke on the CPU) the plain path
      plain   model.cache_attention, the plain path (the CPU's, and the reference): scores by matmul over the whole
              preallocated cache, a mask, softmax in float32, eager kernels; PoPE on a k' (2 x 64) tensor
      nomask  RoPE only: SDPA on an unmasked cache of exactly the visible length (the backend SDPA picks, flash or
              cuDNN decoding), PyTorch's own fastest decoding, which a preallocated cache gives up for static shapes
    PoPE's kernel reads mu(k) (d) and v (d), RoPE's bytes (its phase tables, 8 bytes x d per 16 positions plus a
    fixed 16 x d table, aside); GB/s: the cache's bytes (2d a position) / time (the plain path on the CPU: 3d).
(b) End to end: generate.generate of the 124M model (config/owt_pope.py and config/owt_rope.py's shapes, random weights,
    vocabulary 50304, bf16 weights), prompt 512, 512 and 2048 new tokens, batch 1 and 8, eager and compiled
    (generate(compile=True): the one-token step, forward pass and sampling, under torch.compile, mode
    'reduce-overhead': one CUDA graph a step; one graph compiled per model and batch size, the lengths dynamic),
    top-k 50 sampling from a fixed seed. Each cell: a warm-up call of each model (compiled: of the cell's shapes,
    which compiles or records the graph; eager: 16 new tokens), then timed calls of each, RoPE and PoPE in turn
    (rope, pope, rope, pope, ...: a drift of the machine meets both): --repeats of them compiled (3), --eager_repeats
    eager (1: eager steps are bound by the host, ten times the compiled ones; one pass over them takes minutes).
    tokens/s = batch x new tokens / seconds of one generate call (its prompt pass included): the median over the
    calls and their spread (min-max); PoPE / RoPE is the ratio of the medians.

    python results/speed/bench_generate.py --out=results/speed/generate      # about 6 minutes on one H200
    python results/speed/bench_generate.py --smoke --device=cpu --out=DIR   # a tiny model and lengths: it runs

Prints a line per measurement and the two tables; writes DIR/generate.json and DIR/generate.md. A row that fails
records its error and the run goes on; rows not started within --budget_s seconds are skipped (marked so), and so
are the timed calls of a cell that would start after it (the row says how many were made).
"""

import argparse
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
from eval import code_commit  # noqa: E402
from generate import generate  # noqa: E402
from model import GPT, GPTConfig, cache_attention, pope_frequencies  # noqa: E402

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument('--out', required=True, help='folder for generate.json and generate.md')
p.add_argument('--smoke', action='store_true', help='a tiny model and lengths (any device): the script runs')
p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
p.add_argument('--sections', default='attention,generate', help='comma-separated: attention, generate')
p.add_argument('--modes', default='compiled,eager', help='comma-separated: compiled, eager')
p.add_argument('--repeats', type=int, default=3, help='timed generate calls of each compiled cell and model')
p.add_argument('--eager_repeats', type=int, default=1, help='timed generate calls of each eager cell and model')
p.add_argument('--budget_s', type=float, default=420.0, help='no row or timed call is started after this many seconds')
args = p.parse_args()
sections, modes = args.sections.split(','), args.modes.split(',')
if not set(sections) <= {'attention', 'generate'} or not set(modes) <= {'compiled', 'eager'}:
    sys.exit('--sections: attention and/or generate; --modes: compiled and/or eager')
if min(args.repeats, args.eager_repeats) < 1:
    sys.exit(f'--repeats={args.repeats}, --eager_repeats={args.eager_repeats}: each must be 1 or more')
if args.device.startswith('cuda') and not torch.cuda.is_available():
    sys.exit(f'--device={args.device}, but torch finds no CUDA GPU here: use --device=cpu (with --smoke)')
os.makedirs(args.out, exist_ok=True)
sys.stdout.reconfigure(line_buffering=True)  # a run cut short still leaves every line it printed

device = torch.device(args.device)
cuda = device.type == 'cuda'
dtype = torch.bfloat16 if cuda else torch.float32
if args.smoke:
    H, D, LENGTHS, BATCHES, PROMPT, NEW = 4, 16, (64, 128), (1, 2), 16, (8, 24)
    SHAPE = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab_size=256)
else:
    H, D, LENGTHS, BATCHES, PROMPT, NEW = 12, 64, (4096, 16384, 32768), (1, 8), 512, (512, 2048)
    SHAPE = dict(vocab_size=50304)  # the rest from the config files
TOP_K, SEED = 50, 1337
start = time.time()


def log(msg):
    print(f'[{time.time() - start:6.1f} s] {msg}')


def sync():
    if cuda:
        torch.cuda.synchronize(device)


def gpu_ms(fn):
    """Median ms of fn(): on a GPU the replays of fn captured in one CUDA graph (the GPU's time alone), elsewhere
    calls timed by the clock."""
    if cuda:
        import triton
        from bench_attention import cuda_graph
        graph, _ = cuda_graph(fn)
        return triton.testing.do_bench(graph.replay, return_mode='median')
    fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def attempt(row, what, fn):
    """fn(), or None and the error added to row['error'] (the run goes on)."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 (a benchmark row records what failed)
        traceback.print_exc()
        row['error'] = (row.get('error', '') + f' {what}: {type(err).__name__}: {err}'.splitlines()[0]).strip()
        return None


def measured(row, key, fn):
    row[key] = attempt(row, key, fn)


def over_budget(row):
    if time.time() - start > args.budget_s:
        row['error'] = f'skipped: past --budget_s={args.budget_s:.0f}'
        return True
    return False


def attention_rows():
    rows = []
    scale = 1.0 / math.sqrt(D)
    for L in LENGTHS:
        for B in BATCHES:
            row = dict(batch=B, cache=L)
            if over_budget(row):
                rows.append(row)
                continue
            # one timing: the attention of several layers' caches in turn (12, as the model, or more: 200 MB at least,
            # so that no layer's cache is still in the GPU's L2 when it is read again); the time per layer
            layer_bytes = B * H * L * 2 * D * 2
            layers = max(12, math.ceil(200e6 / layer_bytes)) if cuda else 1
            g = torch.Generator(device).manual_seed(0)
            q, qp = (torch.randn(B, H, 1, w, device=device, generator=g).to(dtype) for w in (D, 2 * D))
            k, v = ([torch.randn(B, H, L, D, device=device, generator=g).to(dtype) for _ in range(layers)]
                    for _ in range(2))
            kp = [torch.randn(B, H, L, 2 * D, device=device, generator=g).to(dtype) for _ in range(layers)]
            visible = torch.ones(1, L, dtype=torch.bool, device=device)

            def per_layer(attend):
                return lambda: gpu_ms(lambda: [attend(i) for i in range(layers)]) / layers
            plain = {'rope': lambda i: cache_attention(q, k[i], v[i], visible, scale=scale),
                     'pope': lambda i: cache_attention(qp, kp[i], v[i], visible, scale=scale)}
            if cuda:  # k as RoPE's rotated keys or PoPE's cached mu(k), all L positions visible
                import pope_decode
                tables = pope_decode.decode_tables(pope_frequencies(D, device=device), L)
                n = torch.tensor([L], device=device)
                model = {'rope': lambda i: pope_decode.decode(q[:, :, 0], k[i], v[i], n, None, None, scale),
                         'pope': lambda i: pope_decode.decode(qp[:, :, 0], k[i], v[i], n, *tables, scale)}
            else:
                model = plain
            with torch.no_grad():
                for pe in ('rope', 'pope'):
                    measured(row, f'{pe}_model_ms', per_layer(model[pe]))
                    measured(row, f'{pe}_plain_ms', per_layer(plain[pe]))
                measured(row, 'rope_nomask_ms', per_layer(
                    lambda i: F.scaled_dot_product_attention(q, k[i], v[i], scale=scale)))
            if row['rope_model_ms'] and row['pope_model_ms']:
                row['pope_vs_rope_model'] = row['pope_model_ms'] / row['rope_model_ms']
                gb = lambda width: B * H * L * (width + D) * q.element_size() / 1e9  # noqa: E731
                row['rope_model_GBps'] = gb(D) / (row['rope_model_ms'] / 1e3)
                row['pope_model_GBps'] = gb(D if cuda else 2 * D) / (row['pope_model_ms'] / 1e3)
            if row['pope_model_ms'] and row['rope_nomask_ms']:
                row['pope_model_vs_rope_nomask'] = row['pope_model_ms'] / row['rope_nomask_ms']
            log(f'decode attention {row}')
            rows.append(row)
            del q, qp, k, kp, v
    return rows


def model_config(pos_emb):
    """GPTConfig of the 124M model of config/owt_<pos_emb>.py (its plain assignments, run from the repository root),
    or the smoke run's tiny one."""
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


def seconds(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def generate_rows():
    models = {}
    for pe in ('rope', 'pope'):
        torch.manual_seed(0)
        models[pe] = GPT(model_config(pe)).to(device).eval()
        for w in models[pe].parameters():  # weights in dtype; the buffers (RoPE's float64 frequencies) stay exact
            w.data = w.data.to(dtype)
        cfg = models[pe].config
        log(f'{pe}: {models[pe].get_num_params() / 1e6:.1f}M parameters, {cfg.n_layer} layers x {cfg.n_head} heads x '
            f'{cfg.n_embd}, block_size {cfg.block_size}, attn_impl {cfg.attn_impl}, {dtype}')
    # Under torch.compile each model compiles one graph per batch size: generate marks the lengths of its cache and
    # output dynamic from the first graph on (generate.KVCache), so both models' graphs are specialised alike whatever
    # the order of the rows. (Dynamo's automatic dynamic shapes, whose record of sizes the two models share, would
    # otherwise make the first graph static and later ones dynamic; torch._dynamo.reset() between the models would
    # throw away the other model's graphs, which the interleaved repeats below need.)
    rows = []
    for mode in modes:
        compile = mode == 'compiled'
        repeats = args.repeats if compile else args.eager_repeats
        for B in BATCHES:
            for new in NEW:
                cell = {pe: dict(mode=mode, batch=B, prompt=PROMPT, new_tokens=new, pos_emb=pe, runs_s=[])
                        for pe in models}
                rows += cell.values()
                if all([over_budget(row) for row in cell.values()]):
                    log(f'generate {mode}, batch {B}, {new} new tokens: skipped')
                    continue
                idx = torch.randint(0, models['rope'].config.vocab_size, (B, PROMPT), device=device,
                                    generator=torch.Generator(device).manual_seed(SEED))

                def run(m, n):
                    torch.manual_seed(SEED)
                    return generate(m, idx, n, top_k=TOP_K, compile=compile)
                for pe, m in models.items():  # compiled: of the same shapes (the first of a batch size compiles)
                    measured(cell[pe], 'warmup_s', lambda: seconds(lambda: run(m, new if compile else 16)))
                for r in range(repeats):  # rope, pope, rope, pope, ...: a drift of the machine meets both
                    for pe, m in models.items():
                        row = cell[pe]
                        if row['warmup_s'] is None or row.get('error') or time.time() - start > args.budget_s:
                            continue
                        t = attempt(row, 'timed call', lambda: seconds(lambda: run(m, new)))
                        if t is not None:
                            row['runs_s'].append(t)
                for row in cell.values():
                    if row['runs_s']:  # tokens/s of each run: the median, and the spread min-max
                        tps = sorted(B * new / s for s in row['runs_s'])
                        row.update(tokens_per_s=statistics.median(tps), tokens_per_s_min=tps[0],
                                   tokens_per_s_max=tps[-1], ms_per_step=1e3 * B / statistics.median(tps))
                    log(f'generate {row}')
                if cell['rope'].get('tokens_per_s') and cell['pope'].get('tokens_per_s'):
                    cell['pope']['pope_vs_rope'] = cell['pope']['tokens_per_s'] / cell['rope']['tokens_per_s']
    return rows


def fmt(x, spec):
    return '' if x is None else format(x, spec)


def markdown(result):
    lines = [f"# Generation speed ({result['meta']['device']})", '',
             f"torch {result['meta']['torch']}, triton {result['meta']['triton']}, python {result['meta']['python']}, "
             f"commit {result['meta']['commit']}; {result['meta']['dtype']}; `{result['meta']['command']}`"
             + (' (smoke: a tiny model and lengths)' if args.smoke else ''), '']
    if result['decode_attention']:
        clock = 'GPU time of CUDA-graph replays' if cuda else 'wall clock'
        title = f'## Decode attention: one query over a full cache, {H} heads, head dim {D}, ms a layer ({clock})'
        lines += [title, '',
                  '| batch | cache | RoPE model | PoPE model | PoPE / RoPE (model) '
                  '| RoPE sdpa, exact length, no mask | PoPE model / RoPE no mask | RoPE plain path | PoPE plain path '
                  '| GB/s RoPE, PoPE (model) | note |',
                  '|---|---|---|---|---|---|---|---|---|---|---|']
        for r in result['decode_attention']:
            g = r.get
            lines.append(f"| {r['batch']} | {r['cache']} | {fmt(g('rope_model_ms'), '.4f')} "
                         f"| {fmt(g('pope_model_ms'), '.4f')} | {fmt(g('pope_vs_rope_model'), '.2f')} "
                         f"| {fmt(g('rope_nomask_ms'), '.4f')} | {fmt(g('pope_model_vs_rope_nomask'), '.2f')} "
                         f"| {fmt(g('rope_plain_ms'), '.4f')} | {fmt(g('pope_plain_ms'), '.4f')} "
                         f"| {fmt(g('rope_model_GBps'), '.0f')}, {fmt(g('pope_model_GBps'), '.0f')} "
                         f"| {g('error', '')} |")
        lines.append('')
    if result['generate']:
        lines += [f'## generate.generate, prompt {PROMPT}, top-k {TOP_K}', '',
                  '| mode | batch | new tokens | encoding | tokens / s (median) | min-max | timed calls | ms / step '
                  '| PoPE / RoPE tokens/s (medians) | warm-up s | note |', '|' + '---|' * 11]
        for r in result['generate']:
            g = r.get
            spread = f"{g('tokens_per_s_min'):.1f}-{g('tokens_per_s_max'):.1f}" if g('tokens_per_s') else ''
            lines.append(f"| {r['mode']} | {r['batch']} | {r['new_tokens']} | {r['pos_emb']} "
                         f"| {fmt(g('tokens_per_s'), '.1f')} | {spread} | {len(r['runs_s'])} "
                         f"| {fmt(g('ms_per_step'), '.2f')} | {fmt(g('pope_vs_rope'), '.3f')} "
                         f"| {fmt(g('warmup_s'), '.1f')} | {g('error', '')} |")
        lines.append('')
    lines.append(f"Total {result['meta']['seconds']:.0f} s. {result['meta']['compile_note']}")
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    import triton
    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or 'CPU'
    log(f'{name} | torch {torch.__version__} | triton {triton.__version__} | python {platform.python_version()}')
    result = {'decode_attention': attention_rows() if 'attention' in sections else [],
              'generate': generate_rows() if 'generate' in sections else []}
    from torch._dynamo.utils import counters
    result['meta'] = dict(device=name, torch=torch.__version__, triton=triton.__version__,
                          python=platform.python_version(), commit=code_commit(ROOT), dtype=str(dtype),
                          command=' '.join(['python', 'results/speed/bench_generate.py', *sys.argv[1:]]),
                          seconds=time.time() - start, cudagraph_skips=counters['inductor'].get('cudagraph_skips', 0),
                          unique_graphs=counters['stats'].get('unique_graphs', 0), args=vars(args))
    result['meta']['compile_note'] = (f"torch.compile: {result['meta']['unique_graphs']} graphs compiled, "
                                      f"{result['meta']['cudagraph_skips']} CUDA-graph skips.")
    with open(os.path.join(args.out, 'generate.json'), 'w') as f:
        json.dump(result, f, indent=1)
    table = markdown(result)
    with open(os.path.join(args.out, 'generate.md'), 'w') as f:
        f.write(table)
    print('\n' + table)
    log(f'wrote {os.path.join(args.out, "generate.json")} and generate.md')
