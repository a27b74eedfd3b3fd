"""The planning passes of graph mode, one by one (globaltensor/graph/passes): what each changes in
a captured program, the collectives a replay runs (counted), and values against numpy."""
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum


def _program(traced):
    return traced._cache()["last"]


def _fused():
    """P -> B followed by B -> S(0): one reduce_scatter; S(0) -> B -> S(0): nothing."""
    placement = gt.placement("cpu", [0, 1])
    rank = gt.env.get_rank()
    piece = np.arange(15, dtype=np.float32).reshape(5, 3) * (rank + 1)
    partial = gt.tensor(piece).to_global(placement, P)
    split = gt.tensor(np.arange(10, dtype=np.float32).reshape(5, 2), placement=placement, sbp=S0)

    @gt.jit.trace
    def step(p, s):
        a = p.to_global(sbp=B).to_global(sbp=S0)
        b = s.to_global(sbp=B).to_global(sbp=S0)
        return a * 2, b + 1

    step(partial, split)
    with gt.debug.count_collectives() as counted:
        a, b = step(partial, split)
    program = _program(step)
    return (program.report["fuse_boxing"], program.collectives(), dict(counted), a.numpy(), b.numpy(),
            program.count("box"))


def test_boxing_fusion_makes_one_reduce_scatter_and_drops_conversions_that_cancel():
    for report, collectives, counted, a, b, boxes in run_ranks(_fused, 2):
        assert report == {"fused": 1, "cancelled": 1, "shared": 0}
        assert collectives == ["reduce_scatter"] and boxes == 1
        assert counted.get("reduce_scatter") == 1 and "all_reduce" not in counted and "all_gather" not in counted
        whole = np.arange(15, dtype=np.float32).reshape(5, 3) * 3
        np.testing.assert_array_equal(a, whole * 2)
        np.testing.assert_array_equal(b, np.arange(10, dtype=np.float32).reshape(5, 2) + 1)


def _buckets(bucket_mb):
    placement = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to_global(placement, B)
    gt.distributed.set_bucket_size(bucket_mb)

    @gt.jit.trace
    def grads(x, y):
        nn.functional.mse_loss(model(x), y).backward()

    x, y = gt.randn(8, 16, placement=placement, sbp=S0), gt.randn(8, 8, placement=placement, sbp=S0)
    grads(x, y)
    model.zero_grad()
    with gt.debug.count_collectives() as counted:
        grads(x, y)
    program = _program(grads)
    gt.distributed.set_bucket_size(25)
    positions = [i for i, ins in enumerate(program.instrs) if ins.kind in ("start", "wait")]
    return program.report["bucket_grads"], dict(counted), [program.instrs[i].kind for i in positions], \
        [p.grad.numpy() for p in model.parameters()]


def test_gradient_all_reduces_are_bucketed_and_start_early():
    for report, counted, kinds, _ in run_ranks(_buckets, 2, 25):
        assert report == {"buckets": 1, "all_reduces": 4, "written_in_place": 2}  # the weights' matmuls
        assert counted == {"all_reduce": 1}
        assert kinds == ["start", "wait"]
    for report, counted, kinds, _ in run_ranks(_buckets, 2, 32 * 16 * 4 / 2**20):
        assert report["buckets"] > 1 and counted == {"all_reduce": report["buckets"]}
        assert kinds[0] == "start" and kinds[1] == "start"  # the second bucket starts before the first lands


def _reference_grads():
    """The same gradients in eager mode (the reference: tests/test_grad_buckets checks eager against numpy)."""
    placement = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to_global(placement, B)
    x, y = gt.randn(8, 16, placement=placement, sbp=S0), gt.randn(8, 8, placement=placement, sbp=S0)
    nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.numpy() for p in model.parameters()]


def test_bucketed_gradients_equal_eager_bitwise():
    want = run_ranks(_reference_grads, 2)[0]
    got = run_ranks(_buckets, 2, 25)[0][3]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(want, got))


def _kept_gradients():
    """Each replay's bucketed gradients, kept by the caller (grad set to None, the tensor held)."""
    mesh = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    lin = nn.Linear(64, 128).to_global(mesh, gt.sbp.broadcast)  # 32 KiB and more: shared-memory buffers

    def step(x):
        loss = lin(x).sum()
        loss.backward()
        return loss

    traced = gt.jit.trace(step)
    kept = []
    for i in range(4):
        traced(gt.ones(16, 64, placement=mesh, sbp=gt.sbp.split(0)) * (i + 1))
        kept.append((lin.weight.grad, lin.weight.grad.numpy().copy()))
        lin.weight.grad = lin.bias.grad = None
    return [np.array_equal(grad.numpy(), value) for grad, value in kept]


def test_a_gradient_kept_from_a_replay_is_not_overwritten_by_the_next():
    """The bucket's buffer is a new one while a view handed out by the last replay is alive."""
    for same in run_ranks(_kept_gradients, 2):
        assert same == [True] * 4


def test_dead_ops_are_removed_but_draws_stay():
    @gt.jit.trace
    def f(x):
        unused = x.exp() * 3  # noqa: F841 - nothing uses it
        gt.rand(2)  # a draw: kept, so the generator advances as in eager mode
        return x + 1

    x = gt.ones(2)
    f(x)
    program = _program(f)
    assert program.report["dead_ops"]["removed"] >= 2
    assert program.count("random") == 1 and program.count(name="exp") == 0
    gt.manual_seed(5)
    f(x)
    after_replay = gt.rand(3).numpy()
    gt.manual_seed(5)
    gt.rand(2)
    np.testing.assert_array_equal(gt.rand(3).numpy(), after_replay)


def test_liveness_reuses_dead_buffers_and_reports_the_peak():
    @gt.jit.trace
    def chain(a, b):
        for _ in range(50):
            a = a + b
        return a * 2

    a, b = gt.tensor(np.ones((64, 64), np.float32)), gt.tensor(np.full((64, 64), 0.5, np.float32))
    chain(a, b)
    program = _program(chain)
    report = program.report["liveness"]
    assert report["reused"] >= 49
    assert report["peak_bytes"] <= report["peak_bytes_without_reuse"]
    assert report["peak_bytes"] * 10 < report["bytes_without_frees"]  # 3 arrays live at most, of 52
    assert "in the buffer of" in program.text(rank=0)
    np.testing.assert_array_equal(chain(a, b).numpy(), (np.ones((64, 64), np.float32) + 25) * 2)
    np.testing.assert_array_equal(a.numpy(), np.ones((64, 64), np.float32))  # inputs are never written


def _shared():
    """One partial value needed whole by two ops: converted once."""
    placement = gt.placement("cpu", [0, 1])
    rank = gt.env.get_rank()
    partial = gt.tensor(np.full((2, 2), rank + 1.0, np.float32)).to_global(placement, P)
    w = gt.tensor(np.eye(2, dtype=np.float32), placement=placement, sbp=B)

    @gt.jit.trace
    def step(p, w):
        return p.exp() @ w, p.sin()  # exp and sin each need p summed: converted once

    step(partial, w)
    with gt.debug.count_collectives() as counted:
        a, b = step(partial, w)
    program = _program(step)
    return program.report["fuse_boxing"]["shared"], dict(counted), a.numpy(), b.numpy()


def test_a_value_converted_twice_the_same_way_is_converted_once():
    for shared, counted, a, b in run_ranks(_shared, 2):
        assert shared == 1 and sum(counted.values()) == 1  # one reduce_scatter serves both
        np.testing.assert_allclose(a, np.exp(np.full((2, 2), 3.0)), rtol=1e-6)
        np.testing.assert_allclose(b, np.sin(np.full((2, 2), 3.0)), rtol=1e-6)
