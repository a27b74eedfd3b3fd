"""x[index] with x broadcast and the index split (a batch split): every rank takes its own index
rows with no collective, the output keeps the split, and the gradient comes back partial (one
all_reduce to broadcast it); values and gradients against torch, on 1-D and 2-D meshes, with the
index tensor first, after a slice, and after an int and a slice (which PyTorch reads as x[1][:, idx])."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

B, S0 = gt.sbp.broadcast, gt.sbp.split(0)
KEYS = {  # name: (x's shape, a function of (x, index) for both libraries, the output dim of the split)
    "x[idx]": ((7, 4), lambda x, i: x[i], 0),
    "x[:, idx]": ((3, 7, 2), lambda x, i: x[:, i], 1),
    "x[1, :, idx]": ((2, 3, 7), lambda x, i: x[1, :, i], 1),  # PyTorch's reading: x[1][:, idx]
}


def _data(shape):
    rng = np.random.default_rng(3)
    index = rng.integers(0, 7, (5, 3))  # 5 rows over the ranks: uneven pieces
    x = rng.standard_normal(shape).astype(np.float32)
    return x, index, rng.standard_normal(KEYS_OUT[shape]).astype(np.float32)


KEYS_OUT = {(7, 4): (5, 3, 4), (3, 7, 2): (3, 5, 3, 2), (2, 3, 7): (3, 5, 3)}


def _split_index(mesh_shape, name):
    shape, key, split_dim = KEYS[name]
    x_np, idx_np, w_np = _data(shape)
    mesh = gt.placement("cpu", np.arange(2).reshape(mesh_shape).tolist())
    whole = (B,) * mesh.ndim
    data = (S0,) + (B,) * (mesh.ndim - 1)
    x = gt.tensor(x_np, placement=mesh, sbp=whole, requires_grad=True)
    index = gt.tensor(idx_np, placement=mesh, sbp=whole).to_global(sbp=data)
    w = gt.tensor(w_np, placement=mesh, sbp=whole)
    results = []
    for _ in range(3):  # the same plan every time
        with gt.debug.count_collectives() as forward:
            y = key(x, index)
        loss = (y * w).sum()
        with gt.debug.count_collectives() as backward:
            loss.backward()
        results.append((dict(forward), y.sbp, y.numpy(), dict(backward), x.grad.numpy()))
        x.grad = None
    return split_dim, results


def _torch(name):
    shape, key, _ = KEYS[name]
    x_np, idx_np, w_np = _data(shape)
    x = torch.tensor(x_np, requires_grad=True)
    y = key(x, torch.tensor(idx_np))
    (y * torch.tensor(w_np)).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("mesh_shape", [(2,), (2, 1)])
def test_a_split_index_takes_its_rows_without_a_collective(mesh_shape, name):
    want_y, want_grad = _torch(name)
    for split_dim, results in run_ranks(_split_index, 2, mesh_shape, name):
        for forward, sbp, y, backward, grad in results:
            assert forward == {} and sbp[0] == gt.sbp.split(split_dim), (name, forward, sbp)
            np.testing.assert_array_equal(y, want_y)
            assert backward == {"all_reduce": 1}, (name, backward)  # the partial gradient made broadcast
            np.testing.assert_allclose(grad, want_grad, rtol=1e-6, atol=1e-6)
