"""
The tiles, warps and splits of pope_decode.decode (results/speed/README.md, "The kernel's tiles"):
each setting's decode attention, timed as bench_generate.py's, against the defaults' (the geometric
mean over the shapes of the time ratio). Writes DIR/decode_tiles.md, the best score first.

    python results/speed/bench_decode_tiles.py --out=results/speed/generate   # ~2 minutes, H200
"""

import itertools
import math
import os
import platform
import sys
import time

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
import pope_decode  # noqa: E402
from bench_attention import cuda_graph  # noqa: E402
from eval import code_commit, write_page  # noqa: E402
from model import pope_frequencies  # noqa: E402
from prepare.common import parser  # noqa: E402

p = parser(__doc__)
p.add_argument('--out', required=True, help='folder for decode_tiles.md')
args = p.parse_args()
if not torch.cuda.is_available():
    sys.exit('bench_decode_tiles.py times Triton kernels on a CUDA GPU; torch finds none here')
os.makedirs(args.out, exist_ok=True)
sys.stdout.reconfigure(line_buffering=True)

H, D, dtype = 12, 64, torch.bfloat16
SHAPES = [(1, 2560, 2560), (8, 2560, 2560), (8, 2560, 1536), (1, 32768, 32768), (8, 32768, 32768)]
SMS = torch.cuda.get_device_properties(0).multi_processor_count
DEFAULT = (pope_decode.DECODE_BLOCK, pope_decode.DECODE_WARPS[D], pope_decode.MIN_PROGRAMS / SMS)
start = time.time()


def setting(block, warps, per_sm):  # the module's constants that decode reads
    pope_decode.DECODE_BLOCK, pope_decode.DECODE_WARPS[D] = block, warps
    pope_decode.MIN_PROGRAMS = int(per_sm * SMS)


def per_layer_us(B, L, n, k, v, phases):
    q = torch.randn(B, H, 2 * D if phases else D, device='cuda')
    tables = pope_decode.decode_tables(pope_frequencies(D, device='cuda'), L) if phases \
        else (None, None)
    n = torch.tensor([n], device='cuda')
    graph, _ = cuda_graph(lambda: [pope_decode.decode(q, k[i], v[i], n, *tables, 0.125)
                                   for i in range(len(k))])
    return 1e3 * triton.testing.do_bench(graph.replay, return_mode='median') / len(k)


settings = [s for s in itertools.product([16, 32, 64], [1, 2, 4, 8], [2, 8, 32])
            if 4 <= s[0] * D // (32 * s[1]) <= 64]  # 4 to 64 numbers of a tile per thread
settings = [DEFAULT] + [s for s in settings if s != DEFAULT]  # the defaults first: the others' unit
times = {s: {} for s in settings}
for B, L, n in SHAPES:
    layers = max(12, math.ceil(200e6 / (B * H * L * 2 * D * 2)))  # 200 MB at least, past the L2
    g = torch.Generator('cuda').manual_seed(0)
    k = [torch.randn(B, H, L, D, device='cuda', generator=g).to(dtype).abs()  # mu(k) >= 0
         for _ in range(layers)]
    v = [torch.randn(B, H, L, D, device='cuda', generator=g).to(dtype) for _ in range(layers)]
    for s in settings:
        setting(*s)
        times[s][B, L, n, 'pope'] = per_layer_us(B, L, n, k, v, True)
        if s == DEFAULT:
            times[s][B, L, n, 'rope'] = per_layer_us(B, L, n, k, v, False)
    print(f'[{time.time() - start:5.0f} s] b{B} L{L} n{n}: defaults '
          f'{times[DEFAULT][B, L, n, "pope"]:.2f} us, best '
          f'{min(t[B, L, n, "pope"] for t in times.values()):.2f} us')
    del k, v
setting(*DEFAULT)
score = lambda s: math.exp(sum(math.log(times[s][key] / times[DEFAULT][key])
                               for key in times[s] if key[3] == 'pope') / len(SHAPES))
head = ' | '.join(f'b{B} L{L} n{n}' for B, L, n in SHAPES)
cells = lambda s, pe, f: ' | '.join(f(times[s][B, L, n, pe], B, n) for B, L, n in SHAPES)
us = lambda t, B, n: f'{t:.2f}'
gbs = lambda t, B, n: f'{B * H * n * D * 2 * 2 / t / 1e3:.0f}'  # mu(k) and v of the visible n
lines = [f'# pope_decode.decode: tiles, warps and splits ({torch.cuda.get_device_name()})', '',
         f'torch {torch.__version__}, triton {triton.__version__}, python '
         f'{platform.python_version()}, commit {code_commit(ROOT)}, {SMS} SMs; 12 heads, head dim '
         f"{D}, bf16; us a layer (GPU time of CUDA-graph replays over 12+ layers' caches); "
         f'`python results/speed/bench_decode_tiles.py {" ".join(sys.argv[1:])}`', '',
         f'Defaults: tiles of {DEFAULT[0]}, {DEFAULT[1]} warp(s), {DEFAULT[2]:g} programs an SM. '
         "GB/s: the visible positions' mu(k) and v over the time.", '',
         f'| tile | warps | programs / SM | {head} | time / defaults (geometric mean) |',
         '|---|---|---|' + '---|' * len(SHAPES) + '---|']
lines += [f"| {s[0]} | {s[1]} | {s[2]:g} | {cells(s, 'pope', us)} | {score(s):.2f} |"
          for s in sorted(settings, key=score)]
lines += ['', f'| defaults | | | {head} |', '|---|---|---|' + '---|' * len(SHAPES),
          f"| PoPE GB/s | | | {cells(DEFAULT, 'pope', gbs)} |",
          f"| RoPE (plain keys) us | | | {cells(DEFAULT, 'rope', us)} |", '',
          f'Total {time.time() - start:.0f} s.']
write_page(os.path.join(args.out, 'decode_tiles.md'), lines)
