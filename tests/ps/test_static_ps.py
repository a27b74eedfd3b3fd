"""Paddle static mode on the parameter server: sparse_embedding, static/ps.py's job spec and the
executor's PS step (sync / async / GEO) against a fake in-process client (tests/ps/static_fake.py)
and real servers, checked against torch."""
import contextlib
import copy
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from static_fake import FakeServer  # noqa: E402

VOCAB, DIM, SLOTS, FEATS, HIDDEN, STEPS = 40, 4, 2, 3, 6, 5


def _batch(step, n=8):
    rng = np.random.default_rng(100 + step)
    ids = rng.integers(0, VOCAB, (n, SLOTS)).astype(np.int64)
    x = rng.random((n, FEATS), dtype=np.float32)
    y = (x.sum(1, keepdims=True) * 0.3).astype(np.float32)
    return {"ids": ids, "x": x, "y": y}


def _build(paddle, optimizer=None, padding_idx=None):
    """ids -> sparse rows (table "emb") -> concat x -> fc tanh -> fc -> mse; its own main/startup."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    paddle.seed(7)
    with paddle.static.program_guard(main, startup):
        ids = paddle.static.data("ids", [None, SLOTS], "int64")
        x = paddle.static.data("x", [None, FEATS], "float32")
        y = paddle.static.data("y", [None, 1], "float32")
        emb = paddle.static.nn.sparse_embedding(ids, [VOCAB, DIM], padding_idx=padding_idx,
                                                param_attr=paddle.ParamAttr(name="emb"))
        h = paddle.concat([paddle.reshape(emb, [-1, SLOTS * DIM]), x], axis=1)
        h = paddle.static.nn.fc(h, HIDDEN, weight_attr=paddle.ParamAttr(name="w1"),
                                bias_attr=paddle.ParamAttr(name="b1"), activation="tanh")
        pred = paddle.static.nn.fc(h, 1, weight_attr=paddle.ParamAttr(name="w2"), bias_attr=paddle.ParamAttr(name="b2"))
        loss = paddle.mean((pred - y) ** 2)
        (optimizer or paddle.optimizer.SGD(0.2)).minimize(loss)
    exe = paddle.static.Executor()
    exe.run(startup)
    return main, loss, exe


@pytest.fixture
def paddle():
    import globaltensor.paddle as paddle
    with _layer_names_kept():
        paddle.enable_static()
        yield paddle
        paddle.disable_static()


@contextlib.contextmanager
def _layer_names_kept():
    """static.nn's layer counters (fc_0, fc_1, ...) as they were: other files' tests expect fc_0 first."""
    from globaltensor.paddle.static import nn
    saved = {k: copy.copy(v) for k, v in nn._counters.items()}
    try:
        yield
    finally:
        nn._counters.clear()
        nn._counters.update(saved)


def _fresh_rows(main):
    """The rows every id gets on first pull (a fresh table of the program's spec)."""
    from globaltensor.ps.spec import Rule
    from globaltensor.ps.tables import SparseTable
    return SparseTable(main.sparse_tables["emb"].spec(), Rule("sgd", 0.0)).pull(np.arange(VOCAB, dtype=np.int64))


def _torch_reference(main, batches, lr=0.2, padding_idx=None):
    """The model in torch on full batches (SGD, the whole embedding dense): params and table after."""
    from globaltensor.paddle.static.ps import initial_values
    init = initial_values(main)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    table = torch.tensor(_fresh_rows(main), requires_grad=True)
    if padding_idx is not None:
        with torch.no_grad():
            table[padding_idx] = 0
    for feed in batches:
        emb = table[torch.tensor(feed["ids"])]
        h = torch.cat([emb.reshape(-1, SLOTS * DIM), torch.tensor(feed["x"])], 1)
        h = torch.tanh(h @ p["w1"] + p["b1"])
        loss = ((h @ p["w2"] + p["b2"] - torch.tensor(feed["y"])) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for t in list(p.values()) + [table]:
                t -= lr * t.grad
                t.grad = None
            if padding_idx is not None:
                table[padding_idx] = 0
    return {k: v.detach().numpy() for k, v in p.items()}, table.detach().numpy()


def _check(dense, rows_of, ref_dense, ref_table, touched):
    for k, v in ref_dense.items():
        np.testing.assert_allclose(dense[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(rows_of(touched), ref_table[touched], rtol=1e-5, atol=1e-6)


def _touched(batches):
    return np.unique(np.concatenate([b["ids"].ravel() for b in batches]))


def test_one_process_equals_torch(paddle):
    main, loss, exe = _build(paddle)
    batches = [_batch(s) for s in range(5)]
    ref_dense, ref_table = _torch_reference(main, batches)
    for feed in batches:
        exe.run(main, feed=feed, fetch_list=[loss])
    params = {p.name: np.asarray(p._local) for p in main.parameters}
    local = main.sparse_tables["emb"].local
    _check(params, lambda ids: local.pull(ids), ref_dense, ref_table, _touched(batches))
    assert len(local) == len(_touched(batches))  # a row per id seen, nothing else


def test_forward_rows_are_the_seeded_rows_and_shape(paddle):
    main, loss, exe = _build(paddle)
    emb = next(v for v in main.vars.values() if v.name.startswith("lookup_table"))
    assert list(emb.shape) == [-1, SLOTS, DIM]
    feed = _batch(0)
    got, = exe.run(main.clone(for_test=True), feed=feed, fetch_list=[emb])
    np.testing.assert_array_equal(got, _fresh_rows(main)[feed["ids"]])
    assert "lookup_table(" in str(main) and "is_distributed = True" in str(main)


def test_padding_rows_are_zero_and_never_updated(paddle):
    main, loss, exe = _build(paddle, padding_idx=-1)  # Paddle's rule: -1 is vocab - 1
    batches = [_batch(s) for s in range(3)]
    for b in batches:
        b["ids"][:, 0] = VOCAB - 1
    ref_dense, ref_table = _torch_reference(main, batches, padding_idx=VOCAB - 1)
    for feed in batches:
        exe.run(main, feed=feed, fetch_list=[loss])
    local = main.sparse_tables["emb"].local
    rows_of = lambda ids: np.where((ids == VOCAB - 1)[:, None], 0, local.pull(ids))  # noqa: E731
    _check({p.name: np.asarray(p._local) for p in main.parameters}, rows_of, ref_dense, ref_table, _touched(batches))
    assert not local.pull(np.array([VOCAB - 1])).any()


def test_ids_outside_the_table_raise_before_any_pull(paddle):
    from globaltensor.paddle.static import ps
    main, loss, exe = _build(paddle)
    server = FakeServer(ps.job_spec(main, main.minimized[0][1], "sync", servers="127.0.0.1:1", trainers=1),
                        ps.initial_values(main))
    client = server.client(0)
    ps.attach(main, client)
    feed = _batch(0)
    feed["ids"][3, 1] = VOCAB
    with pytest.raises(ValueError, match=r"ids \[40\] outside \[0, 40\)"):
        exe.run(main, feed=feed, fetch_list=[loss])
    assert "pull_sparse" not in client.calls and "push_dense" not in client.calls


def test_is_test_returns_zeros_for_unseen_ids_and_inserts_nothing(paddle):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        ids = paddle.static.data("ids", [None], "int64")
        out = paddle.static.nn.sparse_embedding(ids, [2 ** 63 - 1, 3], is_test=True,
                                                param_attr=paddle.ParamAttr(name="t"))
    got, = paddle.static.Executor().run(main, feed={"ids": np.array([5, 2 ** 62], np.int64)}, fetch_list=[out])
    assert got.shape == (2, 3) and not got.any()
    assert len(main.sparse_tables["t"].local) == 0


def test_an_inference_model_cannot_hold_a_sparse_table(paddle, tmp_path):
    main, loss, exe = _build(paddle)
    feeds = [main.var("ids"), main.var("x"), main.var("y")]
    with pytest.raises(ValueError, match="parameter-server table 'emb'"):
        paddle.static.save_inference_model(str(tmp_path / "m"), feeds, [loss], exe, program=main)


def test_job_spec_and_rules(paddle):
    from globaltensor.paddle.static import ps
    from globaltensor.paddle.distributed import CountFilterEntry, ProbabilityEntry
    main, loss, exe = _build(paddle, paddle.optimizer.Adam(0.01, beta1=0.8, epsilon=1e-7))
    job = ps.job_spec(main, main.minimized[0][1], "async", servers="127.0.0.1:1,127.0.0.1:2", trainers=2,
                      min_block_size=16)
    assert [(d.name, d.shape) for d in job.dense] == [("w1", (SLOTS * DIM + FEATS, HIDDEN)), ("b1", (HIDDEN,)),
                                                      ("w2", (HIDDEN, 1)), ("b2", (1,))]
    assert [(s.name, s.dim, s.entry) for s in job.sparse] == [("emb", DIM, ("none",))]
    assert job.rule.kind == "adam" and job.rule.lr == 0.01
    assert dict(job.rule.params) == pytest.approx({"beta1": 0.8, "beta2": 0.999, "epsilon": 1e-7})
    assert job.servers == ("127.0.0.1:1", "127.0.0.1:2") and job.min_block_size == 16
    with pytest.raises(ValueError, match="GEO mode trains locally with SGD"):
        ps.job_spec(main, main.minimized[0][1], "geo", k_steps=2, servers="127.0.0.1:1")
    assert ps.rule_of(paddle.optimizer.Momentum(0.1, 0.5)).params == (("momentum", 0.5),)
    assert CountFilterEntry(3).spec() == ("count_filter", 3) and ProbabilityEntry(0.25).spec() == ("probability", 0.25)


def test_entries_are_paddles():
    real = pytest.importorskip("paddle", reason="the comparison needs real Paddle")
    from globaltensor.paddle import distributed as ours
    for make in (lambda d: d.ProbabilityEntry(0.25), lambda d: d.CountFilterEntry(3),
                 lambda d: d.ShowClickEntry("show", "click")):
        assert make(ours)._to_attr() == make(real.distributed)._to_attr()
    for bad in (lambda d: d.ProbabilityEntry(1.0), lambda d: d.ProbabilityEntry(1), lambda d: d.CountFilterEntry(-1),
                lambda d: d.ShowClickEntry("show", 1)):
        with pytest.raises(ValueError):
            bad(real.distributed)
        with pytest.raises(ValueError):
            bad(ours)


def _trainers(paddle, mode, n, k_steps=0):
    from globaltensor.paddle.static import ps
    built = [_build(paddle) for _ in range(n)]
    job = ps.job_spec(built[0][0], built[0][0].minimized[0][1], mode, k_steps=k_steps, servers="127.0.0.1:1",
                      trainers=n)
    server = FakeServer(job, ps.initial_values(built[0][0]))
    clients = [server.client(i) for i in range(n)]
    for (main, _, _), c in zip(built, clients):
        ps.attach(main, c)
    return built, server, clients


def _run_threads(built, feeds_of):
    errors = []

    def work(i):
        main, loss, exe = built[i]
        try:
            for feed in feeds_of(i):
                exe.run(main, feed=feed, fetch_list=[loss])
            exe.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(built))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


@pytest.mark.timeout(60)
def test_sync_two_trainers_equal_one_process_on_the_joined_batch(paddle):
    built, server, clients = _trainers(paddle, "sync", 2)
    batches = [_batch(s) for s in range(5)]
    ref_dense, ref_table = _torch_reference(built[0][0], batches)
    _run_threads(built, lambda i: [{k: v[i * 4:(i + 1) * 4] for k, v in b.items()} for b in batches])
    _check(server.dense, lambda ids: server.sparse["emb"].pull(ids), ref_dense, ref_table, _touched(batches))
    for main, _, _ in built:  # every trainer holds the servers' values after its last step
        _check({p.name: np.asarray(p._local) for p in main.parameters}, lambda ids: ref_table[ids], ref_dense,
               ref_table, _touched(batches))
    assert server.stopped == {0, 1}
    assert clients[0].calls.count("push_dense") == 5 and clients[0].calls.count("push_sparse") == 5
    assert server.step == 5


@pytest.mark.timeout(60)
def test_async_one_trainer_equals_sgd(paddle):
    built, server, clients = _trainers(paddle, "async", 1)
    batches = [_batch(s) for s in range(4)]
    ref_dense, ref_table = _torch_reference(built[0][0], batches)
    _run_threads(built, lambda i: batches)
    _check(server.dense, lambda ids: server.sparse["emb"].pull(ids), ref_dense, ref_table, _touched(batches))


@pytest.mark.timeout(60)
def test_geo_trains_locally_and_pushes_deltas_every_k_steps(paddle):
    built, server, clients = _trainers(paddle, "geo", 1, k_steps=3)
    batches = [_batch(s) for s in range(4)]
    ref_dense, ref_table = _torch_reference(built[0][0], batches)
    _run_threads(built, lambda i: batches)
    calls = clients[0].calls  # after step 3, and at close for step 4
    assert calls.count("push_dense_delta") == 2 and calls.count("push_sparse_delta") == 2
    assert calls[-3:] == ["barrier", "pull_dense", "stop"]
    assert "push_dense" not in calls and "push_sparse" not in calls
    # one trainer: the servers' values are its local SGD's, which is torch's on the same batches
    _check(server.dense, lambda ids: server.sparse["emb"].pull(ids), ref_dense, ref_table, _touched(batches))


def test_rows_seen_before_minimize_stay(paddle):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        ids = paddle.static.data("ids", [None], "int64")
        out = paddle.static.nn.sparse_embedding(ids, [VOCAB, DIM], param_attr=paddle.ParamAttr(name="emb"))
    exe = paddle.static.Executor()
    seen = np.array([3, 9, 3], np.int64)
    before, = exe.run(main, feed={"ids": seen}, fetch_list=[out])
    with paddle.static.program_guard(main, startup):
        loss = paddle.sum(out)
        paddle.optimizer.SGD(0.5).minimize(loss)
    exe.run(main, feed={"ids": seen}, fetch_list=[loss])
    after = main.sparse_tables["emb"].local.pull(np.array([3, 9]))
    np.testing.assert_allclose(after, before[:2] - 0.5 * np.array([[2.0], [1.0]]), rtol=1e-6)  # d sum / d row


@pytest.mark.timeout(60)
def test_async_two_trainers_loss_falls_and_they_end_with_the_servers_values(paddle):
    built, server, clients = _trainers(paddle, "async", 2)
    batches = [dict(b, y=b["y"] + 1.0) for b in (_batch(s) for s in range(10))]  # far from the start
    main, loss, exe = built[0]
    held_out = dict(_batch(99), y=_batch(99)["y"] + 1.0)
    test = main.clone(for_test=True)
    before, = exe.run(test, feed=held_out, fetch_list=[loss])
    _run_threads(built, lambda i: [{k: v[i * 4:(i + 1) * 4] for k, v in b.items()} for b in batches])
    assert server.stopped == {0, 1}
    for program, _, _ in built:
        for p in program.parameters:
            np.testing.assert_array_equal(np.asarray(p._local), server.dense[p.name])
    after, = exe.run(test, feed=held_out, fetch_list=[loss])
    assert after < 0.5 * before, (before, after)


@pytest.mark.timeout(60)
def test_geo_detach_pushes_the_steps_not_pushed_yet(paddle):
    from globaltensor.paddle.static import ps
    built, server, clients = _trainers(paddle, "geo", 1, k_steps=3)
    main, loss, exe = built[0]
    batches = [_batch(s) for s in range(2)]
    ref_dense, ref_table = _torch_reference(main, batches)
    for feed in batches:
        exe.run(main, feed=feed, fetch_list=[loss])
    assert "push_dense_delta" not in clients[0].calls
    ps.detach(main)  # as fleet's stop_worker: the two local steps reach the servers
    assert clients[0].calls.count("push_dense_delta") == 1
    _check(server.dense, lambda ids: server.sparse["emb"].pull(ids), ref_dense, ref_table, _touched(batches))
    exe.close()  # detached: nothing more to push, and the client is the detacher's to stop
    assert clients[0].calls.count("push_dense_delta") == 1 and "stop" not in clients[0].calls


def test_detach_runs_locally_again(paddle):
    from globaltensor.paddle.static import ps
    built, server, clients = _trainers(paddle, "async", 1)
    main, loss, exe = built[0]
    ps.detach(main)
    exe.run(main, feed=_batch(0), fetch_list=[loss])
    assert clients[0].calls == [] and len(main.sparse_tables["emb"].local) > 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["sync", "geo"])  # async's executor path is sync's plus finish's barrier (GEO's)
def test_real_servers_two_trainers_two_servers(mode):
    """Real processes: 2 servers + 2 trainers (dense blocks split over both servers, rows hashed).
    sync: they end with one process's values on the joined batch (test_one_process_equals_torch
    checks that one against torch); async / GEO: both end with the servers' final values."""
    script = str(Path(__file__).parent / "static_ps_job.py")
    socks = [socket.socket() for _ in range(2)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    servers = ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in socks)
    for s in socks:
        s.close()
    env = dict(os.environ, PS_SERVERS=servers, GLOBALTENSOR_SECRET="cd" * 16, PS_MODE=mode,
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]))
    roles = [("server", 0), ("server", 1), ("trainer", 0), ("trainer", 1)] + ([("one", 0)] if mode == "sync" else [])
    procs = []
    try:
        for role, i in roles:
            procs.append(subprocess.Popen([sys.executable, script, role, str(i)], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=100) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert [p.returncode for p in procs] == [0] * len(roles), [o[1][-2000:] for o in outs]
    if mode != "sync":
        first, second = json.loads(outs[2][0]), json.loads(outs[3][0])
        for k in first:
            np.testing.assert_array_equal(np.array(first[k]), np.array(second[k]), err_msg=k)
        return
    one = json.loads(outs[4][0])
    for out in (outs[2][0], outs[3][0]):
        got = json.loads(out)
        assert sorted(got) == sorted(one)
        for k in one:
            np.testing.assert_allclose(np.array(got[k]), np.array(one[k]), rtol=1e-5, atol=1e-6, err_msg=k)
