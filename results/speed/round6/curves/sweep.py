# As run in round 6 (call 3) from .dev/prologue/, beside pk_sweep.py: pope_kernel.py of ed997ea (unchanged
# since) with its two prologue/epilogue launches given num_warps=WARPS (a module constant, 4) and its custom ops
# renamed pope:: -> sweep::; '../v_ce_det/ce_kernel.py' is ce_kernel.py of branch speed-fused-ce. Output: sweep.log;
# its ce lines' 'GB/s' are TB/s (bytes / ms / 1e9).
# prologue / epilogue block sweep, smaller programs than round 5's (speed/call1/prologue_bench.log); and the loss
# kernels' forward, round 5's branch version vs main's: microseconds and GB/s of DRAM traffic on the H200
import importlib.util, sys, torch, triton
from triton.testing import do_bench
sys.path.insert(0, '.')
import pk_sweep as pk
B, H, T, d = 32, 12, 1024, 64
C = H * d
qkv = torch.randn(B, T, 3 * C, device='cuda', dtype=torch.bfloat16)
q = qkv[..., :C].view(B, T, H, d).transpose(1, 2); k = qkv[..., C:2 * C].view(B, T, H, d).transpose(1, 2)
delta = -6 * torch.rand(H, d, device='cuda')
qp, kp = pk.cartesian(q, k, delta, 0, 10000.0)
dqp, dkp = torch.randn_like(qp), torch.randn_like(kp)
nb = 2 * B * T * C * 2
ref = pk.cartesian(q, k, delta, 0, 10000.0), pk.cartesian_backward(dqp, dkp, q, k, delta, 0, 10000.0)
for bt, heads, w in [(32, 2, 4), (16, 1, 1), (16, 1, 2), (16, 2, 1), (16, 2, 2), (16, 4, 2), (16, 4, 4), (32, 1, 2),
                     (32, 2, 2), (32, 2, 1), (32, 4, 2), (64, 2, 2), (64, 4, 2), (32, 2, 4)]:
    pk.BLOCK_T, pk.HEADS, pk.WARPS = bt, heads, w
    f = lambda: pk.cartesian(q, k, delta, 0, 10000.0)
    b = lambda: pk.cartesian_backward(dqp, dkp, q, k, delta, 0, 10000.0)
    same = all(torch.equal(x, y) for x, y in zip(f(), ref[0])) and all(torch.allclose(x, y, atol=1e-3) for x, y in zip(b(), ref[1]))
    tf, tb = do_bench(f, rep=300) * 1e3, do_bench(b, rep=300) * 1e3
    print(f"BLOCK_T {bt:3d} HEADS {heads} warps {w}  fwd {tf:6.1f} us {3 * nb / tf / 1e3:5.0f} GB/s | "
          f"bwd {tb:6.1f} us {4 * nb / tb / 1e3:5.0f} GB/s | same {same}", flush=True)
mods = {}
for name, path in [('branch', '../v_ce_det/ce_kernel.py'), ('main', '../../ce_kernel.py')]:
    src = open(path).read().replace('"gpt::', f'"{name}::')
    mod = type(sys)(name); exec(compile(src, path, 'exec'), mod.__dict__); mods[name] = mod
N, Vp, V = 32 * 1024, 50304, 50257
z = torch.randn(N, Vp, device='cuda', dtype=torch.bfloat16); t = torch.randint(0, V, (N,), device='cuda')
loss, lse = torch.empty(N, device='cuda'), torch.empty(N, device='cuda')
for name, m in mods.items():
    for w in (4, 8, 16):
        for bv in (2048, 4096, 8192):
            fn = lambda: m._ce_fwd[(N,)](z, t, loss, lse, V, z.stride(0), BLOCK_V=bv, num_warps=w)
            ms = do_bench(fn, rep=300)
            print(f"ce fwd {name:6s} warps {w:2d} BLOCK_V {bv}: {ms * 1e3:7.1f} us {z.numel() * 2 / ms / 1e9:5.0f} GB/s, "
                  f"lse err {(lse - torch.logsumexp(z[:, :V].float(), -1)).abs().max().item():.1e}", flush=True)
