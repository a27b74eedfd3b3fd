"""Issue 30 (s7): the server's native row kernels (kernels/ps_rows.cpp) give the bits of their numpy twins: new rows'
seeded uniform values (ps/init.py) and SGD on a batch of distinct rows (ps/tables.py); bad input raises."""
import numpy as np
import pytest

from globaltensor import _native
from globaltensor.ps import init as ps_init
from globaltensor.ps import tables
from globaltensor.ps.spec import Rule, SparseSpec

pytestmark = pytest.mark.skipif(not hasattr(_native, "ps_sgd_rows"), reason="an older native build")


@pytest.mark.parametrize("dim,lo,hi", [(16, -0.05, 0.05), (1, 0.0, 1.0), (7, -1.0, 2.5)])
def test_seeded_uniform_rows_equal_the_numpy_twin(dim, lo, hi, monkeypatch):
    spec = SparseSpec(name=f"t{dim}", dim=dim, init=("uniform", lo, hi), seed=5, padding_idx=3)
    ids = np.concatenate([np.random.default_rng(dim).integers(-2 ** 63, 2 ** 63 - 1, 999), [3]])
    native = ps_init.seeded_rows(spec, ids)
    monkeypatch.setattr(ps_init, "_UNIFORM_ROWS", None)
    twin = ps_init.seeded_rows(spec, ids)
    np.testing.assert_array_equal(native, twin)
    assert native.dtype == np.float32 and not native[-1].any() and (native[:-1] >= lo).all()
    assert (native[:-1] < hi).all() and native[:-1].std() > 0.2 * (hi - lo)  # U[lo, hi): std (hi - lo) / sqrt(12)


def _pushed(monkeypatch, native):
    if not native:
        monkeypatch.setattr(tables, "_SGD_ROWS", None)
    rng = np.random.default_rng(1)
    table = tables.SparseTable(SparseSpec(name="e", dim=5), Rule("sgd", 0.1))
    ids = rng.integers(0, 2000, 600)
    before, want = table.pull(ids).copy(), {}
    for _ in range(3):
        grads = rng.standard_normal((600, 5)).astype(np.float32)
        table.push(ids, grads)  # repeated ids: summed first
        for i, g in zip(ids, grads.astype(np.float64)):
            want[i] = want.get(i, 0.0) - 0.1 * g
    monkeypatch.undo()
    return before + np.array([want[i] for i in ids]), table.pull(ids)


def test_sgd_rows_equal_the_numpy_twin_and_float64_within_rounding(monkeypatch):
    want, native = _pushed(monkeypatch, True)
    _, twin = _pushed(monkeypatch, False)
    np.testing.assert_array_equal(native, twin)
    np.testing.assert_allclose(native, want, rtol=1e-5, atol=1e-6)  # float64 SGD on the summed gradients


def test_sgd_rows_refuse_bad_input():
    store = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="outside the store"):
        _native.ps_sgd_rows(store, np.array([4], np.int64), np.ones((1, 3), np.float32), 0.1)
    with pytest.raises(TypeError, match="float32"):
        _native.ps_sgd_rows(store.astype(np.float64), np.array([0], np.int64), np.ones((1, 3), np.float32), 0.1)
    with pytest.raises(ValueError, match="len\\(rows\\)"):
        _native.ps_sgd_rows(store, np.array([0, 1], np.int64), np.ones((1, 3), np.float32), 0.1)


def test_add_rows_equal_np_add_at_and_a_fused_runs_sum_equals_the_sorted_one(monkeypatch):
    from globaltensor.paddle.static import row_grads
    rng = np.random.default_rng(2)
    every = np.unique(rng.integers(0, 10 ** 6, 300))
    parts = [(every, rng.integers(0, every.size, 512), rng.standard_normal((512, 4)).astype(np.float32))
             for _ in range(3)]
    parts.append((every, np.arange(0, every.size, 2), np.ones((len(range(0, every.size, 2)), 4), np.float32)))
    out = np.zeros((every.size, 4), np.float32)
    twin = out.copy()
    for _, at, rows in parts:
        _native.ps_add_rows(out, at, rows)
        np.add.at(twin, at, rows)
    np.testing.assert_array_equal(out, twin)
    ids, sums = row_grads.summed(parts, 4, "float32")
    want_ids, want = tables.sum_rows_by_id(np.concatenate([every[at] for _, at, _ in parts]),
                                           np.concatenate([r for _, _, r in parts]).astype(np.float64))
    np.testing.assert_array_equal(ids, want_ids)  # only the ids some lookup touched, sorted
    np.testing.assert_allclose(sums, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="outside out"):
        _native.ps_add_rows(out, np.array([every.size], np.int64), np.ones((1, 4), np.float32))
