"""Mixed precision in graph mode: OneFlow's nn.Graph.config.enable_amp + set_grad_scaler, and Paddle's
Strategy.amp for dist.to_static, each trained against torch's autocast (+ GradScaler) on the CPU."""
import numpy as np
import pytest
import torch

import globaltensor as gt
import globaltensor.paddle as gpaddle
import globaltensor.paddle.distributed as gdist

F = gt.nn.functional


def _data(seed=0, steps=4):
    rng = np.random.default_rng(seed)
    w, b = rng.standard_normal((4, 8)).astype(np.float32) * 0.5, rng.standard_normal(4).astype(np.float32) * 0.1
    batches = [(rng.standard_normal((6, 8)).astype(np.float32), rng.integers(0, 4, 6)) for _ in range(steps)]
    return w, b, batches


def _torch_run(w, b, batches, dtype, scaler=None, inf_at=(), lr=0.5):
    lin = torch.nn.Linear(8, 4)
    lin.load_state_dict({"weight": torch.tensor(w), "bias": torch.tensor(b)})
    opt = torch.optim.SGD(lin.parameters(), lr=lr)
    losses, scales = [], []
    for i, (x, t) in enumerate(batches):
        with torch.autocast("cpu", dtype=dtype):
            loss = torch.nn.functional.cross_entropy(lin(torch.tensor(x)), torch.tensor(t))
        (scaler.scale(loss) if scaler else loss).backward()
        if i in inf_at:
            lin.weight.grad[0, 0] = float("inf")
        if scaler:
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        else:
            opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, scales, lin.weight.detach().numpy()


class _AmpGraph(gt.nn.Graph):
    def __init__(self, lin, opt, scaler=None, inf_at=()):
        super().__init__()
        self.lin, self.inf_at, self.calls = lin, inf_at, 0
        self.add_optimizer(opt)
        self.config.enable_amp(True, dtype=gt.bfloat16)
        if scaler is not None:
            self.set_grad_scaler(scaler)

    def build(self, x, t):
        y = self.lin(x)
        loss = F.cross_entropy(y, t)
        loss.backward()
        if self.calls in self.inf_at:
            self.lin.weight.grad._local[0, 0] = np.inf
        self.calls += 1
        return y, loss


@pytest.mark.parametrize("with_scaler", [False, True])
def test_oneflow_graph_enable_amp_and_grad_scaler_as_torch(with_scaler):
    w, b, batches = _data()
    lin = gt.nn.Linear(8, 4)
    lin.load_state_dict({"weight": gt.tensor(w), "bias": gt.tensor(b)})
    opt = gt.optim.SGD(lin.parameters(), lr=0.5)
    inf_at = (1,) if with_scaler else ()
    scaler = gt.amp.GradScaler(init_scale=2.0 ** 10, growth_interval=2) if with_scaler else None
    graph = _AmpGraph(lin, opt, scaler, inf_at)
    losses, scales = [], []
    for x, t in batches:
        y, loss = graph(gt.tensor(x), gt.tensor(t))
        assert y.dtype == gt.bfloat16 and loss.dtype == gt.float32
        losses.append(float(loss.numpy()))
        scales.append(scaler.get_scale() if scaler else None)
    t_scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2) if with_scaler else None
    want, t_scales, t_w = _torch_run(w, b, batches, torch.bfloat16, t_scaler, inf_at)
    np.testing.assert_allclose(losses, want, rtol=1e-2)
    np.testing.assert_allclose(lin.weight.numpy(), t_w, rtol=2e-2, atol=2e-2)
    if with_scaler:
        assert scales == t_scales
    else:
        assert len(graph.captures) == 1  # captured once, replayed with its casts


def _to_static_losses(w, b, batches, **amp):
    lin = gpaddle.nn.Linear(8, 4)
    lin.set_state_dict({"weight": gpaddle.to_tensor(w.T.copy()), "bias": gpaddle.to_tensor(b)})  # Paddle: (in, out)
    opt = gpaddle.optimizer.SGD(learning_rate=0.5, parameters=lin.parameters())
    strategy = gdist.Strategy()
    strategy.amp.enable = True
    for k, v in amp.items():
        setattr(strategy.amp, k, v)
    model = gdist.to_static(lin, None, gpaddle.nn.CrossEntropyLoss(), opt, strategy)
    losses = [float(model(gpaddle.to_tensor(x), gpaddle.to_tensor(t)).numpy()) for x, t in batches]
    return losses, lin


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_strategy_amp_o1_trains_as_torch_autocast(dtype):
    w, b, batches = _data(1)
    losses, lin = _to_static_losses(w, b, batches, dtype=dtype, level="o1")
    t_scaler = torch.amp.GradScaler("cpu", init_scale=32768.0, growth_interval=1000) if dtype == "float16" else None
    want, _, t_w = _torch_run(w, b, batches, getattr(torch, dtype), t_scaler)
    np.testing.assert_allclose(losses, want, rtol=1e-2)
    np.testing.assert_allclose(lin.weight.numpy().T, t_w, rtol=2e-2, atol=2e-2)
    assert lin.weight.dtype.name == "float32"


def test_strategy_amp_o2_keeps_parameters_low_with_float32_masters():
    w, b, batches = _data(2)
    losses, lin = _to_static_losses(w, b, batches, dtype="bfloat16", level="o2")
    assert lin.weight.dtype.name == "bfloat16" and np.all(np.isfinite(losses))
    master_w, master_b = torch.tensor(w).bfloat16().float(), torch.tensor(b).bfloat16().float()
    want = []
    for x, t in batches:  # pure bfloat16 (O2), float32 master weights updated by SGD
        pw, pb = master_w.bfloat16().requires_grad_(), master_b.bfloat16().requires_grad_()
        loss = torch.nn.functional.cross_entropy(torch.tensor(x).bfloat16() @ pw.T + pb, torch.tensor(t))
        loss.backward()
        master_w -= 0.5 * pw.grad.float()
        master_b -= 0.5 * pb.grad.float()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=2e-2)
    # bfloat16 gradients of two libraries' kernels differ in their last bits: a rounding may flip by one ulp
    np.testing.assert_allclose(lin.weight.float().numpy().T, master_w.numpy(), rtol=2 ** -7, atol=4e-3)
    bad = gdist.Strategy()
    bad.amp.enable, bad.amp.level = True, "o3"
    with pytest.raises(ValueError, match="level"):
        gdist.to_static(gpaddle.nn.Linear(2, 2), None, gpaddle.nn.CrossEntropyLoss(),
                                      gpaddle.optimizer.SGD(parameters=[]), bad)
