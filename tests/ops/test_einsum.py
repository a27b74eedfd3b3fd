"""gt.einsum as torch.einsum: values and gradients on 1 process, on 2 ranks with split inputs, on a 2x2 mesh."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

CASES = [  # (equation, operand shapes): explicit and implicit output, ellipsis, diagonals, several operands
    ("ij,jk->ik", [(4, 6), (6, 8)]), ("ij,jk", [(4, 6), (6, 8)]), ("bij,bjk->bik", [(4, 2, 6), (4, 6, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 4, 4, 6), (2, 4, 2, 6)]), ("i,j->ij", [(4,), (6,)]), ("i,i->", [(8,), (8,)]),
    ("ij->", [(4, 6)]), ("ij->ji", [(4, 6)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("iij->j", [(4, 4, 2)]),
    ("...ij->...ji", [(2, 4, 2, 6)]), ("...ik,...kj", [(2, 4, 6), (1, 6, 2)]), ("ba,ab", [(4, 6), (6, 4)]),
    ("ijk,jl,lk->i", [(4, 2, 6), (2, 4), (4, 6)]), ("ij,ij->ij", [(4, 6), (4, 6)]), ("Ab,bC->AC", [(4, 2), (2, 6)]),
]


def _data(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _torch(eq, arrays, w):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = torch.einsum(eq, *ts)
    (y * torch.tensor(w)).sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _ours(eq, arrays, w, placement=None, sbps=None):
    if placement is None:
        ts = [gt.tensor(a, requires_grad=True) for a in arrays]
        wt = gt.tensor(w)
    else:
        ts = [gt.tensor(a, placement=placement, sbp=s).requires_grad_() for a, s in zip(arrays, sbps)]
        wt = gt.tensor(w, placement=placement, sbp=(gt.sbp.broadcast,) * placement.ndim)
    y = gt.einsum(eq, *ts)
    (y * wt).sum().backward()
    return y.numpy(), [t.grad.numpy() for t in ts]


def _check(eq, shapes, seed, placement=None, sbp_of=None):
    arrays = _data(shapes, seed)
    ref, ref_grads = _torch(eq, arrays, w := np.random.default_rng(seed + 1).standard_normal(
        torch.einsum(eq, *[torch.tensor(a) for a in arrays]).shape).astype(np.float32))
    sbps = None if sbp_of is None else [sbp_of(a) for a in arrays]
    y, grads = _ours(eq, arrays, w, placement, sbps)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=eq)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4, err_msg=eq)


@pytest.mark.parametrize("eq, shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_torch(eq, shapes):
    _check(eq, shapes, seed=len(eq))


def test_einsum_list_operands_and_errors():
    a, b = gt.ones(2, 3), gt.ones(3, 4)
    assert gt.einsum("ij,jk->ik", [a, b]).shape == (2, 4)
    with pytest.raises(RuntimeError, match="operands"):
        gt.einsum("ij,jk->ik", a)
    with pytest.raises(RuntimeError, match="subscripts"):
        gt.einsum("ijk->i", a)
    with pytest.raises(RuntimeError, match="output subscript"):
        gt.einsum("ij->iz", a)


def _on_ranks(mesh_2d):
    ranks = [[0, 1], [2, 3]] if mesh_2d else [0, 1]
    pl = gt.placement("cpu", ranks)
    for i, (eq, shapes) in enumerate(CASES):
        def sbp_of(a, i=i):  # split the first dim of even size (each operand its own), else broadcast
            dims = [d for d, n in enumerate(a.shape) if n % 2 == 0]
            first = gt.sbp.split(dims[i % len(dims)]) if dims else gt.sbp.broadcast
            second = gt.sbp.split(dims[(i + 1) % len(dims)]) if dims else gt.sbp.broadcast
            return (first, second) if mesh_2d else (first,)
        _check(eq, shapes, seed=len(eq), placement=pl, sbp_of=sbp_of)
    return len(CASES)


@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (4, True)], ids=["2ranks", "2x2mesh"])
def test_einsum_split_inputs_match_torch(nprocs, mesh_2d):
    assert run_ranks(_on_ranks, nprocs, mesh_2d, timeout=600) == [len(CASES)] * nprocs
