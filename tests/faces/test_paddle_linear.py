"""Paddle's Linear and F.linear as one primitive (linear_in_out, weight [in, out]): values and
gradients against torch on full values, 1 process and 2 ranks for each SBP row, uneven shapes;
the plan's collectives counted."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
import globaltensor.paddle as paddle
from conftest import run_ranks


def _torch_ref(x, w, b, gy):
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y = tx @ tw + tb
    y.backward(torch.tensor(gy))
    return y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()


def _data(seed, rows=5, k=3, n=7, lead=()):
    r = np.random.default_rng(seed)
    return (r.standard_normal(lead + (rows, k)), r.standard_normal((k, n)), r.standard_normal(n),
            r.standard_normal(lead + (rows, n)))


@pytest.mark.parametrize("lead", [(), (2,)])
def test_one_process_matches_torch(lead):
    x, w, b, gy = _data(0, lead=lead)
    tx, tw, tb = (gt.tensor(a, requires_grad=True) for a in (x, w, b))
    y = paddle.nn.functional.linear(tx, tw, tb)
    assert y._node.name == "linear_in_out"
    y.backward(gt.tensor(gy))
    ry, rx, rw, rb = _torch_ref(x, w, b, gy)
    for ours, ref in ((y, ry), (tx.grad, rx), (tw.grad, rw), (tb.grad, rb)):
        np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_layer_is_one_primitive_and_trains_as_matmul_add():
    paddle.seed(3)
    layer = paddle.nn.Linear(4, 6)
    x = paddle.randn([5, 4])
    y = layer(x)
    assert y._node.name == "linear_in_out"
    ref = x.numpy() @ layer.weight.numpy() + layer.bias.numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-6, atol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), x.numpy().T @ np.ones((5, 6), np.float32), rtol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.numpy(), np.full(6, 5.0), rtol=1e-6)


def test_complex_and_mixed_dtypes_take_matmul_add():
    x = gt.tensor(np.ones((2, 3)) + 1j, requires_grad=True)
    w = gt.tensor(np.ones((3, 2)) * (1 - 1j), requires_grad=True)
    y = paddle.nn.functional.linear(x, w)
    assert y._node.name == "matmul"


# (x sbp, w sbp, b sbp, out sbp, collectives in forward) on 2 ranks
ROWS = [
    ("S(0)", "B", "B", "S(0)"),      # data parallel
    ("B", "S(1)", "S(0)", "S(1)"),   # column parallel
    ("S(1)", "S(0)", "P", "P"),      # row parallel
    ("B", "B", "B", "B"),
]


def _sbp(text):
    return {"B": gt.sbp.broadcast, "P": gt.sbp.partial_sum, "S(0)": gt.sbp.split(0), "S(1)": gt.sbp.split(1)}[text]


def _rank_rows():
    x, w, b, gy = _data(1, rows=5, k=3, n=7)  # uneven over 2 ranks: 5 rows, 3 in, 7 out
    ry, rx, rw, rb = _torch_ref(x, w, b, gy)
    pl = gt.placement("cpu", ranks=[0, 1])
    for xs, ws, bs, ys in ROWS:
        def place(a, s):
            if s == "P":  # a partial value: rank 0 holds it all, rank 1 zeros
                local = a if gt.env.get_rank() == 0 else np.zeros_like(a)
                return gt.tensor(local).to_global(pl, gt.sbp.partial_sum)
            return gt.tensor(a).to_global(pl, gt.sbp.broadcast).to_global(pl, _sbp(s))
        tx, tw, tb = (place(a, s).detach().requires_grad_() for a, s in ((x, xs), (w, ws), (b, bs)))
        with gt.debug.count_collectives() as counted:
            y = paddle.nn.functional.linear(tx, tw, tb)
        assert counted.total == 0, (xs, ws, bs, counted)  # each row fits as given: no boxing
        assert y.sbp == (_sbp(ys),), (xs, ws, bs, y.sbp)
        y.backward(place(gy, "B").to_global(pl, y.sbp))
        np.testing.assert_allclose(y.to_global(pl, gt.sbp.broadcast).to_local().numpy(), ry, rtol=1e-12)
        for t, ref in ((tx, rx), (tw, rw), (tb, rb)):
            got = t.grad.to_global(pl, gt.sbp.broadcast).to_local().numpy()
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=f"{xs} {ws} {bs}")


def test_two_ranks_every_row_matches_torch():
    run_ranks(_rank_rows, 2)
