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


def _random_key(rng, shape):
    """A key of ints (0-d tensors too), slices (positive steps), None, Ellipsis, integer index
    tensors, lists and bool masks, as (kind, value) pairs for both libraries."""
    key, d, ellipsis = [], 0, False
    while d < len(shape) and rng.random() > 0.15:
        r, n = rng.random(), shape[d]
        if r < 0.1:
            key.append(("none", None))
            continue
        if r < 0.15 and not ellipsis:
            key.append(("ellipsis", Ellipsis))
            ellipsis, d = True, d + int(rng.integers(0, len(shape) - d + 1))
            continue
        if r < 0.35:
            key.append(("int", int(rng.integers(-n, n))))
        elif r < 0.45:
            key.append(("array", np.array(rng.integers(-n, n))))  # 0-d: read as an int
        elif r < 0.65:
            bounds = [int(rng.integers(-n - 1, n + 1)) if rng.random() < 0.5 else None for _ in range(2)]
            key.append(("slice", slice(*bounds, 2 if rng.random() < 0.3 else None)))
        elif r < 0.85:
            key.append(("array", rng.integers(-n, n, tuple(rng.integers(1, 3, int(rng.integers(1, 3)))))))
        elif r < 0.92:
            key.append(("list", [int(v) for v in rng.integers(0, n, int(rng.integers(1, 3)))]))
        else:
            key.append(("array", rng.random(n) < 0.5))
        d += 1
    return key


def _built(key, make):
    return tuple(make(v) if kind == "array" else v for kind, v in key)


def _check_random_keys(seed, trials, placement=None):
    """(failures, keys compared): values, gradients and assignments of x[key] against torch."""
    rng, failures, compared = np.random.default_rng(seed), [], 0
    kw = {} if placement is None else {"placement": placement, "sbp": gt.sbp.broadcast}
    for _ in range(trials):
        shape = tuple(int(v) for v in rng.integers(1, 5, int(rng.integers(1, 4))))
        x, key = rng.standard_normal(shape), _random_key(rng, shape)
        try:
            t = torch.tensor(x, requires_grad=True)
            ty = t[_built(key, torch.tensor)]
        except (IndexError, RuntimeError, ValueError):
            continue  # both refuse (ours is checked to raise below)
        g = gt.tensor(x, requires_grad=True, **kw)
        split = placement is not None and len(shape) and rng.random() < 0.5
        gx = g.to_global(sbp=gt.sbp.split(len(shape) - 1)) if split else g
        gy = gx[_built(key, lambda v: gt.tensor(v, **kw))]
        w = rng.standard_normal(tuple(ty.shape))
        (ty * torch.tensor(w)).sum().backward()
        (gy * gt.tensor(w, **kw)).sum().backward()
        tz, gz = torch.tensor(x), gt.tensor(x, **kw)
        tz[_built(key, torch.tensor)] = -7.0
        gz[_built(key, lambda v: gt.tensor(v, **kw))] = -7.0
        compared += 1
        if tuple(gy.shape) != tuple(ty.shape) or not np.array_equal(gy.numpy(), ty.detach().numpy()) or \
                not np.allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-12) or not np.array_equal(gz.numpy(), tz.numpy()):
            failures.append((shape, key))
    return failures, compared


def test_random_keys_against_torch():
    failures, compared = _check_random_keys(0, 300)
    assert compared > 200 and not failures, failures[:5]


def test_random_keys_on_two_ranks():
    for failures, compared in run_ranks(_check_random_keys, 2, 1, 150, gt.placement("cpu", [0, 1]), timeout=300):
        assert compared > 80 and not failures, failures[:5]
