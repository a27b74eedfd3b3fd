"""Program -> program passes (issue 29): prune to fetch targets, clone(for_test=True), split by
role with send/recv instructions on 2 ranks, composition with the planning passes, Paddle's block view."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from graph_models import TrainGraph
from globaltensor.graph import passes, runnable

S0, B = gt.sbp.split(0), gt.sbp.broadcast


def _traced_two_outputs():
    w = gt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 5)

    @gt.jit.trace
    def f(x):
        h = gt.matmul(x, w)
        return h.relu().sum(dim=1), (h * h).exp()

    x = gt.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    return f, x, w


def test_prune_keeps_what_a_fetch_needs_and_composes_with_planning():
    f, x, w = _traced_two_outputs()
    full = f(x)
    program = f._cache()["last"]
    pruned = passes.prune(program, [program.outputs[0]])
    assert [i.name for i in pruned.instrs if i.kind == "op"] == ["matmul", "relu", "sum"]
    assert len(pruned.instrs) < len(program.unplanned().instrs)
    out = runnable(pruned).fn(x._local)
    assert len(out) == 1 and out[0].tobytes() == full[0].numpy().tobytes()
    assert program.unplanned().count("op", "exp") == 1  # the source program is unchanged
    ref = np.maximum(x.numpy() @ w.numpy(), 0).sum(1)
    np.testing.assert_allclose(out[0], ref, rtol=1e-6)
    with pytest.raises(KeyError, match="fetch target"):
        passes.prune(program, ["no_such_state"])


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1, self.relu, self.net2 = nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def _clone_for_test(dp):
    gt.manual_seed(0)
    model = _Model()
    kwargs = {}
    if dp:
        placement = gt.placement("cpu", [0, 1])
        model.to_global(placement, B)
        kwargs = {"placement": placement, "sbp": S0}
    step = TrainGraph(model, gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    x, y = gt.randn(8, 6, **kwargs), gt.randn(8, 4, **kwargs)
    step(x, y)
    program = step._cache()["last"]
    test = passes.clone(program, for_test=True)
    kinds = {i.kind for i in test.instrs}
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with gt.debug.count_collectives() as counted:
        loss = runnable(test).fn(x._local, y._local)[0]
    with gt.no_grad():
        eager = nn.functional.mse_loss(model(x), y)
    same = all(before[k].tobytes() == v.numpy().tobytes() for k, v in model.state_dict().items())
    full = passes.clone(program)
    return (sorted(kinds), loss.tobytes() == eager._local.tobytes(), same, dict(counted),
            len(full.instrs) == len(program.unplanned().instrs), test.collectives())


def test_clone_for_test_drops_backward_and_the_optimizer():
    kinds, equal, unchanged, counted, full_copy, planned = _clone_for_test(False)
    assert kinds == ["op", "read"] and equal and unchanged and full_copy and planned == []


def test_clone_for_test_on_two_ranks_has_no_gradient_all_reduce():
    for rank, (kinds, equal, unchanged, counted, full_copy, planned) in enumerate(run_ranks(_clone_for_test, 2, True)):
        assert "reduce" not in kinds and "update" not in kinds and equal and unchanged, rank
        assert "all_reduce" not in counted and "all_reduce" not in planned, (rank, counted, planned)


def _split_two_roles(path=None):
    rank = gt.env.get_rank()
    w = gt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 5)

    @gt.jit.trace
    def f(x):
        y = gt.matmul(x, w)  # the trainer's
        return y.relu() + 1.0  # the server's

    x = gt.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    f(x)
    program = f._cache()["last"].unplanned()
    cut = next(i for i, ins in enumerate(program.instrs) if ins.name == "relu")
    roles = {"trainer": [0], "server": [1]}
    parts = passes.split_by_role(program, roles, lambda i, ins: "server" if i >= cut else "trainer")
    mine = passes.insert_send_recv(parts, rank)
    run = runnable(mine)
    with gt.debug.count_collectives() as counted:
        out = run.fn(x._local)
    if path is not None:
        gt.graph.export(mine, None, path)  # each rank writes its role's program
    return (passes.role_of(roles, rank), mine.collectives(), dict(counted), [o.tolist() for o in out],
            mine.report["insert_send_recv"], mine.text())


def test_a_program_split_into_two_roles_exchanges_a_tensor_by_send_and_recv():
    (role0, coll0, counted0, out0, rep0, text0), (role1, coll1, counted1, out1, rep1, text1) = \
        run_ranks(_split_two_roles, 2)
    assert (role0, role1) == ("trainer", "server")
    assert coll0 == ["send"] and coll1 == ["recv"]
    assert rep0 == {"sends": 1, "recvs": 0} and rep1 == {"sends": 0, "recvs": 1}
    assert "send(" in text0 and "peer" in text0 and "recv()" in text1
    assert counted0 == {"send": 1} and "all_reduce" not in counted1  # (the debug counter counts the sending side)
    assert out0 == []  # the trainer makes no output of the program
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 5
    np.testing.assert_array_equal(np.asarray(out1[0], np.float32), np.maximum(x @ w, 0) + np.float32(1.0))


def test_split_by_role_checks_its_roles():
    f, x, _ = _traced_two_outputs()
    f(x)
    program = f._cache()["last"]
    with pytest.raises(ValueError, match="is in roles"):
        passes.split_by_role(program, {"a": [0], "b": [0]}, lambda i, ins: "a")
    with pytest.raises(ValueError, match="not one of"):
        passes.split_by_role(program, {"a": [0]}, lambda i, ins: "c")


def test_paddle_block_view_names_ops_as_paddle_prints_them():
    gt.manual_seed(0)
    model = _Model()
    step = TrainGraph(model, gt.optim.SGD(model.parameters(), lr=0.1))
    step(gt.randn(8, 6), gt.randn(8, 4))
    block = step._cache()["last"].unplanned().global_block()
    types = [op.type for op in block.ops]
    # paddle.nn.Linear as Paddle 3.3.1's static Program records it: matmul_v2, then elementwise_add
    assert types[:5] == ["matmul_v2", "elementwise_add", "relu", "matmul_v2", "elementwise_add"]
    # F.mse_loss as Paddle 3.3.1 records it: elementwise_sub, square, reduce_mean (PADDLE_SEQUENCES)
    assert types[5:8] == ["elementwise_sub", "square", "reduce_mean"] and types.count("sgd") == 4
    assert "transpose2" in types and "reduce_sum" in types
    matmul, add = block.ops[:2]
    assert matmul.input_arg_names == ["feed_0", "model.net1.weight"]
    assert add.input_arg_names == matmul.output_arg_names + ["model.net1.bias"]
    assert add.output_arg_names[0].startswith("tmp_")
    transpose = next(op for op in block.ops if op.type == "transpose2")
    assert transpose.attr("perm") == (1, 0) and transpose.attr_names == ["perm"]
    with pytest.raises(ValueError, match="no attribute"):
        transpose.attr("axis")
    sgd = next(op for op in block.ops if op.type == "sgd")
    assert sgd.output_arg_names == ["model.net1.weight"]
    assert "elementwise_add(inputs" in repr(block)


def _load_role_program(path):
    loaded = gt.graph.load(path)
    out = loaded(gt.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)))
    return loaded.data.collectives(), [o.numpy().tolist() for o in (out if isinstance(out, tuple) else (out,))]


def test_role_programs_with_send_and_recv_save_and_load_in_new_processes(tmp_path):
    path = str(tmp_path / "roles")
    first = run_ranks(_split_two_roles, 2, path)
    (coll0, out0), (coll1, out1) = run_ranks(_load_role_program, 2, path)
    assert coll0 == ["send"] and coll1 == ["recv"] and out0 == []
    assert out1[0] == first[1][3][0]


def test_a_program_written_as_data_gets_its_calls_rebuilt_and_runs():
    """Part S's contract: Reg/Instr built from data (fn None), rebuild() makes every call."""
    from globaltensor.graph import Instr, Program, ProgramState, Reg
    from globaltensor.graph.rebuild import rebuild
    from globaltensor.tensor import Layout
    placement = gt.placement("cpu", [0])
    lay = Layout.of((2, 3), gt.float32, placement, (B,))
    wl = Layout.of((3, 4), gt.float32, placement, (B,))
    out = Layout.of((2, 4), gt.float32, placement, (B,))
    regs = [Reg(0, "input", lay, None, (2, 3), np.float32), Reg(1, "state", wl, None, (3, 4), np.float32),
            Reg(2, "value", out, None, (2, 4), np.float32), Reg(3, "value", out, None, (2, 4), np.float32)]
    instrs = [Instr("read", "w", None, [], [1]), Instr("op", "matmul", None, [0, 1], [2]),
              Instr("op", "relu", None, [2], [3])]
    program = Program(regs, instrs, [0], [3], "by hand")
    w = gt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) - 5).to_global(placement, B)
    rebuild(program, ProgramState({"w": w}), 0)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    got = runnable(program).fn(x)[0]
    np.testing.assert_array_equal(got, np.maximum(x @ w.numpy(), 0))
    assert [op.type for op in program.global_block().ops] == ["matmul_v2", "relu"]
