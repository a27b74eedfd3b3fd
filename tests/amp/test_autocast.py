"""gt.autocast against torch.autocast (CPU, bfloat16): output dtypes and values op by op, gradients,
context-local state, the lists' soundness, and split inputs on 2 ranks."""
import threading

import numpy as np
import pytest
from lazy_torch import torch, torch_functional

import globaltensor as gt
from conftest import run_ranks
from globaltensor.amp import lists
from globaltensor.dispatch import AMP_ENTRIES
from globaltensor.registry import REGISTRY

F, TF = gt.nn.functional, torch_functional
BF16_RTOL = 2 ** -7  # one bfloat16 ulp of rounding either side


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((6, 8)).astype(np.float32), "w": rng.standard_normal((5, 8)).astype(np.float32),
            "b": rng.standard_normal(5).astype(np.float32), "t": rng.integers(0, 5, 6),
            "img": rng.standard_normal((2, 3, 6, 6)).astype(np.float32),
            "k": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)}


# (name, gt program, torch program): each takes the module of functions (F / TF), a tensor maker and the data
CASES = [
    ("linear", lambda f, T, d: f.linear(T(d["x"]), T(d["w"]), T(d["b"]))),
    ("matmul", lambda f, T, d: T(d["x"]) @ T(d["w"]).T),
    ("conv2d", lambda f, T, d: f.conv2d(T(d["img"]), T(d["k"]), padding=1)),
    ("softmax of linear", lambda f, T, d: f.softmax(f.linear(T(d["x"]), T(d["w"])), dim=-1)),
    ("softmax of float32", lambda f, T, d: f.softmax(T(d["x"]), dim=-1)),
    ("log_softmax of linear", lambda f, T, d: f.log_softmax(f.linear(T(d["x"]), T(d["w"])), dim=-1)),
    ("cross_entropy", lambda f, T, d: f.cross_entropy(f.linear(T(d["x"]), T(d["w"])), T(d["t"]))),
    ("mse_loss", lambda f, T, d: f.mse_loss(f.linear(T(d["x"]), T(d["w"])), T(d["x"][:, :5]))),
    ("relu of linear", lambda f, T, d: f.relu(f.linear(T(d["x"]), T(d["w"])))),
    ("sum of linear", lambda f, T, d: f.linear(T(d["x"]), T(d["w"])).sum()),
    ("linear plus float32", lambda f, T, d: f.linear(T(d["x"]), T(d["w"])) + T(d["x"][:, :5])),
]


@pytest.mark.parametrize("name,program", CASES, ids=[c[0] for c in CASES])
def test_op_dtypes_and_values_as_torch_autocast_cpu_bfloat16(name, program):
    d = _data()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = program(TF, torch.tensor, d)
    with gt.autocast("cpu", dtype=gt.bfloat16):
        got = program(F, gt.tensor, d)
    assert got.dtype.name == str(want.dtype).split(".")[1], name
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 * BF16_RTOL, atol=2e-2)


def test_gradients_come_back_in_the_parameters_float32():
    d = _data(1)
    w, tw = gt.tensor(d["w"], requires_grad=True), torch.tensor(d["w"], requires_grad=True)
    with gt.autocast("cpu"):
        loss = F.cross_entropy(F.linear(gt.tensor(d["x"]), w), gt.tensor(d["t"]))
    with torch.autocast("cpu"):
        tloss = TF.cross_entropy(TF.linear(torch.tensor(d["x"]), tw), torch.tensor(d["t"]))
    loss.backward()
    tloss.backward()
    assert w.grad.dtype == gt.float32 and loss.dtype == gt.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=4 * BF16_RTOL, atol=1e-2)


def test_nesting_decorator_and_threads_keep_their_own_state():
    x, w = gt.randn(3, 4), gt.randn(2, 4)
    seen = []
    with gt.autocast("cpu", dtype=gt.bfloat16):
        assert F.linear(x, w).dtype == gt.bfloat16 and gt.amp.is_autocast_enabled("cpu")
        with gt.autocast("cpu", enabled=False):
            assert F.linear(x, w).dtype == gt.float32
        with gt.autocast("cpu", dtype=gt.float16):
            assert F.linear(x, w).dtype == gt.float16
        thread = threading.Thread(target=lambda: seen.append(F.linear(x, w).dtype))
        thread.start()
        thread.join(30)
        assert F.linear(x, w).dtype == gt.bfloat16
    assert seen == [gt.float32] and not gt.amp.is_autocast_enabled()

    @gt.autocast("cpu")
    def f():
        return F.linear(x, w).dtype
    assert f() == gt.bfloat16 and F.linear(x, w).dtype == gt.float32


def test_cuda_policy_leaves_cpu_tensors_alone_and_bad_arguments_raise():
    x, w = gt.randn(3, 4), gt.randn(2, 4)
    with gt.autocast("cuda", dtype=gt.bfloat16):
        assert F.linear(x, w).dtype == gt.float32
    with pytest.raises(ValueError, match="device_type"):
        gt.autocast("tpu")
    with pytest.raises(ValueError, match="bfloat16 or gt.float16"):
        gt.autocast("cpu", dtype=gt.float64)


def test_every_listed_name_is_a_primitive_or_an_amp_entry():
    every = set(lists.CPU_LOWER + lists.CPU_FLOAT32 + lists.CUDA_LOWER + lists.CUDA_FLOAT32 + lists.PADDLE_WHITE
                + lists.PADDLE_BLACK)
    unknown = sorted(n for n in every if n not in REGISTRY and n not in AMP_ENTRIES)
    assert not unknown, f"autocast lists name ops gt has neither registered nor marked amp_entry: {unknown}"


def _split_inputs():
    d = _data(2)
    pl = gt.placement("cpu", [0, 1])
    x = gt.tensor(d["x"]).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    w = gt.tensor(d["w"]).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    t = gt.tensor(d["t"]).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    with gt.autocast("cpu", dtype=gt.bfloat16):
        y = F.linear(x, w)  # x S(0), w S(0): column pieces, bfloat16
        loss = F.cross_entropy(y, t)
    return {"y": (y.dtype.name, y.to_global(sbp=gt.sbp.broadcast).to_local().float().numpy()),
            "loss": (loss.dtype.name, float(loss.to_global(sbp=gt.sbp.broadcast).to_local().numpy()))}


def test_split_inputs_on_two_ranks_as_torch_autocast():
    d = _data(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = TF.linear(torch.tensor(d["x"]), torch.tensor(d["w"]))
        loss = TF.cross_entropy(y, torch.tensor(d["t"]))
    for got in run_ranks(_split_inputs, 2, timeout=180):
        assert got["y"][0] == "bfloat16" and got["loss"][0] == "float32"
        np.testing.assert_allclose(got["y"][1], y.float().numpy(), rtol=2 * BF16_RTOL, atol=1e-2)
        np.testing.assert_allclose(got["loss"][1], loss.item(), rtol=2e-3)
