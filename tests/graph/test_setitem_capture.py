"""x[key] = value inside nn.Graph (OneFlow's test_global_slice_update): one registered op, captured and
replayed on 2 ranks for every SBP of x, forward and backward against numpy; no collective for a split x."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

B = gt.sbp.broadcast
KEYS = [(slice(None), slice(None, 8)), (slice(1, 7, 2), 3), (Ellipsis, slice(None, None, 5))]


def _graph_setitem(sbp, key):
    placement = gt.placement("cpu", [0, 1])
    rng = np.random.default_rng(7)
    ref, value = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    value = value[key]

    class SliceUpdate(nn.Module):
        def __init__(self):
            super().__init__()
            self.ref_grad = nn.Parameter(gt.zeros(8, 16))
            self.value_grad = nn.Parameter(gt.zeros(*np.shape(value)))

        def forward(self, x, y):
            x = (x + self.ref_grad).to_global(placement, sbp)
            y = y + self.value_grad
            x[key] = y
            return x

    m = SliceUpdate().to_global(placement, B)
    opt = gt.optim.SGD(m.parameters(), lr=0.25)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self, x, y):
            out = self.m(x, y)
            (out * out).sum().backward()
            return out

    g = Train()
    x = gt.tensor(ref).to_global(placement, B).to_global(sbp=sbp)
    y = gt.tensor(value).to_global(placement, B)
    out = g(x, y)
    stepped = m.ref_grad.numpy(), m.value_grad.numpy()
    again = g(x, y)  # a replay: the parameters moved by the first step's gradients
    eager = x.detach().clone()
    with gt.debug.count_collectives() as counted:
        eager[key] = y.detach()  # the op alone: a value already broadcast
    return out.numpy(), again.numpy(), out.sbp == (sbp,), stepped[0], stepped[1], dict(counted)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("key", KEYS, ids=["rows_cols", "step_int", "ellipsis"])
@pytest.mark.parametrize("sbp", [B, gt.sbp.split(0), gt.sbp.split(1), gt.sbp.partial_sum],
                         ids=["B", "S0", "S1", "P"])
def test_setitem_inside_a_graph_equals_numpy_on_two_ranks(sbp, key):
    rng = np.random.default_rng(7)
    ref, value = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    value = value[key]
    expected = ref.copy()
    expected[key] = value
    grad_x = 2 * expected  # d sum(out^2) / d out
    grad_ref = grad_x.copy()
    grad_ref[key] = 0
    grad_value = grad_x[key]
    second = ref - 0.25 * grad_ref  # SGD (lr 0.25) moved ref_grad by -grad_ref / 4, value_grad by -grad_value / 4
    second[key] = value - 0.25 * grad_value
    for rank, (out, again, kept, rg, vg, counted) in enumerate(run_ranks(_graph_setitem, 2, sbp, key)):
        np.testing.assert_allclose(out, expected, rtol=1e-6, err_msg=f"rank {rank}")
        np.testing.assert_allclose(again, second, rtol=1e-5, atol=1e-6, err_msg=f"rank {rank}")
        assert kept, rank
        np.testing.assert_allclose(rg, -0.25 * grad_ref, rtol=1e-6)
        np.testing.assert_allclose(vg, -0.25 * grad_value, rtol=1e-6)
        # a split or broadcast x: each rank writes its part, no collective; a partial x is summed first
        assert counted == ({"reduce_scatter": 1} if sbp == gt.sbp.partial_sum else {}), counted
