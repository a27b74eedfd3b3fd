"""paddle.amp on globaltensor's Paddle face: auto_cast O1/O2 dtypes and values, decorate's float32
master weights, GradScaler against real Paddle 3.3.1's (optional: importorskip). Real Paddle makes
auto_cast a no-op on CPU places and has no CPU bfloat16 matmul, so the low-precision values are
checked against torch's bfloat16 CPU kernels running the dtypes Paddle's lists choose."""
import numpy as np
import pytest
import torch

import globaltensor.paddle as gpaddle
from globaltensor.amp import lists
from globaltensor.dispatch import AMP_ENTRIES
from globaltensor.registry import REGISTRY

GF = gpaddle.nn.functional


def _linear(seed=0):
    gpaddle.seed(seed)
    rng = np.random.default_rng(seed)
    lin = gpaddle.nn.Linear(8, 4)
    return lin, rng.standard_normal((6, 8)).astype(np.float32), rng.integers(0, 4, 6)


def test_o1_dtypes_follow_paddles_lists():
    lin, x, t = _linear()
    x = gpaddle.to_tensor(x)
    with gpaddle.amp.auto_cast(dtype="bfloat16"):
        y = lin(x)
        got = {"linear": y.dtype, "softmax": GF.softmax(y).dtype, "mean": y.mean().dtype, "sum": y.sum().dtype,
               "relu": GF.relu(y).dtype, "exp": gpaddle.exp(y).dtype, "add fp32": (y + x[:, :4]).dtype,
               "cross_entropy": GF.cross_entropy(y, gpaddle.to_tensor(t)).dtype}
    names = {k: v.name for k, v in got.items()}
    assert names == {"linear": "bfloat16", "softmax": "float32", "mean": "float32", "sum": "float32",
                     "relu": "bfloat16", "exp": "float32", "add fp32": "float32", "cross_entropy": "float32"}
    with gpaddle.amp.auto_cast(dtype="bfloat16", custom_white_list=["softmax"], custom_black_list=["matmul_v2"]):
        assert gpaddle.matmul(x, x.T).dtype.name == "float32" and GF.softmax(x.bfloat16()).dtype.name == "bfloat16"
    with gpaddle.amp.auto_cast(dtype="bfloat16", level="O2"):
        y = lin(x)
        assert y.dtype.name == "bfloat16" and GF.softmax(y).dtype.name == "bfloat16"
    with pytest.raises(ValueError, match="level should be"):
        with gpaddle.amp.auto_cast(level="O3"):
            pass


def test_lists_agree_with_real_paddles():
    _update_list = pytest.importorskip("paddle.amp.auto_cast")._update_list
    have = set(REGISTRY) | AMP_ENTRIES
    white, black = _update_list(None, None, "O1", "bfloat16")
    for names, ours in ((white, lists.PADDLE_WHITE), (black, lists.PADDLE_BLACK)):
        for name in names:
            for gt_name in lists.PADDLE_NAMES.get(name, (name,)):
                if gt_name in have:
                    assert gt_name in ours, f"Paddle lists {name} ({gt_name}); ours do not"


def _o1_losses_gt(steps=3):
    lin, x, t = _linear(1)
    w0, b0 = lin.weight.numpy().copy(), lin.bias.numpy().copy()
    opt = gpaddle.optimizer.SGD(learning_rate=0.5, parameters=lin.parameters())
    losses = []
    for _ in range(steps):
        with gpaddle.amp.auto_cast(dtype="bfloat16"):
            loss = GF.cross_entropy(lin(gpaddle.to_tensor(x)), gpaddle.to_tensor(t))
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss.numpy()))
    return losses, (w0, b0, x, t), lin.weight.numpy()


def test_o1_training_matches_bfloat16_linear_float32_loss():
    losses, (w0, b0, x, t), w_end = _o1_losses_gt()
    w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)  # Paddle's layout: x @ w + b
    want = []
    for _ in range(3):
        y = (torch.tensor(x).bfloat16() @ w.bfloat16() + b.bfloat16())  # white list: bfloat16
        loss = torch.nn.functional.cross_entropy(y.float(), torch.tensor(t))  # black list: float32
        loss.backward()
        with torch.no_grad():
            w -= 0.5 * w.grad
            b -= 0.5 * b.grad
        w.grad = b.grad = None
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-2)
    np.testing.assert_allclose(w_end, w.detach().numpy(), rtol=2e-2, atol=2e-2)


def test_o2_decorate_keeps_float32_master_weights():
    lin, x, t = _linear(2)
    w0 = lin.weight.numpy().copy()
    opt = gpaddle.optimizer.SGD(learning_rate=1e-4, parameters=lin.parameters())
    lin, opt = gpaddle.amp.decorate(lin, opt, level="O2", dtype="bfloat16")
    assert lin.weight.dtype.name == "bfloat16"
    master = torch.tensor(w0).bfloat16().float()  # Paddle's master: the float32 of the cast parameter
    for _ in range(4):
        with gpaddle.amp.auto_cast(dtype="bfloat16", level="O2"):
            loss = lin(gpaddle.to_tensor(x)).float().sum()
        loss.backward()
        grad = lin.weight.grad.float().numpy()
        opt.step()
        opt.clear_grad()
        master -= 1e-4 * torch.tensor(grad)  # float32 master; the parameter is its rounding
        assert lin.weight.dtype.name == "bfloat16"
        np.testing.assert_array_equal(lin.weight.float().numpy(), master.bfloat16().float().numpy())
    # steps of 1e-4 * 6 are below bfloat16's resolution of w: a bfloat16-only update would not move it
    assert not np.array_equal(master.numpy(), torch.tensor(w0).bfloat16().float().numpy())


def _enabled_real_scaler(paddle, monkeypatch, **kw):
    """Real Paddle's GradScaler, enabled on a CPU place (Paddle only enables it on GPU places): the
    place check at construction sees a GPU; everything after runs Paddle's own code on CPU."""
    gs = pytest.importorskip("paddle.amp.grad_scaler")
    real = gs._dygraph_tracer

    class _Gpu:
        def is_gpu_place(self):
            return True

    class _Tracer:
        _expected_place = _Gpu()

        def __init__(self, tracer):
            self._tracer = tracer

        def __getattr__(self, name):
            return getattr(self._tracer, name)

    monkeypatch.setattr(gs, "_dygraph_tracer", lambda: _Tracer(real()))
    scaler = paddle.amp.GradScaler(**kw)
    monkeypatch.setattr(gs, "_dygraph_tracer", real)
    scaler._scale = paddle.to_tensor(np.float32(kw["init_loss_scaling"]))  # 0-d: Paddle's float() of it under numpy 2
    return scaler


def _scaled_run(paddle, lin, x, scaler, inf_at):
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=lin.parameters())
    out = []
    for i in range(5):
        with paddle.amp.auto_cast(enable=False, dtype="float16"):  # float16 amp's state, float32 compute
            loss = lin(paddle.to_tensor(x)).mean()
        scaled = scaler.scale(loss)
        scaled.backward()
        if i in inf_at and paddle is gpaddle:
            lin.weight.grad._local[0, 0] = np.inf
        elif i in inf_at:
            g = lin.weight.grad.numpy().copy()
            g[0, 0] = np.inf
            lin.weight.grad.set_value(g)
        scaler.minimize(opt, scaled)
        opt.clear_grad()
        out.append((float(np.asarray(scaled.numpy())), float(np.asarray(scaler.state_dict()["scale"]).reshape(-1)[0]),
                    lin.weight.numpy().copy()))
    return out, scaler.state_dict()


def test_grad_scaler_as_real_paddles(monkeypatch):
    paddle = pytest.importorskip("paddle")
    kw = dict(init_loss_scaling=1024.0, incr_every_n_steps=2, decr_every_n_nan_or_inf=1)
    rng = np.random.default_rng(3)
    w, b, x = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32), \
        rng.standard_normal((3, 8)).astype(np.float32)
    ours, real = gpaddle.nn.Linear(8, 4), paddle.nn.Linear(8, 4)
    ours.set_state_dict({"weight": gpaddle.to_tensor(w), "bias": gpaddle.to_tensor(b)})
    real.set_state_dict({"weight": paddle.to_tensor(w), "bias": paddle.to_tensor(b)})
    got, got_state = _scaled_run(gpaddle, ours, x, gpaddle.amp.GradScaler(**kw), inf_at=(1,))
    want, want_state = _scaled_run(paddle, real, x, _enabled_real_scaler(paddle, monkeypatch, **kw), inf_at=(1,))
    for (gs, gscale, gw), (ws, wscale, ww) in zip(got, want):
        assert gscale == wscale
        np.testing.assert_allclose(gs, ws, rtol=1e-5)
        np.testing.assert_allclose(gw, ww, rtol=1e-5, atol=1e-6)
    assert {k: v for k, v in got_state.items() if k != "scale"} == {k: v for k, v in want_state.items() if k != "scale"}


def test_grad_scaler_turns_itself_off_outside_float16_as_paddle():
    lin, x, _ = _linear()
    scaler = gpaddle.amp.GradScaler(init_loss_scaling=1024.0)
    with gpaddle.amp.auto_cast(dtype="bfloat16"):
        loss = lin(gpaddle.to_tensor(x)).mean()
    with pytest.warns(UserWarning, match="not recommended to use dynamic loss scaling for bfloat16"):
        assert scaler.scale(loss) is loss
    assert not scaler.is_enable() and scaler.state_dict() == {}
