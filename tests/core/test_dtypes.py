"""Dtypes of factories and type promotion of binary ops, as PyTorch/OneFlow (SPEC section 3).

The expected dtypes come from the tables written below (so CI without torch still checks them);
where torch is installed (the `bench` extra), the tables and every op's result dtype are checked
against torch as well. Values are checked against numpy's computation in the promoted dtype.
Local and global (2 ranks) tensors alike.
"""
import importlib.util
import math

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks


class _LazyTorch:
    """torch, imported on first use: the ranks of the global test never import it (it is slow to
    import); None-like (false) where torch is not installed, so the tables still test."""

    def __bool__(self):
        return importlib.util.find_spec("torch") is not None

    def __getattr__(self, name):
        import torch as module
        return getattr(module, name)


torch = _LazyTorch()
needs_torch = pytest.mark.skipif(not torch, reason="torch is not installed (the bench extra)")

# --- the written tables (torch.result_type, default dtype float32) --------------------------------
DTYPES = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
SHORT = {"b": "bool", "i4": "int32", "i8": "int64", "f2": "float16", "bf": "bfloat16", "f4": "float32",
         "f8": "float64", "c8": "complex64", "c16": "complex128"}
COMPLEX = {"complex64", "complex128"}
# Where torch gives complex32 (float16 with a lower-priority complex operand) gt gives complex64: gt
# has no complex32 (architecture.md, Dtypes). (table, row dtype, column) of each such cell.
COMPLEX32 = {("DIM_ZERO", "float16", "complex64"), ("DIM_ZERO", "float16", "complex128"),
             ("SCALAR", "float16", "complex")}


def _table(text):
    rows = [line.split() for line in text.strip().splitlines()]
    return {a: {b: SHORT[cell] for b, cell in zip(DTYPES, row)} for a, row in zip(DTYPES, rows)}


# two tensors with dims (rows: the first operand's dtype, columns: the second's)
PROMOTE = _table("""
 b i4 i8 f2 bf f4 f8 c8 c16
i4 i4 i8 f2 bf f4 f8 c8 c16
i8 i8 i8 f2 bf f4 f8 c8 c16
f2 f2 f2 f2 f4 f4 f8 c8 c16
bf bf bf f4 bf f4 f8 c8 c16
f4 f4 f4 f4 f4 f4 f8 c8 c16
f8 f8 f8 f8 f8 f8 f8 c16 c16
c8 c8 c8 c8 c8 c8 c16 c8 c16
c16 c16 c16 c16 c16 c16 c16 c16 c16
""")
# a tensor with dims (rows) and a 0-d tensor (columns): the 0-d one widens only across categories
DIM_ZERO = _table("""
 b i4 i8 f2 bf f4 f8 c8 c16
i4 i4 i4 f2 bf f4 f8 c8 c16
i8 i8 i8 f2 bf f4 f8 c8 c16
f2 f2 f2 f2 f2 f2 f2 c8 c8
bf bf bf bf bf bf bf c8 c8
f4 f4 f4 f4 f4 f4 f4 c8 c8
f8 f8 f8 f8 f8 f8 f8 c16 c16
c8 c8 c8 c8 c8 c8 c8 c8 c8
c16 c16 c16 c16 c16 c16 c16 c16 c16
""")
# a tensor (rows) and a Python scalar (columns: bool, int, float): a scalar never widens a tensor
SCALAR_KINDS = {"bool": True, "int": 2, "float": 2.5, "complex": 2j}
SCALAR = {a: {k: SHORT[c] for k, c in zip(SCALAR_KINDS, row.split())} for a, row in zip(DTYPES, """
 b i8 f4 c8
i4 i4 f4 c8
i8 i8 f4 c8
f2 f2 f2 c8
bf bf bf c8
f4 f4 f4 c8
f8 f8 f8 c16
c8 c8 c8 c8
c16 c16 c16 c16
""".strip().splitlines())}

BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "pow", "maximum", "minimum",
          "equal", "not_equal", "greater_equal", "greater_than", "less_equal", "less_than",
          "logical_and", "logical_or", "logical_xor"]
BOOL_OUT = {"equal", "not_equal", "greater_equal", "greater_than", "less_equal", "less_than",
            "logical_and", "logical_or", "logical_xor"}
NO_BOOL = {"floor_divide", "mod", "pow"}  # two bool operands: PyTorch refuses (subtract: any bool operand)
# complex operands (after promotion): PyTorch refuses, complex numbers being unordered
REAL_ONLY = {"floor_divide", "mod", "maximum", "minimum", "greater_equal", "greater_than", "less_equal", "less_than"}
NUMPY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide,
         "floor_divide": np.floor_divide, "mod": np.mod, "pow": np.power, "maximum": np.maximum,
         "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal, "greater_equal": np.greater_equal,
         "greater_than": np.greater, "less_equal": np.less_equal, "less_than": np.less,
         "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
TORCH = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "floor_divide": "floor_divide",
         "mod": "remainder", "pow": "pow", "maximum": "maximum", "minimum": "minimum", "equal": "eq",
         "not_equal": "ne", "greater_equal": "ge", "greater_than": "gt", "less_equal": "le", "less_than": "lt",
         "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor"}
# Where we differ from torch on purpose: torch's pow(bool tensor, True) is bool while
# pow(bool tensor, bool tensor) and pow(True, bool tensor) raise; we refuse every bool ** bool.
DEVIATIONS = {("pow", ("dim", "bool"), ("scalar", "bool")), ("pow", ("zero", "bool"), ("scalar", "bool"))}


def promoted(a, b):
    """The written result type of two operands, each ("dim"|"zero", dtype) or ("scalar", kind)."""
    (ka, va), (kb, vb) = a, b
    if ka == "scalar" and kb == "scalar":
        raise ValueError("two scalars")
    if kb == "scalar":
        return SCALAR[va][vb]
    if ka == "scalar":
        return SCALAR[vb][va]
    if ka == kb:
        return PROMOTE[va][vb]
    return DIM_ZERO[va][vb] if ka == "dim" else DIM_ZERO[vb][va]


def expected(op, a, b):
    """(dtype the op computes in, dtype of its result); None for an op that must raise."""
    p = promoted(a, b)
    if (op in NO_BOOL and p == "bool") or (op == "subtract" and "bool" in (a[1], b[1])):
        return None
    if op in REAL_ONLY and p in COMPLEX:
        return None
    if op == "divide" and p in ("bool", "int32", "int64"):
        p = "float32"  # true division: the default float dtype
    return p, ("bool" if op in BOOL_OUT else p)


def cases():
    """Every pair of operand kinds: dims x dims, dims x 0-d, 0-d x dims, 0-d x 0-d, and a tensor
    with a Python scalar on either side."""
    out = []
    for da in DTYPES:
        for db in DTYPES:
            for ka, kb in (("dim", "dim"), ("dim", "zero"), ("zero", "dim"), ("zero", "zero")):
                out.append(((ka, da), (kb, db)))
        for kind in SCALAR_KINDS:
            for k in ("dim", "zero"):
                out.append(((k, da), ("scalar", kind)))
                out.append((("scalar", kind), (k, da)))
    return out


A_VALUES, B_VALUES = [1, 0, 3, 2], [2, 1, 1, 3]


def _numpy_operand(spec, values):
    kind, v = spec
    if kind == "scalar":
        return SCALAR_KINDS[v]
    arr = np.array(values, dtype=np.int64).astype(gt.dtype.to_dtype(v).np)  # bool: B_VALUES all True
    return arr if kind == "dim" else arr[3]


def _gt_operand(spec, values, placement=None):
    kind, v = spec
    if kind == "scalar":
        return SCALAR_KINDS[v]
    arr = np.asarray(_numpy_operand(spec, values))
    if placement is None:
        return gt.tensor(arr)
    sbp = gt.sbp.split(0) if arr.ndim else gt.sbp.broadcast
    return gt.tensor(arr, placement=placement, sbp=sbp)


def _reference(op, a, b, compute):
    """numpy's op on the operands converted to the dtype the op computes in."""
    dt = gt.dtype.to_dtype(compute).np
    with np.errstate(all="ignore"):
        return NUMPY[op](np.asarray(a, dt), np.asarray(b, dt))


def check_binary(op, a, b, placement=None):
    """One case: our op's dtype and values (local, or global on `placement`). Returns a message on
    failure, None when right."""
    x, y = _gt_operand(a, A_VALUES, placement), _gt_operand(b, B_VALUES, placement)
    want = expected(op, a, b)
    fn = getattr(gt, op)
    if want is None:
        try:
            fn(x, y)
        except TypeError:
            return None
        return f"{op}{a}{b}: expected a TypeError"
    compute, result = want
    with np.errstate(all="ignore"):
        out = fn(x, y)
    if out.dtype.name != result:
        return f"{op}{a}{b}: dtype {out.dtype.name}, expected {result}"
    ref = _reference(op, _numpy_operand(a, A_VALUES), _numpy_operand(b, B_VALUES), compute)
    got = out.numpy()
    if got.dtype != ref.dtype or got.shape != ref.shape or not np.array_equal(got, ref, equal_nan=ref.dtype.kind == "c"):
        return f"{op}{a}{b}: values {got!r}, numpy in {compute} gives {ref!r}"
    return None


@pytest.mark.parametrize("op", BINARY)
def test_binary_promotion_local(op):
    failures = [m for a, b in cases() if (m := check_binary(op, a, b))]
    assert not failures, "\n".join(failures[:20])


@needs_torch
def test_written_tables_match_torch():
    def result(x, y):
        return str(torch.result_type(x, y)).split(".")[1]

    def dim(n):
        return torch.ones(2, dtype=getattr(torch, n))

    def zero(n):
        return torch.ones((), dtype=getattr(torch, n))

    def ours(table, a, b, want):  # torch's complex32 is gt's complex64 (COMPLEX32)
        return "complex64" if (table, a, b) in COMPLEX32 else want

    for a in DTYPES:
        for b in DTYPES:
            assert result(dim(a), dim(b)) == PROMOTE[a][b]
            assert ours("DIM_ZERO", a, b, result(dim(a), zero(b))) == DIM_ZERO[a][b]
            assert result(zero(a), zero(b)) == PROMOTE[a][b]
        for kind, s in SCALAR_KINDS.items():
            assert ours("SCALAR", a, kind, result(dim(a), s)) == SCALAR[a][kind]
            assert ours("SCALAR", a, kind, result(zero(a), s)) == SCALAR[a][kind]


def _complex32(a, b):
    """Whether torch computes these operands in complex32 (a float16 operand of higher priority
    than a complex one), which gt has not (COMPLEX32)."""
    rank = {"dim": 2, "zero": 1, "scalar": 0}
    for (kf, vf), (kc, vc) in ((a, b), (b, a)):
        if vf == "float16" and (vc in COMPLEX or vc == "complex") and rank[kf] > rank[kc]:
            return True
    return False


def _torch_operand(spec):
    kind, v = spec
    if kind == "scalar":
        return SCALAR_KINDS[v]
    return torch.ones(2 if kind == "dim" else (), dtype=getattr(torch, v))


@needs_torch
@pytest.mark.parametrize("op", BINARY)
def test_binary_expectations_match_torch(op):
    """Each op's written expectation (dtype, or an error) is torch's, where torch's function takes
    the operands (its functional forms refuse some Python scalars; the tables cover those)."""
    bad = []
    for a, b in cases():
        if (op, a, b) in DEVIATIONS or _complex32(a, b):
            continue
        want = expected(op, a, b)
        x, y = _torch_operand(a), _torch_operand(b)
        if not isinstance(x, torch.Tensor):  # torch's reflected operators take a scalar on the left
            fn = {"add": lambda: y.__radd__(x), "subtract": lambda: y.__rsub__(x), "multiply": lambda: y.__rmul__(x),
                  "divide": lambda: y.__rtruediv__(x), "floor_divide": lambda: y.__rfloordiv__(x),
                  "mod": lambda: y.__rmod__(x), "pow": lambda: y.__rpow__(x)}.get(op)
            if fn is None:
                continue
        else:
            fn = (lambda f=getattr(torch, TORCH[op]): f(x, y))
        try:
            got = str(fn().dtype).split(".")[1]
        except TypeError:
            continue  # the functional form does not take a scalar there
        except RuntimeError:
            got = None
        if (None if want is None else want[1]) != got:
            bad.append(f"{op}{a}{b}: torch {got}, table {want}")
    assert not bad, "\n".join(bad[:20])


# --- factories ---------------------------------------------------------------------------------
DEFAULT = "default"  # the default float dtype
FACTORIES = [
    # (name, gt call, torch call or None, expected dtype)
    ("zeros", lambda: gt.zeros(2, 3), lambda: torch.zeros(2, 3), DEFAULT),
    ("ones", lambda: gt.ones(2, 2), lambda: torch.ones(2, 2), DEFAULT),
    ("empty", lambda: gt.empty(2), lambda: torch.empty(2), DEFAULT),
    ("eye", lambda: gt.eye(3), lambda: torch.eye(3), DEFAULT),
    ("rand", lambda: gt.rand(2), lambda: torch.rand(2), DEFAULT),
    ("randn", lambda: gt.randn(2), lambda: torch.randn(2), DEFAULT),
    ("normal", lambda: gt.normal(0.0, 1.0, (2,)), lambda: torch.normal(0.0, 1.0, (2,)), DEFAULT),
    ("uniform", lambda: gt.uniform((2,)), lambda: torch.empty(2).uniform_(), DEFAULT),
    ("linspace ints", lambda: gt.linspace(0, 4, 5), lambda: torch.linspace(0, 4, 5), DEFAULT),
    ("full float", lambda: gt.full((2,), 1.5), lambda: torch.full((2,), 1.5), DEFAULT),
    ("full int", lambda: gt.full((2,), 1), lambda: torch.full((2,), 1), "int64"),
    ("full bool", lambda: gt.full((2,), True), lambda: torch.full((2,), True), "bool"),
    ("full np.int32", lambda: gt.full((2,), np.int32(1)), lambda: torch.full((2,), np.int32(1)), "int64"),
    ("full np.float64", lambda: gt.full((2,), np.float64(1)), lambda: torch.full((2,), np.float64(1)), DEFAULT),
    ("tensor floats", lambda: gt.tensor([1.0, 2.0]), lambda: torch.tensor([1.0, 2.0]), DEFAULT),
    ("tensor mixed", lambda: gt.tensor([1, 2.5]), lambda: torch.tensor([1, 2.5]), DEFAULT),
    ("tensor float", lambda: gt.tensor(2.5), lambda: torch.tensor(2.5), DEFAULT),
    ("tensor empty", lambda: gt.tensor([]), lambda: torch.tensor([]), DEFAULT),
    ("tensor ints", lambda: gt.tensor([[1, 2]]), lambda: torch.tensor([[1, 2]]), "int64"),
    ("tensor bools", lambda: gt.tensor([True]), lambda: torch.tensor([True]), "bool"),
    ("tensor np.float64 array", lambda: gt.tensor(np.ones(2)), lambda: torch.tensor(np.ones(2)), "float64"),
    ("tensor np.float64 scalar", lambda: gt.tensor(np.float64(1)), lambda: torch.tensor(np.float64(1)), "float64"),
    ("tensor np.float64 list", lambda: gt.tensor([np.float64(1)]), lambda: torch.tensor([np.float64(1)]), "float64"),
    ("tensor np.int32 array", lambda: gt.tensor(np.ones(2, np.int32)), lambda: torch.tensor(np.ones(2, np.int32)),
     "int32"),
    ("tensor dtype=", lambda: gt.tensor([1], dtype=gt.float16), lambda: torch.tensor([1], dtype=torch.float16),
     "float16"),
    ("arange int", lambda: gt.arange(3), lambda: torch.arange(3), "int64"),
    ("arange ints", lambda: gt.arange(1, 7, 2), lambda: torch.arange(1, 7, 2), "int64"),
    ("arange float end", lambda: gt.arange(3.0), lambda: torch.arange(3.0), DEFAULT),
    ("arange float step", lambda: gt.arange(0, 3, 0.5), lambda: torch.arange(0, 3, 0.5), DEFAULT),
    ("randint", lambda: gt.randint(0, 5, (3,)), lambda: torch.randint(0, 5, (3,)), "int64"),
    ("randperm", lambda: gt.randperm(4), lambda: torch.randperm(4), "int64"),
    ("zeros dtype=", lambda: gt.zeros(2, dtype=gt.int32), lambda: torch.zeros(2, dtype=torch.int32), "int32"),
    ("ones dtype=", lambda: gt.ones(2, dtype="bool"), lambda: torch.ones(2, dtype=torch.bool), "bool"),
    ("zeros_like int32", lambda: gt.zeros_like(gt.tensor(np.ones(2, np.int32))),
     lambda: torch.zeros_like(torch.ones(2, dtype=torch.int32)), "int32"),
    ("ones_like bool", lambda: gt.ones_like(gt.tensor([True])), lambda: torch.ones_like(torch.tensor([True])), "bool"),
    ("full_like int64", lambda: gt.full_like(gt.arange(2), 2.5), lambda: torch.full_like(torch.arange(2), 2.5),
     "int64"),
    ("empty_like f16", lambda: gt.empty_like(gt.ones(2, dtype=gt.float16)),
     lambda: torch.empty_like(torch.ones(2, dtype=torch.float16)), "float16"),
    ("bernoulli", lambda: gt.bernoulli(gt.full((3,), 0.5)), lambda: torch.bernoulli(torch.full((3,), 0.5)), DEFAULT),
    ("multinomial", lambda: gt.multinomial(gt.ones(3), 2), lambda: torch.multinomial(torch.ones(3), 2), "int64"),
    ("diag int", lambda: gt.diag(gt.arange(3)), lambda: torch.diag(torch.arange(3)), "int64"),
    ("tril int", lambda: gt.tril(gt.tensor([[1, 2], [3, 4]])), lambda: torch.tril(torch.tensor([[1, 2], [3, 4]])),
     "int64"),
    ("triu f16", lambda: gt.triu(gt.ones(2, 2, dtype=gt.float16)),
     lambda: torch.triu(torch.ones(2, 2, dtype=torch.float16)), "float16"),
    ("meshgrid int", lambda: gt.meshgrid(gt.arange(2), gt.arange(3))[0],
     lambda: torch.meshgrid(torch.arange(2), torch.arange(3), indexing="ij")[0], "int64"),
]


@pytest.fixture
def default_float64():
    gt.set_default_dtype(gt.float64)
    yield
    gt.set_default_dtype(gt.float32)


@pytest.mark.parametrize("name,make,_torch,want", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factory_dtypes(name, make, _torch, want):
    assert gt.get_default_dtype() == gt.float32
    assert make().dtype.name == ("float32" if want == DEFAULT else want)


@pytest.mark.parametrize("name,make,_torch,want", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factory_dtypes_follow_set_default_dtype(name, make, _torch, want, default_float64):
    assert make().dtype.name == ("float64" if want == DEFAULT else want)


@needs_torch
@pytest.mark.parametrize("name,make,make_torch,want", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factory_table_matches_torch(name, make, make_torch, want):
    assert str(make_torch().dtype) == f"torch.{'float32' if want == DEFAULT else want}"


def test_everyday_promotions_give_pytorchs_dtypes():
    """Factories give float32; int tensors times a float give float32 (not float64); int times int
    stays int64; float32 + float64 widens."""
    assert gt.ones(2, 2).dtype == gt.float32 and gt.zeros(2, 2).dtype == gt.float32
    assert (gt.randn(3) + gt.arange(3)).dtype == gt.float32
    y = gt.arange(3) * 2.5
    assert y.dtype == gt.float32
    np.testing.assert_array_equal(y.numpy(), np.arange(3, dtype=np.float32) * np.float32(2.5))
    assert (gt.ones(2) * 2.0).dtype == gt.float32
    assert (gt.arange(3) * 2).dtype == gt.int64
    assert (gt.ones(2) + gt.ones(2, dtype=gt.float64)).dtype == gt.float64


def test_reductions_of_integers_and_bools_give_the_default_float(default_float64):
    """mean/var/std/logsumexp of integer or bool tensors compute in the default float dtype
    (PyTorch: logsumexp of bool and integers gives float; mean raises, see architecture.md)."""
    for data in ([True, False, True], [1, 2, 4]):
        x = gt.tensor(data)
        for fn in (gt.mean, gt.var, gt.std, lambda t: gt.logsumexp(t, 0)):
            assert fn(x).dtype == gt.float64, (data, fn)
    np.testing.assert_allclose(gt.logsumexp(gt.tensor([True, False]), 0).numpy(), np.log(np.e + 1))


def test_default_dtype_drives_python_floats(default_float64):
    assert (gt.arange(3) * 2.5).dtype == gt.float64  # an integer tensor with a float: the default
    assert (gt.ones(2, dtype=gt.float32) * 2.5).dtype == gt.float32  # a scalar never widens
    assert (gt.arange(3) / gt.arange(1, 4)).dtype == gt.float64
    assert gt.sqrt(gt.arange(3)).dtype == gt.float64
    assert (gt.ones(2, dtype=gt.float16) * 2.5).dtype == gt.float16


# --- unary ops ---------------------------------------------------------------------------------
FLOAT_UNARY = ["acos", "asin", "atan", "cos", "cosh", "erf", "exp", "log", "log10", "log1p", "log2", "reciprocal",
               "rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh"]
KEEP_UNARY = ["abs", "ceil", "floor", "round", "neg", "relu", "sign", "square"]
BOOL_UNARY = ["isfinite", "isinf", "isnan", "logical_not"]


def unary_expected(op, dt):
    """The written rule: float-producing ops give the default dtype on integers and bool; the
    others keep the dtype (bool: sign keeps it, square gives int64, the rest raise). Complex: abs
    gives the real dtype; the ops of unordered values and erf raise."""
    if op in BOOL_UNARY:
        return "bool"
    if dt in COMPLEX:
        if op in ("erf", "ceil", "floor", "round", "relu", "sign"):
            return None
        return {"complex64": "float32", "complex128": "float64"}[dt] if op == "abs" else dt
    if op in FLOAT_UNARY:
        return dt if dt in ("float16", "bfloat16", "float32", "float64") else "float32"
    if dt == "bool":
        return {"sign": "bool", "square": "int64"}.get(op)
    return dt


@pytest.mark.parametrize("op", FLOAT_UNARY + KEEP_UNARY + BOOL_UNARY)
def test_unary_dtypes(op, recwarn):
    for dt in DTYPES:
        values = np.array([1, 2, 3]).astype(gt.dtype.to_dtype(dt).np)
        want = unary_expected(op, dt)
        if want is None:
            with pytest.raises(TypeError):
                getattr(gt, op)(gt.tensor(values))
            continue
        out = getattr(gt, op)(gt.tensor(values))
        assert out.dtype.name == want, (op, dt)
        if op in FLOAT_UNARY and dt in ("bool", "int32", "int64"):  # numpy's op on the float32 values
            from globaltensor.ops.elementwise import UNARY
            with np.errstate(all="ignore"):
                ref = np.asarray(UNARY[op][0](values.astype(np.float32)))
            np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
        if torch:
            try:
                t = str(getattr(torch, op)(torch.tensor(values.astype(np.float32)).to(getattr(torch, dt))).dtype)
            except RuntimeError:
                t = None
            assert (None if t is None else t.split(".")[1]) == want, (op, dt, t)


def test_where_and_clip_promote():
    c = gt.tensor([True, False])
    assert gt.where(c, gt.tensor([1, 2]), 0.5).dtype == gt.float32
    assert gt.where(c, gt.tensor([1, 2]), 0).dtype == gt.int64
    assert gt.where(c, gt.tensor([1, 2], dtype=gt.int32), gt.tensor([1.0, 2.0], dtype=gt.float16)).dtype == gt.float16
    np.testing.assert_array_equal(gt.where(c, gt.tensor([1, 2]), 0.5).numpy(), np.array([1, 0.5], np.float32))
    assert gt.where(c, 1.0, 0.0).dtype == gt.float32
    assert gt.clip(gt.tensor([1, 2]), 0.5).dtype == gt.float32
    assert gt.clip(gt.tensor([1, 2]), 1).dtype == gt.int64
    assert gt.add_n([gt.ones(2, dtype=gt.int32), gt.ones(2, dtype=gt.float16), gt.ones(2)]).dtype == gt.float32
    assert bool(gt.allclose(gt.tensor([1, 2]), gt.tensor([1.0, 2.0]))) is True


# --- the cost and autograd of promotion --------------------------------------------------------
def _count_casts(monkeypatch):
    from globaltensor.ops import _front
    calls = []
    real = _front.apply

    def counting(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(_front, "apply", counting)
    return calls


def test_same_dtype_pays_no_cast(monkeypatch):
    a, b = gt.ones(2), gt.ones(2)
    calls = _count_casts(monkeypatch)
    a + b, a * b, a / b, a < b, a * 2.0, a * 2
    assert calls.count("cast") == 0
    a + gt.ones(2, dtype=gt.float16)
    assert calls.count("cast") == 1  # only the float16 input is cast
    gt.arange(3) * 2.5
    assert calls.count("cast") == 2


def test_gradients_come_back_in_each_input_dtype():
    h = gt.tensor([1.0, 2.0], dtype=gt.float16, requires_grad=True)
    f = gt.tensor([3.0, 4.0], requires_grad=True)
    d = gt.tensor([5.0, 6.0], dtype=gt.float64, requires_grad=True)
    y = h * f + d
    assert y.dtype == gt.float64
    y.sum().backward()
    assert h.grad.dtype == gt.float16 and f.grad.dtype == gt.float32 and d.grad.dtype == gt.float64
    np.testing.assert_array_equal(h.grad.numpy(), np.array([3, 4], np.float16))
    np.testing.assert_array_equal(f.grad.numpy(), np.array([1, 2], np.float32))
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    (w * gt.arange(2)).sum().backward()  # an integer operand: cast to float32, no gradient of its own
    assert w.grad.dtype == gt.float32
    np.testing.assert_array_equal(w.grad.numpy(), np.array([0, 1], np.float32))


# --- global tensors (2 ranks) ------------------------------------------------------------------
GLOBAL_PAIRS = [(("dim", "int32"), ("dim", "int64")), (("dim", "int64"), ("dim", "float16")),
                (("dim", "bool"), ("dim", "int32")), (("dim", "float16"), ("dim", "bfloat16")),
                (("dim", "float32"), ("dim", "float64")), (("dim", "int32"), ("zero", "int64")),
                (("dim", "float16"), ("zero", "float64")), (("zero", "float64"), ("dim", "int32")),
                (("dim", "int64"), ("scalar", "float")), (("scalar", "float"), ("dim", "int32")),
                (("dim", "float16"), ("scalar", "int")), (("dim", "bool"), ("scalar", "int")),
                (("dim", "bool"), ("dim", "bool")), (("dim", "bfloat16"), ("scalar", "float"))]
GLOBAL_OPS = ["add", "subtract", "divide", "floor_divide", "pow", "maximum", "less_than", "logical_xor"]


def _global_worker():
    pl = gt.placement("cpu", [0, 1])
    failures = [m for op in GLOBAL_OPS for a, b in GLOBAL_PAIRS if (m := check_binary(op, a, b, pl))]
    B, S0 = gt.sbp.broadcast, gt.sbp.split(0)
    made = {
        "zeros": gt.zeros(4, placement=pl, sbp=S0), "ones": gt.ones(4, placement=pl, sbp=B),
        "rand": gt.rand(4, placement=pl, sbp=S0), "eye": gt.eye(2, placement=pl, sbp=S0),
        "arange": gt.arange(4, placement=pl, sbp=S0), "arange float": gt.arange(0, 2, 0.5, placement=pl, sbp=S0),
        "full int": gt.full((4,), 2, placement=pl, sbp=S0), "tensor floats": gt.tensor([1.5, 2], placement=pl, sbp=S0),
    }
    want = {"arange": "int64", "full int": "int64"}
    failures += [f"global {k}: {t.dtype.name}" for k, t in made.items() if t.dtype.name != want.get(k, "float32")]
    i = made["arange"]
    for label, out, ref in [("sqrt", gt.sqrt(i), np.sqrt(np.arange(4, dtype=np.float32))),
                            ("where", gt.where(i > 1, i, 0.5), np.where(np.arange(4) > 1, np.arange(4), 0.5)
                             .astype(np.float32)),
                            ("clip", gt.clip(i, 0.5), np.clip(np.arange(4, dtype=np.float32), 0.5, None))]:
        if out.dtype != gt.float32 or not np.array_equal(out.numpy(), ref):
            failures.append(f"global {label}: {out.dtype} {out.numpy()}")
    # gradients of a global mixed-dtype product come back in each input's dtype
    h = gt.tensor([1.0, 2.0], dtype=gt.float16, placement=pl, sbp=S0, requires_grad=True)
    f = gt.tensor([3.0, 4.0], placement=pl, sbp=B, requires_grad=True)
    (h * f * 2).sum().backward()
    if h.grad.dtype != gt.float16 or f.grad.dtype != gt.float32:
        failures.append(f"global grads {h.grad.dtype} {f.grad.dtype}")
    if not np.array_equal(h.grad.numpy(), np.array([6, 8], np.float16)):
        failures.append(f"global grad values {h.grad.numpy()}")
    return failures


def test_global_promotion_and_factories():
    results = run_ranks(_global_worker, 2)
    assert results[0] == results[1]
    assert not results[0], "\n".join(results[0][:20])


def test_result_type_helper():
    from globaltensor.dtype import result_type
    assert result_type(gt.ones(2, dtype=gt.int32), gt.tensor(np.int64(1))) == gt.int32
    assert result_type(gt.ones(2, dtype=gt.int32), 2.5) == gt.float32
    assert result_type(gt.float16, gt.bfloat16) == gt.float32
    assert result_type(gt.tensor(True), 1) == gt.int64
    assert math.isclose(float((gt.arange(3) * 2.5).numpy()[2]), 5.0)


@pytest.mark.parametrize("name", ["int8", "uint8", "int32", "int64", "bool", "float32", "float64"])
def test_randint_takes_every_dtype_pytorch_takes(name):
    """As torch.randint(..., dtype=): the values are int64's draw (the same for every dtype), cast."""
    high = 2 if name == "bool" else 7
    gt.manual_seed(5)
    want = gt.randint(0, high, (3, 4)).numpy()
    gt.manual_seed(5)
    got = gt.randint(0, high, (3, 4), dtype=getattr(gt, name))
    assert got.dtype == getattr(gt, name) and got.shape == (3, 4)
    np.testing.assert_array_equal(got.numpy().astype(np.int64), want)
    torch = pytest.importorskip("torch")
    assert torch.randint(0, high, (3, 4), dtype=getattr(torch, name)).dtype == getattr(torch, name)
    if name in ("int8", "uint8", "bool"):  # a range the dtype cannot hold is refused, not wrapped
        with pytest.raises(ValueError, match="does not fit"):
            gt.randint(0, 3 if name == "bool" else 300, (2,), dtype=getattr(gt, name))
