"""gt.Generator as torch.Generator: seed + counter streams, state save/restore, generator= everywhere."""
import inspect

import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks


def test_generator_surface_as_torch():
    g = gt.Generator(device="cpu")
    assert g.manual_seed(7) is g and g.initial_seed() == 7 and g.device.type == "cpu"
    assert isinstance(gt.manual_seed(5), gt.Generator) and gt.manual_seed(5) is gt.default_generator
    assert gt.initial_seed() == 5
    s = gt.seed()
    assert gt.initial_seed() == s
    state = gt.get_rng_state()
    assert state.dtype == gt.uint8 and state.ndim == 1
    tg = torch.Generator(device="cpu")
    for name in ("manual_seed", "seed", "initial_seed", "get_state", "set_state"):
        assert callable(getattr(g, name)) and callable(getattr(tg, name))
    assert gt.manual_seed(-1).initial_seed() == torch.manual_seed(-1).initial_seed()  # two's complement
    with pytest.raises(TypeError, match="Generator"):
        gt.rand(2, generator=1)


def test_same_seed_same_stream_and_independent_of_default():
    a, b = gt.Generator().manual_seed(11), gt.Generator().manual_seed(11)
    gt.manual_seed(0)
    x1 = gt.randn(3, 4, generator=a)
    gt.rand(5)  # a draw from the default generator does not move a or b
    x2 = gt.randn(3, 4, generator=b)
    assert np.array_equal(x1.numpy(), x2.numpy())
    gt.manual_seed(11)
    assert np.array_equal(gt.randn(3, 4).numpy(), x1.numpy())  # the default is a generator like the others
    assert not np.array_equal(gt.randn(3, 4, generator=a).numpy(), x1.numpy())  # the counter advanced


def test_state_save_restore_replays():
    g = gt.Generator().manual_seed(3)
    gt.rand(2, generator=g)
    state = g.get_state()
    first = [gt.rand(4, generator=g).numpy(), gt.randint(0, 9, (5,), generator=g).numpy()]
    g.set_state(state)
    again = [gt.rand(4, generator=g).numpy(), gt.randint(0, 9, (5,), generator=g).numpy()]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    saved = gt.get_rng_state()
    u = gt.rand(3).numpy()
    gt.set_rng_state(saved)
    assert np.array_equal(gt.rand(3).numpy(), u)
    with pytest.raises(ValueError, match="uint8"):
        g.set_state(gt.zeros(16))


def _draws(g):
    x = gt.ones(4, 6) * 0.5
    return [gt.rand(3, 5, generator=g), gt.randn(4, generator=g), gt.randint(0, 100, (6,), generator=g),
            gt.randperm(7, generator=g), gt.normal(1.0, 2.0, (3,), generator=g), gt.uniform((3,), -1, 1, generator=g),
            gt.bernoulli(x, generator=g), gt.multinomial(x, 2, generator=g),
            gt.multinomial(x, 3, replacement=True, generator=g)]


def test_every_factory_and_op_takes_generator():
    first = [t.numpy() for t in _draws(gt.Generator().manual_seed(42))]
    again = [t.numpy() for t in _draws(gt.Generator().manual_seed(42))]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    w, v = gt.empty(4, 5), gt.empty(4, 5)
    for init in ("uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_"):
        assert "generator" in inspect.signature(getattr(torch.nn.init, init)).parameters
        getattr(gt.nn.init, init)(w, generator=gt.Generator().manual_seed(1))
        getattr(gt.nn.init, init)(v, generator=gt.Generator().manual_seed(1))
        assert np.array_equal(w.numpy(), v.numpy())


def test_in_place_methods_take_generator_as_torch():
    for name in ("uniform_", "normal_", "bernoulli_"):
        assert "generator" in getattr(torch.Tensor, name).__doc__ and "generator" in str(
            inspect.signature(getattr(gt.Tensor, name)))
    g = gt.Generator().manual_seed(1)
    a = gt.empty(5).uniform_(2, 3, generator=g).numpy()
    b = gt.empty(5).normal_(1, 2, generator=g).numpy()
    c = gt.zeros(4000, dtype=gt.int64).bernoulli_(0.3, generator=g).numpy()
    g.manual_seed(1)
    assert np.array_equal(a, gt.uniform((5,), 2, 3, generator=g).numpy())
    assert np.array_equal(b, gt.normal(1.0, 2.0, (5,), generator=g).numpy())
    assert c.dtype == np.int64 and abs(c.mean() - 0.3) < 0.03
    assert gt.empty(3).uniform_(**{"from": 5, "to": 6}).numpy().min() >= 5
    with pytest.raises(RuntimeError, match="in-place"):
        gt.ones(2, requires_grad=True).uniform_()


def test_kaiming_as_torch():
    """Same bounds as PyTorch's (a=0 default, mode, nonlinearity): compare the spread of many draws."""
    w = gt.empty(400, 300)
    gt.nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu")
    bound = np.sqrt(2.0) * np.sqrt(3.0 / 400)
    assert abs(np.abs(w.numpy()).max() - bound) < 1e-3 * bound + 1e-4


def _on_two_ranks():
    pl = gt.placement("cpu", [0, 1])
    g = gt.Generator().manual_seed(9)
    out = [gt.randn(6, 4, placement=pl, sbp=gt.sbp.split(0), generator=g).numpy(),
           gt.rand(5, 3, placement=pl, sbp=gt.sbp.split(1), generator=g).numpy(),
           gt.randperm(8, placement=pl, sbp=gt.sbp.broadcast, generator=g).numpy(),
           gt.empty(6, placement=pl, sbp=gt.sbp.split(0)).uniform_(generator=g).numpy()]
    state = g.get_state()
    out.append(gt.randn(6, placement=pl, sbp=gt.sbp.split(0), generator=g).numpy())
    g.set_state(state)
    out.append(gt.randn(6, placement=pl, sbp=gt.sbp.broadcast, generator=g).numpy())
    return out


def test_same_values_on_every_rank_and_layout():
    got = run_ranks(_on_two_ranks, 2, timeout=120)
    g = gt.Generator().manual_seed(9)
    local = [gt.randn(6, 4, generator=g).numpy(), gt.rand(5, 3, generator=g).numpy(), gt.randperm(8, generator=g).numpy(),
             gt.empty(6).uniform_(generator=g).numpy(), gt.randn(6, generator=g).numpy()]
    for rank in got:
        for x, y in zip(rank[:5], local):
            assert np.array_equal(x, y)
        assert np.array_equal(rank[5], local[4])  # restored state replays, in another layout
