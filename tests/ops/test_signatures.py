"""Op signatures (SPEC §4): every op of ops-target.txt takes the OneFlow/PyTorch
positional signature and Paddle's keyword names (`x=`, `y=`, `axis=`, ...), on local and global
tensors; where torch is installed, our parameter names and order are compared with torch's."""
import inspect
import os
import re

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn.functional as F
from conftest import run_ranks
from targets import OPS_TARGET

R = np.random.default_rng(5)
A = R.uniform(0.5, 2.0, (4, 3))       # positive: log, sqrt, pow are defined
B = R.uniform(0.5, 2.0, (4, 3))
V = R.uniform(-1.0, 1.0, (3,))
SQ = R.uniform(-1.0, 1.0, (3, 3)) + 3 * np.eye(3)
SPD = SQ @ SQ.T
IDX = np.array([2, 0, 3])
ROWS = np.array([[0, 2, 1], [1, 1, 0], [2, 0, 0], [0, 1, 2]])
MASK = A > 1.0
LABELS = np.array([0, 2, 1, 2])


def _names(section):
    path = OPS_TARGET
    if not os.path.exists(path):
        return None
    lines, inside = [], False
    for line in open(path):
        if line.startswith("## "):
            inside = section in line
        elif inside:
            lines += line.split()
    return lines


UNARY = ("abs acos asin atan ceil cos cosh erf exp floor log log10 log1p log2 reciprocal round rsqrt sign sin "
         "sinh sqrt square tan tanh isfinite isinf isnan conj real imag relu sigmoid").split()
BINARY = ("add subtract multiply divide floor_divide maximum minimum equal not_equal greater_equal greater_than "
          "less_equal less_than kron dist").split()
REDUCE = "sum mean prod max min median all any argmax argmin logsumexp".split()


def _cases(t):
    """name -> (PyTorch-positional call, Paddle-keyword call), each a thunk; t(array) makes a tensor
    (local or global)."""
    a, b, v, sq, spd = t(A), t(B), t(V), t(SQ), t(SPD)
    idx, rows, mask, labels = t(IDX), t(ROWS), t(MASK), t(LABELS)
    flags = t(A > 1.0)
    cases = {}
    small = t(A / 3)  # in (0, 1): every unary op is defined there
    for n in UNARY:
        x = flags if n.startswith("logical") else small
        cases[n] = (lambda n=n, x=x: getattr(gt, n)(x), lambda n=n, x=x: getattr(gt, n)(x=x))
    for n in BINARY:
        cases[n] = (lambda n=n: getattr(gt, n)(a, b), lambda n=n: getattr(gt, n)(x=a, y=b))
    for n in ("logical_and", "logical_or", "logical_xor"):
        cases[n] = (lambda n=n: getattr(gt, n)(flags, ~flags), lambda n=n: getattr(gt, n)(x=flags, y=~flags))
    cases["logical_not"] = (lambda: gt.logical_not(flags), lambda: gt.logical_not(x=flags))
    for n in REDUCE:
        x = flags if n in ("all", "any") else a
        cases[n] = (lambda n=n, x=x: getattr(gt, n)(x, 1, True), lambda n=n, x=x: getattr(gt, n)(x=x, axis=1, keepdim=True))
    cases.update({
        "pow": (lambda: gt.pow(a, b), lambda: gt.pow(x=a, y=b)),
        "mod": (lambda: gt.mod(a, b), lambda: gt.mod(x=a, y=b)),
        "stanh": (lambda: gt.stanh(a, 0.5, 2.0), lambda: gt.stanh(x=a, scale_a=0.5, scale_b=2.0)),
        "scale": (lambda: gt.scale(a, 2.0, 1.0), lambda: gt.scale(x=a, scale=2.0, bias=1.0)),
        "increment": (lambda: gt.increment(a, 2.0), lambda: gt.increment(x=a, value=2.0)),
        "clip": (lambda: gt.clip(a, 0.8, 1.5), lambda: gt.clip(x=a, min=0.8, max=1.5)),
        "cast": (lambda: gt.cast(a, gt.float32), lambda: gt.cast(x=a, dtype=gt.float32)),
        "where": (lambda: gt.where(mask, a, b), lambda: gt.where(condition=mask, x=a, y=b)),
        "allclose": (lambda: gt.allclose(a, a + 1e-9, 1e-5, 1e-8), lambda: gt.allclose(x=a, y=a + 1e-9, rtol=1e-5,
                                                                                        atol=1e-8)),
        "equal_all": (lambda: gt.equal_all(a, b), lambda: gt.equal_all(x=a, y=b)),
        "add_n": (lambda: gt.add_n([a, b]), lambda: gt.add_n(inputs=[a, b])),
        "std": (lambda: gt.std(a, 0, False, True), lambda: gt.std(x=a, axis=0, unbiased=False, keepdim=True)),
        "var": (lambda: gt.var(a, 0, False, True), lambda: gt.var(x=a, axis=0, unbiased=False, keepdim=True)),
        "norm": (lambda: gt.norm(a, 1, 1, True), lambda: gt.norm(x=a, p=1, axis=1, keepdim=True)),
        "cumsum": (lambda: gt.cumsum(a, 1), lambda: gt.cumsum(x=a, axis=1)),
        "trace": (lambda: gt.trace(sq), lambda: gt.trace(x=sq)),
        "numel": (lambda: gt.numel(a), lambda: gt.numel(x=a)),
        "matmul": (lambda: gt.matmul(a, a.T), lambda: gt.matmul(x=a, y=a.T)),
        "mm": (lambda: gt.mm(a, a.T), lambda: gt.mm(input=a, mat2=a.T)),
        "bmm": (lambda: gt.bmm(a[None], a.T[None]), lambda: gt.bmm(x=a[None], y=a.T[None])),
        "mv": (lambda: gt.mv(a, v), lambda: gt.mv(x=a, vec=v)),
        "dot": (lambda: gt.dot(v, v), lambda: gt.dot(x=v, y=v)),
        "addmm": (lambda: gt.addmm(sq, sq, sq, beta=0.5, alpha=2.0),
                  lambda: gt.addmm(input=sq, x=sq, y=sq, beta=0.5, alpha=2.0)),
        "cross": (lambda: gt.cross(a, b, 1), lambda: gt.cross(x=a, y=b, axis=1)),
        "cholesky": (lambda: gt.cholesky(spd, False), lambda: gt.cholesky(x=spd, upper=False)),
        "inverse": (lambda: gt.inverse(sq), lambda: gt.inverse(x=sq)),
        "t": (lambda: gt.t(a), lambda: gt.t(input=a)),
        "full_like": (lambda: gt.full_like(a, 2.0), lambda: gt.full_like(x=a, fill_value=2.0)),
        "empty_like": (lambda: gt.empty_like(a).shape, lambda: gt.empty_like(x=a).shape),
        "ones_like": (lambda: gt.ones_like(a), lambda: gt.ones_like(x=a)),
        "zeros_like": (lambda: gt.zeros_like(a), lambda: gt.zeros_like(x=a)),
        "diag": (lambda: gt.diag(sq, 1), lambda: gt.diag(x=sq, offset=1)),
        "meshgrid": (lambda: gt.meshgrid(v, v), lambda: gt.meshgrid(v, v)),
        "tril": (lambda: gt.tril(sq, -1), lambda: gt.tril(x=sq, diagonal=-1)),
        "triu": (lambda: gt.triu(sq, 1), lambda: gt.triu(x=sq, diagonal=1)),
        "reshape": (lambda: gt.reshape(a, (3, 4)), lambda: gt.reshape(x=a, shape=[3, 4])),
        "reshape_": (lambda: gt.reshape_(a * 1, (3, 4)), lambda: gt.reshape_(x=a * 1, shape=[3, 4])),
        "flatten": (lambda: gt.flatten(a[None], 1, 2), lambda: gt.flatten(x=a[None], start_axis=1, stop_axis=2)),
        "squeeze": (lambda: gt.squeeze(a[None], 0), lambda: gt.squeeze(x=a[None], axis=0)),
        "squeeze_": (lambda: gt.squeeze_(a[None] * 1, 0), lambda: gt.squeeze_(x=a[None] * 1, axis=0)),
        "unsqueeze": (lambda: gt.unsqueeze(a, 1), lambda: gt.unsqueeze(x=a, axis=1)),
        "unsqueeze_": (lambda: gt.unsqueeze_(a * 1, 1), lambda: gt.unsqueeze_(x=a * 1, axis=1)),
        "transpose": (lambda: gt.transpose(a, 0, 1), lambda: gt.transpose(input=a, dim0=0, dim1=1)),
        "expand": (lambda: gt.expand(v, 2, 3), lambda: gt.expand(x=v, shape=[2, 3])),
        "expand_as": (lambda: gt.expand_as(v, a), lambda: gt.expand_as(x=v, y=a)),
        "broadcast_to": (lambda: gt.broadcast_to(v, (2, 3)), lambda: gt.broadcast_to(x=v, shape=[2, 3])),
        "tile": (lambda: gt.tile(a, (1, 2)), lambda: gt.tile(x=a, repeat_times=[1, 2])),
        "flip": (lambda: gt.flip(a, (0,)), lambda: gt.flip(x=a, axis=[0])),
        "roll": (lambda: gt.roll(a, 1, 0), lambda: gt.roll(x=a, shifts=1, axis=0)),
        "concat": (lambda: gt.concat([a, b], 1), lambda: gt.concat(x=[a, b], axis=1)),
        "stack": (lambda: gt.stack([a, b], 1), lambda: gt.stack(x=[a, b], axis=1)),
        # PyTorch's int is a piece size; Paddle's num_or_sections int is a number of pieces
        "split": (lambda: gt.split(a, 2, 0), lambda: gt.split(x=a, num_or_sections=2, axis=0)),
        "chunk": (lambda: gt.chunk(a, 2, 0), lambda: gt.chunk(x=a, chunks=2, axis=0)),
        "unbind": (lambda: gt.unbind(a, 1), lambda: gt.unbind(input=a, axis=1)),
        "unstack": (lambda: gt.unstack(a, 1), lambda: gt.unstack(x=a, axis=1)),
        "slice": (lambda: gt.slice(a, [0], [1], [3]), lambda: gt.slice(input=a, axes=[0], starts=[1], ends=[3])),
        "strided_slice": (lambda: gt.strided_slice(a, [0], [0], [4], [2]),
                          lambda: gt.strided_slice(x=a, axes=[0], starts=[0], ends=[4], strides=[2])),
        "gather": (lambda: gt.gather(a, 1, rows), lambda: gt.gather(x=a, axis=1, index=rows)),
        "gather_nd": (lambda: gt.gather_nd(a, rows[:, :2]), lambda: gt.gather_nd(x=a, index=rows[:, :2])),
        "index_select": (lambda: gt.index_select(a, 0, idx), lambda: gt.index_select(x=a, index=idx, axis=0)),
        "index_sample": (lambda: gt.index_sample(a, rows), lambda: gt.index_sample(x=a, index=rows)),
        "masked_select": (lambda: gt.masked_select(a, mask), lambda: gt.masked_select(x=a, mask=mask)),
        "nonzero": (lambda: gt.nonzero(mask), lambda: gt.nonzero(x=mask)),
        "scatter": (lambda: gt.scatter(a, 1, rows[:, :1], b), lambda: gt.scatter(x=a, axis=1, index=rows[:, :1],
                                                                                 src=b)),
        "scatter_": (lambda: gt.scatter_(a * 1, 1, rows[:, :1], b),
                     lambda: gt.scatter_(x=a * 1, axis=1, index=rows[:, :1], src=b)),
        "scatter_nd": (lambda: gt.scatter_nd(rows[:, :2], v[:1].expand(4), (4, 3)),
                       lambda: gt.scatter_nd(index=rows[:, :2], updates=v[:1].expand(4), shape=[4, 3])),
        "scatter_nd_add": (lambda: gt.scatter_nd_add(a, rows[:, :2], v[:1].expand(4)),
                           lambda: gt.scatter_nd_add(x=a, index=rows[:, :2], updates=v[:1].expand(4))),
        "shard_index": (lambda: gt.shard_index(rows, 3, 2, 1), lambda: gt.shard_index(input=rows, index_num=3,
                                                                                      nshards=2, shard_id=1)),
        "sort": (lambda: gt.sort(a, 0, True), lambda: gt.sort(x=a, axis=0, descending=True)),
        "argsort": (lambda: gt.argsort(a, 0, True), lambda: gt.argsort(x=a, axis=0, descending=True)),
        "topk": (lambda: gt.topk(a, 2, 0, False), lambda: gt.topk(x=a, k=2, axis=0, largest=False)),
        "unique": (lambda: gt.unique(rows), lambda: gt.unique(x=rows)),
        "histogram": (lambda: gt.histogram(a, 4, 0, 2), lambda: gt.histogram(input=a, bins=4, min=0, max=2)),
        "multiplex": (lambda: gt.multiplex([a, b], rows[:, :1] % 2), lambda: gt.multiplex(inputs=[a, b],
                                                                                          index=rows[:, :1] % 2)),
        "gelu": (lambda: gt.gelu(a, "tanh"), lambda: gt.gelu(x=a, approximate="tanh")),
        "softmax": (lambda: gt.softmax(a, 0), lambda: gt.softmax(x=a, axis=0)),
        "log_softmax": (lambda: gt.log_softmax(a, 0), lambda: gt.log_softmax(x=a, axis=0)),
        "dropout": (lambda: gt.dropout(a, 0.5, False), lambda: gt.dropout(x=a, p=0.5, training=False)),
        "layer_norm": (lambda: gt.layer_norm(a, [3], v, v, 1e-3),
                       lambda: gt.layer_norm(x=a, normalized_shape=[3], weight=v, bias=v, epsilon=1e-3)),
        "embedding": (lambda: gt.embedding(rows, sq), lambda: gt.embedding(x=rows, weight=sq)),
        "linear": (lambda: gt.linear(a, sq, v), lambda: gt.linear(x=a, weight=sq, bias=v)),
        "cross_entropy": (lambda: gt.cross_entropy(a, labels, None, None, -100, None, "sum"),
                          lambda: gt.cross_entropy(input=a, label=labels, reduction="sum")),
        "mse_loss": (lambda: gt.mse_loss(a, b, reduction="sum"), lambda: gt.mse_loss(input=a, label=b,
                                                                                   reduction="sum")),
    })
    return cases


FACTORIES = {  # name -> (PyTorch-positional call, Paddle-keyword call), given placement keywords
    "arange": (lambda **p: gt.arange(1, 7, 2, **p), lambda **p: gt.arange(start=1, end=7, step=2, **p)),
    "linspace": (lambda **p: gt.linspace(0, 1, 5, **p), lambda **p: gt.linspace(start=0, stop=1, num=5, **p)),
    "eye": (lambda **p: gt.eye(3, 4, **p), lambda **p: gt.eye(num_rows=3, num_columns=4, **p)),
    "full": (lambda **p: gt.full((2, 3), 1.5, **p), lambda **p: gt.full(shape=[2, 3], fill_value=1.5, **p)),
    "empty": (lambda **p: gt.empty(2, 3, **p).shape, lambda **p: gt.empty(shape=[2, 3], **p).shape),
    "ones": (lambda **p: gt.ones(2, 3, **p), lambda **p: gt.ones(shape=[2, 3], **p)),
    "zeros": (lambda **p: gt.zeros(2, 3, **p), lambda **p: gt.zeros(shape=[2, 3], **p)),
    "rand": (lambda **p: gt.rand(2, 3, **p), lambda **p: gt.rand(shape=[2, 3], **p)),
    "randn": (lambda **p: gt.randn(2, 3, **p), lambda **p: gt.randn(shape=[2, 3], **p)),
    "randint": (lambda **p: gt.randint(0, 5, (2, 3), **p), lambda **p: gt.randint(low=0, high=5, shape=[2, 3], **p)),
    "randperm": (lambda **p: gt.randperm(5, **p), lambda **p: gt.randperm(n=5, **p)),
    "normal": (lambda **p: gt.normal(0.0, 1.0, (2, 3), **p), lambda **p: gt.normal(mean=0.0, std=1.0, shape=[2, 3],
                                                                                 **p)),
    "uniform": (lambda **p: gt.uniform((2, 3), -1.0, 1.0, **p), lambda **p: gt.uniform(shape=[2, 3], min=-1.0,
                                                                                       max=1.0, **p)),
}
RANDOM_INPUT = {  # ops that draw: each call starts from the same seed
    "bernoulli": (lambda t: gt.bernoulli(t(A / 2)), lambda t: gt.bernoulli(x=t(A / 2))),
    "multinomial": (lambda t: gt.multinomial(t(A), 2, False), lambda t: gt.multinomial(x=t(A), num_samples=2,
                                                                                       replacement=False)),
}


def _plain(value):
    if isinstance(value, gt.Tensor):
        return value.numpy()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _check_both_ways(t, placement_kw):
    """Every case's two calls agree (numpy values); returns the names covered."""
    cases = _cases(t)
    for name, (torch_call, paddle_call) in cases.items():
        got, want = _plain(paddle_call()), _plain(torch_call())
        np.testing.assert_equal(got, want, err_msg=name)
    for table, arg in ((FACTORIES, placement_kw), (RANDOM_INPUT, t)):
        for name, (torch_call, paddle_call) in table.items():
            gt.manual_seed(3)
            want = _plain(torch_call(**arg) if table is FACTORIES else torch_call(arg))
            gt.manual_seed(3)
            got = _plain(paddle_call(**arg) if table is FACTORIES else paddle_call(arg))
            np.testing.assert_equal(got, want, err_msg=name)
    return set(cases) | set(FACTORIES) | set(RANDOM_INPUT)


def test_every_op_both_ways_on_local_tensors():
    covered = _check_both_ways(gt.tensor, {})
    names = _names("")
    if names is not None:
        assert not set(names) - covered, sorted(set(names) - covered)


def _both_ways_on_ranks():
    placement = gt.placement("cpu", [0, 1])
    rng = np.random.default_rng(9)

    def t(array):
        array = np.asarray(array)
        choices = [gt.sbp.broadcast] + [gt.sbp.split(d) for d in range(array.ndim)]
        return gt.tensor(array, placement=placement, sbp=choices[rng.integers(len(choices))])
    _check_both_ways(t, {"placement": placement, "sbp": gt.sbp.broadcast})
    return True


def test_every_op_both_ways_on_global_tensors():
    assert run_ranks(_both_ways_on_ranks, 2, timeout=300) == [True, True]


def test_pytorch_positional_orders_that_differ_from_paddle():
    x = gt.tensor(A)
    np.testing.assert_equal(gt.index_select(x, 0, gt.tensor(IDX)).numpy(), A[IDX])
    np.testing.assert_equal(x.index_select(1, gt.tensor([2, 0])).numpy(), A[:, [2, 0]])
    # split: an int is PyTorch's piece size (4 rows of 3 -> 3 + 1), Paddle's keyword a count
    assert [p.shape for p in gt.split(x, 3)] == [(3, 3), (1, 3)]
    assert [p.shape for p in x.split(3)] == [(3, 3), (1, 3)]
    assert [p.shape for p in gt.split(x, num_or_sections=2)] == [(2, 3), (2, 3)]
    assert [p.shape for p in gt.split(x, split_size_or_sections=[1, 3])] == [(1, 3), (3, 3)]
    with pytest.raises(ValueError, match="does not divide"):
        gt.split(x, num_or_sections=3)
    # where(condition) alone: the indices where it holds, one tensor per dim (nonzero(as_tuple=True))
    rows, cols = gt.where(gt.tensor(MASK))
    np.testing.assert_equal((rows.numpy(), cols.numpy()), np.nonzero(MASK))
    np.testing.assert_equal([i.numpy() for i in gt.nonzero(gt.tensor(MASK), as_tuple=True)], np.nonzero(MASK))


def test_the_ops_own_parameters_are_never_paddles_spellings():
    """Paddle's names reach an op only through registry/keywords.py's table, where the ops are exported:
    no op of the core names a parameter x, y, axis, label or epsilon itself."""
    from globaltensor import ops
    paddle_only = {"x", "y", "axis", "label", "epsilon"}
    found = {}
    for name in list(ops.PUBLIC) + list(ops.FACTORIES):
        fn = getattr(ops, name)
        params = set(inspect.signature(getattr(fn, "__wrapped__", fn)).parameters)
        if params & paddle_only:
            found[name] = sorted(params & paddle_only)
    assert not found, f"ops naming a parameter Paddle's way (use PyTorch's; keywords.py translates): {found}"


def test_one_name_given_twice_is_refused():
    x = gt.tensor(A)
    with pytest.raises(TypeError, match="axis.*dim|dim.*axis"):
        gt.sum(x, dim=0, axis=0)
    with pytest.raises(TypeError):
        gt.add(x, x, y=x)
    assert np.array_equal(gt.add(x, x, name="paddle_ignores_it").numpy(), 2 * A)  # Paddle's `name=`


def test_extra_keywords_of_pytorch():
    x = gt.tensor(A)
    assert gt.mean(x, 0, dtype=gt.float32).dtype == gt.float32
    assert gt.sum(gt.tensor(IDX), dtype=gt.float64).dtype == gt.float64
    assert gt.cumsum(gt.tensor(IDX), 0, dtype=gt.float32).dtype == gt.float32
    np.testing.assert_allclose(gt.var(x, 0, correction=0).numpy(), A.var(0))
    np.testing.assert_allclose(gt.std(x, 1, correction=2).numpy(), A.std(1, ddof=2))
    np.testing.assert_equal(gt.sort(x, 0, stable=True).values.numpy(), np.sort(A, 0))


def test_cross_entropy_weight_and_label_smoothing_and_legacy_reduction():
    x, labels = gt.tensor(A), gt.tensor(LABELS)
    w = np.array([0.5, 1.0, 2.0])
    logp = A - np.log(np.exp(A).sum(1, keepdims=True))
    picked = -logp[np.arange(4), LABELS] * w[LABELS]
    np.testing.assert_allclose(gt.cross_entropy(x, labels, gt.tensor(w)).numpy(), picked.sum() / w[LABELS].sum())
    np.testing.assert_allclose(gt.cross_entropy(x, labels, reduction="none", weight=gt.tensor(w)).numpy(), picked)
    eps = 0.2
    smooth = (1 - eps) * -logp[np.arange(4), LABELS] + eps * -logp.mean(1)
    np.testing.assert_allclose(gt.cross_entropy(x, labels, label_smoothing=eps).numpy(), smooth.mean())
    np.testing.assert_allclose(gt.cross_entropy(x, labels, size_average=False).numpy(),
                               -logp[np.arange(4), LABELS].sum())
    np.testing.assert_allclose(gt.mse_loss(x, gt.tensor(B), reduce=False).numpy(), (A - B) ** 2)


# --- against torch's documented signatures --------------------------------------------------------

TORCH_NAME = {"concat": "cat", "clip": "clip", "subtract": "sub", "multiply": "mul", "divide": "div",
              "greater_than": "gt", "less_than": "lt", "mod": "remainder"}
# where a name means something else in torch, or ours is a superset that torch's text cannot show
NOT_COMPARED = {
    "histogram": "Paddle's histogram(input, bins, min, max) is torch.histc; torch.histogram returns edges too",
    "scatter": "torch also has scatter(input, dim, index, value); ours takes src= or a scalar src",
    "unique": "compared by hand below: torch.unique's text is *args, **kwargs",
}


def _torch_overloads(name):
    """The positional parameter names of each documented overload of torch.NAME (or F.NAME)."""
    import torch
    fn = getattr(torch, TORCH_NAME.get(name, name), None) or getattr(torch.nn.functional, name, None)
    if fn is None:
        return None
    try:
        sig = inspect.signature(fn)
        return [[("*" if p.kind is p.VAR_POSITIONAL else "") + p.name for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]]
    except (TypeError, ValueError):
        pass
    overloads = []
    short = TORCH_NAME.get(name, name)
    for line in (fn.__doc__ or "").splitlines():
        m = re.match(rf"\s*(?:\.\. function:: )?{short}\((.*)\)$", re.sub(r"\s*->.*$", "", line.rstrip()))
        if not m:
            continue
        names = []
        for part in re.split(r",\s*(?![^\[\(]*[\]\)])", m.group(1).replace("\\*", "*")):
            part = part.strip()
            if part == "*":
                break
            names.append(re.split(r"[:=\s]", part)[0])
        overloads.append([n for n in names if n and n != "out"])
    return overloads or None


def _ours(fn):
    return [("*" if p.kind is p.VAR_POSITIONAL else "") + p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
            and p.name not in ("placement", "sbp")]


def _agrees(ours, theirs):
    """One is a prefix of the other: we may stop before torch's optional trailing parameters, or
    go on with our own (Paddle's) after them; the shared ones have torch's names, in its order.
    Our `*shape` also takes one sequence, so it stands for torch's `shape`."""
    n = min(len(ours), len(theirs))
    return [o.lstrip("*") for o in ours[:n]] == [t.lstrip("*") for t in theirs[:n]]  # *shape takes one sequence too (torch.reshape)


def test_parameter_names_and_order_agree_with_torch():
    pytest.importorskip("torch")
    names = _names("")
    if names is None:
        pytest.skip("ops-target.txt not beside the repository")
    compared, disagree = 0, {}
    for name in names:
        if name in NOT_COMPARED:
            continue
        overloads = _torch_overloads(name)
        if overloads is None:
            continue
        ours = _ours(getattr(gt, name))
        compared += 1
        if not any(_agrees(ours, theirs) for theirs in overloads):
            disagree[name] = (ours, overloads)
    print(f"\n{compared} ops of ops-target.txt compared with torch's signatures")
    assert compared > 100
    assert not disagree, disagree
    for name, keyword in (("unique", "return_inverse"), ("unique", "return_counts"), ("unique", "dim"),
                          ("nonzero", "as_tuple"), ("sort", "stable"), ("cumsum", "dtype"), ("var", "correction")):
        assert keyword in inspect.signature(getattr(gt, name)).parameters, (name, keyword)


def test_tensor_methods_take_both_spellings():
    x = gt.tensor(A)
    np.testing.assert_equal(x.sum(axis=1).numpy(), x.sum(dim=1).numpy())
    np.testing.assert_equal(x.index_select(0, gt.tensor(IDX)).numpy(), A[IDX])
    np.testing.assert_equal(x.max(axis=0, keepdim=True).values.numpy(), A.max(0, keepdims=True))
    np.testing.assert_equal(F.softmax(x, axis=0).numpy(), gt.softmax(x, 0).numpy())
