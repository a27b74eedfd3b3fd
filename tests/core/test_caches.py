"""Caches are bounded and gt.debug.clear_caches() empties them without changing a result: the
dispatcher's decisions (at most dispatch.CACHE_SIZE), the interned layouts (held weakly), the
backward seeds."""
import gc

import numpy as np

import globaltensor as gt
from globaltensor import dispatch
from globaltensor.tensor import Layout


def test_decisions_stay_bounded_and_are_made_again_alike(monkeypatch):
    monkeypatch.setattr(dispatch, "CACHE_SIZE", 16)
    pl = gt.placement("cpu", [0])
    first = None
    for n in range(1, 60):  # 59 shapes: 59 decisions for add, more than the cache holds
        x = gt.tensor(np.arange(float(n)), placement=pl, sbp=gt.sbp.broadcast)
        y = (x + x).numpy()
        np.testing.assert_array_equal(y, 2 * np.arange(float(n)))
        assert len(dispatch._cache) <= 16
        first = y if first is None else first
    x = gt.tensor(np.arange(1.0), placement=pl, sbp=gt.sbp.broadcast)  # its decision was dropped: decided again
    np.testing.assert_array_equal((x + x).numpy(), first)


def test_layouts_nobody_holds_are_dropped_and_identity_still_means_equality():
    pl = gt.placement("cpu", [0])
    x = gt.tensor(np.ones((7, 3)), placement=pl, sbp=gt.sbp.broadcast)
    kept = x.layout()
    gt.debug.clear_caches()  # the decisions held layouts in their keys
    before = len(Layout._interned)
    for n in range(100, 140):
        gt.tensor(np.ones(n), placement=pl, sbp=gt.sbp.broadcast).layout()
    gt.debug.clear_caches()
    gc.collect()
    assert len(Layout._interned) <= before + 2  # the 40 short-lived layouts went
    assert Layout.of(kept.shape, kept.dtype, kept.placement, kept.sbp) is kept


def test_clear_caches_changes_no_result():
    pl = gt.placement("cpu", [0])
    w = gt.tensor(np.arange(6.0).reshape(2, 3), placement=pl, sbp=gt.sbp.broadcast, requires_grad=True)
    (w * w).sum().backward()
    once = w.grad.numpy().copy()
    w.grad = None
    gt.debug.clear_caches()
    assert not dispatch._cache
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), once)
