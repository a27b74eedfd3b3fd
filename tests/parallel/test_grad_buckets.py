"""Gradient buckets: all_reduce_async, buckets started during backward (in one order on every
rank), and DataParallel with parameters that some ranks do not use."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist
from globaltensor import grad_buckets
from conftest import run_ranks

S0, B, P = gt.sbp.split(0), gt.sbp.broadcast, gt.sbp.partial_sum


def _async_then_blocking():
    rank, k = gt.env.get_rank(), gt.env.get_world_size()
    bufs = [dist.empty_shared((n,), np.float32) for n in (3, 70_001, 300_000)] + [np.empty(5, np.float64)]
    for i, b in enumerate(bufs):
        b[...] = np.arange(b.size) * (rank + 1) + i
    works = [dist.all_reduce_async(b) for b in bufs]
    y = np.full(4, rank + 1.0)
    dist.all_reduce(y)                    # waits for the queued ones first, on every rank
    before_wait = [bool(w.is_completed()) for w in works]
    for w in works:
        w.wait()
    ok = all(np.array_equal(b, sum(np.arange(b.size) * (r + 1) + i for r in range(k)).astype(b.dtype))
             for i, b in enumerate(bufs))
    try:                                   # a mismatch raises at wait() on every rank
        dist.all_reduce_async(np.zeros(rank + 1, np.float32)).wait()
        mismatch = None
    except dist.CollectiveError as exc:
        mismatch = str(exc)
    return ok, y.tolist(), before_wait, mismatch


@pytest.mark.parametrize("nprocs", [2, 3])
def test_all_reduce_async_keeps_one_order(nprocs):
    for ok, y, before_wait, mismatch in run_ranks(_async_then_blocking, nprocs):
        assert ok and y == [nprocs * (nprocs + 1) / 2] * 4
        assert all(before_wait)
        assert mismatch is not None and "different sizes" in mismatch


def _async_then_all_to_all():
    """Rank 1 calls all_to_all while its worker still holds queued all_reduces (rank 0 is late
    to them); the count rows must land where every rank reads them."""
    import time
    rank = gt.env.get_rank()
    dist.all_reduce_async(np.ones(2)).wait()              # the worker threads exist
    if rank == 0:
        time.sleep(0.3)
    works = [dist.all_reduce_async(np.full(n, rank + 1.0)) for n in (8, 4)]
    if rank == 0:                                         # rank 0's queue is empty, rank 1's is not:
        for w in works:                                   # its worker waits in the first all_reduce
            w.wait()                                      # for rank 0, the second is queued
    else:
        time.sleep(0.1)
    send = np.arange(6.0) + 10 * rank
    sizes = [1, 5] if rank == 0 else [3, 3]             # uneven on purpose
    got = dist.all_to_all(send, sizes, recv_sizes=[1, 3] if rank == 0 else [5, 3])
    for w in works:
        w.wait()
    return got.tolist()


def test_all_to_all_after_queued_async_ops_agrees_on_every_rank():
    for _ in range(3):
        r0, r1 = run_ranks(_async_then_all_to_all, 2)
        assert r0 == [0.0, 10.0, 11.0, 12.0] and r1 == [1.0, 2.0, 3.0, 4.0, 5.0, 13.0, 14.0, 15.0]


def test_all_reduce_async_rejects_bad_input_before_communicating():
    with pytest.raises(ValueError, match="C-contiguous"):
        dist.all_reduce_async(np.zeros((4, 4))[:, 0])
    with pytest.raises(TypeError, match="numpy array"):
        dist.all_reduce_async([1.0])


def test_buckets_start_in_plan_order_once_complete():
    a, b, c, d = (gt.zeros(1) for _ in range(4))
    started, landed = [], []
    buckets = grad_buckets.Buckets([[a, b], [c], [d]], lambda bucket, grads, flat, now: started.append(len(bucket))
                                   or dict(grads), landed.append)
    buckets.ready(c, "gc")          # bucket 1 is complete, but bucket 0 starts first
    assert started == []
    buckets.ready(a, "ga")
    buckets.ready(b, None)
    assert started == [2, 1]
    buckets.finish()                # bucket 2 never got its gradient: it starts at the end
    assert started == [2, 1, 1] and landed == [{id(a): "ga", id(b): None}, {id(c): "gc"}, {}]
    assert grad_buckets.pack("abcd", [4, 4, 8, 1], lambda i: 8 if i else 4) == [["a"], ["b"], ["c"], ["d"]]
    assert grad_buckets.pack("abcd", [4, 4, 8, 1], lambda i: 9) == [["a", "b"], ["c", "d"]]


def _probe(events):
    """Identity whose backward logs when it runs (it sits between the two layers)."""
    from globaltensor.dispatch import apply
    from globaltensor import registry
    from globaltensor.registry import rules
    if "probe_identity" not in registry.REGISTRY:
        def backward(ctx, grad):
            events.append("probe backward")
            return grad
        registry.op("probe_identity", rules.elementwise(), backward)(lambda x: x.copy())
    return lambda x: apply("probe_identity", [x])


class _Log:
    def __init__(self, events):
        self.events = events

    def add(self, kind, nbytes, group=None):
        self.events.append(kind)


def _overlap_events():
    from globaltensor.distributed import collectives
    events = []
    probe = _probe(events)
    placement = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    net1, net2 = nn.Linear(16, 32).to_global(placement, B), nn.Linear(32, 8).to_global(placement, B)
    x = gt.randn(8, 16, placement=placement, sbp=S0)
    gt.distributed.set_bucket_size((32 * 8 + 8) * 4 / 2**20)  # net2's parameters fill one bucket
    collectives._observers.append(_Log(events))
    try:
        net2(probe(net1(x)).relu()).sum().backward()
    finally:
        collectives._observers.pop()
        gt.distributed.set_bucket_size(25)
    return events, net1.weight.grad.numpy(), net1.weight.grad.sbp


def test_bucket_all_reduce_starts_during_backward():
    events, grad, sbp = run_ranks(_overlap_events, 2)[0]
    # net2's bucket is reduced while backward goes on to the probe and net1
    assert events == ["all_reduce", "probe backward", "all_reduce", "all_reduce"]  # net1: weight, bias
    assert sbp == (B,)
    gt.manual_seed(0)
    net1, net2 = nn.Linear(16, 32), nn.Linear(32, 8)
    x = gt.randn(8, 16)
    net2(net1(x).relu()).sum().backward()
    np.testing.assert_allclose(grad, net1.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.left, self.right = nn.Linear(6, 5), nn.Linear(5, 3), nn.Linear(5, 3)

    def forward(self, x, head):
        h = self.body(x).relu()
        return (self.left if head == 0 else self.right)(h)


def _batch(rank):
    rng = np.random.default_rng(rank)
    return gt.tensor(rng.standard_normal((4, 6))), gt.tensor(rng.standard_normal((4, 3)))


def _unused_on_some_ranks(find_unused):
    rank = gt.env.get_rank()
    gt.manual_seed(1)
    model = dist.DataParallel(TwoHeads(), comm_buffer_size=1e-6, last_comm_buffer_size=1e-6,
                              find_unused_parameters=find_unused)
    x, y = _batch(rank)
    with gt.debug.count_collectives() as c:
        nn.MSELoss()(model(x, head=rank % 2), y).backward()   # rank 0 leaves `right` unused, rank 1 `left`
    return [None if p.grad is None else p.grad.numpy() for p in model.parameters()], dict(c)


@pytest.mark.parametrize("find_unused", [False, True])
def test_data_parallel_parameters_unused_on_some_ranks(find_unused):
    results = run_ranks(_unused_on_some_ranks, 2, find_unused)
    gt.manual_seed(1)
    model = TwoHeads()
    loss = sum(nn.MSELoss()(model(*_batch(r)[:1], head=r % 2), _batch(r)[1]) for r in range(2)) * 0.5
    loss.backward()                                          # the one-process equivalent: the mean
    for grads, counts in results:
        assert counts["all_reduce"] == 6                      # one bucket per parameter (tiny buckets)
        for got, p in zip(grads, model.parameters()):
            np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-5, atol=1e-6)


def _address(a):
    """Where an array's data starts: numpy, cupy, or simulated_cupy (numpy behind the wall)."""
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    ptr = getattr(getattr(a, "data", None), "ptr", None)
    return ptr if ptr is not None else a._host.ctypes.data


def _inside(a, flat):
    return _address(flat) <= _address(a) < _address(flat) + flat.nbytes


def _in_bucket_steps(kind):
    """Three data-parallel steps; which gradients live in their bucket, and what a held one keeps."""
    placement = gt.placement(kind, [0, 1])
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to_global(placement, B)
    x = gt.randn(8, 16, placement=placement, sbp=S0)
    y = gt.randn(8, 8, placement=placement, sbp=S0)
    report = {}

    def step():
        nn.MSELoss()(model(x), y).backward()
        return [p.grad._local for p in model.parameters()]   # this rank's pieces

    first = step()
    flats = list(grad_buckets._flat_cache.values())
    report["in_bucket"] = [any(_inside(g, f.flat) for f in flats) for g in first]
    bases = [_address(g) for g in first]
    held = model[0].weight.grad            # the user keeps a gradient: the next step may not write over it
    held_values = held._local.copy()
    model.zero_grad()
    del first, flats
    second = step()
    report["held_kept"] = bool((held._local == held_values).all())
    report["second_moved"] = [_address(g) != b for g, b in zip(second, bases)]
    del held, second
    model.zero_grad()
    third = [_address(g) for g in step()]
    model.zero_grad()
    report["reused"] = third == [_address(g) for g in step()]   # nothing held: the same buffers again
    report["grad"] = model[0].weight.grad.numpy()
    return report


@pytest.mark.parametrize("kind, env", [("cpu", None), ("cuda", {"GLOBALTENSOR_CUDA_SIMULATE": "1"}),
                                       pytest.param("cuda", None, marks=pytest.mark.cuda, id="cuda-gpu")])
def test_gradients_are_written_into_their_bucket(kind, env):
    report = run_ranks(_in_bucket_steps, 2, kind, env=env)[0]
    # on cpu both weights come from a matmul that writes into the bucket; the rest is copied in
    assert report["in_bucket"] == [True, True, True, True]
    assert report["held_kept"] and all(report["second_moved"])
    assert report["reused"]
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    x = gt.randn(8, 16)
    nn.MSELoss()(model(x), gt.randn(8, 8)).backward()
    np.testing.assert_allclose(report["grad"], model[0].weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def _tied_and_grad_after_backward(kind):
    placement = gt.placement(kind, [0, 1])
    gt.manual_seed(0)
    w = gt.randn(6, 6, placement=placement, sbp=B, requires_grad=True)
    x = gt.randn(4, 6, placement=placement, sbp=S0)
    y = gt.matmul(gt.matmul(x, w), w)                # one leaf used twice: its two parts are added
    y.sum().backward()
    tied = w.grad.numpy()
    bucket = w.grad._local
    before = bucket.copy()
    z = gt.matmul(x, w).sum()
    (gw,) = gt.autograd.grad(z, [w])                  # grad() never writes into a bucket
    return tied, bool((bucket == before).all()), gw.numpy()


@pytest.mark.parametrize("kind, env", [("cpu", None), ("cuda", {"GLOBALTENSOR_CUDA_SIMULATE": "1"}),
                                       pytest.param("cuda", None, marks=pytest.mark.cuda, id="cuda-gpu")])
def test_tied_weights_and_grad_after_backward(kind, env):
    tied, untouched, gw = run_ranks(_tied_and_grad_after_backward, 2, kind, env=env)[0]
    gt.manual_seed(0)
    w = gt.randn(6, 6, requires_grad=True)
    x = gt.randn(4, 6)
    gt.matmul(gt.matmul(x, w), w).sum().backward()
    np.testing.assert_allclose(tied, w.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert untouched
    np.testing.assert_allclose(gw, x.numpy().sum(0)[:, None] * np.ones((1, 6)), rtol=1e-5, atol=1e-5)


def test_matmul_writes_into_out_only_when_it_fits():
    from globaltensor.dispatch import apply
    a, b = gt.tensor(np.arange(6.0).reshape(2, 3)), gt.tensor(np.ones((3, 4)))
    out = np.empty((2, 4))
    r = apply("matmul", [a, b], out=out)
    assert r._local is out and np.array_equal(out, np.arange(6.0).reshape(2, 3) @ np.ones((3, 4)))
    for wrong in (np.empty((4, 2)), np.empty((2, 4), np.float32)):   # other shape or dtype: a fresh array
        r = apply("matmul", [a, b], out=wrong)
        assert r._local is not wrong and np.array_equal(r.numpy(), out)
    r = apply("relu", [a], out=np.empty((2, 3)))      # an op without out= ignores the hint
    assert np.array_equal(r.numpy(), np.maximum(a.numpy(), 0))


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_buckets_run_on_the_caller_once_nothing_is_left_to_overlap(monkeypatch, overlap):
    """A bucket goes to the worker thread (now=False) only while backward still has gradients to
    come for later buckets and the CPUs allow overlap; else it runs on the calling thread."""
    monkeypatch.setenv("GLOBALTENSOR_BUCKET_OVERLAP", overlap)
    a, b, c, d, e = (gt.zeros(1) for _ in range(5))
    nows = []
    buckets = grad_buckets.Buckets([[a], [b], [c, d], [e]], lambda bucket, grads, flat, now: nows.append(now),
                                   lambda pending: None)
    buckets.ready(a, "ga")          # b, c, d, e still to come
    buckets.ready(c, "gc")
    buckets.ready(b, "gb")          # d, e still to come
    buckets.ready(e, "ge")
    buckets.ready(d, "gd")          # the rest is full: nothing of backward left to overlap it with
    assert nows == ([False, False, True, True] if overlap == "1" else [True] * 4)
    nows.clear()
    buckets = grad_buckets.Buckets([[a], [b], [c]], lambda bucket, grads, flat, now: nows.append(now),
                                   lambda pending: None)
    buckets.ready(a, "ga")
    buckets.finish()                # backward is over: b and c (never filled) run here
    assert nows == [overlap == "0", True, True]
