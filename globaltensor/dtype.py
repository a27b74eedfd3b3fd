"""Tensor element types: gt.float32 and friends, each backed by a numpy dtype."""
import builtins

import ml_dtypes
import numpy as np

from . import _native


class DType:
    """An element type; `np` is its numpy dtype. Compares equal to that numpy dtype too.

    `code` is its _native.DType: kernels/types.h numbers the dtypes once, for the kernels and for
    every code that travels between ranks (int(code)); `from_code` reads one back."""

    __slots__ = ("name", "np", "is_floating", "is_complex", "code")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating = self.np.kind == "f" or name == "bfloat16"
        self.is_complex = self.np.kind == "c"
        self.code = _native.DType.__members__[name]

    def to_real(self):
        """The real dtype of a complex one (complex64 -> float32); other dtypes: themselves."""
        return _TO_REAL.get(self.name, self)

    def to_complex(self):
        """The complex dtype with this real part (float32 -> complex64; float64 -> complex128)."""
        found = _TO_COMPLEX.get(self.name)
        if found is None:
            raise TypeError(f"no complex dtype has {self!r} parts; complex64 has float32, complex128 float64")
        return found

    @property
    def itemsize(self):
        return self.np.itemsize

    def __repr__(self):
        return f"gt.{self.name}"

    def __eq__(self, other):
        if isinstance(other, DType):
            return other.np == self.np
        try:
            return np.dtype(other) == self.np
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.np)


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool = DType("bool", np.bool_)  # noqa: A001 - the public name is gt.bool
int8 = DType("int8", np.int8)
uint8 = DType("uint8", np.uint8)
complex64 = DType("complex64", np.complex64)
complex128 = DType("complex128", np.complex128)
_TO_REAL = {"complex64": float32, "complex128": float64}
_TO_COMPLEX = {"float32": complex64, "float64": complex128, "complex64": complex64, "complex128": complex128}

ALL = (float32, float64, float16, bfloat16, int32, int64, bool, int8, uint8, complex64, complex128)
_BY_NP = {d.np: d for d in ALL}
_BY_CODE = {int(d.code): d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(float="float32", double="float64", half="float16", long="int64", int="int32", cfloat="complex64",
                cdouble="complex128")


_default = [float32]  # what factories without dtype= make from float (or no) data


def get_default_dtype():
    """The floating dtype of factories without dtype= (gt.float32 unless set_default_dtype)."""
    return _default[0]


def set_default_dtype(dtype):
    """Make `dtype` (a floating dtype) the default of factories and of Python floats."""
    dt = to_dtype(dtype)
    if not dt.is_floating:
        raise TypeError(f"the default dtype must be a floating dtype, got {dt!r}")
    _default[0] = dt


def to_dtype(value, default=None):
    """A DType from a DType, numpy dtype/type, or name; TypeError for anything else."""
    if value is None:
        return default
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        found = _BY_NAME[value]
        return _BY_NAME[found] if isinstance(found, str) else found
    try:
        found = _BY_NP.get(np.dtype(value))
    except TypeError:
        found = None
    if found is None:
        raise TypeError(f"unsupported dtype {value!r}; supported: {', '.join(d.name for d in ALL)}")
    return found


def of_array(array):
    """The DType of a numpy array (float64 data stays float64)."""
    found = _BY_NP.get(array.dtype)  # the common case: one lookup (every local op's output)
    return found if found is not None else to_dtype(array.dtype)


def from_code(code):
    """The DType of a _native.DType code (an int as sent between ranks, or the enum member)."""
    found = _BY_CODE.get(int(code))
    if found is None:
        raise ValueError(f"no dtype has the code {int(code)}; the codes: {sorted(_BY_CODE)}")
    return found


# --- type promotion (PyTorch's torch.result_type) ------------------------------------------------
#
# Categories: bool < integer < floating < complex. Two tensors of one category give the wider dtype
# (float16 with bfloat16 gives float32; uint8 with int8 gives int32, PyTorch's int16 not being a
# gt dtype). Operands come in three priorities: tensors with dims, 0-d tensors, Python (and numpy)
# scalars. A lower-priority operand changes the result only when its category is higher than the
# category of the higher-priority ones: `i32 + 0-d i64 -> i32`, `f16 + 0-d f64 -> f16`,
# `f32 * 2.5 -> f32`, `i64 * 2.5 -> the default float`, `i32 + 0-d f64 -> f64`, `bool + 1 -> i64`.
# A Python float counts as the default dtype, a Python int as int64, a Python bool as bool.
# Complex with floating takes the wider parts (complex64 + float64 -> complex128); a complex operand
# of lower priority next to a float tensor gives that float's complex dtype (f32 * 1j -> complex64,
# f64 * 1j -> complex128; float16 and bfloat16 give complex64, gt having no complex32).

DIM, ZERO, SCALAR = 2, 1, 0  # operand priorities: a tensor with dims, a 0-d tensor, a scalar


def category(dt):
    """0 for bool, 1 for the integers, 2 for the floating dtypes, 3 for the complex ones."""
    return 2 if dt.is_floating else (3 if dt.is_complex else (0 if dt.np.kind == "b" else 1))


_pairs = {}


def promote_types(a, b):
    """The dtype two tensors of dtypes a and b combine to (torch.promote_types)."""
    key = (a.name, b.name)
    found = _pairs.get(key)
    if found is None:
        found = _pairs[key] = _promote(to_dtype(a), to_dtype(b))
    return found


def _promote(a, b):
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if max(ca, cb) == 3 and min(ca, cb) == 2:  # complex64 with float64: complex128 (the wider parts)
        c, f = (a, b) if ca == 3 else (b, a)
        return _promote(c.to_real(), f).to_complex()
    if ca != cb:
        return a if ca > cb else b
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return float32
    if ca == 1 and a.np.kind != b.np.kind:  # uint8 with a signed type: one that holds both
        signed = a if a.np.kind == "i" else b
        return signed if signed.itemsize > 1 else int32
    return a if a.itemsize >= b.itemsize else b


def _combine(higher, lower):
    """PyTorch's combine_categories: the higher-priority result, unless the lower-priority one
    is of a higher category (or the higher one is bool)."""
    if higher is None:
        return lower
    if lower is None or higher.is_complex:
        return higher
    if lower.is_complex:  # a float tensor keeps its precision (f64 * 1j -> complex128), others take lower's
        return _complex_of(higher) if higher.is_floating else lower
    if higher.is_floating:
        return higher
    if higher.np.kind == "b" or lower.is_floating:
        return promote_types(higher, lower)
    return higher


def combine(operands):
    """The result dtype of (DType, priority) operands (priorities DIM, ZERO, SCALAR)."""
    best = [None, None, None]
    for dt, prio in operands:
        best[prio] = dt if best[prio] is None else promote_types(best[prio], dt)
    return _combine(best[DIM], _combine(best[ZERO], best[SCALAR]))


def _complex_of(dt):
    """PyTorch's toComplexType, float16/bfloat16 going to complex64 (gt has no complex32)."""
    return complex128 if dt is float64 else complex64


def scalar_dtype(value):
    """The dtype a Python or numpy scalar counts as in promotion (None: not a scalar); a Python
    complex counts as the default dtype's complex one (complex64 by default)."""
    if isinstance(value, (builtins.bool, np.bool_)):
        return bool
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return _default[0]
    if isinstance(value, (complex, np.complexfloating)):
        return _complex_of(_default[0])
    return None


def result_type(*operands):
    """torch.result_type over tensors, Python/numpy scalars and DTypes (taken as tensors with dims)."""
    found = []
    for v in operands:
        if isinstance(v, DType):
            found.append((v, DIM))
            continue
        dt = scalar_dtype(v)
        if dt is not None:
            found.append((dt, SCALAR))
        elif hasattr(v, "dtype") and hasattr(v, "shape"):
            found.append((to_dtype(v.dtype), DIM if len(v.shape) else ZERO))
        else:
            raise TypeError(f"result_type takes tensors, scalars and dtypes, not {type(v).__name__}")
    if not found:
        raise TypeError("result_type needs at least one operand")
    return combine(found)
