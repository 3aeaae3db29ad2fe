# Round 7, call 2 (`bash results/speed/run.sh prologue_flat`), run from the repository root as .dev/flat/pbench.py; its
# "working tree" pope_kernel.py was the flat-tile version (flat_tiles.diff beside this, constants read from $PROLOGUE).
# The prologue / epilogue at the 124M shape (B 32, H 12, T 1024, d 64, bf16, q and k views of one (B, T, 3C)
# projection as in model.py) on one H200: the new flat tiles (pope_kernel.py of the working tree, q' contiguous;
# .dev/v_flat_tm: the same writing q', k' time-major) over a sweep of (BLOCK_T, BLOCK_C, warps), against the previous
# kernels (.dev/before) and a plain copy of as many bytes. Two rounds over every config (the drift check); median us.
# Writes the fastest config of each layout to $LOGS/best_{flat,flat_tm}.txt. Run from the repository root.
import os, sys, torch
from triton.testing import do_bench
sys.path.insert(0, '.')
import pope_kernel as new  # noqa: E402


def load(path, ns):
    src = open(path).read().replace('"pope::', f'"{ns}::')
    mod = type(sys)(ns)
    mod.__dict__['__file__'] = path
    exec(compile(src, path, 'exec'), mod.__dict__)
    return mod


old, tm = load('.dev/before/pope_kernel.py', 'old'), load('.dev/v_flat_tm/pope_kernel.py', 'tm')
B, H, T, d = 32, 12, 1024, 64
C = H * d
torch.manual_seed(0)
qkv = torch.randn(B, T, 3 * C, device='cuda', dtype=torch.bfloat16)
q = qkv[..., :C].view(B, T, H, d).transpose(1, 2)
k = qkv[..., C:2 * C].view(B, T, H, d).transpose(1, 2)
delta = -6 * torch.rand(H, d, device='cuda')
mb = B * T * C * 2 / 1e6  # MB of q (and of k)
fwd_mb, bwd_mb = 6 * mb, 8 * mb  # fwd: read q, k, write q', k' (2x); bwd: read dq', dk', q, k, write dq, dk
dqp, dkp = torch.randn(B, H, T, 2 * d, device='cuda', dtype=torch.bfloat16), torch.randn_like(q.new_empty(B, H, T, 2 * d))
dqp_tm, dkp_tm = (g.transpose(1, 2).contiguous().transpose(1, 2) for g in (dqp, dkp))
bench = lambda f: do_bench(f, warmup=25, rep=100, return_mode='median') * 1e3
line = lambda name, tf, tb: print(f"{name:34s} fwd {tf:6.1f} us {fwd_mb / tf:5.2f} TB/s | bwd {tb:6.1f} us "
                                  f"{bwd_mb / tb:5.2f} TB/s | sum {tf + tb:6.1f}", flush=True)
src, dst = torch.randn(int(4 * mb * 1e6 / 2), device='cuda', dtype=torch.bfloat16), None
dst = torch.empty_like(src)
tc = bench(lambda: dst.copy_(src))
print(f"plain copy of {4 * mb:.0f} MB (read + write {8 * mb:.0f} MB): {tc:.1f} us, {8 * mb / tc:.2f} TB/s")
ref_f = old.cartesian(q, k, delta, 0, 10000.0)
ref_b = old.cartesian_backward(dqp, dkp, q, k, delta, 0, 10000.0)
line('previous kernels (32 rows x 2 heads)', bench(lambda: old.cartesian(q, k, delta, 0, 10000.0)),
     bench(lambda: old.cartesian_backward(dqp, dkp, q, k, delta, 0, 10000.0)))
configs = [(bt, bc, w) for bt in (8, 16, 32) for bc in (128, 256, 512) for w in (2, 4, 8)]
results = {}
for rnd in range(2):
    for layout, mod, gq, gk in (('flat', new, dqp, dkp), ('flat_tm', tm, dqp_tm, dkp_tm)):
        for cfg in configs:
            mod.BLOCK_T, mod.BLOCK_C, mod.WARPS = cfg
            f = lambda: mod.cartesian(q, k, delta, 0, 10000.0)
            b = lambda: mod.cartesian_backward(gq, gk, q, k, delta, 0, 10000.0)
            if rnd == 0:
                out_f, out_b = f(), b()
                errs = [(x.float() - y.float()).abs().max().item() for x, y in zip(out_f, ref_f)]
                errs += [((x.float() - y.float()).abs().max() / y.float().abs().max()).item()
                         for x, y in zip(out_b, ref_b)]
                assert max(errs) < 1e-2, (layout, cfg, errs)
            tf, tb = bench(f), bench(b)
            results.setdefault((layout, cfg), []).append((tf, tb))
            line(f"round {rnd} {layout:7s} T{cfg[0]:2d} C{cfg[1]:3d} w{cfg[2]}", tf, tb)
print("\nbest of the two rounds (fwd + bwd):")
logs = os.environ.get('LOGS', '.')
for layout in ('flat', 'flat_tm'):
    ranked = sorted((min(a + b for a, b in r), cfg) for (lay, cfg), r in results.items() if lay == layout)
    for s, cfg in ranked[:5]:
        print(f"  {layout:7s} {cfg}: {s:.1f} us  rounds: {results[(layout, cfg)]}")
    with open(f"{logs}/best_{layout}.txt", 'w') as fh:
        fh.write(','.join(map(str, ranked[0][1])))
print(f"errors vs the previous kernels (last config): fwd abs, bwd rel: {errs}")
