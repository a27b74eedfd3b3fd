"""Megatron's tensor parallelism as layouts: the loss over a vocabulary split by ranks (no logits
moved, only vectors of one value per row), gather and scatter_add along a split dim, reshape
keeping a trailing split, a partial sum meeting a whole value reduced at once, forward hooks
and to_global(grad_sbp=) as Megatron's f and g, and a GPT block's collectives counted: one
all_reduce per sublayer forward and one backward."""
import numpy as np
import pytest

from conftest import REPO, run_ranks


def _full(t):
    import globaltensor as gt
    return t.to_global(sbp=(gt.sbp.broadcast,) * t.placement.ndim).numpy()


def _softmax_ce(x, t, ignore_index=-100):
    """Reference: mean cross-entropy of rows x over targets t and its gradient, in float64."""
    x = x.astype(np.float64)
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) + x.max(1, keepdims=True)
    p = np.exp(x - lse)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    loss = -(np.take_along_axis(x - lse, safe[:, None], 1)[:, 0] * valid).sum() / valid.sum()
    grad = p.copy()
    grad[np.arange(len(t)), safe] -= 1
    return loss, grad * valid[:, None] / valid.sum()


def _vocab_parallel_ce(mesh_shape, sbp_names, n, v, seed):
    import globaltensor as gt
    from globaltensor.debug import trace_collectives
    ranks = np.arange(int(np.prod(mesh_shape))).reshape(mesh_shape).tolist()
    mesh = gt.placement("cpu", ranks)
    sbp = tuple(gt.sbp.split(int(s[2])) if s.startswith("S") else gt.sbp.broadcast for s in sbp_names)
    rng = np.random.default_rng(seed)
    xs = (rng.standard_normal((n, v)) * 4).astype(np.float32)
    xs[1, 2] = -np.inf  # a masked logit
    ts = rng.integers(0, v, n)
    ts[3] = -100  # an ignored target
    whole = (gt.sbp.broadcast,) * len(mesh_shape)
    x = gt.tensor(xs).to_global(mesh, whole).to_global(sbp=sbp).detach()
    x.requires_grad = True
    t = gt.tensor(ts).to_global(mesh, whole).to_global(sbp=tuple(s if s == gt.sbp.split(0) else gt.sbp.broadcast
                                                                  for s in sbp))
    with trace_collectives() as trace:
        loss = gt.nn.functional.cross_entropy(x, t)
        loss.backward()
    assert x.grad.sbp == x.sbp
    return _full(loss), _full(x.grad), list(trace), xs, ts


@pytest.mark.parametrize("mesh_shape, sbp, n, v", [((2,), ("S(1)",), 12, 10), ((2,), ("S(1)",), 7, 11),
                                                  ((2, 2), ("S(0)", "S(1)"), 9, 13), ((2, 2), ("B", "S(1)"), 8, 6)])
def test_cross_entropy_over_a_split_vocabulary_moves_no_logits(mesh_shape, sbp, n, v):
    results = run_ranks(_vocab_parallel_ce, int(np.prod(mesh_shape)), mesh_shape, sbp, n, v, 3)
    for loss, grad, trace, xs, ts in results:
        want_loss, want_grad = _softmax_ce(xs, ts)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)
        assert trace, "the split vocabulary needs some reduction"
        assert {kind for kind, _, _ in trace} == {"all_reduce"}, trace
        assert max(nbytes for _, _, nbytes in trace) <= n * 8, f"logits moved: {trace}"
        # the shift (a sum and a count), the sum of exp; in backward the sum's gradient; a batch axis
        # adds the mean's scalars
        assert len(trace) <= (4 if len(mesh_shape) == 1 else 6), trace
    assert len({tuple(r[2]) for r in results}) == 1 or len(mesh_shape) == 2


def _gather_scatter_reshape():
    import globaltensor as gt
    from globaltensor.debug import trace_collectives
    mesh = gt.placement("cpu", [0, 1])
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((6, 9)).astype(np.float32)
    idx = rng.integers(0, 9, (6, 4))
    x = gt.tensor(xs).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(1)).detach()
    x.requires_grad = True
    index = gt.tensor(idx).to_global(mesh, gt.sbp.broadcast)
    y = gt.tensor(rng.standard_normal((4, 5, 6)).astype(np.float32)).to_global(mesh, gt.sbp.broadcast)
    seed = gt.ones(6, 4, placement=mesh, sbp=gt.sbp.broadcast)
    with trace_collectives() as trace:
        picked = gt.gather(x, 1, index)
        picked.backward(seed)  # scatter_add into the slices
        added = x.grad
        flat = y.to_global(sbp=gt.sbp.split(2)).reshape(20, 6)
    return (str(picked.sbp[0]), _full(picked), str(added.sbp[0]), _full(added), str(flat.sbp[0]),
            _full(flat), _full(y), list(trace), xs, idx)


def test_gather_and_scatter_add_along_a_split_dim_and_a_reshape_keeping_a_trailing_split():
    for picked_sbp, picked, added_sbp, added, flat_sbp, flat, y, trace, xs, idx in run_ranks(_gather_scatter_reshape, 2):
        assert (picked_sbp, added_sbp, flat_sbp) == ("P", "S(1)", "S(1)")
        assert trace == [], "each rank takes the indices inside its slice: nothing moves"
        np.testing.assert_array_equal(picked, np.take_along_axis(xs, idx, 1))
        want = np.zeros((6, 9), np.float32)
        np.add.at(want, (np.arange(6)[:, None].repeat(4, 1), idx), 1.0)
        np.testing.assert_array_equal(added, want)
        np.testing.assert_array_equal(flat, y.reshape(20, 6))


def _partial_meets_whole():
    import globaltensor as gt
    from globaltensor.debug import trace_collectives
    mesh = gt.placement("cpu", [0, 1])
    p = gt.ones(8, 4, placement=mesh, sbp=gt.sbp.partial_sum)
    small = gt.ones(4, placement=mesh, sbp=gt.sbp.broadcast)
    big = gt.ones(8, 4, placement=mesh, sbp=gt.sbp.broadcast)
    with trace_collectives() as trace:
        a = p + small  # the partial value reduced now: making `small` P (free) would put off a bigger one
        b = p + big
    q = gt.ones(8, 4, placement=mesh, sbp=gt.sbp.partial_sum)
    c = p + q  # both partial already: stays partial, nothing moves
    return [str(a.sbp[0]), str(b.sbp[0]), str(c.sbp[0])], [k for k, _, _ in trace], _full(a), _full(c), _full(p)


def test_a_partial_sum_meeting_a_whole_value_is_reduced_at_once():
    for sbps, kinds, a, c, p in run_ranks(_partial_meets_whole, 2):
        assert sbps == ["S(0)", "S(0)", "P"]  # reduced at once, by the cheapest reduction (scattered)
        assert kinds == ["reduce_scatter", "reduce_scatter"]
        np.testing.assert_array_equal(a, p + 1)
        np.testing.assert_array_equal(c, 2 * p)


def _f_and_g():
    """to_global(grad_sbp=) on an unchanged layout: identity forward, the gradient reduced."""
    import globaltensor as gt
    from globaltensor.debug import trace_collectives
    mesh = gt.placement("cpu", [0, 1])
    x = gt.ones(4, 3, placement=mesh, sbp=gt.sbp.broadcast).detach()
    x.requires_grad = True
    w = gt.ones(3, 6, placement=mesh, sbp=gt.sbp.split(1))
    w2 = gt.ones(6, 3, placement=mesh, sbp=gt.sbp.split(0))
    h = x.to_global(grad_sbp=gt.sbp.broadcast)
    assert h is not x
    y = (h @ w) @ w2  # column then row parallel: P
    out = y.to_global(sbp=gt.sbp.broadcast)
    with trace_collectives() as trace:
        out.sum().backward()
    return str(y.sbp[0]), [k for k, _, _ in trace], str(x.grad.sbp[0]), _full(x.grad)


def test_to_global_with_grad_sbp_reduces_the_gradient_where_the_layout_stays():
    for y_sbp, kinds, grad_sbp, grad in run_ranks(_f_and_g, 2):
        assert y_sbp == "P"
        assert kinds == ["all_reduce"]  # f's all_reduce; g's backward keeps the gradient whole
        assert grad_sbp == "B"
        np.testing.assert_array_equal(grad, np.full((4, 3), 18.0))


def test_forward_hooks_replace_arguments_and_outputs_and_come_off():
    import globaltensor as gt
    lin = gt.nn.Linear(3, 2)
    seen = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: seen.append(out.shape) or out + 1)
    x = gt.ones(4, 3)
    np.testing.assert_allclose(lin(x).numpy(), np.broadcast_to(lin.bias.numpy() + 1, (4, 2)), rtol=1e-6)
    assert seen == [(4, 2)]
    pre.remove()
    post.remove()
    np.testing.assert_allclose(lin(x).numpy(), x.numpy() @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-6)


def _small_gpt(layout, layers):
    """examples/gpt.py's GPT (vocabulary 64, d_model 32, 4 heads, sequence 16) laid out on 2 ranks,
    and a batch of 4 (inputs, targets) in the layout's batch SBP."""
    import importlib.util
    import os
    import globaltensor as gt
    path = os.path.join(REPO, "examples", "gpt.py")
    spec = importlib.util.spec_from_file_location("gpt_example", path)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    gt.manual_seed(0)
    model = gpt.GPT(64, 32, 4, layers, 16)
    mesh = gt.placement("cpu", [0, 1])
    sbp = gpt.lay_out(model, mesh, layout)
    rng = np.random.default_rng(0)

    def batch():
        return tuple(gt.tensor(rng.integers(0, 64, (4, 16))).to_global(mesh, gt.sbp.broadcast).to_global(sbp=sbp)
                     for _ in range(2))
    return model, batch


def _gpt_step_collectives(layout, layers):
    import collections
    import globaltensor as gt
    from globaltensor.debug import trace_collectives
    model, batch = _small_gpt(layout, layers)
    x, y = batch()

    def step():
        loss = gt.nn.functional.cross_entropy(model(x).reshape(64, 64), y.reshape(64))
        loss.backward()
        return loss

    step()
    with trace_collectives() as trace:
        step()
    return collections.Counter((kind, nbytes) for kind, _, nbytes in trace)


def test_a_tensor_parallel_gpt_step_issues_megatrons_collectives():
    """Per block: one all_reduce of the activations after attention and after the feed-forward
    (forward), one where each sublayer's input gradient re-enters the residual stream
    (backward); plus the embedding's (forward) and the head's (backward). Nothing else of
    activation size; the loss over the split vocabulary adds only vectors."""
    activation = 4 * 16 * 32 * 4
    for layers in (1, 2):
        for counts in run_ranks(_gpt_step_collectives, 2, "tp", layers):
            big = {k: n for k, n in counts.items() if k[1] >= activation}
            assert big == {("all_reduce", activation): 4 * layers + 2}, counts
            assert all(kind == "all_reduce" and nbytes <= 64 * 8 for (kind, nbytes) in counts if nbytes < activation), \
                counts


def _gpt_losses(layout, graph):
    import globaltensor as gt
    model, batch = _small_gpt(layout, 2)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        loss = gt.nn.functional.cross_entropy(model(x).reshape(64, 64), y.reshape(64))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = gt.jit.trace(step) if graph else step
    losses = []
    for _ in range(4):
        losses.append(float(run(*batch()).to_global(sbp=gt.sbp.broadcast).numpy()))
    return losses


def test_a_tensor_parallel_gpt_step_replays_in_graph_mode_with_eager_losses():
    """The vocabulary-split embedding and loss, the fused attention and the hooks' conversions
    all go through the dispatcher, so a traced step captures and replays them."""
    eager = run_ranks(_gpt_losses, 2, "tp", False)
    assert run_ranks(_gpt_losses, 2, "tp", True) == eager


def _merge_leading(rows):
    import globaltensor as gt
    from globaltensor.debug import trace_collectives
    mesh = gt.placement("cpu", [0, 1])
    xs = np.arange(rows * 4 * 3, dtype=np.float32).reshape(rows, 4, 3)
    x = gt.tensor(xs).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    with trace_collectives() as trace:
        flat = x.reshape(rows * 4, 3)
        back = flat.reshape(rows, 4, 3)
    return str(flat.sbp[0]), str(back.sbp[0]), [k for k, _, _ in trace], _full(flat), _full(back), xs


def test_reshape_merging_the_split_batch_with_the_next_dim_keeps_the_split():
    """[batch, seq, d] -> [batch * seq, d] and back (a data-parallel step's reshapes): with the
    batch a multiple of the ranks each rank's rows stay its own, with nothing moved; otherwise
    the values are still exact (another route)."""
    for rows, moves in ((8, False), (7, True)):
        for flat_sbp, back_sbp, kinds, flat, back, xs in run_ranks(_merge_leading, 2, rows):
            np.testing.assert_array_equal(flat, xs.reshape(rows * 4, 3))
            np.testing.assert_array_equal(back, xs)
            if not moves:
                assert (flat_sbp, back_sbp, kinds) == ("S(0)", "S(0)", [])


def _logsumexp_split_rows():
    import globaltensor as gt
    mesh = gt.placement("cpu", [0, 1])
    rows = np.array([[-1000, -np.inf, -np.inf, -np.inf, -np.inf], [3, 1, -np.inf, 2, 0],
                     [-500, -501, -499, -800, -650], [80, 85, 90, 95, 100]], np.float32)
    x = gt.tensor(rows).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(1))
    return gt.logsumexp(x, 1).to_global(sbp=gt.sbp.broadcast).numpy(), rows


def test_logsumexp_over_a_split_dim_is_stable_for_masked_and_far_off_rows():
    """The shift is the mean of the finite values: a row with one finite logit among -inf, or
    all far below zero, or large, gives what numpy's max-shifted form gives."""
    for got, rows in run_ranks(_logsumexp_split_rows, 2):
        x = rows.astype(np.float64)
        m = x.max(1, keepdims=True)
        want = (np.log(np.exp(x - m).sum(1, keepdims=True)) + m)[:, 0]
        np.testing.assert_allclose(got, want, rtol=1e-6)
