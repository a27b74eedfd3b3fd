"""The everyday PyTorch names (ops.EVERYDAY: sub, mul, narrow, movedim, ...) beside ops-target.txt's: each
has torch's positional parameter names, which of them are required, and torch's defaults, read from
torch's own signature or its native schemas (the names its Python binding takes); its Tensor method
where torch.Tensor has one; never a Paddle spelling of its own."""
import inspect

import pytest

import globaltensor as gt
from globaltensor import ops

torch = pytest.importorskip("torch")

# torch's schema names these after the overload (sections / indices / tensor_indices_or_sections); its
# documentation, and our one function taking both kinds, say indices_or_sections
DOCUMENTED = {"tensor_split", "hsplit", "vsplit", "dsplit",
              "einsum",  # torch's Python signature is einsum(*args); its documentation says (equation, *operands)
              "randint_like"}  # torch's overloads (input, high) and (input, low, high) are one (input, low, high=None)
REQUIRED = object()


def _torch_overloads(name):
    """[[(name, default or REQUIRED)] of the positional parameters] per overload of torch.NAME."""
    fn = getattr(torch, name)
    try:
        params = inspect.signature(fn).parameters.values()
        return [[(p.name, REQUIRED if p.default is p.empty else p.default) for p in params
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]]
    except (TypeError, ValueError):
        pass
    overloads = []
    for schema in torch._C._jit_get_schemas_for_operator("aten::" + name):
        if schema.overload_name.endswith("out"):
            continue
        overloads.append([("input" if a.name == "self" else a.name, a.default_value if a.has_default_value() else REQUIRED)
                          for a in schema.arguments if not a.kwarg_only])
    return overloads


def _ours(fn):
    return [(p.name, REQUIRED if p.default is p.empty else p.default) for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]


def _same_default(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a is b or (a is not REQUIRED and b is not REQUIRED and a == b)


def _agrees(ours, theirs, name):
    """The shared prefix has torch's names, torch's required parameters are ours, and a default we give
    is torch's (we may stop before torch's optional trailing parameters)."""
    n = min(len(ours), len(theirs))
    names_ok = [o for o, _ in ours[:n]] == [t for t, _ in theirs[:n]] or name in DOCUMENTED
    return names_ok and all(_same_default(a, b) for (_, a), (_, b) in zip(ours[:n], theirs[:n])) \
        and all(d is not REQUIRED for _, d in theirs[n:])


def test_everyday_names_agree_with_torch():
    disagree, compared = {}, 0
    for name in ops.EVERYDAY:
        overloads = _torch_overloads(name)
        assert overloads, f"torch has no {name}: EVERYDAY is for PyTorch's names"
        compared += 1
        ours = _ours(getattr(gt, name))
        if not any(_agrees(ours, theirs, name) for theirs in overloads):
            disagree[name] = (ours, overloads)
    assert compared == len(ops.EVERYDAY) > 100
    assert not disagree, disagree


def test_everyday_names_are_exported_and_methods_where_torch_has_them():
    from targets import op_names
    assert not set(ops.EVERYDAY) & set(op_names())  # beyond ops-target.txt, checked here instead
    for name in ops.EVERYDAY:
        assert getattr(gt, name) is getattr(ops, name) and name in gt.__all__, name
        assert hasattr(gt.Tensor, name) == hasattr(torch.Tensor, name), name


def test_everyday_parameters_are_never_paddles_spellings():
    paddle_only = {"x", "y", "axis", "label", "epsilon"}
    found = {name: sorted(set(inspect.signature(getattr(ops, name).__wrapped__).parameters) & paddle_only)
             for name in ops.EVERYDAY if hasattr(getattr(ops, name), "__wrapped__")}
    assert not {k: v for k, v in found.items() if v}, found


def test_fixed_mismatches_behave():
    x = gt.arange(6.0).reshape(2, 3)
    assert gt.swapaxes(x, axis0=0, axis1=1).shape == gt.swapdims(x, dim0=0, dim1=1).shape == (3, 2)
    with pytest.raises(TypeError):
        gt.swapaxes(x)  # no defaults, as torch
    nan = gt.tensor([float("nan"), 1.0])
    assert gt.nan_to_num(nan).tolist() == torch.nan_to_num(torch.tensor([float("nan"), 1.0])).tolist()
