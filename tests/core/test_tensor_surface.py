"""The tensor surface a OneFlow/PyTorch user touches before the math (issue 28): gt.device,
device= on the factories, gt.Size, the dtype aliases, gt.Tensor(...) and the typed tensor classes,
.data, retain_grad, new_*, global_id, Module.to_local and callable sbp values; against torch
where the behaviour is PyTorch's."""
import os
import pickle

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

try:
    if "RANK" in os.environ:
        raise ImportError
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


# --- 1. gt.device ------------------------------------------------------------------------------

def test_device_type_index_repr_str_and_equality():
    cpu, c0, c1 = gt.device("cpu"), gt.device("cuda:0"), gt.device("cuda", 1)
    assert (cpu.type, cpu.index, c0.type, c0.index, c1.type, c1.index) == ("cpu", 0, "cuda", 0, "cuda", 1)
    assert repr(cpu) == "device(type='cpu', index=0)" and repr(c1) == "device(type='cuda', index=1)"  # OneFlow's
    assert str(cpu) == "cpu:0" and str(c0) == "cuda:0"  # as OneFlow prints them
    # "cpu" and "cpu:0" name the one host device; a device equals the strings naming it, both ways
    assert cpu == "cpu" and cpu == "cpu:0" and "cpu" == cpu and cpu == gt.device("cpu:0")
    assert c0 == "cuda:0" and c0 != "cuda:1" and c0 != cpu and c0 != "cpu" and cpu != "gpu"
    assert gt.device(c1) == c1 and hash(gt.device("cuda", 1)) == hash(c1) and len({cpu, gt.device("cpu:0")}) == 1
    plain = gt.device("cuda")  # no index: PyTorch's "current device", equal only to "cuda"
    assert plain.index is None and plain == "cuda" and plain != c0 and repr(plain) == "device(type='cuda')"
    assert pickle.loads(pickle.dumps(c1)) == c1
    for bad in (lambda: gt.device("tpu"), lambda: gt.device("cuda:x"), lambda: gt.device("cuda:0", 1),
                lambda: gt.device("cpu", 1), lambda: gt.device("cuda", -1)):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(AttributeError):
        cpu.index = 3


@needs_torch
def test_device_matches_torch_where_pytorch_defines_it():
    for text in ("cuda:0", "cuda:3", "cuda"):
        assert repr(gt.device(text)) == repr(torch.device(text))
        assert gt.device(text).index == torch.device(text).index
    assert repr(gt.device("cuda", 2)) == repr(torch.device("cuda", 2))
    assert (torch.device("cuda") == torch.device("cuda:0")) == (gt.device("cuda") == gt.device("cuda:0"))


def test_local_tensor_device_and_to_device_object():
    x = gt.tensor([1.0, 2.0])
    assert isinstance(x.device, gt.device) and x.device == "cpu" and x.device.type == "cpu" and not x.is_cuda
    assert x.to(gt.device("cpu")) is x and x.to(x.device) is x and x.to(device=gt.device("cpu:0")) is x
    assert nn.Linear(2, 2).to(gt.device("cpu"), gt.float64).weight.dtype == gt.float64  # Module.to too


def test_factories_take_device_and_refuse_it_with_placement():
    cpu = gt.device("cpu")
    made = [gt.zeros(2, 3, device="cpu"), gt.ones(2, device=cpu), gt.full((2,), 3.0, device=cpu),
            gt.empty(2, device=cpu), gt.arange(3, device=cpu), gt.linspace(0, 1, 3, device=cpu),
            gt.eye(2, device=cpu), gt.rand(2, device=cpu), gt.randn(2, device=cpu),
            gt.randint(0, 5, (2,), device=cpu), gt.normal(0.0, 1.0, (2,), device=cpu),
            gt.uniform((2,), device=cpu), gt.tensor([1, 2], device=cpu)]
    x = made[0]
    made += [gt.zeros_like(x, device=cpu), gt.ones_like(x, device="cpu"), gt.full_like(x, 2, device=cpu),
             gt.empty_like(x, device=cpu)]
    assert all(t.is_local and t.device == cpu for t in made)
    pl = gt.placement("cpu", [0])
    with pytest.raises(ValueError, match="placement"):
        gt.zeros(2, device="cpu", placement=pl, sbp=gt.sbp.broadcast)
    with pytest.raises(ValueError, match="placement"):
        gt.zeros_like(x, device="cpu", placement=pl)
    with pytest.raises(ValueError):
        gt.zeros(2, device="tpu")


def _on_simulated_cuda():
    c = gt.zeros(2, 3, device="cuda")
    out = [c.device == "cuda:0", gt.rand(2, device=gt.device("cuda", 0)).device == "cuda:0",
           gt.tensor([1, 2], device="cuda").is_cuda, gt.zeros_like(c).device == "cuda:0",  # follows its input
           gt.zeros_like(c, device="cpu").device == "cpu", c.new_ones(3).device == "cuda:0",
           gt.ones(2).to(gt.device("cuda:0")).device == "cuda:0", gt.Tensor(2, device="cuda").is_cuda]
    return out


def test_device_cuda_on_the_simulated_gpu():
    assert all(run_ranks(_on_simulated_cuda, 1, env={"GLOBALTENSOR_CUDA_SIMULATE": "1"}, timeout=120)[0])


# --- 3. gt.Size --------------------------------------------------------------------------------

def test_size_is_a_tuple_with_numel():
    x = gt.zeros(2, 3)
    assert type(x.shape) is gt.Size and type(x.size()) is gt.Size and isinstance(x.shape, tuple)
    assert x.shape == (2, 3) and gt.Size([2, 3]) == (2, 3) and gt.Size([2, 3]).numel() == 6 and gt.Size().numel() == 1
    assert x.size(1) == 3 and x.shape[1:] == (3,) and x.shape[0] == 2 and repr(x.shape) == "gt.Size([2, 3])"
    assert gt.zeros(gt.Size([4, 1])).shape == (4, 1)
    if torch is not None:
        assert tuple(torch.Size([2, 3])) == tuple(gt.Size([2, 3])) and torch.Size([2, 3]).numel() == 6


# --- 4. dtype aliases --------------------------------------------------------------------------

def test_dtype_aliases_in_the_package_only():
    assert (gt.float, gt.double, gt.half, gt.long, gt.int, gt.char) == (gt.float32, gt.float64, gt.float16,
                                                                          gt.int64, gt.int32, gt.int8)
    assert gt.zeros(2, dtype=gt.long).dtype == gt.int64 and gt.tensor([1.0], dtype=gt.double).dtype == gt.float64
    from globaltensor import dtype as dtype_module
    assert "int" not in vars(dtype_module) and "float" not in vars(dtype_module)  # no module of ours shadows them
    if torch is not None:
        for name in ("float", "double", "half", "long", "int", "bool", "uint8", "int8", "bfloat16"):
            assert getattr(gt, name).name == str(getattr(torch, name)).split(".")[1]
    namespace = {}
    exec("from globaltensor import *", namespace)
    assert "float" not in namespace and "int" not in namespace  # the builtins stay the builtins


# --- 5. gt.Tensor(...) and the typed classes ---------------------------------------------------

@needs_torch
def test_tensor_constructor_forms_as_torch():
    data = np.arange(6).reshape(2, 3)
    for args in ((2, 4), ([1, 2],), (data,), ([[1.5, 2.0]],), ()):
        got, want = gt.Tensor(*args), torch.Tensor(*args)
        assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype).split(".")[1]
        if args and not isinstance(args[0], int):
            assert np.array_equal(got.numpy(), want.numpy())
    for name in ("FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor", "HalfTensor",
                 "ByteTensor", "CharTensor"):
        for args in ((3,), ([1, 0, 2],), (data,)):
            got, want = getattr(gt, name)(*args), getattr(torch, name)(*args)
            assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype).split(".")[1], (name, args)
            if not isinstance(args[0], int):
                assert np.array_equal(got.numpy(), want.numpy())
    assert gt.Tensor(gt.Size([2, 3])).shape == (2, 3)
    with pytest.raises(TypeError):
        gt.Tensor(2.5)


def test_isinstance_holds_for_every_tensor_and_the_core_constructor_is_untouched():
    from globaltensor.tensor import Tensor as Core
    x, i = gt.tensor([1.0]), gt.tensor([1])
    assert isinstance(x, gt.Tensor) and isinstance(Core(np.zeros(2)), gt.Tensor) and issubclass(Core, gt.Tensor)
    assert isinstance(i, gt.LongTensor) and not isinstance(x, gt.LongTensor) and isinstance(x, gt.FloatTensor)
    assert issubclass(gt.LongTensor, gt.Tensor) and not isinstance(np.zeros(2), gt.Tensor)
    piece = np.arange(3)
    wrapped = Core(piece)  # the internal form: wraps the piece as it is, no copy, no dtype change
    assert wrapped._local is piece and wrapped.dtype == gt.int64
    copied = gt.Tensor(piece)  # the user's form: a float copy, as torch.Tensor
    assert copied.dtype == gt.float32 and not np.shares_memory(copied._local, piece)
    assert gt.Tensor(x) is x and gt.LongTensor(x).dtype == gt.int64
    gt.Tensor._surface_probe = 7  # attributes set on gt.Tensor reach every tensor, as OneFlow's monkey-patching
    try:
        assert x._surface_probe == 7
    finally:
        del Core._surface_probe


# --- 6. .data, retain_grad, new_*, global_id ---------------------------------------------------

@needs_torch
def test_data_and_retain_grad_as_torch():
    vals = [1.0, 2.0, 3.0]
    results = []
    for lib in (gt, torch):
        x = lib.tensor(vals, requires_grad=True)
        y = x * 2
        y.retain_grad()
        z = (y * y).sum()
        z.retain_grad()
        z.backward()
        w = x * 3  # not retained: no .grad
        w.sum().backward()
        d = x.data
        assert lib is torch or w.grad is None  # a non-leaf not retained keeps no .grad
        results.append((y.grad.numpy().tolist(), z.grad.item(), x.grad.numpy().tolist(), w.retains_grad, d.requires_grad,
                        y.retains_grad, x.retains_grad))
    assert results[0] == results[1]
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    assert x.data._local is x._local
    x.data = gt.zeros(3)  # set: x takes the new piece and shape, keeps requires_grad
    assert x.shape == (3,) and x.requires_grad and np.array_equal(x.numpy(), np.zeros(3))
    assert (gt.tensor([1.0]) * 2).grad is None  # backward stores no non-leaf gradient unless retained
    with pytest.raises(RuntimeError):
        gt.tensor([1.0]).retain_grad()


@needs_torch
def test_new_methods_as_torch():
    for dtype in ("int64", "float64"):
        g, t = gt.tensor([1, 2], dtype=dtype), torch.tensor([1, 2], dtype=getattr(torch, dtype))
        for call in (lambda a: a.new_zeros(2, 3), lambda a: a.new_zeros((2,)), lambda a: a.new_ones(3),
                     lambda a: a.new_full((2, 2), 7), lambda a: a.new_empty(4),
                     lambda a: a.new_tensor([1.5, 2.5])):
            got, want = call(g), call(t)
            assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype).split(".")[1]
            if got.shape != (4,):  # new_empty's values are undefined
                assert np.array_equal(got.numpy(), want.numpy())
    assert gt.tensor([1]).new_zeros(2, dtype=gt.float32).dtype == gt.float32


def _global_surface():
    pl = gt.placement("cpu", [0, 1])
    x = gt.tensor(np.arange(8.0).reshape(4, 2), placement=pl, sbp=gt.sbp.split(0))
    out = {}
    n = x.new_zeros(6, 2)
    out["new_zeros"] = (n.placement == pl, n.sbp, n.to_local().shape, n.dtype.name)
    f = x.new_full((4,), 2.0, sbp=gt.sbp.broadcast())
    out["new_full"] = (f.sbp, f.to_local().numpy().tolist())
    loc = x.new_ones(3, device="cpu")
    made = gt.Tensor(4, 2, placement=pl, sbp=gt.sbp.split(0))  # OneFlow's global form of the constructor
    out["Tensor_global"] = (made.is_global, made.to_local().shape, made.dtype.name)
    out["new_ones_local"] = (loc.is_local, loc.shape)
    try:
        x.device
        out["device"] = "no error"
    except RuntimeError as exc:
        out["device"] = str(exc)
    y = x * 2
    out["global_id"] = (x.global_id(), y.global_id(), x.global_id())
    try:
        x.to_local().global_id()
    except RuntimeError:
        out["local_global_id"] = "raised"
    model = nn.Linear(2, 3).to_global(pl, gt.sbp.broadcast)
    model.to_local()
    out["module_to_local"] = (model.weight.is_local, isinstance(model.weight, nn.Parameter), model.weight.shape,
                              model.weight.requires_grad)
    out["sbp_calls"] = (gt.sbp.broadcast() is gt.sbp.broadcast, gt.sbp.partial_sum() is gt.sbp.partial_sum,
                        x.to_global(sbp=gt.sbp.broadcast()).sbp)
    return out


def test_global_surface_on_two_ranks():
    a, b = run_ranks(_global_surface, 2, timeout=180)
    assert a["new_zeros"] == (True, (gt.sbp.split(0),), (3, 2), "float64") and b["new_zeros"][2] == (3, 2)
    assert a["new_full"] == ((gt.sbp.broadcast,), [2.0] * 4) and a["new_ones_local"] == (True, (3,))
    assert a["Tensor_global"] == (True, (2, 2), "float32")
    assert a["device"] == "Only local tensors have 'device'. Please use '.placement' for global tensors."
    ids = a["global_id"]
    assert a["global_id"] == b["global_id"] and ids[0] == ids[2] and ids[0] != ids[1]  # same on every rank
    assert a["local_global_id"] == "raised"
    assert a["module_to_local"] == (True, True, (3, 2), True) == b["module_to_local"]
    assert a["sbp_calls"] == (True, True, (gt.sbp.broadcast,))


def test_from_numpy_shares_memory_and_keeps_the_dtype_as_torch():
    """gt.from_numpy(a), as torch.from_numpy: a local tensor over a's memory (writes show both ways),
    a's dtype kept (float64, int32, complex64 and bool as torch's); a non-array is a TypeError."""
    for dt in (np.float64, np.float32, np.int32, np.complex64, np.bool_):
        a = np.arange(4).astype(dt)
        t, ref = gt.from_numpy(a), torch.from_numpy(a.copy())
        assert t.is_local and t.shape == tuple(ref.shape) and str(t.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    a = np.arange(4.0)
    t = gt.from_numpy(a)
    a[0] = 9.0
    t.numpy()[1] = 7.0
    assert t.numpy().tolist() == a.tolist() == [9.0, 7.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="expected a numpy.ndarray"):
        gt.from_numpy([1.0, 2.0])
