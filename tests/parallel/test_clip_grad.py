"""nn.utils.clip_grad_norm_ / clip_grad_value_ over gradients on mixed placements and SBPs:
pipeline stages on [0] and [1], a 2x2 mesh with tensor-parallel splits beside broadcast and
partial-sum gradients, sub-placements of the mesh. The total norm is the norm of all the full
gradients (numpy, float64), every rank gets it and the same clipped gradients, and every rank
issues the same collectives (per group, in the same order) from one run to the next."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
INF = float("inf")
NORMS = (2.0, 1.0, INF)


def _arrays(seed, shapes, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _param(a, placement, sbp):
    """A parameter whose gradient's full value is `a` (the same on every rank) in that layout."""
    p = nn.Parameter(gt.tensor(np.zeros_like(a), placement=placement, sbp=sbp))
    p.grad = gt.tensor(a, placement=placement, sbp=sbp)
    return p


def _reference(arrays, max_norm, norm_type):
    flat = np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in arrays])
    if norm_type == INF:
        total = np.abs(flat).max()
    else:
        total = (np.abs(flat) ** norm_type).sum() ** (1.0 / norm_type)
    coef = min(max_norm / (total + 1e-6), 1.0)
    return total, [np.asarray(a, np.float64) * coef for a in arrays]


def _clip_and_record(make, max_norm, norm_type):
    """Build fresh parameters, clip them under a collective trace; what every rank saw."""
    params, arrays = make()
    with gt.debug.trace_collectives() as trace:
        total = nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    mine = total.to_local().numpy() if gt.env.get_rank() in total.placement else None
    return {"total": float(total.numpy()), "local": mine, "placement": total.placement.rank_list(),
            "sbp": total.sbp, "shape": tuple(total.shape), "dtype": total.dtype.name,
            "grads": [p.grad.numpy() for p in params], "sbps": [p.grad.sbp for p in params],
            "trace": list(trace), "arrays": arrays}


def _worker(layout, cases, repeats):
    make = LAYOUTS[layout]
    return [[_clip_and_record(make, max_norm, nt) for max_norm, nt in cases] for _ in range(repeats)]


# --- layouts (each returns the parameters and their full gradients) -----------------------------

def _pipeline():
    """Two stages on [0] and [1] (the first parameter on [1]: rank 0 holds an empty piece of it)
    and parameters shared by both ranks (broadcast, an uneven split, a partial sum)."""
    on0, on1, both = (gt.placement("cpu", r) for r in ([0], [1], [0, 1]))
    arrays = _arrays(1, [(3, 4), (4,), (5, 3), (2, 3), (5, 3), (7,)])
    layouts = [(on1, B), (on1, B), (on0, B), (both, B), (both, S0), (both, P)]
    return [_param(a, pl, s) for a, (pl, s) in zip(arrays, layouts)], arrays


def _mesh():
    """A 2x2 mesh: tensor-parallel splits (uneven), broadcast, (B, S(0)), partial sums."""
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    shapes_sbps = [((5, 3), (S0, S0)), ((5, 3), (S1, S1)), ((3,), (B, B)), ((5, 3), (B, S0)),
                   ((3, 5), (S0, S1)), ((2, 7), (S1, B)), ((4,), (P, B)), ((5, 2), (B, P))]
    arrays = _arrays(2, [s for s, _ in shapes_sbps])
    return [_param(a, mesh, s) for a, (_, s) in zip(arrays, shapes_sbps)], arrays


def _mesh_and_stages():
    """The mesh beside its rows (stages on mesh[0] = [0, 1], mesh[1] = [2, 3]), a column [1, 3]
    and a lone rank [2]; the first gradient is on mesh[1]. The total goes to the 2x2 mesh."""
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    layouts = [(mesh[1], S0), (mesh[0], B), (mesh, (S0, S1)), (mesh, (B, S0)), (gt.placement("cpu", [1, 3]), S1),
               (gt.placement("cpu", [2]), B), (mesh[1], P), (mesh, (P, B))]
    arrays = _arrays(3, [(5, 3), (3,), (5, 3), (3, 5), (2, 5), (4, 2), (6,), (3,)])
    return [_param(a, pl, s) for a, (pl, s) in zip(arrays, layouts)], arrays


def _stages_only():
    """Placements none of which holds every rank: the total goes to a 1-D placement [0, 1, 2, 3]."""
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    layouts = [(mesh[1], S0), (gt.placement("cpu", [3, 1]), B), (mesh[0], S1), (gt.placement("cpu", [2]), B)]
    arrays = _arrays(4, [(5, 3), (4,), (3, 5), (2, 2)])
    return [_param(a, pl, s) for a, (pl, s) in zip(arrays, layouts)], arrays


LAYOUTS = {"pipeline": _pipeline, "mesh": _mesh, "mesh_and_stages": _mesh_and_stages, "stages_only": _stages_only}


# --- checks ---------------------------------------------------------------------------------------

def _check(results, cases, covering):
    """Every rank, every repeat: the reference total and clipped gradients, a broadcast 0-d total on
    `covering`, the gradients' SBPs kept, the same collectives per group and from run to run."""
    nprocs = len(results)
    for r, repeats in enumerate(results):
        for rep in repeats:
            for (max_norm, nt), got in zip(cases, rep):
                total, clipped = _reference(got["arrays"], max_norm, nt)
                where = f"rank {r}, norm_type {nt}, max_norm {max_norm}"
                assert got["total"] == pytest.approx(total, rel=1e-5), where
                assert got["local"] is not None and float(got["local"]) == pytest.approx(total, rel=1e-5), where
                assert got["placement"] == covering and got["sbp"] == (B,) * len(got["sbp"]), where
                assert got["shape"] == () and got["dtype"] == "float32", where
                for i, (g, want) in enumerate(zip(got["grads"], clipped)):
                    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7, err_msg=f"{where}, param {i}")
                if max_norm > 1e3:
                    assert all(np.array_equal(g, a) for g, a in zip(got["grads"], got["arrays"])), where
            same = [[g.tobytes() for g in got["grads"]] + [got["total"]] for got in rep]
            assert same == [[g.tobytes() for g in got["grads"]] + [got["total"]] for got in results[0][0]], \
                f"rank {r} differs from rank 0 or from the first run"
        traces = [[got["trace"] for got in rep] for rep in repeats]
        assert all(t == traces[0] for t in traces), f"rank {r}: the collectives changed from one run to the next"
    for c in range(len(cases)):  # SPMD: on each group, its members issue the same kinds in the same order
        traces = [results[r][0][c]["trace"] for r in range(nprocs)]
        groups = {ranks for t in traces for _, ranks, _ in t}
        for group in groups:
            seqs = {r: [kind for kind, ranks, _ in traces[r] if ranks == group] for r in group}
            assert len({tuple(s) for s in seqs.values()}) == 1, f"case {cases[c]}: group {group} diverges: {seqs}"


CASES = [(0.5, nt) for nt in NORMS] + [(1e9, 2.0)]


def test_pipeline_stages_and_shared_parameters_on_two_ranks():
    results = run_ranks(_worker, 2, "pipeline", CASES, 3, timeout=60)
    _check(results, CASES, covering=[0, 1])


def test_2x2_mesh_with_tensor_parallel_splits_and_partial_sums():
    results = run_ranks(_worker, 4, "mesh", CASES, 2, timeout=60)
    _check(results, CASES, covering=[0, 1, 2, 3])


def test_mesh_rows_columns_and_a_lone_rank_together_several_times():
    results = run_ranks(_worker, 4, "mesh_and_stages", CASES, 3, timeout=60)
    _check(results, CASES, covering=[0, 1, 2, 3])
    for rep in results[0]:
        assert all(got["sbps"][2] == (S0, S1) and got["sbps"][6] == (P,) for got in rep)  # SBPs kept


def test_placements_none_of_which_covers_every_rank():
    cases = [(0.5, nt) for nt in NORMS]
    results = run_ranks(_worker, 4, "stages_only", cases, 2, timeout=60)
    _check(results, cases, covering=[0, 1, 2, 3])


# --- a real pipeline backward, errors, clip_grad_value_, low precision -----------------------------

def _backward_worker():
    """Stage 0 on [0] (Linear 4->6), stage 1 on [1] (Linear 6->3); the gradients come from
    backward (rank 1 holds empty pieces of stage 0's, rank 0 of stage 1's)."""
    gt.manual_seed(0)
    front, back = nn.Linear(4, 6), nn.Linear(6, 3)
    front.to_global(gt.placement("cpu", [0]), B)
    back.to_global(gt.placement("cpu", [1]), B)
    x = gt.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4), placement=gt.placement("cpu", [0]), sbp=B)
    loss = (back(front(x).to_global(placement=gt.placement("cpu", [1]), sbp=B)) ** 2).sum()
    loss.backward()
    params = list(front.parameters()) + list(back.parameters())
    before = [p.grad.numpy() for p in params]
    out = {}
    for nt in NORMS:
        total = nn.utils.clip_grad_norm_(params, 1e9, nt)
        out[nt] = (float(total.numpy()), float(total.to_local().numpy()))
    total = nn.utils.clip_grad_norm_(params, 0.25)
    return before, out, float(total.numpy()), [p.grad.numpy() for p in params]


def test_gradients_from_a_two_stage_backward():
    results = run_ranks(_backward_worker, 2, timeout=60)
    before = results[0][0]
    for before_r, out, total, after in results:
        for nt in NORMS:
            want, _ = _reference(before, 1e9, nt)
            assert out[nt][0] == pytest.approx(want, rel=1e-5) and out[nt][1] == pytest.approx(want, rel=1e-5)
        want, clipped = _reference(before, 0.25, 2.0)
        assert total == pytest.approx(want, rel=1e-5)
        for g, w in zip(after, clipped):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def _errors_worker():
    both = gt.placement("cpu", [0, 1])
    out = {}
    glob, loc = _param(np.ones((2, 2), np.float32), both, S0), nn.Parameter(gt.tensor(np.zeros(3, np.float32)))
    loc.grad = gt.tensor(np.ones(3, np.float32))
    for name, params in (("global_first", [glob, loc]), ("local_first", [loc, glob])):
        with gt.debug.trace_collectives() as trace:
            try:
                nn.utils.clip_grad_norm_(params, 1.0)
                out[name] = None
            except RuntimeError as exc:
                out[name] = (str(exc), len(trace))
    for bad in (0, -1.0, "nan"):
        try:
            nn.utils.clip_grad_norm_([glob], 1.0, bad)
            out["norm", bad] = None
        except ValueError as exc:
            out["norm", bad] = str(exc)
    lone = _param(np.array([1.0, np.inf], np.float32), gt.placement("cpu", [1]), B)
    try:
        nn.utils.clip_grad_norm_([glob, lone], 1.0, error_if_nonfinite=True)
        out["nonfinite"] = None
    except RuntimeError as exc:
        out["nonfinite"] = str(exc)
    # local gradients alone are fine: each rank clips its own
    loc.grad = gt.tensor(np.full(3, 2.0 + gt.env.get_rank(), np.float32))
    out["local"] = (float(nn.utils.clip_grad_norm_([loc], 1.0).numpy()), loc.grad.numpy())
    return out


def test_mixing_local_and_global_and_bad_arguments_raise_on_every_rank():
    for rank, out in enumerate(run_ranks(_errors_worker, 2, timeout=60)):
        for name in ("global_first", "local_first"):
            assert out[name] is not None, f"rank {rank}: mixing local and global did not raise"
            text, issued = out[name]
            assert "local" in text and "global" in text and "placement" in text and issued == 0, text
        for bad in (0, -1.0, "nan"):
            assert out["norm", bad] is not None and "norm_type" in out["norm", bad]
        assert out["nonfinite"] is not None and "non-finite" in out["nonfinite"]
        want = np.sqrt(3) * (2.0 + rank)
        assert out["local"][0] == pytest.approx(want, rel=1e-6)
        np.testing.assert_allclose(out["local"][1], np.full(3, (2.0 + rank) / (want + 1e-6)), rtol=1e-5)


def _value_worker():
    params, arrays = _mesh_and_stages()
    assert nn.utils.clip_grad_value_(params, 0.7) is None
    return [p.grad.numpy() for p in params], [p.grad.sbp for p in params], [p.sbp for p in params], arrays


def test_clip_grad_value_on_mixed_placements():
    for grads, grad_sbps, sbps, arrays in run_ranks(_value_worker, 4, timeout=60):
        assert grad_sbps == sbps
        for g, a in zip(grads, arrays):
            np.testing.assert_array_equal(g, np.clip(a, -0.7, 0.7))  # a partial sum is clipped as its sum


def _half_worker():
    both = gt.placement("cpu", [0, 1])
    arrays = [(a * 300).astype(np.float16) for a in _arrays(5, [(5, 3), (6,)])]  # squares overflow float16
    params = [_param(arrays[0], both, S0), _param(arrays[1], gt.placement("cpu", [1]), B)]
    total = nn.utils.clip_grad_norm_(params, 0.5)
    return float(total.numpy()), total.dtype.name, [p.grad.numpy() for p in params], arrays


def test_float16_gradients_accumulate_in_float32():
    for total, dtype, grads, arrays in run_ranks(_half_worker, 2, timeout=60):
        want, clipped = _reference(arrays, 0.5, 2.0)
        assert want > 256 and dtype == "float32" and total == pytest.approx(want, rel=1e-5)
        for g, w in zip(grads, clipped):
            assert g.dtype == np.float16
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=2e-3, atol=1e-6)
