"""Ops on real processes: random input SBPs on 1-D and 2x2 meshes, forward and backward,
compared with the same program run in one process; and the collectives ops insert."""

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks
from op_programs import PROGRAMS

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum


def _run(program, arrays, placement=None, sbps=None):
    """Forward value and gradients of the float inputs, as numpy arrays."""
    tensors = []
    for i, a in enumerate(arrays):
        differentiable = a.dtype.kind == "f"
        if placement is None:
            t = gt.tensor(a, requires_grad=differentiable)
        else:
            t = gt.tensor(a, placement=placement, sbp=sbps[i])
            t.requires_grad_(differentiable)
        tensors.append(t)
    out = program(*tensors)
    value = out.numpy()
    out.sum().backward()
    return value, [t.grad.numpy() if t.grad is not None else None for t in tensors]


def _sbp_choices(array, mesh_ndim, rng):
    options = [B, P] + [gt.sbp.split(d) for d in range(array.ndim)]
    if array.dtype.kind != "f":
        options = [B] + [gt.sbp.split(d) for d in range(array.ndim)]
    return tuple(options[rng.integers(len(options))] for _ in range(mesh_ndim))


def _programs_on(nprocs, mesh_2d, trials):
    k = gt.env.get_world_size()
    placement = gt.placement("cpu", [[0, 1], [2, 3]]) if mesh_2d else gt.placement("cpu", list(range(k)))
    rng = np.random.default_rng(k * 10 + mesh_2d)
    done = 0
    for name, (arrays, program) in PROGRAMS.items():
        want, want_grads = _run(program, arrays)
        for _ in range(trials):
            sbps = [_sbp_choices(a, placement.ndim, rng) for a in arrays]
            got, grads = _run(program, arrays, placement, sbps)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=f"{name} {sbps}")
            for g, w in zip(grads, want_grads):
                if w is not None:
                    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9, err_msg=f"{name} grad {sbps}")
            done += 1
    return done


@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (3, False), (4, False), (4, True)])
def test_programs_match_one_process(nprocs, mesh_2d):
    trials = 3
    assert run_ranks(_programs_on, nprocs, nprocs, mesh_2d, trials, timeout=600) == [len(PROGRAMS) * trials] * nprocs


def _counts():
    pl = gt.placement("cpu", [0, 1])
    a = gt.randn(8, 6, placement=pl, sbp=S0)
    b = gt.randn(6, 4, placement=pl, sbp=B)
    seen = {}
    with gt.debug.count_collectives() as c:
        y = a @ b
    seen["S0xB"] = (dict(c), y.sbp)
    a1 = gt.randn(8, 6, placement=pl, sbp=S1)
    b0 = gt.randn(6, 4, placement=pl, sbp=S0)
    with gt.debug.count_collectives() as c:
        y = a1 @ b0                       # partial: no communication yet
    seen["S1xS0"] = (dict(c), y.sbp)
    with gt.debug.count_collectives() as c:
        z = (y + y) * 3                   # P + P -> P, P * B -> P: still none
    seen["P+P,P*3"] = (dict(c), z.sbp)
    with gt.debug.count_collectives() as c:
        r = gt.relu(z)                    # relu needs the value: one all_reduce
    seen["relu(P)"] = (dict(c), r.sbp)
    with gt.debug.count_collectives() as c:
        s = gt.sum(a, 0)                  # sum over the split dim: partial, no communication
    seen["sum S0 dim0"] = (dict(c), s.sbp)
    w = gt.randn(6, 4, placement=pl, sbp=B).requires_grad_()
    x = gt.randn(8, 6, placement=pl, sbp=S0)
    with gt.debug.count_collectives() as c:
        (x @ w).sum().backward()          # data parallel: the B weight's gradient is summed once
    seen["dp backward"] = (dict(c), w.grad.sbp)
    return seen


def test_collectives_inserted_by_ops():
    seen = run_ranks(_counts, 2)[0]
    assert seen["S0xB"] == ({}, (S0,))
    assert seen["S1xS0"] == ({}, (P,))
    assert seen["P+P,P*3"] == ({}, (P,))
    assert seen["relu(P)"][0] == {"all_reduce": 1} or seen["relu(P)"][0] == {"reduce_scatter": 1}
    assert seen["sum S0 dim0"] == ({}, (P,))
    assert seen["dp backward"][1] == (B,)
    assert seen["dp backward"][0].get("all_reduce", 0) == 1 and sum(seen["dp backward"][0].values()) == 1


def _mixing_errors():
    pl = gt.placement("cpu", [0, 1])
    other = gt.placement("cpu", [1, 0])
    messages = []
    for bad in (lambda: gt.ones(3, placement=pl, sbp=B) + gt.tensor(np.ones(3, np.float32)),
                lambda: gt.ones(3, placement=pl, sbp=B) + gt.ones(3, placement=other, sbp=B),
                lambda: gt.ones(3, 4, placement=pl, sbp=S0) @ gt.ones(3, 4, placement=pl, sbp=B)):
        try:
            bad()
        except (RuntimeError, ValueError) as exc:
            messages.append(f"{type(exc).__name__}: {exc}")
    ok = (gt.ones(3, placement=pl, sbp=S0) + 1).numpy().tolist()
    return messages, ok


def test_mixing_placements_raises_on_every_rank():
    results = run_ranks(_mixing_errors, 2)
    assert results[0] == results[1]
    messages, ok = results[0]
    assert len(messages) == 3 and ok == [2.0, 2.0, 2.0]
    assert messages[0].startswith("RuntimeError: add: cannot mix a global tensor") and "local tensor" in messages[0]
    assert "ranks=[0, 1]" in messages[1] and "ranks=[1, 0]" in messages[1]
    assert messages[2].startswith("ShapeError: matmul:")  # OneFlow's class: a RuntimeError and a ValueError


def test_ops_target_count():
    names = [w for line in open(_target()) if not line.startswith("#") for w in line.split()]
    have = [n for n in names if hasattr(gt, n)]
    print(f"\nops-target.txt: {len(have)} of {len(names)} implemented")
    assert len(have) == len(names)


def _target():
    from targets import OPS_TARGET
    return OPS_TARGET


def _boxing_gradients():
    pl = gt.placement("cpu", [0, 1])
    x = gt.randn(5, 3, placement=pl, sbp=S0).requires_grad_()
    y = x.to_global(sbp=B)                          # one all_gather forward
    with gt.debug.count_collectives() as c:
        (y * 2).sum().backward()                    # S -> B backward is a free slice
    free = dict(c)
    pinned = gt.randn(5, 3, placement=pl, sbp=S0).requires_grad_()
    y = pinned.to_global(sbp=B, grad_sbp=P)
    (y * 3).sum().backward()
    piece = gt.tensor(np.ones((2 + gt.env.get_rank(), 3))).requires_grad_()
    (piece.to_global(pl, S0) * 5).sum().backward()
    return free, x.grad.sbp, x.grad.numpy().tolist(), pinned.grad.numpy().tolist(), piece.grad.numpy().tolist()


def test_boxing_is_differentiable():
    results = run_ranks(_boxing_gradients, 2)
    free, sbp, grad, pinned, piece = results[0]
    assert free == {} and sbp == (S0,) and grad == [[2.0] * 3] * 5 and pinned == [[3.0] * 3] * 5
    assert piece == [[5.0] * 3] * 2 and results[1][4] == [[5.0] * 3] * 3
