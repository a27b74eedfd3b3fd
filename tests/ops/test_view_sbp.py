"""view/reshape of split tensors infer OneFlow's SBP (reshape_user_op_util's group starts), moving
nothing where a split survives and boxing, as OneFlow's view of a global tensor does, where none does;
values and gradients against torch on 2 ranks and a 2x2 mesh."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks
from globaltensor.ops.shape import _split_pairs

S, B, P = gt.sbp.split, gt.sbp.broadcast, gt.sbp.partial_sum

# (global shape, sbp per mesh axis, view shape, the sbp OneFlow infers; None: no split survives, boxed)
ONE_D = [
    ((8, 4), (S(0),), (8, 2, 2), (S(0),)),        # dim 0 whole: S(0) stays
    ((8, 4), (S(0),), (2, 4, 4), (S(0),)),        # 8 and 2 both part evenly over 2 ranks
    ((8, 4), (S(1),), (8, 2, 2), (S(1),)),        # 4 and 2 both even: the group's start keeps the split
    ((2, 3, 8), (S(2),), (6, 8), (S(1),)),        # the same dim, renumbered
    ((5, 3), (S(1),), (5, 1, 3), (S(2),)),        # a size-1 dim in between
    ((5, 4), (S(0),), (5, 2, 2), (S(0),)),        # uneven rows: equal sizes still cut alike
    ((5, 4), (S(0),), (10, 2), None),             # 5 rows over 2 ranks do not map onto 10: boxed
    ((6, 4), (S(0),), (3, 8), None),              # 3 does not part evenly over 2 ranks
    ((8, 4), (P,), (2, 16), (P,)),                # partial sums reshape term by term
    ((8, 4), (B,), (32,), (B,)),
]
MESH = [
    ((16, 8), (S(0), S(1)), (4, 4, 8), (S(0), S(2))),   # 16 and 4 divide over the 4 ranks
    ((16, 8), (S(0), S(0)), (4, 4, 8), (S(0), S(0))),   # nested cuts of one dim
    ((8, 6), (S(1), B), (8, 2, 3), None),               # 6 does not divide over 4 ranks: boxed
    ((8, 6), (B, S(0)), (8, 3, 2), (B, S(0))),
]


def _views(cases, ranks):
    pl = gt.placement("cpu", ranks)
    out = []
    for shape, sbp, view_shape, _ in cases:
        full = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7 - 1
        weight = np.cos(np.arange(np.prod(view_shape), dtype=np.float32)).reshape(view_shape)
        x = gt.tensor(full, placement=pl, sbp=[B] * len(sbp), requires_grad=True)
        xs = x.to_global(pl, sbp)
        with gt.debug.count_collectives() as c:
            y = xs.view(*view_shape)
        counts = dict(c)
        r = gt.reshape(xs, view_shape)
        (y * gt.tensor(weight, placement=pl, sbp=[B] * len(sbp))).sum().backward()
        out.append((y.sbp, counts, y.numpy(), r.sbp, r.numpy(), x.grad.numpy()))
    return out


def _check(results, cases):
    for rank_out in results:
        for (shape, sbp, view_shape, want_sbp), (got_sbp, counts, value, r_sbp, r_value, grad) in zip(cases, rank_out):
            tx = (torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape) / 7 - 1).requires_grad_()
            weight = torch.cos(torch.arange(int(np.prod(view_shape)), dtype=torch.float32)).reshape(view_shape)
            ty = tx.view(*view_shape)
            (ty * weight).sum().backward()
            np.testing.assert_allclose(value, ty.detach().numpy(), rtol=1e-6)
            np.testing.assert_allclose(r_value, ty.detach().numpy(), rtol=1e-6)
            np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-6)
            assert got_sbp == r_sbp
            if want_sbp is not None:
                assert got_sbp == want_sbp and counts == {}, (shape, sbp, view_shape, got_sbp, counts)
            else:
                assert counts, (shape, sbp, view_shape, "no split survives: the input is boxed")


def test_view_of_split_tensors_on_two_ranks():
    _check(run_ranks(_views, 2, ONE_D, [0, 1]), ONE_D)


def test_view_of_split_tensors_on_a_2x2_mesh():
    _check(run_ranks(_views, 4, MESH, [[0, 1], [2, 3]]), MESH)


@pytest.mark.parametrize("in_shape, out_shape, ranks, pairs", [
    ((8, 4), (2, 4, 4), 2, ((0, 0), (1, 2))),
    ((8, 4), (2, 4, 4), 4, ((1, 2),)),           # 2 rows over 4 ranks: dim 0 no longer cuts alike
    ((4, 12, 5), (4, 6, 2, 5), 2, ((0, 0), (1, 1), (2, 3))),
    ((5, 3), (15,), 2, ()),
    ((0, 4), (0, 2, 2), 2, ((0, 0),)),           # no elements: equal sizes only (OneFlow: B only)
    ((), (1, 1), 2, ()),
])
def test_split_pairs_follow_oneflow_group_starts(in_shape, out_shape, ranks, pairs):
    assert _split_pairs(in_shape, out_shape, ranks) == pairs


def test_local_view_still_refuses_a_copy():
    t = gt.tensor(np.arange(15.0).reshape(3, 5)).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(15)
