"""Every learning-rate schedule of torch.optim.lr_scheduler against torch's own: the lr of every
group at every step (two groups, 25 steps), the momentum / beta1 the cyclic ones move, step(epoch)
where PyTorch takes one, SequentialLR and ChainedScheduler compositions, a state_dict round trip,
and a traced training step (nn.Graph) that reads the scheduled lr at each replay."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt

STEPS = 25
SCHEDULES = {  # name: (optimizer name and options, a function of (module, optimizer) -> scheduler)
    "StepLR": ("SGD", {}, lambda m, o: m.StepLR(o, step_size=3, gamma=0.5)),
    "MultiStepLR": ("SGD", {}, lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 11], gamma=0.3)),
    "ExponentialLR": ("SGD", {}, lambda m, o: m.ExponentialLR(o, gamma=0.9)),
    "CosineAnnealingLR": ("SGD", {}, lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001)),
    "LambdaLR": ("SGD", {}, lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 1 / (e + 1), lambda e: 0.95 ** e])),
    "MultiplicativeLR": ("SGD", {}, lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.9)),
    "LinearLR": ("SGD", {}, lambda m, o: m.LinearLR(o, start_factor=0.25, total_iters=6)),
    "ConstantLR": ("SGD", {}, lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4)),
    "PolynomialLR": ("SGD", {}, lambda m, o: m.PolynomialLR(o, total_iters=9, power=2.0)),
    "CosineAnnealingWarmRestarts": ("SGD", {}, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                                         eta_min=0.01)),
    "OneCycleLR": ("SGD", {"momentum": 0.9}, lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=30)),
    "OneCycleLR three_phase linear": ("Adam", {}, lambda m, o: m.OneCycleLR(
        o, max_lr=0.01, epochs=5, steps_per_epoch=6, anneal_strategy="linear", three_phase=True)),
    "CyclicLR": ("SGD", {"momentum": 0.9}, lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                                    step_size_down=5)),
    "CyclicLR triangular2 Adam": ("Adam", {}, lambda m, o: m.CyclicLR(o, 0.001, 0.01, step_size_up=2,
                                                                       mode="triangular2")),
    "CyclicLR exp_range": ("SGD", {"momentum": 0.5}, lambda m, o: m.CyclicLR(o, 0.01, 0.1, 4, mode="exp_range",
                                                                             gamma=0.9)),
    "SequentialLR": ("SGD", {}, lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, total_iters=4),
                                                                m.ExponentialLR(o, 0.8), m.StepLR(o, 2)], [4, 9])),
    "ChainedScheduler": ("SGD", {}, lambda m, o: m.ChainedScheduler([m.ConstantLR(o, 0.5, total_iters=6),
                                                                     m.ExponentialLR(o, 0.9)])),
}


def _trajectory(lib, name):
    """(lrs, momenta) of both groups before each of STEPS steps, and the final weights."""
    optimizer_name, options, make = SCHEDULES[name]
    rng = np.random.default_rng(0)
    ws = [lib.nn.Parameter(lib.tensor(rng.standard_normal(3))) for _ in range(2)]
    groups = [{"params": [ws[0]], "lr": 0.1}, {"params": [ws[1]], "lr": 0.05}]
    opt = getattr(lib.optim, optimizer_name)(groups, **options)
    sched = make(lib.optim.lr_scheduler, opt)
    seen = []
    for i in range(STEPS):
        seen.append([(g["lr"], g.get("momentum", g.get("betas", (None,))[0])) for g in opt.param_groups])
        opt.zero_grad()
        (sum((w * w).sum() for w in ws) * (1 + i % 3)).backward()
        opt.step()
        sched.step()
    return np.array(seen, dtype=float), np.concatenate([w.detach().numpy() for w in ws])


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_as_torch(name):
    got, got_w = _trajectory(gt, name)
    want, want_w = _trajectory(torch, name)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, err_msg=name)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-10, atol=1e-14, err_msg=name)


def _plateau(lib):
    w = lib.nn.Parameter(lib.tensor(np.ones(2)))
    opt = lib.optim.SGD([w], lr=1.0)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=1, threshold=0.05,
                                                     threshold_mode="abs", cooldown=1, min_lr=0.1)
    lrs = []
    for metric in [1.0, 1.02, 1.2, 1.1, 1.0, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3]:
        sched.step(metric)
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


def test_reduce_on_plateau_as_torch():
    assert _plateau(gt) == _plateau(torch)


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                                  "ConstantLR", "PolynomialLR", "CosineAnnealingWarmRestarts"])
def test_step_with_an_epoch_takes_the_closed_form(name):
    def lrs(lib):
        optimizer_name, options, make = SCHEDULES[name]
        opt = getattr(lib.optim, optimizer_name)([lib.nn.Parameter(lib.tensor(np.ones(2)))], lr=0.1, **options)
        sched = make(lib.optim.lr_scheduler, opt)
        out = []
        for epoch in (3, 7, 2.5, 12) if name == "CosineAnnealingWarmRestarts" else (3, 7, 2, 12):
            sched.step(epoch)
            out.append(opt.param_groups[0]["lr"])
        return out
    with _no_warning():
        np.testing.assert_allclose(lrs(gt), lrs(torch), rtol=1e-12)


class _no_warning:
    def __enter__(self):
        import warnings
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore")  # torch's deprecation of step(epoch)

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


def test_a_state_dict_resumes_the_schedule():
    def run(resume_at):
        opt = gt.optim.SGD([gt.nn.Parameter(gt.tensor(np.ones(2)))], lr=0.1, momentum=0.9)
        sched = gt.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.3, total_steps=20)
        lrs = []
        for i in range(15):
            if i == resume_at:
                saved_opt, saved = opt.state_dict(), sched.state_dict()  # PyTorch's order: build both, then load
                opt = gt.optim.SGD([gt.nn.Parameter(gt.tensor(np.ones(2)))], lr=0.1, momentum=0.9)
                sched = gt.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.3, total_steps=20)
                opt.load_state_dict(saved_opt)
                sched.load_state_dict(saved)
            lrs.append((opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]))
            opt.step()
            sched.step()
        return lrs
    assert run(None) == run(7)
    lam = gt.optim.lr_scheduler.LambdaLR(gt.optim.SGD([gt.nn.Parameter(gt.tensor(np.ones(1)))], lr=1.0),
                                         lambda e: 0.5 ** e)
    import pickle
    pickle.dumps(lam.state_dict())  # a lambda is not saved (as PyTorch): the state pickles


def test_a_traced_step_reads_the_scheduled_lr():
    """nn.Graph captures the step once; the scheduler's lr reaches every replay."""
    def run(traced):
        gt.manual_seed(0)
        model = gt.nn.Linear(3, 2)
        opt = gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = gt.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
        x = gt.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))

        class Step(gt.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt, lr_sch=sched)

            def build(self, x):
                loss = (self.model(x) ** 2).mean()
                loss.backward()
                return loss

        def eager(x):
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            sched.step()
            return loss
        step = Step() if traced else eager
        return [float(step(x).numpy()) for _ in range(6)]
    assert run(True) == run(False)
