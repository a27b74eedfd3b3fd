"""benchmarks/ps/paddle_ctr.py's CTR model on Fleet's PS (scaled down, tests/ps/ctr_job.py): sync under the real
launcher equals one process on the joined batch; async and GEO train; a ParamAttr name is one parameter; an
embedding(is_sparse=True) table is a sparse table of a PS job; Variable.block.program."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "ctr_job.py")
LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]
TABLE = "SparseFeatFactors"


def _run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
    assert res.returncode == 0, res.stderr[-3000:]
    found = {}
    for line in res.stdout.splitlines():
        if "CTRJOB " in line:
            rec = json.loads(line.split("CTRJOB ", 1)[1])
            found[rec.get("trainer", 0)] = rec
    return found


@pytest.fixture
def paddle():
    import globaltensor.paddle as paddle
    paddle.enable_static()
    yield paddle
    paddle.disable_static()


def _ctr(paddle, kind, vocab=50, dim=4, slots=3, initializer=None):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        slots_ = [paddle.static.data(name=f"C{i}", shape=[None, 1], dtype="int64") for i in range(slots)]
        attr = paddle.ParamAttr(name=TABLE, initializer=initializer or paddle.nn.initializer.Uniform(-0.05, 0.05))
        make = paddle.static.nn.embedding if kind == "embedding" else paddle.static.nn.sparse_embedding
        extra = {"is_sparse": True} if kind == "embedding" else {}
        embs = [make(s, size=[vocab, dim], param_attr=attr, **extra) for s in slots_]
        h = paddle.concat([paddle.reshape(e, [-1, dim]) for e in embs], axis=1)
        label = paddle.static.data(name="label", shape=[None, 1], dtype="float32")
        logit = paddle.static.nn.fc(h, size=1)
        loss = paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(logit, label))
    return main, startup, loss


def test_variable_block_is_its_programs(paddle):
    main, _, loss = _ctr(paddle, "sparse_embedding")
    assert loss.block.program is main and loss.block.idx == 0
    assert main.global_block().program is main


@pytest.mark.parametrize("kind", ["embedding", "sparse_embedding"])
def test_a_paramattr_name_is_one_parameter(paddle, kind):
    main, _, _ = _ctr(paddle, kind)
    if kind == "embedding":
        assert [p.name for p in main.parameters].count(TABLE) == 1
        assert list(main.var(TABLE).shape) == [50, 4]
    else:
        assert list(main.sparse_tables) == [TABLE]


def test_a_paramattr_name_with_another_shape_raises(paddle):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data(name="x", shape=[None, 1], dtype="int64")
        paddle.static.nn.embedding(x, size=[10, 4], param_attr=paddle.ParamAttr(name="t"))
        with pytest.raises(ValueError, match=r"Variable 't' has been created before. The previous shape is \(10, 4\), "
                                             r"the new shape is \(10, 8\)"):
            paddle.static.nn.embedding(x, size=[10, 8], param_attr=paddle.ParamAttr(name="t"))


def test_embedding_is_sparse_becomes_a_sparse_table_of_the_job(paddle):
    from globaltensor.paddle.static import ps
    from globaltensor.paddle.static.sparse import to_sparse_tables
    main, startup, loss = _ctr(paddle, "embedding")
    assert to_sparse_tables(main, startup) == [TABLE]
    with paddle.static.program_guard(main, startup):
        opt = paddle.optimizer.SGD(learning_rate=0.1)
        opt.minimize(loss)
    job = ps.job_spec(main, opt, "sync", servers=["127.0.0.1:6170"], trainers=2)
    assert [s.name for s in job.sparse] == [TABLE] and job.sparse[0].init == ("uniform", -0.05, 0.05)
    assert TABLE not in [d.name for d in job.dense] and len(job.dense) == 2
    assert not any(getattr(i.fn, "t", None) is not None and i.name == TABLE for i in startup.instrs)
    types = [op.type for op in main.global_block().ops]
    assert types.count("distributed_lookup_table") == 3 and "lookup_table_v2" not in types
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    feed = {f"C{i}": np.array([[1], [2], [1]], np.int64) * (i + 1) for i in range(3)}
    feed["label"] = np.array([[1.0], [0.0], [1.0]], np.float32)
    before = main.sparse_tables[TABLE].local_table(ps.rule_of(opt)).pull(np.array([1, 2, 3]), is_test=True).copy()
    exe.run(main, feed=feed, fetch_list=[loss])
    after = main.sparse_tables[TABLE].local.pull(np.array([1, 2, 3]), is_test=True)
    assert not np.allclose(before, after)  # the rows the lookups saw were trained


def test_a_tables_lookups_pull_once_a_run(paddle):
    """fuse_lookups (Paddle's fused pull): the first lookup takes the others' ids; attached, one pull a run."""
    from globaltensor.paddle.static import ps
    from globaltensor.paddle.static.sparse import fuse_lookups
    main, startup, loss = _ctr(paddle, "sparse_embedding")
    with paddle.static.program_guard(main, startup):
        opt = paddle.optimizer.SGD(learning_rate=0.1)
        opt.minimize(loss)
    assert fuse_lookups(main) == 2
    table = main.sparse_tables[TABLE]

    class Client:
        pulls = []

        def pull_sparse(self, name, ids, is_test=False):
            self.pulls.append(np.asarray(ids).tolist())
            return table.local_table(ps.rule_of(opt)).pull(ids, is_test=is_test)

        def pull_dense(self, names):
            return {n: np.asarray(main.var(n)._local) for n in names}

        def push_dense(self, grads):
            pass

        def push_sparse(self, name, ids, rows):
            pass

    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    feed = {"C0": np.array([[3], [1]]), "C1": np.array([[1], [7]]), "C2": np.array([[9], [3]]),
            "label": np.ones((2, 1), np.float32)}
    want = exe.run(main.clone(for_test=True), feed=feed, fetch_list=[loss])[0]
    ps.attach(main, Client(), mode="async")
    got = exe.run(main, feed=feed, fetch_list=[loss])[0]
    ps.detach(main)
    assert Client.pulls == [[1, 3, 7, 9]]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_initializers_of_a_sparse_table(paddle):
    from globaltensor.paddle.nn import initializer as init
    from globaltensor.paddle.static.sparse import init_spec
    limit = (6.0 / (1000 + 4)) ** 0.5
    assert init_spec(init.XavierUniform(), (1000, 4), "t") == ("uniform", -limit, limit)
    assert init_spec(init.XavierNormal(), (1000, 4), "t") == ("normal", 0.0, (2.0 / 1004) ** 0.5)
    assert init_spec(init.Normal(0.0, 0.1), (1000, 4), "t") == ("normal", 0.0, 0.1)
    assert init_spec(init.Constant(0.5), (1000, 4), "t") == ("constant", 0.5)
    with pytest.raises(ValueError, match="TruncatedNormal"):
        init_spec(init.TruncatedNormal(0.0, 0.1), (1000, 4), "t")
    main, startup, loss = _ctr(paddle, "embedding", initializer=init.TruncatedNormal(0.0, 0.1))
    from globaltensor.paddle.static.sparse import to_sparse_tables
    with pytest.raises(ValueError, match="embedding 'SparseFeatFactors' \\(is_sparse=True\\): initializer"):
        to_sparse_tables(main, startup)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("servers", [1, 2])
def test_sync_two_trainers_equal_one_process_on_the_joined_batch(servers):
    got = _run(LAUNCH + [f"--server_num={servers}", "--worker_num=2", JOB, "sync", "sparse_embedding"])
    want = _run([sys.executable, JOB, "sync", "sparse_embedding", "one"])[0]
    assert sorted(got) == [0, 1]
    for rec in got.values():
        assert rec["sparse"] == [TABLE] and TABLE not in rec["dense"]
        assert rec["params"].keys() == want["params"].keys()
        for name, value in want["params"].items():
            np.testing.assert_allclose(rec["params"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(rec["rows"], want["rows"], rtol=1e-5, atol=1e-6)
    # each trainer's loss is its half's: their mean is the one process's loss on the joined batch
    np.testing.assert_allclose((np.array(got[0]["losses"]) + got[1]["losses"]) / 2, want["losses"], rtol=1e-5)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode, kind", [("async", "sparse_embedding"), ("geo", "embedding")])
def test_async_and_geo_train(mode, kind):
    got = _run(LAUNCH + ["--server_num=2", "--worker_num=2", JOB, mode, kind])
    assert sorted(got) == [0, 1]
    for rec in got.values():
        assert rec["sparse"] == [TABLE] and TABLE not in rec["dense"] and rec["n_params_named"] == 0
        losses = np.array(rec["losses"])
        assert np.isfinite(losses).all() and losses[-10:].mean() < losses[:10].mean(), losses


def test_sparse_rows_use_the_dense_fills_bounds(paddle):
    """A sparse table's Kaiming / Xavier bounds are the dense initializer's own (one formula: the
    initializer's declared draw), to the last bit."""
    from globaltensor.paddle.nn import initializer as init
    from globaltensor.paddle.static.sparse import init_spec

    class P:
        shape = (1000, 4)

    for made in (init.KaimingUniform(), init.KaimingNormal(), init.XavierUniform(), init.XavierNormal(),
                 init.KaimingUniform(nonlinearity="leaky_relu", negative_slope=0.2)):
        kind, a, b = made._draw(P())
        assert init_spec(made, (1000, 4), "t") == (kind, float(a), float(b))
    assert init_spec(init.Uniform(-0.1, 0.2), None, "t") == ("uniform", -0.1, 0.2)
    with pytest.raises(ValueError, match="XavierUniform"):
        init_spec(init.XavierUniform(), None, "t")
