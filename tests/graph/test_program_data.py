"""Programs are data (issue 29): a trained nn.Graph's program saved after 3 steps and loaded in new
processes (1 and 2 ranks, no model class there) gives the next losses bitwise; the format round-trips."""
import json
import os

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from graph_models import ToyModel, TrainGraph

S0, B = gt.sbp.split(0), gt.sbp.broadcast


def _batches(dp):
    gt.manual_seed(1)
    kwargs = {"placement": gt.placement("cpu", list(range(gt.env.get_world_size()))), "sbp": S0} if dp else {}
    return [(gt.randn(12, 10, **kwargs), gt.randn(12, 16, **kwargs)) for _ in range(6)]


def _train_and_save(path, optimizer, dp, dropout=0.0, tp=False):
    gt.manual_seed(0)
    model = ToyModel(dropout)
    if dp:
        model.to_global(gt.placement("cpu", list(range(gt.env.get_world_size()))), B)
    if tp:  # tensor parallel: split weights, boxing conversions in the program (replanned on load)
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=S0))
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=S0))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=gt.sbp.split(1)))
    opt = gt.optim.Adam(model.parameters(), lr=0.01) if optimizer == "adam" else \
        gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = TrainGraph(model, opt)
    batches = _batches(dp)
    for x, y in batches[:3]:
        step(x, y)
    gt.jit.save(step, path)
    text = step.program(rank=gt.env.get_rank())
    return [step(x, y).numpy().tolist() for x, y in batches[3:]], text


def _load_and_run(path, dp):
    loaded = gt.jit.load(path)
    losses = [loaded(x, y).numpy().tolist() for x, y in _batches(dp)[3:]]
    return losses, sorted(n for n, _ in loaded.named_parameters()), loaded.program(rank=gt.env.get_rank())


@pytest.mark.parametrize("optimizer,dropout", [("adam", 0.25), ("sgd", 0.0)])
def test_a_program_saved_after_three_steps_runs_on_in_a_new_process_bitwise(tmp_path, optimizer, dropout):
    path = str(tmp_path / "step")
    expected, text_before = run_ranks(_train_and_save, 1, path, optimizer, False, dropout)[0]
    losses, names, text = run_ranks(_load_and_run, 1, path, False)[0]
    assert losses == expected
    assert text == text_before  # the rank's program printed from the loaded data is the same
    assert names == ["model.net1.bias", "model.net1.weight", "model.net2.bias", "model.net2.weight"]
    assert "_update(" in text and "check_gradients_cleared" in text
    assert ("draw" in text) == (dropout > 0)  # dropout's draws continue the saved stream
    index = json.load(open(os.path.join(path, "program.json")))
    assert index["format"] == "globaltensor.program" and index["version"] == 1 and index["world_size"] == 1
    assert os.path.exists(os.path.join(path, "rank0.safetensors"))


def test_a_data_parallel_program_saved_on_two_ranks_loads_on_two_new_ranks_bitwise(tmp_path):
    path = str(tmp_path / "dp")
    expected = run_ranks(_train_and_save, 2, path, "adam", True, 0.25)
    loaded = run_ranks(_load_and_run, 2, path, True)
    for rank in range(2):
        assert loaded[rank][0] == expected[rank][0], f"rank {rank}"
        assert "all_reduce_start" in loaded[rank][2]  # the loaded program is planned again: bucketed
        assert loaded[rank][2] == expected[rank][1]
    assert expected[0][0] == expected[1][0]


def test_a_tensor_parallel_program_saved_on_two_ranks_loads_bitwise(tmp_path):
    path = str(tmp_path / "tp")
    expected = run_ranks(_train_and_save, 2, path, "sgd", True, 0.0, True)
    loaded = run_ranks(_load_and_run, 2, path, True)
    for rank in range(2):
        assert loaded[rank][0] == expected[rank][0], f"rank {rank}"
        assert "to_global" in loaded[rank][2]  # conversions replanned from their layouts
        assert loaded[rank][2] == expected[rank][1]


def _save_method_and_graph_save_agree(path):
    @gt.jit.trace
    def f(x):
        return (x * 3.0).exp()

    x = gt.ones(2, 2)
    f(x)
    program = f._cache()["last"]
    program.save(path + "/a")
    gt.graph.save(program, path + "/b")
    return [gt.graph.load(path + p)(x).numpy().tolist() for p in ("/a", "/b")]


def test_program_save_and_graph_save_write_the_same_program(tmp_path):
    a, b = _save_method_and_graph_save_agree(str(tmp_path))
    assert a == b == [[float(np.exp(np.float32(3.0)))] * 2] * 2


def _resave(path):
    loaded = gt.jit.load(path + "/a")
    batches = _batches(False)
    loaded(*batches[3])
    gt.jit.save(loaded, path + "/b")  # a loaded program saved again: its state and stream as they stand
    again = gt.jit.load(path + "/b")
    return [loaded(x, y).numpy().tolist() for x, y in batches[4:]], [again(x, y).numpy().tolist() for x, y in batches[4:]]


def test_a_loaded_program_saved_again_continues_alike(tmp_path):
    path = str(tmp_path)
    run_ranks(_train_and_save, 1, path + "/a", "adam", False, 0.25)
    first, second = run_ranks(_resave, 1, path)[0]
    assert first == second


def test_loading_on_another_world_size_or_a_missing_path_says_so(tmp_path):
    path = str(tmp_path / "one")
    run_ranks(_train_and_save, 2, path, "sgd", True)
    with pytest.raises(ValueError, match="saved by 2 ranks; this job has 1"):
        gt.graph.load(path)
    with pytest.raises(FileNotFoundError, match="no saved program"):
        gt.graph.load(str(tmp_path / "nothing"))


def test_a_traced_function_exports_and_loads_in_process(tmp_path):
    w = gt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 7)

    @gt.jit.trace
    def f(x):
        return (gt.matmul(x, w).relu() * 2.0).sum(dim=1), x[:, 1:]

    x = gt.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    want = f(x)
    want = f(x)  # a replay
    gt.jit.save(f, str(tmp_path / "f"))
    got = gt.jit.load(str(tmp_path / "f"))(x)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b in zip(want, got):
        assert a.numpy().tobytes() == b.numpy().tobytes()
    ref = np.maximum(x.numpy() @ w.numpy(), 0) * 2.0
    np.testing.assert_allclose(got[0].numpy(), ref.sum(1), rtol=1e-6)
    with pytest.raises(ValueError, match="input 0 must be"):
        gt.jit.load(str(tmp_path / "f"))(gt.ones(3, 3))


def test_values_of_every_kind_round_trip_through_the_manifest_encoding():
    from globaltensor.graph.serialize import decode, encode
    value = {"a": (1, 2.5, None), "s": slice(1, None, 2), "e": Ellipsis, "d": gt.float32, "n": float("nan"),
             "p": gt.placement("cpu", [0]), "b": (S0, B), "arr": np.arange(3, dtype=np.int32), 3: [True, "x"]}
    back = decode(json.loads(json.dumps(encode(value))))
    assert back["a"] == (1, 2.5, None) and back["s"] == slice(1, None, 2) and back["e"] is Ellipsis
    assert back["d"] is gt.float32 and np.isnan(back["n"]) and back["p"] == gt.placement("cpu", [0])
    assert back["b"] == (S0, B) and back["arr"].dtype == np.int32 and back[3] == [True, "x"]
    with pytest.raises(TypeError, match="cannot describe"):
        encode({"f": lambda: 0}, "op x")


def _traced_step(with_scheduler):
    gt.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    sched = gt.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    @gt.jit.trace
    def step(x):
        loss = model(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()  # a module's / optimizer's zero_grad(set_to_none=True): saved as data
        if with_scheduler:
            sched.step()  # a scheduler's step: Python code
        return loss

    return step, model


def test_a_step_that_is_python_code_refuses_to_save(tmp_path):
    step, _ = _traced_step(True)
    step(gt.ones(4, 3))
    with pytest.raises(ValueError, match="StepLR.step.*cannot carry as data"):
        gt.jit.save(step, str(tmp_path / "s"))
    assert not os.path.exists(tmp_path / "s")


def test_zero_grad_inside_a_traced_step_saves_and_clears_the_loaded_gradients(tmp_path):
    step, model = _traced_step(False)
    x = gt.ones(4, 3)
    step(x)
    gt.jit.save(step, str(tmp_path / "z"))
    want = [step(x).numpy().tolist() for _ in range(2)]
    loaded = gt.jit.load(str(tmp_path / "z"))
    assert [loaded(x).numpy().tolist() for _ in range(2)] == want
    assert all(p.grad is None for p in loaded.parameters())
    saved = [t.numpy().tobytes() for t in loaded.state_dict().values()]
    assert model.weight.numpy().tobytes() in saved and model.bias.numpy().tobytes() in saved


def test_layout_hints_of_a_kernel_are_saved_and_a_gradient_of_a_call_input_refuses(tmp_path):
    from globaltensor.tensor import Tensor
    gt.manual_seed(0)
    m1, m2 = nn.Linear(5, 4), nn.Linear(4, 3)
    x = Tensor(np.asfortranarray(np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)))
    x.requires_grad_(True)  # state in column-major memory: its gradient's matmul is told order="F"
    opt = gt.optim.SGD(list(m1.parameters()) + list(m2.parameters()) + [x], lr=0.1)

    @gt.jit.trace
    def step(s):
        loss = (m2(m1(x).relu()) ** 2).sum() * s
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    s = gt.tensor(np.float32(1.0))
    step(s)
    gt.jit.save(step, str(tmp_path / "h"))
    want = [step(s).numpy().tolist() for _ in range(3)]
    loaded = gt.jit.load(str(tmp_path / "h"))
    assert [i.hints for i in loaded.data.instrs if i.hints] == [{"order": "F"}]
    assert [loaded(s).numpy().tolist() for _ in range(3)] == want

    @gt.jit.trace
    def grads_of_input(y):
        (y * 2.0).sum().backward()
        return y

    y = gt.ones(2, 2, requires_grad=True)
    grads_of_input(y)
    with pytest.raises(ValueError, match="gradient of a tensor the call passes in"):
        gt.jit.save(grads_of_input, str(tmp_path / "g"))
