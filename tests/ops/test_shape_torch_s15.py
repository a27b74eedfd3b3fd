"""Shape, join and creation calls where globaltensor answered otherwise than torch (a sweep of
17,000 paired calls found them): each call's shape, dtype and values against torch's, the
aliasing of flip's result, and the gradients of gather with a smaller index."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt


def _x(lib):
    return lib.arange(6).reshape(2, 3)


CALLS = {
    "gather, index smaller in another dim": lambda L: _x(L).gather(0, L.tensor([[1], [0]])),
    "gather, index of one row": lambda L: _x(L).gather(1, L.tensor([[0, 1, 2, 0]])),
    "gather, index narrower than input": lambda L: _x(L).gather(0, L.tensor([[1, 0]])),
    "cat float32 with int64": lambda L: L.cat([L.ones(2), L.tensor([1, 2])]),
    "stack 0-d float32 with int64": lambda L: L.stack([L.tensor(1.0), L.tensor(2)]),
    "hstack float32 with int64": lambda L: L.hstack([L.ones(2), L.tensor([1, 2])]),
    "cat skips a legacy empty tensor": lambda L: L.cat([L.tensor([]), L.ones(2, 3)]),
    "cat skips it along dim 1": lambda L: L.cat([L.zeros(0), L.ones(2, 3)], 1),
    "flip with several ints": lambda L: _x(L).flip(0, 1),
    "flip dims=": lambda L: L.flip(_x(L), dims=[1]),
    "tile with several ints": lambda L: _x(L).tile(2, 2),
    "take with negative indices": lambda L: L.take(L.arange(6), L.tensor([-1, 0, -6])),
    "index_select with a 0-d index": lambda L: L.index_select(_x(L), 0, L.tensor(1)),
    "arange(end=)": lambda L: L.arange(end=3),
    "arange of 0-d tensors": lambda L: L.arange(L.tensor(1), L.tensor(4)),
    "rot90(k=0) of bool": lambda L: L.tensor([[True, False]]).rot90(0),
    "trace of uint8": lambda L: L.tensor([[1, 2], [3, 4]], dtype=L.uint8).trace(),
    "view_as": lambda L: L.ones(2, 3, 4).view_as(L.ones(6, 4)),
    "reshape_as": lambda L: L.ones(6, 4).reshape_as(L.ones(2, 3, 4)),
    "mT": lambda L: L.arange(24.0).reshape(2, 3, 4).mT,
    "nelement, ndimension, element_size": lambda L: L.tensor([L.ones(2, 3).nelement(), L.ones(2, 3).ndimension(),
                                                             L.ones(2, dtype=L.float64).element_size()]),
    "as_tensor of a list": lambda L: L.as_tensor([1, 2]),
    "as_tensor with a dtype": lambda L: L.as_tensor(L.ones(2), dtype=L.float64),
}
SHAPE_ONLY = {  # random draws: shape and dtype
    "randint(high, size)": lambda L: L.randint(10, (3,)),
    "rand_like": lambda L: L.rand_like(L.ones(2, 3)),
    "randn_like with a dtype": lambda L: L.randn_like(L.ones(2, 3), dtype=L.float64),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_calls_as_torch(name):
    got, want = CALLS[name](gt), CALLS[name](torch)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == str(want.dtype).replace("torch.", ""), name
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", sorted(SHAPE_ONLY))
def test_random_calls_as_torch(name):
    got, want = SHAPE_ONLY[name](gt), SHAPE_ONLY[name](torch)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == str(want.dtype).replace("torch.", ""), name


def test_flip_returns_a_copy_and_as_tensor_none():
    x = gt.arange(4.0)
    x.flip(0).fill_(0)
    np.testing.assert_array_equal(x.numpy(), [0.0, 1.0, 2.0, 3.0])
    assert gt.as_tensor(x) is x


def test_gather_with_a_smaller_index_backward_as_torch():
    x = np.arange(24.0).reshape(3, 4, 2)
    index = np.array([[[0, 1]], [[3, 2]]])  # (2, 1, 2): smaller in dims 0 and 1 (dim 1 is gathered)
    t, g = torch.tensor(x, requires_grad=True), gt.tensor(x, requires_grad=True)
    w = np.random.default_rng(0).standard_normal((2, 1, 2))
    (t.gather(1, torch.tensor(index)) * torch.tensor(w)).sum().backward()
    (g.gather(1, gt.tensor(index)) * gt.tensor(w)).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), t.grad.numpy())
