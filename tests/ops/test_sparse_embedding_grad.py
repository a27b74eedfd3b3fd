"""Sparse embedding gradients (sparse=True / is_sparse=True): a RowGrad of the looked-up rows, and the
optimizers' row updates, against PyTorch's sparse embedding, real Paddle's, and our dense path."""
import contextlib
import copy

import numpy as np
import pytest

import globaltensor as gt

V, D = 40, 4


def _data(seed=0, steps=3):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal((V, D)).astype(np.float32)
    ids = [rng.integers(0, V // 2, (6, 3)) for _ in range(steps)]  # repeats in a batch, rows never touched
    return w0, ids


def _train_ours(sparse, make_opt, padding_idx=None, shared=False):
    w0, ids = _data()
    emb = gt.nn.Embedding(V, D, padding_idx=padding_idx, sparse=sparse, _weight=gt.tensor(w0))
    opt = make_opt(emb.parameters())
    grads = []
    for i in ids:
        opt.zero_grad()
        out = emb(gt.tensor(i))
        loss = (out ** 2).sum() + ((emb(gt.tensor(i[:, :1] + 1)) * 3).sum() if shared else 0)
        loss.backward()
        grads.append(emb.weight.grad)
        opt.step()
    return emb.weight.numpy(), grads


def _train_torch(sparse, padding_idx=None, shared=False):
    import torch
    w0, ids = _data()
    emb = torch.nn.Embedding(V, D, padding_idx=padding_idx, sparse=sparse, _weight=torch.tensor(w0))
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    grads = []
    for i in ids:
        opt.zero_grad()
        loss = (emb(torch.tensor(i)) ** 2).sum() + ((emb(torch.tensor(i[:, :1] + 1)) * 3).sum() if shared else 0)
        loss.backward()
        grads.append(emb.weight.grad.to_dense().numpy().copy())
        opt.step()
    return emb.weight.detach().numpy(), grads


@pytest.mark.parametrize("padding_idx,shared", [(None, False), (3, False), (None, True)])
def test_sgd_matches_torch_sparse_and_our_dense(padding_idx, shared):
    sgd = lambda ps: gt.optim.SGD(ps, lr=0.1)  # noqa: E731
    sparse, row_grads = _train_ours(True, sgd, padding_idx, shared)
    dense, dense_grads = _train_ours(False, sgd, padding_idx, shared)
    ref, ref_grads = _train_torch(True, padding_idx, shared)
    assert all(g.is_sparse and tuple(g.shape) == (V, D) for g in row_grads)
    for g, d, r in zip(row_grads, dense_grads, ref_grads):
        np.testing.assert_array_equal(g.to_dense().numpy(), d.numpy())
        np.testing.assert_allclose(g.to_dense().numpy(), r, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(sparse, dense)  # the row update is the dense one, bit for bit
    np.testing.assert_allclose(sparse, ref, rtol=1e-6, atol=1e-6)  # torch rounds its add with alpha by FMA


def test_unsupported_optimizers_refuse_clearly():
    for make in (lambda ps: gt.optim.Adam(ps, lr=0.1), lambda ps: gt.optim.SGD(ps, lr=0.1, momentum=0.9),
                 lambda ps: gt.optim.SGD(ps, lr=0.1, weight_decay=0.1)):
        with pytest.raises(RuntimeError, match="sparse gradients"):
            _train_ours(True, make)


def test_accumulation_and_zeroing():
    w0, ids = _data()
    emb = gt.nn.Embedding(V, D, sparse=True, _weight=gt.tensor(w0))
    (emb(gt.tensor(ids[0])) ** 2).sum().backward()
    (emb(gt.tensor(ids[1])) ** 2).sum().backward()  # accumulates: rows concatenate
    dense = gt.nn.Embedding(V, D, _weight=gt.tensor(w0))
    (dense(gt.tensor(ids[0])) ** 2).sum().backward()
    (dense(gt.tensor(ids[1])) ** 2).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.to_dense().numpy(), dense.weight.grad.numpy())
    gt.optim.SGD(emb.parameters(), lr=0.1).zero_grad(set_to_none=False)  # Paddle's clear_grad: no rows
    assert len(emb.weight.grad.rows) == 0
    (emb(gt.tensor(ids[2])) ** 2).sum().backward()
    assert len(emb.weight.grad.rows) == ids[2].size


def _train_paddle(paddle, sparse, make_opt):
    w0, ids = _data()
    init = paddle.ParamAttr(initializer=paddle.nn.initializer.Assign(w0))
    emb = paddle.nn.Embedding(V, D, sparse=sparse, weight_attr=init)
    opt = make_opt(paddle, emb.parameters())
    for i in ids:
        (emb(paddle.to_tensor(i)) ** 2).sum().backward()
        opt.step()
        opt.clear_grad()
    return emb.weight.numpy()


PADDLE_OPTIMIZERS = {"sgd": lambda p, ps: p.optimizer.SGD(0.1, parameters=ps),
                     "sgd_decay": lambda p, ps: p.optimizer.SGD(0.1, parameters=ps, weight_decay=0.1),
                     "momentum": lambda p, ps: p.optimizer.Momentum(0.1, 0.9, parameters=ps),
                     "adam": lambda p, ps: p.optimizer.Adam(0.1, parameters=ps),
                     "adam_lazy": lambda p, ps: p.optimizer.Adam(0.1, parameters=ps, lazy_mode=True)}


@pytest.mark.parametrize("opt", sorted(PADDLE_OPTIMIZERS))
def test_paddle_dygraph_matches_real_paddle(opt):
    """Paddle's rules for a SelectedRows gradient: SGD updates its rows; with L2 decay, and Momentum,
    every row as dense; Adam's bias corrections one step ahead, lazy_mode the rows only."""
    real = pytest.importorskip("paddle")
    import globaltensor.paddle as ours
    make = PADDLE_OPTIMIZERS[opt]
    for sparse in (False, True):
        np.testing.assert_allclose(_train_paddle(ours, sparse, make), _train_paddle(real, sparse, make),
                                   rtol=1e-5, atol=2e-6)
    if opt in ("sgd", "sgd_decay", "momentum"):
        np.testing.assert_array_equal(_train_paddle(ours, True, make), _train_paddle(ours, False, make))


def test_paddle_refusals_are_paddles():
    import globaltensor.paddle as ours
    with pytest.raises(RuntimeError, match="Adam don't support weight_decay with sparse parameters"):
        _train_paddle(ours, True, lambda p, ps: p.optimizer.Adam(0.1, parameters=ps, weight_decay=0.1))
    with pytest.raises(RuntimeError, match="sparse gradients"):  # Paddle 3.3.1's AdamW crashes on them
        _train_paddle(ours, True, lambda p, ps: p.optimizer.AdamW(0.1, parameters=ps))


@contextlib.contextmanager
def _static(paddle):
    from globaltensor.paddle.static import nn
    saved = {k: copy.copy(v) for k, v in nn._counters.items()}
    paddle.enable_static()
    try:
        yield
    finally:
        paddle.disable_static()
        nn._counters.clear()
        nn._counters.update(saved)


def _train_static(is_sparse, steps=3, shared=False):
    import globaltensor.paddle as paddle
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((V, D)).astype(np.float32)
    w1 = rng.standard_normal((3 * D, 1)).astype(np.float32)
    with _static(paddle):
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            ids = paddle.static.data("ids", [None, 3], "int64")
            y = paddle.static.data("y", [None, 1], "float32")
            attr = paddle.ParamAttr(name="table", initializer=paddle.nn.initializer.Assign(w0))
            if shared:  # one table looked up twice: a row gradient of two parts
                table = paddle.create_parameter([V, D], "float32", attr=attr)
                emb = paddle.nn.functional.embedding(ids, table, sparse=is_sparse) + \
                    paddle.nn.functional.embedding(ids[:, ::-1] + 1, table, sparse=is_sparse) * 2
            else:
                emb = paddle.static.nn.embedding(ids, [V, D], is_sparse=is_sparse, param_attr=attr)
            pred = paddle.static.nn.fc(paddle.reshape(emb, [-1, 3 * D]), 1, bias_attr=False,
                                       weight_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Assign(w1)))
            loss = paddle.mean((pred - y) ** 2)
            paddle.optimizer.SGD(0.5).minimize(loss)
        exe = paddle.static.Executor()
        exe.run(startup)
        losses = [exe.run(main, feed={"ids": rng.integers(0, V // 2, (8, 3)), "y": rng.standard_normal((8, 1))},
                          fetch_list=[loss])[0] for _ in range(steps)]
        table = main.global_block().var("table")
        grad_ins = [len(ins.ins) for ins in main.instrs if ins.kind == "grad" and ins.name == "table@GRAD"]
        return np.array(table._local), np.array(losses), grad_ins


@pytest.mark.parametrize("shared", [False, True])
def test_static_is_sparse_equals_dense(shared):
    sparse, sparse_losses, grad_ins = _train_static(True, shared=shared)
    dense, dense_losses, dense_ins = _train_static(False, shared=shared)
    assert grad_ins == [4 if shared else 2] and dense_ins == [1]  # each lookup's rows and values; one dense array
    np.testing.assert_array_equal(sparse_losses, dense_losses)
    np.testing.assert_array_equal(sparse, dense)
    assert not np.array_equal(sparse[: V // 2], _train_static(True, steps=0)[0][: V // 2])  # it trained


def test_graph_capture_trains_as_dense():
    """Inside an nn.Graph the table's gradient is recorded dense (the same values as eagerly)."""
    w0, ids = _data()
    emb = gt.nn.Embedding(V, D, sparse=True, _weight=gt.tensor(w0))
    opt = gt.optim.SGD(emb.parameters(), lr=0.1)

    class Step(gt.nn.Graph):
        def __init__(self):
            super().__init__()
            self.emb = emb
            self.add_optimizer(opt)

        def build(self, x):
            loss = (self.emb(x) ** 2).sum()
            loss.backward()
            return loss

    step = Step()
    for i in ids:
        step(gt.tensor(i))
    dense, _ = _train_ours(False, lambda ps: gt.optim.SGD(ps, lr=0.1))
    np.testing.assert_array_equal(emb.weight.numpy(), dense)
