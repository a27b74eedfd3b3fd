"""Issue 30's speed paths: the native id -> row map against its numpy fallback, and a run's fused sparse lookups
(one unique, one pull, one gradient sum) against torch with ids repeated within and across lookups and padding."""
import copy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from static_fake import FakeServer  # noqa: E402

VOCAB, DIM, LOOKUPS, FEATS = 12, 4, 3, 2


def _index_runs(monkeypatch, native):
    from globaltensor.ps import _idindex
    if not native:
        monkeypatch.setattr(_idindex, "_LOOKUP", None)
        monkeypatch.setattr(_idindex, "_PLACE", None)
    rng = np.random.default_rng(3)
    index = _idindex.IdIndex()
    for n in (5, 900, 3000, 1):  # rehashes on the way; huge and negative ids
        batch = np.unique(np.concatenate([rng.integers(-2 ** 63, 2 ** 63 - 1, n, dtype=np.int64),
                                          rng.integers(0, 5000, n)]))
        index.insert(batch[index.lookup(batch) < 0])
    probe = np.concatenate([index.ids[::-1], rng.integers(-10 ** 6, 10 ** 6, 500), [np.iinfo(np.int64).min]])
    return index.ids.copy(), index.lookup(probe), probe


def test_native_index_equals_the_numpy_fallback(monkeypatch):
    from globaltensor import _native
    assert hasattr(_native, "ps_index_lookup"), "the extension lacks kernels/ps_index.cpp: rebuild it"
    ids_n, rows_n, probe = _index_runs(monkeypatch, native=True)
    ids_p, rows_p, _ = _index_runs(monkeypatch, native=False)
    np.testing.assert_array_equal(ids_n, ids_p)
    np.testing.assert_array_equal(rows_n, rows_p)
    found = rows_n >= 0
    np.testing.assert_array_equal(ids_n[rows_n[found]], probe[found])  # each hit names its own id
    assert found[:len(ids_n)].all()
    with pytest.raises(TypeError, match="int64"):
        _native.ps_index_lookup(np.zeros(16, np.int64), np.zeros(16, np.int64), 1, 60, np.zeros(2, np.int32),
                                np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="full"):  # bad input raises, never loops
        _native.ps_index_place(np.zeros(16, np.int64), np.arange(16, dtype=np.int64), 1, 60, np.array([5]),
                               np.array([16]))
    with pytest.raises(ValueError, match="power-of-two"):
        _native.ps_index_lookup(np.zeros(12, np.int64), np.zeros(12, np.int64), 1, 60, np.zeros(2, np.int64),
                                np.zeros(2, np.int64))


def _build(paddle):
    """LOOKUPS sparse_embedding calls on one table (padding VOCAB - 1) -> concat x -> fc -> mse."""
    from globaltensor.paddle.static import sparse
    main, startup = paddle.static.Program(), paddle.static.Program()
    paddle.seed(5)
    with paddle.static.program_guard(main, startup):
        slots = [paddle.static.data(f"s{i}", [None, 1], "int64") for i in range(LOOKUPS)]
        x = paddle.static.data("x", [None, FEATS], "float32")
        y = paddle.static.data("y", [None, 1], "float32")
        embs = [paddle.static.nn.sparse_embedding(s, [VOCAB, DIM], padding_idx=VOCAB - 1,
                                                  param_attr=paddle.ParamAttr(name="emb")) for s in slots]
        h = paddle.concat([paddle.reshape(e, [-1, DIM]) for e in embs] + [x], axis=1)
        pred = paddle.static.nn.fc(h, 1, weight_attr=paddle.ParamAttr(name="w"), bias_attr=paddle.ParamAttr(name="b"))
        loss = paddle.mean((pred - y) ** 2)
        paddle.optimizer.SGD(0.3).minimize(loss)
    assert sparse.fuse_lookups(main) == LOOKUPS - 1  # fleet's PS passes do this: one pull a run
    exe = paddle.static.Executor()
    exe.run(startup)
    return main, loss, exe


def _batches():
    rng = np.random.default_rng(9)
    out = []
    for _ in range(4):
        ids = rng.integers(0, 4, (6, LOOKUPS)).astype(np.int64)  # repeats within and across lookups
        ids[0, 1] = VOCAB - 1  # padding
        x = rng.random((6, FEATS), dtype=np.float32)
        out.append({**{f"s{i}": ids[:, i:i + 1] for i in range(LOOKUPS)}, "x": x, "y": x[:, :1] * 0.5})
    return out


@pytest.mark.timeout(60)
def test_fused_lookups_with_repeats_and_padding_equal_torch():
    import globaltensor.paddle as paddle
    from globaltensor.paddle.static import nn, ps
    from globaltensor.ps.spec import Rule
    from globaltensor.ps.tables import SparseTable
    saved = {k: copy.copy(v) for k, v in nn._counters.items()}
    paddle.enable_static()
    try:
        main, loss, exe = _build(paddle)
        job = ps.job_spec(main, main.minimized[0][1], "async", servers="127.0.0.1:1", trainers=1)
        server = FakeServer(job, ps.initial_values(main))
        client = server.client(0)
        init = ps.initial_values(main)
        ps.attach(main, client)
        batches = _batches()
        for feed in batches:
            exe.run(main, feed=feed, fetch_list=[loss])
        exe.close()
    finally:
        paddle.disable_static()
        nn._counters.clear()
        nn._counters.update(saved)
    assert client.calls.count("pull_sparse") == len(batches)  # one pull a run serves every lookup
    assert all(lookup.last[1] is None for _, lookup in main.sparse_lookups)  # each took its rows from the fused pull
    w, b = (torch.tensor(init[k], requires_grad=True) for k in ("w", "b"))
    table = torch.tensor(SparseTable(main.sparse_tables["emb"].spec(), Rule("sgd", 0.0)).pull(np.arange(VOCAB)),
                         requires_grad=True)
    with torch.no_grad():
        table[VOCAB - 1] = 0
    for feed in batches:
        h = torch.cat([table[torch.tensor(feed[f"s{i}"][:, 0])] for i in range(LOOKUPS)] + [torch.tensor(feed["x"])], 1)
        ((h @ w + b - torch.tensor(feed["y"])) ** 2).mean().backward()
        with torch.no_grad():
            for t in (w, b, table):
                t -= 0.3 * t.grad
                t.grad = None
            table[VOCAB - 1] = 0
    np.testing.assert_allclose(server.dense["w"], w.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(server.dense["b"], b.detach().numpy(), rtol=1e-5, atol=1e-6)
    seen = np.arange(4)
    np.testing.assert_allclose(server.sparse["emb"].pull(seen), table.detach().numpy()[seen], rtol=1e-5, atol=1e-6)
