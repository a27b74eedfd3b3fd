"""Dense slicing against real Paddle's slice_variable, the RoundRobin / HashName placement, the id -> server hash,
and JobSpec.validate's messages."""
import itertools

import numpy as np
import pytest

from globaltensor.ps.partition import dense_blocks, job_blocks, server_blocks, server_of_ids
from globaltensor.ps.spec import DenseSpec, JobSpec, Rule, SparseSpec

SHAPES = [(10,), (8192,), (8193,), (100000,), (5, 4000), (7, 3000), (1000, 64), (3, 5, 7), (2, 8192),
          (1, 100000), (257, 33, 2), (9, 1)]


def _splitmix64(x):
    m = 2**64 - 1
    z = (x + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


class _Var:  # what slice_variable reads: a name and a shape
    def __init__(self, name, shape):
        self.name, self.shape = name, shape


@pytest.fixture(scope="module")
def paddle_slice_variable():
    module = pytest.importorskip("paddle.distributed.transpiler.distribute_transpiler")
    return module.slice_variable


@pytest.mark.parametrize("n_servers,min_block_size", [(1, 8192), (2, 8192), (3, 8192), (4, 1000), (5, 64), (7, 1)])
def test_blocks_match_paddles_slice_variable(paddle_slice_variable, n_servers, min_block_size):
    for i, shape in enumerate(SHAPES):
        name = f"p{i}"
        ours = dense_blocks(DenseSpec(name, shape), n_servers, min_block_size)
        theirs = paddle_slice_variable([_Var(name, shape)], n_servers, min_block_size)
        row = int(np.prod(shape[1:]))
        assert [f"{name}:{b.index}:{b.rows * row}" for b in ours] == theirs, (shape, n_servers, min_block_size)
        assert ours[0].row_start == 0 and ours[-1].row_end == shape[0]
        assert all(a.row_end == b.row_start for a, b in zip(ours, ours[1:]))
        assert all(b.shape == (b.rows,) + tuple(shape[1:]) and b.param_shape == tuple(shape) for b in ours)


def test_slice_var_up_false_is_one_block_named_as_the_parameter(paddle_slice_variable):
    blocks = dense_blocks(DenseSpec("w", (1000, 64)), 4, 8192, slice_var_up=False)
    assert [(b.block_name, b.row_start, b.row_end) for b in blocks] == [("w", 0, 1000)]
    assert paddle_slice_variable([_Var("w", (1000, 64))], 1, 8192) == ["w:0:64000"]


def test_block_names_as_paddle_prints_them():
    blocks = dense_blocks(DenseSpec("fc_0.w_0", (1000, 64)), 3, 8192)
    assert [b.block_name for b in blocks] == ["fc_0.w_0.block0", "fc_0.w_0.block1", "fc_0.w_0.block2"]
    assert dense_blocks(DenseSpec("b", (10,)), 3, 8192)[0].block_name == "b"


def _job(dense, n_servers, split_method="RoundRobin", min_block_size=8192):
    servers = tuple(f"127.0.0.1:{6170 + i}" for i in range(n_servers))
    return JobSpec(servers, 2, "sync", Rule.make("sgd", 0.1), dense=dense, split_method=split_method,
                   min_block_size=min_block_size).validate()


def test_round_robin_deals_servers_over_all_blocks_in_spec_order():
    job = _job((DenseSpec("a", (1000, 64)), DenseSpec("b", (10,)), DenseSpec("c", (100, 200))), 3)
    assert [(b.block_name, b.server) for b in job_blocks(job)] == [
        ("a.block0", 0), ("a.block1", 1), ("a.block2", 2), ("b", 0), ("c.block0", 1), ("c.block1", 2)]
    assert [b.block_name for b in server_blocks(job, 1)] == ["a.block1", "c.block0"]


def test_hash_name_is_stable_and_spreads():
    dense = tuple(DenseSpec(f"w{i}", (10,)) for i in range(40))
    job = _job(dense, 4, "HashName")
    servers = [b.server for b in job_blocks(job)]
    assert servers == [b.server for b in job_blocks(_job(dense, 4, "HashName"))]
    assert set(servers) == {0, 1, 2, 3}
    for n in (2, 3, 4):  # a parameter's blocks never share a server
        job = _job((DenseSpec("a", (1000, 64)), DenseSpec("b", (300, 200))), n, "HashName")
        for name in ("a", "b"):
            mine = [b.server for b in job_blocks(job) if b.name == name]
            assert len(mine) == n and sorted(mine) == list(range(n))


def test_server_of_ids_is_stable_balanced_and_takes_any_int64():
    ids = np.array([0, 1, -1, 2**63 - 1, -(2**63), 2**62 + 7], dtype=np.int64)
    for n in (1, 2, 3, 7):
        owner = server_of_ids(ids, n)
        assert owner.dtype == np.int64 and ((owner >= 0) & (owner < n)).all()
        assert (owner == [server_of_ids(ids[i:i + 1], n)[0] for i in range(ids.size)]).all()
    # fixed for all time (checkpoints depend on it): splitmix64 of the id's bits, mod n, in plain Python ints
    assert server_of_ids(ids, 3).tolist() == [_splitmix64(int(i) % 2**64) % 3 for i in ids]
    counts = np.bincount(server_of_ids(np.arange(30000), 3), minlength=3)
    assert counts.min() > 9500, counts
    with pytest.raises(ValueError, match="integers"):
        server_of_ids(np.array([1.5]), 2)


@pytest.mark.parametrize("change,message", [
    (dict(servers=()), "at least one server"),
    (dict(servers=("127.0.0.1",)), "ip:port"),
    (dict(servers=("127.0.0.1:1", "127.0.0.1:1")), "more than once"),
    (dict(trainers=0), "trainers"),
    (dict(mode="half"), "mode"),
    (dict(rule=Rule.make("lamb", 0.1)), "kind"),
    (dict(rule=Rule.make("sgd", -0.1)), "lr"),
    (dict(rule=Rule("sgd", float("nan"))), "lr"),
    (dict(rule=Rule.make("adam", 0.1, beta3=1)), "beta3"),
    (dict(mode="geo"), "k_steps"),
    (dict(dense=(DenseSpec("w", (0, 3)),)), "shape"),
    (dict(dense=(DenseSpec("w", (3,)),), sparse=(SparseSpec("w", 4),)), "more than once"),
    (dict(sparse=(SparseSpec("e", 0),)), "dim"),
    (dict(sparse=(SparseSpec("e", 4, init=("xavier",)),)), "init"),
    (dict(sparse=(SparseSpec("e", 4, entry=("probability", 1.5)),)), "probability"),
    (dict(sparse=(SparseSpec("e", 4, entry=("count_filter", -1)),)), "count_filter"),
    (dict(split_method="Random"), "split_method"),
    (dict(dead_after=0), "dead_after"),
    (dict(secret="abc"), "secret"),
])
def test_validate_names_the_bad_field(change, message):
    fields = dict(servers=("127.0.0.1:6170",), trainers=2, mode="sync", rule=Rule.make("sgd", 0.1))
    fields.update(change)
    with pytest.raises(ValueError, match=message):
        JobSpec(**fields).validate()


def test_rule_params_are_sorted_and_default_to_paddles():
    rule = Rule.make("adam", 0.01, epsilon=1e-6, beta1=0.8)
    assert rule.params == (("beta1", 0.8), ("epsilon", 1e-6))
    assert (rule.param("beta1"), rule.param("beta2"), rule.param("epsilon")) == (0.8, 0.999, 1e-6)
    assert Rule.make("adagrad", 0.1).param("epsilon") == 1e-6
    assert list(itertools.islice(iter(rule.params), 1)) == [("beta1", 0.8)]
