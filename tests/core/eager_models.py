"""Tiny versions of the bench's models (examples/gpt.py dp/tp, the CNN of bench_models.py) for the
eager-speed tests of issue 35: the losses of a few fixed-seed SGD steps on 2 ranks."""
import importlib.util
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT_TINY = dict(vocab=32, d_model=32, heads=4, layers=2, seq=16, batch=4)
CNN_TINY = dict(batch=8, side=8, widths=(8, 16))
GPT_BENCH = dict(vocab=64, d_model=256, heads=8, layers=12, seq=128, batch=8)  # bench_models.py's sizes
CNN_BENCH = dict(batch=64, side=32, widths=(32, 64))


def _example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpt_losses(layout, steps=5, graph=False, cfg=GPT_TINY):
    """The losses (float32 bit patterns as hex) of `steps` SGD steps of the GPT laid out dp or tp."""
    import globaltensor as gt
    gpt = _example("gpt")
    c = cfg
    gt.manual_seed(0)
    model = gpt.GPT(c["vocab"], c["d_model"], c["heads"], c["layers"], c["seq"])
    mesh = gt.placement("cpu", [0, 1])
    data_sbp = gpt.lay_out(model, mesh, layout)
    rng = np.random.default_rng(0)
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n = c["batch"] * c["seq"]

    def step(x, y):
        loss = gt.nn.functional.cross_entropy(model(x).reshape(n, c["vocab"]), y.reshape(n))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = gt.jit.trace(step) if graph else step
    out = []
    for _ in range(steps):
        x, y = (gt.tensor(rng.integers(0, c["vocab"], (c["batch"], c["seq"]))).to_global(mesh, gt.sbp.broadcast)
                .to_global(sbp=data_sbp) for _ in range(2))
        out.append(_bits(run(x, y)))
    return out


def cnn_losses(steps=5, graph=False, cfg=CNN_TINY):
    """The losses of `steps` SGD steps of the bench's CNN, data-parallel on 2 ranks."""
    import globaltensor as gt
    nn = gt.nn

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    gt.manual_seed(0)
    w1, w2 = cfg["widths"]
    net = nn.Sequential(*block(3, w1), *block(w1, w2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w2, 10))
    mesh = gt.placement("cpu", [0, 1])
    net.to_global(mesh, gt.sbp.broadcast)
    opt = gt.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        loss = gt.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = gt.jit.trace(step) if graph else step
    out = []
    for _ in range(steps):
        x = gt.randn(cfg["batch"], 3, cfg["side"], cfg["side"], placement=mesh, sbp=gt.sbp.split(0))
        y = gt.randint(0, 10, (cfg["batch"],), placement=mesh, sbp=gt.sbp.split(0))
        out.append(_bits(run(x, y)))
    return out


def _bits(loss):
    """The loss's float32 bits as hex, the same on every rank (a partial loss is summed first)."""
    import globaltensor as gt
    whole = loss.to_global(sbp=(gt.sbp.broadcast,) * loss.placement.ndim)
    return np.asarray(whole.to_local().numpy(), np.float32).tobytes().hex()


def all_losses(graph=False, bench=False):
    """{case: [hex loss bits per step]} for GPT DP, GPT TP and CNN DP (call on each of 2 ranks);
    bench: at bench_models.py's sizes instead of tiny ones."""
    g, c = (GPT_BENCH, CNN_BENCH) if bench else (GPT_TINY, CNN_TINY)
    return {"gpt_dp": gpt_losses("dp", graph=graph, cfg=g), "gpt_tp": gpt_losses("tp", graph=graph, cfg=g),
            "cnn_dp": cnn_losses(graph=graph, cfg=c)}
