# Round 7, call 3 (`bash results/speed/run.sh flat_check`), run from the repository root as .dev/flat/diag.py; its
# "working tree" pope_kernel.py was the flat-tile version (../call2/flat_tiles.diff) writing q', k' time-major.
# Where the prologue / epilogue's time goes (124M shape, bf16, q' k' time-major as the sdpa path writes them):
# pope_kernel.py of the working tree, and copies of it that leave one stage out (not correct: for timing only):
#   no_table     the phase table's loads replaced by a cheap function of the index
#   no_softplus  mu = x (no exp2 / log2), and sigmoid(x) -> x in the backward
#   half_store   the forward stores mu cos phi only; the backward loads dX only
#   no_x_load    x replaced by a function of the index
# against a plain copy. Median us of do_bench, two rounds.
import sys, torch
from triton.testing import do_bench
sys.path.insert(0, '.')
SRC = open('pope_kernel.py').read()
VARIANTS = {
    'full': [],
    'no_table': [("cos_phi = tl.load(COS + table, mask=keep, other=0.0)", "cos_phi = table.to(tl.float32) * 1e-6"),
                 ("sin_phi = tl.load(SIN + table, mask=keep, other=0.0)", "sin_phi = table.to(tl.float32) * 2e-6")],
    'no_softplus': [("    mu = _softplus(x)\n", "    mu = x\n"), ("* _sigmoid(x)", "* x"),
                    ("ddelta = _softplus(x) *", "ddelta = x *")],
    'half_store': [("    tl.store(out + d, (mu * sin_phi).to(XP.dtype.element_ty), mask=keep)\n", ""),
                   ("dY = tl.load(g + d, mask=keep, other=0.0).to(tl.float32)", "dY = dX")],
    'no_x_load': [("x = tl.load(X + b * sxb + h[None, :] * sxh + offs_t[:, None] * sxt + c[None, :], mask=keep, other=0.0)",
                   "x = (offs_t[:, None] + cols[None, :]).to(tl.float32) * 1e-3")],
}
mods = {}
for name, subs in VARIANTS.items():
    src = SRC.replace('"pope::', f'"{name}::')
    for a, b in subs:
        assert a in src, (name, a)
        src = src.replace(a, b)
    path = f'/tmp/pk_{name}.py'
    open(path, 'w').write(src)
    mod = type(sys)(f'pk_{name}')
    mod.__dict__['__file__'] = path
    exec(compile(src, path, 'exec'), mod.__dict__)
    mods[name] = mod
B, H, T, d = 32, 12, 1024, 64
C = H * d
qkv = torch.randn(B, T, 3 * C, device='cuda', dtype=torch.bfloat16)
q = qkv[..., :C].view(B, T, H, d).transpose(1, 2)
k = qkv[..., C:2 * C].view(B, T, H, d).transpose(1, 2)
delta = -6 * torch.rand(H, d, device='cuda')
dqp, dkp = (torch.randn(B, T, H, 2 * d, device='cuda', dtype=torch.bfloat16).transpose(1, 2) for _ in range(2))
mb = B * T * C * 2 / 1e6
bench = lambda f: do_bench(f, warmup=25, rep=100, return_mode='median') * 1e3
src = torch.randn(int(2 * mb * 1e6 / 2), device='cuda', dtype=torch.bfloat16)
dst = torch.empty_like(src)
print(f"plain copy of {2 * mb:.0f} MB: {bench(lambda: dst.copy_(src)):.1f} us")
for rnd in range(2):
    for cfg in ((8, 128, 2), (16, 128, 2), (8, 256, 4)):
        for name, m in mods.items():
            m.BLOCK_T, m.BLOCK_C, m.WARPS = cfg
            tf = bench(lambda: m.cartesian(q, k, delta, 0, 10000.0, True))
            tb = bench(lambda: m.cartesian_backward(dqp, dkp, q, k, delta, 0, 10000.0))
            print(f"round {rnd} {str(cfg):15s} {name:12s} fwd {tf:6.1f} us ({6 * mb / tf:4.2f} TB/s) "
                  f"bwd {tb:6.1f} us ({8 * mb / tb:4.2f} TB/s)", flush=True)
