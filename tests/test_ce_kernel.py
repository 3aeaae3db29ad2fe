"""The loss kernels (ce_kernel.py) against F.cross_entropy over the first V columns: under the interpreter on the
CPU (CI), compiled on a GPU (TRITON_INTERPRET=0)."""

import pytest
import torch
import torch.nn.functional as F

import ce_kernel

pytestmark = pytest.mark.skipif(not ce_kernel.INTERPRET and not torch.cuda.is_available(),
                                reason="needs a GPU or TRITON_INTERPRET=1")
DEVICE = 'cpu' if ce_kernel.INTERPRET else 'cuda'


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N,V,Vp", [(7, 100, 128), (5, 2500, 2560)])  # 2500: three column blocks (interpreter)
def test_loss_and_gradient_match_cross_entropy(dtype, N, V, Vp):
    torch.manual_seed(0)
    z = 3 * torch.randn(N, Vp, device=DEVICE)
    z[0, V - 1] += 40.0  # the row's max in its last block: the running max must rescale the sum
    z[2] += 1000.0  # exp(z) overflows float32 unless the max is taken out
    z[3, V:] = 100.0  # padding logits larger than any real one: they must not count
    z = z.to(dtype).requires_grad_()
    t = torch.randint(0, V, (N,), device=DEVICE)
    t[1], t[4] = -1, V - 1  # an ignored row; a target in the last column
    loss = ce_kernel.cross_entropy(z, t, V)
    ref = F.cross_entropy(z[:, :V].float(), t, ignore_index=-1)
    g, = torch.autograd.grad(loss, z)
    g_ref, = torch.autograd.grad(ref, z)
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-5)
    tol = 1e-6 if dtype == torch.float32 else 4e-3  # bf16: the gradient is stored in the logits' dtype
    torch.testing.assert_close(g.float(), g_ref.float(), rtol=0, atol=tol)
    assert torch.all(g[:, V:] == 0) and torch.all(g[1] == 0)


def test_a_target_outside_the_vocabulary_makes_the_loss_nan():
    z, t = torch.randn(3, 128, device=DEVICE), torch.tensor([5, 100, -1], device=DEVICE)  # 100: a padding column
    assert torch.isnan(ce_kernel.cross_entropy(z, t, 100))
    assert ce_kernel.cross_entropy(z, torch.tensor([5, 99, -1], device=DEVICE), 100).isfinite()


def test_rejects_what_it_does_not_take():
    z = torch.randn(4, 128, device=DEVICE)
    with pytest.raises(ValueError, match="contiguous rows"):
        ce_kernel.cross_entropy(z.t(), torch.zeros(128, dtype=torch.int64, device=DEVICE), 100)
    with pytest.raises(ValueError, match="int64 targets"):
        ce_kernel.cross_entropy(z, torch.zeros(4, dtype=torch.int32, device=DEVICE), 100)
