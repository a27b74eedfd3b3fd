"""Keys that mix ints with index tensors read as PyTorch, OneFlow and Paddle read them: the ints
first, as basic indices (x[1, :, idx] is x[1][:, idx]), where numpy counts them among the advanced
indices and moves the joint dims first. Values, gradients and assignments against torch, on local
tensors and on 2 ranks (x split on a dim the key takes whole)."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

IDX = np.array([[1, 0, 1], [0, 0, 1]])  # fits every dim (2, 3 and 7)
MASK = np.array([[True, False, True], [False, True, True]])
KEYS = {  # name: the key as a function of (index tensor, mask tensor)
    "1, :, idx": lambda i, m: (1, slice(None), i),
    "idx, 1": lambda i, m: (i, 1),
    "idx, ..., 1": lambda i, m: (i, Ellipsis, 1),
    "None, 1, :, idx": lambda i, m: (None, 1, slice(None), i),
    "idx, 1, idx": lambda i, m: (i, 1, i),
    "mask, 1": lambda i, m: (m, 1),
    "1, [2, 0]": lambda i, m: (1, [2, 0]),
}


def _x():
    return np.arange(2 * 3 * 7, dtype=np.float64).reshape(2, 3, 7) / 10 - 2


def _torch(name):
    x = torch.tensor(_x(), requires_grad=True)
    key = KEYS[name](torch.tensor(IDX), torch.tensor(MASK))
    y = x[key]
    (y * y).sum().backward()
    z = torch.tensor(_x())
    z[key] = -1.0
    return y.detach().numpy(), x.grad.numpy(), z.numpy()


def _ours(name, placement=None):
    kw = {} if placement is None else {"placement": placement, "sbp": gt.sbp.split(2)}
    x = gt.tensor(_x(), requires_grad=True, **kw)
    index_kw = {} if placement is None else {"placement": placement, "sbp": gt.sbp.broadcast}
    key = KEYS[name](gt.tensor(IDX, **index_kw), gt.tensor(MASK, **index_kw))
    y = x[key]
    (y * y).sum().backward()
    z = gt.tensor(_x(), **kw)
    z[key] = -1.0
    return y.numpy(), x.grad.numpy(), z.numpy()


@pytest.mark.parametrize("name", sorted(KEYS))
def test_ints_with_index_tensors_read_as_pytorch(name):
    for got, want in zip(_ours(name), _torch(name)):
        assert got.shape == want.shape, (name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)


def _all_keys_on_ranks():
    return {name: _ours(name, gt.placement("cpu", [0, 1])) for name in sorted(KEYS) if name != "idx, ..., 1"}


def test_ints_with_index_tensors_on_two_ranks():
    """x split on its last dim, which the keys (but one) take whole or index."""
    want = {name: _torch(name) for name in KEYS}
    for ranks_result in run_ranks(_all_keys_on_ranks, 2):
        for name, got in ranks_result.items():
            for g, w in zip(got, want[name]):
                assert g.shape == w.shape, (name, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=name)
