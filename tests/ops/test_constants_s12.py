"""Ops whose kernels build constants from shapes (pooling indices, resize weights, an einsum's
diagonal mask, a grid, a DFT matrix, an RNN's first state) run no collective on broadcast inputs:
the constants are taken on trust (ops/_front.py `constant`), not checked like user data with an
all_gather per call. Values and gradients against torch, forward and backward, on 2 ranks."""
import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks

F = gt.nn.functional


def _x(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# name -> (input shapes, our function, torch's)
CASES = {
    "adaptive_avg_pool2d": ([(2, 3, 4, 6)], lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
                            lambda t, x: t.nn.functional.adaptive_avg_pool2d(x, (2, 3))),
    "adaptive_avg_pool2d uneven": ([(2, 3, 5, 7)], lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
                                   lambda t, x: t.nn.functional.adaptive_avg_pool2d(x, (2, 3))),
    "max_pool2d padded": ([(2, 3, 5, 5)], lambda x: F.max_pool2d(x, 3, 2, 1),
                          lambda t, x: t.nn.functional.max_pool2d(x, 3, 2, 1)),
    "max_pool1d dilated": ([(2, 3, 9)], lambda x: F.max_pool1d(x, 2, 2, 1, 2),
                           lambda t, x: t.nn.functional.max_pool1d(x, 2, 2, 1, 2)),
    "interpolate bilinear": ([(2, 3, 4, 5)], lambda x: F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=False),
                             lambda t, x: t.nn.functional.interpolate(x, size=(7, 3), mode="bilinear",
                                                                      align_corners=False)),
    "pad reflect": ([(2, 3, 6)], lambda x: F.pad(x, (2, 3), mode="reflect"),
                    lambda t, x: t.nn.functional.pad(x, (2, 3), mode="reflect")),
    "einsum diagonal": ([(4, 4, 3)], lambda x: gt.einsum("iij->ij", x), lambda t, x: t.einsum("iij->ij", x)),
    "affine_grid": ([(2, 2, 3)], lambda th: F.affine_grid(th, [2, 3, 4, 5], align_corners=False),
                    lambda t, th: t.nn.functional.affine_grid(th, [2, 3, 4, 5], align_corners=False)),
}


def _ours(names):
    mesh = gt.placement("cpu", [0, 1])
    out = {}
    for i, name in enumerate(names):
        shapes, fn, _ = CASES[name]
        xs = [gt.tensor(_x(s, i + 10 * j)).to_global(mesh, gt.sbp.broadcast).requires_grad_()
              for j, s in enumerate(shapes)]
        for _ in range(2):  # the first call decides; the second is the cached path a training loop runs
            for x in xs:
                x.grad = None
            with gt.debug.count_collectives() as counted:
                y = fn(*xs)
                (y * y).sum().backward()
        out[name] = (dict(counted), y.to_local().numpy(), [x.grad.to_local().numpy() for x in xs])
    return out


def test_shape_constants_run_no_collective_and_match_torch():
    torch = pytest.importorskip("torch")
    names = list(CASES)
    found = run_ranks(_ours, 2, names, timeout=120)
    for rank_out in found:
        for i, name in enumerate(names):
            counted, y, grads = rank_out[name]
            assert counted == {}, (name, counted)
            shapes, _, ref = CASES[name]
            ts = [torch.tensor(_x(s, i + 10 * j), requires_grad=True) for j, s in enumerate(shapes)]
            ty = ref(torch, *ts)
            (ty * ty).sum().backward()
            np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
            for g, t in zip(grads, ts):
                np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def _user_data_still_checked():
    mesh = gt.placement("cpu", [0, 1])
    x = gt.tensor(np.ones((2, 3), np.float32)).to_global(mesh, gt.sbp.broadcast)
    try:
        x + np.full((2, 3), float(gt.env.get_rank()), np.float32)  # user data that differs between ranks
    except ValueError as exc:
        return str(exc)
    return None


def test_user_arrays_next_to_a_global_tensor_are_still_checked():
    for message in run_ranks(_user_data_still_checked, 2, timeout=60):
        assert message is not None and "same on every rank" in message


def _ctc(differ):
    mesh = gt.placement("cpu", [0, 1])
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((12, 3, 5)).astype(np.float32)
    x = gt.tensor(logits).to_global(mesh, gt.sbp.broadcast).requires_grad_()
    targets = np.array([[1, 2, 2, 3], [4, 1, 0, 0], [2, 3, 1, 1]], np.int64)
    if differ:
        targets[0, 0] += gt.env.get_rank()
    with gt.debug.count_collectives() as counted:
        try:
            loss = gt.nn.functional.ctc_loss(x.log_softmax(2), targets, [12, 10, 9], [4, 2, 3])
        except ValueError as exc:
            return str(exc)
    loss.backward()
    return dict(counted), float(loss.to_local().numpy()), x.grad.to_local().numpy()


def test_ctc_loss_checks_its_host_data_once_not_per_time_step():
    torch = pytest.importorskip("torch")
    for counted, value, grad in run_ranks(_ctc, 2, False, timeout=60):
        assert counted == {"all_gather": 1}, counted  # 12 time steps: 19 all_gathers before s12
        tx = torch.tensor(np.random.default_rng(0).standard_normal((12, 3, 5)).astype(np.float32), requires_grad=True)
        want = torch.nn.functional.ctc_loss(tx.log_softmax(2), torch.tensor([[1, 2, 2, 3], [4, 1, 0, 0], [2, 3, 1, 1]]),
                                            [12, 10, 9], [4, 2, 3])
        want.backward()
        np.testing.assert_allclose(value, want.item(), rtol=1e-5)
        np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    for message in run_ranks(_ctc, 2, True, timeout=60):
        assert message.startswith("ctc_loss (targets and lengths): the data must be the same on every rank"), message


def _pipeline_join():
    from globaltensor.pipeline.microbatch import Cut
    mesh = gt.placement("cpu", [0, 1])
    whole = np.arange(24, dtype=np.float32).reshape(8, 3)
    x = gt.tensor(whole).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    cut = Cut(x, 2)  # micro-batch j: chunk j of each rank's rows, so rows 0-1 and 4-5 first
    outs = [cut.take(x, j).to_global(sbp=gt.sbp.broadcast) for j in range(2)]  # not laid out as cut: rows reordered
    with gt.debug.count_collectives() as counted:
        joined = cut.join(outs)
    return dict(counted), joined.to_local().numpy()


def test_pipeline_join_puts_rows_back_without_a_collective():
    for counted, joined in run_ranks(_pipeline_join, 2, timeout=60):
        assert counted == {}, counted  # the reorder index is the micro-batches' order: no check of it
        np.testing.assert_array_equal(joined, np.arange(24, dtype=np.float32).reshape(8, 3))
