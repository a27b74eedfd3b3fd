"""Grad mode and gradient sync are scoped to a thread, and autograd's sinks see each finished
leaf gradient once, in completion order."""
import threading

import numpy as np
import pytest

import globaltensor as gt
from globaltensor import autograd, grad_buckets


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10)
    return out[0]


def test_grad_mode_is_per_thread_as_in_pytorch():
    with gt.no_grad():
        assert not gt.is_grad_enabled()
        assert _in_thread(gt.is_grad_enabled)  # a new thread starts with grad mode on
        x = gt.tensor([1.0, 2.0], requires_grad=True)
        assert not (x * 2).requires_grad
        assert _in_thread(lambda: (x * 2).requires_grad)
    assert gt.is_grad_enabled()


def test_no_grad_is_a_decorator_and_set_grad_enabled_both_forms():
    @gt.no_grad()
    def f():
        return gt.is_grad_enabled()

    assert f() is False and gt.is_grad_enabled()
    with gt.set_grad_enabled(False):
        assert not gt.is_grad_enabled()
        with gt.enable_grad():
            assert gt.is_grad_enabled()
        assert not gt.is_grad_enabled()
    assert gt.is_grad_enabled()
    gt.set_grad_enabled(False)
    try:
        assert not gt.is_grad_enabled()
    finally:
        gt.set_grad_enabled(True)
    assert gt.is_grad_enabled()


def test_no_sync_is_scoped_to_its_block_and_thread():
    assert grad_buckets.syncing()
    with gt.distributed.no_sync():
        assert not grad_buckets.syncing()
        assert _in_thread(grad_buckets.syncing)
    assert grad_buckets.syncing()


def test_scope_comes_back_after_an_exception():
    with pytest.raises(ValueError):
        with gt.no_grad():
            raise ValueError
    assert gt.is_grad_enabled()


class _Watch:
    """A sink that records what it is offered and takes the gradients of `keep`."""

    def __init__(self, keep=()):
        self.keep, self.seen, self.ends = set(map(id, keep)), [], []

    def begin(self, run):
        self.leaves = list(run.leaves)
        return self

    def take(self, leaf, g):
        self.seen.append((leaf, None if g is None else g.numpy().copy()))
        return None if id(leaf) in self.keep else g

    def finish(self):
        self.ends.append("finish")

    def abandon(self):
        self.ends.append("abandon")


def test_sinks_see_each_leaf_once_in_completion_order_and_may_take_it():
    a = gt.tensor([1.0, 2.0], requires_grad=True)
    b = gt.tensor([3.0, 4.0], requires_grad=True)
    watch = _Watch(keep=[a])
    autograd.sinks.add(watch)
    ((b * 3).sum() + (a * b).sum()).backward()  # a finishes last: its use is the later one
    assert [leaf for leaf, _ in watch.seen] == watch.leaves and {id(x) for x in watch.leaves} == {id(a), id(b)}
    got = {id(leaf): g for leaf, g in watch.seen}
    np.testing.assert_array_equal(got[id(a)], [3.0, 4.0])
    np.testing.assert_array_equal(got[id(b)], [4.0, 5.0])
    assert a.grad is None  # taken by the sink
    np.testing.assert_array_equal(b.grad.numpy(), [4.0, 5.0])
    assert watch.ends == ["finish"]
    del watch  # held weakly: gone from the sinks with it
    assert all(not isinstance(s, _Watch) for s in autograd.sinks)


def test_a_sink_is_told_when_backward_raises():
    def boom(ctx, g):
        raise ZeroDivisionError("boom")

    x = gt.tensor([1.0], requires_grad=True)
    y = x * 2
    y._node.ctx.backward = boom
    watch = _Watch()
    autograd.sinks.add(watch)
    with pytest.raises(ZeroDivisionError):
        y.sum().backward()
    assert watch.ends == ["abandon"]


def test_default_seeds_are_fresh_and_gradients_accumulate_exactly():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0])
    s = gt.tensor(2.0, requires_grad=True)  # a scalar leaf as root: its .grad is its own array
    s.backward()
    s.grad.zero_()
    s.backward()
    assert s.grad.item() == 1.0
