"""Server checkpoints: save with 2 servers, load with 1 and 3 (dense rows, sparse rows, their rule state and entry
counts land where the new slicing / hashing puts them, and training goes on exactly as without the save);
load_dense; foreign, truncated and mixed saves raise clearly."""
import copy
import json
import os

import numpy as np
import pytest

from globaltensor.ps.checkpoint import load_dense, load_server, read_manifests, save_server
from globaltensor.ps.partition import server_blocks, server_of_ids
from globaltensor.ps.spec import DenseSpec, JobSpec, Rule, SparseSpec
from globaltensor.ps.tables import DenseBlock, SparseTable

DENSE = (DenseSpec("fc.w", (40, 16)), DenseSpec("fc.b", (16,)), DenseSpec("out.w", (30, 7)))
SPARSE = (SparseSpec("emb", 4, entry=("count_filter", 2), seed=3), SparseSpec("emb2", 3, init=("normal", 0, 1)))


def _job(n_servers, rule=Rule.make("adam", 0.01), dense=DENSE, sparse=SPARSE):
    servers = tuple(f"127.0.0.1:{7000 + i}" for i in range(n_servers))
    return JobSpec(servers, 1, "sync", rule, dense=dense, sparse=sparse, min_block_size=64).validate()


class _Servers:
    """n in-process servers' blocks and tables, fed the same pushes a trainer would route to them."""

    def __init__(self, job, initial=None, loaded=None):
        self.job, n = job, len(job.servers)
        if loaded is not None:
            self.dense, self.sparse = [d for d, _ in loaded], [s for _, s in loaded]
            return
        self.dense = [{b.name: DenseBlock(b, initial[b.name][b.row_start:b.row_end], job.rule)
                       for b in server_blocks(job, s)} for s in range(n)]
        self.sparse = [{spec.name: SparseTable(spec, job.rule) for spec in job.sparse} for _ in range(n)]

    def step(self, rng, ids):
        for blocks in self.dense:
            for block in blocks.values():
                b = block.block
                grad = _dense_grad(rng, b.name, b.param_shape)
                block.apply(grad[b.row_start:b.row_end])
        for spec in self.job.sparse:
            owner = server_of_ids(ids, len(self.job.servers))
            grads = _sparse_grad(rng, spec, ids)
            for s, tables in enumerate(self.sparse):
                mine = owner == s
                tables[spec.name].pull(ids[mine])
                tables[spec.name].push(ids[mine], grads[mine])

    def full(self, name, key="value"):
        blocks = sorted((b for d in self.dense for b in d.values() if b.block.name == name), key=lambda b: b.block.index)
        return np.concatenate([b.state()[key] for b in blocks])

    def rows(self, name):
        """{id: (value row, moment1 row, step)} over every server."""
        out = {}
        for tables in self.sparse:
            st = tables[name].state()
            for k, i in enumerate(st["ids"].tolist()):
                out[i] = (st["values"][k].tolist(), st["moment1"][k].tolist(), int(st["step"][k]))
        return out


def _dense_grad(rng, name, shape):  # the same gradient for a parameter whatever the slicing: seeded by the step
    return np.random.default_rng([rng, sum(map(ord, name))]).standard_normal(shape).astype(np.float32)


def _sparse_grad(rng, spec, ids):
    return np.random.default_rng([rng, spec.dim]).standard_normal((ids.size, spec.dim)).astype(np.float32)


def _batches():
    rng = np.random.default_rng(0)
    return [np.unique(rng.integers(-50, 50, 40) * (2**57)) for _ in range(7)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One server trained 4 steps (the truth) and 2 servers trained alike, saved."""
    rng = np.random.default_rng(1)
    initial = {d.name: rng.standard_normal(d.shape).astype(np.float32) for d in DENSE}
    one, two = _Servers(_job(1), initial), _Servers(_job(2), initial)
    for step, ids in enumerate(_batches()[:4]):
        one.step(step, ids)
        two.step(step, ids)
    dirname = str(tmp_path_factory.mktemp("ckpt"))
    for s in range(2):
        save_server(dirname, two.job, s, two.dense[s], two.sparse[s])
    return one, dirname


@pytest.mark.parametrize("n_servers", [1, 2, 3])
def test_load_under_another_server_count_puts_every_row_where_it_belongs(trained, n_servers):
    one, dirname = trained
    job = _job(n_servers)
    loaded = _Servers(job, loaded=[load_server(dirname, job, s) for s in range(n_servers)])
    for s in range(n_servers):
        assert sorted(loaded.dense[s]) == sorted(b.name for b in server_blocks(job, s))
        assert sorted(b.block.block_name for b in loaded.dense[s].values()) == sorted(
            b.block_name for b in server_blocks(job, s))
        for name, table in loaded.sparse[s].items():
            assert (server_of_ids(table.state()["ids"], n_servers) == s).all()
            waiting = table.state()["entry_ids"]
            assert (server_of_ids(waiting, n_servers) == s).all()
    for d in DENSE:
        for key in ("value", "moment1", "moment2"):
            np.testing.assert_array_equal(loaded.full(d.name, key), one.full(d.name, key), err_msg=(d.name, key))
    assert all(b.state()["step"].tolist() == [4] for blocks in loaded.dense for b in blocks.values())
    for spec in SPARSE:
        assert loaded.rows(spec.name) == one.rows(spec.name)
    waiting = sorted(i for t in loaded.sparse for i in t["emb"].state()["entry_ids"].tolist())
    assert waiting == sorted(one.sparse[0]["emb"].state()["entry_ids"].tolist()) and waiting
    for step, ids in enumerate(_batches()[4:], start=4):  # training goes on as if never saved
        loaded.step(step, ids)
    truth = copy.deepcopy(one)  # never saved
    for step, ids in enumerate(_batches()[4:], start=4):
        truth.step(step, ids)
    for d in DENSE:
        np.testing.assert_array_equal(loaded.full(d.name), truth.full(d.name))
    for spec in SPARSE:
        assert loaded.rows(spec.name) == truth.rows(spec.name)


def test_load_dense_gives_the_whole_parameter(trained):
    one, dirname = trained
    for d in DENSE:
        np.testing.assert_array_equal(load_dense(dirname, d.name), one.full(d.name))
    with pytest.raises(KeyError, match="no dense parameter 'nope'"):
        load_dense(dirname, "nope")


def test_manifest_describes_the_save(trained):
    _, dirname = trained
    m0, m1 = read_manifests(dirname)
    assert (m0["format"], m0["version"], m0["servers"], m1["server"]) == ("globaltensor.ps.checkpoint", 1, 2, 1)
    blocks = sorted((e["block_name"], e["row_start"], e["row_end"]) for m in (m0, m1) for e in m["dense"])
    assert blocks == [("fc.b", 0, 16), ("fc.w.block0", 0, 20), ("fc.w.block1", 20, 40),
                      ("out.w.block0", 0, 15), ("out.w.block1", 15, 30)]
    assert {e["name"]: e["dim"] for e in m0["sparse"]} == {"emb": 4, "emb2": 3}


def _copy(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return str(dst)


def test_truncated_foreign_and_incomplete_saves_raise(trained, tmp_path):
    _, dirname = trained
    bad = _copy(dirname, tmp_path / "truncated")
    path = os.path.join(bad, "manifest_1.json")
    text = open(path).read()
    open(path, "w").write(text[:len(text) // 2])
    with pytest.raises(ValueError, match="manifest_1.json: not a readable manifest"):
        load_server(bad, _job(1), 0)
    foreign = _copy(dirname, tmp_path / "foreign")
    path = os.path.join(foreign, "manifest_0.json")
    json.dump({"format": "paddle.fleet", "version": 1}, open(path, "w"))
    with pytest.raises(ValueError, match="not a globaltensor parameter-server manifest"):
        read_manifests(foreign)
    short = _copy(dirname, tmp_path / "short")
    data = os.path.join(short, "server_1", "sparse.safetensors")
    os.truncate(data, os.path.getsize(data) - 10)
    with pytest.raises(ValueError, match="truncated or replaced"):
        load_server(short, _job(3), 2)
    missing = _copy(dirname, tmp_path / "missing")
    os.remove(os.path.join(missing, "manifest_0.json"))
    with pytest.raises(ValueError, match="do not form one save"):
        load_dense(missing, "fc.b")
    with pytest.raises(ValueError, match="no parameter-server checkpoint"):
        read_manifests(str(tmp_path))


def test_shape_and_dim_mismatches_raise(trained):
    _, dirname = trained
    with pytest.raises(ValueError, match=r"'fc.w': the checkpoint's shape \(40, 16\), the job's \(40, 8\)"):
        load_server(dirname, _job(1, dense=(DenseSpec("fc.w", (40, 8)),) + DENSE[1:]), 0)
    with pytest.raises(ValueError, match="'emb': the checkpoint's dim 4, the job's 5"):
        load_server(dirname, _job(1, sparse=(SparseSpec("emb", 5),)), 0)


def test_a_smaller_save_over_a_larger_one_replaces_it(tmp_path):
    rng = np.random.default_rng(2)
    initial = {d.name: rng.standard_normal(d.shape).astype(np.float32) for d in DENSE}
    for n in (3, 2):
        servers = _Servers(_job(n, Rule.make("sgd", 0.1)), initial)
        servers.step(0, _batches()[0])
        for s in range(n):
            save_server(str(tmp_path), servers.job, s, servers.dense[s], servers.sparse[s])
    assert [m["server"] for m in read_manifests(str(tmp_path))] == [0, 1]
    np.testing.assert_array_equal(load_dense(str(tmp_path), "out.w"), servers.full("out.w"))


def test_load_under_another_rule_keeps_the_values_and_starts_the_state_fresh(trained):
    one, dirname = trained
    job = _job(2, Rule.make("momentum", 0.1))
    loaded = _Servers(job, loaded=[load_server(dirname, job, s) for s in range(2)])
    for d in DENSE:
        np.testing.assert_array_equal(loaded.full(d.name), one.full(d.name))
        np.testing.assert_array_equal(loaded.full(d.name, "velocity"), 0)
    for spec in SPARSE:
        got = {i: v for t in loaded.sparse for i, v in zip(t[spec.name].state()["ids"].tolist(),
                                                            t[spec.name].state()["values"].tolist())}
        assert got == {i: v for i, (v, _, _) in one.rows(spec.name).items()}


def test_a_server_with_nothing_saves_and_loads(tmp_path):
    job = _job(3, dense=(DenseSpec("b", (4,)),), sparse=())
    servers = _Servers(job, {"b": np.arange(4, dtype=np.float32)})
    for s in range(3):
        save_server(str(tmp_path), job, s, servers.dense[s], servers.sparse[s])
    assert [len(load_server(str(tmp_path), job, s)[0]) for s in range(3)] == [1, 0, 0]
    np.testing.assert_array_equal(load_dense(str(tmp_path), "b"), np.arange(4))
