"""The sampling, resize, pooling, conv3d, batch_gather and recurrent ops on 2 ranks with split
inputs: full values and input gradients against torch on the whole tensors."""
import numpy as np
from lazy_torch import torch

from conftest import run_ranks

RNG_SEED = 7


def _data():
    rng = np.random.default_rng(RNG_SEED)
    return {"img": rng.standard_normal((4, 3, 6, 7)), "grid": rng.uniform(-1.2, 1.2, (4, 5, 4, 2)),
            "vol": rng.standard_normal((2, 4, 5, 6, 6)), "w3": rng.standard_normal((3, 4, 2, 3, 2)),
            "off": rng.standard_normal((4, 18, 4, 7)), "wd": rng.standard_normal((5, 3, 3, 3)),
            "seq": rng.standard_normal((6, 4, 3)), "idx": rng.integers(0, 6, (4, 3))}


def _cases(gt, F):
    """name -> (function of the global tensors, their sbps)."""
    s0, s1, b = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast
    return {
        "grid_sample": (lambda x, g: F.grid_sample(x, g, align_corners=True), [("img", s0), ("grid", s0)]),
        "pad_reflect": (lambda x: F.pad(x, (2, 1, 1, 2), "reflect"), [("img", s1)]),
        "pad_constant": (lambda x: F.pad(x, (1, 1, 0, 3), value=1.5), [("img", s0)]),
        "bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), [("img", s1)]),
        "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), [("img", s0)]),
        "max_pool3d": (lambda x: F.max_pool3d(x, 2, 1, 1), [("vol", s1)]),
        "conv3d": (lambda x, w: F.conv3d(x, w, None, 1, (1, 0, 1)), [("vol", s0), ("w3", b)]),
        "deform_conv2d": (lambda x, o, w: F.deform_conv2d(x, o, w, padding=(0, 1)), [("img", s0), ("off", s0),
                                                                                       ("wd", b)]),
        "batch_gather": (lambda x, i: gt.batch_gather(x.reshape(4, 6, 21), i), [("img", s0), ("idx", b)]),
    }


def _torch_cases():
    tf = torch.nn.functional
    return {
        "grid_sample": lambda x, g: tf.grid_sample(x, g, align_corners=True),
        "pad_reflect": lambda x: tf.pad(x, (2, 1, 1, 2), "reflect"),
        "pad_constant": lambda x: tf.pad(x, (1, 1, 0, 3), value=1.5),
        "bilinear": lambda x: tf.interpolate(x, scale_factor=2, mode="bilinear"),
        "avg_pool2d": lambda x: tf.avg_pool2d(x, 3, 2, 1, True, False),
        "max_pool3d": lambda x: tf.max_pool3d(x, 2, 1, 1),
        "conv3d": lambda x, w: tf.conv3d(x, w, None, 1, (1, 0, 1)),
        "deform_conv2d": None,  # compared with its 1-process value (tests/ops/test_sampling_ops.py checks that)
        "batch_gather": lambda x, i: torch.gather(x.reshape(4, 6, 21), 1, i[:, :, None].expand(4, 3, 21)),
    }


def _on_ranks():
    import globaltensor as gt
    import globaltensor.nn as nn
    import globaltensor.nn.functional as F
    data, place = _data(), gt.placement("cpu", [0, 1])
    out = {}
    for name, (fn, args) in _cases(gt, F).items():
        ins = [gt.tensor(data[key], requires_grad=data[key].dtype.kind == "f").to_global(place, gt.sbp.broadcast)
               for key, _ in args]
        ins = [t.to_global(place, sbp) for t, (_, sbp) in zip(ins, args)]
        for t in ins:
            if t.requires_grad:
                t.retain_grad()
        y = fn(*ins)
        y.sum().backward()
        out[name] = (y.numpy(), [t.grad.numpy() if t.grad is not None else None for t in ins])
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    torch.manual_seed(0)
    ref = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True).double()
    lstm.load_state_dict({k: gt.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    lstm = lstm.to_global(place, gt.sbp.broadcast)
    seq = gt.tensor(data["seq"], requires_grad=True).to_global(place, gt.sbp.broadcast).to_global(place, gt.sbp.split(1))
    seq.retain_grad()
    y, (h, c) = lstm(seq)
    (y.sum() + h.sum() + c.sum()).backward()
    out["lstm"] = (y.numpy(), [seq.grad.numpy()], lstm.weight_hh_l1_reverse.grad.numpy())
    return out


def test_new_ops_on_two_ranks_match_torch():
    import globaltensor as gt
    import globaltensor.nn.functional as F
    results = run_ranks(_on_ranks, 2, timeout=300)
    data, refs = _data(), _torch_cases()
    for rank_out in results:
        for name, (value, grads) in ((k, v[:2]) for k, v in rank_out.items() if k != "lstm"):
            args = _cases(gt, F)[name][1]
            t_in = [torch.tensor(data[key], requires_grad=data[key].dtype.kind == "f") for key, _ in args]
            if refs[name] is None:  # deform_conv2d: the 1-process value and gradients
                g_in = [gt.tensor(data[key], requires_grad=True) for key, _ in args]
                y = F.deform_conv2d(g_in[0], g_in[1], g_in[2], padding=(0, 1))
                y.sum().backward()
                want, want_grads = y.numpy(), [g.grad.numpy() for g in g_in]
            else:
                ty = refs[name](*t_in)
                ty.sum().backward()
                want, want_grads = ty.detach().numpy(), [t.grad.numpy() if t.grad is not None else None for t in t_in]
            np.testing.assert_allclose(value, want, atol=1e-9, err_msg=name)
            for g, w in zip(grads, want_grads):
                if w is not None:
                    np.testing.assert_allclose(g, w, atol=1e-9, err_msg=name)
        torch.manual_seed(0)
        ref = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True).double()
        seq = torch.tensor(data["seq"], requires_grad=True)
        y, (h, c) = ref(seq)
        (y.sum() + h.sum() + c.sum()).backward()
        value, (grad,), w_grad = rank_out["lstm"]
        np.testing.assert_allclose(value, y.detach().numpy(), atol=1e-9)
        np.testing.assert_allclose(grad, seq.grad.numpy(), atol=1e-9)
        np.testing.assert_allclose(w_grad, ref.weight_hh_l1_reverse.grad.numpy(), atol=1e-9)
