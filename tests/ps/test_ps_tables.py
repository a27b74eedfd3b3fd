"""Server tables: the rules against torch.optim step by step (dense blocks, lazy sparse rows with per-row Adam steps),
seeded rows (any server count, any order, ids near 2^63, sane statistics), entries, is_test, padding_idx, GEO add."""
import numpy as np
import pytest

from globaltensor.ps.entry import CountFilterEntry, ProbabilityEntry, ShowClickEntry, entry_from_spec
from globaltensor.ps.init import seeded_rows
from globaltensor.ps.partition import Block, server_of_ids
from globaltensor.ps.spec import Rule, SparseSpec
from globaltensor.ps.tables import DenseBlock, SparseTable

torch = pytest.importorskip("torch")

RULES = [
    (Rule.make("sgd", 0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    (Rule.make("sgd", 0.1, weight_decay=0.01), lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.01)),
    (Rule.make("momentum", 0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    (Rule.make("momentum", 0.05, momentum=0.8, use_nesterov=True),
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    (Rule.make("adagrad", 0.1, epsilon=1e-6, initial_accumulator=0.1),
     lambda p: torch.optim.Adagrad(p, lr=0.1, eps=1e-6, initial_accumulator_value=0.1)),
    (Rule.make("adam", 0.01), lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8)),
    (Rule.make("adam", 0.02, beta1=0.8, beta2=0.99, epsilon=1e-6),
     lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6)),
]
IDS = ["sgd", "sgd_wd", "momentum", "nesterov", "adagrad", "adam", "adam_params"]


@pytest.mark.parametrize("rule,make_torch", RULES, ids=IDS)
def test_dense_block_follows_torch_optim_step_by_step(rule, make_torch):
    rng = np.random.default_rng(0)
    full = rng.standard_normal((12, 5)).astype(np.float32)
    block = DenseBlock(Block("w", 1, 0, 4, 10, (6, 5), (12, 5), 2), full[4:10], rule)
    param = torch.nn.Parameter(torch.tensor(full[4:10]))
    opt = make_torch([param])
    for step in range(6):
        grad = rng.standard_normal((6, 5)).astype(np.float32)
        block.apply(grad)
        param.grad = torch.tensor(grad)
        opt.step()
        np.testing.assert_allclose(block.value, param.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {step}")


@pytest.mark.parametrize("rule,make_torch", RULES, ids=IDS)
def test_sparse_rows_update_lazily_each_row_on_its_own_steps(rule, make_torch):
    """Each row is its own torch parameter stepped only when pushed: only pushed rows (and their state) move, and
    adam's bias correction uses the row's own push count (Paddle keeps beta1_pow/beta2_pow per row)."""
    rng = np.random.default_rng(1)
    spec = SparseSpec("emb", 4, init=("normal", 0.0, 0.5))
    table = SparseTable(spec, rule)
    ids = np.array([3, -7, 2**63 - 1, 11, 40], dtype=np.int64)
    start = table.pull(ids)
    params = [torch.nn.Parameter(torch.tensor(row)) for row in start]
    opts = [make_torch([p]) for p in params]
    for step in range(8):
        pushed = rng.choice(ids.size, size=rng.integers(1, ids.size + 1), replace=False)
        grads = rng.standard_normal((pushed.size, 4)).astype(np.float32)
        table.push(ids[pushed], grads)
        for k, g in zip(pushed, grads):
            params[k].grad = torch.tensor(g)
            opts[k].step()
        want = np.stack([p.detach().numpy() for p in params])
        np.testing.assert_allclose(table.pull(ids), want, rtol=1e-5, atol=1e-6, err_msg=f"step {step}")


def test_push_sums_repeated_ids_and_skips_absent_ones():
    table = SparseTable(SparseSpec("emb", 3, init=("constant", 1.0)), Rule.make("sgd", 0.5))
    table.pull(np.array([1, 2]))
    grads = np.arange(12, dtype=np.float32).reshape(4, 3)
    table.push(np.array([2, 99, 2, 1]), grads)
    np.testing.assert_allclose(table.pull(np.array([1, 2]), is_test=True),
                               [1 - 0.5 * grads[3], 1 - 0.5 * (grads[0] + grads[2])], rtol=1e-6)
    assert len(table) == 2  # the push of 99 created nothing


def test_seeded_rows_are_the_same_whatever_the_server_count_and_the_order():
    spec = SparseSpec("emb", 8, seed=5)
    rng = np.random.default_rng(2)
    ids = np.unique(np.concatenate([rng.integers(-2**63, 2**63 - 1, 300, dtype=np.int64),
                                    np.array([2**63 - 1, 2**63 - 2, -(2**63), 0, 1], dtype=np.int64)]))
    one = SparseTable(spec, Rule.make("sgd", 0.1)).pull(ids)
    np.testing.assert_array_equal(one, seeded_rows(spec, ids))
    for n in (2, 3):
        owner = server_of_ids(ids, n)
        tables = [SparseTable(spec, Rule.make("sgd", 0.1)) for _ in range(n)]
        got = np.empty_like(one)
        for order in (slice(None), slice(None, None, -1)):  # first sight in either order
            for s, table in enumerate(tables):
                mine = np.flatnonzero(owner == s)[order]
                got[mine] = table.pull(ids[mine])
            np.testing.assert_array_equal(got, one)
    assert not np.array_equal(seeded_rows(SparseSpec("emb", 8, seed=6), ids), one)
    assert not np.array_equal(seeded_rows(SparseSpec("other", 8, seed=5), ids), one)
    assert np.unique(one, axis=0).shape[0] == ids.size  # every row its own


@pytest.mark.parametrize("init,mean,std", [(("uniform", -0.5, 1.5), 0.5, 2 / np.sqrt(12)),
                                           (("normal", 1.0, 2.0), 1.0, 2.0), (("constant", 0.25), 0.25, 0.0)])
def test_seeded_rows_statistics(init, mean, std):
    rows = seeded_rows(SparseSpec("emb", 16, init=init), np.arange(20000, dtype=np.int64) * 7919)
    assert rows.dtype == np.float32 and rows.shape == (20000, 16)
    assert abs(rows.mean() - mean) < 0.01 + 0.01 * std and abs(rows.std() - std) < 0.01 + 0.01 * std
    if init[0] == "uniform":
        assert rows.min() >= -0.5 and rows.max() < 1.5
    if init[0] == "normal":
        z = (rows - 1.0) / 2.0
        assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.005 and abs(np.mean(z ** 3)) < 0.02
        assert abs(np.corrcoef(rows[:, 0], rows[:, 1])[0, 1]) < 0.03


def test_is_test_never_inserts_and_reads_unseen_ids_as_zeros():
    table = SparseTable(SparseSpec("emb", 4), Rule.make("sgd", 0.1))
    np.testing.assert_array_equal(table.pull(np.array([5, 6]), is_test=True), np.zeros((2, 4)))
    assert len(table) == 0
    seen = table.pull(np.array([5]))
    got = table.pull(np.array([6, 5]), is_test=True)
    np.testing.assert_array_equal(got, np.concatenate([np.zeros((1, 4)), seen]))
    assert len(table) == 1


def test_padding_idx_rows_are_zeros_and_never_change():
    table = SparseTable(SparseSpec("emb", 4, padding_idx=0), Rule.make("adam", 0.1))
    rows = table.pull(np.array([0, 1, 0]))
    np.testing.assert_array_equal(rows[[0, 2]], 0)
    assert np.abs(rows[1]).sum() > 0 and len(table) == 1
    table.push(np.array([0, 1]), np.ones((2, 4), np.float32))
    table.add(np.array([0]), np.ones((1, 4), np.float32))
    np.testing.assert_array_equal(table.pull(np.array([0])), 0)
    np.testing.assert_array_equal(seeded_rows(table.spec, np.array([0, 1]))[0], 0)


def test_count_filter_admits_on_the_nth_sight():
    """Paddle's CountFilterEntry: each training pull bumps the id's count, the row is created once count >= n."""
    table = SparseTable(SparseSpec("emb", 2, init=("constant", 1.0), entry=("count_filter", 3)), Rule.make("sgd", 1))
    for sight in (1, 2):
        np.testing.assert_array_equal(table.pull(np.array([7, 7])), 0)  # one pull is one sight, repeats or not
        table.push(np.array([7]), np.ones((1, 2), np.float32))  # not admitted: the push is dropped
        assert len(table) == 0, sight
    table.pull(np.array([8]), is_test=True)  # is_test neither inserts nor counts
    np.testing.assert_array_equal(table.pull(np.array([7, 8])), [[1, 1], [0, 0]])
    assert len(table) == 1
    for n in (0, 1):
        first = SparseTable(SparseSpec("e", 2, entry=("count_filter", n)), Rule.make("sgd", 1))
        first.pull(np.array([1]))
        assert len(first) == 1


def test_probability_entry_is_deterministic_per_seed_and_id():
    spec = SparseSpec("emb", 2, entry=("probability", 0.3), seed=4)
    ids = np.arange(20000, dtype=np.int64)
    a, b = SparseTable(spec, Rule.make("sgd", 1)), SparseTable(spec, Rule.make("sgd", 1))
    a.pull(ids)
    b.pull(ids[::-1])
    assert 0.28 < len(a) / ids.size < 0.32 and len(a) == len(b)
    admitted = np.abs(a.pull(ids, is_test=True)).sum(axis=1) > 0
    np.testing.assert_array_equal(admitted, np.abs(b.pull(ids, is_test=True)).sum(axis=1) > 0)
    a.pull(ids)  # a second sight: another draw for those still out
    assert 0.47 < len(a) / ids.size < 0.53
    other = SparseTable(SparseSpec("emb", 2, entry=("probability", 0.3), seed=5), Rule.make("sgd", 1))
    other.pull(ids)
    assert not np.array_equal(np.abs(other.pull(ids, is_test=True)).sum(axis=1) > 0, admitted)


def test_entry_objects_speak_paddles_names_and_check_their_arguments():
    assert ProbabilityEntry(0.1).to_spec() == ("probability", 0.1)
    assert CountFilterEntry(10).to_spec() == ("count_filter", 10)
    assert ShowClickEntry("show", "click").to_spec() == ("show_click", "show", "click")
    assert entry_from_spec(("none",)) is None
    assert isinstance(entry_from_spec(("count_filter", 2)), CountFilterEntry)
    for bad in (lambda: ProbabilityEntry(0), lambda: ProbabilityEntry(1.5), lambda: CountFilterEntry(-1),
                lambda: CountFilterEntry(2.0), lambda: ShowClickEntry(1, "c"), lambda: entry_from_spec(("lru", 3))):
        with pytest.raises(ValueError):
            bad()


def test_geo_add_and_state_round_trip():
    rule = Rule.make("adam", 0.01)
    spec = SparseSpec("emb", 3, entry=("count_filter", 2))
    table = SparseTable(spec, rule)
    ids = np.arange(50, dtype=np.int64) * 13
    table.pull(ids)
    table.pull(ids[:30])
    table.push(ids[:10], np.ones((10, 3), np.float32))
    before = table.pull(ids[:30], is_test=True)
    table.add(ids[5:15], np.full((10, 3), 0.5, np.float32))
    np.testing.assert_allclose(table.pull(ids[5:15], is_test=True), before[5:15] + 0.5, rtol=1e-6)
    state = table.state()
    assert set(state) == {"ids", "values", "moment1", "moment2", "step", "entry_ids", "entry_sights"}
    assert sorted(state["entry_ids"].tolist()) == sorted(ids[30:].tolist()) and (state["entry_sights"] == 1).all()
    copy = SparseTable(spec, rule)
    copy.load_state({k: np.array(v) for k, v in state.items()})
    np.testing.assert_array_equal(copy.pull(ids[:30], is_test=True), table.pull(ids[:30], is_test=True))
    copy.pull(ids[30:31])  # its second sight: admitted now
    assert len(copy) == 31
    for t in (copy, table):
        t.push(ids[:3], np.ones((3, 3), np.float32))
    np.testing.assert_array_equal(copy.pull(ids[:3]), table.pull(ids[:3]))


def test_bad_shapes_raise_clearly():
    table = SparseTable(SparseSpec("emb", 3), Rule.make("sgd", 0.1))
    with pytest.raises(ValueError, match=r"grads shape \(2, 4\) must be \(2, 3\)"):
        table.push(np.array([1, 2]), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="integers"):
        table.pull(np.array([1.0]))
    with pytest.raises(ValueError, match="block's"):
        DenseBlock(Block("w", 0, 0, 0, 2, (2, 3), (2, 3)), np.zeros((3, 3)), Rule.make("sgd", 0.1))


def test_id_index_grows_and_finds_every_id():
    from globaltensor.ps._idindex import IdIndex
    rng = np.random.default_rng(5)
    edge = np.array([0, -1, 1, 2**63 - 1, -(2**63)], dtype=np.int64)
    ids = np.unique(np.concatenate([edge, rng.integers(-2**63, 2**63 - 1, 50000, dtype=np.int64),
                                    np.arange(20000, dtype=np.int64) << 20]))  # a regular stride too
    rng.shuffle(ids)
    index = IdIndex()
    rows = np.concatenate([index.insert(chunk) for chunk in np.array_split(ids, 37)])
    np.testing.assert_array_equal(rows, np.arange(ids.size))
    np.testing.assert_array_equal(index.lookup(ids), np.arange(ids.size))
    np.testing.assert_array_equal(index.ids, ids)
    absent = np.setdiff1d(rng.integers(-2**63, 2**63 - 1, 1000, dtype=np.int64), ids)
    assert (index.lookup(absent) == -1).all() and index.lookup(np.zeros(0, np.int64)).size == 0


@pytest.mark.parametrize("rule", [Rule.make("sgd", 0.1), Rule.make("adam", 0.01)], ids=["sgd", "adam"])
def test_pushes_after_pulls_and_push_parts_equal_a_fresh_table_pushed_by_id(rule):
    """A push reuses the rows of a recent pull of the same ids (even when the caller's array changed since), and
    push_parts (sync: every trainer's part of a step) equals one push of the summed gradients."""
    spec = SparseSpec("emb", 3, entry=("count_filter", 2))
    rng = np.random.default_rng(1)
    fast, slow = SparseTable(spec, rule), SparseTable(spec, rule)
    for step in range(4):
        a = rng.integers(0, 40, 25)
        b = rng.integers(0, 40, 25)
        ids_a = np.unique(a)
        for table in (fast, slow):
            table.pull(ids_a)
            table.pull(np.unique(b))
        reused = ids_a.copy()
        ids_a[:] = ids_a[::-1]  # the caller reuses its array: the table must not see the change
        ga = rng.standard_normal((len(reused), 3)).astype(np.float32)
        gb = rng.standard_normal((len(b), 3)).astype(np.float32)
        if step % 2:
            fast.push(reused, ga)
            slow._recent.clear()
            slow.push(reused, ga)
        else:
            fast.push_parts([(reused, ga), (b, gb)], 0.5)
            ids = np.concatenate([reused, b])
            grads = np.concatenate([ga, gb])
            for i in np.unique(ids):  # the reference: one id at a time, no cache
                slow._recent.clear()
                slow.push(np.array([i]), grads[ids == i].sum(axis=0, keepdims=True) * np.float32(0.5))
    np.testing.assert_allclose(fast.pull(np.arange(40)), slow.pull(np.arange(40)), rtol=1e-6, atol=1e-7)
    assert len(fast) == len(slow) > 0


@pytest.mark.parametrize("hold_a_view", [False, True], ids=["in_place", "copied"])
def test_growth_keeps_rows_and_starts_new_rows_fresh(hold_a_view):
    """The rows grow in place (realloc), or by a copy while a caller still views them; either way old rows and
    their state are kept, new rows start with the rule's fresh state, and capacity stays within 1.25x + a batch."""
    spec = SparseSpec("emb", 4)
    table = SparseTable(spec, Rule.make("adagrad", 0.1, initial_accumulator=0.25))
    table.pull(np.arange(1000))
    table.push(np.arange(10), np.ones((10, 4), np.float32))
    before = {k: np.array(v, copy=True) for k, v in table.state().items()}
    held = table.state() if hold_a_view else None
    for start in range(1000, 9000, 500):
        table.pull(np.arange(start, start + 500))
    after = table.state()
    np.testing.assert_array_equal(after["values"][:1000], before["values"])
    np.testing.assert_array_equal(after["moment"][:1000], before["moment"])
    np.testing.assert_array_equal(after["moment"][1000:], np.full((8000, 4), 0.25, np.float32))
    np.testing.assert_array_equal(after["values"][1000:], seeded_rows(spec, np.arange(1000, 9000)))
    assert table._store.shape[0] <= 1.25 * 8500 + 500
    if held is not None:
        np.testing.assert_array_equal(held["values"], before["values"])  # the old view still reads the old rows
